//! `primitives.yaml`: the named actions a package (or a directory) declares, and the checks of
//! one run's parameters against them. Pure, and all of it happens before anything connects:
//! a declaration error is bad input (exit 2) naming the file and field; bad parameters are all
//! listed by name at once (OSM's "bad arguments"), exit 3.
//!
//! ```yaml
//! primitives:
//!   - name: set-banner
//!     description: Write the login banner
//!     script: banner.sh          # beside primitives.yaml; no '..', not absolute
//!     timeout: 30s               # or seconds; default 10m
//!     root: true                 # run with sudo when the login user is not root
//!     runs_on: masters           # masters | workers | ee | ee:NAME | any (default)
//!     parameters:
//!       - {name: text, type: string, required: true}
//!       - {name: lines, type: int, default: 1}
//!       - {name: color, type: enum, values: [red, green], default: green}
//!       - {name: dry, type: bool, default: false}
//!     secret_results: [admin_password]   # result fields every output masks, the store seals
//! ```
//!
//! `secret_results` is the declaration of which fields of the script's JSON result (top-level
//! keys) are secrets; nothing else is guessed from a result field's name beyond the one rule
//! every stored document follows ([`crate::secret::is_secret_name`]: `admin_password` is masked
//! either way, a `public_key` never).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{excerpt, Error, Result};

/// The file a directory or package declares its primitives in.
pub const FILE_NAME: &str = "primitives.yaml";
/// A primitives file is small; 1 MiB is thousands of primitives.
pub const MAX_BYTES: u64 = 1 << 20;
/// One string parameter: it travels in the environment, which has limits of its own.
pub const MAX_VALUE_BYTES: usize = 64 << 10;
/// When a primitive gives no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Int,
    Bool,
    Enum,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    #[serde(rename = "type", default = "default_type")]
    pub kind: ParamType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The allowed values of an enum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

fn default_type() -> ParamType {
    ParamType::String
}

/// Where a primitive runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunsOn {
    /// Whatever the command line selects (`--ee`, `--inventory`).
    Any,
    /// The masters of a recorded cluster (`--cluster-instance`).
    Masters,
    /// The workers of a recorded cluster.
    Workers,
    /// Registered machines (`--ee`), or this one when the command line names none.
    Ee(Option<String>),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrimitive {
    name: String,
    #[serde(default)]
    description: Option<String>,
    script: String,
    #[serde(default)]
    parameters: Vec<Param>,
    #[serde(default)]
    timeout: Option<Value>,
    #[serde(default)]
    root: bool,
    #[serde(default)]
    runs_on: Option<String>,
    #[serde(default)]
    secret_results: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    primitives: Vec<RawPrimitive>,
}

/// One declared primitive, checked.
#[derive(Clone, Debug, Serialize)]
pub struct Primitive {
    pub name: String,
    pub description: Option<String>,
    /// The script's path relative to the primitives file's directory.
    pub script: String,
    pub parameters: Vec<Param>,
    #[serde(serialize_with = "secs")]
    pub timeout: Duration,
    pub root: bool,
    pub runs_on: RunsOn,
    /// The result fields (top-level keys) the declaration says are secret.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_results: Vec<String>,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A primitive or parameter name: it becomes part of an environment variable name and a file
/// name on the node, so letters, digits, `_` and `-`, starting with a letter.
pub fn check_name(n: &str) -> std::result::Result<(), String> {
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
        && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!("'{}' is not a name: 1..64 letters, digits, '_', '-', starting with a letter", excerpt(n)))
    }
}

/// The environment variable a parameter arrives in: `PARAM_` and its name upper-cased, `-` as `_`.
pub fn env_name(param: &str) -> String {
    format!("PARAM_{}", param.to_ascii_uppercase().replace('-', "_"))
}

/// A script path: relative, inside the directory (no `..`), no odd bytes.
fn check_script(s: &str) -> std::result::Result<(), String> {
    if s.is_empty() || s.starts_with('/') {
        return Err(format!("'{}' must be a relative path beside {FILE_NAME}", excerpt(s)));
    }
    if s.split('/').any(|p| p == ".." || p.is_empty()) {
        return Err(format!("'{}' must stay inside the primitives' directory (no '..')", excerpt(s)));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(format!("'{}' has a control character", excerpt(s)));
    }
    Ok(())
}

