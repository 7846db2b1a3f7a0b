//! The first step on the nodes a hook installs (every node at instantiate and for a heal, the new
//! workers of a scale-out), on all of them at once: env files an earlier run left are swept,
//! the scripts (and offline artifacts, registry CAs) go into the node's private run directory,
//! `/etc/hosts` names every node, and the registries are configured (`registry_apply.rs`).

use crate::cluster::hook::Hook;
use crate::cluster::node_cmd as cmd;
use crate::cluster::registry_apply;
use crate::cluster::topology::ClusterNode;
use crate::error::Result;

/// Upload scripts and set `/etc/hosts` (and the registries) on `nodes`, in parallel.
pub async fn prepare_nodes(h: &Hook, nodes: &[&ClusterNode]) -> Result<()> {
    if nodes.is_empty() {
        return Ok(());
    }
    h.rt.phase("upload scripts, /etc/hosts", nodes, true);
    let res = h.rt.each(nodes, |n| prepare_node(h, n)).await;
    crate::lifecycle::all_ok(res).map(|_| ())
}

/// The same first step on one node (a new worker prepares and joins on its own: `worker_join.rs`).
pub async fn prepare_node(h: &Hook, n: &ClusterNode) -> Result<()> {
    h.clean_env(n).await?;
    h.rt.upload(n, h.script_uploads(n)?).await?;
    let hosts = cmd::hosts_update(&h.topo.hosts_entries(), &[])?;
    h.rt.exec(n, h.rt.root_cmd(n, hosts, h.rt.timeouts.command)).await?;
    registry_apply::apply(h, n).await
}
