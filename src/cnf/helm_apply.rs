//! The node program that installs or upgrades a CNF's releases in one exec
//! (`src/remote/helm_apply.sh`): its command line, and its records read back. Pure.
//!
//! At the edge a round trip costs more than anything Helm does, so the decision the driver took
//! from `helm status` (install, upgrade, recover a pending release) is taken on the master, and
//! the release is read back from the one Helm call that made it: `install`/`upgrade -o json`
//! print the release with its status, revision, manifest, user-supplied values (`config`) and
//! the chart's defaults (`chart.values`). Two Helm processes per release, one round trip for all.
//!
//! The output is a master's, so it is not believed: every record's framing, release name, kind
//! and size is checked, the JSON's name, namespace, status and revision too, and the manifest
//! goes through `manifest::parse` like `helm get manifest`'s.

use serde_json::Value;

use crate::cnf::manifest::{self, Resource};
use crate::error::Result;
use crate::remote;

/// The most the program may print in all (every release's JSON with its manifest and chart).
pub const MAX_OUTPUT: usize = 64 << 20;

/// One release for the program: its Helm words after the verb (`Helm::release_words`) and the
/// values files it removes after the release's Helm command.
#[derive(Clone, Debug)]
pub struct Item {
    pub release: String,
    pub namespace: String,
    pub words: Vec<String>,
    pub files: Vec<String>,
}

/// The program's command line, after the cluster's Helm environment (`prefix`).
pub fn command(prefix: &str, items: &[Item]) -> Result<String> {
    Ok(format!("{prefix}{}", remote::HELM_APPLY.command(&args(items))?))
}

/// The releases as the program's arguments (`helm_prepare.sh` takes them too).
pub fn args(items: &[Item]) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for i in items {
        args.extend([i.release.clone(), i.namespace.clone(), i.words.len().to_string()]);
        args.extend(i.words.iter().cloned());
        args.push(i.files.len().to_string());
        args.extend(i.files.iter().cloned());
    }
    args
}

/// What the program did with one release.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub release: String,
    /// `(status, revision)` before, None: absent.
    pub before: Option<(String, u64)>,
    /// The pending state it recovered from, if any.
    pub recovered: Option<String>,
    pub result: std::result::Result<Made, Failure>,
}

/// A release as `install`/`upgrade -o json` printed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Made {
    /// `install` or `upgrade`.
    pub verb: String,
    pub status: String,
    pub revision: u64,
    pub resources: Vec<Resource>,
    /// The computed values (the chart's defaults coalesced with the user-supplied ones), not
    /// masked yet.
    pub values: Value,
}

/// Where the program stopped: the step (`status`, `recover`, `install`, `upgrade`), Helm's exit
/// status and its stderr tail (not masked yet).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub step: String,
    pub code: i32,
    pub stderr_tail: String,
}

/// One framed record: `@@mgmt-driver KIND RELEASE WORD SIZE`, SIZE bytes, a newline (the
/// framing `helm_remove.sh` uses too).
pub(crate) struct Rec<'a> {
    pub kind: &'a str,
    pub release: &'a str,
    pub word: &'a str,
    pub body: &'a [u8],
}

/// The records of a node program's output, each framed as it says (a frame inside a record's
/// bytes is data); anything else is refused.
pub(crate) fn records(out: &[u8]) -> std::result::Result<Vec<Rec<'_>>, String> {
    if out.len() > MAX_OUTPUT {
        return Err(format!("{} bytes of output, more than {MAX_OUTPUT}", out.len()));
    }
    let mut recs = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let nl = out[at..].iter().position(|&b| b == b'\n').ok_or("a record header without its line end")? + at;
        let header = std::str::from_utf8(&out[at..nl]).map_err(|_| "a record header that is not UTF-8")?;
        let f: Vec<&str> = header.split(' ').collect();
        let [mark, kind, release, word, size] = f[..] else {
            return Err(format!("not a record header: {:?}", crate::error::excerpt(header)));
        };
        if mark != "@@mgmt-driver" {
            return Err(format!("not a record header: {:?}", crate::error::excerpt(header)));
        }
        let size: usize = size.parse().map_err(|_| format!("a record size that is not a number: {size:?}"))?;
        let body_end = nl + 1 + size;
        if out.get(body_end) != Some(&b'\n') {
            return Err(format!("a {kind} record of {size} bytes that the output does not hold"));
        }
        recs.push(Rec { kind, release, word, body: &out[nl + 1..body_end] });
        at = body_end + 1;
    }
    Ok(recs)
}

