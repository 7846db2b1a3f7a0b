//! Package mode: an inventory that is a file of a VNF package, named by a hook's request
//! (`additionalParams.mgmt_driver.inventory`). The request is a tenant's and the file a
//! vendor's, so such an inventory lists nodes only: their names, addresses and ports (and the
//! groups, `cps` and `placement` that arrange them). Every other host field would hand the
//! tenant one of the operator's powers: a file of the conductor (`password_file`,
//! `identity_file`, `known_hosts`), its environment (`*_env`), a weaker host-key check, a jump
//! through the conductor's keys or ssh-agent. Each is refused naming the field; the logins
//! are the request's username and password (`credentials_from_request`: the hook replaces a
//! host without credentials by them), host keys are learned into the operator's known_hosts,
//! and no OpenSSH client configuration is read.

use crate::error::{Error, Result};

use super::model::{HostKeyCheck, HostSpec, InventoryFile, LoadOptions, SshConfigSource};

/// The one place package mode is enforced, called by `Inventory::parse` before anything is
/// resolved: in package mode, refuse every field but the node's own in `defaults` and in each
/// host, give the defaults the operator's known_hosts (accept-new), and return the options the
/// rest of the load runs with (no ssh config, credentials from the request, no insecure
/// host-key check). Otherwise the options as they are.
pub(super) fn restrict(raw: &mut InventoryFile, opts: &LoadOptions, file: &str) -> Result<LoadOptions> {
    let Some(mode) = &opts.package else { return Ok(opts.clone()) };
    let refuse = |at: String, key: &str| {
        Error::input(
            file,
            format!("{at}.{key}"),
            "is not allowed in an inventory of the VNF package (the request's additionalParams.mgmt_driver.inventory): \
             it lists nodes only (name, ssh_ip, nic_ip, port); the login is the request's username and password, \
             host keys go to the operator's known_hosts. An operator's inventory is a flag (-i) or the hook \
             document's options.inventory",
        )
    };
    if let Some(key) = operator_field(&raw.defaults) {
        return Err(refuse("defaults".into(), key));
    }
    for (group, entries) in &raw.groups.0 {
        for (i, entry) in entries.iter().enumerate() {
            if let Some(key) = operator_field(entry) {
                return Err(refuse(format!("groups.{group}[{i}]"), key));
            }
        }
    }
    // Absolute: a relative path would be taken as the package's.
    let known_hosts = std::path::absolute(&mode.known_hosts).unwrap_or_else(|_| mode.known_hosts.clone());
    raw.defaults.known_hosts = Some(known_hosts.display().to_string());
    raw.defaults.host_key_check = Some(HostKeyCheck::AcceptNew);
    Ok(LoadOptions {
        allow_insecure: false,
        credentials_from_request: true,
        ssh_config: SshConfigSource::None,
        package: opts.package.clone(),
        default_known_hosts: None,
    })
}

/// The first field of `s` a package inventory may not set. The destructuring names every field
/// of [`HostSpec`], so a new one does not compile until it is sorted here.
fn operator_field(s: &HostSpec) -> Option<&'static str> {
    let HostSpec {
        name: _,
        ssh_ip: _,
        nic_ip: _,
        port: _,
        user,
        password,
        password_env,
        password_file,
        identity_file,
        identity_passphrase_env,
        identity_passphrase_file,
        known_hosts,
        host_key_check,
        jump,
        become_password,
        become_password_env,
        become_password_file,
    } = s;
    [
        ("user", user.is_some()),
        ("password", password.is_some()),
        ("password_env", password_env.is_some()),
        ("password_file", password_file.is_some()),
        ("identity_file", identity_file.is_some()),
        ("identity_passphrase_env", identity_passphrase_env.is_some()),
        ("identity_passphrase_file", identity_passphrase_file.is_some()),
        ("known_hosts", known_hosts.is_some()),
        ("host_key_check", host_key_check.is_some()),
        ("jump", jump.is_some()),
        ("become_password", become_password.is_some()),
        ("become_password_env", become_password_env.is_some()),
        ("become_password_file", become_password_file.is_some()),
    ]
    .into_iter()
    .find_map(|(key, set)| set.then_some(key))
}
