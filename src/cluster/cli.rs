//! The hook commands: `instantiate-end`, `heal-start`, `heal-end`, `scale-start`, `scale-end`,
//! `terminate-end`. Everything is read and validated first (request, params, inventory,
//! package, state); only then does anything connect. `--dry-run` stops short of connecting and
//! prints every step instead.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;
use serde_json::{Map, Value};

use crate::cluster::hook::Hook;
use crate::cluster::package::Package;
use crate::cluster::params::{ClusterParams, PARAM_KEY};
use crate::cluster::request::{
    self, HealRequest, InstantiateRequest, ScaleRequest, ScaleType, TerminateRequest, VimConnections, VnfInstance,
};
use crate::cluster::runner::{Runner, Timeouts};
use crate::cluster::state::{InstanceState, Store};
use crate::cluster::topology::{self, ClusterNode, NodeDefaults, Role, Topology};
use crate::cluster::{heal, instantiate, scale, terminate};
use crate::error::{exit, Error, Result};
use crate::event::Events;
use crate::inventory::{HostKeyCheck, Inventory, LoadOptions};
use crate::render::{Output, Renderer};
use crate::ssh::{SshConnector, SshOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    InstantiateEnd,
    HealStart,
    HealEnd,
    ScaleStart,
    ScaleEnd,
    TerminateEnd,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::InstantiateEnd => "instantiate_end",
            Op::HealStart => "heal_start",
            Op::HealEnd => "heal_end",
            Op::ScaleStart => "scale_start",
            Op::ScaleEnd => "scale_end",
            Op::TerminateEnd => "terminate_end",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct HookArgs {
    /// The operation's request body (SOL002/SOL003 JSON).
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// Nodes: groups named after the VNFD's aspect_id / vdu_id, `cps` for the cluster VIP.
    #[arg(short, long, env = "MGMT_DRIVER_INVENTORY")]
    pub inventory: Option<PathBuf>,
    /// The unpacked VNF package; script paths in the request are relative to it.
    #[arg(long)]
    pub package_dir: Option<PathBuf>,
    /// The VnfInstance (SOL003 JSON): its id, vimConnectionInfo and vnfcResourceInfo.
    #[arg(long)]
    pub vnf_instance: Option<PathBuf>,
    /// The VNF instance id, when no --vnf-instance is given.
    #[arg(long)]
    pub vnf_instance_id: Option<String>,
    /// Where instance state is kept (default: ~/.local/state/mgmt-driver).
    #[arg(long, env = "MGMT_DRIVER_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Inventory host names to scale or heal (default: from the request).
    #[arg(long)]
    pub node: Vec<String>,
    /// Print the plan (nodes by role, order, parallel groups, exact commands) and connect to nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How many nodes at once in parallel phases.
    #[arg(short, long, default_value_t = 64)]
    pub parallel: usize,
    /// Tacker compatibility: the node password in helm_info, the bearer token in the output.
    #[arg(long)]
    pub tacker_compat: bool,
    /// terminate-end: run `kubeadm reset -f` on every node first.
    #[arg(long)]
    pub reset_nodes: bool,
    /// Seconds an install script may run (Tacker: 2700).
    #[arg(long, default_value_t = 2700.0)]
    pub install_timeout: f64,
    /// Seconds a drain waits for pods to be evicted before the step fails.
    #[arg(long, default_value_t = 300.0)]
    pub drain_timeout: f64,
    /// Seconds per connection attempt.
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Keep retrying nodes that are not up yet for this many seconds.
    #[arg(long, default_value_t = 300.0)]
    pub retry_for: f64,
    /// known_hosts for nodes taken from --vnf-instance (accept-new).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Allow `host_key_check: off` in the inventory.
    #[arg(long)]
    pub insecure_no_host_key_check: bool,
}

fn secs(field: &str, v: f64) -> Result<std::time::Duration> {
    if v.is_finite() && v > 0.0 && v < 1e7 {
        Ok(std::time::Duration::from_secs_f64(v))
    } else {
        Err(Error::input("arguments", field, "must be a positive number of seconds"))
    }
}

fn need<'a>(p: &'a Option<PathBuf>, flag: &str, op: Op) -> Result<&'a PathBuf> {
    p.as_ref()
        .ok_or_else(|| Error::input("arguments", flag, format!("is required for {}", op.name().replace('_', "-"))))
}

