//! The node program that heals a whole CNF in one exec (`src/remote/cnf_heal.sh`): its command
//! line, and its records read back. Pure.
//!
//! A heal restarted, waited for and read back each workload with its own kubectl calls: four
//! round trips per workload, one after another. The program does all of it on the master, and
//! the controller matches the namespace's pods to each workload by the workload's selector,
//! read back in the same exec.
//!
//! The output is a master's, so it is not believed: the framing, the order of the records and
//! the workloads they name are checked, selectors as `kubectl::selector_of` checks them, pods as
//! `kubectl::parse_pods` does.

use serde_json::Value;

use crate::cnf::helm_apply::{records, Failure};
use crate::error::Result;
use crate::facts::kubectl::{parse_pods, selector_of, PodState};
use crate::remote;

/// A workload to heal: its kind as the manifest says it (`Deployment`) and its name.
pub type Workload = (String, String);

/// `kind/name` as kubectl takes it.
pub fn target(kind: &str, name: &str) -> String {
    format!("{}/{name}", kind.to_ascii_lowercase())
}

/// The program's command line, after the cluster's environment (`prefix`): every workload of
/// `work` in namespace `ns`, all rollouts within `secs` seconds.
pub fn command(prefix: &str, ns: &str, secs: u64, work: &[Workload]) -> Result<String> {
    let mut args = vec![ns.to_string(), secs.max(1).to_string()];
    args.extend(work.iter().map(|(k, n)| target(k, n)));
    Ok(format!("{prefix}{}", remote::CNF_HEAL.command(&args)?))
}

/// What the program did.
#[derive(Debug, PartialEq)]
pub struct Healed {
    /// Where it stopped: a restart that failed (`restart`), or the first rollout not done in
    /// time (`status`), with the workload.
    pub stopped: Option<(Workload, Failure)>,
    /// Each workload's pods now (in `work`'s order), or why they could not be read.
    pub pods: std::result::Result<Vec<Vec<PodState>>, String>,
}

/// The records of `out`, for the workloads of `work`, in their order.
pub fn parse(out: &[u8], work: &[Workload]) -> std::result::Result<Healed, String> {
    let recs = records(out)?;
    let mut it = recs.iter().peekable();
    let mut stopped = None;
    // Restarts: one record per workload, in order, until a failure.
    for w in work {
        let r = it.next().ok_or("fewer restart records than workloads")?;
        check_names(r.release, w)?;
        match r.kind {
            "restarted" => {}
            "fail" => {
                stopped = Some((w.clone(), failure(r.word, "restart", r.body)?));
                break;
            }
            other => return Err(format!("a {other:?} record where a restart's was expected")),
        }
    }
    if stopped.is_some() {
        return match it.next() {
            None => Ok(Healed { stopped, pods: Err("the heal stopped before reading them".into()) }),
            Some(_) => Err("a record after a failed restart".into()),
        };
    }
    // Rollouts: `ready` per workload, in order, until one is late.
    for w in work {
        let r = it.peek().ok_or("fewer rollout records than workloads")?;
        if r.kind == "objects" {
            break;
        }
        check_names(r.release, w)?;
        match r.kind {
            "ready" => {}
            "late" => stopped = Some((w.clone(), failure(r.word, "status", r.body)?)),
            other => return Err(format!("a {other:?} record where a rollout's was expected")),
        }
        it.next();
        if stopped.is_some() {
            break;
        }
    }
    let objects = it.next().filter(|r| r.kind == "objects").ok_or("no objects record")?;
    let pods = it.next().filter(|r| r.kind == "pods").ok_or("no pods record")?;
    if it.next().is_some() {
        return Err("a record after the pods".into());
    }
    let pods = read_back(objects.word, objects.body, pods.word, pods.body, work);
    Ok(Healed { stopped, pods })
}

