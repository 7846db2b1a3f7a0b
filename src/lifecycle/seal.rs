//! Sealing a state document. Later operations need the node passwords, proxy URLs and bearer
//! token an earlier one was given, so the store keeps them, but never in clear, and they are
//! only ever used with the document they were written in: every secret value is replaced by
//! `{"sealed": "v2:<nonce>:<ciphertext>"}` (XChaCha20-Poly1305, a random 24-byte nonce per
//! value), and the whole document is authenticated by a MAC the store keeps in it
//! (`state_mac`). The store seals every document it writes and opens every document it reads,
//! so all document kinds are covered by this one walk.
//!
//! Why both: sealing alone leaves the unsealed fields free to change, and they decide where a
//! sealed password is sent (`masternode_ip`, the nodes' addresses): whoever can write the state
//! directory could point a heal at their own host and be sent the password. So:
//! - each sealed value's associated data is the document kind, the instance id and its JSON
//!   pointer (length-prefixed, so no two triples frame alike): a value moved to another field,
//!   another kind or another instance's document does not open;
//! - `state_mac` is HMAC-SHA256, under a subkey of the state key (its own domain, so no MAC is
//!   ever a ciphertext's key), over the kind, the instance id and a canonical serialization of
//!   the sealed document (object keys sorted, no white space). It is checked before anything in
//!   the document is used: a changed address, a removed or added field, a document copied from
//!   another instance all fail it;
//! - an authenticated document holds no secret in clear: a secret-named field that is not
//!   sealed is refused even under a good MAC (only the store writes these documents, and it
//!   seals them all).
//!
//! What is secret is decided by shape, not by document type, so a new field is covered the day
//! it is added: any value under a key whose name says secret (`password`, `token`,
//! `certificate_key`, …, see [`crate::secret::is_secret_name`]), any string holding a URL with
//! userinfo (a proxy `http://user:pass@host`), and any `name=value` string whose name says
//! secret (a `helmparameter` entry `db.password=…`). Sealing more than needed costs only
//! readability.
//!
//! Documents of earlier versions (`v1` values bound to their pointer only, no MAC; or plain
//! documents from before sealing) are opened only by [`Sealer::open_legacy`], which the
//! operator's `mgmt-driver state reseal` uses to upgrade them. Pure: unit-tested.

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::secret::is_secret_name;

/// The version tag of values bound to their pointer only (read for upgrading, never written).
const V1: &str = "v1";
/// The version tag of values bound to kind, instance and pointer, in a MACed document.
const V2: &str = "v2";
/// The one key of a sealed object.
const SEALED: &str = "sealed";
/// The top-level field holding the document's MAC (`v2:<hex>`); no document kind has it.
pub const MAC_FIELD: &str = "state_mac";
/// What the MAC subkey is derived for: HMAC-SHA256(state key, this).
const MAC_KEY_DOMAIN: &[u8] = b"mgmt-driver state-doc-mac v1";

type HmacSha256 = Hmac<Sha256>;

/// Where a document belongs: what its sealed values and its MAC are bound to.
#[derive(Clone, Copy, Debug)]
pub struct DocAt<'a> {
    /// The document kind (`""` for the cluster, `cnf`, …).
    pub kind: &'a str,
    /// The instance (or other owner) id the document is filed under.
    pub id: &'a str,
}

/// A 32-byte state key, ready to seal, open and authenticate.
pub struct Sealer {
    cipher: XChaCha20Poly1305,
    mac_key: [u8; 32],
}

/// Why a document could not be opened: the JSON pointer of the value and what is wrong.
#[derive(Debug, PartialEq)]
pub struct UnsealError {
    pub pointer: String,
    pub message: String,
}

impl UnsealError {
    fn at(pointer: &str, message: impl Into<String>) -> UnsealError {
        UnsealError { pointer: pointer.to_string(), message: message.into() }
    }
}

impl Sealer {
    pub fn new(key: &[u8; 32]) -> Sealer {
        let mut m = <HmacSha256 as hmac::KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
        m.update(MAC_KEY_DOMAIN);
        let mac_key = m.finalize().into_bytes().into();
        Sealer { cipher: XChaCha20Poly1305::new(key.into()), mac_key }
    }

