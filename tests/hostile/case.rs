//! One hostile input and what must happen to it, and the runner that turns a table of them
//! into test trials (libtest-mimic: each case is its own named test).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use libtest_mimic::Failed;
use serde_json::Value;

use crate::support::harness::{Body, Suite};
use crate::support::mgmt;

/// A rejected input must be refused before anything else happens, and quickly: input bombs
/// (YAML aliases, deep nesting, huge files) included.
pub const TIME_LIMIT: Duration = Duration::from_secs(5);

/// Where no node ever answers (TEST-NET-1): a case that connected would hang or fail with exit 1.
pub const NOWHERE: &str = "192.0.2.10";

/// `instantiate-end` with the files a case writes: `inv.yaml`, `pkg/`, `req.json`, a `state` dir.
pub const INSTANTIATE_ARGS: [&str; 11] = [
    "instantiate-end",
    "-i",
    "{dir}/inv.yaml",
    "--package-dir",
    "{dir}/pkg",
    "--state-dir",
    "{dir}/state",
    "--vnf-instance-id",
    "i1",
    "--request",
    "{dir}/req.json",
];

pub enum Expect {
    /// Exit 2, the message names `field`, nothing planned, connected or run.
    Rejected { field: String },
    /// Exit 0; every `shown` text is in the plan or result, no `never` text is anywhere in the output.
    Accepted { shown: Vec<String>, never: Vec<String> },
}

pub struct Case {
    pub name: String,
    /// The arguments after `mgmt-driver`; `{dir}` is replaced by the case's private directory.
    /// `--dry-run -o json` is put in front.
    pub args: Vec<String>,
    /// Files written into the case's directory first (relative path, content; `{dir}` in a UTF-8
    /// content is replaced too).
    pub files: Vec<(String, Vec<u8>)>,
    pub env: Vec<(String, String)>,
    /// Symbolic links made after the files (path in the case's directory, target; `{dir}` in
    /// the target is replaced).
    pub links: Vec<(String, String)>,
    pub expect: Expect,
    /// Texts (secrets) that must never appear in the output, whatever the outcome.
    pub never: Vec<String>,
}

impl Case {
    /// A case whose input must be refused, naming `field`.
    pub fn rejected(name: impl Into<String>, args: &[&str], field: impl Into<String>) -> Case {
        Case {
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            files: Vec::new(),
            env: Vec::new(),
            links: Vec::new(),
            expect: Expect::Rejected { field: field.into() },
            never: Vec::new(),
        }
    }

    /// A case whose input is legitimate but dangerous-looking: it must be accepted, showing
    /// `shown` and never `never`.
    pub fn accepted(name: impl Into<String>, args: &[&str], shown: &[&str], never: &[&str]) -> Case {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        Case {
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            files: Vec::new(),
            env: Vec::new(),
            links: Vec::new(),
            expect: Expect::Accepted { shown: v(shown), never: v(never) },
            never: Vec::new(),
        }
    }

    pub fn file(mut self, path: &str, content: impl Into<Vec<u8>>) -> Case {
        self.files.push((path.to_string(), content.into()));
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Case {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    /// A symbolic link at `path` to `target`.
    pub fn link(mut self, path: &str, target: &str) -> Case {
        self.links.push((path.to_string(), target.to_string()));
        self
    }

    /// More arguments after the case's own (global flags such as `--secrets-dir {dir}/s`).
    pub fn arg(mut self, more: &[&str]) -> Case {
        self.args.extend(more.iter().map(|a| a.to_string()));
        self
    }

    /// `secret` must never appear in the output: not in a refusal's message either.
    #[allow(dead_code)] // not every table uses it
    pub fn never(mut self, secret: &str) -> Case {
        self.never.push(secret.to_string());
        self
    }
}

#[allow(dead_code)] // for the request tables (cluster.rs, cnf.rs)
/// `doc` with the value at JSON pointer `ptr` replaced (or added, parents created as objects).
pub fn set(mut doc: Value, ptr: &str, v: Value) -> Value {
    let mut cur = &mut doc;
    let parts: Vec<String> = ptr.split('/').skip(1).map(|p| p.replace("~1", "/").replace("~0", "~")).collect();
    for (i, p) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            Value::Array(a) => {
                let k: usize = p.parse().unwrap_or_else(|_| panic!("{ptr}: {p} is not an index"));
                if last {
                    a[k] = v;
                    return doc;
                }
                &mut a[k]
            }
            Value::Object(m) => {
                if last {
                    m.insert(p.clone(), v);
                    return doc;
                }
                m.entry(p.clone()).or_insert_with(|| Value::Object(Default::default()))
            }
            other => panic!("{ptr}: cannot descend into {other}"),
        };
    }
    v
}

