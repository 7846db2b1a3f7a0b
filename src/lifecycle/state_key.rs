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
//!
//! The key is trusted as the state directory is ([`super::private_file`]): its file is read
//! only when it is a regular file (a FIFO does not stall the run), at most [`KEY_MAX_BYTES`],
//! owned by the running user or root and changeable by nobody else. 32 bytes of text are a
//! passphrase, not a key, and are refused: the key must be random, and no passphrase is
//! stretched into one (a key file is simpler to keep right than a passphrase policy).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chacha20poly1305::aead::Generate;

use crate::error::{Error, Result};
use crate::lifecycle::private_file;
use crate::lifecycle::seal::Sealer;

/// A key file is 65 bytes; some white space around the digits is fine, a big file is not a key.
pub const KEY_MAX_BYTES: u64 = 4096;

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
        // A link is followed (a Kubernetes Secret volume's files are links); the checks are on
        // the file it leads to, as opened.
        let (bytes, meta) = match private_file::read_regular(&self.path, KEY_MAX_BYTES, true) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.err(format!(
                    "no state key here, but {why}; pass the key that sealed it with --state-key FILE or {ENV}"
                )))
            }
            Err(e) => return Err(self.err(e.to_string())),
        };
        let key = parse_key(&bytes).map_err(|m| self.err(m))?;
        if let Some(why) = private_file::unsafe_secret(&self.path, &meta) {
            return Err(self.err(why));
        }
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
        // Where someone else could write, they could swap the key for one they know.
        if let Some(why) = private_file::untrusted_dir(dir, &std::fs::metadata(dir)?) {
            return Err(std::io::Error::other(format!("{}: {why}", dir.display())));
        }
        let key: [u8; 32] = Generate::generate();
        let tmp = dir.join(format!(".state.key.{}.{:016x}.tmp", std::process::id(), fastrand::u64(..)));
        let mut f = private_file::create_new(&tmp)?;
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

/// 64 hex digits (surrounding white space ignored), or exactly 32 raw bytes that are not text.
/// 32 characters of text are a passphrase (guessable), which earlier versions took as the raw
/// key: refused, saying how to make a real key. 32 random bytes are text (UTF-8 without control
/// characters) with a chance far below one in a billion.
fn parse_key(bytes: &[u8]) -> std::result::Result<[u8; 32], String> {
    let text = std::str::from_utf8(bytes).map(str::trim);
    if let Ok(t) = text {
        if t.len() == 64 {
            if let Ok(v) = hex::decode(t) {
                return Ok(v.try_into().expect("32 bytes"));
            }
        }
    }
    if bytes.len() == 32 && !looks_like_text(bytes) {
        return Ok(bytes.try_into().expect("32 bytes"));
    }
    if bytes.len() == 32 {
        return Err("holds 32 characters of text: a passphrase, not a key (a key is 32 random bytes). \
            Make a key with `openssl rand -hex 32 > FILE` (chmod 600); state sealed with this passphrase \
            cannot be opened with the new key: record it again (or open it once with the passphrase \
            hex-encoded, `xxd -p -c 64`)"
            .into());
    }
    Err("is not a state key (64 hex digits or 32 bytes; e.g. `openssl rand -hex 32`)".into())
}

fn looks_like_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|t| !t.chars().any(char::is_control))
}

/// The path as the file system resolves it, symlinks included, also for a path whose last
/// components do not exist yet: what "the key is outside the state directory" is checked on.
pub fn resolved(p: &Path) -> PathBuf {
    resolved_within(p, 40)
}

fn resolved_within(p: &Path, links: u32) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut rest = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |acc, c| acc.join(c));
        }
        // A dangling link: where it leads is where a file would be created.
        if let (Ok(target), Some(parent), true) = (std::fs::read_link(at), at.parent(), links > 0) {
            let base = resolved_within(&parent.join(target), links - 1);
            return rest.iter().rev().fold(base, |acc, c| acc.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return abs,
        }
    }
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

    #[test]
    fn a_passphrase_is_not_a_key() {
        let e = parse_key(b"correct horse battery staple 12!").unwrap_err();
        assert!(e.contains("passphrase") && e.contains("openssl rand -hex 32"), "{e}");
        let mut raw = [0x9c; 32];
        raw[0] = b'a';
        assert_eq!(parse_key(&raw).unwrap(), raw, "32 raw (non-text) bytes stay a key");
    }

    #[test]
    fn a_key_file_others_could_change_or_read_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k");
        std::fs::write(&p, "ab".repeat(32)).unwrap();
        for bad in [0o644, 0o620, 0o602] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(bad)).unwrap();
            let e = StateKey::at(&p).load("x").err().unwrap();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(&format!("chmod 600 {}", p.display())), "{e}");
        }
        // A Kubernetes Secret's file: root's (or ours), readable through the pod's group.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o440)).unwrap();
        StateKey::at(&p).load("x").unwrap();
        if private_file::euid() == 0 {
            std::os::unix::fs::chown(&p, Some(4242), None).unwrap();
            let e = StateKey::at(&p).load("x").err().unwrap().to_string();
            assert!(e.contains("owned by uid 4242"), "{e}");
        }
    }

    #[test]
    fn a_fifo_or_a_huge_file_is_no_key_and_does_not_hang() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let f2 = fifo.clone();
        std::thread::spawn(move || tx.send(StateKey::at(&f2).load("x").err().map(|e| e.to_string())));
        let e = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("reading a FIFO key hung").unwrap();
        assert!(e.contains("not a regular file"), "{e}");
        let big = d.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(KEY_MAX_BYTES + 1).unwrap();
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = StateKey::at(&big).load("x").err().unwrap().to_string();
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn a_symlink_does_not_get_the_key_into_the_state_directory() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::os::unix::fs::symlink(&state, d.path().join("looks-outside")).unwrap();
        let e = crate::lifecycle::state::Store::open_with_key(
            &state,
            StateKey::at(d.path().join("looks-outside/state.key")),
        )
        .unwrap_err();
        assert!(e.to_string().contains("keep the key apart"), "{e}");
        std::os::unix::fs::symlink(state.join("state.key"), d.path().join("key-link")).unwrap();
        let e =
            crate::lifecycle::state::Store::open_with_key(&state, StateKey::at(d.path().join("key-link"))).unwrap_err();
        assert!(e.to_string().contains("keep the key apart"), "{e}");
        assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0, "no key was made in the state directory");
    }
}