/// Parsed request of any operation.
enum Req {
    Instantiate(InstantiateRequest),
    Heal(HealRequest),
    Scale(ScaleRequest),
    Terminate(TerminateRequest),
}

impl Req {
    fn additional_params(&self) -> &Map<String, Value> {
        match self {
            Req::Instantiate(r) => &r.additional_params,
            Req::Heal(r) => &r.additional_params,
            Req::Scale(r) => &r.additional_params,
            Req::Terminate(r) => &r.additional_params,
        }
    }
}

struct Prepared {
    hook: Hook,
    req: Req,
    targets: Vec<String>,
    _lock: Option<crate::cluster::state::Lock>,
}

fn prepare(op: Op, a: &HookArgs, events: Events) -> Result<Prepared> {
    let req_path = match op {
        Op::TerminateEnd => a.request.as_ref(),
        _ => Some(need(&a.request, "--request", op)?),
    };
    let req_file = req_path.map(|p| p.display().to_string()).unwrap_or_else(|| "(no request)".into());
    let req = match (op, req_path) {
        (Op::InstantiateEnd, Some(p)) => Req::Instantiate(request::load(p)?),
        (Op::HealStart | Op::HealEnd, Some(p)) => Req::Heal(request::load(p)?),
        (Op::ScaleStart | Op::ScaleEnd, Some(p)) => Req::Scale(request::load(p)?),
        (_, Some(p)) => Req::Terminate(request::load(p)?),
        (_, None) => Req::Terminate(TerminateRequest::default()),
    };
    let inst: Option<VnfInstance> = a.vnf_instance.as_ref().map(|p| request::load(p)).transpose()?;
    let id = match (&inst, &a.vnf_instance_id) {
        (Some(i), Some(id)) if &i.id != id => {
            return Err(Error::input(
                "--vnf-instance-id",
                id.clone(),
                format!("differs from the VnfInstance's id {}", i.id),
            ))
        }
        (Some(i), _) => i.id.clone(),
        (None, Some(id)) => id.clone(),
        (None, None) => {
            return Err(Error::input(
                "arguments",
                "--vnf-instance-id",
                "the VNF instance id is needed: pass --vnf-instance FILE or --vnf-instance-id ID",
            ))
        }
    };
    crate::cluster::state::check_instance_id(&id)?;
    let store = Store::open(&a.state_dir.clone().unwrap_or_else(Store::default_dir))?;
    let lock = if a.dry_run { None } else { Some(store.lock(&id)?) };
    let state = store.load(&id)?;
    if state.is_none() && !matches!(op, Op::InstantiateEnd | Op::HealEnd | Op::TerminateEnd) && !a.dry_run {
        return Err(Error::input(
            store.path(&id).display().to_string(),
            "state",
            format!("no state for VNF instance {id}: instantiate-end never ran here (or --state-dir differs)"),
        ));
    }
    let mut state = state.unwrap_or_else(|| InstanceState::new(&id));

    // The cluster params: from the request (instantiate; v2 scale/heal repeat them), else what
    // instantiate recorded, else the VnfInstance's instantiatedVnfInfo.additionalParams.
    let mut ap = req.additional_params().clone();
    let mut params_file = req_file.clone();
    if !ap.contains_key(PARAM_KEY) {
        let stored = (!state.params.is_null()).then(|| state.params.clone());
        let from_inst = inst
            .as_ref()
            .and_then(|i| i.instantiated_vnf_info.as_ref())
            .and_then(|i| i.additional_params.get(PARAM_KEY).cloned());
        match stored
            .map(|v| (v, store.path(&id).display().to_string()))
            .or(from_inst.map(|v| (v, a.vnf_instance.as_ref().map(|p| p.display().to_string()).unwrap_or_default())))
        {
            Some((v, f)) => {
                ap.insert(PARAM_KEY.into(), v);
                params_file = f;
            }
            None if op == Op::TerminateEnd => {}
            None => {
                return Err(Error::input(
                    &req_file,
                    format!("additionalParams.{PARAM_KEY}"),
                    "is required (and no earlier instantiate recorded it)",
                ))
            }
        }
    }
    // Tacker v1 scale/heal may override the node credentials (it checked the worker username
    // twice and never the password; both are read here).
    for (role, key) in [
        ("master_node", "master_node_username"),
        ("master_node", "master_node_password"),
        ("worker_node", "worker_node_username"),
        ("worker_node", "worker_node_password"),
    ] {
        if let Some(v) = req.additional_params().get(key).filter(|_| op != Op::InstantiateEnd) {
            let field = key.rsplit('_').next().expect("has parts");
            if let Some(o) = ap.get_mut(PARAM_KEY).and_then(|p| p.get_mut(role)).and_then(Value::as_object_mut) {
                o.insert(field.into(), v.clone());
            }
        }
    }
    if op == Op::TerminateEnd && !ap.contains_key(PARAM_KEY) {
        // Nothing recorded and nothing given: terminate has nothing to do but say so.
        return Err(Error::input(
            store.path(&id).display().to_string(),
            "state",
            format!("no state for VNF instance {id}; nothing to terminate"),
        ));
    }
    let params = ClusterParams::from_additional_params(&ap, &params_file, &id)?;
    if op == Op::InstantiateEnd || state.params.is_null() {
        state.params = ap.get(PARAM_KEY).cloned().unwrap_or(Value::Null);
    }

    let inv_opts = LoadOptions {
        allow_insecure: a.insecure_no_host_key_check,
        credentials_from_request: true,
        ..Default::default()
    };
    let topo: Topology = match (&a.inventory, &inst) {
        (Some(p), _) => {
            let inv = Inventory::load(p, &inv_opts)?;
            topology::from_inventory(&inv, &params, &p.display().to_string(), &params_file)?
        }
        (None, Some(i)) => {
            let d = NodeDefaults {
                known_hosts: a.known_hosts.clone().unwrap_or_else(|| store_dir(a).join("known_hosts")),
                host_key_check: HostKeyCheck::AcceptNew,
            };
            topology::from_vnf_instance(i, &params, &a.vnf_instance.as_ref().expect("set").display().to_string(), &d)?
        }
        (None, None) => {
            return Err(Error::input(
                "arguments",
                "--inventory",
                "nodes come from --inventory or from --vnf-instance (vnfcResourceInfo)",
            ))
        }
    };
    let pkg = a.package_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    if pkg.is_none() && matches!(op, Op::InstantiateEnd | Op::HealEnd | Op::ScaleEnd) {
        need(&a.package_dir, "--package-dir", op)?;
    }

    let vim_connections = match (&req, &inst) {
        (Req::Instantiate(r), _) => r.vim_connection_info.clone(),
        (_, Some(i)) => i.vim_connection_info.clone(),
        _ => VimConnections::default(),
    };
    let mut ssh = SshOptions {
        connect_timeout: secs("--connect-timeout", a.connect_timeout)?,
        retry_for: secs("--retry-for", a.retry_for)?,
        ..Default::default()
    };
    ssh.connect_timeout = ssh.connect_timeout.max(std::time::Duration::from_millis(100));
    let connector = Arc::new(SshConnector::new(ssh)?);
    if a.parallel == 0 {
        return Err(Error::input("arguments", "--parallel", "must be at least 1"));
    }
    let timeouts = Timeouts {
        install: secs("--install-timeout", a.install_timeout)?,
        drain: secs("--drain-timeout", a.drain_timeout)?,
        ..Default::default()
    };
    let rt = Runner::new(connector, events, a.dry_run, a.parallel, timeouts);
    let hook = Hook {
        rt,
        store,
        state: Mutex::new(state),
        params,
        topo,
        pkg,
        run_dir: crate::cluster::node_cmd::run_dir(&id),
        instance_id: id,
        req_file: req_file.clone(),
        tacker_compat: a.tacker_compat,
        outcomes: Mutex::new(Vec::new()),
        vim_connections: Mutex::new(vim_connections),
    };
    let targets = targets(op, &hook, &req, a, inst.as_ref())?;
    // Every file a node would get must resolve now, before any node is touched.
    if hook.pkg.is_some() {
        for n in hook.topo.all() {
            hook.script_uploads(n)?;
        }
    }
    Ok(Prepared { hook, req, targets, _lock: lock })
}

