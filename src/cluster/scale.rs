//! `scale_start` (SCALE_IN) and `scale_end` (SCALE_OUT). Only workers scale, as in Tacker.
//!
//! SCALE_IN, before the VNFM deletes the VMs: for each removed worker, drain it with a bounded
//! wait for eviction, check that only DaemonSet pods are left, delete the Node; then drop its
//! line from `/etc/hosts` on every remaining node.
//!
//! SCALE_OUT, after the VNFM created the VMs: a fresh join token from a master, then each new
//! worker on its own (`worker_join.rs`: scripts, the full `/etc/hosts`, join; all at once), label
//! those that joined, then add their lines to `/etc/hosts` on the existing nodes and bring those
//! nodes' registries to the params. A worker that failed fails the hook at the end, named.

use crate::cluster::drain::remove_from_cluster;
use crate::cluster::hook::Hook;
use crate::cluster::labels_apply;
use crate::cluster::members::{installed_masters, k8s_name_of};
use crate::cluster::node_cmd as cmd;
use crate::cluster::prepare_nodes::prepare_nodes;
use crate::cluster::topology::ClusterNode;
use crate::cluster::worker_join::join_workers;
use crate::error::{Error, Result};
use crate::lifecycle::all_ok;
use crate::lifecycle::Role;

pub async fn scale_in(h: &Hook, targets: &[&ClusterNode]) -> Result<serde_json::Value> {
    for t in targets {
        if t.role != Role::Worker {
            return Err(Error::input("--node", t.name(), "only workers scale; this is a master"));
        }
    }
    let masters = installed_masters(h);
    let via = h.rt.first_reachable(&masters).await?;
    h.rt.phase("scale in: drain and delete", targets, false);
    for t in targets {
        let k = k8s_name_of(h, t)?;
        if !h.installed(t) {
            h.outcome(t, "not a member of the cluster; nothing to do");
            continue;
        }
        let r = remove_from_cluster(h, via, &k, t).await;
        h.rt.done(t, &r);
        r?;
        h.with_state(|s| s.nodes.remove(t.name()));
        h.save()?;
        h.outcome(t, format!("drained and deleted ({k})"));
    }
    let gone: Vec<String> = targets.iter().map(|t| t.nic_ip.clone()).collect();
    let rest: Vec<&ClusterNode> =
        h.topo.all().filter(|n| h.installed(n) && !targets.iter().any(|t| t.name() == n.name())).collect();
    h.rt.phase("/etc/hosts on the remaining nodes", &rest, true);
    let entries: Vec<(String, String)> =
        h.topo.hosts_entries().into_iter().filter(|(ip, _)| !gone.contains(ip)).collect();
    let res =
        h.rt.each(&rest, |n| {
            let entries = &entries;
            let gone = &gone;
            async move {
                h.rt.exec(n, h.rt.root_cmd(n, cmd::hosts_update(entries, gone)?, h.rt.timeouts.command))
                    .await
                    .map(|_| ())
            }
        })
        .await;
    all_ok(res)?;
    // Their /etc/hosts is no longer what their last prepare set: the next prepare runs again.
    h.with_state(|s| {
        for n in &rest {
            if let Some(x) = s.nodes.get_mut(n.name()) {
                x.prepared_secret_digest = None;
            }
        }
    });
    h.save()?;
    Ok(serde_json::Value::Null)
}

