//! Heal of a Helm CNF. Helm has no heal verb, so the controllers do it: a SOL002 heal names
//! VNFCs, which map (as Tacker maps them) through the VNF instance's `vnfcInfo[].id` →
//! `vnfcResourceInfoId` → `vnfcResourceInfo[].computeResource.resourceId`, the pod's name; the
//! pod is deleted and its controller makes a new one. A SOL003 heal of the whole VNF
//! restarts every Deployment, StatefulSet and DaemonSet of the CNF's releases
//! (`kubectl rollout restart`, which replaces every pod the way a real cluster does, rolling)
//! and waits for each rollout (`kubectl rollout status`) within the operation's timeout; a pod
//! that is not Ready by then fails the heal by name.
//!
//! Its check (`read_request`: the request's VNFCs mapped to pods through the instance, before
//! anything connects) and its steps (`pods`, `whole`) side by side; `targets` and the command
//! lines are pure.

use std::time::Duration;

use serde_json::{json, Value};

use crate::cnf::cluster_env::HelmEnv;
use crate::cnf::heal_program::{self, Workload};
use crate::cnf::manifest::Resource;
use crate::cnf::names;
use crate::cnf::ops::{cnf_releases, CnfState, Ctx, Record};
use crate::cnf::params::CnfParams;
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::facts::helm::ReleaseManifest;
use crate::facts::kubectl::PodState;
use crate::lifecycle::Node;
use crate::request::{HealRequest, VnfInstance};

