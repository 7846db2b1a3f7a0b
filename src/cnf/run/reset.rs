//! `cnf reset [--uninstall]`: forget the cluster's Helm environment on every master (its
//! kubeconfig copy, repositories and caches; OSM's reset), after terminating the CNF when asked.
//! Running it again is a no-op. `--uninstall` reaches every CNF recorded on the cluster id
//! (OSM resets a cluster, not one KDU), each as terminate would.

use serde_json::{json, Value};

use crate::cnf::ops::{cnf_releases, CnfState, Ctx, Record, KIND};
use crate::cnf::params::CnfParams;
use crate::cnf::run::terminate;
use crate::error::{Error, Result};
use crate::facts::helm::EnvReset;
use crate::lifecycle::state::{check_instance_id, Lock, Store};
use crate::lifecycle::Node;

/// Another CNF recorded on the cluster being reset: its id and record, locked for the run (a
/// run working on it refuses the reset rather than race it).
pub struct OtherCnf {
    pub id: String,
    pub st: CnfState,
    _lock: Lock,
}

/// Every CNF but `me` whose record names `cluster_id`, in id order.
pub fn others_on_cluster(store: &Store, me: &str, cluster_id: &str) -> Result<Vec<OtherCnf>> {
    let suffix = format!(".{KIND}.json");
    let mut ids: Vec<String> = match std::fs::read_dir(store.dir()) {
        Ok(rd) => rd
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(&suffix).map(str::to_string))
            .filter(|id| id != me && check_instance_id(id).is_ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    ids.sort();
    let on_cluster = |st: &CnfState| st.cluster_id.as_deref() == Some(cluster_id);
    let mut out = Vec::new();
    for id in ids {
        // Read once to skip other clusters' CNFs without locking them, again under the lock.
        let Some(st) = store.load_doc::<CnfState>(&id, KIND)? else { continue };
        if !on_cluster(&st) {
            continue;
        }
        let lock = store.lock(&id, KIND)?;
        if let Some(st) = store.load_doc::<CnfState>(&id, KIND)?.filter(on_cluster) {
            out.push(OtherCnf { id, st, _lock: lock });
        }
    }
    Ok(out)
}

/// With `uninstall` (--uninstall, and a CNF recorded), terminate the CNF first (its releases,
/// repositories, charts and record); then remove the cluster's Helm environment from every
/// master. A master other than the active one that cannot be reached is reported, not fatal.
/// `others`: the other CNFs recorded on the cluster (with `--uninstall` only), each with its
/// params; each is terminated the same way, its record removed.
pub async fn run(c: &Ctx<'_>, rec: &Record<'_>, uninstall: bool, others: &[(&OtherCnf, CnfParams)]) -> Result<Value> {
    let s = c.s;
    let mut releases = Vec::new();
    let tagged = |out: Value, id: &str| -> Vec<Value> {
        let mut v = match out {
            Value::Array(a) => a,
            _ => Vec::new(),
        };
        for x in &mut v {
            x["vnfInstanceId"] = json!(id);
        }
        v
    };
    if uninstall {
        let out = terminate::uninstall(c, &cnf_releases(c.params, &rec.st)).await?;
        rec.remove()?;
        releases.extend(tagged(out, rec.id));
    }
    for (o, params) in others {
        let other = Ctx { params, instance: &o.id, pkg: None, req_file: "state", opts: c.opts.clone(), ..*c };
        let out = terminate::uninstall(&other, &cnf_releases(params, &o.st)).await?;
        rec.store.remove_doc(&o.id, KIND)?;
        releases.extend(tagged(out, &o.id));
    }
    let Some(cmd) = s.helm.env.reset() else {
        return Err(Error::input(
            "state",
            "cnf",
            "this CNF uses Helm's default environment (recorded by an older driver): there is no \
             cluster environment to reset; pass --cluster-uuid to name one",
        ));
    };
    let nodes = s.all();
    s.rt.phase("forget the cluster's Helm environment on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| {
            let cmd = cmd.clone();
            async move { s.rt.read(n, &EnvReset { script: cmd }).await }
        })
        .await;
    let (mut masters, mut not_reached) = (Vec::new(), Vec::new());
    for (n, r) in res {
        match r {
            Ok(outcome) => masters.push(json!({"master": n.name(), "environment": outcome})),
            Err(e) if n.name() != s.master().name() => not_reached.push(format!("{}: {e}", n.name())),
            Err(e) => return Err(e),
        }
    }
    Ok(json!({
        "clusterId": s.helm.env.id(),
        "releases": releases,
        "masters": masters,
        "mastersNotReached": not_reached,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::cnf::run::testkit::{applied, run_inputs_events, run_op, status, Fixture, M1, M2};
    use crate::cnf::run::{prepare, run};
    use crate::cnf::{Inputs, Op};
    use crate::event::Events;
    use crate::lifecycle::state::Store;
    use crate::lifecycle::{FanOut, Runner, Timeouts};

    #[tokio::test]
    async fn reset_uninstalls_when_asked_removes_the_environment_everywhere_and_is_idempotent() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        f.fake.reply(None, "helm_env_reset.sh /var/lib/mgmt-driver/helm/cnf1", "removed\n");
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        assert_eq!(o.result["releases"][0]["outcome"], "uninstalled", "{}", o.result);
        assert_eq!(
            o.result["masters"],
            json!([{"master": M1, "environment": "removed"}, {"master": M2, "environment": "removed"}])
        );
        let execs = f.fake.execs(M1);
        let pos = |needle: &str| execs.iter().position(|e| e.contains(needle)).unwrap_or_else(|| panic!("{needle}"));
        assert!(
            pos("helm_remove.sh /var/tacker/helm/cnf1 1 cnf1@labrepo vdu2 cnf") < pos("helm_env_reset.sh"),
            "{execs:?}"
        );
        assert!(!f.dir.path().join("state/cnf1.cnf.json").exists(), "the record is gone with the releases");
        // Again: nothing to uninstall, nothing to remove (and nothing made to be removed).
        f.fake.reply(None, "helm_env_reset.sh", "absent\n");
        let n = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        assert_eq!(o.result["releases"], json!([]));
        assert_eq!(o.result["masters"][0]["environment"], "absent");
        let again = &f.fake.execs(M1)[n..];
        assert!(
            !again.iter().any(|e| e.contains("helm_remove.sh") || e.contains("/etc/kubernetes/admin.conf")),
            "{again:?}"
        );
        // Without --uninstall the releases and the record stay.
        f.instantiate().await.unwrap();
        let n = f.fake.execs(M1).len();
        run_op(&f, Op::Reset { uninstall: false }, "cnf1", None).await.unwrap();
        assert!(!f.fake.execs(M1)[n..].iter().any(|e| e.contains("helm_remove.sh")));
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists());
    }

    #[tokio::test]
    async fn reset_uninstall_reaches_every_cnf_recorded_on_the_cluster_id_and_no_other() {
        let f = Fixture::new();
        let on = |id: &str, cluster: &str| Inputs {
            vnf_instance_id: Some(id.into()),
            cluster_uuid: Some(cluster.into()),
            ..f.inputs()
        };
        run_inputs_events(&f, Op::Instantiate, on("cnf1", "k8s-1")).await.0.unwrap();
        run_inputs_events(&f, Op::Instantiate, on("cnf3", "elsewhere")).await.0.unwrap();
        // An OSM-style install on the same cluster, without a request.
        f.fake.reply(None, "status --namespace default -o json -- web", &status("deployed", 1));
        f.reply_applied("web", "default", &applied("web", "default", "absent/0", "install", 1, json!({})));
        let install = Op::Install {
            chart: "stable/nginx".into(),
            release: Some("web".into()),
            version: None,
            values: vec![],
            set: vec![],
        };
        let inputs = Inputs { request: None, ..on("osm-2", "k8s-1") };
        run_inputs_events(&f, install, inputs).await.0.unwrap();
        f.fake.reply(None, "helm_env_reset.sh", "removed\n");
        f.reply_removed("osm-2", &["web"]);
        let n = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        let rels: Vec<(String, String)> = o.result["releases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["vnfInstanceId"].as_str().unwrap().into(), r["release"].as_str().unwrap().into()))
            .collect();
        assert_eq!(rels, vec![("cnf1".into(), "vdu2".into()), ("osm-2".into(), "web".into())], "{}", o.result);
        let execs = f.fake.execs(M1)[n..].join("\n");
        assert!(execs.contains("helm_remove.sh /var/tacker/helm/osm-2 0 web default"), "{execs}");
        assert!(execs.contains("helm_env_reset.sh /var/lib/mgmt-driver/helm/k8s-1"), "{execs}");
        assert!(!execs.contains("cnf3"), "another cluster's CNF was touched: {execs}");
        let state = f.dir.path().join("state");
        assert!(!state.join("cnf1.cnf.json").exists() && !state.join("osm-2.cnf.json").exists());
        assert!(state.join("cnf3.cnf.json").exists());
    }

    #[tokio::test]
    async fn a_dry_run_reset_plans_every_step_and_changes_nothing() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let (events, mut rx) = Events::channel();
        let inputs = Inputs { request: None, ..f.inputs() };
        let op = Op::Reset { uninstall: true };
        let p = prepare(&op, &inputs, Store::read_only(&f.dir.path().join("state"))).unwrap();
        let plan = Arc::new(crate::lifecycle::plan::PlanConnector::new());
        let rt = Runner::new(plan, events, FanOut::default(), Timeouts::default());
        let o = run(&op, &inputs, p, rt).await.unwrap();
        let mut lines = String::new();
        while let Ok(e) = rx.try_recv() {
            lines.push_str(&serde_json::to_string(&e).unwrap());
            lines.push('\n');
        }
        for step in [
            "helm_remove.sh /var/tacker/helm/cnf1 1 cnf1@labrepo vdu2 cnf",
            "helm_env_reset.sh /var/lib/mgmt-driver/helm/cnf1",
        ] {
            assert!(lines.contains(step), "{step} not planned:\n{lines}");
        }
        assert_eq!(o.result["masters"][1]["environment"], "planned", "{}", o.result);
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists(), "a plan removed the record");
    }
}