/// A Helm status word: lowercase letters and `-`, as `facts::helm::release_status` believes.
fn status_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|c| c.is_ascii_lowercase() || c == b'-')
}

/// The program's output for `expect` (the releases it was given, in order): one [`Applied`] per
/// release it reached, ending at the first failure. Anything out of order, unknown or malformed
/// is refused with what was wrong.
pub fn parse(out: &[u8], expect: &[(&str, &str)]) -> std::result::Result<Vec<Applied>, String> {
    let mut done: Vec<Applied> = Vec::new();
    let mut cur: Option<Applied> = None;
    for r in records(out)? {
        let (name, ns) = match &cur {
            Some(a) => {
                let ns = expect.iter().find(|(n, _)| *n == a.release).map(|x| x.1).unwrap_or_default();
                (a.release.clone(), ns)
            }
            None => {
                if done.last().is_some_and(|a| a.result.is_err()) {
                    return Err(format!("a record for {} after the run stopped", crate::error::excerpt(r.release)));
                }
                let (n, ns) = *expect.get(done.len()).ok_or("more releases than it was given")?;
                if r.kind != "status" && r.kind != "fail" {
                    return Err(format!("a {} record before the status of {n}", crate::error::excerpt(r.kind)));
                }
                cur = Some(Applied { release: n.to_string(), before: None, recovered: None, result: Err(no_result()) });
                (n.to_string(), ns)
            }
        };
        if r.release != name {
            return Err(format!("a record for {} where {name} was next", crate::error::excerpt(r.release)));
        }
        let a = cur.as_mut().expect("set above");
        match r.kind {
            "status" => {
                let (st, rev) = r.word.split_once('/').ok_or("a status record without a revision")?;
                let rev: u64 = rev.parse().map_err(|_| "a status record whose revision is not a number")?;
                if !status_word(st) {
                    return Err(format!("a status that is not Helm's word: {:?}", crate::error::excerpt(st)));
                }
                a.before = (st != "absent").then(|| (st.to_string(), rev));
            }
            "recovered" => {
                if !matches!(r.word, "pending-install" | "pending-upgrade" | "pending-rollback") {
                    return Err(format!("recovered from {:?}", crate::error::excerpt(r.word)));
                }
                a.recovered = Some(r.word.to_string());
            }
            "release" => {
                if !matches!(r.word, "install" | "upgrade") {
                    return Err(format!("a release record of verb {:?}", crate::error::excerpt(r.word)));
                }
                let made = made(r.body, &name, ns).map_err(|m| format!("release {name}: {m}"))?;
                a.result = Ok(Made { verb: r.word.to_string(), ..made });
                done.push(cur.take().expect("set above"));
            }
            "fail" => {
                let (step, code) = r.word.split_once(':').ok_or("a failure record without an exit status")?;
                if !matches!(step, "status" | "recover" | "install" | "upgrade") {
                    return Err(format!("a failure in step {:?}", crate::error::excerpt(step)));
                }
                let code: i32 = code.parse().map_err(|_| "a failure record whose exit status is not a number")?;
                let stderr_tail = String::from_utf8_lossy(r.body).into_owned();
                a.result = Err(Failure { step: step.to_string(), code, stderr_tail });
                done.push(cur.take().expect("set above"));
            }
            other => return Err(format!("a record of kind {:?}", crate::error::excerpt(other))),
        }
    }
    if let Some(a) = cur {
        return Err(format!("no outcome for release {}", a.release));
    }
    Ok(done)
}

fn no_result() -> Failure {
    Failure { step: String::new(), code: 0, stderr_tail: String::new() }
}