/// Parse a primitives file's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<Primitive>> {
    crate::inventory::yaml_limits::check(text).map_err(|m| Error::input(file, "primitives", m))?;
    let raw: RawFile = yaml_serde::from_str(text).map_err(|e| Error::input(file, "primitives", e.to_string()))?;
    let mut out: Vec<Primitive> = Vec::new();
    for (i, p) in raw.primitives.into_iter().enumerate() {
        let at = |f: &str| format!("primitives[{i}].{f}");
        let err = |f: &str, m: String| Error::input(file, at(f), m);
        check_name(&p.name).map_err(|m| err("name", m))?;
        if out.iter().any(|o| o.name == p.name) {
            return Err(err("name", format!("'{}' is declared twice", p.name)));
        }
        check_script(&p.script).map_err(|m| err("script", m))?;
        let timeout = match &p.timeout {
            None => DEFAULT_TIMEOUT,
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|s| *s > 0.0 && *s <= 1e7)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| err("timeout", format!("{n} is not a positive number of seconds")))?,
            Some(Value::String(s)) => humantime::parse_duration(s.trim())
                .ok()
                .filter(|d| !d.is_zero() && *d <= Duration::from_secs(10_000_000))
                .ok_or_else(|| err("timeout", format!("'{}' is not a duration (30s, 5m, 1h)", excerpt(s))))?,
            Some(v) => return Err(err("timeout", format!("{} is not a duration", excerpt(&v.to_string())))),
        };
        let runs_on = match p.runs_on.as_deref() {
            None | Some("any") => RunsOn::Any,
            Some("masters") => RunsOn::Masters,
            Some("workers") => RunsOn::Workers,
            Some("ee") => RunsOn::Ee(None),
            Some(s) => match s.strip_prefix("ee:") {
                Some(n) => {
                    crate::ee::name::check_name(n).map_err(|m| err("runs_on", m))?;
                    RunsOn::Ee(Some(n.to_string()))
                }
                None => {
                    return Err(err("runs_on", format!("'{}': use masters, workers, ee, ee:NAME or any", excerpt(s))))
                }
            },
        };
        let mut envs = BTreeMap::new();
        for (j, prm) in p.parameters.iter().enumerate() {
            let perr = |f: &str, m: String| Error::input(file, format!("primitives[{i}].parameters[{j}].{f}"), m);
            check_name(&prm.name).map_err(|m| perr("name", m))?;
            if let Some(other) = envs.insert(env_name(&prm.name), prm.name.clone()) {
                return Err(perr(
                    "name",
                    format!("'{}' and '{other}' would both be {}", prm.name, env_name(&prm.name)),
                ));
            }
            match (prm.kind, prm.values.is_empty()) {
                (ParamType::Enum, true) => return Err(perr("values", "an enum needs its values".into())),
                (ParamType::Enum, false) => {}
                (_, false) => return Err(perr("values", "only an enum has values".into())),
                _ => {}
            }
            if let Some(d) = &prm.default {
                let text = match d {
                    Value::String(s) => s.clone(),
                    Value::Bool(_) | Value::Number(_) => d.to_string(),
                    _ => return Err(perr("default", "must be a string, a number or a boolean".into())),
                };
                typed(prm, &text).map_err(|m| perr("default", m))?;
                if prm.required {
                    return Err(perr("required", "a parameter with a default is not required".into()));
                }
            }
        }
        for (j, r) in p.secret_results.iter().enumerate() {
            if r.is_empty() || r.len() > 128 || r.chars().any(char::is_control) {
                return Err(err(
                    &format!("secret_results[{j}]"),
                    format!("'{}' is not a result field name", excerpt(r)),
                ));
            }
        }
        out.push(Primitive {
            name: p.name,
            description: p.description,
            script: p.script,
            parameters: p.parameters,
            timeout,
            root: p.root,
            runs_on,
            secret_results: p.secret_results,
        });
    }
    Ok(out)
}

