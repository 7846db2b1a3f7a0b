//! The workload operations an operator asks for, as the command line parses them (clap's
//! `Subcommand`); plain data to everything else. Pure.

use std::path::PathBuf;

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Op {
    /// Create or update the workload and its Services from a compact spec (YAML or JSON).
    Deploy { spec: PathBuf },
    /// Delete the workload and the Services `deploy` made for it (absent ones are fine).
    Undeploy { name: String },
    /// Whether available == updated == desired replicas (exit 0 either way; see the result).
    Available { name: String },
    /// Set the number of replicas.
    Scale { name: String, replicas: u32 },
    /// Change container images: CONTAINER=IMAGE, one or more (a new revision).
    SetImage {
        name: String,
        #[arg(required = true, value_name = "CONTAINER=IMAGE")]
        images: Vec<String>,
    },
    /// Go back to the previous revision, or to --to-revision N (`kubectl rollout undo`).
    Rollback {
        name: String,
        #[arg(long)]
        to_revision: Option<u32>,
    },
    /// Run a command in every running pod of the workload: `exec NAME -- CMD ARG...`.
    Exec {
        name: String,
        /// The container (default: the pod's first).
        #[arg(short = 'c', long)]
        container: Option<String>,
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Poll until available (every --interval, at most --timeout).
    Wait { name: String },
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Deploy { .. } => "workload deploy",
            Op::Undeploy { .. } => "workload undeploy",
            Op::Available { .. } => "workload available",
            Op::Scale { .. } => "workload scale",
            Op::SetImage { .. } => "workload set-image",
            Op::Rollback { .. } => "workload rollback",
            Op::Exec { .. } => "workload exec",
            Op::Wait { .. } => "workload wait",
        }
    }
}
