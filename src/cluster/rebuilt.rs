//! Which nodes of a hook are VMs the VNFM has just (re)built at an address we may already know,
//! and so offer a host key of their own: the targets of `heal_end` (SOL002), every node of a
//! whole-VNF `heal_end` (SOL003), the new workers of a SCALE_OUT `scale_end` (a reused address).
//!
//! The decision is pure ([`rebuilt`]); it is applied by switching exactly those nodes' host-key
//! policy to [`HostKeyCheck::Relearn`] ([`apply`]; `cluster::run` shows them as a step), which
//! the SSH edge (`ssh/host_key.rs`) honours when it connects: the old entries of that host:port
//! are replaced, with an event that names the node and both fingerprints. Every other node keeps its policy, so a changed key on
//! a node that was not rebuilt is still refused. Only accept-new nodes re-learn: `strict` means
//! the operator records keys themselves (the new VM's key must be in known_hosts before the
//! hook), and `off` checks nothing anyway.

use crate::cluster::op::{Op, Req};
use crate::cluster::topology::{ClusterNode, Topology};
use crate::inventory::HostKeyCheck;
use crate::request::ScaleType;

/// The node names (topology names) whose VMs are new in this hook. `targets` are the hook's
/// target nodes (`prepare::targets`), `all` every node of the cluster.
pub fn rebuilt<'a>(op: Op, req: &Req, targets: &[String], all: impl Iterator<Item = &'a str>) -> Vec<String> {
    match (op, req) {
        (Op::HealEnd, Req::Heal(r)) if r.whole_vnf() => all.map(str::to_string).collect(),
        (Op::HealEnd, Req::Heal(_)) => targets.to_vec(),
        (Op::ScaleEnd, Req::Scale(r)) if r.kind == ScaleType::Out => targets.to_vec(),
        _ => Vec::new(),
    }
}

/// Let exactly the `rebuilt` nodes re-learn their host key (those under accept-new); returns
/// the nodes switched, in topology order.
pub fn apply(topo: &mut Topology, rebuilt: &[String]) -> Vec<String> {
    let mut switched = Vec::new();
    for n in topo.masters.iter_mut().chain(topo.workers.iter_mut()) {
        if apply_one(n, rebuilt) {
            switched.push(n.host.name.clone());
        }
    }
    switched
}

/// [`apply`] for a node outside the topology (the storage server); true when it was switched.
pub fn apply_one(n: &mut ClusterNode, rebuilt: &[String]) -> bool {
    let switch = rebuilt.contains(&n.host.name) && n.host.host_key_check == HostKeyCheck::AcceptNew;
    if switch {
        n.host.host_key_check = HostKeyCheck::Relearn;
    }
    switch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{HealRequest, ScaleRequest};

    fn heal(body: serde_json::Value) -> Req {
        Req::Heal(serde_json::from_value::<HealRequest>(body).unwrap())
    }

    fn scale(kind: &str) -> Req {
        Req::Scale(serde_json::from_value::<ScaleRequest>(serde_json::json!({"type": kind, "aspectId": "w"})).unwrap())
    }

    #[test]
    fn only_the_nodes_the_vnfm_rebuilt() {
        let all = ["m1", "m2", "w1", "w2"];
        let t = vec!["w1".to_string()];
        let sol002 = heal(serde_json::json!({"vnfcInstanceId": ["w1"]}));
        assert_eq!(rebuilt(Op::HealEnd, &sol002, &t, all.into_iter()), t);
        // heal_start runs before the VM is replaced: its old key is still the right one.
        assert!(rebuilt(Op::HealStart, &sol002, &t, all.into_iter()).is_empty());
        let whole = heal(serde_json::json!({"cause": "all"}));
        assert_eq!(rebuilt(Op::HealEnd, &whole, &[], all.into_iter()), all.map(String::from).to_vec());
        assert_eq!(rebuilt(Op::ScaleEnd, &scale("SCALE_OUT"), &t, all.into_iter()), t);
        assert!(rebuilt(Op::ScaleStart, &scale("SCALE_IN"), &t, all.into_iter()).is_empty());
        assert!(rebuilt(Op::ScaleEnd, &scale("SCALE_IN"), &t, all.into_iter()).is_empty());
        assert!(rebuilt(Op::InstantiateEnd, &Req::Terminate(Default::default()), &t, all.into_iter()).is_empty());
        assert!(rebuilt(Op::TerminateEnd, &Req::Terminate(Default::default()), &t, all.into_iter()).is_empty());
    }

    #[test]
    fn apply_switches_accept_new_nodes_only() {
        use crate::cluster::topology::ClusterNode;
        use crate::inventory::Host;
        use crate::lifecycle::Role;
        let node = |name: &str, role| ClusterNode {
            host: Host::for_test(name, "10.0.0.1"),
            role,
            nic_ip: "10.0.0.1".into(),
            k8s_name: name.into(),
            placement: Default::default(),
        };
        let mut topo = Topology {
            masters: vec![node("m1", Role::Master)],
            workers: vec![node("w1", Role::Worker), node("w2", Role::Worker)],
            cluster_ip: "10.0.0.1".into(),
            cluster_fip: None,
        };
        topo.workers[1].host.host_key_check = HostKeyCheck::Strict;
        for n in topo.masters.iter_mut().chain(topo.workers.iter_mut().take(1)) {
            n.host.host_key_check = HostKeyCheck::AcceptNew;
        }
        let switched = apply(&mut topo, &["w1".into(), "w2".into()]);
        assert_eq!(switched, vec!["w1".to_string()]);
        assert_eq!(topo.masters[0].host.host_key_check, HostKeyCheck::AcceptNew, "m1 was not rebuilt");
        assert_eq!(topo.workers[0].host.host_key_check, HostKeyCheck::Relearn);
        assert_eq!(topo.workers[1].host.host_key_check, HostKeyCheck::Strict, "strict stays strict");
        // The storage server (outside the topology): a heal that rebuilt it lets it re-learn.
        let mut nfs = node("nfs1", Role::Node);
        nfs.host.host_key_check = HostKeyCheck::AcceptNew;
        assert!(!apply_one(&mut nfs, &["w1".into()]));
        assert_eq!(nfs.host.host_key_check, HostKeyCheck::AcceptNew);
        let whole = heal(serde_json::json!({"cause": "all"}));
        let all = rebuilt(Op::HealEnd, &whole, &[], ["m1", "w1", "nfs1"].into_iter());
        assert!(apply_one(&mut nfs, &all));
        assert_eq!(nfs.host.host_key_check, HostKeyCheck::Relearn);
    }
}