pub async fn scale_out(h: &Hook, targets: &[&ClusterNode]) -> Result<serde_json::Value> {
    for t in targets {
        if t.role != Role::Worker {
            return Err(Error::input("--node", t.name(), "only workers scale; this is a master"));
        }
    }
    let new: Vec<&ClusterNode> = targets.iter().copied().filter(|t| !h.installed(t)).collect();
    if new.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    let masters = installed_masters(h);
    let via = h.rt.first_reachable(&masters).await?;
    let token = h.join_token(via).await?;
    let hash = h.ca_hash()?;
    // Each new worker on its own: an unreachable one does not keep the others out.
    let (joined, failed) = join_workers(h, "scale out: join workers", &new, &token, &hash).await;
    if joined.is_empty() {
        return Err(failed.expect("no worker joined, so one failed"));
    }
    let new = joined;
    labels_apply::apply(h, via, &new).await?;
    crate::cluster::storage_ops::client_step(h, &new).await?;
    let old: Vec<&ClusterNode> =
        h.topo.all().filter(|n| h.installed(n) && !new.iter().any(|t| t.name() == n.name())).collect();
    // Their /etc/hosts, and the registries as the params list them now, on every node (not
    // only the new): one node program each.
    prepare_nodes(h, &old).await?;
    failed.map_or(Ok(serde_json::Value::Null), Err)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::cluster::prepare::Op;
    use crate::cluster::testkit::{position, Fixture};

    #[tokio::test]
    async fn scale_out_joins_only_new_workers_and_tells_the_old_nodes() {
        let f = Fixture::new(1, 1);
        f.instantiate().await;
        f.write_inventory(1, 3);
        let before = f.execs().len();
        let o =
            f.run(Op::ScaleEnd, json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": "2"}), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        assert!(position(e, "w1", "install_k8s_cluster.sh").is_none(), "{e:#?}");
        let token = position(e, "m1", "kubeadm token create").unwrap();
        for w in ["w2", "w3"] {
            assert!(position(e, w, "install_k8s_cluster.sh -w").unwrap() > token, "{e:#?}");
        }
        // The existing nodes learn the new ones' /etc/hosts lines after they joined.
        let joined = position(e, "w3", "install_k8s_cluster.sh").unwrap();
        assert!(position(e, "w1", "hosts_update.sh").unwrap() > joined, "{e:#?}");
        assert!(position(e, "w1", "registry_apply.sh").unwrap() > joined, "{e:#?}");
    }

    /// Issue 22: one new worker that never boots kept a reachable one from joining (their
    /// uploads ran as one step, which failed first). Each joins or fails on its own.
    #[tokio::test]
    async fn an_unreachable_new_worker_keeps_no_other_from_joining_and_is_named() {
        let f = Fixture::new(1, 1);
        f.instantiate().await;
        f.write_inventory(1, 3);
        f.fake.down("w2");
        let before = f.execs().len();
        let o =
            f.run(Op::ScaleEnd, json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": "2"}), &[]).await;
        let e = &f.execs()[before..];
        assert!(position(e, "w3", "install_k8s_cluster.sh -w").is_some(), "the reachable worker joins: {e:#?}");
        let err = o.error.expect("the unreachable worker fails the hook").to_string();
        assert!(err.contains("w2") && !err.contains("w3"), "{err}");
        let nodes = &f.state()["nodes"];
        assert_eq!(nodes["w3"]["installed"], true, "{nodes:#}");
        assert!(nodes.get("w2").is_none_or(|n| n["installed"] != true), "{nodes:#}");
        // The existing node still learns the joined worker's /etc/hosts line.
        let joined = position(e, "w3", "install_k8s_cluster.sh").unwrap();
        assert!(position(e, "w1", "hosts_update.sh").is_some_and(|p| p > joined), "{e:#?}");
    }

    #[tokio::test]
    async fn scale_in_drains_named_workers_and_a_non_member_is_a_no_op() {
        let f = Fixture::new(1, 2);
        f.instantiate().await;
        let body = json!({"type": "SCALE_IN", "aspectId": "worker", "numberOfSteps": 1});
        let e = f.prepare(Op::ScaleStart, body.clone(), &[]).err().expect("needs --node");
        assert!(e.to_string().contains("--node"), "{e}");
        let o = f.run(Op::ScaleStart, body.clone(), &["w2"]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        assert!(f.state()["nodes"].get("w2").is_none());
        let before = f.execs().len();
        let o = f.run(Op::ScaleStart, body, &["w2"]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        assert!(!f.execs()[before..].iter().any(|x| x.contains("drain")), "{:#?}", &f.execs()[before..]);
    }

    /// Tacker's scale_rollback_start passes the instance as it was before the scale, without
    /// the VNFCs scale_end joined; the hook takes them out by the names it recorded
    /// (`vnfm::run`'s unjoin: SCALE_IN at scale_start, `--node` = what scale_end joined).
    #[tokio::test]
    async fn a_rolled_back_scale_out_takes_out_the_recorded_workers_tacker_no_longer_lists() {
        use crate::cluster::testkit::tacker_instance;
        let f = Fixture::new(1, 0);
        let before = tacker_instance(&[("master", "srv-m1", "192.0.2.11"), ("worker", "srv-w1", "192.0.2.21")]);
        let mut after = before.clone();
        let grown = tacker_instance(&[("worker", "srv-w2", "192.0.2.22")]);
        for key in ["vnfcResourceInfo", "extCpInfo", "vnfcInfo"] {
            let add = grown["instantiatedVnfInfo"][key].as_array().unwrap().iter().filter(|v| v["id"] != "ext-vip");
            after["instantiatedVnfInfo"][key].as_array_mut().unwrap().extend(add.cloned());
        }
        let o = f.run_tacker(Op::InstantiateEnd, Fixture::instantiate_body(), &[], &before).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        let out = json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": 1});
        let o = f.run_tacker(Op::ScaleEnd, out, &[], &after).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(f.state()["nodes"]["srv-w2"]["installed"], true);
        let body = json!({"type": "SCALE_IN", "aspectId": "worker", "numberOfSteps": 1});
        let mark = f.execs().len();
        let o = f.run_tacker(Op::ScaleStart, body.clone(), &["srv-w2"], &before).await.expect("the joined worker");
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[mark..];
        assert!(position(e, "srv-m1", "kubectl drain worker22").is_some(), "{e:#?}");
        assert!(position(e, "srv-m1", "delete_node.sh worker22").is_some(), "{e:#?}");
        assert!(f.state()["nodes"].get("srv-w2").is_none(), "{:#}", f.state()["nodes"]);
        // A name neither listed nor recorded is still refused.
        let e = f.run_tacker(Op::ScaleStart, body, &["srv-w9"], &before).await.err().expect("refused");
        assert!(e.to_string().contains("no such node"), "{e}");
    }

    #[tokio::test]
    async fn scale_in_fails_over_to_the_next_master_that_answers() {
        let f = Fixture::new(2, 2);
        f.instantiate().await;
        f.fake.down("m1");
        let before = f.execs().len();
        let body = json!({"type": "SCALE_IN", "aspectId": "worker", "numberOfSteps": 1});
        let o = f.run(Op::ScaleStart, body, &["w2"]).await;
        let e = &f.execs()[before..];
        assert!(position(e, "m2", "kubectl drain worker22").is_some(), "{e:#?}");
        assert!(position(e, "m2", "delete_node.sh worker22").is_some(), "{e:#?}");
        assert!(f.state()["nodes"].get("w2").is_none(), "the removed worker is forgotten at once");
        // m1 is still down for the /etc/hosts step that follows: named, not hidden.
        let err = o.error.expect("m1 cannot get its /etc/hosts line removed").to_string();
        assert!(err.contains("m1"), "{err}");
    }
}
