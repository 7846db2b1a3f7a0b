//! The placement labels on workers (`labels.rs` says which labels and builds the command): one
//! kubectl command on a master, right after the workers joined.

use crate::cluster::hook::Hook;
use crate::cluster::labels::{label_cmd, labels};
use crate::cluster::members::k8s_name_of;
use crate::cluster::topology::ClusterNode;
use crate::error::Result;

/// Label the `workers` that have placement data, through the master `via`: one command for all
/// of them (a fleet's scale-out is one round trip, not one per worker). Called right after they
/// joined.
pub async fn apply(h: &Hook, via: &ClusterNode, workers: &[&ClusterNode]) -> Result<()> {
    let mut todo = Vec::new();
    for w in workers.iter().filter(|w| !w.placement.is_empty()) {
        todo.push((k8s_name_of(h, w)?, labels(&w.placement)));
    }
    if todo.is_empty() {
        return Ok(());
    }
    h.rt.phase("workers: placement labels (CIS-node, kubernetes.io/zone)", &[via], false);
    let c = h.rt.root_cmd(via, label_cmd(&todo)?, h.rt.timeouts.command);
    h.rt.exec(via, c).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    /// Workers with placement data are labelled from the main master right after they joined
    /// (instantiate) and after a scale-out; a worker without any gets no step.
    #[tokio::test]
    async fn workers_are_labelled_after_they_joined() {
        use crate::cluster::prepare::Op;
        use crate::cluster::testkit::{position, Fixture};
        let f = Fixture::new(1, 3);
        let inv = std::fs::read_to_string(f.path("inv.yaml")).unwrap();
        let inv = inv + "placement:\n  w1: {host_compute: cmp-1, zone: az-1}\n  w2: {zone: az-2}\n  w3: {zone: az-3}\n";
        std::fs::write(f.path("inv.yaml"), inv).unwrap();
        // w3 joins later, by scale-out.
        let text = std::fs::read_to_string(f.path("inv.yaml")).unwrap();
        let without_w3: String = text.lines().filter(|l| !l.contains("w3")).map(|l| format!("{l}\n")).collect();
        std::fs::write(f.path("inv.yaml"), &without_w3).unwrap();
        f.instantiate().await;
        let e = f.execs();
        let l1 = position(&e, "m1", "kubectl label nodes worker21 CIS-node=cmp-1 kubernetes.io/zone=az-1 --overwrite");
        let l2 = position(&e, "m1", "kubectl label nodes worker22 kubernetes.io/zone=az-2 --overwrite");
        let joined = position(&e, "w1", "install_k8s_cluster.sh -w").unwrap();
        assert!(l1.is_some_and(|l| l > joined) && l2.is_some(), "{e:#?}");
        std::fs::write(f.path("inv.yaml"), text).unwrap();
        let before = e.len();
        let o = f
            .run(
                Op::ScaleEnd,
                serde_json::json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": 1}),
                &["w3"],
            )
            .await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        let l3 = position(e, "m1", "kubectl label nodes worker23 kubernetes.io/zone=az-3 --overwrite");
        assert!(l3 > position(e, "w3", "install_k8s_cluster.sh -w"), "{e:#?}");
        assert!(!e.iter().any(|x| x.contains("label nodes worker21")), "only the new worker: {e:#?}");
    }
}
