//! The driver's own SSH key pair (OSM's connector keeps one to inject into new VMs): made on
//! first use with `ssh-key` (through `russh::keys`; never `ssh-keygen`), ed25519 by default or
//! RSA 4096, and kept in the state store as `driver.key.json` (0600, its private half sealed
//! with the state key like every secret there). The public half is one OpenSSH line for
//! cloud-init.
//!
//! A rotation keeps two keys: `current` (the new one, installed first) and `previous` (still
//! offered at login) until every registered machine holds the new one and has had the old one
//! removed; only then is `previous` dropped (see `ee/rotate.rs`).

use serde::{Deserialize, Serialize};

use crate::ee::authorized_keys::COMMENT;
use crate::error::{Error, Result};
use crate::lifecycle::state::{now_rfc3339, Store};
use crate::secret::Secret;

/// Where the key document lives in the store: `driver.key.json`.
pub const DOC_ID: &str = "driver";
pub const DOC_KIND: &str = "key";

/// Which kind of key to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// ssh-ed25519 (the default).
    Ed25519,
    /// RSA 4096 (rsa-sha2-256/512 at login), for servers without ed25519.
    Rsa,
}

/// One key pair as stored.
#[derive(Clone, Serialize, Deserialize)]
pub struct DriverKey {
    /// SHA256 fingerprint of the public key, as `ssh-keygen -l` shows it.
    pub fingerprint: String,
    #[serde(rename = "type")]
    pub kind: KeyType,
    /// The public key, one OpenSSH line (`ssh-ed25519 AAAA… mgmt-driver`).
    pub openssh: String,
    /// The private key in OpenSSH format; a secret name, so the store seals it.
    pub private_key: String,
    pub created: String,
}

impl std::fmt::Debug for DriverKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverKey")
            .field("fingerprint", &self.fingerprint)
            .field("kind", &self.kind)
            .field("openssh", &self.openssh)
            .field("private_key", &crate::secret::MASK)
            .field("created", &self.created)
            .finish()
    }
}

/// The stored document: the key in use and, during a rotation, the one being retired.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyDoc {
    pub current: DriverKey,
    #[serde(default)]
    pub previous: Option<DriverKey>,
}

impl DriverKey {
    /// Make a new key pair.
    pub fn generate(kind: KeyType) -> Result<DriverKey> {
        use russh::keys::ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey};
        let alg = match kind {
            KeyType::Ed25519 => Algorithm::Ed25519,
            KeyType::Rsa => Algorithm::Rsa { hash: Some(HashAlg::Sha512) },
        };
        let fail =
            |e: &dyn std::fmt::Display| Error::input("key", "generate", format!("cannot make a {kind:?} key: {e}"));
        let mut key = PrivateKey::random(&mut rand::rng(), alg).map_err(|e| fail(&e))?;
        key.set_comment(COMMENT);
        let openssh = key.public_key().to_openssh().map_err(|e| fail(&e))?;
        let private = key.to_openssh(LineEnding::LF).map_err(|e| fail(&e))?;
        Ok(DriverKey {
            fingerprint: key.public_key().fingerprint(HashAlg::Sha256).to_string(),
            kind,
            openssh,
            private_key: private.to_string(),
            created: now_rfc3339(),
        })
    }

    /// The private key for a login (in memory only).
    pub fn secret(&self) -> Secret {
        Secret::new(self.private_key.clone())
    }

    /// `type base64` of the public key: what identifies our line in `authorized_keys`.
    pub fn blob(&self) -> &str {
        let mut it = self.openssh.split(' ');
        let (t, b) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
        &self.openssh[..t.len() + 1 + b.len()]
    }
}

impl KeyDoc {
    pub fn load(store: &Store) -> Result<Option<KeyDoc>> {
        store.load_doc(DOC_ID, DOC_KIND)
    }

    pub fn save(&self, store: &Store) -> Result<()> {
        store.save_doc(DOC_ID, DOC_KIND, self)
    }

    /// The stored key, made (and saved) now when there is none. `true` when it was made.
    pub fn load_or_create(store: &Store, kind: KeyType) -> Result<(KeyDoc, bool)> {
        if let Some(d) = KeyDoc::load(store)? {
            return Ok((d, false));
        }
        let doc = KeyDoc { current: DriverKey::generate(kind)?, previous: None };
        doc.save(store)?;
        Ok((doc, true))
    }

    /// Our keys as a login offers them: the current one first, then the one being retired.
    pub fn login_keys(&self) -> Vec<Secret> {
        std::iter::once(&self.current).chain(self.previous.as_ref()).map(DriverKey::secret).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ed25519_key_is_one_openssh_line_and_its_private_half_loads() {
        let k = DriverKey::generate(KeyType::Ed25519).unwrap();
        assert!(k.openssh.starts_with("ssh-ed25519 AAAA") && k.openssh.ends_with(" mgmt-driver"), "{}", k.openssh);
        assert!(!k.openssh.contains('\n'));
        assert_eq!(k.blob().split(' ').count(), 2);
        assert!(k.fingerprint.starts_with("SHA256:"));
        let back = russh::keys::decode_secret_key(&k.private_key, None).unwrap();
        assert_eq!(back.public_key().to_openssh().unwrap(), k.openssh);
        // Debug never shows the private half.
        assert!(!format!("{k:?}").contains("PRIVATE"));
        // Two keys are two keys.
        assert_ne!(DriverKey::generate(KeyType::Ed25519).unwrap().fingerprint, k.fingerprint);
    }

    #[test]
    fn the_key_is_made_once_and_sealed_in_the_store() {
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("state.key"));
        let store = Store::open_with_key(&d.path().join("state"), key).unwrap();
        let (a, made) = KeyDoc::load_or_create(&store, KeyType::Ed25519).unwrap();
        assert!(made);
        let (b, made) = KeyDoc::load_or_create(&store, KeyType::Rsa).unwrap();
        assert!(!made, "a second call keeps the first key");
        assert_eq!(a.current.openssh, b.current.openssh);
        let text = std::fs::read_to_string(store.doc_path(DOC_ID, DOC_KIND)).unwrap();
        assert!(!text.contains("PRIVATE KEY") && text.contains("sealed"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.doc_path(DOC_ID, DOC_KIND)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(b.login_keys().len(), 1);
    }
}