/// The release Helm printed (`-o json`), checked: its name and namespace are the ones asked for,
/// its status one of Helm's words, its revision a number, its manifest's resources as
/// `manifest::parse` allows; the values computed from `chart.values` and `config`.
pub fn made(json: &[u8], release: &str, ns: &str) -> std::result::Result<Made, String> {
    let v: Value = serde_json::from_slice(json).map_err(|e| format!("the release JSON is not JSON: {e}"))?;
    let o = v.as_object().ok_or("the release JSON is not an object")?;
    if o.get("name").and_then(Value::as_str) != Some(release) {
        return Err("the release JSON names another release".into());
    }
    if o.get("namespace").and_then(Value::as_str) != Some(ns) {
        return Err(format!("the release JSON is not of namespace {ns}"));
    }
    let status = v.pointer("/info/status").and_then(Value::as_str).filter(|s| status_word(s));
    let status = status.ok_or("the release JSON has no status Helm would print")?.to_string();
    let revision = o.get("version").and_then(Value::as_u64).ok_or("the release JSON has no revision")?;
    let man = o.get("manifest").and_then(Value::as_str).unwrap_or_default();
    let resources = manifest::parse(man, ns)?;
    let defaults = v.pointer("/chart/values").cloned().unwrap_or(Value::Null);
    let config = o.get("config").cloned().unwrap_or(Value::Null);
    for (what, x) in [("chart.values", &defaults), ("config", &config)] {
        if !(x.is_object() || x.is_null()) {
            return Err(format!("the release JSON's {what} is not an object"));
        }
    }
    Ok(Made { verb: String::new(), status, revision, resources, values: coalesce(defaults, config) })
}

/// The chart's defaults with the user-supplied values over them, as `helm get values --all`
/// computes them for the chart itself: maps merge key by key, anything else is replaced, and a
/// user's null removes the key. (A subchart's defaults are not in the release JSON: they show
/// only where the user set them.)
pub fn coalesce(defaults: Value, config: Value) -> Value {
    match (defaults, config) {
        (Value::Object(mut d), Value::Object(c)) => {
            for (k, cv) in c {
                if cv.is_null() {
                    d.remove(&k);
                    continue;
                }
                let merged = match d.remove(&k) {
                    Some(dv @ Value::Object(_)) if cv.is_object() => coalesce(dv, cv),
                    _ => strip_nulls(cv),
                };
                d.insert(k, merged);
            }
            Value::Object(d)
        }
        (d, Value::Null) => d,
        (_, c) => strip_nulls(c),
    }
}

fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, x)| !x.is_null()).map(|(k, x)| (k, strip_nulls(x))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(kind: &str, rel: &str, word: &str, body: &str) -> String {
        format!("@@mgmt-driver {kind} {rel} {word} {}\n{body}\n", body.len())
    }

    fn release_json(name: &str, status: &str, rev: u64) -> String {
        json!({"name": name, "namespace": "cnf", "version": rev, "info": {"status": status},
               "manifest": "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n",
               "config": {"replicaCount": 3, "image": {"tag": null}},
               "chart": {"values": {"replicaCount": 1, "image": {"repository": "nginx", "tag": ""}}}})
        .to_string()
    }

    #[test]
    fn records_read_back_release_by_release_and_values_are_coalesced() {
        let out = [
            rec("status", "a", "absent/0", ""),
            rec("release", "a", "install", &release_json("a", "deployed", 1)),
            rec("status", "b", "pending-upgrade/4", ""),
            rec("recovered", "b", "pending-upgrade", ""),
            rec("release", "b", "upgrade", &release_json("b", "deployed", 6)),
        ]
        .concat();
        let got = parse(out.as_bytes(), &[("a", "cnf"), ("b", "cnf")]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].before, None);
        let a = got[0].result.as_ref().unwrap();
        assert_eq!((a.verb.as_str(), a.status.as_str(), a.revision), ("install", "deployed", 1));
        assert_eq!(a.values, json!({"replicaCount": 3, "image": {"repository": "nginx"}}));
        assert_eq!(a.resources.len(), 1);
        assert_eq!(got[1].before, Some(("pending-upgrade".into(), 4)));
        assert_eq!(got[1].recovered.as_deref(), Some("pending-upgrade"));
    }

    #[test]
    fn a_failure_ends_the_records_with_helms_stderr() {
        let out =
            [rec("status", "a", "deployed/2", ""), rec("fail", "a", "upgrade:1", "Error: UPGRADE FAILED: x")].concat();
        let got = parse(out.as_bytes(), &[("a", "cnf"), ("b", "cnf")]).unwrap();
        assert_eq!(got.len(), 1);
        let f = got[0].result.as_ref().unwrap_err();
        assert_eq!((f.step.as_str(), f.code, f.stderr_tail.as_str()), ("upgrade", 1, "Error: UPGRADE FAILED: x"));
    }

    #[test]
    fn hostile_or_broken_output_is_refused() {
        let ok = rec("release", "a", "install", &release_json("a", "deployed", 1));
        let cases: Vec<(String, &str)> = vec![
            (rec("status", "a", "absent/0", ""), "no outcome"),
            (ok.clone(), "before the status"),
            (rec("status", "x", "absent/0", "") + &ok, "where a was next"),
            (rec("status", "a", "Deployed/1", "") + &ok, "not Helm's word"),
            (
                rec("status", "a", "absent/0", "") + &rec("release", "a", "install", &release_json("b", "deployed", 1)),
                "another release",
            ),
            (rec("status", "a", "absent/0", "") + &rec("release", "a", "rm", "{}"), "verb"),
            (rec("status", "a", "absent/0", "") + "@@mgmt-driver release a install 99999\n{}\n", "does not hold"),
            (rec("status", "a", "absent/0", "") + "junk\n", "not a record header"),
            (rec("status", "a", "absent/0", "") + &ok + &rec("status", "b", "absent/0", ""), "more releases"),
            (rec("status", "a", "absent/0", "") + &rec("release", "a", "install", "[1]"), "not an object"),
        ];
        for (out, want) in cases {
            let e = parse(out.as_bytes(), &[("a", "cnf")]).unwrap_err();
            assert!(e.contains(want), "{want}: {e}\n{out}");
        }
        // A frame inside Helm's bytes is data: the size says where the record ends.
        let forged = "Error: x\n@@mgmt-driver release a install 2\n{}";
        let out = rec("status", "a", "absent/0", "") + &rec("fail", "a", "install:1", forged);
        let got = parse(out.as_bytes(), &[("a", "cnf")]).unwrap();
        assert_eq!(got[0].result.as_ref().unwrap_err().stderr_tail, forged);
        let big = vec![b' '; MAX_OUTPUT + 1];
        assert!(parse(&big, &[("a", "cnf")]).unwrap_err().contains("more than"));
    }

    #[test]
    fn coalesce_is_helms_for_the_chart_itself() {
        let d = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "s": "x", "gone": 1});
        let c = json!({"a": {"c": 3, "n": null}, "l": [3], "gone": null, "new": {"k": null, "v": 1}});
        assert_eq!(coalesce(d, c), json!({"a": {"b": 1, "c": 3}, "l": [3], "s": "x", "new": {"v": 1}}));
        assert_eq!(coalesce(Value::Null, Value::Null), Value::Null);
        assert_eq!(coalesce(Value::Null, json!({"a": 1})), json!({"a": 1}));
    }

    /// A stand-in `helm` for the program: `status` answers from `$STATE/status-REL` (no file:
    /// `release: not found`; `broken`: another error), with values whose keys say `status` and
    /// `version` to mislead a parser; any verb fails when `$STATE/fail-VERB` exists; every call
    /// is logged to `$STATE/log`.
    const STUB_HELM: &str = r#"#!/bin/sh