    /// `doc` (a JSON object) with every secret value sealed to `at`, and its MAC.
    pub fn seal_doc(&self, at: DocAt, doc: &Value) -> Result<Value, String> {
        let Value::Object(fields) = doc else { return Err("is not a JSON object".into()) };
        if fields.contains_key(MAC_FIELD) {
            return Err(format!("has a field {MAC_FIELD}, which the store keeps for itself"));
        }
        let sealed = self.seal_at(doc, "", false, &|ptr| aad_v2(at, ptr));
        // The MAC is over the document as a reader will parse it: numbers read back as the same
        // text reads back (a float may not survive one round trip bit for bit, but the second
        // parse of the same text gives the same value), so writer and reader agree.
        let reparsed: Value =
            serde_json::from_str(&serde_json::to_string(&sealed).expect("JSON serializes")).expect("JSON parses");
        let mut out = Map::new();
        out.insert(MAC_FIELD.into(), Value::String(format!("{V2}:{}", hex::encode(self.mac(at, &reparsed)))));
        let Value::Object(sealed) = sealed else { unreachable!("an object seals to an object") };
        out.extend(sealed);
        Ok(Value::Object(out))
    }

    /// A document written by [`Sealer::seal_doc`] for `at`, checked and opened: its MAC first,
    /// then that no secret is in clear, then every sealed value. Any failure is an error, never
    /// an empty or partial value.
    pub fn open_doc(&self, at: DocAt, doc: Value) -> Result<Value, UnsealError> {
        let Value::Object(mut fields) = doc else { return Err(UnsealError::at("", "is not a JSON object")) };
        let mac_ptr = child("", MAC_FIELD);
        let mac = match fields.shift_remove(MAC_FIELD) {
            Some(Value::String(s)) => s,
            _ => {
                return Err(UnsealError::at(&mac_ptr, "is missing or not a string: the document is not authenticated"))
            }
        };
        let tag = mac
            .strip_prefix(&format!("{V2}:"))
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| UnsealError::at(&mac_ptr, format!("is not a {V2} MAC")))?;
        let doc = Value::Object(fields);
        if !self.verify(at, &doc, &tag) {
            return Err(UnsealError::at(
                &mac_ptr,
                "does not match the document: it was changed outside mgmt-driver, or copied from another \
                 instance's or kind's document, or sealed with another state key; nothing in it is used",
            ));
        }
        if let Some(ptr) = plaintext_secret(&doc, "", false) {
            return Err(UnsealError::at(
                &ptr,
                "is a secret in clear in a sealed document (the store seals every secret it writes): refused",
            ));
        }
        unseal_at(doc, "", &|text, ptr| self.open(text, V2, &aad_v2(at, ptr)))
    }

    /// A document of an earlier version (no MAC; `v1` values, bound to their pointer only, or
    /// none), opened for upgrading. Never used to run an operation on: the document is not
    /// authenticated, so only the operator's `state reseal` reads it this way.
    pub fn open_legacy(&self, doc: Value) -> Result<Value, UnsealError> {
        unseal_at(doc, "", &|text, ptr| self.open(text, V1, &aad_v1(ptr)))
    }

    fn seal_at(&self, v: &Value, ptr: &str, secret: bool, aad: &dyn Fn(&str) -> Vec<u8>) -> Value {
        if !v.is_null() && (secret || looks_sealed(v) || is_secret_string(v)) {
            return self.close(v, &aad(ptr));
        }
        match v {
            Value::Object(m) => Value::Object(
                m.iter().map(|(k, x)| (k.clone(), self.seal_at(x, &child(ptr, k), is_secret_name(k), aad))).collect(),
            ),
            Value::Array(a) => Value::Array(
                a.iter().enumerate().map(|(i, x)| self.seal_at(x, &child(ptr, &i.to_string()), false, aad)).collect(),
            ),
            other => other.clone(),
        }
    }

    /// The sealed form of `v` (its JSON text, so numbers and objects come back as they were).
    fn close(&self, v: &Value, aad: &[u8]) -> Value {
        let nonce = XNonce::generate();
        let msg = serde_json::to_vec(v).expect("a JSON value serializes");
        let ct = self.cipher.encrypt(&nonce, Payload { msg: &msg, aad }).expect("sealing cannot fail");
        let mut m = Map::new();
        m.insert(SEALED.into(), Value::String(format!("{V2}:{}:{}", hex::encode(nonce), hex::encode(ct))));
        Value::Object(m)
    }

    fn open(&self, text: &str, version: &str, aad: &[u8]) -> Result<Value, String> {
        let mut parts = text.splitn(3, ':');
        let (Some(v), Some(n), Some(c)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("is not a {version} sealed value"));
        };
        if v != version {
            return Err(format!("is a {v} sealed value where {version} values are expected"));
        }
        let (Ok(n), Ok(c)) = (hex::decode(n), hex::decode(c)) else {
            return Err(format!("is not a {version} sealed value (bad hex)"));
        };
        let nonce = XNonce::try_from(n.as_slice()).map_err(|_| "has a nonce of the wrong length".to_string())?;
        let plain = self.cipher.decrypt(&nonce, Payload { msg: &c, aad }).map_err(|_| {
            "cannot be opened with this key (another key sealed it, it was changed, or it was moved here from \
             another field or document)"
                .to_string()
        })?;
        serde_json::from_slice(&plain).map_err(|e| format!("opened to something that is not JSON: {e}"))
    }

    fn mac_of(&self, at: DocAt, doc: &Value) -> HmacSha256 {
        let mut m = <HmacSha256 as hmac::KeyInit>::new_from_slice(&self.mac_key).expect("HMAC takes any key length");
        let mut body = Vec::new();
        canonical(doc, &mut body);
        for part in [b"mgmt-driver state-doc v2".as_slice(), at.kind.as_bytes(), at.id.as_bytes(), &body] {
            m.update(&(part.len() as u64).to_be_bytes());
            m.update(part);
        }
        m
    }

    fn mac(&self, at: DocAt, doc: &Value) -> Vec<u8> {
        self.mac_of(at, doc).finalize().into_bytes().to_vec()
    }

    /// Constant-time comparison (hmac's own).
    fn verify(&self, at: DocAt, doc: &Value, tag: &[u8]) -> bool {
        self.mac_of(at, doc).verify_slice(tag).is_ok()
    }
}

