//! A string that must never be printed. `Debug`/`Display` show a mask, so a secret that slips
//! into a log line, an event or an error message leaks nothing.
//!
//! Also what counts as a secret inside a JSON document (a request, a state document), decided by
//! shape: a value under a secret-named key, a URL with userinfo, a `name=value` string with a
//! secret name. The state store seals those values ([`crate::lifecycle::seal`]); `Debug` of a
//! struct holding such a document shows them masked ([`MaskedJson`]).

use std::fmt;

use serde_json::Value;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

pub use crate::mask::MASK;

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The only way to the value. Call it at the last moment, where the bytes go on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

/// Key names that hold secrets. The name is cut into words (at anything but letters and digits,
/// and where a lower-case letter meets an upper-case one), compared lower-case: a name is secret
/// when its letters hold `password`, `passphrase`, `secret`, `token`, `credential`, `apikey`,
/// `privatekey` (so `masternode_password`, `bearerToken`, `db.password` count), or when its last
/// word is exactly `key`, `pass`, `pwd`, `pw` or `psk` (`certificate-key`, `tls.key`,
/// `db_pass`; not `host_key_check`). A word that only ends so (`pubkey`, `hostkey`, `compass`)
/// is not a secret, nor is a `key` whose word before says it is public (`public_key`,
/// `publicKey`, `host_key`, `ssh_pub_key`): an EE's public key in a primitive's result must stay
/// readable, in every output and in the store alike (this is the one rule all of them use).
/// `credential`
/// covers a cluster's `masternode_credential_ref`, a bearer secret (cluster/credential_ref.rs).
/// Generous otherwise: treating a value as secret costs only readability.
pub fn is_secret_name(key: &str) -> bool {
    const CONTAINS: [&str; 9] =
        ["password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "privatekey", "privkey"];
    const WORDS: [&str; 5] = ["key", "pass", "pwd", "pw", "psk"];
    const PUBLIC: [&str; 3] = ["public", "pub", "host"];
    let joined: String = key.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    if CONTAINS.iter().any(|s| joined.contains(s)) {
        return true;
    }
    let w: Vec<String> = words(key).collect();
    match w.as_slice() {
        [.., before, last] if last == "key" && PUBLIC.contains(&before.as_str()) => false,
        [.., last] => WORDS.contains(&last.as_str()),
        [] => false,
    }
}

/// The words of a key name, lower-case: split at every character that is not a letter or a
/// digit, and between a lower-case letter or digit and the upper-case letter after it.
fn words(key: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_ascii_alphanumeric() {
            out.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    out.push(cur);
    out.into_iter().filter(|w| !w.is_empty())
}

/// A string that is itself a secret: a URL with userinfo (`http://user:pass@proxy`),
/// `name=value` with a secret name (a `helmparameter` entry `db.password=…`), or a PEM or
/// OpenSSH private key whatever its field is called (a `host_key` is readable by name, so a
/// private host key must be caught by what it holds).
pub fn is_secret_string(s: &str) -> bool {
    if crate::url_mask::mask_userinfo(s) != s || s.contains("PRIVATE KEY-----") {
        return true;
    }
    s.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty() && !name.contains(char::is_whitespace) && is_secret_name(name))
}

/// `doc` with every secret value (see [`is_secret_name`], [`is_secret_string`]) replaced by the
/// mask.
pub fn masked(doc: &Value) -> Value {
    match doc {
        Value::String(s) if is_secret_string(s) => Value::String(MASK.into()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = if is_secret_name(k) && !v.is_null() { Value::String(MASK.into()) } else { masked(v) };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        other => other.clone(),
    }
}

/// `Debug` of a JSON document with its secrets masked, for the manual `Debug` of structs that
/// keep a request or a record as JSON.
pub struct MaskedJson<'a>(pub &'a Value);

impl fmt::Debug for MaskedJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", masked(self.0))
    }
}

/// `Debug` of a serializable struct as its JSON with the secrets masked: for the structs that
/// keep a request or a record ([`impl_debug_masked!`]), so a new field is covered without a new
/// line of `Debug`.
pub fn debug_masked<T: serde::Serialize>(name: &str, t: &T, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match serde_json::to_value(t) {
        Ok(v) => write!(f, "{name} {}", masked(&v)),
        Err(_) => write!(f, "{name} {{ .. }}"),
    }
}

/// `impl Debug` through [`debug_masked`] for each named type: a request or a record prints as
/// its JSON with credentials (accessInfo passwords, tokens, URL userinfo) masked.
macro_rules! impl_debug_masked {
    ($($t:ident),+ $(,)?) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                $crate::secret::debug_masked(stringify!($t), self, f)
            }
        }
    )+};
}
pub(crate) use impl_debug_masked;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?} {:?}", Some(&s)), "******** ******** Some(********)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn secret_names_and_strings() {
        for k in [
            "password",
            "masternode_password",
            "bearerToken",
            "certificate-key",
            "certificateKey",
            "exthelmrepo_password",
            "db.pass",
            "admin_password",
            "tls.key",
            "ssh_private_key",
            "privateKey",
            "apiKey",
            "api_key",
            "wifi-psk",
            "credentials",
            "PW",
            "masternode_credential_ref",
            "credential_ref_token",
        ] {
            assert!(is_secret_name(k), "{k}");
        }
        // A public key, a host key, a monkey: words that only end in "key" are no secret.
        for k in [
            "username",
            "ssh_cp_name",
            "masternode_ip",
            "no_proxy",
            "ca_hash",
            "nodes",
            "keys",
            "pubkey",
            "ssh_pubkey",
            "hostkey",
            "compass",
            "host_key_check",
            "key_file",
            "public_key",
            "publicKey",
            "ssh_public_key",
            "ssh-pub-key",
            "host_key",
        ] {
            assert!(!is_secret_name(k), "{k}");
        }
        assert!(is_secret_string("https://tok@charts.example/"));
        assert!(is_secret_string("auth.apiKey=abc"));
        assert!(is_secret_string("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n"));
        assert!(!is_secret_string("ssh-ed25519 AAAAC3Nza host"));
        assert!(!is_secret_string("replicaCount=2"));
        assert!(!is_secret_string("a sentence with a token=x in it"));
        assert!(!is_secret_string("https://charts.example/"));
    }

    #[test]
    fn masked_json_shows_the_shape_but_no_secret() {
        let v = serde_json::json!({"user": "u", "password": "Pw-1", "proxy": "http://u:Pw-2@p", "set": ["a=1", "token=Pw-3"],
                                   "nested": {"bearer_token": {"x": "Pw-4"}}, "none_password": null});
        let shown = format!("{:?}", MaskedJson(&v));
        assert!(["Pw-1", "Pw-2", "Pw-3", "Pw-4"].iter().all(|s| !shown.contains(s)), "{shown}");
        assert!(shown.contains(r#""user":"u""#) && shown.contains(r#""a=1""#) && shown.contains("null"), "{shown}");
    }
}
