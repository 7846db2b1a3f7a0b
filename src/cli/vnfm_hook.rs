//! `mgmt-driver hook`: the VNFM hook protocol (docs/hook-protocol.md). One JSON document in,
//! one out; events on stderr. It reads the document, picks the action (`vnfm::dispatch`), runs
//! the same cluster or CNF operation the CLI commands run (with the document's parts handed
//! over in memory, never written to disk), and answers with the instance's updated
//! `vimConnectionInfo` and what a rollback needs.
// Until the family's printing goes through the renderer (issue 19): its orchestration is being
// moved to `vnfm/` (issue 19), and then its prints become `console` calls.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::cli::common::{parse_duration, Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::ErrorItem;
use crate::cluster::kubeconfig;
use crate::cluster::params::ClusterParams;
use crate::cluster::prepare::{self, Op};
use crate::cluster::state::{self as cluster_state, InstanceState};
use crate::cnf;
use crate::error::{exit, Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::{check_instance_id, Store};
use crate::lifecycle::Timeouts;
use crate::render::{Output, Renderer};
use crate::request::Doc;
use crate::vnfm::dispatch::{self, Action, Kind};
use crate::vnfm::document::{parse_operation, HookRequest, Lcm, Options, API_VERSION};
use crate::vnfm::vim_entry;

#[derive(Args, Debug, Clone)]
pub struct VnfmHookArgs {
    /// The request document (default: standard input).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Nodes and credentials (default: the document's options, else the VnfInstance).
    #[arg(short, long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    #[command(flatten)]
    pub store: StateDir,
    #[command(flatten)]
    pub known: KnownHosts,
    /// Write a kubeconfig for the cluster there (mode 0600) after instantiate_end / heal_end.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
    /// Put the masters' login password into extra.helm_info (Tacker v1's Helm client).
    #[arg(long)]
    pub tacker_compat: bool,
    /// terminate_end: run `kubeadm reset -f` on every node first.
    #[arg(long)]
    pub reset_nodes: bool,
    /// How long an install script may run (default 2700s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub install_timeout: Option<Duration>,
    /// How long a drain waits for pods to be evicted (default 300s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub drain_timeout: Option<Duration>,
}

impl VnfmHookArgs {
    /// The flags as options (they win over the document's).
    fn options(&self) -> Options {
        Options {
            inventory: self.inventory.clone(),
            state_dir: self.store.state_dir.clone(),
            known_hosts: self.known.known_hosts.clone(),
            kubeconfig_out: self.kubeconfig_out.clone(),
            tacker_compat: self.tacker_compat.then_some(true),
            reset_nodes: self.reset_nodes.then_some(true),
            ..Default::default()
        }
    }
}

/// What goes back to the VNFM (docs/hook.schema.json). `Debug` masks it: `vnf_instance` carries the bearer token.
#[derive(Serialize)]
pub struct HookResponse {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub operation: String,
    pub ok: bool,
    #[serde(rename = "dryRun")]
    pub dry_run: bool,
    /// The instance with its updated vimConnectionInfo, when the operation changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnf_instance: Option<Value>,
    pub user_script_err_handling_data: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    pub result: Value,
    pub warnings: Vec<String>,
    pub errors: Vec<ErrorItem>,
}

crate::secret::impl_debug_masked!(HookResponse);

impl HookResponse {
    pub fn new(operation: &str, dry_run: bool, err_data: Map<String, Value>) -> HookResponse {
        HookResponse {
            api_version: API_VERSION,
            kind: "HookResponse",
            operation: operation.to_string(),
            ok: true,
            dry_run,
            vnf_instance: None,
            user_script_err_handling_data: err_data,
            kubeconfig: None,
            result: Value::Null,
            warnings: vec![],
            errors: vec![],
        }
    }

    pub fn fail(&mut self, e: &Error) {
        self.ok = false;
        self.errors.push(ErrorItem::from_error(e));
    }
}

/// Everything the action needs, settled from the document, the options and the flags.
struct Call {
    doc: HookRequest,
    name: String,
    opts: Options,
    install_timeout: Duration,
    drain_timeout: Duration,
}

/// What an action left for the response.
#[derive(Default)]
struct Done {
    /// The cluster's recorded state after the action, and its VIM name: the new entry.
    cluster: Option<(InstanceState, String)>,
    /// The entry goes (terminate, a rolled-back instantiate).
    removed: bool,
    /// Nodes joined / removed, for `user_script_err_handling_data.mgmt_driver`.
    joined: Vec<String>,
    removed_nodes: Vec<String>,
    /// Where the kubeconfig was written (or, in a plan, would be).
    kubeconfig: Option<PathBuf>,
    result: Value,
    warnings: Vec<String>,
    context_error: Option<Error>,
}

pub async fn run(a: VnfmHookArgs, ctx: &Ctx) -> i32 {
    let name = a.input.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "<stdin>".into());
    let call = match read(&a, &name) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            let mut resp = HookResponse::new("hook", ctx.run.dry_run, Map::new());
            resp.fail(&e);
            print(&resp);
            return e.exit_code();
        }
    };
    let _ = CURRENT.set((call.doc.operation.clone(), call.doc.user_script_err_handling_data.clone()));
    let mut ctx = ctx.clone();
    ctx.run.dry_run |= call.opts.dry_run.unwrap_or(false);
    let ctx = &ctx;
    let mut resp =
        HookResponse::new(&call.doc.operation, ctx.run.dry_run, call.doc.user_script_err_handling_data.clone());
    // Events never go to stdout: that is the response's. Plain lines (or JSON lines with
    // -o json) on stderr, which a VNFM shows as the operation's error text.
    let mode = if ctx.output == Output::Json { Output::Json } else { Output::Yaml };
    let (events, rx) = crate::event::Events::channel();
    let renderer = tokio::spawn(Renderer::for_hooks(mode, ctx.verbose).plan(ctx.run.dry_run).run(rx));
    let done = execute(&call, ctx, events).await;
    let _ = renderer.await;
    let code = match done {
        Ok(d) => respond(&call, &mut resp, d),
        Err(e) => {
            resp.fail(&e);
            err_data(&call, &mut resp, false, vec![], vec![]);
            e.exit_code()
        }
    };
    for w in &resp.warnings {
        eprintln!("warning: {w}");
    }
    for e in &resp.errors {
        eprintln!("error: {}", e.message);
    }
    print(&resp);
    code
}