/// Read the primitives of a directory.
pub fn load(dir: &Path) -> Result<Vec<Primitive>> {
    let path = dir.join(FILE_NAME);
    let text = crate::input_limit::read_capped(&path, MAX_BYTES, "primitives")?;
    parse(&text, &path.display().to_string())
}

/// A value of `p`'s type from its command-line text.
fn typed(p: &Param, v: &str) -> std::result::Result<Value, String> {
    match p.kind {
        ParamType::String => {
            if v.contains('\0') {
                Err("contains a NUL byte".into())
            } else if v.len() > MAX_VALUE_BYTES {
                Err(format!("is longer than {MAX_VALUE_BYTES} bytes"))
            } else {
                Ok(Value::String(v.to_string()))
            }
        }
        ParamType::Int => {
            v.trim().parse::<i64>().map(|n| json!(n)).map_err(|_| format!("'{}' is not an integer", excerpt(v)))
        }
        ParamType::Bool => match v {
            "true" | "yes" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("'{}' is not a boolean (true/false)", excerpt(v))),
        },
        ParamType::Enum => {
            if p.values.iter().any(|x| x == v) {
                Ok(Value::String(v.to_string()))
            } else {
                Err(format!("'{}' is not one of {}", excerpt(v), p.values.join(", ")))
            }
        }
    }
}

/// The `--param` values of a run checked against `prim`: every parameter typed, defaults
/// applied. On failure, every bad argument with its reason, by name.
pub fn check_params(
    prim: &Primitive,
    given: &[(String, String)],
) -> std::result::Result<Map<String, Value>, Vec<(String, String)>> {
    let mut bad: Vec<(String, String)> = Vec::new();
    let mut out = Map::new();
    for (i, (k, v)) in given.iter().enumerate() {
        if given[..i].iter().any(|(o, _)| o == k) {
            bad.push((k.clone(), "given more than once".into()));
            continue;
        }
        match prim.parameters.iter().find(|p| &p.name == k) {
            None => {
                let known: Vec<&str> = prim.parameters.iter().map(|p| p.name.as_str()).collect();
                bad.push((
                    excerpt(k),
                    if known.is_empty() {
                        format!("unknown: {} takes no parameters", prim.name)
                    } else {
                        format!("unknown (parameters: {})", known.join(", "))
                    },
                ))
            }
            Some(p) => match typed(p, v) {
                Ok(x) => {
                    out.insert(k.clone(), x);
                }
                Err(m) => bad.push((k.clone(), m)),
            },
        }
    }
    for p in &prim.parameters {
        if out.contains_key(&p.name) || bad.iter().any(|(k, _)| k == &p.name) {
            continue;
        }
        match &p.default {
            Some(d) => {
                let text = match d {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if let Ok(x) = typed(p, &text) {
                    out.insert(p.name.clone(), x);
                }
            }
            None if p.required => bad.push((p.name.clone(), "is required".into())),
            None => {}
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(bad)
    }
}

/// `--param k=v` as given on the command line.
pub fn parse_param(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("'{}' is not NAME=VALUE", excerpt(s))),
    }
}