#[allow(dead_code)] // for the request tables (cluster.rs, cnf.rs)
/// `doc` without the value at JSON pointer `ptr`.
pub fn remove(mut doc: Value, ptr: &str) -> Value {
    let (parent, key) = ptr.rsplit_once('/').expect("a pointer");
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(key);
        }
        Some(Value::Array(a)) => {
            a.remove(key.parse::<usize>().expect("an index"));
        }
        _ => panic!("{ptr}: no parent"),
    }
    doc
}

/// `doc` as the store writes it for (`id`, `kind`), sealed and authenticated under the test
/// state key (the one every run of the binary in these tests uses): what a case puts in its
/// state directory as recorded by an earlier run. A hand-written document is refused.
pub fn recorded(id: &str, kind: &str, doc: &Value) -> String {
    let d = tempfile::tempdir().expect("temp dir");
    let key = mgmt_driver::StateKey::at(crate::support::test_state_key());
    let st = mgmt_driver::Store::open_with_key(&d.path().join("s"), key).expect("store");
    st.save_doc(id, kind, doc).expect("save");
    std::fs::read_to_string(st.doc_path(id, kind)).expect("read")
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// Event lines (stderr, one JSON object each) that mean something was planned, reached or run.
fn activity(stderr: &str) -> Vec<String> {
    const ACTIVE: [&str; 7] = ["plan", "connecting", "connected", "command", "uploaded", "start", "phase"];
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"].as_str().is_some_and(|k| ACTIVE.contains(&k)))
        .map(|e| e.to_string())
        .collect()
}

fn run_case(c: &Case) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let d = dir.path().to_str().expect("utf-8 temp path").to_string();
    for (rel, content) in &c.files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(Path::new(".")))?;
        // `{dir}` in a file is the case's directory too (inventories name key and known_hosts files).
        match std::str::from_utf8(content) {
            Ok(text) => std::fs::write(&p, text.replace("{dir}", &d))?,
            Err(_) => std::fs::write(&p, content)?,
        }
    }
    for (rel, target) in &c.links {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(Path::new(".")))?;
        std::os::unix::fs::symlink(target.replace("{dir}", &d), &p)?;
    }
    let mut args: Vec<String> = vec!["--dry-run".into(), "-o".into(), "json".into()];
    args.extend(c.args.iter().map(|a| a.replace("{dir}", &d)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // HOME is the case's own directory: no operator file (ssh config, state, keys) is read or written.
    let home = format!("{d}/home");
    let mut env: Vec<(&str, &str)> = vec![("HOME", &home), ("XDG_STATE_HOME", &home), ("XDG_CONFIG_HOME", &home)];
    env.extend(c.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let r = mgmt(&args, &env);
    let all = r.all();
    let show =
        || format!("mgmt-driver {args:?}\n--- exit {}\n--- stdout\n{}\n--- stderr\n{}", r.code, r.stdout, r.stderr);
    for s in &c.never {
        check(!all.contains(s.as_str()), || format!("{s:?} must never be in the output\n{}", show()))?;
    }
    match &c.expect {
        Expect::Rejected { field } => {
            check(r.code == 2, || format!("expected exit 2 (bad input)\n{}", show()))?;
            check(all.contains(field.as_str()), || format!("the message must name {field:?}\n{}", show()))?;
            let act = activity(&r.stderr);
            check(act.is_empty(), || format!("a rejected input planned or ran something: {act:?}\n{}", show()))?;
            check(r.elapsed < TIME_LIMIT, || format!("rejecting took {:?}\n{}", r.elapsed, show()))
        }
        Expect::Accepted { shown, never } => {
            check(r.code == 0, || format!("expected exit 0 (accepted safely)\n{}", show()))?;
            for s in shown {
                check(all.contains(s.as_str()), || format!("expected {s:?} in the output\n{}", show()))?;
            }
            for s in never {
                check(!all.contains(s.as_str()), || format!("{s:?} must never be in the output\n{}", show()))?;
            }
            Ok(())
        }
    }
}

/// The table as a suite of one trial per case (named after `file`); names must be unique. The
/// suite's closing line counts rejected and accepted cases.
pub fn suite(file: &'static str, cases: Vec<Case>) -> Suite {
    let mut names = BTreeSet::new();
    for c in &cases {
        assert!(names.insert(c.name.clone()), "two hostile cases are named {}", c.name);
    }
    let rejected = cases.iter().filter(|c| matches!(c.expect, Expect::Rejected { .. })).count();
    let total = cases.len();
    let trials = cases.into_iter().map(|c| {
        let name = c.name.clone();
        let body: Body = Box::new(move || run_case(&c));
        (name, body)
    });
    Suite::new(file).cases(trials).closing_line(format!(
        "hostile corpus: {total} cases, {rejected} must be rejected, {} accepted safely",
        total - rejected
    ))
}