/// Each workload's pods: the objects' selectors (checked) matched against the pods' labels.
fn read_back(
    obj_word: &str,
    objects: &[u8],
    pods_word: &str,
    pods: &[u8],
    work: &[Workload],
) -> std::result::Result<Vec<Vec<PodState>>, String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if obj_word != "get:0" {
        return Err(format!("kubectl get of the workloads: {}", crate::error::excerpt(&text(objects))));
    }
    if pods_word != "get:0" {
        return Err(format!("kubectl get pods: {}", crate::error::excerpt(&text(pods))));
    }
    let v: Value = serde_json::from_slice(objects).map_err(|e| format!("the workloads: not JSON: {e}"))?;
    // One name gives the object itself; several give a List.
    let items: Vec<&Value> = match v.get("items").and_then(Value::as_array) {
        Some(a) => a.iter().collect(),
        None => vec![&v],
    };
    let pod_list = text(pods);
    let all = parse_pods(&pod_list)?;
    let labels = pod_labels(&pod_list)?;
    let mut out = Vec::new();
    for (kind, name) in work {
        let o = items
            .iter()
            .find(|o| o["kind"] == kind.as_str() && o["metadata"]["name"] == name.as_str())
            .ok_or_else(|| format!("{kind} {name}: not in kubectl's answer"))?;
        let sel = selector_of(&o.to_string()).map_err(|e| format!("{kind} {name}: {e}"))?;
        let want: Vec<(&str, &str)> = sel.split(',').filter_map(|kv| kv.split_once('=')).collect();
        let mine = all
            .iter()
            .zip(&labels)
            .filter(|(_, l)| want.iter().all(|(k, x)| l.get(*k).and_then(Value::as_str) == Some(*x)))
            .map(|(p, _)| p.clone())
            .collect();
        out.push(mine);
    }
    Ok(out)
}

