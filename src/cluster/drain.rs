//! Taking a node out of the cluster before its VM goes (a scale-in, the heal of a worker): drain
//! it with a bounded wait for eviction and list the pods left (one node program), check that
//! only DaemonSet pods are left, delete the Node.

use crate::cluster::hook::Hook;
use crate::cluster::node_cmd as cmd;
use crate::cluster::node_program::NodeProgram;
use crate::cluster::topology::ClusterNode;
use crate::error::{Error, Result};
use crate::facts::kubectl::PodsLeft;
use crate::facts::Fact;

/// Drain (bounded), verify, delete the Node. Tacker skipped the delete when the node had no
/// pods and gave up on eviction silently; both are errors or steps here.
pub async fn remove_from_cluster(h: &Hook, via: &ClusterNode, k8s_name: &str, node: &ClusterNode) -> Result<()> {
    let d = h.rt.timeouts.drain;
    let secs = d.as_secs().max(1) as u32;
    // One node program: the drain (its report on stderr, so stdout is the pod list alone), then
    // the pods left; the controller decides on that list before anything is deleted.
    let drain = cmd::drain(k8s_name, secs)?;
    let pods = PodsLeft { k8s_name };
    let mut p = NodeProgram::new();
    p.push_as(format!("{drain} >&2"), &drain);
    p.push(pods.command()?.script);
    let c = h.rt.root_cmd(via, p.script()?, h.rt.timeouts.command + d).with_label(p.label());
    let left = h.rt.fact(via, c, &pods.what(), || pods.placeholder(), |out| pods.parse(out)).await?;
    if !left.is_empty() {
        return Err(Error::Remote {
            node: node.name().into(),
            command: format!("drain {k8s_name}"),
            status: "pods still on the node".into(),
            stderr_tail: left.join("\n"),
        });
    }
    h.rt.exec(via, h.rt.root_cmd(via, cmd::delete_node(k8s_name)?, h.rt.timeouts.command)).await?;
    Ok(())
}