fn store_dir(a: &HookArgs) -> PathBuf {
    a.state_dir.clone().unwrap_or_else(Store::default_dir)
}

/// Which nodes a heal or scale is about, as inventory host names.
fn targets(op: Op, h: &Hook, req: &Req, a: &HookArgs, inst: Option<&VnfInstance>) -> Result<Vec<String>> {
    for n in &a.node {
        if h.topo.find(n).is_none() {
            return Err(Error::input("--node", n.clone(), "no such node among the cluster's masters and workers"));
        }
    }
    if !a.node.is_empty() {
        return Ok(a.node.clone());
    }
    match (op, req) {
        (Op::HealStart | Op::HealEnd, Req::Heal(r)) if !r.whole_vnf() => r
            .vnfc_instance_id
            .iter()
            .map(|id| {
                if h.topo.find(id).is_some() {
                    return Ok(id.clone());
                }
                let addr = inst
                    .and_then(|i| i.instantiated_vnf_info.as_ref())
                    .and_then(|i| i.vnfc_resource_info.iter().find(|v| &v.id == id))
                    .and_then(|v| v.vnfc_cp_info.iter().find_map(|c| c.first_address()));
                addr.and_then(|ip| h.topo.all().find(|n| n.nic_ip == ip || n.host.addr == ip).map(|n| n.name().to_string()))
                    .ok_or_else(|| Error::input(&h.req_file, "vnfcInstanceId", format!("'{id}' names no inventory host and no vnfcResourceInfo of --vnf-instance with a known address")))
            })
            .collect(),
        (Op::ScaleEnd, Req::Scale(r)) if r.kind == ScaleType::Out => {
            Ok(h.topo.workers.iter().filter(|w| !h.installed(w)).map(|w| w.name().to_string()).collect())
        }
        (Op::ScaleStart, Req::Scale(r)) if r.kind == ScaleType::In => Err(Error::input(
            "arguments",
            "--node",
            format!("SCALE_IN of {} step(s): name the workers to remove with --node (they still exist at scale-start)", r.number_of_steps),
        )),
        _ => Ok(vec![]),
    }
}

