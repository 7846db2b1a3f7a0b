//! `mgmt-driver cnf <op>`: Helm CNF operations on a cluster's masters over SSH, or on
//! this machine for a cluster known only by its `--kubeconfig`. Parses the
//! arguments and calls `cnf::run`; inputs are checked before anything connects.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::cli::common::{Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::Envelope;
use crate::cnf::{self, Inputs, Op};
use crate::console;
use crate::duration::parse_duration;
use crate::error::{exit, Result};
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::render::Output;

#[derive(Args, Debug, Clone)]
pub struct CnfArgs {
    /// The VNF instance (CNF) id: names the chart directory and the state document.
    #[arg(long, global = true, value_name = "ID")]
    pub vnf_instance_id: Option<String>,
    /// The operation's request (instantiate, scale, heal).
    #[arg(long, global = true, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// The unpacked VNF package: the request's chart paths are relative to it.
    #[arg(long, global = true, value_name = "DIR")]
    pub package_dir: Option<PathBuf>,
    /// The VnfInstance document (JSON): a heal's vnfcInstanceId names VNFCs of it (its
    /// vnfcInfo[].id), mapped to pods through vnfcResourceInfo; without it they are pod names.
    #[arg(long, global = true, value_name = "FILE")]
    pub vnf_instance: Option<PathBuf>,
    /// The Kubernetes namespace of the releases (a DNS label); overrides the request's (or the
    /// recorded) `namespace`. `list` with it lists that namespace only.
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// vimConnectionInfo (list, map or one entry) holding extra.helm_info.
    #[arg(long, global = true, value_name = "FILE")]
    pub vim_connection_info: Option<PathBuf>,
    /// Use the cluster recorded by `instantiate-end` for this VNF instance id.
    #[arg(long, global = true, value_name = "ID")]
    pub cluster_instance: Option<String>,
    /// OSM's cluster_uuid, `NAMESPACE:CLUSTER_ID` or `CLUSTER_ID`: Helm runs in that cluster's
    /// own environment on the masters (kubeconfig and Helm homes under
    /// /var/lib/mgmt-driver/helm/CLUSTER_ID); NAMESPACE is the releases' namespace when neither
    /// --namespace nor the request names one. Default cluster id: the one the CNF was
    /// instantiated with, else --cluster-instance, else --vnf-instance-id.
    #[arg(long, global = true, value_name = "[NS:]ID")]
    pub cluster_uuid: Option<String>,
    /// A cluster known only by this kubeconfig (OSM's cluster registered by file): Helm runs on
    /// this machine with it, by path (`KUBECONFIG`), in private Helm homes under the state dir
    /// (helm/CLUSTER_ID, 0700); no master, inventory or vimConnectionInfo is used (one or the
    /// other). For install, upgrade, uninstall, rollback, status, history, values, list, show
    /// and the repo-* verbs.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The Helm binary to run with --kubeconfig (default: `helm` on PATH).
    #[arg(long, global = true, value_name = "PATH", requires = "kubeconfig")]
    pub helm_bin: Option<PathBuf>,
    /// Credentials and host keys for the masters (matched by address).
    #[arg(short, long, global = true, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    #[command(flatten)]
    pub store: StateDir,
    #[command(flatten)]
    pub known: KnownHosts,
    /// helm --wait: the operation ends when the release's resources are ready.
    #[arg(long, global = true)]
    pub wait: bool,
    /// Roll back on failure (Helm 3 --atomic, Helm 4 --rollback-on-failure).
    #[arg(long, global = true)]
    pub atomic: bool,
    /// Each Helm operation's --timeout and our deadline around it: `300`, `10m`.
    #[arg(long, default_value = "300", global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Report the releases' status (one `helm list`) this often while a long Helm command runs.
    #[arg(long, default_value = "5", global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub status_interval: Duration,
}

impl CnfArgs {
    fn inputs(&self, ctx: &Ctx) -> Inputs {
        Inputs {
            // The operator's own command line (its request file may still be a tenant's body:
            // what a request's helm_info may name is checked whoever runs it).
            author: cnf::Author::Operator,
            request: self.request.clone().map(crate::request::Doc::File),
            package_dir: self.package_dir.clone(),
            vnf_instance: self.vnf_instance.clone().map(crate::request::Doc::File),
            namespace: self.namespace.clone(),
            vim_connection_info: self.vim_connection_info.clone(),
            cluster_instance: self.cluster_instance.clone(),
            cluster_uuid: self.cluster_uuid.clone(),
            inventory: self.inventory.clone(),
            kubeconfig: self.kubeconfig.clone(),
            known_hosts: self.known.known_hosts.clone(),
            wait: self.wait,
            atomic: self.atomic,
            timeout: self.timeout,
            status_interval: self.status_interval,
            secret_refs: ctx.secret_refs(),
            ..Inputs::new(self.vnf_instance_id.clone(), ctx.inventory_opts())
        }
    }
}

pub async fn run(op: Op, a: CnfArgs, ctx: &Ctx) -> i32 {
    let (events, renderer) = ctx.renderer(None);
    // The operation's own warnings take the nodes' path: the renderer shows them and lists them.
    let notes = events.clone();
    let inputs = a.inputs(ctx);
    let r: Result<cnf::run::Outcome> = async {
        let prepared = cnf::run::prepare(&op, &inputs, ctx.store(&a.store.state_dir)?)?;
        // A kubeconfig-only cluster: Helm runs here (a plan only plans, and makes no directory).
        let local = if ctx.run.dry_run { None } else { prepared.local_connector(a.helm_bin.as_deref())? };
        let rt = match local {
            Some(local) => Runner::new(Arc::new(local), events, FanOut::default(), Timeouts::default()),
            None => ctx.runner(events, &Defaults::MASTERS, Timeouts::default(), false)?,
        };
        cnf::run::run(&op, &inputs, prepared, rt).await
    }
    .await;
    if let Ok(o) = &r {
        for w in &o.warnings {
            notes.warn(w);
        }
    }
    drop(notes);
    let warnings = renderer.await.unwrap_or_default();
    let env = Envelope { warnings, ..Envelope::new(op.name(), ctx.run.dry_run) };
    match r {
        Ok(o) => {
            let env = Envelope { context: o.context, result: o.result, ..env };
            match ctx.output {
                Output::Json | Output::Yaml => env.print(ctx.output),
                _ => console::out_line(&serde_json::to_string_pretty(&env).unwrap_or_default()),
            }
            exit::OK
        }
        Err(e) => {
            console::error(&e);
            env.error(&e).print(ctx.output);
            e.exit_code()
        }
    }
}