echo "$*" >>"$STATE/log"
verb=$1
for a in "$@"; do last2=$last1; last1=$a; done
[ -e "$STATE/fail-$verb" ] && { echo "Error: $verb failed: secret-xyz" >&2; exit 1; }
case $verb in
status)
    rel=$last1
    [ -e "$STATE/status-$rel" ] || { echo 'Error: release: not found' >&2; exit 1; }
    st=$(cat "$STATE/status-$rel")
    [ "$st" = broken ] && { echo 'Error: Kubernetes cluster unreachable' >&2; exit 1; }
    printf '{"name":"%s","info":{"description":"x","status":"%s"},"config":{"status":"deployed","version":9},"version":3,"namespace":"cnf"}\n' "$rel" "$st"
    ;;
install|upgrade)
    printf '{"name":"%s","info":{"status":"deployed"},"config":{"a":1},"chart":{"values":{"a":0,"b":2}},"manifest":"","version":4,"namespace":"cnf"}\n' "$last2"
    ;;
esac
exit 0
"#;

    struct Stub {
        dir: tempfile::TempDir,
    }

    impl Stub {
        fn new() -> Stub {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("bin")).unwrap();
            let helm = dir.path().join("bin/helm");
            std::fs::write(&helm, STUB_HELM).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&helm, std::fs::Permissions::from_mode(0o755)).unwrap();
            Stub { dir }
        }

        fn set(&self, name: &str, content: &str) {
            std::fs::write(self.dir.path().join(name), content).unwrap();
        }

        fn log(&self) -> Vec<String> {
            let l = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            l.lines().map(str::to_string).collect()
        }

        /// Run the program for releases `rels` (each with one values file, made here) and parse.
        fn run(&self, rels: &[&str]) -> (Vec<Applied>, std::process::Output) {
            let items: Vec<Item> = rels
                .iter()
                .map(|r| {
                    let f = self.dir.path().join(format!("values-{r}"));
                    std::fs::write(&f, "x").unwrap();
                    let words =
                        ["--namespace", "cnf", "--values", f.to_str().unwrap(), "-o", "json", "--", r, "repo/c"];
                    Item {
                        release: r.to_string(),
                        namespace: "cnf".into(),
                        words: words.iter().map(|w| w.to_string()).collect(),
                        files: vec![f.display().to_string()],
                    }
                })
                .collect();
            let cmd = command("", &items).unwrap();
            let path = format!("{}:{}", self.dir.path().join("bin").display(), std::env::var("PATH").unwrap());
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("PATH", path)
                .env("STATE", self.dir.path())
                .output()
                .unwrap();
            let expect: Vec<(&str, &str)> = rels.iter().map(|r| (*r, "cnf")).collect();
            let got =
                parse(&o.stdout, &expect).unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&o.stdout)));
            (got, o)
        }

        fn values_left(&self) -> bool {
            std::fs::read_dir(self.dir.path())
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().starts_with("values-"))
        }
    }

    /// The decisions the driver took from `helm status`, now taken on the master: two Helm
    /// processes per release (three with a recovery), each release read back from its `-o json`.
    #[test]
    fn the_program_installs_upgrades_and_recovers_as_the_driver_did() {
        let h = Stub::new();
        h.set("status-b", "deployed");
        h.set("status-c", "failed");
        h.set("status-d", "pending-install");
        h.set("status-e", "pending-upgrade");
        h.set("status-f", "pending-rollback");
        let (got, o) = h.run(&["a", "b", "c", "d", "e", "f"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let verbs: Vec<String> = h.log().iter().map(|l| l.split(' ').next().unwrap().to_string()).collect();
        assert_eq!(
            verbs,
            [
                "status",
                "install",
                "status",
                "upgrade",
                "status",
                "upgrade",
                "status",
                "uninstall",
                "install",
                "status",
                "rollback",
                "upgrade",
                "status",
                "rollback",
                "upgrade"
            ]
        );
        assert_eq!(got.len(), 6);
        assert_eq!(got[0].before, None);
        assert_eq!(got[1].before, Some(("deployed".into(), 3)), "info's status, the last version");
        assert_eq!(got[3].recovered.as_deref(), Some("pending-install"));
        assert_eq!(got[4].recovered.as_deref(), Some("pending-upgrade"));
        let made = got[5].result.as_ref().unwrap();
        assert_eq!((made.verb.as_str(), made.revision), ("upgrade", 4));
        assert_eq!(made.values, json!({"a": 1, "b": 2}));
        assert!(h.log()[1].ends_with("-o json -- a repo/c"), "{:?}", h.log());
        assert!(!h.values_left(), "every values file is removed");
    }

    #[test]
    fn the_program_stops_at_the_first_failure_and_still_removes_every_values_file() {
        for (setup, rels, step, calls) in [
            (("fail-install", ""), ["a", "b"], "install", 2),
            (("status-a", "broken"), ["a", "b"], "status", 1),
            (("fail-uninstall", ""), ["a", "b"], "recover", 2),
        ] {
            let h = Stub::new();
            h.set(setup.0, setup.1);
            if step == "recover" {
                h.set("status-a", "pending-install");
            }
            let (got, o) = h.run(&rels);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(got.len(), 1, "{step}: b is not touched");
            let f = got[0].result.as_ref().unwrap_err();
            assert_eq!((f.step.as_str(), f.code), (step, 1));
            assert!(f.stderr_tail.contains("Error: "), "{f:?}");
            assert_eq!(h.log().len(), calls, "{step}: {:?}", h.log());
            assert!(!h.values_left(), "{step}: every values file is removed");
        }
    }

    #[test]
    fn the_program_refuses_arguments_out_of_form_before_running_helm() {
        let h = Stub::new();
        for args in [
            vec!["a", "cnf"],
            vec!["a", "cnf", "x", "w"],
            vec!["a", "cnf", "1", "w"],
            vec!["a", "cnf", "1", "w", "2", "f"],
        ] {
            let cmd = remote::HELM_APPLY.command(&args).unwrap();
            let path = format!("{}:{}", h.dir.path().join("bin").display(), std::env::var("PATH").unwrap());
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("PATH", path)
                .env("STATE", h.dir.path())
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}");
        }
        assert!(h.log().is_empty(), "{:?}", h.log());
    }
}