/// Whether `doc` carries the store's MAC (it was written by a store that authenticates, and can
/// only be read with the key).
pub fn is_authenticated(doc: &Value) -> bool {
    doc.get(MAC_FIELD).is_some()
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

/// The pointer of the first secret in clear in a sealed `doc` (`secret`: `v` is under a
/// secret-named key), the same rule as sealing: the sealed form of a document has none.
fn plaintext_secret(v: &Value, ptr: &str, secret: bool) -> Option<String> {
    if v.is_null() || looks_sealed(v) {
        return None;
    }
    if secret || is_secret_string(v) {
        return Some(ptr.to_string());
    }
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| plaintext_secret(x, &child(ptr, k), is_secret_name(k))),
        Value::Array(a) => {
            a.iter().enumerate().find_map(|(i, x)| plaintext_secret(x, &child(ptr, &i.to_string()), false))
        }
        _ => None,
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
        Value::Object(m) if m.len() == 1 => {
            m.get(SEALED)?.as_str().filter(|t| [V1, V2].iter().any(|v| t.starts_with(&format!("{v}:"))))
        }
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

fn aad_v1(ptr: &str) -> Vec<u8> {
    format!("mgmt-driver state {V1} {ptr}").into_bytes()
}

/// Kind, instance and pointer, each length-prefixed: no two triples give the same bytes.
fn aad_v2(at: DocAt, ptr: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for part in [b"mgmt-driver state v2".as_slice(), at.kind.as_bytes(), at.id.as_bytes(), ptr.as_bytes()] {
        out.extend((part.len() as u64).to_be_bytes());
        out.extend(part);
    }
    out
}

/// One text per JSON value, whatever order its object keys were in: keys sorted (by their
/// UTF-8 bytes), no white space, strings and numbers as serde_json writes them.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(k).expect("a string serializes"));
                out.push(b':');
                canonical(&m[k], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).expect("a scalar serializes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const I1: DocAt = DocAt { kind: "", id: "i1" };
    const I2: DocAt = DocAt { kind: "", id: "i2" };

    fn doc() -> Value {
        json!({
            "version": 1,
            "params": {
                "master_node": {"username": "ubuntu", "password": "N0de-Pw!", "aspect_id": "m", "masternode_ip": "192.0.2.11"},
                "proxy": {"http_proxy": "http://u:Pr0xy-Pw@proxy:3128", "no_proxy": "10.0.0.1"},
                "helmparameter": ["replicas=2", "db.password=Db-Pw"],
                "values": {"tls": {"key": {"pem": "Tls-Key"}}},
                "not_secret": {"sealed": "v1:looks sealed but is request data"},
                "also_not": {"sealed": "v2:looks sealed too"},
                "empty_password": null,
                "ratio": 0.1, "big": 1.7976931348623157e308, "neg": -3,
            },
            "bearer_token": "Bearer-Tok",
            "credential_ref_token": "Ref-Tok",
            "port": 6443,
        })
    }

    const SECRETS: [&str; 8] =
        ["N0de-Pw!", "Pr0xy-Pw", "Db-Pw", "Tls-Key", "Bearer-Tok", "Ref-Tok", "looks sealed but", "looks sealed too"];

    fn sealer() -> Sealer {
        Sealer::new(&[7; 32])
    }

    /// What only someone holding the key could do: give a changed document a good MAC again.
    /// Shows the layer under the MAC (each value's binding, the clear-secret check) holds too.
    fn remac(s: &Sealer, at: DocAt, mut doc: Value) -> Value {
        doc.as_object_mut().unwrap().shift_remove(MAC_FIELD);
        let tag = s.mac(at, &doc);
        doc[MAC_FIELD] = json!(format!("v2:{}", hex::encode(tag)));
        doc
    }

    /// The document as the store writes it and reads it back: through its text.
    fn through_text(v: &Value) -> Value {
        serde_json::from_slice(&serde_json::to_vec_pretty(v).unwrap()).unwrap()
    }

    #[test]
    fn round_trip_leaves_nothing_secret_in_the_text() {
        let s = sealer();
        let sealed = s.seal_doc(I1, &doc()).unwrap();
        let text = serde_json::to_string(&sealed).unwrap();
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("\"username\":\"ubuntu\"") && text.contains("\"port\":6443"), "{text}");
        assert!(text.contains("\"replicas=2\"") && text.contains("\"no_proxy\":\"10.0.0.1\""), "{text}");
        assert!(text.starts_with("{\"state_mac\":\"v2:"), "the MAC is the first field: {text}");
        assert!(sealed["params"]["empty_password"].is_null(), "null stays null");
        assert!(has_sealed(&sealed) && is_authenticated(&sealed) && !is_authenticated(&doc()));
        assert!(!has_sealed(&json!({"sealed": "a value of another shape", "password": "x"})));
        assert_eq!(s.open_doc(I1, through_text(&sealed)).unwrap(), doc());
    }

    #[test]
    fn every_value_gets_its_own_nonce() {
        let s = sealer();
        let a = s.seal_doc(I1, &json!({"password": "x"})).unwrap();
        let b = s.seal_doc(I1, &json!({"password": "x"})).unwrap();
        assert_ne!(a["password"], b["password"]);
    }

    #[test]
    fn the_mac_does_not_depend_on_key_order_or_white_space() {
        let s = sealer();
        let sealed = s.seal_doc(I1, &json!({"b": 1, "a": {"y": [1, 2], "x": "t"}, "password": "p"})).unwrap();
        let m = sealed.as_object().unwrap();
        let mut reordered = Map::new();
        for k in m.keys().rev() {
            reordered.insert(k.clone(), m[k].clone());
        }
        let compact: Value = serde_json::from_str(&serde_json::to_string(&Value::Object(reordered)).unwrap()).unwrap();
        assert_eq!(s.open_doc(I1, compact).unwrap()["password"], "p");
    }

    #[test]
    fn a_wrong_key_is_an_error_naming_the_mac() {
        let sealed = sealer().seal_doc(I1, &doc()).unwrap();
        let e = Sealer::new(&[8; 32]).open_doc(I1, sealed).unwrap_err();
        assert_eq!(e.pointer, "/state_mac");
        assert!(e.message.contains("another state key"), "{e:?}");
    }

    #[test]
    fn a_changed_unsealed_field_is_refused() {
        let s = sealer();
        let mut bad = s.seal_doc(I1, &doc()).unwrap();
        bad["params"]["master_node"]["masternode_ip"] = json!("203.0.113.66");
        let e = s.open_doc(I1, bad).unwrap_err();
        assert_eq!(e.pointer, "/state_mac");
        assert!(e.message.contains("changed outside mgmt-driver"), "{e:?}");
        // Added and removed fields too.
        let mut added = s.seal_doc(I1, &doc()).unwrap();
        added["params"]["extra_host"] = json!("203.0.113.66");
        assert_eq!(s.open_doc(I1, added).unwrap_err().pointer, "/state_mac");
        let mut removed = s.seal_doc(I1, &doc()).unwrap();
        removed.as_object_mut().unwrap().shift_remove("port");
        assert_eq!(s.open_doc(I1, removed).unwrap_err().pointer, "/state_mac");
    }

    #[test]
    fn a_document_or_value_moved_to_another_instance_is_refused() {
        let s = sealer();
        let a = s.seal_doc(I1, &doc()).unwrap();
        // The whole document filed under another instance (or kind).
        assert_eq!(s.open_doc(I2, a.clone()).unwrap_err().pointer, "/state_mac");
        assert_eq!(s.open_doc(DocAt { kind: "cnf", id: "i1" }, a.clone()).unwrap_err().pointer, "/state_mac");
        // One sealed value copied into another instance's document, same field.
        let mut b = s.seal_doc(I2, &json!({"params": {"master_node": {"password": "other"}}})).unwrap();
        b["params"]["master_node"]["password"] = a["params"]["master_node"]["password"].clone();
        assert_eq!(s.open_doc(I2, b.clone()).unwrap_err().pointer, "/state_mac");
        // Even with a good MAC (the key's holder), the value is bound to instance i1.
        let e = s.open_doc(I2, remac(&s, I2, b)).unwrap_err();
        assert_eq!(e.pointer, "/params/master_node/password");
        assert!(e.message.contains("cannot be opened"), "{e:?}");
    }

    #[test]
    fn a_value_moved_to_another_field_or_kind_is_refused() {
        let s = sealer();
        let a = s.seal_doc(I1, &json!({"a": {"password": "x"}, "b": {"password": "y"}})).unwrap();
        let mut moved = a.clone();
        moved["b"]["password"] = a["a"]["password"].clone();
        assert_eq!(s.open_doc(I1, moved.clone()).unwrap_err().pointer, "/state_mac");
        assert_eq!(s.open_doc(I1, remac(&s, I1, moved)).unwrap_err().pointer, "/b/password");
        // Same instance, same pointer, another kind's document.
        let cnf = DocAt { kind: "cnf", id: "i1" };
        let mut other = s.seal_doc(cnf, &json!({"a": {"password": "z"}})).unwrap();
        other["a"]["password"] = a["a"]["password"].clone();
        assert_eq!(s.open_doc(cnf, remac(&s, cnf, other)).unwrap_err().pointer, "/a/password");
        // One character of a ciphertext changed.
        let mut bad = a.clone();
        let t = bad["a"]["password"]["sealed"].as_str().unwrap().to_string();
        let last = if t.ends_with('0') { '1' } else { '0' };
        bad["a"]["password"]["sealed"] = json!(format!("{}{last}", &t[..t.len() - 1]));
        assert_eq!(s.open_doc(I1, bad.clone()).unwrap_err().pointer, "/state_mac");
        assert_eq!(s.open_doc(I1, remac(&s, I1, bad)).unwrap_err().pointer, "/a/password");
    }

    #[test]
    fn a_secret_in_clear_in_a_sealed_document_is_refused() {
        let s = sealer();
        for (ptr, v) in [
            ("/params/master_node/password", json!("planted")),
            ("/params/proxy/http_proxy", json!("http://u:planted@203.0.113.66:3128")),
            ("/credential_ref_token", json!({"ref": "planted"})),
        ] {
            let mut bad = s.seal_doc(I1, &doc()).unwrap();
            *bad.pointer_mut(ptr).unwrap() = v;
            assert_eq!(s.open_doc(I1, bad.clone()).unwrap_err().pointer, "/state_mac", "{ptr}");
            let e = s.open_doc(I1, remac(&s, I1, bad)).unwrap_err();
            assert_eq!(e.pointer, ptr);
            assert!(e.message.contains("in clear"), "{e:?}");
        }
    }

    #[test]
    fn a_document_without_its_mac_is_refused() {
        let s = sealer();
        let mut bare = s.seal_doc(I1, &doc()).unwrap();
        bare.as_object_mut().unwrap().shift_remove(MAC_FIELD);
        assert_eq!(s.open_doc(I1, bare).unwrap_err().pointer, "/state_mac");
        assert_eq!(s.open_doc(I1, json!({"masternode_ip": "x"})).unwrap_err().pointer, "/state_mac");
        let mut junk = s.seal_doc(I1, &doc()).unwrap();
        junk[MAC_FIELD] = json!("v9:00");
        assert!(s.open_doc(I1, junk).unwrap_err().message.contains("not a v2 MAC"));
        assert!(s.seal_doc(I1, &json!({"state_mac": 1})).is_err(), "the store's field is its own");
        assert!(s.seal_doc(I1, &json!([1])).is_err());
    }

    /// A v1 document (values bound to their pointer only) as the previous version wrote it.
    fn v1_doc(s: &Sealer) -> Value {
        let v1 = |ptr: &str, v: &Value| {
            let nonce = XNonce::generate();
            let ct =
                s.cipher.encrypt(&nonce, Payload { msg: &serde_json::to_vec(v).unwrap(), aad: &aad_v1(ptr) }).unwrap();
            json!({"sealed": format!("v1:{}:{}", hex::encode(nonce), hex::encode(ct))})
        };
        json!({"masternode_ip": "192.0.2.11", "password": v1("/password", &json!("Old-Pw"))})
    }

    #[test]
    fn an_earlier_version_s_document_opens_only_for_upgrading() {
        let s = sealer();
        let old = v1_doc(&s);
        assert!(has_sealed(&old) && !is_authenticated(&old));
        let opened = s.open_legacy(old.clone()).unwrap();
        assert_eq!(opened, json!({"masternode_ip": "192.0.2.11", "password": "Old-Pw"}));
        assert_eq!(s.open_doc(I1, old.clone()).unwrap_err().pointer, "/state_mac");
        // A v1 value inside a v2 document does not open.
        let mut mixed = s.seal_doc(I1, &json!({"masternode_ip": "192.0.2.11", "password": "x"})).unwrap();
        mixed["password"] = old["password"].clone();
        let e = s.open_doc(I1, remac(&s, I1, mixed)).unwrap_err();
        assert!(e.pointer == "/password" && e.message.contains("v1 sealed value"), "{e:?}");
        // Not the sealed format at all.
        let e = s.open_legacy(json!({"password": {"sealed": "v1:zz:00"}})).unwrap_err();
        assert!(e.message.contains("not a v1 sealed value"), "{e:?}");
    }

    #[test]
    fn kind_id_and_pointer_are_framed_unambiguously() {
        assert_ne!(aad_v2(DocAt { kind: "a", id: "b/c" }, ""), aad_v2(DocAt { kind: "a", id: "b" }, "/c"));
        assert_ne!(aad_v2(DocAt { kind: "ab", id: "" }, ""), aad_v2(DocAt { kind: "a", id: "b" }, ""));
    }
}
