//! Host key verification against an OpenSSH `known_hosts` file (plain and hashed entries,
//! `[host]:port` for non-22 ports), with the three policies of the inventory.
//! A changed key is always refused, and the message shows both fingerprints so an operator can
//! tell a rebuilt VM from an attack.

use std::path::Path;
use std::sync::Mutex;

use russh::keys::known_hosts::{check_known_hosts_path, known_host_keys_path, learn_known_hosts_path};
use russh::keys::{HashAlg, PublicKey};

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

/// Decide about `key` offered by `host:port`.
pub fn verify(policy: HostKeyCheck, known_hosts: &Path, host: &str, port: u16, key: &PublicKey) -> Verdict {
    let offered = fingerprint(key);
    if policy == HostKeyCheck::Off {
        return Verdict::Unchecked { fingerprint: offered };
    }
    let _guard = KNOWN_HOSTS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let _file_lock = match policy {
        HostKeyCheck::AcceptNew => match lock_for_append(known_hosts) {
            Ok(f) => Some(f),
            Err(e) => return Verdict::Rejected { message: format!("cannot lock {}: {e}", known_hosts.display()) },
        },
        _ => None,
    };
    match check_known_hosts_path(host, port, key, known_hosts) {
        Ok(true) => Verdict::Trusted,
        Err(russh::keys::Error::KeyChanged { line }) => {
            let expected = known_host_keys_path(host, port, known_hosts)
                .ok()
                .and_then(|keys| keys.into_iter().find(|(l, _)| *l == line))
                .map(|(_, k)| fingerprint(&k))
                .unwrap_or_else(|| "?".to_string());
            Verdict::Rejected {
                message: format!(
                    "REMOTE HOST KEY HAS CHANGED: {} line {line} expects {expected}, the server offered {offered} ({}). \
                     If the VM was rebuilt, remove that line; otherwise this may be an attack.",
                    known_hosts.display(),
                    key.algorithm()
                ),
            }
        }
        Err(e) => Verdict::Rejected { message: format!("cannot read {}: {e}", known_hosts.display()) },
        Ok(false) => match policy {
            HostKeyCheck::Strict => Verdict::Rejected {
                message: format!(
                    "host is not in {} (strict checking); offered {} key {offered}",
                    known_hosts.display(),
                    key.algorithm()
                ),
            },
            _ => match learn_known_hosts_path(host, port, key, known_hosts) {
                Ok(()) => Verdict::Learned { fingerprint: offered },
                Err(e) => Verdict::Rejected { message: format!("cannot record key in {}: {e}", known_hosts.display()) },
            },
        },
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