/// What a heal request asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum HealTarget {
    /// SOL003: the whole VNF (no `vnfcInstanceId`, or `additionalParams.all: true`).
    Whole,
    /// SOL002: these VNFCs, each with the pod it names.
    Pods(Vec<VnfcPod>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct VnfcPod {
    /// The request's `vnfcInstanceId` (the pod name itself when no VNF instance was given).
    pub vnfc: String,
    pub pod: String,
}

/// The workload kinds a whole-CNF heal restarts (the ones `kubectl rollout` knows).
pub const WORKLOADS: [&str; 3] = ["Deployment", "StatefulSet", "DaemonSet"];

/// Map a heal request to what it heals. With the VNF instance (`inst`, and its document's name
/// for errors), every `vnfcInstanceId` must be one of its VNFCs: `vnfcInfo[].id` (Tacker's
/// VNFC id), or a `vnfcResourceInfo[].id`; its `computeResource.resourceId` is the pod. Without
/// an instance (the CLI with no `--vnf-instance`) the ids are pod names, checked as such.
pub fn targets(h: &HealRequest, inst: Option<(&VnfInstance, &str)>, req_file: &str) -> Result<HealTarget> {
    if h.whole_vnf() {
        return Ok(HealTarget::Whole);
    }
    let mut out = Vec::new();
    for (i, id) in h.vnfc_instance_id.iter().enumerate() {
        let field = format!("vnfcInstanceId[{i}]");
        let shown = crate::error::excerpt(id);
        let pod = match inst {
            Some((vi, vi_file)) => {
                let v = vi.vnfc_resource_for(id).ok_or_else(|| {
                    Error::input(
                        req_file,
                        &field,
                        format!("'{shown}' is not a VNFC of the VNF instance ({vi_file}: no vnfcInfo[].id or vnfcResourceInfo[].id is '{shown}')"),
                    )
                })?;
                let at = format!("instantiatedVnfInfo.vnfcResourceInfo[id={}].computeResource.resourceId", v.id);
                let pod = v.resource_id().ok_or_else(|| Error::input(vi_file, &at, "is missing (the pod's name)"))?;
                if !names::dns_subdomain(pod) {
                    let bad = crate::error::excerpt(pod);
                    return Err(Error::input(vi_file, &at, format!("'{bad}' is not a pod name")));
                }
                pod.to_string()
            }
            None if names::dns_subdomain(id) => id.clone(),
            None => {
                return Err(Error::input(
                    req_file,
                    &field,
                    format!("'{shown}' is not a pod name (give --vnf-instance to name VNFCs by their vnfcInfo id)"),
                ))
            }
        };
        out.push(VnfcPod { vnfc: id.clone(), pod });
    }
    Ok(HealTarget::Pods(out))
}

/// The heal request, mapped to what it heals; with the VNF instance (`--vnf-instance`), its
/// VNFC ids name pods through the instance ([`targets`]).
pub fn read_request(a: &Inputs, req_file: &str) -> Result<HealTarget> {
    let h: HealRequest = a.need_request("heal")?.load()?;
    let inst: Option<(VnfInstance, String)> =
        a.vnf_instance.as_ref().map(|d| Ok::<_, Error>((d.load()?, d.name()))).transpose()?;
    targets(&h, inst.as_ref().map(|(i, n)| (i, n.as_str())), req_file)
}

/// Heal what the request named: its VNFCs' pods, or every workload of the CNF.
pub async fn run(c: &Ctx<'_>, t: &HealTarget, rec: &Record<'_>) -> Result<Value> {
    match t {
        HealTarget::Pods(named) => pods(c, named).await,
        HealTarget::Whole => whole(c, &heal_releases(c.params, &rec.st)).await,
    }
}

/// The releases a whole-CNF heal restarts, with the resources recorded for each (the plan's
/// stand-in for their manifests): the request's releases, else the recorded ones.
fn heal_releases(params: &CnfParams, st: &CnfState) -> Vec<(String, Vec<Resource>)> {
    cnf_releases(params, st)
        .into_iter()
        .map(|n| {
            let res = st.releases.get(&n).map(|r| r.resources.clone()).unwrap_or_default();
            (n, res)
        })
        .collect()
}

/// `kubectl ARGS...` in the cluster's environment (its kubeconfig, as Helm's), every word quoted.
fn kubectl(env: &HelmEnv, words: &[&str]) -> Result<String> {
    env.kubectl().args(words)
}

pub fn delete_pod(env: &HelmEnv, pod: &str, ns: &str) -> Result<String> {
    kubectl(env, &["delete", "pod", pod, "--namespace", ns, "--wait=true"])
}

pub fn rollout_restart(env: &HelmEnv, kind: &str, name: &str, ns: &str) -> Result<String> {
    kubectl(env, &["rollout", "restart", &format!("{}/{name}", kind.to_ascii_lowercase()), "--namespace", ns])
}

/// `kubectl rollout status` for at most `wait` (whole seconds, at least 1).
pub fn rollout_status(env: &HelmEnv, kind: &str, name: &str, ns: &str, wait: Duration) -> Result<String> {
    let t = format!("--timeout={}s", wait.as_secs().max(1));
    kubectl(env, &["rollout", "status", &format!("{}/{name}", kind.to_ascii_lowercase()), "--namespace", ns, &t])
}

/// SOL002: delete each named pod; its controller makes a replacement.
pub async fn pods(c: &Ctx<'_>, targets: &[VnfcPod]) -> Result<Value> {
    let ns = &c.params.namespace;
    let mut out = Vec::new();
    for t in targets {
        c.s.run(delete_pod(&c.s.helm.env, &t.pod, ns)?, c.timeout).await?;
        out.push(json!({"vnfcInstanceId": t.vnfc, "pod": t.pod, "deleted": true}));
    }
    Ok(Value::Array(out))
}

fn pods_json_value(pods: &[PodState]) -> Value {
    Value::Array(
        pods.iter().map(|p| json!({"name": p.name, "uid": p.uid, "phase": p.phase, "ready": p.ready})).collect(),
    )
}

/// SOL003: restart every workload of `releases` (name, and the resources recorded for it: the
/// plan's stand-in for the manifest read now), then wait for each rollout within the
/// operation's timeout: all in one exec on the master (`cnf/heal_program.rs`). Reports every
/// workload's pods (new names and uids, all Ready).
pub async fn whole(c: &Ctx<'_>, releases: &[(String, Vec<Resource>)]) -> Result<Value> {
    let s = c.s;
    let ns = c.params.namespace.clone();
    let m = s.master();
    let mut work: Vec<(String, Workload)> = Vec::new();
    for (rel, recorded) in releases {
        let man = ReleaseManifest { helm: &s.helm, release: rel, namespace: &ns, planned: recorded.clone() };
        let res = s.rt.read(m, &man).await?;
        for r in res.into_iter().filter(|r| WORKLOADS.contains(&r.kind.as_str()) && r.namespace == ns) {
            work.push((rel.clone(), (r.kind, r.name)));
        }
    }
    if work.is_empty() {
        return Ok(json!({"heal": "whole VNF", "workloads": []}));
    }
    s.rt.phase("restart every workload of the releases and wait until every pod is Ready again", &[m], false);
    let workloads: Vec<Workload> = work.iter().map(|(_, w)| w.clone()).collect();
    let cmd = heal_program::command(&s.helm.env.prefix(), &ns, c.timeout.as_secs(), &workloads)?;
    // Every restart, every rollout in turn within the timeout, and the read-back.
    let deadline = c.timeout + s.rt.timeouts.command * (workloads.len() as u32 + 2);
    let Some((out, shown)) = s.program(m, cmd, deadline).await? else {
        let planned =
            work.iter().map(|(rel, (kind, name))| json!({"release": rel, "kind": kind, "name": name, "pods": []}));
        return Ok(json!({"heal": "whole VNF", "workloads": planned.collect::<Vec<_>>()}));
    };
    let healed = heal_program::parse(&out, &workloads)
        .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), &shown, "the heal's records", msg))?;
    let release_of = |w: &Workload| work.iter().find(|(_, x)| x == w).map(|(r, _)| r.clone()).unwrap_or_default();
    if let Some((w, f)) = healed.stopped {
        let (kind, name) = &w;
        let rel = release_of(&w);
        let (command, stderr_tail) = if f.step == "restart" {
            (rollout_restart(&s.helm.env, kind, name, &ns)?, format!("release {rel}: {kind} {name}: {}", f.stderr_tail))
        } else {
            let at = workloads.iter().position(|x| x == &w).unwrap_or(0);
            let pods = healed.pods.as_ref().ok().and_then(|p| p.get(at));
            let late: Vec<String> = pods
                .map(|p| p.iter().filter(|p| !p.ready).map(|p| format!("{} ({})", p.name, p.phase)).collect())
                .unwrap_or_default();
            (
                rollout_status(&s.helm.env, kind, name, &ns, c.timeout)?,
                format!(
                    "release {rel}: {kind} {name}: not every pod was Ready again within {}s: {}\n{}",
                    c.timeout.as_secs(),
                    if late.is_empty() { "(the pods could not be listed)".to_string() } else { late.join(", ") },
                    f.stderr_tail
                ),
            )
        };
        return Err(Error::Remote {
            node: m.name().into(),
            command,
            status: if f.step == "restart" { format!("exit {}", f.code) } else { "heal failed".into() },
            stderr_tail,
        });
    }
    let pods = healed
        .pods
        .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), &shown, "the healed workloads' pods", msg))?;
    let out: Vec<Value> = work
        .iter()
        .zip(&pods)
        .map(|((rel, (kind, name)), p)| json!({"release": rel, "kind": kind, "name": name, "pods": pods_json_value(p)}))
        .collect();
    Ok(json!({"heal": "whole VNF", "workloads": out}))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::cnf::run::testkit::{run_op, Fixture, M1};
    use crate::cnf::run::{prepare, run};
    use crate::cnf::Op;
    use crate::event::Events;
    use crate::lifecycle::state::Store;
    use crate::lifecycle::{FanOut, Runner, Timeouts};
    use crate::request::parse;

    fn inst() -> VnfInstance {
        parse(
            r#"{"id": "i1", "instantiatedVnfInfo": {"flavourId": "simple",
                "vnfcResourceInfo": [
                  {"id": "res-1", "vduId": "VDU1", "computeResource": {"resourceId": "vdu1-localhelm-7b5d6c8f9-abcde", "vimLevelResourceType": "Deployment"}},
                  {"id": "res-2", "vduId": "VDU2", "computeResource": {"resourceId": "bad name!"}}],
                "vnfcInfo": [{"id": "vnfc-1", "vduId": "VDU1", "vnfcResourceInfoId": "res-1", "vnfcState": "STARTED"},
                             {"id": "vnfc-2", "vduId": "VDU2", "vnfcResourceInfoId": "res-2"}]}}"#,
            "inst.json",
        )
        .unwrap()
    }

    fn heal(v: &str) -> HealRequest {
        parse(v, "heal.json").unwrap()
    }

    #[test]
    fn a_vnfc_id_maps_through_vnfc_info_to_the_pod_as_tacker_does() {
        let i = inst();
        let t = targets(&heal(r#"{"vnfcInstanceId": ["vnfc-1"]}"#), Some((&i, "inst.json")), "heal.json").unwrap();
        assert_eq!(
            t,
            HealTarget::Pods(vec![VnfcPod { vnfc: "vnfc-1".into(), pod: "vdu1-localhelm-7b5d6c8f9-abcde".into() }])
        );
        // The resource info id itself names the same VNFC.
        let t = targets(&heal(r#"{"vnfcInstanceId": "res-1"}"#), Some((&i, "inst.json")), "heal.json").unwrap();
        assert!(matches!(&t, HealTarget::Pods(p) if p[0].pod == "vdu1-localhelm-7b5d6c8f9-abcde"));
    }

    #[test]
    fn an_unknown_vnfc_id_or_a_bad_resource_id_is_bad_input_naming_the_path() {
        let i = inst();
        let e = targets(&heal(r#"{"vnfcInstanceId": ["vnfc-1", "nope"]}"#), Some((&i, "inst.json")), "heal.json")
            .unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        let e = e.to_string();
        assert!(e.contains("heal.json") && e.contains("vnfcInstanceId[1]") && e.contains("'nope'"), "{e}");
        // A pod name is not a VNFC id once the instance is known.
        let e =
            targets(&heal(r#"{"vnfcInstanceId": ["vdu1-localhelm-7b5d6c8f9-abcde"]}"#), Some((&i, "inst.json")), "h")
                .unwrap_err()
                .to_string();
        assert!(e.contains("vnfcInstanceId[0]"), "{e}");
        let e =
            targets(&heal(r#"{"vnfcInstanceId": ["vnfc-2"]}"#), Some((&i, "inst.json")), "h").unwrap_err().to_string();
        assert!(
            e.contains("inst.json") && e.contains("computeResource.resourceId") && e.contains("not a pod name"),
            "{e}"
        );
    }

    #[test]
    fn without_an_instance_the_ids_are_pod_names_and_no_id_heals_the_whole_vnf() {
        let t = targets(&heal(r#"{"vnfcInstanceId": ["web-0"]}"#), None, "h").unwrap();
        assert_eq!(t, HealTarget::Pods(vec![VnfcPod { vnfc: "web-0".into(), pod: "web-0".into() }]));
        let e = targets(&heal(r#"{"vnfcInstanceId": ["a;b"]}"#), None, "h").unwrap_err().to_string();
        assert!(e.contains("vnfcInstanceId[0]") && e.contains("not a pod name"), "{e}");
        assert_eq!(targets(&heal("{}"), None, "h").unwrap(), HealTarget::Whole);
        let all = heal(r#"{"vnfcInstanceId": ["x"], "additionalParams": {"all": true}}"#);
        assert_eq!(targets(&all, Some((&inst(), "i")), "h").unwrap(), HealTarget::Whole);
    }

    #[test]
    fn rollout_commands_quote_every_word() {
        let legacy = HelmEnv::Legacy;
        assert_eq!(
            rollout_restart(&legacy, "Deployment", "vdu1-localhelm", "cnf").unwrap(),
            "export KUBECONFIG=/etc/kubernetes/admin.conf; kubectl rollout restart deployment/vdu1-localhelm --namespace cnf"
        );
        let st = rollout_status(&legacy, "StatefulSet", "db", "cnf", Duration::from_millis(200)).unwrap();
        assert!(st.ends_with("kubectl rollout status statefulset/db --namespace cnf --timeout=1s"), "{st}");
        assert!(delete_pod(&legacy, "p-1", "ns")
            .unwrap()
            .ends_with("kubectl delete pod p-1 --namespace ns --wait=true"));
        // A cluster's kubectl reads that cluster's kubeconfig, as its Helm does.
        let east = HelmEnv::cluster("east").unwrap();
        let d = delete_pod(&east, "p-1", "ns").unwrap();
        assert!(d.starts_with("export KUBECONFIG=/var/lib/mgmt-driver/helm/east/kubeconfig "), "{d}");
    }

    /// A node program's record, framed as `cnf_heal.sh` frames it.
    fn rec(kind: &str, w: &str, word: &str, body: &str) -> String {
        format!("@@mgmt-driver {kind} {w} {word} {}\n{body}\n", body.len())
    }

    /// The fake's answers for a whole-CNF heal of vdu2: a Deployment in its manifest, then the
    /// heal program's records: restarted, `rollout` (ready, or late with kubectl's error), the
    /// Deployment with its selector, and the namespace's pods (`pod`: one of vdu2's, and one
    /// of another workload that the selector must leave out).
    fn whole_heal_replies(f: &Fixture, rollout: &str, pod: &str) {
        let w = "deployment/vdu2-nginxlab";
        let objects = r#"{"kind": "Deployment", "metadata": {"name": "vdu2-nginxlab"}, "spec": {"selector": {"matchLabels": {"app": "vdu2"}}}}"#;
        let pods = format!(
            r#"{{"items": [{pod}, {{"metadata": {{"name": "vdu1-x", "uid": "0b", "labels": {{"app": "vdu1"}}}}, "status": {{"phase": "Running"}}}}]}}"#
        );
        let late = rollout != "ready";
        let out = [
            rec("restarted", w, "-", ""),
            if late { rec("late", w, "status:1", rollout) } else { rec("ready", w, "-", "") },
            rec("objects", "-", "get:0", objects),
            rec("pods", "-", "get:0", &pods),
        ]
        .concat();
        f.fake
            .reply(
                None,
                "get manifest --namespace cnf -- vdu2",
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vdu2-nginxlab\n",
            )
            .reply(None, "cnf_heal.sh cnf ", &out);
    }

    #[tokio::test]
    async fn a_whole_cnf_heal_restarts_every_workload_and_waits_for_its_rollout() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let ready = r#"{"metadata": {"name": "vdu2-nginxlab-6b9c-x1", "uid": "0af1", "labels": {"app": "vdu2"}}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}"#;
        whole_heal_replies(&f, "ready", ready);
        let before = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Heal, "cnf1", Some(json!({}))).await.unwrap();
        let execs = f.fake.execs(M1);
        // One exec restarts, waits and reads back (after the manifest's read).
        let heal: Vec<&String> = execs[before..].iter().filter(|e| e.contains("cnf_heal.sh")).collect();
        assert_eq!(heal.len(), 1, "{execs:?}");
        assert!(heal[0].ends_with("cnf_heal.sh cnf 300 deployment/vdu2-nginxlab"), "{}", heal[0]);
        let w = &o.result["workloads"][0];
        assert_eq!((w["release"].as_str(), w["kind"].as_str()), (Some("vdu2"), Some("Deployment")), "{}", o.result);
        assert_eq!(w["pods"].as_array().map(Vec::len), Some(1), "{}", o.result);
        assert_eq!(w["pods"][0]["ready"], true);
    }

    #[tokio::test]
    async fn a_pod_that_is_not_ready_again_fails_the_heal_by_name() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let pending = r#"{"metadata": {"name": "vdu2-nginxlab-6b9c-x2", "uid": "0af2", "labels": {"app": "vdu2"}}, "status": {"phase": "Pending"}}"#;
        whole_heal_replies(&f, "error: timed out waiting for the condition", pending);
        let e = run_op(&f, Op::Heal, "cnf1", Some(json!({"additionalParams": {"all": true}}))).await.err().unwrap();
        let e = e.to_string();
        assert!(
            e.contains("release vdu2") && e.contains("vdu2-nginxlab-6b9c-x2 (Pending)") && e.contains("timed out"),
            "{e}"
        );
        assert!(!e.contains("vdu1-x"), "{e}");
    }

    #[tokio::test]
    async fn a_sol002_heal_deletes_the_pod_its_vnfc_id_names_in_the_instance() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let inst = json!({"id": "cnf1", "instantiatedVnfInfo": {
            "vnfcResourceInfo": [{"id": "r1", "vduId": "VDU2", "computeResource": {"resourceId": "vdu2-nginxlab-6b9c-x1"}}],
            "vnfcInfo": [{"id": "vnfc-9", "vduId": "VDU2", "vnfcResourceInfoId": "r1"}]}});
        let path = f.dir.path().join("inst.json");
        std::fs::write(&path, inst.to_string()).unwrap();
        let req = f.dir.path().join("heal.json");
        std::fs::write(&req, json!({"vnfcInstanceId": ["vnfc-9"]}).to_string()).unwrap();
        let inputs =
            Inputs { request: Some(req.clone().into()), vnf_instance: Some(path.clone().into()), ..f.inputs() };
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        let p = prepare(&Op::Heal, &inputs, store).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let o = run(&Op::Heal, &inputs, p, rt).await.unwrap();
        assert_eq!(o.result[0]["pod"], "vdu2-nginxlab-6b9c-x1");
        assert!(f
            .fake
            .execs(M1)
            .iter()
            .any(|e| e.contains("kubectl delete pod vdu2-nginxlab-6b9c-x1 --namespace cnf")));
        // An id the instance does not hold: bad input naming the field, nothing run.
        std::fs::write(&req, json!({"vnfcInstanceId": ["vdu2-nginxlab-6b9c-x1"]}).to_string()).unwrap();
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        let e = prepare(&Op::Heal, &inputs, store).err().unwrap();
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        assert!(e.to_string().contains("vnfcInstanceId[0]"), "{e}");
    }
}