/// Run one hook: exit code 0 ok, 1 a node failed, 2 bad input (nothing ran).
pub async fn run(op: Op, a: HookArgs, output: Output, verbose: bool) -> i32 {
    let (events, rx) = Events::channel();
    let renderer = tokio::spawn(Renderer::for_hooks(output, verbose).run(rx));
    let p = match prepare(op, &a, events) {
        Ok(p) => p,
        Err(e) => {
            let _ = renderer.await;
            eprintln!("error: {e}");
            if output == Output::Json {
                println!(
                    "{}",
                    serde_json::json!({"operation": op.name(), "ok": false, "error": e.to_string(), "errorKind": e.kind()})
                );
            }
            return e.exit_code();
        }
    };
    let h = &p.hook;
    for w in &h.params.warnings {
        eprintln!("warning: {w}");
    }
    let nodes: Vec<&ClusterNode> = p.targets.iter().filter_map(|n| h.topo.find(n)).collect();
    let result = match (op, &p.req) {
        (Op::InstantiateEnd, _) => instantiate::run(h).await.map(Some),
        (Op::HealStart, Req::Heal(r)) => heal::start(h, &nodes, r.whole_vnf()).await.map(|_| None),
        (Op::HealEnd, Req::Heal(r)) => heal::end(h, &nodes, r.whole_vnf()).await.map(Some),
        (Op::ScaleStart, Req::Scale(r)) if r.kind == ScaleType::In => scale::scale_in(h, &nodes).await.map(|_| None),
        (Op::ScaleEnd, Req::Scale(r)) if r.kind == ScaleType::Out => scale::scale_out(h, &nodes).await.map(|_| None),
        (Op::ScaleStart | Op::ScaleEnd, _) => Ok(None), // the other direction: nothing to do (as Tacker)
        (Op::TerminateEnd, _) => terminate::run(h, a.reset_nodes).await.map(|_| None),
        _ => Ok(None),
    };
    h.rt.close().await;
    let vim = match &result {
        Ok(Some(v)) if !v.is_null() => Some(v.clone()),
        _ => h.with_state(|s| s.vim.clone()).map(|mut v| {
            if !h.tacker_compat {
                v["auth_cred"]["bearer_token"] = crate::secret::MASK.into();
            }
            v
        }),
    };
    let doc = h.result(op.name(), result.as_ref().err(), if op == Op::TerminateEnd { None } else { vim });
    drop(p);
    let _ = renderer.await;
    if output == Output::Json {
        println!("{doc}");
    }
    match &result {
        Ok(_) => {
            if output != Output::Json {
                eprintln!("{}: ok{}", op.name(), if a.dry_run { " (dry run: nothing was run)" } else { "" });
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }
}
