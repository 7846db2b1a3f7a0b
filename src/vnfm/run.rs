//! A hook's action, run: what the VNF is (the request's params, else what an earlier hook
//! recorded), which action the hook is (`dispatch.rs`), and that action through the same
//! `cluster::prepare` / `cnf::run::prepare` the CLI commands use, with the document's parts
//! handed over in memory (`request::Doc::Inline`, never written to disk). What it leaves
//! ([`Done`]) becomes the response in `respond.rs`.
//!
//! Every document part here (`request`, `vnf_instance`, the grants, and the params an earlier
//! hook recorded from them) was written by the VNFM's API user, a tenant: each operation runs
//! with [`Policy::Tenant`], so no secret reference (`@env:`, `@file:`) is honoured
//! (`secret_ref.rs`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::cluster::kubeconfig;
use crate::cluster::params::ClusterParams;
use crate::cluster::prepare::{self, Op};
use crate::cluster::state::{self as cluster_state, InstanceState};
use crate::cnf;
use crate::error::{Error, Result};
use crate::event::Events;
use crate::inventory::{LoadOptions, PackageMode};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::{check_instance_id, Store};
use crate::lifecycle::{Runner, Timeouts};
use crate::request::Doc;
use crate::secret_ref::Policy;
use crate::vnfm::dispatch::{self, Action, Kind};
use crate::vnfm::document::{parse_operation, Lcm};
use crate::vnfm::prepare::Call;

/// Which family of operation a runner is for: the caller gives each its own defaults for the
/// shared flags (`--retry-for`, `--parallel`), as it does for the commands of that family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The cluster hooks (VMs may still be booting).
    Cluster,
    /// The Helm CNF operations (masters answer or are down).
    Cnf,
}

/// What the caller chooses for a hook (the composition root: SSH or the plan connector, the
/// store read-write or read-only, the shared flags' defaults); this module picks none of them.
pub trait Setup {
    /// The state store under `dir` (default: the user's); read-only in a plan.
    fn open_store(&self, dir: &Option<PathBuf>) -> Result<Store>;
    /// A runner for an operation of `family`; `retry_for`, when given, shortens the wait for a
    /// node that does not answer SSH yet (never lengthens it).
    fn runner_for(
        &self,
        events: Events,
        family: Family,
        timeouts: Timeouts,
        retry_for: Option<Duration>,
    ) -> Result<Runner>;
    /// How inventories are loaded (`--ssh-config`, `--insecure-no-host-key-check`).
    fn inventory_opts(&self) -> LoadOptions;
    /// Only planning: `--dry-run`, or the document's `options.dry_run`.
    fn dry_run(&self) -> bool;
    /// The operator's VIM allow-list and client, for addresses the instance lacks (`vim/`).
    /// Default: none (the VIM is never asked).
    fn vim(&self) -> Result<crate::vim::Vim> {
        Ok(crate::vim::Vim::default())
    }
}

/// What an action left for the response.
#[derive(Default)]
pub struct Done {
    /// The cluster's recorded state after the action, and its VIM name: the new entry.
    pub cluster: Option<(InstanceState, String)>,
    /// The entry goes (terminate, a rolled-back instantiate).
    pub removed: bool,
    /// Nodes joined / removed, for `user_script_err_handling_data.mgmt_driver`.
    pub joined: Vec<String>,
    pub removed_nodes: Vec<String>,
    /// Where the kubeconfig was written (or, in a plan, would be).
    pub kubeconfig: Option<PathBuf>,
    pub result: Value,
    pub warnings: Vec<String>,
    pub context_error: Option<Error>,
}