/// The operation and error-handling data of the document being run, for [`print_interrupted`].
static CURRENT: std::sync::OnceLock<(String, Map<String, Value>)> = std::sync::OnceLock::new();

/// A SIGINT/SIGTERM'd `hook` still answers with a response document (main.rs calls this with
/// the interruption report), so the VNFM gets the error-handling data for a retry or rollback.
pub fn print_interrupted(report: crate::cli::envelope::Envelope) {
    let (operation, data) = CURRENT.get().cloned().unwrap_or_else(|| ("hook".into(), Map::new()));
    let mut resp = HookResponse::new(&operation, report.dry_run, data);
    resp.ok = false;
    resp.errors = report.errors;
    resp.result = report.result;
    if operation != "hook" {
        let v = json!({"operation": operation, "finished": false, "joined": [], "removed": []});
        resp.user_script_err_handling_data.insert("mgmt_driver".into(), v);
    }
    print(&resp);
}

fn print(resp: &HookResponse) {
    println!("{}", serde_json::to_string(resp).expect("the response serializes"));
}

/// Read and check the document, and settle the options (flags, then the document, then
/// `additionalParams.mgmt_driver`; the document's relative paths are the package's).
fn read(a: &VnfmHookArgs, name: &str) -> Result<Call> {
    let limit = crate::input_limit::REQUEST_MAX_BYTES;
    let text = match &a.input {
        Some(p) => crate::input_limit::read_capped(p, limit, "hook request")?,
        None => {
            use std::io::Read;
            let mut buf = Vec::new();
            std::io::stdin()
                .take(limit + 1)
                .read_to_end(&mut buf)
                .map_err(|e| Error::input(name, "(document)", format!("cannot read: {e}")))?;
            if buf.len() as u64 > limit {
                return Err(Error::input(name, "(document)", "is larger than 16 MiB; refused"));
            }
            String::from_utf8(buf).map_err(|_| Error::input(name, "(document)", "is not UTF-8"))?
        }
    };
    let doc = HookRequest::parse(&text, name)?;
    let csar = doc.tmp_csar_dir.clone();
    let mut doc_opts = doc.options.clone();
    if let (Some(dir), Some(inv)) = (&csar, &doc_opts.inventory) {
        doc_opts.inventory = Some(dir.join(inv));
    }
    let opts = a.options().or(doc_opts).or(params_options(&doc, name)?);
    let install_timeout = match (&a.install_timeout, &opts.install_timeout) {
        (Some(d), _) => *d,
        (None, Some(v)) => duration(v, "options.install_timeout")?,
        (None, None) => Duration::from_secs(2700),
    };
    let drain_timeout = match (&a.drain_timeout, &opts.drain_timeout) {
        (Some(d), _) => *d,
        (None, Some(v)) => duration(v, "options.drain_timeout")?,
        (None, None) => Duration::from_secs(300),
    };
    Ok(Call { doc, name: name.to_string(), opts, install_timeout, drain_timeout })
}

