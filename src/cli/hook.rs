//! The hook commands: `instantiate-end`, `heal-start`, `heal-end`, `scale-start`, `scale-end`,
//! `terminate-end`. They parse their arguments and call the cluster operations; everything is
//! validated before anything connects (`cluster::prepare`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::cli::common::{Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::Envelope;
use crate::cluster::kubeconfig;
use crate::cluster::prepare::{self, Inputs, Op};
use crate::console;
use crate::duration::parse_duration;
use crate::env_vars;
use crate::error::{exit, Error, Result};
use crate::lifecycle::Timeouts;
use crate::render::Output;
use crate::request::Doc;

#[derive(Args, Debug, Clone)]
pub struct HookArgs {
    /// The operation's request body (SOL002/SOL003 JSON).
    #[arg(long, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// Nodes: groups named after the VNFD's aspect_id / vdu_id, `cps` for the cluster VIP.
    #[arg(short, long, env = env_vars::INVENTORY, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// The unpacked VNF package; script paths in the request are relative to it.
    #[arg(long, value_name = "DIR")]
    pub package_dir: Option<PathBuf>,
    /// The VnfInstance (SOL003 JSON): its id, vimConnectionInfo and vnfcResourceInfo.
    #[arg(long, value_name = "FILE")]
    pub vnf_instance: Option<PathBuf>,
    /// The VNF instance id, when no --vnf-instance is given.
    #[arg(long, value_name = "ID")]
    pub vnf_instance_id: Option<String>,
    #[command(flatten)]
    pub store: StateDir,
    /// The SOL003 GrantRequest (JSON): SCALE_IN and heal take the nodes from its removeResources.
    #[arg(long, value_name = "FILE")]
    pub grant_request: Option<PathBuf>,
    /// Inventory host names to scale or heal (repeatable; default: from the request).
    #[arg(long, value_name = "NAME")]
    pub node: Vec<String>,
    /// Tacker compatibility: the node password in helm_info, the bearer token in the output.
    #[arg(long)]
    pub tacker_compat: bool,
    /// terminate-end: run `kubeadm reset -f` on every node first.
    #[arg(long)]
    pub reset_nodes: bool,
    /// How long an install script may run (Tacker: 2700s).
    #[arg(long, default_value = "2700", value_parser = parse_duration, value_name = "DURATION")]
    pub install_timeout: Duration,
    /// How long a drain waits for pods to be evicted before the step fails.
    #[arg(long, default_value = "300", value_parser = parse_duration, value_name = "DURATION")]
    pub drain_timeout: Duration,
    #[command(flatten)]
    pub known: KnownHosts,
    /// instantiate-end: write a kubeconfig for the new cluster here (mode 0600; it holds the
    /// cluster-admin token): what OSM's `k8scluster-add --creds` and ONAP take.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
}

impl HookArgs {
    fn inputs(&self, ctx: &Ctx) -> Inputs {
        Inputs::new(self.request.clone().map(Doc::File), ctx.inventory_opts(), ctx.run.dry_run)
            .inventory(self.inventory.clone())
            .package_dir(self.package_dir.clone())
            .vnf_instance(self.vnf_instance.clone().map(Doc::File))
            .grant_request(self.grant_request.clone().map(Doc::File))
            .vnf_instance_id(self.vnf_instance_id.clone())
            .node(self.node.clone())
            .tacker_compat(self.tacker_compat)
            .known_hosts(self.known.known_hosts.clone())
            .secret_refs(ctx.secret_refs())
    }
}

/// Run one hook: exit code 0 ok, 1 a node failed, 2 bad input (nothing ran).
pub async fn run(op: Op, a: HookArgs, ctx: &Ctx) -> i32 {
    let (events, renderer) = ctx.renderer(None);
    // The hook's own warnings take the nodes' path: the renderer shows them and lists them.
    let notes = events.clone();
    let timeouts = Timeouts { install: a.install_timeout, drain: a.drain_timeout, ..Default::default() };
    let prepared: Result<prepare::Prepared> = (|| {
        if let Some(out) = &a.kubeconfig_out {
            if op != Op::InstantiateEnd {
                return Err(Error::input("arguments", "--kubeconfig-out", "is for instantiate-end only"));
            }
            kubeconfig::check_destination(out)?;
        }
        let store = ctx.store(&a.store.state_dir)?;
        let rt = ctx.runner(events, &Defaults::HOOKS, timeouts, false)?;
        prepare::prepare(op, &a.inputs(ctx).vim(ctx.vim()?), store, rt)
    })();
    let mut env = Envelope::new(op.name(), ctx.run.dry_run);
    let p = match prepared {
        Ok(p) => p,
        Err(e) => {
            drop(notes);
            env.warnings = renderer.await.unwrap_or_default();
            console::error(&e);
            env.error(&e).print(ctx.output);
            return e.exit_code();
        }
    };
    for w in &p.hook.params.warnings {
        notes.warn(w);
    }
    let mut outcome = crate::cluster::run(op, &p, a.reset_nodes).await;
    for w in outcome.warnings.iter().skip(p.hook.params.warnings.len()) {
        notes.warn(w);
    }
    if let (Some(out), None) = (&a.kubeconfig_out, &outcome.error) {
        // Written under the instance lock, from the state just recorded; a plan writes nothing
        // and reports where the file would go.
        let written = if ctx.run.dry_run {
            Ok(std::path::absolute(out).unwrap_or_else(|_| out.clone()))
        } else {
            kubeconfig::write_for_instance(p.hook.store(), p.hook.instance_id(), out)
        };
        match written {
            Ok(path) => outcome.result["kubeconfig"] = path.display().to_string().into(),
            Err(e) => outcome.error = Some(e),
        }
    }
    drop((p, notes));
    env.warnings = renderer.await.unwrap_or_default();
    env.context = outcome.context;
    env.result = outcome.result;
    let code = match &outcome.error {
        None => {
            if !matches!(ctx.output, Output::Json | Output::Yaml) {
                let note = if ctx.run.dry_run { " (dry run: nothing was run)" } else { "" };
                console::err_line(&format!("{}: ok{note}", op.name()));
                if let Some(k) = env.result.get("kubeconfig").and_then(|k| k.as_str()) {
                    let verb = if ctx.run.dry_run { "would write" } else { "wrote" };
                    console::err_line(&format!("kubeconfig: {verb} {k} (mode 0600: it holds the cluster-admin token)"));
                }
            }
            exit::OK
        }
        Some(e) => {
            console::error(e);
            env = env.error(e);
            e.exit_code()
        }
    };
    env.print(ctx.output);
    code
}
