//! `ee list` and `ee show`: the registered machines, read from the store (a namespace filter
//! checked first), with the driver's keys so a record can say whether a rotation waits for it.

use crate::ee::driver_key::KeyDoc;
use crate::ee::namespace::Namespace;
use crate::ee::record::{EeRecord, Registry};
use crate::error::{Error, Result};
use crate::lifecycle::state::Store;

/// The records `ee list` shows.
pub struct Listed {
    pub ees: Vec<EeRecord>,
    pub keys: Option<KeyDoc>,
}

/// The records within `namespace` (`[nsi].ns[.vnf...]`), all without one.
pub fn list(store: &Store, namespace: Option<&str>) -> Result<Listed> {
    let filter =
        namespace.map(|n| Namespace::parse(n).map_err(|m| Error::input("arguments", "--namespace", m))).transpose()?;
    let registry = Registry::load(store)?;
    let keys = KeyDoc::load(store)?;
    let ees = registry.within(filter.as_ref()).into_iter().cloned().collect();
    Ok(Listed { ees, keys })
}

/// One record by name or id, as `ee show` prints it (no password).
pub fn show(store: &Store, ee: &str) -> Result<serde_json::Value> {
    let registry = Registry::load(store)?;
    let keys = KeyDoc::load(store)?;
    Ok(registry.find(ee, "EE")?.shown(keys.as_ref()))
}