/// Options from `request.additionalParams.mgmt_driver`. The request comes from the VNFM's API
/// user, not the operator: it may not choose where state, host keys or a kubeconfig go, and
/// its inventory must be a file of the package (a path elsewhere could make an error message
/// quote a file of the conductor).
fn params_options(doc: &HookRequest, name: &str) -> Result<Options> {
    let mut o = doc.params_options(name)?;
    let file = format!("{name}: request");
    for (key, set) in [
        ("state_dir", o.state_dir.is_some()),
        ("known_hosts", o.known_hosts.is_some()),
        ("kubeconfig_out", o.kubeconfig_out.is_some()),
    ] {
        if set {
            return Err(Error::input(
                &file,
                format!("additionalParams.mgmt_driver.{key}"),
                "is the operator's setting: give it as a flag or in the document's options, not in the request",
            ));
        }
    }
    if let Some(inv) = &o.inventory {
        let field = "additionalParams.mgmt_driver.inventory";
        let dir = doc
            .tmp_csar_dir
            .as_ref()
            .ok_or_else(|| Error::input(&file, field, "names a file of the package, and there is no tmp_csar_dir"))?;
        let rel = inv.to_str().ok_or_else(|| Error::input(&file, field, "is not UTF-8"))?;
        o.inventory = Some(Package::open(dir)?.resolve(rel, &file, field, false)?);
    }
    Ok(o)
}

fn duration(v: &crate::vnfm::document::DurationValue, field: &str) -> Result<Duration> {
    parse_duration(&v.text()).map_err(|e| Error::input("hook request", field, e))
}

async fn execute(c: &Call, ctx: &Ctx, events: crate::event::Events) -> Result<Done> {
    let (lcm, phase) = parse_operation(&c.doc.operation)?;
    let id = c.doc.instance_id();
    check_instance_id(&id).map_err(|e| Error::input(&c.name, "vnf_instance.id", e.to_string()))?;
    let store = ctx.store(&c.opts.state_dir)?;
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
        Action::Cluster(op) => cluster(c, ctx, events, store, op, c.doc.request.clone(), vec![]).await,
        Action::ClusterForget if !cluster_recorded => {
            let w = "instantiate_rollback_start: no cluster was recorded; nothing to forget".to_string();
            Ok(Done { warnings: vec![w], ..Default::default() })
        }
        Action::ClusterForget => {
            let mut d = cluster(c, ctx, events, store, Op::TerminateEnd, Value::Null, vec![]).await?;
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
            cluster(c, ctx, events, store, Op::ScaleStart, req, joined).await
        }
        Action::CnfInstantiate => run_cnf(c, ctx, events, store, cnf::Op::Instantiate, &id).await,
        Action::CnfScale => run_cnf(c, ctx, events, store, cnf::Op::Scale, &id).await,
        Action::CnfHeal => run_cnf(c, ctx, events, store, cnf::Op::Heal, &id).await,
        Action::CnfTerminate => run_cnf(c, ctx, events, store, cnf::Op::Terminate, &id).await,
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
            let p = ClusterParams::from_additional_params(&ap, &file, id)?;
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
            cnf::params::CnfParams::from_additional_params(&ap, &file)?;
            Ok(json!({"checked": dispatch::CNF_KEY}))
        }
    }
}

fn inline(c: &Call, key: &str, v: &Value) -> Option<Doc> {
    (!v.is_null()).then(|| Doc::Inline { name: format!("{}: {key}", c.name), value: v.clone() })
}

