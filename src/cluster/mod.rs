//! The Kubernetes-cluster lifecycle hooks: a drop-in for Tacker's sample Kubernetes MgmtDriver.
//! `prepare` reads and checks every input; `hook` holds what the hooks share (the runner, the
//! instance state, the steps several hooks reuse); each operation is a file that reads like the
//! spec's step list (`instantiate`, `heal`, `scale`, `terminate`). Pure parts (params, topology,
//! node commands, output parsing, records) are unit-tested. The node contract is in
//! docs/cluster-contract.md.

pub mod cidr;
pub mod drain;
pub mod heal;
pub mod hook;
pub mod hostname;
pub mod inputs;
pub mod install_output;
pub mod instantiate;
pub mod kubeconfig;
pub mod kubeconfig_doc;
pub mod labels;
pub mod labels_apply;
pub mod members;
pub mod node_cmd;
pub mod op;
pub mod param_obj;
pub mod params;
pub mod prepare;
pub mod prepare_nodes;
pub mod rebuilt;
pub mod record;
pub mod registry;
pub mod registry_apply;
pub mod scale;
pub mod script_marker;
pub mod state;
pub mod state_store;
pub mod storage;
pub mod storage_cmd;
pub mod storage_locate;
pub mod storage_ops;
pub mod storage_setup;
pub mod terminate;
pub mod topology;

use serde_json::Value;

use crate::error::Error;
use crate::inventory::HostKeyCheck;
use crate::lifecycle::Runner;
use crate::request::ScaleType;
use prepare::{Op, Prepared, Req};
use topology::ClusterNode;

/// What a hook run produced, for the result document.
pub struct Outcome {
    pub context: Value,
    pub result: Value,
    pub warnings: Vec<String>,
    pub error: Option<Error>,
}

/// Run a prepared hook: the operation for `op`, then the result document.
pub async fn run(op: Op, p: &Prepared, reset_nodes: bool) -> Outcome {
    let h = &p.hook;
    let nodes: Vec<&ClusterNode> = p.targets.iter().filter_map(|n| h.topo.find(n)).collect();
    let server = h.storage.as_ref().and_then(|s| s.server.as_ref()).map(|s| &s.node);
    announce_rebuilt(&h.rt, h.topo.all().chain(server));
    let result = match (op, &p.req) {
        (Op::InstantiateEnd, _) => instantiate::run(h).await.map(Some),
        (Op::HealStart, Req::Heal(r)) => heal::start(h, &nodes, r.whole_vnf()).await.map(|_| None),
        (Op::HealEnd, Req::Heal(r)) => heal::end(h, &nodes, r.whole_vnf()).await.map(Some),
        (Op::ScaleStart, Req::Scale(r)) if r.kind == ScaleType::In => scale::scale_in(h, &nodes).await.map(|_| None),
        (Op::ScaleEnd, Req::Scale(r)) if r.kind == ScaleType::Out => scale::scale_out(h, &nodes).await.map(|_| None),
        // The other direction: nothing to do (as Tacker).
        (Op::ScaleStart | Op::ScaleEnd, _) => Ok(None),
        (Op::TerminateEnd, _) => terminate::run(h, reset_nodes).await.map(|_| None),
        _ => Ok(None),
    };
    h.rt.close().await;
    let mut warnings = h.params.warnings.clone();
    if matches!(&result, Ok(Some(v)) if !v.is_null()) {
        // A record was written now: say what in it a VNFM cannot use.
        warnings.extend(h.record_warnings());
    }
    let vim = match &result {
        Ok(Some(v)) if !v.is_null() => Some(v.clone()),
        _ => h.recorded_vim(),
    };
    Outcome {
        context: h.context(),
        result: h.result(if op == Op::TerminateEnd { None } else { vim }),
        warnings,
        error: result.err(),
    }
}
/// The VMs `prepare` lets re-learn their host key (`rebuilt.rs`), as a step of their own, in
/// the run and in `--dry-run`, before anything connects.
fn announce_rebuilt<'a>(rt: &Runner, nodes: impl Iterator<Item = &'a ClusterNode>) {
    let nodes: Vec<_> = nodes.filter(|n| n.host.host_key_check == HostKeyCheck::Relearn).collect();
    if !nodes.is_empty() {
        rt.phase("rebuilt VMs: re-learn their host keys (old known_hosts entries replaced)", &nodes, true);
    }
}

#[cfg(test)]
pub(crate) mod testkit;
