//! The commands that add and remove one of our public keys in the login user's
//! `~/.ssh/authorized_keys` (`src/remote/authorized_key.sh`, idempotent, 0600). Pure: the key's
//! parts are checked here too, so nothing odd reaches a node. A key is given as its
//! `type base64` (`DriverKey::blob`), which is what identifies our line in the file.

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::remote::AUTHORIZED_KEY;

/// The comment of our public keys in `authorized_keys`, so an operator sees whose line it is.
pub const COMMENT: &str = "mgmt-driver";

/// How long editing one small file may take on a node.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

fn command(verb: &str, blob: &str) -> Result<RemoteCommand> {
    let mut parts = blob.split(' ');
    let (t, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"+/=@.-".contains(&c));
    if !plain(t) || !plain(b) {
        return Err(Error::input("state store", "driver key", "the stored public key is not one OpenSSH line"));
    }
    Ok(RemoteCommand::new(AUTHORIZED_KEY.command(&[verb, t, b, COMMENT])?).with_timeout(Some(LIMIT)))
}

/// Add the key `blob` (`type base64`) unless it is there.
pub fn add(blob: &str) -> Result<RemoteCommand> {
    command("add", blob)
}

/// Remove every line holding the key `blob` (`type base64`).
pub fn remove(blob: &str) -> Result<RemoteCommand> {
    command("remove", blob)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ee::driver_key::{DriverKey, KeyType};

    #[test]
    fn the_key_travels_as_quoted_arguments_and_shows_as_a_label() {
        let k = DriverKey::generate(KeyType::Ed25519).unwrap();
        let c = add(k.blob()).unwrap();
        assert!(c.display().starts_with("authorized_key.sh add ssh-ed25519 "), "{}", c.display());
        assert!(!c.display().contains("PRIVATE"));
        let mut bad = k.clone();
        bad.openssh = "ssh-ed25519 AA$(reboot) x".into();
        assert!(remove(bad.blob()).is_err());
    }

    /// The program itself, run here on a scratch HOME: idempotent add, a file without a final
    /// newline kept intact, other keys kept byte for byte on removal, mode 0600.
    #[test]
    fn the_program_adds_once_and_removes_only_our_line() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let k = DriverKey::generate(KeyType::Ed25519).unwrap();
        let run = |c: &RemoteCommand| {
            let o =
                std::process::Command::new("sh").arg("-c").arg(&c.script).env("HOME", home.path()).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        let ssh = home.path().join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        let file = ssh.join("authorized_keys");
        std::fs::write(&file, "ssh-ed25519 AAAAother someone").unwrap();
        run(&add(k.blob()).unwrap());
        run(&add(k.blob()).unwrap());
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, format!("ssh-ed25519 AAAAother someone\n{}\n", k.openssh));
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        run(&remove(k.blob()).unwrap());
        run(&remove(k.blob()).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "ssh-ed25519 AAAAother someone\n");
        // No ~/.ssh at all: created 0700 with a 0600 file.
        std::fs::remove_dir_all(&ssh).unwrap();
        run(&add(k.blob()).unwrap());
        assert_eq!(std::fs::metadata(&ssh).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{}\n", k.openssh));
    }
}
