//! Reading an OpenSSH `known_hosts` file: which recorded keys apply to `host:port`, and which
//! keys are revoked for it. Pure: the caller reads the file (and decides what an unreadable
//! file means — for us, an error, never "no keys").
//!
//! Format (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): `[@marker] patterns keytype base64 [comment]`,
//! fields separated by spaces or tabs; `#` starts a comment line.
//! - `patterns`: comma-separated host names or addresses, `[host]:port` for a port other than
//!   22, `*` and `?` wildcards, `!pattern` negation (a negated match rules the line out), or one
//!   hashed name `|1|salt|hmac-sha1`.
//! - `@revoked`: that key must never be accepted for the matching hosts.
//! - `@cert-authority`: we never ask for host certificates, so these lines are skipped.
//!
//! A line whose key does not parse is skipped (as `ssh` does), except a `@revoked` line: a
//! revocation we cannot read is an error, so that a typo cannot re-admit a revoked key.

use std::borrow::Cow;

use data_encoding::BASE64;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::PublicKey;
use sha1::Sha1;

/// What the file says about one `host:port`.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Keys recorded for the host, with their 1-based line numbers.
    pub keys: Vec<(usize, PublicKey)>,
    /// Keys revoked for the host, with their line numbers.
    pub revoked: Vec<(usize, PublicKey)>,
}

/// The known_hosts name of `host:port`: `host`, or `[host]:port` when the port is not 22.
pub fn host_port(host: &str, port: u16) -> Cow<'_, str> {
    if port == 22 {
        Cow::Borrowed(host)
    } else {
        Cow::Owned(format!("[{host}]:{port}"))
    }
}

/// Collect what `text` records for `host:port`. Errors name the line.
pub fn lookup(text: &str, host: &str, port: u16) -> Result<Recorded, String> {
    let name = host_port(host, port);
    let mut out = Recorded::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
        let Some(first) = fields.next() else { continue };
        if first.starts_with('#') {
            continue;
        }
        let (revoked, patterns) = match first {
            "@revoked" => (true, fields.next()),
            "@cert-authority" => continue,
            m if m.starts_with('@') => continue,
            p => (false, Some(p)),
        };
        let (Some(patterns), kind, blob) = (patterns, fields.next(), fields.next()) else {
            if revoked {
                return Err(format!("line {n}: incomplete @revoked entry"));
            }
            continue;
        };
        if !matches_host(&name, patterns) {
            continue;
        }
        let key = match (kind, blob) {
            (Some(k), Some(b)) => PublicKey::from_openssh(&format!("{k} {b}")).ok(),
            _ => None,
        };
        match (key, revoked) {
            (Some(k), true) => out.revoked.push((n, k)),
            (Some(k), false) => out.keys.push((n, k)),
            (None, true) => return Err(format!("line {n}: @revoked entry with a key that cannot be read")),
            (None, false) => {}
        }
    }
    Ok(out)
}

/// The file without the entries of `host:port`, for re-learning a rebuilt VM's key, and the
/// keys those entries held (line number, key), for the event that says what was replaced.
///
/// Removed: every plain or hashed line whose only host is exactly this `host:port`, whatever
/// its key type (a rebuilt VM gets new keys of every type). Every other line is kept
/// byte-for-byte, line endings included. `@revoked` and `@cert-authority` lines are never
/// touched (a revocation must survive a rebuild). A line that matches the host only together
/// with other hosts (`a,b key`) or through a wildcard is an error: rewriting it would change
/// what the file says about other hosts, so the operator edits it (the message names it).
pub fn without_host(text: &str, host: &str, port: u16) -> Result<(String, Vec<(usize, PublicKey)>), String> {
    let name = host_port(host, port);
    let mut kept = String::with_capacity(text.len());
    let mut removed = Vec::new();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
        let (Some(patterns), Some(kind), Some(blob)) = (fields.next(), fields.next(), fields.next()) else {
            kept.push_str(raw);
            continue;
        };
        if patterns.starts_with('#') || patterns.starts_with('@') || !matches_host(&name, patterns) {
            kept.push_str(raw);
            continue;
        }
        let exact = patterns.starts_with("|1|") || patterns.eq_ignore_ascii_case(&name);
        if !exact {
            return Err(format!(
                "line {n} records {name} together with other hosts or by a pattern ({patterns}); \
                 not rewriting it: remove {name} from that line by hand"
            ));
        }
        if let Ok(k) = PublicKey::from_openssh(&format!("{kind} {blob}")) {
            removed.push((n, k));
        }
    }
    Ok((kept, removed))
}

