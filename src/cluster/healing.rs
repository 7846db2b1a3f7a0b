//! What a SOL002 `heal_start` learned about each node it took out, kept in the instance state
//! so `heal_end` can find the node again although the VNFM renamed it.
//!
//! Tacker v2 heals a VNFC by replacing its Nova server: the new server keeps the port and the
//! address but has a new id, and Tacker's default vnfcInfo id is `<vduId>-<server id>`. So the
//! `vnfcInstanceId` that `heal_end`'s request repeats names the old server, which the instance
//! no longer lists. The address (and SSH port) the node had at `heal_start` is what survives
//! the replacement; this module records it per request id and finds the node at it later. A
//! SOL003 heal names no VNFC: its grant's `removeResources` name the old servers by resource
//! id, which serves as the request id here.
//! Pure: the hook records and saves (`prepare.rs`, `heal.rs`).

use std::collections::BTreeMap;

pub use crate::cluster::state::Healing;
use crate::cluster::topology::{ClusterNode, Topology};

/// What heal_start learned: each request id that resolved to a node of the topology, with
/// that node's addresses. `ids` and `targets` are in the same order (`prepare::targets`);
/// a target outside the topology (the storage server) has nothing to learn.
pub fn learned(ids: &[String], targets: &[String], topo: &Topology) -> BTreeMap<String, Healing> {
    ids.iter()
        .zip(targets)
        .filter_map(|(id, t)| {
            let n = topo.find(t)?;
            let h =
                Healing { node: t.clone(), ssh_addr: n.host.addr.clone(), port: n.host.port, nic_ip: n.nic_ip.clone() };
            Some((id.clone(), h))
        })
        .collect()
}

/// The node of `topo` a heal_end target is now: the recorded one if the VNFM kept its name,
/// else the one at its recorded cluster address, else at its SSH address and port.
pub fn now<'a>(h: &Healing, topo: &'a Topology) -> Option<&'a ClusterNode> {
    topo.find(&h.node)
        .or_else(|| topo.all().find(|n| n.nic_ip == h.nic_ip))
        .or_else(|| topo.all().find(|n| n.host.addr == h.ssh_addr && n.host.port == h.port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Host;
    use crate::lifecycle::Role;

    fn node(name: &str, ip: &str, role: Role) -> ClusterNode {
        ClusterNode {
            host: Host::for_test(name, ip),
            role,
            nic_ip: ip.into(),
            k8s_name: "x".into(),
            placement: Default::default(),
        }
    }

    fn topo(worker: &str) -> Topology {
        Topology {
            masters: vec![node("srv-m", "10.0.0.1", Role::Master)],
            workers: vec![node(worker, "10.0.0.2", Role::Worker)],
            cluster_ip: "10.0.0.1".into(),
            cluster_fip: None,
        }
    }

    #[test]
    fn a_replaced_server_is_found_at_the_address_it_kept() {
        let before = topo("srv-old");
        let ids = vec!["workerNode-srv-old".to_string(), "nfs".to_string()];
        let learned = learned(&ids, &["srv-old".into(), "nfs-server".into()], &before);
        assert_eq!(learned.len(), 1, "the storage server is not a topology node: {learned:?}");
        let h = &learned["workerNode-srv-old"];
        assert_eq!((h.node.as_str(), h.nic_ip.as_str(), h.port), ("srv-old", "10.0.0.2", 22));
        assert_eq!(now(h, &topo("srv-new")).map(|n| n.name()), Some("srv-new"));
        assert_eq!(now(h, &before).map(|n| n.name()), Some("srv-old"), "a kept name wins");
        let mut moved = topo("srv-new");
        moved.workers[0].nic_ip = "10.0.0.9".into();
        moved.workers[0].host.addr = "10.0.0.9".into();
        assert!(now(h, &moved).is_none(), "another address is another node");
    }
}