/// The params.env text: one `PARAM_<NAME>='value'` line per parameter, every value quoted (a
/// boolean as `true`/`false`, an integer in decimal).
pub fn env_file(params: &Map<String, Value>) -> Result<String> {
    let mut s = String::new();
    for (k, v) in params {
        let text = match v {
            Value::String(x) => x.clone(),
            other => other.to_string(),
        };
        s.push_str(&format!("{}={}\n", env_name(k), crate::quote::quote(&text)?));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "primitives:
  - name: touch
    description: make a file
    script: scripts/touch.sh
    timeout: 30s
    root: true
    runs_on: ee:lab-1
    parameters:
      - {name: path, type: string, required: true}
      - {name: count, type: int, default: 2}
      - {name: mode, type: enum, values: [fast, slow], default: fast}
      - {name: force, type: bool, default: false}
  - name: noop
    script: noop.sh
    timeout: 5
";

    fn p() -> Vec<Primitive> {
        parse(FILE, "primitives.yaml").unwrap()
    }

    #[test]
    fn a_declaration_reads_with_its_types_and_defaults() {
        let ps = p();
        assert_eq!(ps.len(), 2);
        let t = &ps[0];
        assert_eq!((t.timeout, t.root, &t.runs_on), (Duration::from_secs(30), true, &RunsOn::Ee(Some("lab-1".into()))));
        assert_eq!(ps[1].timeout, Duration::from_secs(5));
        assert_eq!(ps[1].runs_on, RunsOn::Any);
        let ok = check_params(t, &[("path".into(), "/tmp/x".into()), ("force".into(), "yes".into())]).unwrap();
        assert_eq!(Value::Object(ok), json!({"path": "/tmp/x", "force": true, "count": 2, "mode": "fast"}));
    }

    #[test]
    fn every_bad_argument_is_listed_by_name() {
        let t = &p()[0];
        let given = [
            ("count".to_string(), "two".to_string()),
            ("mode".to_string(), "medium".to_string()),
            ("force".to_string(), "maybe".to_string()),
            ("colour".to_string(), "red".to_string()),
            ("count".to_string(), "3".to_string()),
        ];
        let bad = check_params(t, &given).unwrap_err();
        let names: Vec<&str> = bad.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["count", "mode", "force", "colour", "count", "path"], "{bad:?}");
        assert!(bad[3].1.contains("parameters: path, count, mode, force"), "{bad:?}");
        assert!(bad[5].1.contains("required"));
        let nul = check_params(t, &[("path".into(), "a\0b".into())]).unwrap_err();
        assert!(nul[0].1.contains("NUL"));
    }

    #[test]
    fn bad_declarations_name_the_field() {
        for (bad, field) in [
            ("primitives:\n  - {name: x, script: ../up.sh}", "primitives[0].script"),
            ("primitives:\n  - {name: x, script: /etc/passwd}", "primitives[0].script"),
            ("primitives:\n  - {name: x, script: a//b}", "primitives[0].script"),
            ("primitives:\n  - {name: 'x;y', script: a}", "primitives[0].name"),
            ("primitives:\n  - {name: x, script: a}\n  - {name: x, script: b}", "primitives[1].name"),
            ("primitives:\n  - {name: x, script: a, timeout: soon}", "primitives[0].timeout"),
            ("primitives:\n  - {name: x, script: a, runs_on: everywhere}", "primitives[0].runs_on"),
            ("primitives:\n  - {name: x, script: a, parameters: [{name: e, type: enum}]}", "parameters[0].values"),
            (
                "primitives:\n  - {name: x, script: a, parameters: [{name: n, type: int, default: x}]}",
                "parameters[0].default",
            ),
            ("primitives:\n  - {name: x, script: a, parameters: [{name: a-b}, {name: a_b}]}", "parameters[1].name"),
            ("primitives:\n  - {name: x, script: a, parameters: [{name: n, typo: 1}]}", "primitives"),
            ("primitives:\n  - {name: x, script: a, sudo: true}", "primitives"),
        ] {
            let e = parse(bad, "p.yaml").unwrap_err().to_string();
            assert!(e.contains(field), "{bad}: {e}");
        }
    }

    #[test]
    fn values_are_quoted_in_the_env_file_and_come_back_byte_exact() {
        let hostile = "it's \"$(touch /tmp/pwned)\" `id`\nline2\\ ; $HOME\n";
        let mut m = Map::new();
        m.insert("msg".into(), json!(hostile));
        m.insert("n-1".into(), json!(3));
        let text = env_file(&m).unwrap();
        assert!(text.contains("PARAM_N_1=3\n") || text.contains("PARAM_N_1='3'\n"), "{text}");
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("params.env"), &text).unwrap();
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg("set -a; . ./params.env; set +a; printf %s \"$PARAM_MSG\"")
            .current_dir(d.path())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(o.stdout).unwrap(), hostile);
        assert!(!d.path().join("../pwned").exists());
    }
}