async fn cluster(
    c: &Call,
    ctx: &Ctx,
    events: crate::event::Events,
    store: Store,
    op: Op,
    request: Value,
    node: Vec<String>,
) -> Result<Done> {
    let inputs = prepare::Inputs {
        request: inline(c, "request", &request),
        inventory: c.opts.inventory.clone(),
        inventory_opts: ctx.inventory_opts(),
        package_dir: c.doc.tmp_csar_dir.clone(),
        vnf_instance: inline(c, "vnf_instance", &c.doc.vnf_instance),
        grant_request: inline(c, "grant_request", &c.doc.grant_request),
        vnf_instance_id: None,
        node,
        tacker_compat: c.opts.tacker_compat.unwrap_or(false),
        known_hosts: c.opts.known_hosts.clone(),
        dry_run: ctx.run.dry_run,
    };
    let defaults = Defaults { retry_for: Duration::from_secs(300), parallel: 64 };
    let timeouts = Timeouts { install: c.install_timeout, drain: c.drain_timeout, ..Default::default() };
    let writes_kubeconfig = matches!(op, Op::InstantiateEnd | Op::HealEnd);
    let kubeconfig_out = c.opts.kubeconfig_out.as_ref().filter(|_| writes_kubeconfig);
    if let Some(out) = kubeconfig_out {
        kubeconfig::check_destination(out)?;
    }
    let rt = ctx.runner(events, &defaults, timeouts, false)?;
    let p = prepare::prepare(op, &inputs, store, rt)?;
    let mut warnings = p.hook.params.warnings.clone();
    let mut outcome = crate::cluster::run(op, &p, c.opts.reset_nodes.unwrap_or(false)).await;
    warnings.extend(outcome.warnings);
    // The kubeconfig comes from the state just recorded, while the instance lock is held.
    let mut kubeconfig = None;
    if let (Some(out), None) = (kubeconfig_out, &outcome.error) {
        if ctx.run.dry_run {
            kubeconfig = Some(out.clone());
        } else {
            match kubeconfig::write_for_instance(&p.hook.store, &p.hook.instance_id, out) {
                Ok(path) => kubeconfig = Some(path),
                Err(e) => outcome.error = Some(e),
            }
        }
    }
    let st = p.hook.state.lock().expect("state").clone();
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

async fn run_cnf(
    c: &Call,
    ctx: &Ctx,
    events: crate::event::Events,
    store: Store,
    op: cnf::Op,
    id: &str,
) -> Result<Done> {
    let inputs = cnf::Inputs {
        vnf_instance_id: Some(id.to_string()),
        request: inline(c, "request", &c.doc.request),
        // A heal's vnfcInstanceId names VNFCs of this instance (Tacker's ids), not pods.
        vnf_instance: inline(c, "vnf_instance", &c.doc.vnf_instance),
        namespace: None,
        package_dir: c.doc.tmp_csar_dir.clone(),
        vim_connection_info: None,
        cluster_instance: c.opts.cluster_instance.clone(),
        cluster_uuid: None,
        inventory: c.opts.inventory.clone(),
        inventory_opts: ctx.inventory_opts(),
        known_hosts: c.opts.known_hosts.clone(),
        wait: false,
        atomic: false,
        timeout: Duration::from_secs(300),
        status_interval: Duration::from_secs(5),
    };
    let defaults = Defaults { retry_for: Duration::from_secs(5), parallel: 16 };
    let prepared = cnf::run::prepare(&op, &inputs, store)?;
    let rt = ctx.runner(events, &defaults, Timeouts::default(), false)?;
    let o = cnf::run::run(&op, &inputs, prepared, rt).await?;
    Ok(Done { result: o.result, warnings: o.warnings, ..Default::default() })
}

/// Fill the response from what the action left; returns the exit code.
fn respond(c: &Call, resp: &mut HookResponse, d: Done) -> i32 {
    // The result is for logs and people: masked whatever the options. What the VNFM must
    // store (the v2 entry's token, a compat password) is in `vnf_instance` only.
    resp.result = crate::secret::masked(&d.result);
    resp.warnings = d.warnings;
    resp.kubeconfig = d.kubeconfig;
    let ok = d.context_error.is_none();
    if let Some((st, vim_name)) = &d.cluster {
        // A failed operation returns no instance: Tacker applies it before it looks at the
        // exit code, and a half-done record is not one to keep.
        if ok {
            let entry = if d.removed { None } else { vim_entry::entry(c.doc.vnfm, st) };
            let conns = c.doc.vnf_instance.get("vimConnectionInfo").cloned().unwrap_or(Value::Null);
            let mut inst = c.doc.vnf_instance.clone();
            inst["vimConnectionInfo"] = vim_entry::replace(&conns, c.doc.vnfm, vim_name, entry);
            resp.vnf_instance = Some(inst);
        }
    }
    err_data(c, resp, ok, d.joined, d.removed_nodes);
    match d.context_error {
        None => exit::OK,
        Some(e) => {
            resp.fail(&e);
            e.exit_code()
        }
    }
}

/// `user_script_err_handling_data.mgmt_driver`: what a rollback or a retry of this operation
/// needs to know.
fn err_data(c: &Call, resp: &mut HookResponse, finished: bool, joined: Vec<String>, removed: Vec<String>) {
    let v = json!({"operation": c.doc.operation, "finished": finished, "joined": joined, "removed": removed});
    resp.user_script_err_handling_data.insert("mgmt_driver".into(), v);
}
