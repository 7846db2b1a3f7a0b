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
/// `not_secret`: JSON paths in this file the operator marked as not secret (the catalogue's
/// `not_secret:`), let be literal. `Err((":LINE" or "", message))`; the message never shows the
/// value.
pub fn scan_for_secrets(rel: &Path, text: &str, not_secret: &[&str]) -> std::result::Result<(), (String, String)> {
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
    literal_secret(&doc, Under::Plain, &mut path, not_secret).map_or(Ok(()), |p| {
        Err((
            String::new(),
            format!(
                "{p}: a literal secret in a rendered file; use a secrets: reference, or, if it is not a secret, \
                 list it in the catalogue's not_secret: as {}:{p}",
                rel.display()
            ),
        ))
    })
}

fn is_reference(s: &str) -> bool {
    s.starts_with("@env:") || s.starts_with("@file:") || s.is_empty()
}

/// How a value is to be read in the scan (and in the catalogue's own check of its values).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Under {
    /// Nothing special: only URLs with a password and `secret.name=literal` are secrets.
    Plain,
    /// A secret-looking key: the value must be a reference.
    SecretKey,
    /// A key that names a Kubernetes Secret (`secretName`, `existingSecret`): a Kubernetes name
    /// is what goes there, never the secret itself.
    SecretName,
    /// A key that may hold a key file's path (`ssh_key`, `tls.key`): a path is fine, the key's
    /// contents are not.
    KeyPath,
    /// `helmsecretparameter`: every item is `name=VALUE` with VALUE a reference.
    SecretItems,
}

/// How the value under key `k` is judged, the value holding it judged as `under`.
pub(crate) fn child(under: Under, k: &str) -> Under {
    let kk = k.to_ascii_lowercase();
    if kk.ends_with("secretparameter") {
        Under::SecretItems
    } else if kk.ends_with("_env") || kk.ends_with("_file") {
        // The inventory's reference forms (`password_env: VAR`) name, not hold.
        Under::Plain
    } else if under != Under::Plain {
        Under::SecretKey
    } else if is_secret_name(k) {
        by_what_goes_there(&kk)
    } else {
        Under::Plain
    }
}

/// Whether string `s`, judged as `under`, is a literal secret.
pub(crate) fn refuses_string(under: Under, s: &str) -> bool {
    // `name=@env:VAR` (a helmparameter taking its value from a reference).
    let item_ref = s.split_once('=').is_some_and(|(_, val)| is_reference(val));
    match under {
        Under::SecretKey => !is_reference(s),
        Under::SecretName => !(is_reference(s) || crate::k8s_names::dns_subdomain(s)),
        Under::KeyPath => !(is_reference(s) || is_path(s)) || is_pem(s),
        Under::SecretItems => !item_ref,
        Under::Plain => (is_secret_string(s) && !item_ref) || is_pem(s),
    }
}

/// How a secret-looking key's value is judged, by where it goes (`k` lower-case): a bare `key`
/// is a label, taint or selector key (`tolerations[].key`, `matchExpressions[].key`), not a
/// secret; a Secret's name (`secretName`, `existingSecret`) must be a Kubernetes name; a key
/// whose last word is `key` may hold a path; anything else must be a reference.
fn by_what_goes_there(k: &str) -> Under {
    if k == "key" {
        Under::Plain
    } else if k.ends_with("name") || (k.starts_with("existing") && k.ends_with("secret")) {
        Under::SecretName
    } else if k.ends_with("key") || k.ends_with("keyfile") || k.ends_with("key_file") {
        Under::KeyPath
    } else {
        Under::SecretKey
    }
}

/// A file path (absolute, `./`, `../` or `~/`), one word: what an `ssh_key` variable holds.
fn is_path(s: &str) -> bool {
    ["/", "./", "../", "~/"].iter().any(|p| s.starts_with(p)) && !s.chars().any(char::is_whitespace)
}

