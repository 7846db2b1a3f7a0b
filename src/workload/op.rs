//! The workload operations an operator asks for, as the command line parses them (clap's
//! `Subcommand`); plain data to everything else. Pure.

use std::path::PathBuf;

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Op {
    /// Create or update the workload and its Services from a compact spec (YAML or JSON).
    Deploy {
        /// The spec file (docs/workloads.md).
        spec: PathBuf,
    },
    /// Delete the workload and the Services `deploy` made for it (absent ones are fine).
    Undeploy {
        /// The workload's name.
        name: String,
    },
    /// Whether available == updated == desired replicas (exit 0 either way; see the result).
    Available {
        /// The workload's name.
        name: String,
    },
    /// Set the number of replicas.
    Scale {
        /// The workload's name.
        name: String,
        /// How many replicas.
        replicas: u32,
    },
    /// Change container images: CONTAINER=IMAGE, one or more (a new revision).
    SetImage {
        /// The workload's name.
        name: String,
        /// A container and its new image (one or more).
        #[arg(required = true, value_name = "CONTAINER=IMAGE")]
        images: Vec<String>,
    },
    /// Go back to the previous revision, or to --to-revision N (`kubectl rollout undo`).
    Rollback {
        /// The workload's name.
        name: String,
        /// The revision to go back to (default: the previous one).
        #[arg(long)]
        to_revision: Option<u32>,
    },
    /// Run a command in every running pod of the workload: `exec NAME -- CMD ARG...`.
    Exec {
        /// The workload's name.
        name: String,
        /// The container (default: the pod's first).
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Poll until available (every --interval, at most --timeout).
    Wait {
        /// The workload's name.
        name: String,
    },
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
