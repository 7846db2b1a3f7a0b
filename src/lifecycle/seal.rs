//! Sealing the secrets of a state document. Later operations need the node passwords, proxy
//! URLs and bearer token an earlier one was given, so the store keeps them, but never in clear:
//! every secret value is replaced by `{"sealed": "v1:<nonce>:<ciphertext>"}` (XChaCha20-Poly1305,
//! a random 24-byte nonce per value, the value's JSON pointer as associated data so a sealed
//! value cannot be moved to another field). The store seals every document it writes and
//! unseals every document it reads, so all document kinds are covered by this one walk.
//!
//! What is secret is decided by shape, not by document type, so a new field is covered the day
//! it is added: any value under a key whose name says secret (`password`, `token`,
//! `certificate_key`, …, see [`crate::secret::is_secret_name`]), any string holding a URL with
//! userinfo (a proxy `http://user:pass@host`), and any `name=value` string whose name says
//! secret (a `helmparameter` entry `db.password=…`). Sealing more than needed costs only
//! readability.
//!
//! A document written before sealing existed loads as it is (nothing in it is sealed) and is
//! sealed on its next write. Pure: unit-tested.

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde_json::{Map, Value};

use crate::secret::is_secret_name;

/// The version tag of the sealed form; a later format gets another.
const V1: &str = "v1";
/// The one key of a sealed object.
const SEALED: &str = "sealed";

/// A 32-byte state key, ready to seal and unseal.
pub struct Sealer {
    cipher: XChaCha20Poly1305,
}

/// Why a document could not be unsealed: the JSON pointer of the value and what is wrong.
#[derive(Debug, PartialEq)]
pub struct UnsealError {
    pub pointer: String,
    pub message: String,
}

impl Sealer {
    pub fn new(key: &[u8; 32]) -> Sealer {
        Sealer { cipher: XChaCha20Poly1305::new(key.into()) }
    }

    /// `doc` with every secret value sealed.
    pub fn seal(&self, doc: &Value) -> Value {
        self.seal_at(doc, "", false)
    }

    /// `doc` with every sealed value opened. A wrong key or a changed ciphertext is an error,
    /// never an empty or partial value.
    pub fn unseal(&self, doc: Value) -> Result<Value, UnsealError> {
        unseal_at(doc, "", &|text, ptr| self.open(text, ptr))
    }

    fn seal_at(&self, v: &Value, ptr: &str, secret: bool) -> Value {
        if !v.is_null() && (secret || looks_sealed(v) || is_secret_string(v)) {
            return self.close(v, ptr);
        }
        match v {
            Value::Object(m) => Value::Object(
                m.iter().map(|(k, x)| (k.clone(), self.seal_at(x, &child(ptr, k), is_secret_name(k)))).collect(),
            ),
            Value::Array(a) => Value::Array(
                a.iter().enumerate().map(|(i, x)| self.seal_at(x, &child(ptr, &i.to_string()), false)).collect(),
            ),
            other => other.clone(),
        }
    }

    /// The sealed form of `v` (its JSON text, so numbers and objects come back as they were).
    fn close(&self, v: &Value, ptr: &str) -> Value {
        let nonce = XNonce::generate();
        let msg = serde_json::to_vec(v).expect("a JSON value serializes");
        let ct =
            self.cipher.encrypt(&nonce, Payload { msg: &msg, aad: aad(ptr).as_bytes() }).expect("sealing cannot fail");
        let mut m = Map::new();
        m.insert(SEALED.into(), Value::String(format!("{V1}:{}:{}", hex::encode(nonce), hex::encode(ct))));
        Value::Object(m)
    }

    fn open(&self, text: &str, ptr: &str) -> Result<Value, String> {
        let mut parts = text.splitn(3, ':');
        let (Some(V1), Some(n), Some(c)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("is not a v1 sealed value".into());
        };
        let (Ok(n), Ok(c)) = (hex::decode(n), hex::decode(c)) else {
            return Err("is not a v1 sealed value (bad hex)".into());
        };
        let nonce = XNonce::try_from(n.as_slice()).map_err(|_| "has a nonce of the wrong length".to_string())?;
        let plain = self
            .cipher
            .decrypt(&nonce, Payload { msg: &c, aad: aad(ptr).as_bytes() })
            .map_err(|_| "cannot be opened with this key (another key sealed it, or it was changed)".to_string())?;
        serde_json::from_slice(&plain).map_err(|e| format!("opened to something that is not JSON: {e}"))
    }
}

/// Whether anything in `doc` is sealed (a document needs the key to be read).
pub fn has_sealed(doc: &Value) -> bool {
    match doc {
        v if sealed_text(v).is_some() => true,
        Value::Object(m) => m.values().any(has_sealed),
        Value::Array(a) => a.iter().any(has_sealed),
        _ => false,
    }
}

/// Whether anything in `doc` would be sealed (a document needs the key to be written).
pub fn has_secrets(doc: &Value) -> bool {
    match doc {
        v if looks_sealed(v) || is_secret_string(v) => true,
        Value::Object(m) => m.iter().any(|(k, x)| (is_secret_name(k) && !x.is_null()) || has_secrets(x)),
        Value::Array(a) => a.iter().any(has_secrets),
        _ => false,
    }
}

