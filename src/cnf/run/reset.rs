//! `cnf reset [--uninstall]`: forget the cluster's Helm environment on every master (its
//! kubeconfig copy, repositories and caches; OSM's reset), after terminating the CNF when asked.
//! Running it again is a no-op.

use serde_json::{json, Value};

use crate::cnf::ops::{cnf_releases, Ctx, Record};
use crate::cnf::run::terminate;
use crate::error::{Error, Result};
use crate::facts::helm::EnvReset;
use crate::lifecycle::Node;

/// With `uninstall` (--uninstall, and a CNF recorded), terminate the CNF first (its releases,
/// repositories, charts and record); then remove the cluster's Helm environment from every
/// master. A master other than the active one that cannot be reached is reported, not fatal.
pub async fn run(c: &Ctx<'_>, rec: &Record<'_>, uninstall: bool) -> Result<Value> {
    let s = c.s;
    let releases = if uninstall {
        let out = terminate::uninstall(c, &cnf_releases(c.params, &rec.st)).await?;
        rec.remove()?;
        out
    } else {
        json!([])
    };
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

    use crate::cnf::run::testkit::{run_op, Fixture, M1, M2};
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
        assert!(pos("helm uninstall") < pos("helm_env_reset.sh"), "{execs:?}");
        assert!(!f.dir.path().join("state/cnf1.cnf.json").exists(), "the record is gone with the releases");
        // Again: nothing to uninstall, nothing to remove (and nothing made to be removed).
        f.fake.reply(None, "helm_env_reset.sh", "absent\n");
        let n = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        assert_eq!(o.result["releases"], json!([]));
        assert_eq!(o.result["masters"][0]["environment"], "absent");
        let again = &f.fake.execs(M1)[n..];
        assert!(!again.iter().any(|e| e.contains("helm uninstall") || e.contains("helm_env.sh")), "{again:?}");
        // Without --uninstall the releases and the record stay.
        f.instantiate().await.unwrap();
        let n = f.fake.execs(M1).len();
        run_op(&f, Op::Reset { uninstall: false }, "cnf1", None).await.unwrap();
        assert!(!f.fake.execs(M1)[n..].iter().any(|e| e.contains("helm uninstall")));
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists());
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
            "helm uninstall --namespace cnf --wait -- vdu2",
            "helm repo remove -- cnf1@labrepo",
            "rm -rf -- /var/tacker/helm/cnf1",
            "helm_env_reset.sh /var/lib/mgmt-driver/helm/cnf1",
        ] {
            assert!(lines.contains(step), "{step} not planned:\n{lines}");
        }
        assert_eq!(o.result["masters"][1]["environment"], "planned", "{}", o.result);
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists(), "a plan removed the record");
    }
}
