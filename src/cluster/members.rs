//! The cluster's members as the instance state records them: which masters are installed (the
//! ones a step may run kubectl on) and each node's Kubernetes name. Heal, scale, the labels and
//! the storage steps ask these.

use crate::cluster::hook::Hook;
use crate::cluster::hostname::parse_hostname;
use crate::cluster::topology::ClusterNode;
use crate::error::{Error, Result};

/// Installed masters, in cluster order.
pub fn installed_masters(h: &Hook) -> Vec<&ClusterNode> {
    // No node recorded at all happens only in a plan (a real scale or heal needs the recorded
    // instantiate): the plan shows the masters the real run would use.
    if h.with_state(|s| s.nodes.is_empty()) {
        return h.topo.masters.iter().collect();
    }
    h.topo.masters.iter().filter(|m| h.installed(m)).collect()
}

/// The node's Kubernetes name: the hostname recorded when it joined, else the one the topology
/// gives. A recorded name is checked again before it goes into a command (`parse_hostname`): the
/// state file may come from an older version or have been edited.
pub fn k8s_name_of(h: &Hook, n: &ClusterNode) -> Result<String> {
    let recorded = h.with_state(|s| s.nodes.get(n.name()).map(|x| x.k8s_name.clone())).filter(|k| !k.is_empty());
    match recorded {
        None => Ok(n.k8s_name.clone()),
        Some(k) => match parse_hostname(&k) {
            Ok(good) if good == k => Ok(k),
            _ => Err(Error::input(
                h.doc_path(crate::cluster::state::KIND),
                format!("nodes.{}.k8s_name", n.name()),
                format!("{:?} is not a DNS host name; fix or remove it", k.chars().take(80).collect::<String>()),
            )),
        },
    }
}
