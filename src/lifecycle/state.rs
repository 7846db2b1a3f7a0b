//! The embedded state store: JSON documents per VNF instance in a private directory (0700),
//! each written atomically (temp file, fsync, rename, mode 0600: they hold the cluster's
//! secrets), and an instance lock held for the whole run so two operations on the same instance
//! cannot interleave.
//!
//! The store trusts no directory it is given ([`super::private_file`]): an existing one must be
//! the running user's and writable by nobody else, or it is refused (exit 2) before anything
//! connects; files are created new and never through a symlink; documents are read
//! non-blocking, regular files only, up to [`DOC_MAX_BYTES`]. Later operations (heal, scale, terminate, CNF) read what earlier ones
//! recorded here. Each operation family keeps its own document kind beside the others:
//! `<id>.json` for the cluster, `<id>.cnf.json` for Helm releases.
//!
//! A plan (dry run) opens the store read-only: it reads what is recorded, and writes, locks and
//! creates nothing.
//!
//! No secret is at rest in clear: every document is sealed on its way to disk and unsealed on
//! its way back ([`super::seal`], with the operator's key, [`super::state_key`]), so each
//! document kind is covered without knowing its fields. A document written in clear by an
//! earlier version still loads, and is sealed on its next write.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lifecycle::private_file;
use crate::lifecycle::seal;
use crate::lifecycle::state_key::StateKey;

/// A state document larger than this is refused unread: the largest real ones (a cluster with
/// its CNF releases' values) are well under 1 MiB.
pub const DOC_MAX_BYTES: u64 = 32 << 20;

/// A directory of instance documents, and the key that seals their secrets.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
    writable: bool,
    key: Arc<StateKey>,
}

/// Held for the whole run; dropping it releases the lock. When the run removed the document the
/// lock guards (terminate), the lock file goes too, unlinked while still held: a run that opened
/// the old file meanwhile finds, once it holds that file's lock, that the path no longer names it
/// and starts again on a new one ([`Store::lock`]), so two runs never hold "the" lock at once.
pub struct Lock {
    file: Option<File>,
    path: PathBuf,
    doc: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.file.is_some()
            && std::fs::symlink_metadata(&self.doc).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            // Best effort: a lock file left behind is only clutter, never a wrong lock.
            let _ = std::fs::remove_file(&self.path);
        }
        // Closing the file releases the flock.
        self.file = None;
    }
}

/// The lock path still names the very file we locked (same device and inode).
fn still_at(path: &Path, f: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(path), f.metadata()) {
        (Ok(p), Ok(m)) => p.dev() == m.dev() && p.ino() == m.ino(),
        _ => false,
    }
}

/// VNF instance ids become file names: keep them boring.
pub fn check_instance_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::input(
            "vnf instance",
            "id",
            format!("'{id}' is not a usable VNF instance id ([A-Za-z0-9._-], not starting with '.')"),
        ))
    }
}

impl Store {
    /// Open (and create, 0700) the store for a run that changes things, with the key at its
    /// default location ([`StateKey::default_location`]).
    pub fn open(dir: &Path) -> Result<Store> {
        Store::open_with_key(dir, StateKey::default_location())
    }

