//! What a rendered file must be before it is written: a `.json`/`.yaml`/`.yml` file parses, and
//! holds no literal secret. The templates' context gives secrets only as references, and
//! `get_env` is disabled, but a template can still have a password typed into it; this scan is
//! the last look before such a value would land in a folder meant for git and diffs.

use std::path::Path;

use serde_json::Value;

use crate::secret::{is_secret_name, is_secret_string};

/// A rendered `.json`/`.yaml`/`.yml` file must parse, and hold no literal secret: a value under
/// a secret-looking key is a reference (`@env:`/`@file:`, or a key ending `_env`/`_file`, the
/// inventory's forms), and no string is a URL with a password or `db.password=literal`.
/// `Err((":LINE" or "", message))`; the message never shows the value.
pub fn scan_for_secrets(rel: &Path, text: &str) -> std::result::Result<(), (String, String)> {
    let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or_default();
    let doc: Value = match ext {
        "json" => serde_json::from_str(text)
            .map_err(|e| (format!(":{}", e.line()), format!("not JSON after rendering: {e}")))?,
        "yaml" | "yml" => {
            crate::inventory::yaml_limits::check(text).map_err(|m| (String::new(), m))?;
            yaml_serde::from_str(text).map_err(|e| {
                let line = e.location().map(|l| format!(":{}", l.line())).unwrap_or_default();
                (line, format!("not YAML after rendering: {e}"))
            })?
        }
        _ => return Ok(()),
    };
    let mut path = String::new();
    literal_secret(&doc, Under::Plain, &mut path).map_or(Ok(()), |p| {
        Err((String::new(), format!("{p}: a literal secret in a rendered file; use a secrets: reference")))
    })
}

fn is_reference(s: &str) -> bool {
    s.starts_with("@env:") || s.starts_with("@file:") || s.is_empty()
}

/// How a value is to be read in the scan.
#[derive(Clone, Copy, PartialEq)]
enum Under {
    /// Nothing special: only URLs with a password and `secret.name=literal` are secrets.
    Plain,
    /// A secret-looking key: the value must be a reference.
    SecretKey,
    /// `helmsecretparameter`: every item is `name=VALUE` with VALUE a reference.
    SecretItems,
}

/// The JSON path of the first literal secret in `v`, if any.
fn literal_secret(v: &Value, under: Under, path: &mut String) -> Option<String> {
    let here = |path: &str| if path.is_empty() { "$".to_string() } else { path.trim_start_matches('.').to_string() };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let kk = k.to_ascii_lowercase();
                let next = if kk.ends_with("secretparameter") {
                    Under::SecretItems
                } else if kk.ends_with("_env") || kk.ends_with("_file") {
                    // The inventory's reference forms (`password_env: VAR`) name, not hold.
                    Under::Plain
                } else if under != Under::Plain || is_secret_name(k) {
                    Under::SecretKey
                } else {
                    Under::Plain
                };
                if let Some(p) = literal_secret(x, next, path) {
                    return Some(p);
                }
                path.truncate(len);
            }
            None
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                if let Some(p) = literal_secret(x, under, path) {
                    return Some(p);
                }
                path.truncate(len);
            }
            None
        }
        Value::String(s) => {
            // `name=@env:VAR` (a helmparameter taking its value from a reference).
            let item_ref = s.split_once('=').is_some_and(|(_, val)| is_reference(val));
            let bad = match under {
                Under::SecretKey => !is_reference(s),
                Under::SecretItems => !item_ref,
                Under::Plain => is_secret_string(s) && !item_ref,
            };
            bad.then(|| here(path))
        }
        Value::Null | Value::Bool(_) => None,
        Value::Number(_) => (under != Under::Plain).then(|| here(path)),
    }
}
