//! `cnf services`: the Services of a release, or of every release of the CNF, from its
//! manifest with what the cluster allocated (`cnf/services.rs` reads both). Its only input, the
//! release name, is checked with the other operations' (`run::check_args`).

use serde_json::{json, Value};

use crate::cnf::ops::{cnf_releases, Ctx, Record};
use crate::cnf::services::Service;
use crate::error::Result;
use crate::facts::helm::ReleaseServices;
use crate::facts::kubectl::ServiceLive;

pub async fn run(c: &Ctx<'_>, release: Option<&str>, rec: &Record<'_>) -> Result<Value> {
    let releases = match release {
        Some(r) => vec![r.to_string()],
        None => cnf_releases(c.params, &rec.st),
    };
    let found = services(c, &releases).await?;
    Ok(json!({"releases": releases, "services": found}))
}

/// The Services of `releases` on the active master, release by release.
async fn services(c: &Ctx<'_>, releases: &[String]) -> Result<Vec<Service>> {
    let s = c.s;
    let m = s.master();
    let ns = &c.params.namespace;
    let prefix = s.helm.env.prefix();
    let mut out = Vec::new();
    for rel in releases {
        // Manifests may hold rendered Secrets: read, not streamed.
        let found = s.rt.read(m, &ReleaseServices { helm: &s.helm, release: rel, namespace: ns }).await?;
        for svc in &found {
            out.push(s.rt.read(m, &ServiceLive { prefix: &prefix, service: svc }).await?);
        }
    }
    s.rt.ev(m).emit(crate::event::EventKind::Status {
        subject: "services".into(),
        status: format!("{} in {} release(s)", out.len(), releases.len()),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::cnf::run::testkit::{run_op, Fixture, M1};
    use crate::cnf::Op;

    #[tokio::test]
    async fn services_come_from_the_manifest_with_what_the_cluster_allocated() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        f.fake.reply(
            None,
            "kubectl get service vdu2 --namespace cnf -o json",
            &json!({"kind": "Service", "metadata": {"name": "vdu2", "namespace": "cnf"},
                "spec": {"type": "NodePort", "clusterIP": "10.96.14.3", "ports": [{"port": 80, "nodePort": 30080}]}})
            .to_string(),
        );
        let o = run_op(&f, Op::Services { release: None }, "cnf1", None).await.unwrap();
        let svc = &o.result["services"][0];
        assert_eq!(o.result["releases"], json!(["vdu2"]));
        assert_eq!((svc["name"].as_str(), svc["type"].as_str()), (Some("vdu2"), Some("NodePort")), "{}", o.result);
        assert_eq!(svc["clusterIP"], "10.96.14.3");
        assert_eq!(svc["ports"][0]["nodePort"], 30080);
        let get = f.fake.execs(M1).into_iter().find(|e| e.contains("kubectl get service")).unwrap();
        assert!(get.contains("export KUBECONFIG=/var/lib/mgmt-driver/helm/cnf1/kubeconfig "), "{get}");
        // An address that is not one is refused, naming the service.
        f.fake.reply(
            None,
            "kubectl get service vdu2",
            r#"{"kind": "Service", "metadata": {"name": "vdu2"}, "spec": {"clusterIP": "10.0.0.1 && id"}}"#,
        );
        let e = run_op(&f, Op::Services { release: Some("vdu2".into()) }, "cnf1", None).await.err().unwrap();
        assert!(e.to_string().contains("spec.clusterIP"), "{e}");
        let bad = run_op(&f, Op::Services { release: Some("-x".into()) }, "cnf1", None).await.err().unwrap();
        assert_eq!(bad.exit_code(), crate::error::exit::BAD_INPUT);
    }
}
