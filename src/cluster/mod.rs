//! The Kubernetes-cluster lifecycle hooks: a drop-in for Tacker's sample Kubernetes MgmtDriver.
//! The node contract is in docs/cluster-contract.md.
//!
//! - Pure, unit-tested: what a hook is given and what it sends and reads back. The hooks and
//!   their requests (`op`), the caller's `inputs`; the params (`params`, with `param_obj`,
//!   `cidr`, `registry`, `storage`); the nodes (`topology`, `labels`, `hostname`, `rebuilt`);
//!   node commands and what nodes print (`node_cmd`, `node_program`, `script_env`, `script_marker`,
//!   `install_output`, `storage_cmd`); what is stored (`state`, `record`, `credential_ref`,
//!   `storage_setup`, `kubeconfig_doc`) and what a run returns (`results`).
//! - `prepare` reads and checks every input (`storage_locate`, `state_store`) into a `hook`: the
//!   runner, the inputs, the instance's records, the results, and the steps every hook reuses.
//! - Each operation is a file that reads like the spec's step list (`instantiate`, `heal`,
//!   `scale`, `terminate`), on shared steps: `prepare_nodes`, `registry_apply`, `labels_apply`,
//!   `members`, `drain`, `storage_ops`. `kubeconfig` writes a recorded cluster's kubeconfig.

// What a hook is given, checked before anything runs (pure).
pub mod cidr;
pub mod hostname;
pub mod inputs;
pub mod labels;
pub mod op;
pub mod param_obj;
pub mod params;
pub mod rebuilt;
pub mod registry;
pub mod storage;
pub mod topology;

// What goes to the nodes and comes back (pure).
pub mod install_output;
pub mod node_cmd;
pub mod node_program;
pub mod script_env;
pub mod script_marker;
pub mod storage_cmd;

// What is stored and what a run returns (pure).
pub mod credential_ref;
pub mod kubeconfig_doc;
pub mod record;
pub mod results;
pub mod state;
pub mod storage_setup;

// Reading the inputs, the hook, the records in the store.
pub mod hook;
pub mod instance_hosts;
pub mod kubeconfig;
pub mod prepare;
pub mod state_store;
pub mod storage_locate;

// The operations and the steps they share.
pub mod drain;
pub mod heal;
pub mod healing;
pub mod instantiate;
pub mod labels_apply;
pub mod members;
pub mod prepare_nodes;
pub mod registry_apply;
pub mod scale;
pub mod storage_ops;
pub mod terminate;
pub mod worker_join;

use crate::inventory::HostKeyCheck;
use crate::lifecycle::Runner;
use crate::request::ScaleType;
use prepare::{Op, Prepared, Req};
use results::Outcome;
use topology::ClusterNode;

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