/// Run the hook's action.
pub async fn run<S: Setup>(c: &Call, setup: &S, events: Events) -> Result<Done> {
    let (lcm, phase) = parse_operation(&c.doc.operation)?;
    let id = c.doc.instance_id();
    check_instance_id(&id).map_err(|e| Error::input(&c.name, "vnf_instance.id", e.to_string()))?;
    let store = setup.open_store(&c.opts.state_dir)?;
    let cluster_recorded = store.doc_path(&id, cluster_state::KIND).exists();
    let cnf_recorded = store.doc_path(&id, cnf::run::KIND).exists();
    // The request's params, else the ones the VNFM kept with the instance (Tacker v1).
    let mut ap = c.doc.additional_params();
    if let Some(Value::Object(kept)) = c.doc.vnf_instance.pointer("/instantiatedVnfInfo/additionalParams") {
        for (k, v) in kept {
            ap.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let Some(kind) = dispatch::kind(&ap, cluster_recorded, cnf_recorded) else {
        if lcm == Lcm::Instantiate {
            return Err(Error::input(
                format!("{}: request", c.name),
                "additionalParams",
                format!(
                    "has neither {} (a Kubernetes cluster) nor {} (a Helm CNF)",
                    crate::cluster::params::PARAM_KEY,
                    dispatch::CNF_KEY
                ),
            ));
        }
        let w = format!("{}: nothing is recorded for VNF instance {id}; nothing to do", c.doc.operation);
        return Ok(Done { warnings: vec![w], ..Default::default() });
    };
    match dispatch::action(lcm, phase, kind) {
        Action::Nothing(why) => {
            Ok(Done { warnings: vec![format!("{}: {why}", c.doc.operation)], ..Default::default() })
        }
        Action::Check => check(c, kind, &id).map(|result| Done { result, ..Default::default() }),
        Action::Cluster(op) => cluster(c, setup, events, store, op, c.doc.request.clone(), vec![]).await,
        Action::ClusterForget if !cluster_recorded => {
            let w = "instantiate_rollback_start: no cluster was recorded; nothing to forget".to_string();
            Ok(Done { warnings: vec![w], ..Default::default() })
        }
        Action::ClusterForget => {
            let mut d = cluster(c, setup, events, store, Op::TerminateEnd, Value::Null, vec![]).await?;
            d.removed = true;
            Ok(d)
        }
        Action::ClusterUnjoin => {
            let joined = joined_by_failed_scale_out(&c.doc.user_script_err_handling_data);
            if joined.is_empty() {
                let w = "scale_rollback_start: the scale-out joined no worker; nothing to take out".to_string();
                return Ok(Done { warnings: vec![w], ..Default::default() });
            }
            let mut req = c.doc.request.clone();
            req["type"] = json!("SCALE_IN");
            cluster(c, setup, events, store, Op::ScaleStart, req, joined).await
        }
        Action::CnfInstantiate => run_cnf(c, setup, events, store, cnf::Op::Instantiate, &id).await,
        Action::CnfScale => run_cnf(c, setup, events, store, cnf::Op::Scale, &id).await,
        Action::CnfHeal => run_cnf(c, setup, events, store, cnf::Op::Heal, &id).await,
        Action::CnfTerminate => run_cnf(c, setup, events, store, cnf::Op::Terminate, &id).await,
    }
}

/// `user_script_err_handling_data.mgmt_driver.joined` of a scale_end.
fn joined_by_failed_scale_out(data: &Map<String, Value>) -> Vec<String> {
    let Some(m) = data.get("mgmt_driver").filter(|m| m["operation"] == "scale_end") else { return vec![] };
    m["joined"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// instantiate_start: the params and the package files they name, before any VM exists.
fn check(c: &Call, kind: Kind, id: &str) -> Result<Value> {
    let ap = c.doc.additional_params();
    let file = format!("{}: request", c.name);
    let pkg = c.doc.tmp_csar_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    match kind {
        Kind::Cluster => {
            let p = ClusterParams::from_additional_params(&ap, &file, id, &Policy::Tenant)?;
            if let Some(pkg) = &pkg {
                let key = crate::cluster::params::PARAM_KEY;
                pkg.resolve(&p.script_path, &file, &format!("additionalParams.{key}.script_path"), false)?;
                if let Some(h) = &p.helm_script_path {
                    pkg.resolve(h, &file, &format!("additionalParams.{key}.helm_installation_script_path"), false)?;
                }
                if let Some(o) = &p.offline_artifacts_path {
                    pkg.resolve(o, &file, &format!("additionalParams.{key}.offline_artifacts_path"), true)?;
                }
            }
            Ok(json!({"checked": "k8s_cluster_installation_param", "warnings": p.warnings}))
        }
        Kind::Cnf => {
            let p = cnf::params::CnfParams::from_additional_params(&ap, &file)?;
            cnf::run::instantiate::check_refs(&p, &file, &Policy::Tenant)?;
            Ok(json!({"checked": dispatch::CNF_KEY}))
        }
    }
}

/// How the hook's inventory is loaded: as the caller says, and in package mode when the
/// request named it (a file of the VNF package), its nodes' keys learned into the operator's
/// `known_hosts` option, else `own`.
///
/// A cluster's hooks pass the instance's own file (`cluster::instance_hosts`) as `own`, and
/// there an operator's inventory host that names no known_hosts (nor does the OpenSSH
/// configuration) learns too, never into the conductor user's `~/.ssh/known_hosts`, which
/// nothing prunes. A CNF's masters are a cluster's, kept beyond the CNF: `own` is the store's
/// shared file and an operator's inventory keeps OpenSSH's default (`None`).
fn inventory_opts<S: Setup>(c: &Call, setup: &S, own: PathBuf, cluster: bool) -> LoadOptions {
    let mut o = setup.inventory_opts();
    let known_hosts = c.opts.known_hosts.clone().unwrap_or(own);
    if c.package_inventory {
        o.package = Some(PackageMode { known_hosts });
    } else if cluster {
        o.default_known_hosts = Some(known_hosts);
    }
    o
}

fn inline(c: &Call, key: &str, v: &Value) -> Option<Doc> {
    (!v.is_null()).then(|| Doc::Inline { name: format!("{}: {key}", c.name), value: v.clone() })
}

async fn cluster<S: Setup>(
    c: &Call,
    setup: &S,
    events: Events,
    store: Store,
    op: Op,
    request: Value,
    node: Vec<String>,
) -> Result<Done> {
    let dry_run = setup.dry_run();
    let own = crate::cluster::instance_hosts::path(&store, &c.doc.instance_id());
    let inventory_opts = inventory_opts(c, setup, own, true);
    let inputs = prepare::Inputs::new(inline(c, "request", &request), inventory_opts, dry_run)
        .inventory(c.opts.inventory.clone())
        .request_inventory(c.request_inventory.clone())
        .package_dir(c.doc.tmp_csar_dir.clone())
        .vnf_instance(inline(c, "vnf_instance", &c.doc.vnf_instance))
        .grant_request(inline(c, "grant_request", &c.doc.grant_request))
        .node(node)
        .tacker_compat(c.opts.tacker_compat.unwrap_or(false))
        .known_hosts(c.opts.known_hosts.clone())
        .secret_refs(Policy::Tenant)
        .vim(setup.vim()?);
    let timeouts = Timeouts { install: c.install_timeout, drain: c.drain_timeout, ..Default::default() };
    let writes_kubeconfig = matches!(op, Op::InstantiateEnd | Op::HealEnd);
    let kubeconfig_out = c.opts.kubeconfig_out.as_ref().filter(|_| writes_kubeconfig);
    if let Some(out) = kubeconfig_out {
        kubeconfig::check_destination(out)?;
    }
    let rt = setup.runner_for(events, Family::Cluster, timeouts, c.retry_for)?;
    let p = prepare::prepare(op, &inputs, store, rt)?;
    let mut warnings = p.hook.params.warnings.clone();
    let mut outcome = crate::cluster::run(op, &p, c.opts.reset_nodes.unwrap_or(false)).await;
    warnings.extend(outcome.warnings);
    // The kubeconfig comes from the state just recorded, while the instance lock is held.
    let mut kubeconfig = None;
    if let (Some(out), None) = (kubeconfig_out, &outcome.error) {
        if dry_run {
            kubeconfig = Some(out.clone());
        } else {
            match kubeconfig::write_for_instance(p.hook.store(), p.hook.instance_id(), out) {
                Ok(path) => kubeconfig = Some(path),
                Err(e) => outcome.error = Some(e),
            }
        }
    }
    let st = p.hook.with_state(|s| s.clone());
    let installed = |n: &&String| st.installed(n);
    let (joined, removed_nodes) = match op {
        Op::ScaleEnd => (p.targets.iter().filter(installed).cloned().collect(), vec![]),
        Op::ScaleStart | Op::HealStart => (vec![], p.targets.clone()),
        _ => (vec![], vec![]),
    };
    let vim_name = p.hook.params.vim_name.clone();
    let changes_entry = matches!(op, Op::InstantiateEnd | Op::HealEnd | Op::TerminateEnd);
    Ok(Done {
        cluster: changes_entry.then_some((st, vim_name)),
        removed: op == Op::TerminateEnd,
        joined,
        removed_nodes,
        kubeconfig,
        result: outcome.result,
        warnings,
        context_error: outcome.error,
    })
}

async fn run_cnf<S: Setup>(c: &Call, setup: &S, events: Events, store: Store, op: cnf::Op, id: &str) -> Result<Done> {
    let inputs = cnf::Inputs {
        // The request, and the vimConnectionInfo in it, are the VNFM API user's.
        author: cnf::Author::Tenant,
        request: inline(c, "request", &c.doc.request),
        // A heal's vnfcInstanceId names VNFCs of this instance (Tacker's ids), not pods.
        vnf_instance: inline(c, "vnf_instance", &c.doc.vnf_instance),
        package_dir: c.doc.tmp_csar_dir.clone(),
        cluster_instance: c.opts.cluster_instance.clone(),
        inventory: c.opts.inventory.clone(),
        known_hosts: c.opts.known_hosts.clone(),
        secret_refs: Policy::Tenant,
        ..cnf::Inputs::new(Some(id.to_string()), inventory_opts(c, setup, store.dir().join("known_hosts"), false))
    };
    let prepared = cnf::run::prepare(&op, &inputs, store)?;
    let rt = setup.runner_for(events, Family::Cnf, Timeouts::default(), c.retry_for)?;
    let o = cnf::run::run(&op, &inputs, prepared, rt).await?;
    Ok(Done { result: o.result, warnings: o.warnings, ..Default::default() })
}
