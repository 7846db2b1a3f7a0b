//! Registered machines (OSM's execution environments): what `ee register` learned and stored,
//! one registry document in the state store (`ee.registry.json`, 0600, passwords sealed), and
//! how a record becomes an inventory [`Host`] so every fan-out command can target it (`--ee`).
//!
//! A record never holds a password once our key is installed and `--drop-password` was given;
//! its host key lives in the store's own `known_hosts` (checked strictly after registration, so
//! a changed key is refused), and it lists the fingerprints of our keys its `authorized_keys`
//! holds, which is what a key rotation walks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ee::driver_key::KeyDoc;
use crate::ee::namespace::Namespace;
use crate::error::{excerpt, Error, Result};
use crate::inventory::{Auth, Host, HostKeyCheck};
use crate::lifecycle::state::{Lock, Store};
use crate::secret::Secret;

pub const DOC_ID: &str = "ee";
pub const DOC_KIND: &str = "registry";

/// One registered machine.
#[derive(Clone, Serialize, Deserialize)]
pub struct EeRecord {
    /// Stable id (a random UUID), returned by `ee register`.
    pub id: String,
    pub name: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The login password, while there is one (sealed by the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<PathBuf>,
    /// The policy the host key was learned under at registration.
    pub host_key_check: HostKeyCheck,
    /// SHA256 fingerprint of the host key seen at registration.
    #[serde(default)]
    pub host_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Fingerprints of our keys installed in its `authorized_keys`.
    #[serde(default)]
    pub driver_keys: Vec<String>,
    pub registered: String,
}

impl std::fmt::Debug for EeRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EeRecord")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| crate::secret::MASK))
            .field("identity_file", &self.identity_file)
            .field("host_key_check", &self.host_key_check)
            .field("namespace", &self.namespace)
            .field("driver_keys", &self.driver_keys)
            .finish()
    }
}

/// Every registered machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Registry {
    #[serde(default)]
    pub ees: Vec<EeRecord>,
}