    /// Open the store with the operator's key, created now if it does not exist yet: a key
    /// that cannot be read or created stops the run before anything changed (exit 2).
    pub fn open_with_key(dir: &Path, key: StateKey) -> Result<Store> {
        let err = |e: std::io::Error| Error::input("--state-dir", dir.display().to_string(), e.to_string());
        // Only a directory created here is made 0700; an existing one is checked, never chmodded.
        if std::fs::symlink_metadata(dir).is_err() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(err)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        }
        check_dir(dir)?;
        // Resolved, symlinks included: a link outside leading inside is inside.
        let inside = crate::lifecycle::state_key::resolved;
        if !key.path().as_os_str().is_empty() && inside(key.path()).starts_with(inside(dir)) {
            return Err(Error::input(
                "--state-key",
                key.path().display().to_string(),
                format!("is inside the state directory {}: keep the key apart from what it seals", dir.display()),
            ));
        }
        key.load_or_create()?;
        Ok(Store { dir: dir.to_path_buf(), writable: true, key: Arc::new(key) })
    }

    /// The store as a plan sees it: readable, never written, locked or created (the key file
    /// neither: it is read only when a document holds sealed values).
    pub fn read_only(dir: &Path) -> Store {
        Store::read_only_with_key(dir, StateKey::default_location())
    }

    pub fn read_only_with_key(dir: &Path, key: StateKey) -> Store {
        Store { dir: dir.to_path_buf(), writable: false, key: Arc::new(key) }
    }

    pub fn default_dir() -> PathBuf {
        dirs::state_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".local/state")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("mgmt-driver")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// False in a plan: nothing may be created, written or removed.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// `<id>.json` for the cluster document (kind ""), `<id>.<kind>.json` for the others.
    pub fn doc_path(&self, id: &str, kind: &str) -> PathBuf {
        self.dir.join(file_name(id, kind, "json"))
    }

    /// Take an instance's lock for one document kind without waiting: a second run on the same
    /// instance is refused with a clear message rather than queued behind a 40-minute install.
    pub fn lock(&self, id: &str, kind: &str) -> Result<Lock> {
        check_instance_id(id)?;
        let p = self.dir.join(file_name(id, kind, "lock"));
        let doc = self.doc_path(id, kind);
        if !self.writable {
            return Ok(Lock { file: None, path: p, doc });
        }
        // A run that just finished may have unlinked the file we opened (see [`Lock`]): locking
        // a file no longer at the path excludes nobody, so open the path again. Each retry means
        // another run released in between; a handful is plenty.
        for _ in 0..8 {
            let f = private_file::open_lock(&p)
                .map_err(|e| Error::input(p.display().to_string(), "lock", e.to_string()))?;
            match f.try_lock() {
                Ok(()) if still_at(&p, &f) => return Ok(Lock { file: Some(f), path: p, doc }),
                Ok(()) => continue,
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::input(
                        p.display().to_string(),
                        "lock",
                        format!("another mgmt-driver run is working on VNF instance {id}; wait for it to finish"),
                    ))
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::input(p.display().to_string(), "lock", e.to_string()))
                }
            }
        }
        Err(Error::input(p.display().to_string(), "lock", "the lock file kept being replaced; try again"))
    }

    /// The document, its MAC checked and its secrets opened ([`seal::Sealer::open_doc`]):
    /// nothing in a document is used before it is known to be the one the store wrote for this
    /// instance and kind. A document without a MAC (an earlier version's, or one put there by
    /// someone else) is refused, naming `state reseal`, the operator's way to upgrade it.
    pub fn load_doc<T: DeserializeOwned>(&self, id: &str, kind: &str) -> Result<Option<T>> {
        let Some(doc) = self.read_raw(id, kind)? else { return Ok(None) };
        let p = self.doc_path(id, kind);
        if !seal::is_authenticated(&doc) {
            return Err(Error::input(p.display().to_string(), format!("/{}", seal::MAC_FIELD), self.unauthenticated()));
        }
        let doc = self.open_sealed(id, kind, doc)?;
        serde_json::from_value(doc)
            .map(Some)
            .map_err(|e| Error::input(p.display().to_string(), "state", format!("unreadable: {e}")))
    }

    /// An authenticated document opened with the key (an error naming the key file when there
    /// is none: a plan never creates it).
    pub(crate) fn open_sealed(&self, id: &str, kind: &str, doc: Value) -> Result<Value> {
        let p = self.doc_path(id, kind);
        let why = format!("{} is sealed under the state key", p.display());
        self.key.load(&why)?.open_doc(seal::DocAt { kind, id }, doc).map_err(|e| {
            Error::input(
                p.display().to_string(),
                e.pointer,
                format!("{}; state key: {}", e.message, self.key.path().display()),
            )
        })
    }

    /// A document of an earlier version opened for upgrading: its v1 values with the key (an
    /// error naming the key file when there is none), a plain one as it is.
    pub(crate) fn open_legacy(&self, id: &str, kind: &str, doc: Value) -> Result<Value> {
        if !seal::has_sealed(&doc) {
            return Ok(doc);
        }
        let p = self.doc_path(id, kind);
        let why = format!("{} holds sealed secrets", p.display());
        self.key.load(&why)?.open_legacy(doc).map_err(|e| {
            Error::input(
                p.display().to_string(),
                e.pointer,
                format!("sealed value {}; state key: {}", e.message, self.key.path().display()),
            )
        })
    }

    /// What a document without a MAC gets told: why it is refused and the one command that
    /// upgrades the directory.
    fn unauthenticated(&self) -> String {
        format!(
            "is missing: the document is not authenticated under the state key (an mgmt-driver from before \
             authenticated state wrote it, or something else did), and what it says decides where secrets are \
             sent. If this state directory is yours and unchanged, authenticate its documents once with \
             `mgmt-driver state reseal --state-dir {}` (same --state-key)",
            self.dir.display()
        )
    }

    /// The document as it is on disk, parsed, unchecked (`None`: there is none). Only the
    /// checks of the file itself are made here (regular file, size, directory).
    pub(crate) fn read_raw(&self, id: &str, kind: &str) -> Result<Option<Value>> {
        check_instance_id(id)?;
        let p = self.doc_path(id, kind);
        if !self.writable {
            // A plan opens nothing up front: check the directory where a run's open would have.
            match std::fs::metadata(&self.dir) {
                Ok(_) => check_dir(&self.dir)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(_) => {}
            }
        }
        match private_file::read_regular(&p, DOC_MAX_BYTES, false) {
            Ok((t, _)) => serde_json::from_slice(&t)
                .map(Some)
                .map_err(|e| Error::input(p.display().to_string(), "state", format!("unreadable: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::input(p.display().to_string(), "state", e.to_string())),
        }
    }

    /// Atomic replace: a crash leaves the old or the new document, never half of one. A failure
    /// is a [`Error::State`] (exit 1), never "bad input": nodes may already have changed.
    pub fn save_doc<T: Serialize>(&self, id: &str, kind: &str, doc: &T) -> Result<()> {
        check_instance_id(id)?;
        if !self.writable {
            return Ok(());
        }
        let p = self.doc_path(id, kind);
        let tmp = self.dir.join(format!(".{}.tmp", file_name(id, kind, "json")));
        let err = |e: std::io::Error| Error::State { path: p.display().to_string(), message: e.to_string() };
        let state_err = |message: String| Error::State { path: p.display().to_string(), message };
        let value = serde_json::to_value(doc).expect("state serializes");
        // Every document is sealed and authenticated, secrets or not: one without a MAC is
        // refused on reading, so none may be written without one.
        let sealer = self.key.load_or_create().map_err(|e| state_err(e.to_string()))?;
        let value = sealer.seal_doc(seal::DocAt { kind, id }, &value).map_err(state_err)?;
        let body = serde_json::to_vec_pretty(&value).expect("state serializes");
        let write = || -> std::io::Result<()> {
            // A temp file left by a crashed run (or planted) is unlinked, never written through:
            // removing a symlink removes the link, not what it points at.
            match std::fs::remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut f = private_file::create_new(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, &p)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Remove a document; `Ok(false)` when there was none.
    pub fn remove_doc(&self, id: &str, kind: &str) -> Result<bool> {
        check_instance_id(id)?;
        if !self.writable {
            return Ok(self.doc_path(id, kind).exists());
        }
        let p = self.doc_path(id, kind);
        match std::fs::remove_file(&p) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::State { path: p.display().to_string(), message: e.to_string() }),
        }
    }
}

/// Refuse a state directory someone else could change (exit 2, naming it and the fix).
fn check_dir(dir: &Path) -> Result<()> {
    let meta =
        std::fs::metadata(dir).map_err(|e| Error::input("--state-dir", dir.display().to_string(), e.to_string()))?;
    match private_file::untrusted_dir(dir, &meta) {
        None => Ok(()),
        Some(why) => Err(Error::input("--state-dir", dir.display().to_string(), why)),
    }
}

fn file_name(id: &str, kind: &str, ext: &str) -> String {
    if kind.is_empty() {
        format!("{id}.{ext}")
    } else {
        format!("{id}.{kind}.{ext}")
    }
}

/// UTC timestamp of now, to the second (`2026-11-23T13:40:00Z`).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn saves_atomically_private_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(&d.path().join("s")).unwrap();
        assert!(st.load_doc::<Value>("abc", "").unwrap().is_none());
        st.save_doc("abc", "", &json!({"a": 1})).unwrap();
        st.save_doc("abc", "cnf", &json!({"b": 2})).unwrap();
        let mode = std::fs::metadata(st.doc_path("abc", "")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::metadata(d.path().join("s")).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(st.load_doc::<Value>("abc", "cnf").unwrap().unwrap()["b"], 2);
        assert!(st.remove_doc("abc", "").unwrap() && !st.remove_doc("abc", "").unwrap());
        assert!(st.doc_path("abc", "cnf").exists());
    }

    #[test]
    fn a_second_run_on_the_same_instance_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let held = st.lock("abc", "").unwrap();
        let e = st.lock("abc", "").err().unwrap().to_string();
        assert!(e.contains("another mgmt-driver run is working on VNF instance abc"), "{e}");
        assert!(st.lock("other", "").is_ok());
        assert!(st.lock("abc", "cnf").is_ok(), "cluster hooks and CNF operations lock separately");
        drop(held);
        assert!(st.lock("abc", "").is_ok());
    }

    #[test]
    fn the_lock_file_goes_with_its_document_and_a_run_holding_the_old_file_locks_anew() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let lock_path = d.path().join("abc.lock");
        // A document that stays keeps its lock file (the next run locks the same one).
        st.save_doc("abc", "", &json!({"x": 1})).unwrap();
        drop(st.lock("abc", "").unwrap());
        assert!(lock_path.exists());
        // Terminate: the document is removed under the lock, and the lock file with it.
        let held = st.lock("abc", "").unwrap();
        // Another run opened the lock file before it went, and locks it once it is released.
        let early = private_file::open_lock(&lock_path).unwrap();
        assert!(st.remove_doc("abc", "").unwrap());
        drop(held);
        assert!(!lock_path.exists(), "an empty lock file stays after terminate");
        early.try_lock().unwrap();
        // That lock is on an unlinked file: the store's lock is taken on the path again, and
        // excludes the next run as before.
        let again = st.lock("abc", "").unwrap();
        assert!(lock_path.exists());
        assert!(st.lock("abc", "").is_err());
        drop(again);
        drop(early);
        assert!(!lock_path.exists());
    }

    #[test]
    fn a_plan_reads_but_never_writes_locks_or_creates() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("never");
        let ro = Store::read_only(&dir);
        let _l = ro.lock("abc", "").unwrap();
        ro.save_doc("abc", "", &json!({})).unwrap();
        assert!(!dir.exists(), "a plan created the state directory");
        let rw = Store::open(&dir).unwrap();
        rw.save_doc("abc", "", &json!({"x": 1})).unwrap();
        assert_eq!(Store::read_only(&dir).load_doc::<Value>("abc", "").unwrap().unwrap()["x"], 1);
    }

    #[test]
    fn a_failed_write_is_a_state_error_and_keeps_the_old_document() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        st.save_doc("abc", "", &json!({"v": 1})).unwrap();
        // A directory where the temp file should go makes the write fail.
        std::fs::create_dir(d.path().join(".abc.json.tmp")).unwrap();
        let e = st.save_doc("abc", "", &json!({"v": 2})).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), ("state", 1), "{e}");
        assert_eq!(st.load_doc::<Value>("abc", "").unwrap().unwrap()["v"], 1);
    }

    /// Every file under `dir`, recursively, as raw bytes.
    fn all_bytes(dir: &Path) -> Vec<u8> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(all_bytes(&p));
            } else {
                out.extend(std::fs::read(&p).unwrap());
            }
        }
        out
    }

    fn contains(hay: &[u8], needle: &str) -> bool {
        hay.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn secrets_are_sealed_at_rest_and_open_with_the_key() {
        let d = tempfile::tempdir().unwrap();
        let key = || StateKey::at(d.path().join("cfg/state.key"));
        let st = Store::open_with_key(&d.path().join("s"), key()).unwrap();
        let doc = json!({"params": {"master_node": {"password": "Pw-1"}, "proxy": {"http_proxy": "http://u:Px-2@p:3128"}},
                         "bearer_token": "Tok-3", "name": "plain"});
        st.save_doc("abc", "", &doc).unwrap();
        st.save_doc("abc", "cnf", &json!({"releases": {"r": {"values": {"db": {"password": "Pw-4"}}}}})).unwrap();
        let raw = all_bytes(&d.path().join("s"));
        for secret in ["Pw-1", "Px-2", "Tok-3", "Pw-4"] {
            assert!(!contains(&raw, secret), "{secret} at rest");
        }
        assert!(contains(&raw, "plain"), "what is not secret stays readable");
        assert_eq!(st.load_doc::<Value>("abc", "").unwrap().unwrap(), doc);
        // A plan reads the same, with the key.
        assert_eq!(
            Store::read_only_with_key(&d.path().join("s"), key()).load_doc::<Value>("abc", "").unwrap().unwrap(),
            doc
        );
    }

    #[test]
    fn a_missing_or_wrong_key_is_an_error_naming_the_key_file_never_an_empty_password() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let st = Store::open_with_key(&dir, StateKey::at(d.path().join("k1"))).unwrap();
        st.save_doc("abc", "", &json!({"password": "Pw-1"})).unwrap();
        let missing = d.path().join("missing.key");
        let e = Store::read_only_with_key(&dir, StateKey::at(&missing)).load_doc::<Value>("abc", "").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(&missing.display().to_string()) && e.to_string().contains("sealed"), "{e}");
        assert!(!missing.exists(), "a plan never creates the key");
        let other = Store::open_with_key(&dir, StateKey::at(d.path().join("k2"))).unwrap();
        let e = other.load_doc::<Value>("abc", "").unwrap_err().to_string();
        assert!(e.contains("/state_mac") && e.contains("another state key") && e.contains("k2"), "{e}");
        assert!(!e.contains("Pw-1"), "{e}");
    }

    /// A store with a key, and a cluster document as instantiate leaves one.
    fn recorded(d: &Path) -> (Store, Value) {
        let st = Store::open_with_key(&d.join("s"), StateKey::at(d.join("k"))).unwrap();
        let doc = json!({"vnf_instance_id": "i1",
            "params": {"master_node": {"username": "ubuntu", "password": "Pw-1", "masternode_ip": "192.0.2.11"}},
            "nodes": {"m1": {"ssh_addr": "192.0.2.11"}}, "bearer_token": "Tok-1", "credential_ref_token": "Ref-1"});
        st.save_doc("i1", "", &doc).unwrap();
        (st, doc)
    }

    /// `path`'s text with `from` replaced by `to` (an edit outside mgmt-driver).
    fn edit(path: &Path, from: &str, to: &str) {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains(from), "{from} not in {text}");
        std::fs::write(path, text.replace(from, to)).unwrap();
    }

    #[test]
    fn a_changed_address_in_a_sealed_document_is_refused_before_use() {
        let d = tempfile::tempdir().unwrap();
        let (st, _) = recorded(d.path());
        edit(&st.doc_path("i1", ""), "\"masternode_ip\": \"192.0.2.11\"", "\"masternode_ip\": \"203.0.113.66\"");
        let check = |e: Error| {
            let m = e.to_string();
            assert_eq!(e.exit_code(), 2, "{m}");
            assert!(m.contains(&st.doc_path("i1", "").display().to_string()) && m.contains("/state_mac"), "{m}");
            assert!(m.contains("changed outside mgmt-driver") && !m.contains("Pw-1"), "{m}");
        };
        check(st.load_doc::<Value>("i1", "").unwrap_err());
        // A plan verifies what it reads the same way.
        check(
            Store::read_only_with_key(st.dir(), StateKey::at(d.path().join("k")))
                .load_doc::<Value>("i1", "")
                .unwrap_err(),
        );
    }

    #[test]
    fn a_document_copied_to_another_instance_or_kind_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let (st, _) = recorded(d.path());
        st.save_doc("i2", "", &json!({"vnf_instance_id": "i2", "params": {"master_node": {"password": "Pw-2"}}}))
            .unwrap();
        std::fs::copy(st.doc_path("i1", ""), st.doc_path("i2", "")).unwrap();
        let e = st.load_doc::<Value>("i2", "").unwrap_err().to_string();
        assert!(e.contains("i2.json") && e.contains("/state_mac") && e.contains("another instance"), "{e}");
        std::fs::copy(st.doc_path("i1", ""), st.doc_path("i1", "cnf")).unwrap();
        assert!(st.load_doc::<Value>("i1", "cnf").unwrap_err().to_string().contains("/state_mac"));
    }

    #[test]
    fn a_secret_planted_in_clear_in_a_sealed_document_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let (st, _) = recorded(d.path());
        let p = st.doc_path("i1", "");
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["params"]["master_node"]["password"] = json!("planted");
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        let e = st.load_doc::<Value>("i1", "").unwrap_err().to_string();
        assert!(e.contains("/state_mac") && !e.contains("planted"), "{e}");
    }

    /// The downgrade: a sealed document replaced by a plain one (no MAC) that points the next
    /// operation elsewhere. Refused, by runs and plans alike, naming the upgrade command; the
    /// same refusal an earlier version's document gets until `state reseal` upgrades it.
    #[test]
    fn a_document_without_its_mac_is_refused_naming_state_reseal() {
        let d = tempfile::tempdir().unwrap();
        let (st, doc) = recorded(d.path());
        let plain = json!({"vnf_instance_id": "i1", "params": {"master_node": {"masternode_ip": "203.0.113.66"}},
            "nodes": {"m1": {"ssh_addr": "203.0.113.66"}}});
        std::fs::write(st.doc_path("i1", ""), plain.to_string()).unwrap();
        for store in [st.clone(), Store::read_only_with_key(st.dir(), StateKey::at(d.path().join("none")))] {
            let e = store.load_doc::<Value>("i1", "").unwrap_err();
            let m = e.to_string();
            assert_eq!(e.exit_code(), 2, "{m}");
            assert!(m.contains("i1.json") && m.contains("/state_mac") && m.contains("is missing"), "{m}");
            assert!(m.contains(&format!("mgmt-driver state reseal --state-dir {}", st.dir().display())), "{m}");
        }
        // Also a document with no secret at all: every document is authenticated.
        std::fs::write(st.doc_path("i3", "cnf"), r#"{"releases": {}}"#).unwrap();
        assert!(st.load_doc::<Value>("i3", "cnf").unwrap_err().to_string().contains("state reseal"));
        // The sealed one, written again, reads back.
        st.save_doc("i1", "", &doc).unwrap();
        assert_eq!(st.load_doc::<Value>("i1", "").unwrap().unwrap(), doc);
    }

    #[test]
    fn a_plan_without_the_key_names_the_key_file_for_any_document() {
        let d = tempfile::tempdir().unwrap();
        let (st, _) = recorded(d.path());
        st.save_doc("i1", "cnf", &json!({"releases": {}})).unwrap();
        let missing = d.path().join("missing.key");
        for kind in ["", "cnf"] {
            let e =
                Store::read_only_with_key(st.dir(), StateKey::at(&missing)).load_doc::<Value>("i1", kind).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(&missing.display().to_string()), "{e}");
        }
        assert!(!missing.exists());
    }

    #[test]
    fn a_key_inside_the_state_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = Store::open_with_key(d.path(), StateKey::at(d.path().join("sub/state.key"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("keep the key apart"), "{e}");
        assert!(!d.path().join("sub").exists());
    }

    #[test]
    fn a_plan_never_creates_the_key_file() {
        let d = tempfile::tempdir().unwrap();
        let key = d.path().join("cfg/state.key");
        let ro = Store::read_only_with_key(&d.path().join("s"), StateKey::at(&key));
        ro.save_doc("abc", "", &json!({"password": "x"})).unwrap();
        assert!(ro.load_doc::<Value>("abc", "").unwrap().is_none());
        assert!(!key.exists() && !d.path().join("cfg").exists());
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_shared_or_foreign_state_directory_is_refused_never_chmodded() {
        let d = tempfile::tempdir().unwrap();
        let key = || StateKey::at(d.path().join("k"));
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = Store::open_with_key(&shared, key()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(m.contains(&shared.display().to_string()) && m.contains("writable by group or others"), "{m}");
        assert!(m.contains(&format!("chmod 700 {}", shared.display())), "{m}");
        assert_eq!(mode_of(&shared), 0o1777, "the shared directory was chmodded");
        // A plan refuses it too, on its first read.
        let e = Store::read_only_with_key(&shared, key()).load_doc::<Value>("abc", "").unwrap_err();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        // 0755 and ours: others may read, not change; accepted as it is.
        let mine = d.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        Store::open_with_key(&mine, key()).unwrap();
        assert_eq!(mode_of(&mine), 0o755);
        // Someone else's (testable when running as root, as CI does).
        if private_file::euid() == 0 {
            let theirs = d.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4242), None).unwrap();
            let m = Store::open_with_key(&theirs, key()).unwrap_err().to_string();
            assert!(m.contains("owned by uid 4242") && m.contains("not by the user running"), "{m}");
        }
    }

    #[test]
    fn a_new_state_directory_is_created_private() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("a/b");
        Store::open_with_key(&dir, StateKey::at(d.path().join("k"))).unwrap();
        assert_eq!(mode_of(&dir), 0o700);
    }

    #[test]
    fn a_planted_temp_file_or_lock_symlink_is_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open_with_key(&d.path().join("s"), StateKey::at(d.path().join("k"))).unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, st.dir().join(".abc.json.tmp")).unwrap();
        st.save_doc("abc", "", &json!({"v": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(st.load_doc::<Value>("abc", "").unwrap().unwrap()["v"], 1);
        assert!(!std::fs::symlink_metadata(st.dir().join("abc.json")).unwrap().file_type().is_symlink());
        // The lock file neither follows a link (nor creates what it points at).
        let absent = d.path().join("absent");
        std::os::unix::fs::symlink(&absent, st.dir().join("abc.lock")).unwrap();
        let e = st.lock("abc", "").err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!absent.exists(), "the lock created the link's target");
        // Nor does a document read: a link in the store is refused, not followed.
        std::os::unix::fs::symlink(&victim, st.dir().join("lnk.json")).unwrap();
        let e = st.load_doc::<Value>("lnk", "").unwrap_err();
        assert!(e.to_string().contains("symbolic link") && e.exit_code() == 2, "{e}");
    }

    #[test]
    fn a_fifo_or_an_oversized_document_is_refused_without_hanging() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open_with_key(&d.path().join("s"), StateKey::at(d.path().join("k"))).unwrap();
        let fifo = st.doc_path("abc", "");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let st2 = st.clone();
        std::thread::spawn(move || tx.send(st2.load_doc::<Value>("abc", "").map_err(|e| e.to_string())));
        let e = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("reading a FIFO hung").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&fifo).unwrap();
        let f = std::fs::File::create(st.doc_path("big", "")).unwrap();
        f.set_len(DOC_MAX_BYTES + 1).unwrap();
        let e = st.load_doc::<Value>("big", "").unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn instance_ids_are_file_name_safe() {
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(check_instance_id(bad).is_err(), "{bad}");
        }
        assert!(check_instance_id("3cc2c4ff-525c-48b4-94c9-29247223322f").is_ok());
        assert_eq!(now_rfc3339().len(), 20);
    }
}
