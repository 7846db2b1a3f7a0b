//! Host key verification against an OpenSSH `known_hosts` file (plain and hashed entries,
//! `[host]:port` for non-22 ports), with the three policies of the inventory.
//! A changed key is always refused, and the message shows both fingerprints so an operator can
//! tell a rebuilt VM from an attack.

use std::path::Path;
use std::sync::Mutex;

use russh::keys::known_hosts::learn_known_hosts_path;
use russh::keys::{Algorithm, HashAlg, PublicKey};

pub use super::known_hosts::entries_for;
use super::known_hosts::{lookup, without_host};

use crate::inventory::HostKeyCheck;

/// Serialises check-then-append on known_hosts files within this process, so 200 hosts
/// learned at once under accept-new do not interleave their lines. Other processes (per-site
/// runs sharing one known_hosts) are kept out by an advisory lock on the file itself.
static KNOWN_HOSTS_LOCK: Mutex<()> = Mutex::new(());

/// Open (creating if needed) and exclusively lock `path` for a check-then-append. The lock is
/// released when the returned file is dropped.
fn lock_for_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    f.lock()?;
    Ok(f)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Trusted,
    /// Unknown host recorded under accept-new.
    Learned {
        fingerprint: String,
    },
    /// A rebuilt VM's new key replaced the old entries of its host:port (policy re-learn).
    Relearned {
        /// Fingerprints of the keys removed.
        old: Vec<String>,
        fingerprint: String,
    },
    /// Check is off; accepted with a warning.
    Unchecked {
        fingerprint: String,
    },
    Rejected {
        message: String,
    },
}

pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Read known_hosts: a missing file has no entries; any other failure (permissions, a
/// directory, not UTF-8) is an error — an unreadable file must never look like an empty one,
/// or accept-new would learn over keys it could not see.
fn read_known_hosts(path: &Path) -> Result<String, String> {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b).map_err(|_| format!("cannot read {}: not UTF-8 text", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The key types `known_hosts` records for `host:port` (best effort: empty when unreadable,
/// which [`verify`] then reports). Used to ask the server for a key we can check, as `ssh`
/// does, instead of one we would have to refuse.
pub fn known_algorithms(known_hosts: &Path, host: &str, port: u16) -> Vec<Algorithm> {
    let text = read_known_hosts(known_hosts).unwrap_or_default();
    let mut algs: Vec<Algorithm> = Vec::new();
    for (_, k) in lookup(&text, host, port).map(|r| r.keys).unwrap_or_default() {
        if !algs.contains(&k.algorithm()) {
            algs.push(k.algorithm());
        }
    }
    algs
}

/// The SHA256 fingerprint of the first key `known_hosts` records for `host:port` (what
/// `ee register` shows it learned); `None` when there is none or the file is unreadable.
pub fn recorded_fingerprint(known_hosts: &Path, host: &str, port: u16) -> Option<String> {
    let text = read_known_hosts(known_hosts).ok()?;
    lookup(&text, host, port).ok()?.keys.first().map(|(_, k)| fingerprint(k))
}

/// Run known_hosts work (file lock, file I/O) off the async threads, one piece at a time:
/// [`verify`] holds a process-wide lock anyway, and 200 handshakes at once must not start 200
/// blocking threads (each with its stack and, in glibc, its own malloc arena) that would only
/// wait on that lock. `None` when the blocking task panicked.
pub async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static ONE_AT_A_TIME: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
    let _turn = ONE_AT_A_TIME.acquire().await.ok()?;
    tokio::task::spawn_blocking(f).await.ok()
}

/// Decide about `key` offered by `host:port`. Blocking (file lock, file I/O): call it off the
/// async threads, through [`off_runtime`].
pub fn verify(policy: HostKeyCheck, known_hosts: &Path, host: &str, port: u16, key: &PublicKey) -> Verdict {
    let offered = fingerprint(key);
    if policy == HostKeyCheck::Off {
        return Verdict::Unchecked { fingerprint: offered };
    }
    let _guard = KNOWN_HOSTS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let _file_lock = match policy {
        HostKeyCheck::AcceptNew | HostKeyCheck::Relearn => match lock_for_append(known_hosts) {
            Ok(f) => Some(f),
            Err(e) => return Verdict::Rejected { message: format!("cannot lock {}: {e}", known_hosts.display()) },
        },
        _ => None,
    };
    let path = known_hosts.display();
    let (text, rec) = match read_known_hosts(known_hosts)
        .and_then(|t| lookup(&t, host, port).map(|r| (t, r)).map_err(|m| format!("{path}: {m}")))
    {
        Ok(r) => r,
        Err(message) => return Verdict::Rejected { message },
    };
    let same = |k: &PublicKey| k.key_data() == key.key_data();
    if let Some((line, _)) = rec.revoked.iter().find(|(_, k)| same(k)) {
        return Verdict::Rejected {
            message: format!(
                "REVOKED HOST KEY: {path} line {line} marks the {} key {offered} this server offered as @revoked; refusing to connect.",
                key.algorithm()
            ),
        };
    }
    if rec.keys.iter().any(|(_, k)| same(k)) {
        return Verdict::Trusted;
    }
    if let (HostKeyCheck::Relearn, Some(file)) = (policy, &_file_lock) {
        if !rec.keys.is_empty() {
            return relearn(file, known_hosts, &text, host, port, key);
        }
    }
    if let Some((line, k)) = rec.keys.iter().find(|(_, k)| k.algorithm() == key.algorithm()) {
        return Verdict::Rejected {
            message: format!(
                "REMOTE HOST KEY HAS CHANGED: {path} line {line} expects {}, the server offered {offered} ({}). \
                 If the VM was rebuilt, remove that line; otherwise this may be an attack.",
                fingerprint(k),
                key.algorithm()
            ),
        };
    }
    if let Some((line, k)) = rec.keys.first() {
        // Known, but only with other key types: learning this one would let whoever holds it
        // in, without the key we trust ever being shown. A mismatch, not a new host.
        return Verdict::Rejected {
            message: format!(
                "host is known in {path} with a {} key ({}, line {line}), but the server offered a {} key {offered}. \
                 Not learning a second key type: if the VM was rebuilt, remove the old entries (ssh-keygen -R); \
                 otherwise this may be an attack.",
                k.algorithm(),
                fingerprint(k),
                key.algorithm()
            ),
        };
    }
    match policy {
        HostKeyCheck::Strict => Verdict::Rejected {
            message: format!("host is not in {path} (strict checking); offered {} key {offered}", key.algorithm()),
        },
        _ => match learn_known_hosts_path(host, port, key, known_hosts) {
            Ok(()) => Verdict::Learned { fingerprint: offered },
            Err(e) => Verdict::Rejected { message: format!("cannot record key in {path}: {e}") },
        },
    }
}

/// Replace the entries of `host:port` with `key`, in place (the same file, so the lock other
/// processes wait on stays the one that guards it), under the lock [`verify`] holds: `file` is
/// that locked handle. Every other line is kept byte-for-byte ([`without_host`]).
fn relearn(file: &std::fs::File, known_hosts: &Path, text: &str, host: &str, port: u16, key: &PublicKey) -> Verdict {
    use std::io::Write;
    let path = known_hosts.display();
    let (kept, removed) = match without_host(text, host, port) {
        Ok(r) => r,
        Err(m) => return Verdict::Rejected { message: format!("cannot re-learn the rebuilt VM's key: {path}: {m}") },
    };
    let rewrite = (|| {
        let mut f = file;
        f.set_len(0)?;
        f.write_all(kept.as_bytes())?;
        f.sync_data()
    })();
    if let Err(e) = rewrite {
        return Verdict::Rejected { message: format!("cannot rewrite {path}: {e}") };
    }
    match learn_known_hosts_path(host, port, key, known_hosts) {
        Ok(()) => Verdict::Relearned {
            old: removed.iter().map(|(_, k)| fingerprint(k)).collect(),
            fingerprint: fingerprint(key),
        },
        Err(e) => Verdict::Rejected { message: format!("cannot record key in {path}: {e}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [&str; 2] = [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINvU9id4WnQaIgfkJaLGanvZETydH3NANbKlD1O8aaRT",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDUwKkBIwHQNssAGhDNBL+vzk5ieIlYs0NqfhXmJfF1f",
    ];

    fn keys() -> (PublicKey, PublicKey) {
        (PublicKey::from_openssh(KEYS[0]).unwrap(), PublicKey::from_openssh(KEYS[1]).unwrap())
    }

    #[test]
    fn policies() {
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (a, b) = keys();
        assert!(matches!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 22, &a), Verdict::Rejected { .. }));
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.1", 22, &a), Verdict::Learned { .. }));
        assert_eq!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 22, &a), Verdict::Trusted);
        // Non-standard port is a different entry.
        assert!(matches!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 2222, &a), Verdict::Rejected { .. }));
        // Changed key: refused even under accept-new, with both fingerprints.
        match verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.1", 22, &b) {
            Verdict::Rejected { message } => {
                assert!(message.contains(&fingerprint(&a)), "{message}");
                assert!(message.contains(&fingerprint(&b)), "{message}");
            }
            v => panic!("changed key accepted: {v:?}"),
        }
        assert!(matches!(verify(HostKeyCheck::Off, &kh, "10.0.0.1", 22, &b), Verdict::Unchecked { .. }));
    }

    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNAr7dlq7F1LlbOkXNfKKGrJDP5pcYI0TIwicqB9/rkVGQXS+R6FOoHLrELz3L5JaapsqBd/e1nq4btxzVdm92w=";

    #[test]
    fn revoked_key_is_refused_even_when_also_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (a, b) = keys();
        std::fs::write(&kh, format!("10.0.0.1 {}\n@revoked 10.0.0.* {}\n", KEYS[0], KEYS[0])).unwrap();
        for policy in [HostKeyCheck::Strict, HostKeyCheck::AcceptNew] {
            match verify(policy, &kh, "10.0.0.1", 22, &a) {
                Verdict::Rejected { message } => {
                    assert!(message.contains("REVOKED") && message.contains("line 2"), "{message}")
                }
                v => panic!("revoked key accepted: {v:?}"),
            }
        }
        // Another host under the wildcard revocation: not learned either.
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.2", 22, &a), Verdict::Rejected { .. }));
        // A key that is not revoked is judged as usual.
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.2", 22, &b), Verdict::Learned { .. }));
        assert_eq!(std::fs::read_to_string(&kh).unwrap().lines().count(), 3);
    }

    #[test]
    fn unreadable_known_hosts_is_an_error_not_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = keys();
        // A directory where the file should be; and a file that is not text.
        let d = dir.path().join("kh-dir");
        std::fs::create_dir(&d).unwrap();
        let bin = dir.path().join("kh-bin");
        std::fs::write(&bin, [0xff, 0xfe, b'\n']).unwrap();
        for (p, policy) in [(&d, HostKeyCheck::Strict), (&bin, HostKeyCheck::Strict), (&bin, HostKeyCheck::AcceptNew)] {
            match verify(policy, p, "10.0.0.1", 22, &a) {
                Verdict::Rejected { message } => assert!(message.contains("cannot"), "{message}"),
                v => panic!("{}: {v:?}", p.display()),
            }
        }
        assert_eq!(std::fs::read(&bin).unwrap(), [0xff, 0xfe, b'\n'], "nothing learned into it");
        // Permissions: only meaningful when not root (root reads anything).
        let locked = dir.path().join("kh-0000");
        std::fs::write(&locked, format!("10.0.0.1 {}\n", KEYS[0])).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read(&locked).is_err() {
            assert!(matches!(verify(HostKeyCheck::Strict, &locked, "10.0.0.1", 22, &a), Verdict::Rejected { .. }));
        }
        // A missing file is simply empty.
        let none = dir.path().join("absent");
        assert!(verify(HostKeyCheck::Strict, &none, "10.0.0.1", 22, &a) != Verdict::Trusted);
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &none, "10.0.0.1", 22, &a), Verdict::Learned { .. }));
    }

    #[test]
    fn accept_new_does_not_learn_a_second_key_type() {
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (a, _) = keys();
        let ec = PublicKey::from_openssh(ECDSA).unwrap();
        std::fs::write(&kh, format!("[10.0.0.1]:2222 {ECDSA}\n")).unwrap();
        match verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.1", 2222, &a) {
            Verdict::Rejected { message } => {
                assert!(message.contains("Not learning a second key type"), "{message}");
                assert!(message.contains(&fingerprint(&ec)) && message.contains(&fingerprint(&a)), "{message}");
            }
            v => panic!("second key type accepted: {v:?}"),
        }
        assert_eq!(std::fs::read_to_string(&kh).unwrap().lines().count(), 1);
        assert_eq!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 2222, &ec), Verdict::Trusted);
        assert_eq!(known_algorithms(&kh, "10.0.0.1", 2222), vec![ec.algorithm()]);
        assert!(known_algorithms(&kh, "10.0.0.1", 22).is_empty());
    }

    #[test]
    fn accept_new_waits_for_another_process_holding_the_file() {
        // Another process (util-linux `flock`, the same flock(2) lock) holds known_hosts:
        // learning a key must wait for it instead of appending in the middle of its update.
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        std::fs::write(&kh, "").unwrap();
        let mut child = std::process::Command::new("flock")
            .arg(&kh)
            .arg("-c")
            .arg("sleep 1.5")
            .spawn()
            .expect("flock (util-linux)");
        let held = (0..200).any(|_| {
            let f = std::fs::File::open(&kh).unwrap();
            match f.try_lock() {
                Err(std::fs::TryLockError::WouldBlock) => true,
                _ => {
                    drop(f);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    false
                }
            }
        });
        assert!(held, "flock never took the lock");
        let start = std::time::Instant::now();
        let (k, _) = keys();
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.9", 22, &k), Verdict::Learned { .. }));
        assert!(start.elapsed() >= std::time::Duration::from_millis(500), "did not wait: {:?}", start.elapsed());
        child.wait().unwrap();
        assert_eq!(std::fs::read_to_string(&kh).unwrap().lines().filter(|l| !l.is_empty()).count(), 1);
    }

    #[test]
    fn relearn_replaces_only_the_rebuilt_host_and_keeps_refusing_revoked_keys() {
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (a, b) = keys();
        let ec = PublicKey::from_openssh(ECDSA).unwrap();
        let before = format!(
            "# ops\n10.0.0.1 {}\n10.0.0.2 {}\n10.0.0.1 {ECDSA}\n[10.0.0.1]:2222 {}\n",
            KEYS[0], KEYS[0], KEYS[0]
        );
        std::fs::write(&kh, &before).unwrap();
        // A node that was not rebuilt: a changed key is still refused, the file untouched.
        assert!(matches!(verify(HostKeyCheck::AcceptNew, &kh, "10.0.0.2", 22, &b), Verdict::Rejected { .. }));
        // The rebuilt one: both old keys (ed25519 and ecdsa) replaced by the new one.
        match verify(HostKeyCheck::Relearn, &kh, "10.0.0.1", 22, &b) {
            Verdict::Relearned { old, fingerprint: new } => {
                assert_eq!(old, vec![fingerprint(&a), fingerprint(&ec)]);
                assert_eq!(new, fingerprint(&b));
            }
            v => panic!("{v:?}"),
        }
        let after = std::fs::read_to_string(&kh).unwrap();
        assert_eq!(after, format!("# ops\n10.0.0.2 {}\n[10.0.0.1]:2222 {}\n10.0.0.1 {}\n", KEYS[0], KEYS[0], KEYS[1]));
        // From now on the new key is simply trusted, also strictly; the old one is not.
        assert_eq!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 22, &b), Verdict::Trusted);
        assert!(matches!(verify(HostKeyCheck::Strict, &kh, "10.0.0.1", 22, &a), Verdict::Rejected { .. }));
        // A re-run of the same heal: already trusted, nothing rewritten.
        assert_eq!(verify(HostKeyCheck::Relearn, &kh, "10.0.0.1", 22, &b), Verdict::Trusted);
        assert_eq!(std::fs::read_to_string(&kh).unwrap(), after);
        // A revoked key stays refused even for a rebuilt node, and nothing is removed.
        let revoked = format!("10.0.0.3 {}\n@revoked * {}\n", KEYS[0], KEYS[1]);
        std::fs::write(&kh, &revoked).unwrap();
        match verify(HostKeyCheck::Relearn, &kh, "10.0.0.3", 22, &b) {
            Verdict::Rejected { message } => assert!(message.contains("REVOKED"), "{message}"),
            v => panic!("revoked key re-learned: {v:?}"),
        }
        assert_eq!(std::fs::read_to_string(&kh).unwrap(), revoked);
        // A host recorded on a shared line: refused, the file untouched.
        let shared = format!("10.0.0.4,10.0.0.5 {}\n", KEYS[0]);
        std::fs::write(&kh, &shared).unwrap();
        match verify(HostKeyCheck::Relearn, &kh, "10.0.0.4", 22, &b) {
            Verdict::Rejected { message } => assert!(message.contains("by hand"), "{message}"),
            v => panic!("{v:?}"),
        }
        assert_eq!(std::fs::read_to_string(&kh).unwrap(), shared);
        // Never seen before: learned as under accept-new.
        assert!(matches!(verify(HostKeyCheck::Relearn, &kh, "10.0.0.9", 22, &b), Verdict::Learned { .. }));
    }

    #[test]
    fn hashed_entries_match() {
        // Hash a plain entry with the real `ssh-keygen -H`, as operators do.
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (k, _) = keys();
        std::fs::write(&kh, format!("198.18.0.11 {}\n", k.to_openssh().unwrap())).unwrap();
        let st = std::process::Command::new("ssh-keygen").arg("-q").arg("-H").arg("-f").arg(&kh).status();
        let Ok(st) = st else {
            panic!("ssh-keygen is needed for this test (apt-get install openssh-client)");
        };
        assert!(st.success());
        let text = std::fs::read_to_string(&kh).unwrap();
        assert!(text.starts_with("|1|") && !text.contains("198.18.0.11"), "{text}");
        assert_eq!(verify(HostKeyCheck::Strict, &kh, "198.18.0.11", 22, &k), Verdict::Trusted);
        assert!(matches!(verify(HostKeyCheck::Strict, &kh, "198.18.0.12", 22, &k), Verdict::Rejected { .. }));
    }
}