/// Every pod's labels, in `parse_pods`' order.
fn pod_labels(list: &str) -> std::result::Result<Vec<serde_json::Map<String, Value>>, String> {
    let v: Value = serde_json::from_str(list.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let items = v.get("items").and_then(Value::as_array).ok_or("no items list")?;
    Ok(items
        .iter()
        .map(|p| p.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default())
        .collect())
}

/// A record names the workload it should, as kubectl takes it.
fn check_names(got: &str, (kind, name): &Workload) -> std::result::Result<(), String> {
    if got == target(kind, name) {
        Ok(())
    } else {
        Err(format!("a record for {:?} where {} was expected", crate::error::excerpt(got), target(kind, name)))
    }
}

/// `STEP:CODE` and kubectl's words: the failure, its step checked.
fn failure(word: &str, step: &str, body: &[u8]) -> std::result::Result<Failure, String> {
    let (s, code) = word.split_once(':').ok_or("a failure record without its exit status")?;
    if s != step {
        return Err(format!("a failure record for step {s:?} where {step} was expected"));
    }
    let code = code.parse().map_err(|_| format!("an exit status that is not a number: {code:?}"))?;
    Ok(Failure { step: step.into(), code, stderr_tail: String::from_utf8_lossy(body).into_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: &str, w: &str, word: &str, body: &str) -> String {
        format!("@@mgmt-driver {kind} {w} {word} {}\n{body}\n", body.len())
    }

    fn work() -> Vec<Workload> {
        vec![("Deployment".into(), "a".into()), ("StatefulSet".into(), "b".into())]
    }

    const OBJECTS: &str = r#"{"kind": "List", "items": [
        {"kind": "Deployment", "metadata": {"name": "a"}, "spec": {"selector": {"matchLabels": {"app": "a"}}}},
        {"kind": "StatefulSet", "metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "b", "tier": "db"}}}}]}"#;

    fn pod(name: &str, labels: &str, phase: &str) -> String {
        format!(
            r#"{{"metadata": {{"name": "{name}", "uid": "0af1", "labels": {labels}}}, "status": {{"phase": "{phase}", "conditions": [{{"type": "Ready", "status": "{}"}}]}}}}"#,
            if phase == "Running" { "True" } else { "False" }
        )
    }

    fn pods() -> String {
        format!(
            r#"{{"items": [{}, {}, {}]}}"#,
            pod("a-1", r#"{"app": "a"}"#, "Running"),
            pod("b-0", r#"{"app": "b", "tier": "db"}"#, "Pending"),
            pod("other", r#"{"app": "b"}"#, "Running")
        )
    }

    #[test]
    fn the_command_quotes_the_namespace_and_takes_kind_slash_name() {
        let c = command("export KUBECONFIG=/k; ", "c n", 0, &work()).unwrap();
        assert!(c.starts_with("export KUBECONFIG=/k; sh -c "), "{c}");
        assert!(c.ends_with(" cnf_heal.sh 'c n' 1 deployment/a statefulset/b"), "{c}");
    }

    #[test]
    fn every_workload_gets_the_pods_its_selector_matches() {
        let out = [
            rec("restarted", "deployment/a", "-", ""),
            rec("restarted", "statefulset/b", "-", ""),
            rec("ready", "deployment/a", "-", ""),
            rec("ready", "statefulset/b", "-", ""),
            rec("objects", "-", "get:0", OBJECTS),
            rec("pods", "-", "get:0", &pods()),
        ]
        .concat();
        let h = parse(out.as_bytes(), &work()).unwrap();
        assert_eq!(h.stopped, None);
        let p = h.pods.unwrap();
        assert_eq!(p[0].iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["a-1"]);
        // `other` lacks tier=db: not b's.
        assert_eq!(p[1].iter().map(|x| (x.name.as_str(), x.ready)).collect::<Vec<_>>(), [("b-0", false)]);
    }

    #[test]
    fn a_late_rollout_stops_the_waiting_and_the_pods_are_still_read() {
        let out = [
            rec("restarted", "deployment/a", "-", ""),
            rec("restarted", "statefulset/b", "-", ""),
            rec("late", "deployment/a", "status:1", "error: timed out waiting for the condition"),
            rec("objects", "-", "get:0", OBJECTS),
            rec("pods", "-", "get:0", &pods()),
        ]
        .concat();
        let h = parse(out.as_bytes(), &work()).unwrap();
        let (w, f) = h.stopped.unwrap();
        assert_eq!((w.1.as_str(), f.step.as_str(), f.code), ("a", "status", 1));
        assert!(f.stderr_tail.contains("timed out"));
        assert_eq!(h.pods.unwrap()[0][0].name, "a-1");
    }

    #[test]
    fn a_failed_restart_ends_the_records() {
        let out = [
            rec("restarted", "deployment/a", "-", ""),
            rec("fail", "statefulset/b", "restart:1", "Error from server (NotFound)"),
        ]
        .concat();
        let h = parse(out.as_bytes(), &work()).unwrap();
        assert_eq!(h.stopped.unwrap().1.step, "restart");
        assert!(h.pods.is_err());
        let more = [out, rec("objects", "-", "get:0", OBJECTS)].concat();
        assert!(parse(more.as_bytes(), &work()).is_err());
    }

    /// The program itself on a real `sh`, kubectl a stand-in that logs its words: one restart
    /// per workload, the rollouts in turn until one is late (the next is not waited for), each
    /// with what is left of the time, then the read-back; the records parse.
    #[test]
    fn the_program_restarts_waits_in_turn_and_reads_back_on_a_real_shell() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("bin")).unwrap();
        let kubectl = format!(
            "#!/bin/sh\necho \"$*\" >>\"$STATE/log\"\n\
             case \"$*\" in\n\
             'rollout status deployment/a '*) if [ -e \"$STATE/late\" ]; then echo 'error: timed out waiting for the condition' >&2; exit 1; fi ;;\n\
             'get deployment/a statefulset/b '*) printf '%s' '{objects}' ;;\n\
             'get pods '*) printf '%s' '{pods}' ;;\n\
             esac\n",
            objects = OBJECTS.replace('\n', " "),
            pods = pods()
        );
        std::fs::write(t.path().join("bin/kubectl"), kubectl).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(t.path().join("bin/kubectl"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = || {
            let _ = std::fs::remove_file(t.path().join("log"));
            let path = format!("{}:{}", t.path().join("bin").display(), std::env::var("PATH").unwrap());
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(command("", "cnf", 60, &work()).unwrap())
                .env("PATH", path)
                .env("STATE", t.path())
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let log = std::fs::read_to_string(t.path().join("log")).unwrap();
            (parse(&o.stdout, &work()).unwrap(), log)
        };
        let (h, log) = run();
        assert_eq!(h.stopped, None);
        assert_eq!(h.pods.unwrap()[1][0].name, "b-0");
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(
            lines[..2],
            ["rollout restart deployment/a --namespace cnf", "rollout restart statefulset/b --namespace cnf"]
        );
        for (l, w) in lines[2..4].iter().zip(["deployment/a", "statefulset/b"]) {
            let secs: u64 = l
                .strip_prefix(&format!("rollout status {w} --namespace cnf --timeout="))
                .and_then(|x| x.strip_suffix('s'))
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| panic!("{l}"));
            assert!((59..=60).contains(&secs), "{l}");
        }
        assert_eq!(
            lines[4..],
            ["get deployment/a statefulset/b --namespace cnf -o json", "get pods --namespace cnf -o json"]
        );
        std::fs::write(t.path().join("late"), "").unwrap();
        let (h, log) = run();
        let (w, f) = h.stopped.unwrap();
        assert_eq!((w.1.as_str(), f.step.as_str(), f.code), ("a", "status", 1));
        assert!(f.stderr_tail.contains("timed out"), "{}", f.stderr_tail);
        assert!(!log.contains("rollout status statefulset/b"), "{log}");
        assert!(h.pods.is_ok());
        // Arguments it was not built for are refused before kubectl runs.
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(remote::CNF_HEAL.command(&["cnf", "60", "pod/x"]).unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
    }

    #[test]
    fn a_hostile_master_is_refused() {
        let good = |a: &str| [rec("restarted", a, "-", ""), rec("restarted", "statefulset/b", "-", "")].concat();
        // A record for a workload it was not given.
        assert!(parse(good("deployment/x").as_bytes(), &work()).unwrap_err().contains("deployment/x"));
        // Records missing, or out of order.
        assert!(parse(good("deployment/a").as_bytes(), &work()).is_err());
        let swapped = [
            good("deployment/a"),
            rec("ready", "statefulset/b", "-", ""),
            rec("objects", "-", "get:0", OBJECTS),
            rec("pods", "-", "get:0", &pods()),
        ]
        .concat();
        assert!(parse(swapped.as_bytes(), &work()).is_err());
        // A selector that would reach a command line unchecked, and a pod name that is not one.
        let bad_sel = OBJECTS.replace(r#""app": "a""#, r#""app": "a;rm -rf /""#);
        let with = |o: &str, p: &str| {
            [
                good("deployment/a"),
                rec("ready", "deployment/a", "-", ""),
                rec("ready", "statefulset/b", "-", ""),
                rec("objects", "-", "get:0", o),
                rec("pods", "-", "get:0", p),
            ]
            .concat()
        };
        assert!(parse(with(&bad_sel, &pods()).as_bytes(), &work()).unwrap().pods.unwrap_err().contains("selector"));
        let bad_pod = pods().replace("a-1", "A_1;x");
        assert!(parse(with(OBJECTS, &bad_pod).as_bytes(), &work()).unwrap().pods.is_err());
        // kubectl's own error is passed on, not parsed.
        let failed = [
            good("deployment/a"),
            rec("ready", "deployment/a", "-", ""),
            rec("ready", "statefulset/b", "-", ""),
            rec("objects", "-", "get:1", "Error from server (Forbidden)"),
            rec("pods", "-", "get:0", &pods()),
        ]
        .concat();
        assert!(parse(failed.as_bytes(), &work()).unwrap().pods.unwrap_err().contains("Forbidden"));
    }
}