/// The lines of `text` that record or revoke a key for any of `hosts` (`(host, port)`), byte
/// for byte and in file order: what one instance takes with it from a file shared by many.
pub fn entries_for(text: &str, hosts: &[(&str, u16)]) -> Result<String, String> {
    let mut wanted = std::collections::BTreeSet::new();
    for (h, p) in hosts {
        let r = lookup(text, h, *p)?;
        wanted.extend(r.keys.iter().chain(&r.revoked).map(|(n, _)| *n));
    }
    Ok(text.split_inclusive('\n').enumerate().filter(|(i, _)| wanted.contains(&(i + 1))).map(|(_, l)| l).collect())
}

/// Whether the comma-separated `patterns` of a line match `name` (already `[host]:port` when
/// the port is not 22). Host names compare case-insensitively, as in OpenSSH.
pub fn matches_host(name: &str, patterns: &str) -> bool {
    if let Some(hashed) = patterns.strip_prefix("|1|") {
        return matches_hashed(name, hashed);
    }
    // No allocation per line: every handshake scans the whole file, so a run over N hosts
    // with N entries does N² of these.
    let mut hit = false;
    for p in patterns.split(',') {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg.as_bytes(), name.as_bytes()) {
                return false;
            }
        } else if glob(p.as_bytes(), name.as_bytes()) {
            hit = true;
        }
    }
    hit
}

/// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, the form `ssh-keygen -H` writes.
fn matches_hashed(name: &str, rest: &str) -> bool {
    let Some((salt, hash)) = rest.split_once('|') else { return false };
    let (Ok(salt), Ok(hash)) = (BASE64.decode(salt.as_bytes()), BASE64.decode(hash.as_bytes())) else {
        return false;
    };
    let Ok(mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt) else { return false };
    mac.chain_update(name.as_bytes()).verify_slice(&hash).is_ok()
}

