//! Snapshots of what the real binary prints where that is deterministic: the `--help` of every
//! command and subcommand (found by walking the `Commands:` lists, so a new command gets its
//! snapshot and a removed one leaves a stale file that fails), the dry-run plans of a few
//! representative commands on fixed inputs (samples/, tests/data/), plain and `-o json`, and
//! result documents. A change in any of them shows up as a diff in review.
//!
//! The files are under tests/snapshots/ (`help/<command path>.txt`, `plan/<case>.txt`,
//! `result/<case>.txt`). A mismatch prints a unified diff and fails; when the change is meant,
//! `UPDATE_SNAPSHOTS=1 cargo test --test offline snapshot` rewrites every snapshot (and removes
//! stale help snapshots), and `git diff tests/snapshots` is the review.
//!
//! What is normalized: the case's temporary directory (`$TMP`), the checkout (`$REPO`), times
//! (`"ms"`, `"t_ms"`, `"seconds"`, `"statusTime"`, `"duration"` in JSON; `1.23s` in plain text),
//! the package's version and rust-version (`$VERSION`, `$RUST_VERSION`). A JSON document on
//! stdout is pretty-printed so a diff shows the field that changed.
//!
//! Hand-written rather than `insta`: comparing and writing a file is a few lines, it adds no
//! dependency to Cargo.lock (which every branch touches) and needs no extra tool to review or
//! accept (`cargo insta`): one variable updates, git shows the change. The diff comes from
//! `diff -u` (diffutils, on every Debian).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::harness::Suite;
use crate::support::kit::{check, R};
use crate::support::repo;

const UPDATE: &str = "UPDATE_SNAPSHOTS=1 cargo test --test offline snapshot";

fn updating() -> bool {
    std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1")
}

fn snapshots() -> PathBuf {
    repo().join("tests/snapshots")
}

/// Compare `actual` with the snapshot `rel` (under tests/snapshots/), or write it when updating.
fn compare(rel: &str, actual: &str) -> R {
    let path = snapshots().join(rel);
    let expected = std::fs::read_to_string(&path);
    if updating() {
        if expected.as_deref().ok() != Some(actual) {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            eprintln!("snapshot tests/snapshots/{rel} written");
        }
        return Ok(());
    }
    match expected {
        Ok(e) if e == actual => Ok(()),
        Ok(e) => Err(format!(
            "snapshot tests/snapshots/{rel} differs:\n{}\nIf this change is meant: {UPDATE}",
            diff(&e, actual)
        )
        .into()),
        Err(err) => Err(format!("snapshot tests/snapshots/{rel}: {err}; to write it: {UPDATE}").into()),
    }
}

/// A unified diff of the snapshot (`-`) and what the binary printed now (`+`).
fn diff(expected: &str, actual: &str) -> String {
    let d = tempfile::tempdir().unwrap();
    let (e, a) = (d.path().join("expected"), d.path().join("actual"));
    std::fs::write(&e, expected).unwrap();
    std::fs::write(&a, actual).unwrap();
    match Command::new("diff").args(["-u", "--label", "snapshot", "--label", "now"]).arg(&e).arg(&a).output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(_) => format!("--- snapshot\n{expected}\n+++ now\n{actual}"),
    }
}

/// The binary in a clean environment: no variable of the operator's (clap shows the value of an
/// `env` option in `--help`), no agent, no ~/.ssh/config, the test state key.
fn binary(tmp: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"));
    c.env_clear().env("PATH", "/usr/local/bin:/usr/bin:/bin").env("HOME", tmp).env("LANG", "C.UTF-8");
    c.current_dir(repo());
    c
}

// ------------------------------------------------------------------ help

/// The subcommands a `--help` lists under `Commands:` (without clap's own `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// `--help` of `path` and, depth first, of every subcommand it lists.
fn walk(tmp: &Path, path: &mut Vec<String>, out: &mut Vec<(String, String)>) {
    let o = binary(tmp).args(path.iter()).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "mgmt-driver {} --help: {}\n{text}",
        path.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    let name = if path.is_empty() { "mgmt-driver".to_string() } else { path.join(".") };
    let subs = subcommands(&text);
    out.push((format!("help/{name}.txt"), text));
    for s in subs {
        path.push(s);
        walk(tmp, path, out);
        path.pop();
    }
}

fn help() -> R {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    walk(tmp.path(), &mut Vec::new(), &mut all);
    check(all.len() > 1, || "no subcommand found under `Commands:` in `mgmt-driver --help`".into())?;
    let mut failures: Vec<String> = all
        .iter()
        .filter_map(|(rel, text)| compare(rel, text).err())
        .map(|e| e.message().unwrap_or("failed").to_string())
        .collect();
    // A snapshot whose command is gone.
    let dir = snapshots().join("help");
    let mut stale: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| !all.iter().any(|(rel, _)| snapshots().join(rel) == *p))
        .collect();
    stale.sort();
    for p in stale {
        let shown = p.strip_prefix(repo()).unwrap_or(&p).display().to_string();
        if updating() {
            std::fs::remove_file(&p).unwrap();
            eprintln!("snapshot {shown} removed: no such command");
        } else {
            failures.push(format!("snapshot {shown} has no command any more; to remove it: {UPDATE}"));
        }
    }
    check(failures.is_empty(), || failures.join("\n\n"))
}

