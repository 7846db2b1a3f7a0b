//! `mgmt-driver sites export k8s-job`: read the rendered sites, select them as `sites apply`
//! would, and print the Indexed Job (`sites/export.rs` builds it; docs/fleet.md explains it).
//! Text output is the manifest itself, ready for `kubectl apply -f -`; `-o json|yaml` wraps it
//! in the result document.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::common::Ctx;
use crate::cli::envelope::Envelope;
use crate::console;
use crate::error::Result;
use crate::render::Output;
use crate::sites::export::{self, ConfigSource, JobOptions};
use crate::sites::plan::{self, parse_selector};

#[derive(Subcommand, Debug)]
pub enum ExportCmd {
    /// A Kubernetes Indexed Job (batch/v1) whose pod i runs `sites apply OP --index i`, and the
    /// ConfigMap of the selected sites' rendered files.
    K8sJob(K8sJobArgs),
}

#[derive(Args, Debug, Clone)]
pub struct K8sJobArgs {
    /// The rendered sites (`sites render --out DIR`).
    #[arg(long, value_name = "DIR")]
    pub rendered: PathBuf,
    /// Only these sites (comma-separated, repeatable).
    #[arg(long, value_delimiter = ',', value_name = "SITE,...")]
    pub only: Vec<String>,
    /// Only sites with this label (KEY=VALUE, repeatable: all must match).
    #[arg(long, value_parser = parse_selector, value_name = "KEY=VALUE")]
    pub selector: Vec<(String, String)>,
    /// The operation each pod runs and its arguments, as `sites apply` takes them
    /// (`instantiate`, `run-script check.sh --fast`); last on the line.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "OP")]
    pub op: Vec<String>,
    /// The image with mgmt-driver on PATH (and the package at --package-dir).
    #[arg(long)]
    pub image: String,
    /// How many pods (sites) run at once.
    #[arg(long, default_value = "16", value_name = "N")]
    pub parallelism: u32,
    /// The Job's backoffLimitPerIndex: new pods a failed site gets.
    #[arg(long, default_value = "2", value_name = "N")]
    pub retries: u32,
    /// The Job's maxFailedIndexes: past it the whole Job stops.
    #[arg(long, value_name = "N")]
    pub max_failed_sites: Option<u32>,
    /// The Job's name.
    #[arg(long, default_value = "mgmt-driver-sites")]
    pub name: String,
    /// The Kubernetes namespace of the Job and its ConfigMap (default: kubectl's current one).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// The ConfigMap to emit with the selected sites' rendered files, one key per site (NAME-0,
    /// NAME-1, ... when they need more than one ConfigMap's 1 MiB).
    #[arg(long, default_value = "mgmt-driver-sites", conflicts_with = "existing_config_map")]
    pub config_map: String,
    /// Reference this ConfigMap (the export's site bundles, NNNNN.<site>.json) instead of
    /// emitting one.
    #[arg(long, value_name = "NAME")]
    pub existing_config_map: Option<String>,
    /// The Secret the sites' @env: references (and /secrets files) come from.
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// The Secret holding the state key (key `state.key`), the same for every pod.
    #[arg(long, value_name = "NAME", default_value = "mgmt-driver-state-key")]
    pub state_key_secret: String,
    /// The PersistentVolumeClaim mounted at /state (ReadWriteMany across nodes).
    #[arg(long, value_name = "PVC")]
    pub state_claim: String,
    /// Where the image has the VNF package.
    #[arg(long, value_name = "PATH", default_value = "/opt/mgmt-driver/package")]
    pub package_dir: String,
    /// Each pod's CPU request (a Kubernetes quantity).
    #[arg(long, default_value = "50m", value_name = "CPU")]
    pub cpu_request: String,
    /// Each pod's memory request (a Kubernetes quantity).
    #[arg(long, default_value = "64Mi", value_name = "BYTES")]
    pub memory_request: String,
    /// Each pod's memory limit (a Kubernetes quantity).
    #[arg(long, default_value = "256Mi", value_name = "BYTES")]
    pub memory_limit: String,
}

pub fn run(cmd: ExportCmd, ctx: &Ctx) -> i32 {
    let ExportCmd::K8sJob(args) = cmd;
    let name = "sites export k8s-job";
    match manifest(&args) {
        Ok((text, sites)) => {
            if matches!(ctx.output, Output::Json | Output::Yaml) {
                let mut env = Envelope::new(name, false);
                env.context = json!({"rendered": args.rendered, "selected": sites.len()});
                env.result = json!({"sites": sites, "manifest": text});
                env.print(ctx.output);
            } else {
                console::out(&text);
            }
            0
        }
        Err(e) => {
            console::error(&e);
            Envelope::new(name, false).error(&e).print(ctx.output);
            e.exit_code()
        }
    }
}

fn manifest(a: &K8sJobArgs) -> Result<(String, Vec<String>)> {
    // The same selection and order as `sites apply` (catalogue index, then name), through the
    // same function: the Job's index i must be the pod's index i.
    let chosen = plan::select(plan::load_rendered(&a.rendered)?, &a.only, &a.selector, None)?;
    let files = chosen.iter().map(|s| export::read_site_files(&s.dir, &s.name)).collect::<Result<Vec<_>>>()?;
    let o = JobOptions {
        name: a.name.clone(),
        namespace: a.namespace.clone(),
        op: a.op.clone(),
        image: a.image.clone(),
        parallelism: a.parallelism,
        backoff_limit_per_index: a.retries,
        max_failed_indexes: a.max_failed_sites,
        config: match &a.existing_config_map {
            Some(n) => ConfigSource::Existing(n.clone()),
            None => ConfigSource::Embed(a.config_map.clone()),
        },
        secret: a.secret.clone(),
        state_key_secret: a.state_key_secret.clone(),
        state_claim: a.state_claim.clone(),
        package_dir: a.package_dir.clone(),
        cpu_request: a.cpu_request.clone(),
        memory_request: a.memory_request.clone(),
        memory_limit: a.memory_limit.clone(),
    };
    let text = export::k8s_job(&files, &o)?;
    Ok((text, chosen.into_iter().map(|s| s.name).collect()))
}
