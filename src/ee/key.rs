//! `key`: the driver's key shown (made on first use), and a rotation started (`rotate`) or
//! resumed (`finish-rotation`) across the registered machines. `prepare` takes both locks,
//! checks there is something to rotate and makes the new key in memory, writing nothing: the
//! caller still has its own input to check (a refused command must change nothing). `run` saves
//! the new key before any machine is touched (it is never lost), then walks the machines
//! (`rotate.rs`); `save` records what was done, also after a partial pass.

use crate::ee::driver_key::{DriverKey, KeyDoc, KeyType, DOC_ID, DOC_KIND};
use crate::ee::record::Registry;
use crate::ee::rotate::{self, Pass};
use crate::error::{Error, Result};
use crate::lifecycle::state::{Lock, Store};
use crate::lifecycle::Runner;

/// The key as `key` shows it, with the registry (whose machines a pending rotation waits for).
pub struct Shown {
    pub keys: KeyDoc,
    pub registry: Registry,
    /// The key was made by this call.
    pub made: bool,
}

/// The stored key, made (of `kind`) when there is none. A plan makes nothing: it shows the
/// stored key or refuses.
pub fn show(store: &Store, kind: KeyType, dry_run: bool) -> Result<Shown> {
    let (keys, made) = if dry_run {
        match KeyDoc::load(store)? {
            Some(k) => (k, false),
            None => return Err(Error::input("key", "dry run", "no key yet (a real run makes one)")),
        }
    } else {
        let _lock = store.lock(DOC_ID, DOC_KIND)?;
        KeyDoc::load_or_create(store, kind)?
    };
    let registry = Registry::load(store)?;
    Ok(Shown { keys, registry, made })
}

/// A rotation ready to walk the machines; holds the registry's and the key's locks until it
/// is dropped.
pub struct Rotation {
    _registry_lock: Lock,
    _key_lock: Lock,
    pub keys: KeyDoc,
    pub registry: Registry,
    /// The new key is made but not stored yet: [`Rotation::run`] stores it first.
    unsaved: bool,
}

/// Start a rotation (`new`: a new key of `kind`) or resume the pending one. Only checks and
/// reads: nothing is written until [`Rotation::run`].
pub fn prepare(store: &Store, kind: KeyType, new: bool) -> Result<Rotation> {
    let registry_lock = Registry::lock(store)?;
    let key_lock = store.lock(DOC_ID, DOC_KIND)?;
    let mut keys = KeyDoc::load(store)?
        .ok_or_else(|| Error::input("key", "rotate", "there is no key yet: `mgmt-driver key` makes one"))?;
    if new {
        if keys.previous.is_some() {
            return Err(Error::input(
                "key",
                "rotate",
                "a rotation is pending already: finish it first (mgmt-driver key finish-rotation)",
            ));
        }
        let new = DriverKey::generate(kind)?;
        keys.previous = Some(std::mem::replace(&mut keys.current, new));
    } else if keys.previous.is_none() {
        return Err(Error::input("key", "finish-rotation", "no rotation is pending"));
    }
    let registry = Registry::load(store)?;
    Ok(Rotation { _registry_lock: registry_lock, _key_lock: key_lock, keys, registry, unsaved: new })
}

impl Rotation {
    /// Both phases as far as they go; what was done is in `keys` and `registry` for [`save`].
    /// A new key is saved first, before any machine is touched: it is never lost.
    ///
    /// [`save`]: Rotation::save
    pub async fn run(&mut self, store: &Store, rt: Runner) -> Result<Pass> {
        if self.unsaved {
            self.keys.save(store)?;
            self.unsaved = false;
        }
        Ok(rotate::advance(&rt, store, &mut self.registry, &mut self.keys).await)
    }

    /// Record the pass: the registry's key fingerprints, and the key document (without the old
    /// key once it is gone everywhere).
    pub fn save(&self, store: &Store) -> Result<()> {
        self.registry.save(store)?;
        self.keys.save(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::state_key::StateKey;

    fn store(d: &std::path::Path) -> Store {
        Store::open_with_key(&d.join("state"), StateKey::at(d.join("state.key"))).unwrap()
    }

    /// Every document of the store, by name, with its bytes (lock files hold no state).
    fn snapshot(d: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(d.join("state"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_none_or(|x| x != "lock"))
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    }

    /// `key rotate` checks its own flags after `prepare`: a refusal there must find the store
    /// as it was, so `prepare` writes nothing (it used to save the new key).
    #[test]
    fn prepare_writes_nothing_so_a_later_refusal_changes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let st = store(d.path());
        KeyDoc::load_or_create(&st, KeyType::Ed25519).unwrap();
        let before = snapshot(d.path());
        let r = prepare(&st, KeyType::Ed25519, true).unwrap();
        assert!(r.keys.previous.is_some(), "the rotation has its new key in memory");
        drop(r);
        assert_eq!(snapshot(d.path()), before, "prepare changed the store");
        let k = KeyDoc::load(&st).unwrap().unwrap();
        assert!(k.previous.is_none(), "no rotation may be pending after a refused rotate");
    }

    #[test]
    fn a_refused_prepare_changes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let st = store(d.path());
        assert!(prepare(&st, KeyType::Ed25519, true).is_err(), "no key yet");
        assert!(KeyDoc::load(&st).unwrap().is_none());
        KeyDoc::load_or_create(&st, KeyType::Ed25519).unwrap();
        let before = snapshot(d.path());
        assert!(prepare(&st, KeyType::Ed25519, false).is_err(), "nothing pending");
        assert_eq!(snapshot(d.path()), before);
    }
}