/// A new random id, UUID v4 text.
pub fn new_id() -> String {
    let mut b: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    // fastrand is not a CSPRNG; an id is not a secret, only unique. Mix in the clock anyway.
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    for (i, x) in t.to_le_bytes().iter().enumerate() {
        b[i] ^= x;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

impl Registry {
    pub fn load(store: &Store) -> Result<Registry> {
        Ok(store.load_doc(DOC_ID, DOC_KIND)?.unwrap_or_default())
    }

    pub fn save(&self, store: &Store) -> Result<()> {
        store.save_doc(DOC_ID, DOC_KIND, self)
    }

    /// The registry's lock, held by every run that changes it.
    pub fn lock(store: &Store) -> Result<Lock> {
        store.lock(DOC_ID, DOC_KIND)
    }

    /// A record by name or id; an unknown one is bad input naming what is registered.
    pub fn find(&self, name_or_id: &str, flag: &str) -> Result<&EeRecord> {
        self.ees.iter().find(|e| e.name == name_or_id || e.id == name_or_id).ok_or_else(|| {
            let known: Vec<&str> = self.ees.iter().map(|e| e.name.as_str()).collect();
            Error::input(
                flag,
                excerpt(name_or_id),
                if known.is_empty() {
                    "no such execution environment (none is registered: ee register)".to_string()
                } else {
                    format!("no such execution environment (registered: {})", known.join(", "))
                },
            )
        })
    }

    pub fn find_mut(&mut self, name_or_id: &str) -> Option<&mut EeRecord> {
        self.ees.iter_mut().find(|e| e.name == name_or_id || e.id == name_or_id)
    }

    /// The records within a namespace filter (all without one).
    pub fn within(&self, filter: Option<&Namespace>) -> Vec<&EeRecord> {
        self.ees
            .iter()
            .filter(|e| match filter {
                None => true,
                Some(f) => e.namespace.as_deref().and_then(|n| Namespace::parse(n).ok()).is_some_and(|n| n.within(f)),
            })
            .collect()
    }
}

/// The hosts of `--ee NAME|ID …`, ready to connect (for the fan-out commands and primitives).
pub fn hosts(store: &Store, names: &[String]) -> Result<Vec<Host>> {
    let reg = Registry::load(store)?;
    let keys = KeyDoc::load(store)?;
    names.iter().map(|n| reg.find(n, "--ee").map(|r| r.to_host(store, keys.as_ref()))).collect()
}

/// The store's own known_hosts, where `ee register` learns host keys.
pub fn known_hosts(store: &Store) -> PathBuf {
    store.dir().join("known_hosts")
}

impl EeRecord {
    /// The record as a host to connect to: its address and user, our keys (when it holds one,
    /// with the retired key too during a rotation), its password or key file while it has one,
    /// and the store's known_hosts checked strictly (the key was learned at registration).
    pub fn to_host(&self, store: &Store, keys: Option<&KeyDoc>) -> Host {
        let driver_keys = match keys {
            Some(k) if !self.driver_keys.is_empty() => k.login_keys(),
            _ => vec![],
        };
        let check = match self.host_key_check {
            HostKeyCheck::Off => HostKeyCheck::Off,
            _ => HostKeyCheck::Strict,
        };
        Host {
            name: self.name.clone(),
            addr: self.host.clone(),
            port: self.port,
            nic_ip: None,
            user: self.user.clone(),
            auth: Auth {
                password: self.password.clone().map(Secret::new),
                identity_file: self.identity_file.clone(),
                identity_passphrase: None,
                agent: false,
                driver_keys,
            },
            known_hosts: known_hosts(store),
            host_key_check: check,
            jump: vec![],
            become_password: self.password.clone().map(Secret::new),
            groups: vec!["ee".into()],
        }
    }

    /// What `ee show` / `ee list` print: everything but the password, which shows only as
    /// whether one is kept.
    pub fn shown(&self, keys: Option<&KeyDoc>) -> serde_json::Value {
        let pending = keys.and_then(|k| {
            k.previous
                .as_ref()
                .map(|_| !self.driver_keys.is_empty() && self.driver_keys != [k.current.fingerprint.clone()])
        });
        serde_json::json!({
            "id": self.id,
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "namespace": self.namespace.as_deref().and_then(|n| Namespace::parse(n).ok()).map(|n| serde_json::json!({
                "text": n.to_string(), "nsi": n.nsi, "ns": n.ns, "vnf": n.vnf, "vdu": n.vdu, "count": n.count,
            })),
            "hostKeyCheck": self.host_key_check.to_string(),
            "hostKey": self.host_key,
            "credentials": {
                "driverKey": !self.driver_keys.is_empty(),
                "passwordStored": self.password.is_some(),
                "identityFile": self.identity_file,
            },
            "driverKeys": self.driver_keys,
            "rotationPending": pending.unwrap_or(false),
            "registered": self.registered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v4_text_and_differ() {
        let a = new_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, new_id());
    }

    #[test]
    fn a_record_keeps_no_password_in_clear_and_targets_strictly() {
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("state.key"));
        let store = Store::open_with_key(&d.path().join("state"), key).unwrap();
        let rec = EeRecord {
            id: new_id(),
            name: "e1".into(),
            host: "198.18.0.1".into(),
            port: 2222,
            user: "ops".into(),
            password: Some("Pw-ee-1".into()),
            identity_file: None,
            host_key_check: HostKeyCheck::AcceptNew,
            host_key: None,
            namespace: Some(".ns.vnf.vdu-1".into()),
            driver_keys: vec![],
            registered: "now".into(),
        };
        let reg = Registry { ees: vec![rec.clone()] };
        reg.save(&store).unwrap();
        let text = std::fs::read_to_string(store.doc_path(DOC_ID, DOC_KIND)).unwrap();
        assert!(!text.contains("Pw-ee-1"), "{text}");
        assert!(!format!("{rec:?}").contains("Pw-ee-1"));
        assert!(!rec.shown(None).to_string().contains("Pw-ee-1"));
        let back = Registry::load(&store).unwrap();
        let h = back.find("e1", "--ee").unwrap().to_host(&store, None);
        assert_eq!((h.port, h.host_key_check), (2222, HostKeyCheck::Strict));
        assert_eq!(h.auth.password.unwrap().expose(), "Pw-ee-1");
        assert!(back.find(&rec.id, "--ee").is_ok());
        assert!(back.find("nope", "--ee").unwrap_err().to_string().contains("registered: e1"));
        let f = Namespace::parse(".ns").unwrap();
        assert_eq!(back.within(Some(&f)).len(), 1);
        assert_eq!(back.within(Some(&Namespace::parse(".other").unwrap())).len(), 0);
    }
}
