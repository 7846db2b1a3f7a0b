//! `key`: the driver's key shown (made on first use), and a rotation started (`rotate`) or
//! resumed (`finish-rotation`) across the registered machines. `prepare` checks there is
//! something to rotate and takes both locks, saving a new key before any machine is touched (it
//! is never lost); `run` walks the machines (`rotate.rs`); `save` records what was done, also
//! after a partial pass.

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
}

/// Start a rotation (`new`: a new key of `kind`) or resume the pending one.
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
        // The new key is saved before any machine is touched: it is never lost.
        keys.save(store)?;
    } else if keys.previous.is_none() {
        return Err(Error::input("key", "finish-rotation", "no rotation is pending"));
    }
    let registry = Registry::load(store)?;
    Ok(Rotation { _registry_lock: registry_lock, _key_lock: key_lock, keys, registry })
}

impl Rotation {
    /// Both phases as far as they go; what was done is in `keys` and `registry` for [`save`].
    ///
    /// [`save`]: Rotation::save
    pub async fn run(&mut self, store: &Store, rt: Runner) -> Pass {
        rotate::advance(&rt, store, &mut self.registry, &mut self.keys).await
    }

    /// Record the pass: the registry's key fingerprints, and the key document (without the old
    /// key once it is gone everywhere).
    pub fn save(&self, store: &Store) -> Result<()> {
        self.registry.save(store)?;
        self.keys.save(store)
    }
}