// ------------------------------------------------------------------ plans and results

/// One run of the binary as a snapshot: the command line, the exit code, stdout and stderr,
/// normalized (see the module's doc).
fn run(tmp: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.replace("{tmp}", tmp.to_str().unwrap())).collect();
    let o = binary(tmp).args(&args).envs(env.iter().copied()).output().unwrap();
    let norm = |t: &str| normalize(t, tmp);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stdout = match serde_json::from_str::<Value>(stdout.trim()) {
        Ok(mut doc) if doc.is_object() => {
            untime(&mut doc);
            format!("{}\n", serde_json::to_string_pretty(&doc).unwrap())
        }
        _ => stdout.into_owned(),
    };
    let stderr: String = String::from_utf8_lossy(&o.stderr)
        .lines()
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(mut event) if event.is_object() => {
                untime(&mut event);
                format!("{event}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let env: String = env.iter().map(|(k, v)| format!("{k}={} ", shell_word(v))).collect();
    let line: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    format!(
        "$ {env}mgmt-driver {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        norm(&line.join(" ")),
        o.status.code().map_or("signal".into(), |c| c.to_string()),
        norm(&stdout),
        norm(&stderr)
    )
}

/// `word` as a shell would need it on the snapshot's command line (single-quoted unless plain).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,{}".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Times in a document or event are zero (numbers) or `<time>` (strings).
fn untime(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if ["ms", "t_ms", "seconds", "statusTime", "duration"].contains(&k.as_str()) {
                    *v = if v.is_number() { Value::from(0) } else { Value::from("<time>") };
                } else {
                    untime(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(untime),
        _ => {}
    }
}

/// Paths, versions and plain-text durations (`0.01s`, `12.5s`) replaced by stable words.
fn normalize(text: &str, tmp: &Path) -> String {
    let text = text
        .replace(tmp.to_str().unwrap(), "$TMP")
        .replace(repo().to_str().unwrap(), "$REPO")
        .replace(&format!("\"{}\"", env!("CARGO_PKG_VERSION")), "\"$VERSION\"")
        .replace(&format!("mgmt-driver {}", env!("CARGO_PKG_VERSION")), "mgmt-driver $VERSION")
        .replace(&format!("\"{}\"", env!("CARGO_PKG_RUST_VERSION")), "\"$RUST_VERSION\"");
    durations(&text)
}

/// Every `<digits>.<digits>s` that is a word of its own (`(0.00s)`, `in 12.5s`) as `<secs>`.
fn durations(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '.';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() && (i == 0 || !word(chars[i - 1])) {
            let int = chars[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let j = i + int;
            if j < chars.len() && chars[j] == '.' {
                let frac = chars[j + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                let k = j + 1 + frac;
                if frac > 0 && k < chars.len() && chars[k] == 's' && (k + 1 >= chars.len() || !word(chars[k + 1])) {
                    out.push_str("<secs>");
                    i = k + 1;
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// The fixed inputs every plan case may use, written into its temporary directory: a package
/// with our install scripts and a chart, inventories, a VIM connection for the CNF commands.
fn inputs(tmp: &Path) {
    let pkg = tmp.join("pkg");
    std::fs::create_dir_all(pkg.join("Scripts")).unwrap();
    for f in ["install_k8s_cluster.sh", "install_helm.sh"] {
        std::fs::copy(repo().join("scripts").join(f), pkg.join("Scripts").join(f)).unwrap();
    }
    std::fs::create_dir_all(pkg.join("Files/kubernetes")).unwrap();
    std::fs::write(pkg.join("Files/kubernetes/localhelm-0.1.0.tgz"), "a chart").unwrap();
    let kh = "defaults: {known_hosts: ./kh}\ngroups:\n";
    std::fs::write(
        tmp.join("inv1.yaml"),
        format!("{kh}  master_instance:\n    - {{name: m1, ssh_ip: 192.0.2.11}}\n  worker_instance:\n    - {{name: w1, ssh_ip: 192.0.2.21}}\n    - {{name: w2, ssh_ip: 192.0.2.22}}\n"),
    )
    .unwrap();
    std::fs::write(
        tmp.join("inv3.yaml"),
        format!("{kh}  master_instance:\n    - {{name: m1, ssh_ip: 192.0.2.11}}\n    - {{name: m2, ssh_ip: 192.0.2.12}}\n    - {{name: m3, ssh_ip: 192.0.2.13}}\n  worker_instance:\n    - {{name: w1, ssh_ip: 192.0.2.21}}\ncps: {{vip_CP: 192.0.2.100}}\n"),
    )
    .unwrap();
    let vci = serde_json::json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "extra": {"helm_info":
        {"masternode_ip": ["192.0.2.35"], "masternode_username": "ubuntu", "masternode_password": "pw-snapshot"}}}]);
    std::fs::write(tmp.join("vci.json"), vci.to_string()).unwrap();
}

/// The node and sudo passwords samples/inventory.yaml reads from the environment.
const SAMPLE_ENV: Env = &[("NODE_PW", "node-pw"), ("SUDO_PW", "sudo-pw")];

/// `instantiate-end` of a Tacker v1 body (tests/data/tacker/v1/) on inventory `inv`.
const INSTANTIATE: [&str; 10] = [
    "instantiate-end",
    "--package-dir",
    "{tmp}/pkg",
    "--state-dir",
    "{tmp}/state",
    "--vnf-instance-id",
    "i1",
    "--request",
    "REQUEST",
    "-i",
];

/// Environment variables a case sets.
type Env = &'static [(&'static str, &'static str)];

/// (snapshot, arguments after `mgmt-driver`, environment). Plans are dry runs; results are runs
/// that touch no node.
fn cases() -> Vec<(String, Vec<String>, Env)> {
    let own = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let instantiate = |out: &str, body: &str, inv: &str| {
        let body = format!("tests/data/tacker/v1/{body}");
        let mut a = own(&["--dry-run", "-o", out]);
        a.extend(INSTANTIATE.iter().map(|s| if *s == "REQUEST" { body.clone() } else { s.to_string() }));
        a.push(format!("{{tmp}}/{inv}"));
        a
    };
    let exec = own(&["exec", "-i", "samples/inventory.yaml", "--", "uname", "-a"]);
    let with = |front: &[&str], rest: &[String]| [own(front), rest.to_vec()].concat();
    let cnf = own(&[
        "cnf",
        "--vnf-instance-id",
        "tb",
        "--state-dir",
        "{tmp}/state",
        "--vim-connection-info",
        "{tmp}/vci.json",
        "--package-dir",
        "{tmp}/pkg",
        "instantiate",
        "--request",
        "tests/data/tacker/v1/cnf-helm/local/instance_helm.json",
    ]);
    let none: Env = &[];
    vec![
        ("plan/exec.plain.txt".into(), with(&["--dry-run", "-o", "plain"], &exec), SAMPLE_ENV),
        ("plan/exec.json.txt".into(), with(&["--dry-run", "-o", "json"], &exec), SAMPLE_ENV),
        (
            "plan/run-script.json.txt".into(),
            own(&[
                "--dry-run",
                "-o",
                "json",
                "run-script",
                "-i",
                "samples/inventory.yaml",
                "samples/scripts/node-info.sh",
                "one",
                "two words",
            ]),
            SAMPLE_ENV,
        ),
        (
            "plan/put.plain.txt".into(),
            own(&[
                "--dry-run",
                "-o",
                "plain",
                "put",
                "-i",
                "samples/inventory.yaml",
                "samples/scripts",
                "/opt/scripts",
            ]),
            SAMPLE_ENV,
        ),
        (
            "plan/instantiate-end.plain.txt".into(),
            instantiate("plain", "k8s-cluster/simple_kubernetes_param_file.json", "inv1.yaml"),
            none,
        ),
        (
            "plan/instantiate-end.json.txt".into(),
            instantiate("json", "k8s-cluster/simple_kubernetes_param_file.json", "inv1.yaml"),
            none,
        ),
        (
            "plan/instantiate-end-ha.plain.txt".into(),
            instantiate("plain", "k8s-cluster/complex_kubernetes_param_file.json", "inv3.yaml"),
            none,
        ),
        ("plan/cnf-instantiate.plain.txt".into(), with(&["--dry-run", "-o", "plain"], &cnf), none),
        ("plan/cnf-instantiate.json.txt".into(), with(&["--dry-run", "-o", "json"], &cnf), none),
        ("result/version.json.txt".into(), own(&["version", "-o", "json"]), none),
        ("result/version.plain.txt".into(), own(&["version"]), none),
        ("result/ee-list.json.txt".into(), own(&["ee", "list", "-o", "json", "--state-dir", "{tmp}/state"]), none),
        (
            "result/sites-status.json.txt".into(),
            own(&["sites", "status", "-o", "json", "--state-dir", "{tmp}/state"]),
            none,
        ),
        (
            "result/sites-render.json.txt".into(),
            own(&["sites", "render", "-o", "json", "--sites", "samples/sites/sites.yaml", "--out", "{tmp}/sites"]),
            none,
        ),
        (
            "result/bad-input.json.txt".into(),
            own(&["exec", "-o", "json", "-i", "{tmp}/missing.yaml", "--", "true"]),
            none,
        ),
    ]
}

/// The suite's trials (they need no lab), run by the `offline` test binary (tests/bin/offline.rs):
/// `help` for every command's `--help`, and one trial per plan or result snapshot.
pub fn suite() -> Suite {
    let runs = cases().into_iter().map(|(rel, args, env)| {
        let name = rel.trim_end_matches(".txt").to_string();
        let body: crate::support::harness::Body = Box::new(move || {
            let tmp = tempfile::tempdir().unwrap();
            inputs(tmp.path());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            compare(&rel, &run(tmp.path(), &args, env))
        });
        (name, body)
    });
    Suite::new(file!()).without_root(&[("help", help)]).cases(runs)
}
