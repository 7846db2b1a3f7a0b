//! `mgmt-driver hook`: the VNFM hook protocol (docs/hook-protocol.md). One JSON document in,
//! one out; events on stderr. It reads the document, hands it to `vnfm::prepare` (checks, the
//! options settled) and `vnfm::run` (the action, through the same cluster or CNF operation the
//! CLI commands run) with the store and runner picked here, and prints the response
//! `vnfm::respond` fills: the instance's updated `vimConnectionInfo` and what a rollback needs.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::cli::common::{Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::ErrorItem;
use crate::console;
use crate::duration::parse_duration;
use crate::error::{exit, Error, Result};
use crate::event::Events;
use crate::inventory::LoadOptions;
use crate::lifecycle::state::Store;
use crate::lifecycle::{Runner, Timeouts};
use crate::render::{Output, Renderer};
use crate::vnfm;
use crate::vnfm::document::{Options, API_VERSION};
use crate::vnfm::prepare::Flags;
use crate::vnfm::respond::Answer;
use crate::vnfm::run::Family;

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

/// The hook's store and runners: this command's flags, with the cluster hooks' and the `cnf`
/// commands' defaults for the shared flags, as `vnfm::run` asks for them.
impl vnfm::run::Setup for Ctx {
    fn open_store(&self, dir: &Option<PathBuf>) -> Result<Store> {
        self.store(dir)
    }

    fn runner_for(
        &self,
        events: Events,
        family: Family,
        timeouts: Timeouts,
        retry_for: Option<Duration>,
    ) -> Result<Runner> {
        let defaults = match family {
            Family::Cluster => Defaults::HOOKS,
            Family::Cnf => Defaults::MASTERS,
        };
        // The request's value only shortens the operator's (checked in vnfm::prepare, and
        // again here against this family's own default).
        let mut ctx = self.clone();
        let operator = self.conn.retry_for.unwrap_or(defaults.retry_for);
        ctx.conn.retry_for = Some(retry_for.map_or(operator, |r| r.min(operator)));
        ctx.runner(events, &defaults, timeouts, false)
    }

    fn inventory_opts(&self) -> LoadOptions {
        Ctx::inventory_opts(self)
    }

    fn dry_run(&self) -> bool {
        self.run.dry_run
    }

    fn vim(&self) -> Result<crate::vim::Vim> {
        Ctx::vim(self)
    }
}

pub async fn run(a: VnfmHookArgs, ctx: &Ctx) -> i32 {
    let name = a.input.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "<stdin>".into());
    let flags = Flags {
        options: a.options(),
        install_timeout: a.install_timeout,
        drain_timeout: a.drain_timeout,
        retry_for: ctx.conn.retry_for,
    };
    let call = match read(&a, &name).and_then(|text| vnfm::prepare::prepare(&text, &name, flags)) {
        Ok(c) => c,
        Err(e) => {
            console::error(&e);
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
    let (events, rx) = Events::channel();
    let renderer = Renderer::for_hooks(mode, ctx.verbose).plan(ctx.run.dry_run).spawn(rx);
    // The operation's own warnings take the nodes' path: the renderer shows them and hands every
    // warning (a host key learned, a master skipped) back for the response.
    let notes = events.clone();
    let done = vnfm::run::run(&call, ctx, events).await;
    let answer = vnfm::respond::answer(&call, done);
    for w in &answer.warnings {
        notes.warn(w);
    }
    drop(notes);
    let shown = renderer.await.unwrap_or_default();
    let code = fill(&mut resp, answer);
    resp.warnings = shown;
    for e in &resp.errors {
        console::err_line(&format!("error: {}", e.message));
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
    console::out_line(&serde_json::to_string(resp).expect("the response serializes"));
}

/// The request document, from `--input` or standard input, within the size cap.
fn read(a: &VnfmHookArgs, name: &str) -> Result<String> {
    let limit = crate::input_limit::REQUEST_MAX_BYTES;
    Ok(match &a.input {
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
    })
}

/// The response from the action's answer; returns the exit code.
fn fill(resp: &mut HookResponse, a: Answer) -> i32 {
    resp.result = a.result;
    resp.warnings = a.warnings;
    resp.kubeconfig = a.kubeconfig;
    resp.vnf_instance = a.vnf_instance;
    resp.user_script_err_handling_data.insert("mgmt_driver".into(), a.mgmt_driver);
    match a.error {
        None => exit::OK,
        Some(e) => {
            resp.fail(&e);
            e.exit_code()
        }
    }
}
