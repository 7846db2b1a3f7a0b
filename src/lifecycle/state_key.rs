//! The operator's state key: the 32-byte key that seals the secrets of the state store
//! ([`super::seal`]). It lives in a file of its own, outside the state directory, so a copy,
//! backup or support bundle of the state directory reveals no password without it, and the key
//! can sit on another mount (a secret volume, a TPM-backed file) than the state.
//!
//! Where: `--state-key FILE`, else `$MGMT_DRIVER_STATE_KEY_FILE`, else
//! `$XDG_CONFIG_HOME/mgmt-driver/state.key` (`~/.config/mgmt-driver/state.key`). The file holds
//! 64 hex digits (or 32 raw bytes); a run that writes state creates it (0600, in a 0700
//! directory) when it does not exist yet. A plan never creates it, and a missing or wrong key
//! for a document with sealed values is an error naming this file, never an empty password.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chacha20poly1305::aead::Generate;

use crate::error::{Error, Result};
use crate::lifecycle::seal::Sealer;

/// The environment variable naming the key file.
pub const ENV: &str = crate::env_vars::STATE_KEY_FILE;

/// Where the key is, and the key once read.
pub struct StateKey {
    path: PathBuf,
    sealer: OnceLock<Sealer>,
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({})", self.path.display())
    }
}

impl StateKey {
    pub fn at(path: impl Into<PathBuf>) -> StateKey {
        StateKey { path: path.into(), sealer: OnceLock::new() }
    }

    /// `$MGMT_DRIVER_STATE_KEY_FILE`, else the per-user config location. Unit tests get a key of
    /// their own under the temp directory, so they never touch an operator's key.
    pub fn default_location() -> StateKey {
        if let Some(p) = std::env::var_os(ENV).filter(|p| !p.is_empty()) {
            return StateKey::at(p);
        }
        if cfg!(test) {
            return StateKey::at(std::env::temp_dir().join("mgmt-driver-unit-tests/state.key"));
        }
        // Without a home there is no per-user place: the key must be named (never the working
        // directory, which may be the state's own).
        match dirs::config_dir().or_else(|| dirs::home_dir().map(|h| h.join(".config"))) {
            Some(base) => StateKey::at(base.join("mgmt-driver").join("state.key")),
            None => StateKey::at(PathBuf::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key, read from its file; a missing file is an error (for reading sealed documents
    /// and for plans, which create nothing).
    pub fn load(&self, why: &str) -> Result<&Sealer> {
        if let Some(s) = self.sealer.get() {
            return Ok(s);
        }
        self.named()?;
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.err(format!(
                    "no state key here, but {why}; pass the key that sealed it with --state-key FILE or {ENV}"
                )))
            }
            Err(e) => return Err(self.err(e.to_string())),
        };
        let key = parse_key(&bytes).map_err(|m| self.err(m))?;
        Ok(self.sealer.get_or_init(|| Sealer::new(&key)))
    }

    /// The key, created (0600, in a 0700 directory) when its file does not exist yet. Two runs
    /// creating it at once agree: the file is linked into place only if it is still absent.
    pub fn load_or_create(&self) -> Result<&Sealer> {
        self.named()?;
        if !self.path.exists() {
            self.create().map_err(|e| self.err(format!("cannot create the state key: {e}")))?;
        }
        self.load("it should exist")
    }

    fn create(&self) -> std::io::Result<()> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let key: [u8; 32] = Generate::generate();
        let tmp = dir.join(format!(".state.key.{}.{:016x}.tmp", std::process::id(), fastrand::u64(..)));
        let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
        f.write_all(format!("{}\n", hex::encode(key)).as_bytes())?;
        f.sync_all()?;
        drop(f);
        let linked = std::fs::hard_link(&tmp, &self.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }

    /// A key path is known (there is no default without a home directory).
    fn named(&self) -> Result<()> {
        if self.path.as_os_str().is_empty() {
            return Err(Error::input(
                "--state-key",
                "state key",
                format!("no home directory to keep the state key in; pass --state-key FILE or set {ENV}"),
            ));
        }
        Ok(())
    }

    fn err(&self, message: String) -> Error {
        Error::input(self.path.display().to_string(), "state key", message)
    }
}

/// 64 hex digits (surrounding white space ignored), or exactly 32 raw bytes.
fn parse_key(bytes: &[u8]) -> std::result::Result<[u8; 32], String> {
    let text = std::str::from_utf8(bytes).map(str::trim);
    if let Ok(t) = text {
        if t.len() == 64 {
            if let Ok(v) = hex::decode(t) {
                return Ok(v.try_into().expect("32 bytes"));
            }
        }
    }
    if bytes.len() == 32 {
        return Ok(bytes.try_into().expect("32 bytes"));
    }
    Err("is not a state key (64 hex digits or 32 bytes; e.g. `openssl rand -hex 32`)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_private_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cfg/mgmt-driver/state.key");
        let k = StateKey::at(&p);
        let e = k.load("the state holds sealed values").err().unwrap().to_string();
        assert!(e.contains(&p.display().to_string()) && e.contains("--state-key"), "{e}");
        assert!(!p.exists(), "loading never creates");
        k.load_or_create().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.trim().len(), 64);
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(p.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        // A second creator keeps the first key.
        StateKey::at(&p).load_or_create().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1, "no temp file left");
    }

    #[test]
    fn without_a_path_nothing_is_created_and_the_error_says_how_to_name_one() {
        let e = StateKey::at("").load_or_create().err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--state-key FILE") && e.to_string().contains(ENV), "{e}");
    }

    #[test]
    fn key_file_formats() {
        assert_eq!(parse_key(format!("{}\n", "ab".repeat(32)).as_bytes()).unwrap(), [0xab; 32]);
        assert_eq!(parse_key(&[0xff; 32]).unwrap(), [0xff; 32]);
        for bad in [&b""[..], b"short", &[b'z'; 64]] {
            assert!(parse_key(bad).is_err());
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k"), "nope").unwrap();
        let e = StateKey::at(d.path().join("k")).load("x").err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("openssl rand -hex 32"), "{e}");
    }
}