fn is_secret_string(v: &Value) -> bool {
    matches!(v, Value::String(s) if crate::secret::is_secret_string(s))
}

/// A value written in the sealed form. Request data that only looks like it is sealed again on
/// write, so it comes back as it was instead of failing to open.
fn looks_sealed(v: &Value) -> bool {
    sealed_text(v).is_some()
}

/// The text of a sealed value: the one key `sealed`, a string in a known version.
fn sealed_text(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get(SEALED)?.as_str().filter(|t| t.starts_with(&format!("{V1}:"))),
        _ => None,
    }
}

fn unseal_at(v: Value, ptr: &str, open: &dyn Fn(&str, &str) -> Result<Value, String>) -> Result<Value, UnsealError> {
    if let Some(text) = sealed_text(&v) {
        return open(text, ptr).map_err(|message| UnsealError { pointer: ptr.to_string(), message });
    }
    Ok(match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, x)| {
                    let p = child(ptr, &k);
                    unseal_at(x, &p, open).map(|x| (k, x))
                })
                .collect::<Result<_, _>>()?,
        ),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .enumerate()
                .map(|(i, x)| unseal_at(x, &child(ptr, &i.to_string()), open))
                .collect::<Result<_, _>>()?,
        ),
        other => other,
    })
}

/// RFC 6901 JSON pointer of `key` under `ptr`.
fn child(ptr: &str, key: &str) -> String {
    format!("{ptr}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn aad(ptr: &str) -> String {
    format!("mgmt-driver state {V1} {ptr}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "version": 1,
            "params": {
                "master_node": {"username": "ubuntu", "password": "N0de-Pw!", "aspect_id": "m"},
                "proxy": {"http_proxy": "http://u:Pr0xy-Pw@proxy:3128", "no_proxy": "10.0.0.1"},
                "helmparameter": ["replicas=2", "db.password=Db-Pw"],
                "values": {"tls": {"key": {"pem": "Tls-Key"}}},
                "not_secret": {"sealed": "v1:looks sealed but is request data"},
                "empty_password": null,
            },
            "bearer_token": "Bearer-Tok",
            "port": 6443,
        })
    }

    const SECRETS: [&str; 6] = ["N0de-Pw!", "Pr0xy-Pw", "Db-Pw", "Tls-Key", "Bearer-Tok", "looks sealed but"];

    #[test]
    fn round_trip_leaves_nothing_secret_in_the_text() {
        let s = Sealer::new(&[7; 32]);
        let sealed = s.seal(&doc());
        let text = serde_json::to_string(&sealed).unwrap();
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("\"username\":\"ubuntu\"") && text.contains("\"port\":6443"), "{text}");
        assert!(text.contains("\"replicas=2\"") && text.contains("\"no_proxy\":\"10.0.0.1\""), "{text}");
        assert!(sealed["params"]["empty_password"].is_null(), "null stays null");
        assert!(has_sealed(&sealed) && has_secrets(&doc()));
        assert!(!has_sealed(&json!({"sealed": "a value of another shape", "password": "x"})));
        assert_eq!(s.unseal(sealed).unwrap(), doc());
    }

    #[test]
    fn every_value_gets_its_own_nonce() {
        let s = Sealer::new(&[7; 32]);
        let a = s.seal(&json!({"password": "x"}));
        let b = s.seal(&json!({"password": "x"}));
        assert_ne!(a, b);
    }

    #[test]
    fn a_wrong_key_is_an_error_naming_the_field() {
        let sealed = Sealer::new(&[7; 32]).seal(&doc());
        let e = Sealer::new(&[8; 32]).unseal(sealed).unwrap_err();
        assert!(e.message.contains("cannot be opened with this key"), "{e:?}");
        assert!(e.pointer.starts_with('/'), "{e:?}");
    }

    #[test]
    fn a_changed_or_moved_ciphertext_is_refused() {
        let s = Sealer::new(&[7; 32]);
        let sealed = s.seal(&json!({"a": {"password": "x"}, "b": {"password": "y"}}));
        // One character of the ciphertext changed.
        let mut bad = sealed.clone();
        let t = bad["a"]["password"]["sealed"].as_str().unwrap().to_string();
        let last = if t.ends_with('0') { '1' } else { '0' };
        bad["a"]["password"]["sealed"] = json!(format!("{}{last}", &t[..t.len() - 1]));
        assert_eq!(s.unseal(bad).unwrap_err().pointer, "/a/password");
        // A sealed value moved to another field (its pointer is the associated data).
        let mut moved = sealed.clone();
        moved["b"]["password"] = sealed["a"]["password"].clone();
        assert_eq!(s.unseal(moved).unwrap_err().pointer, "/b/password");
        // Not the sealed format at all.
        let e = s.unseal(json!({"password": {"sealed": "v1:zz:00"}})).unwrap_err();
        assert!(e.message.contains("not a v1 sealed value"), "{e:?}");
    }
}