/// OpenSSH's pattern match: `*` any run of characters, `?` exactly one; ASCII letters match
/// regardless of case.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&s[si])) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            back = Some((pi, si));
            pi += 1;
        } else if let Some((bp, bs)) = back {
            pi = bp + 1;
            si = bs + 1;
            back = Some((bp, bs + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINvU9id4WnQaIgfkJaLGanvZETydH3NANbKlD1O8aaRT";
    const B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDUwKkBIwHQNssAGhDNBL+vzk5ieIlYs0NqfhXmJfF1f";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    #[test]
    fn entries_for_takes_only_the_named_hosts_lines_revocations_included() {
        let text = format!("# note\n10.0.0.1 {A}\n10.0.0.2 {B}\n[10.0.0.3]:2222 {A}\n@revoked 10.0.0.1 {B}\n");
        let got = entries_for(&text, &[("10.0.0.1", 22), ("10.0.0.3", 2222)]).unwrap();
        assert_eq!(got, format!("10.0.0.1 {A}\n[10.0.0.3]:2222 {A}\n@revoked 10.0.0.1 {B}\n"));
        assert_eq!(entries_for(&text, &[("10.0.0.3", 22)]).unwrap(), "");
    }

    #[test]
    fn patterns_wildcards_negation_and_ports() {
        assert!(matches_host("10.0.0.1", "10.0.0.1"));
        assert!(matches_host("node1", "other,NODE1"));
        assert!(matches_host("10.0.0.7", "10.0.0.*"));
        assert!(matches_host("10.0.0.7", "10.0.0.?"));
        assert!(!matches_host("10.0.0.17", "10.0.0.?"));
        assert!(!matches_host("10.0.0.7", "10.0.0.*,!10.0.0.7"));
        assert!(matches_host("[10.0.0.1]:2222", "[10.0.0.1]:2222"));
        assert!(!matches_host("[10.0.0.1]:2222", "10.0.0.1"));
        assert!(matches_host("anything", "*"));
        assert!(glob(b"a*b*c", b"axxbyyc") && !glob(b"a*b*c", b"axxbyy"));
    }

    #[test]
    fn revoked_and_recorded_keys_with_tabs_comments_and_junk() {
        let text = format!(
            "# comment\n\n10.0.0.1\t{A} a comment\n@revoked * {B}\n@cert-authority * {A}\n10.0.0.1 ssh-ed25519 not-base64\nother {B}\n"
        );
        let r = lookup(&text, "10.0.0.1", 22).unwrap();
        assert_eq!(r.keys.iter().map(|(n, k)| (*n, k.clone())).collect::<Vec<_>>(), vec![(3, key(A))]);
        assert_eq!(r.revoked.iter().map(|(n, k)| (*n, k.clone())).collect::<Vec<_>>(), vec![(4, key(B))]);
        let r = lookup(&text, "other", 22).unwrap();
        assert_eq!(r.keys.len(), 1);
        assert_eq!(r.revoked.len(), 1, "the wildcard revocation applies to every host");
        // An unreadable revocation is an error, never silently dropped.
        assert!(lookup("@revoked * ssh-ed25519 garbage\n", "h", 22).unwrap_err().contains("line 1"));
        assert!(lookup("@revoked *\n", "h", 22).is_err());
    }

    #[test]
    fn without_host_removes_only_that_host_port_every_type_plain_and_hashed() {
        const EC: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNAr7dlq7F1LlbOkXNfKKGrJDP5pcYI0TIwicqB9/rkVGQXS+R6FOoHLrELz3L5JaapsqBd/e1nq4btxzVdm92w=";
        let salt = [9u8; 20];
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt).unwrap().chain_update(b"10.0.0.1");
        let hashed = format!("|1|{}|{}", BASE64.encode(&salt), BASE64.encode(&mac.finalize().into_bytes()));
        let text = format!(
            "# keep me\r\n10.0.0.1 {A}\n[10.0.0.1]:2222 {B}\n{hashed} {EC} comment\n10.0.0.11 {B}\n@revoked 10.0.0.1 {B}\n\t10.0.0.1\t{EC}\nother {A}"
        );
        let (kept, removed) = without_host(&text, "10.0.0.1", 22).unwrap();
        assert_eq!(kept, format!("# keep me\r\n[10.0.0.1]:2222 {B}\n10.0.0.11 {B}\n@revoked 10.0.0.1 {B}\nother {A}"));
        let lines: Vec<usize> = removed.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, vec![2, 4, 7]);
        assert_eq!(removed[0].1, key(A));
        // The other port's entry only.
        let (kept, removed) = without_host(&text, "10.0.0.1", 2222).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(kept.len(), text.len() - format!("[10.0.0.1]:2222 {B}\n").len());
        // Nothing recorded: the text comes back unchanged.
        let (kept, removed) = without_host(&text, "10.9.9.9", 22).unwrap();
        assert!(removed.is_empty() && kept == text);
    }

    #[test]
    fn without_host_refuses_shared_or_wildcard_lines() {
        for line in [format!("10.0.0.1,node1 {A}\n"), format!("10.0.0.* {A}\n")] {
            let e = without_host(&line, "10.0.0.1", 22).unwrap_err();
            assert!(e.contains("line 1") && e.contains("by hand"), "{e}");
        }
        // A negated pattern that rules the host out is not about it.
        let line = format!("10.0.0.*,!10.0.0.1 {A}\n");
        assert_eq!(without_host(&line, "10.0.0.1", 22).unwrap().0, line);
    }

    #[test]
    fn hashed_names() {
        // `ssh-keygen -H` output for "198.18.0.11" with a fixed salt, computed here.
        let salt = [7u8; 20];
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt).unwrap().chain_update(b"198.18.0.11");
        let entry = format!("|1|{}|{}", BASE64.encode(&salt), BASE64.encode(&mac.finalize().into_bytes()));
        assert!(matches_host("198.18.0.11", &entry));
        assert!(!matches_host("198.18.0.12", &entry));
        assert!(!matches_host("198.18.0.11", "|1|bad|bad"));
    }
}
