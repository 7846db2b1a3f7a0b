//! Secret helm values on their way back: what `helm get values --all` prints holds every value,
//! secret ones too. Before such a document is recorded or shown, the secret keys of the
//! release (`helmsecretparameter`, `@env:`/`@file:` items) are masked, and so is any string
//! equal to a secret value we sent (a chart may copy it elsewhere); so is a secret value Helm
//! quotes in an error. Pure.

use serde_json::Value;

use crate::cnf::params::SecretSet;
use crate::error::Error;
use crate::secret::MASK;

/// `v` with every secret of `secrets` masked, by key path and by value.
pub fn mask(v: &mut Value, secrets: &[SecretSet]) {
    for s in secrets {
        if let Some(x) = at_key(v, &s.key) {
            *x = Value::String(MASK.into());
        }
    }
    let values: Vec<&str> =
        secrets.iter().filter_map(|s| s.value.as_ref().map(|v| v.expose())).filter(|v| !v.is_empty()).collect();
    if !values.is_empty() {
        mask_strings(v, &values);
    }
}

/// `e` with every secret value of `secrets` masked in the remote output it quotes (Helm may
/// echo a value it failed to parse).
pub fn mask_error(e: Error, secrets: &[SecretSet]) -> Error {
    let hide = |text: String| {
        secrets
            .iter()
            .filter_map(|s| s.value.as_ref().map(|v| v.expose()))
            .filter(|v| !v.is_empty())
            .fold(text, |t, v| t.replace(v, MASK))
    };
    match e {
        Error::Remote { node, command, status, stderr_tail } => {
            Error::Remote { node, command, status, stderr_tail: hide(stderr_tail) }
        }
        Error::Unreadable { node, command, what, message } => {
            Error::Unreadable { node, command, what, message: hide(message) }
        }
        other => other,
    }
}

fn mask_strings(v: &mut Value, secrets: &[&str]) {
    match v {
        Value::String(s) if secrets.iter().any(|x| s.contains(x)) => *s = MASK.into(),
        Value::Array(a) => a.iter_mut().for_each(|x| mask_strings(x, secrets)),
        Value::Object(m) => m.values_mut().for_each(|x| mask_strings(x, secrets)),
        _ => {}
    }
}

/// The value at a Helm `--set` key (`a.b.c`, `list[0].name`), if the document has it.
fn at_key<'v>(v: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    let mut cur = v;
    for part in key.split('.') {
        let (name, idx) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.strip_suffix(']')?.parse::<usize>().ok()),
            None => (part, None),
        };
        if !name.is_empty() {
            cur = cur.get_mut(name)?;
        }
        if let Some(i) = idx {
            cur = cur.get_mut(i)?;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnf::params::SecretFrom;
    use crate::secret::Secret;
    use serde_json::json;

    fn s(key: &str, value: Option<&str>) -> SecretSet {
        SecretSet { key: key.into(), from: SecretFrom::Env("X".into()), value: value.map(Secret::new) }
    }

    #[test]
    fn secret_keys_and_copies_of_secret_values_are_masked() {
        let mut v = json!({"db": {"password": "hunter2", "user": "app"}, "env": [{"name": "A", "value": "tok"}],
            "copy": "url://x:hunter2@h", "n": 3});
        mask(&mut v, &[s("db.password", Some("hunter2")), s("env[0].value", None), s("no.such", None)]);
        assert_eq!(
            v,
            json!({"db": {"password": MASK, "user": "app"}, "env": [{"name": "A", "value": MASK}], "copy": MASK, "n": 3})
        );
    }

    #[test]
    fn remote_errors_quoting_a_secret_value_are_masked() {
        let e = Error::Remote {
            node: "m".into(),
            command: "helm install".into(),
            status: "exit 1".into(),
            stderr_tail: "Error: cannot parse hunter2 as int".into(),
        };
        let text = mask_error(e, &[s("db.password", Some("hunter2"))]).to_string();
        assert!(text.contains("cannot parse ******** as int") && !text.contains("hunter2"), "{text}");
    }
}
