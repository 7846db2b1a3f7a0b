//! The names the inventory accepts: login names (a user must never be an option to `ssh`),
//! addresses, and group or connection-point names.

use crate::error::excerpt;

use super::model::Host;

/// A POSIX portable login name (`[A-Za-z_][A-Za-z0-9._-]*`, at most 32 characters, as
/// `useradd` accepts): never empty, never an option (`-oProxyCommand=…`), no `@`, `:`,
/// whitespace or control characters. OpenSSH would pass a leading `-` to its own argv; we refuse
/// such names wherever they come from (inventory, `defaults:`, ssh config, a `jump:` hop).
pub fn check_user(user: &str) -> std::result::Result<(), String> {
    let mut b = user.bytes();
    let first_ok = b.next().is_some_and(|c| c.is_ascii_alphabetic() || c == b'_');
    let rest_ok = b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if first_ok && rest_ok && user.len() <= 32 {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a login name: letters, digits, '.', '_', '-', starting with a letter or '_', at most 32",
            excerpt(user)
        ))
    }
}

/// Every login of a resolved host: its user and each jump hop's.
pub(super) fn check_logins(h: &Host) -> std::result::Result<(), (String, String)> {
    check_user(&h.user).map_err(|m| ("user".to_string(), m))?;
    for (i, j) in h.jump.iter().enumerate() {
        check_user(&j.user).map_err(|m| (format!("jump[{i}]"), m))?;
    }
    Ok(())
}

/// A group or connection-point name: letters, digits, `_`, `-`, `.` (VNFD ids are such).
pub(super) fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!("'{}': names are 1..253 letters, digits, '_', '-', '.'", excerpt(name)))
    }
}

/// An address is an IP literal or a DNS name; nothing else may reach a socket or a shell.
pub fn validate_addr(addr: &str) -> std::result::Result<(), String> {
    if addr.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let ok = !addr.is_empty()
        && addr.len() <= 253
        && addr.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
        && !addr.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!("'{addr}' is not an IP address or host name"))
    }
}
