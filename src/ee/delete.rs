//! `ee delete`: forget a registered machine; with `--remove-key`, first take the driver's keys
//! (the current one and a retired one) off it, and keep the record when that fails.

use crate::ee::authorized_keys;
use crate::ee::driver_key::KeyDoc;
use crate::ee::record::{EeRecord, Registry};
use crate::error::{Error, Result};
use crate::inventory::Host;
use crate::lifecycle::state::{Lock, Store};
use crate::lifecycle::Runner;

/// A deletion ready to run; holds the registry's lock until it is dropped.
pub struct Prepared {
    _lock: Lock,
    registry: Registry,
    /// The record to forget.
    pub record: EeRecord,
    keys: Option<KeyDoc>,
    remove_key: bool,
}

/// What was forgotten.
pub struct Deleted {
    pub id: String,
    pub name: String,
    /// The driver's keys were taken off the machine first.
    pub key_removed: bool,
}

/// Take the registry's lock and find the record (by name or id).
pub fn prepare(store: &Store, ee: &str, remove_key: bool) -> Result<Prepared> {
    let lock = Registry::lock(store)?;
    let registry = Registry::load(store)?;
    let record = registry.find(ee, "EE")?.clone();
    let keys = KeyDoc::load(store)?;
    Ok(Prepared { _lock: lock, registry, record, keys, remove_key })
}

impl Prepared {
    /// Whether keys are taken off the machine first: asked for, and it holds one of ours.
    fn removes_keys(&self) -> bool {
        self.remove_key && !self.record.driver_keys.is_empty()
    }

    /// The machine to take the driver's keys off before the record goes, if any: asked for,
    /// it holds one of ours, and there is a key to log in with.
    pub fn key_holder(&self, store: &Store) -> Option<Host> {
        let keys = self.keys.as_ref().filter(|_| self.removes_keys())?;
        Some(self.record.to_host(store, Some(keys)))
    }

    /// Remove every driver key from `host`'s `authorized_keys`; the runner is closed after.
    pub async fn remove_keys(&self, host: &Host, rt: Runner) -> Result<()> {
        let r = async {
            if let Some(k) = &self.keys {
                for key in std::iter::once(&k.current).chain(k.previous.as_ref()) {
                    rt.exec(host, authorized_keys::remove(key.blob())?).await?;
                }
            }
            Ok::<(), Error>(())
        }
        .await;
        rt.close().await;
        r
    }

    /// Forget the record.
    pub fn forget(mut self, store: &Store) -> Result<Deleted> {
        let id = self.record.id.clone();
        self.registry.ees.retain(|e| e.id != id);
        self.registry.save(store)?;
        Ok(Deleted { id, name: self.record.name.clone(), key_removed: self.removes_keys() })
    }
}
