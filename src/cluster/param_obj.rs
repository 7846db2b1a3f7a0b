//! Reading the request's params objects, shared by every params block (`params.rs`, `registry.rs`,
//! `storage.rs`): a JSON object with its path for messages, its strings, VNFD names and nested
//! objects, package paths, and node passwords given as literals or references. Errors name the
//! file and the JSON path; no message shows a password. Whether a password may be a reference
//! is not decided here: the object carries the policy of whoever wrote the request
//! (`secret_ref.rs`), and [`password`] asks it. The shared items are `pub(crate)`, not
//! `pub(super)`: `super` would name `cluster/mod.rs`, which runs the hooks, from a pure file
//! (docs/architecture.md).

use serde_json::{Map, Value};

use crate::error::{excerpt, Error, Result};
use crate::secret::Secret;
use crate::secret_ref::Policy;

/// A JSON object being validated, with its path for messages and the policy for the secret
/// references its values may hold (who wrote the document).
pub(crate) struct Obj<'a> {
    pub(crate) map: &'a Map<String, Value>,
    pub(crate) path: String,
    pub(crate) file: &'a str,
    pub(crate) refs: &'a Policy,
}

impl<'a> Obj<'a> {
    pub(crate) fn err(&self, key: &str, msg: impl Into<String>) -> Error {
        Error::input(self.file, format!("{}.{key}", self.path), msg)
    }

    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<String>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(self.err(key, "must not be empty")),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(key, format!("must be a string, got {}", kind(other)))),
        }
    }

    pub(crate) fn req_str(&self, key: &str) -> Result<String> {
        self.opt_str(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    /// A VNFD identifier (aspect, VDU, connection point): `[A-Za-z0-9_.-]`, 1..255.
    pub(crate) fn opt_name(&self, key: &str) -> Result<Option<String>> {
        let Some(v) = self.opt_str(key)? else { return Ok(None) };
        let ok = v.len() <= 255 && v.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
        if !ok {
            return Err(
                self.err(key, format!("'{}' is not a VNFD identifier (letters, digits, '_', '-', '.')", excerpt(&v)))
            );
        }
        Ok(Some(v))
    }

    pub(crate) fn req_name(&self, key: &str) -> Result<String> {
        self.opt_name(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    pub(crate) fn opt_obj(&self, key: &str) -> Result<Option<Obj<'a>>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => {
                Ok(Some(Obj { map: m, path: format!("{}.{key}", self.path), file: self.file, refs: self.refs }))
            }
            Some(other) => Err(self.err(key, format!("must be an object, got {}", kind(other)))),
        }
    }

    pub(crate) fn req_obj(&self, key: &str) -> Result<Obj<'a>> {
        self.opt_obj(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    pub(crate) fn unknown(&self, known: &[&str], warnings: &mut Vec<String>) {
        for k in self.map.keys().filter(|k| !known.contains(&k.as_str())) {
            warnings.push(format!("{}.{k}: unknown key, ignored", self.path));
        }
    }
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A relative path inside the VNF package, checked for shape here (existence is checked
/// against `--package-dir` by `lifecycle/package.rs`).
pub(crate) fn package_path(o: &Obj, key: &str) -> Result<Option<String>> {
    let Some(p) = o.opt_str(key)? else { return Ok(None) };
    if p.starts_with('/') {
        return Err(o.err(key, format!("'{}' must be relative to the VNF package, not absolute", excerpt(&p))));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(o.err(key, format!("'{}' must stay inside the VNF package ('..' is not allowed)", excerpt(&p))));
    }
    if p.len() > 4096 || p.chars().any(|c| c.is_control() || c == '\\') {
        return Err(o.err(key, format!("'{}': a package path has no control characters or backslashes", excerpt(&p))));
    }
    Ok(Some(p))
}

/// A node password, or a reference to one: `@env:NAME` (the driver's environment) or
/// `@file:/abs/path` (the whole file, one trailing newline dropped: a mounted Kubernetes Secret,
/// a file written by `echo`), honoured only as the object's policy allows (`secret_ref.rs`: never
/// in a VNFM's request; confined for the operator's). Rendered per-site requests hold
/// references, never the value. A literal password starting with `@env:`/`@file:` is written
/// with a doubled `@`. A reference refused or not resolving is bad input naming the field; no
/// message ever shows the value.
pub(crate) fn password(o: &Obj, text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret> {
    crate::secret_ref::resolve(text, o.refs, env).map_err(|m| o.err("password", m))
}

/// A registry password (`registry.rs`): a literal or a reference, as a node password;
/// `parent` is the JSON path of the object holding it.
pub(crate) fn password_at(file: &str, parent: &str, text: &str, refs: &Policy) -> Result<Secret> {
    let empty = Map::new();
    let o = Obj { map: &empty, path: parent.to_string(), file, refs };
    password(&o, text, &|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_passwords_may_be_references_resolved_at_parse_time_and_never_shown() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "fr0m-file\n").unwrap();
        let map: Map<String, Value> = serde_json::from_str(r#"{"password": "x"}"#).unwrap();
        let refs = Policy::Operator(crate::secret_ref::Allowed {
            dirs: vec![d.path().to_path_buf()],
            env: vec!["EDGE_PW".into(), "NOT_SET_HERE".into()],
            declared: vec![],
        });
        let o = Obj {
            map: &map,
            path: "additionalParams.k8s_cluster_installation_param.master_node".into(),
            file: "par1/cluster/instantiate.json",
            refs: &refs,
        };
        let env = |k: &str| (k == "EDGE_PW").then(|| "fr0m-env".to_string());
        let got = |t: &str| password(&o, t, &env).map(|s| s.expose().to_string());
        assert_eq!(got("@env:EDGE_PW").unwrap(), "fr0m-env");
        assert_eq!(got(&format!("@file:{}", f.display())).unwrap(), "fr0m-file");
        assert_eq!(got("plain").unwrap(), "plain");
        assert_eq!(got("@@env:EDGE_PW").unwrap(), "@env:EDGE_PW", "a doubled @ is a literal");
        let e = got("@env:NOT_SET_HERE").unwrap_err().to_string();
        assert_eq!(
            e,
            "par1/cluster/instantiate.json: additionalParams.k8s_cluster_installation_param.master_node.password: \
             refers to environment variable NOT_SET_HERE, which is unset or empty"
        );
        for bad in ["@env:", "@env:A-B", "@file:relative/pw", "@file:/nonexistent/pw"] {
            let e = got(bad).unwrap_err().to_string();
            assert!(e.contains("master_node.password") && !e.contains("fr0m"), "{bad}: {e}");
        }
        std::fs::write(&f, "").unwrap();
        assert!(got(&format!("@file:{}", f.display())).unwrap_err().to_string().contains("empty"));
        // The same object written by a tenant: no reference, the literal still works.
        let tenant = Obj { refs: &Policy::Tenant, ..o };
        let e = password(&tenant, "@env:EDGE_PW", &env).unwrap_err().to_string();
        assert!(e.contains("master_node.password") && e.contains("operator's tool"), "{e}");
        assert_eq!(password(&tenant, "@@env:EDGE_PW", &env).unwrap().expose(), "@env:EDGE_PW");
    }
}