/// A PEM block (a private key, a certificate's key) wherever it is: its contents are the secret.
fn is_pem(s: &str) -> bool {
    s.contains("-----BEGIN") && s.contains("PRIVATE KEY")
}

/// The JSON path of the first literal secret in `v`, if any.
fn literal_secret(v: &Value, under: Under, path: &mut String, not_secret: &[&str]) -> Option<String> {
    let here = |path: &str| if path.is_empty() { "$".to_string() } else { path.trim_start_matches('.').to_string() };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let next = child(under, k);
                if let Some(p) = literal_secret(x, next, path, not_secret) {
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
                if let Some(p) = literal_secret(x, under, path, not_secret) {
                    return Some(p);
                }
                path.truncate(len);
            }
            None
        }
        Value::String(s) => refuses_string(under, s).then(|| here(path)).filter(|p| !not_secret.contains(&p.as_str())),
        Value::Null | Value::Bool(_) => None,
        Value::Number(_) => (under != Under::Plain).then(|| here(path)).filter(|p| !not_secret.contains(&p.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(yaml: &str) -> std::result::Result<(), String> {
        scan_for_secrets(Path::new("values/app.yaml"), yaml, &[]).map_err(|(_, m)| m)
    }

    /// Ordinary Helm values whose keys look secret by name are judged by what they hold and
    /// where it goes: taint and selector keys, a Secret's name, a key file's path.
    #[test]
    fn ordinary_helm_values_with_secret_looking_keys_are_not_secrets() {
        for ok in [
            "tolerations:\n  - {key: node-role.kubernetes.io/edge, operator: Exists, effect: NoSchedule}\n",
            "affinity: {nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}\n",
            "ingress:\n  tls:\n    - {secretName: edge-tls, hosts: [a.example]}\n",
            "auth: {existingSecret: app-credentials}\n",
            "ssh_key: /home/op/.ssh/id_ed25519\n",
            "tls: {key: ./certs/tls.key}\n",
            "db: {password: \"@env:DB_PW\"}\n",
        ] {
            scan(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    /// What is a secret stays one: a literal password, a private key's contents under any key,
    /// a Secret name that is not a Kubernetes name, a key that is not a path.
    #[test]
    fn literal_secrets_are_still_refused_naming_the_path() {
        for (bad, path) in [
            ("db: {password: hunter2}\n", "db.password"),
            ("tls: {key: \"-----BEGIN PRIVATE KEY-----\\nMIIE\"}\n", "tls.key"),
            ("x: {key: \"-----BEGIN OPENSSH PRIVATE KEY-----\"}\n", "x.key"),
            ("ingress: {tls: [{secretName: \"Not A Name!\"}]}\n", "ingress.tls[0].secretName"),
            ("ssh_key: AAAAC3NzaC1lZDI1NTE5\n", "ssh_key"),
            ("api: {token: abc}\n", "api.token"),
            ("auth: {existingSecretPassword: hunter2}\n", "auth.existingSecretPassword"),
        ] {
            let e = scan(bad).unwrap_err();
            assert!(e.starts_with(&format!("{path}: a literal secret")), "{bad}: {e}");
            assert!(e.contains(&format!("not_secret: as values/app.yaml:{path}")), "{e}");
        }
    }

    /// The explicit way out: a value the operator marks (`not_secret:` in the catalogue) is let
    /// be literal, and only that one.
    #[test]
    fn a_value_marked_not_secret_is_let_be_only_where_marked() {
        let yaml = "auth: {passwordPolicy: strict, token: abc}\n";
        let rel = Path::new("values/app.yaml");
        let e = scan_for_secrets(rel, yaml, &["auth.passwordPolicy"]).unwrap_err().1;
        assert!(e.starts_with("auth.token:"), "{e}");
        scan_for_secrets(rel, yaml, &["auth.passwordPolicy", "auth.token"]).unwrap();
    }
}
