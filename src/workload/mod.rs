//! Kubernetes workload operations (ONAP DCAE's Kubernetes plugin, over SSH): deploy a compact
//! spec as a Deployment or StatefulSet with its Services, undeploy, check availability, scale,
//! re-image per container, roll back, exec in every running pod, and wait until available, all
//! with `kubectl` on a cluster master. Pure parts (`ports`, `spec`, `names`, `manifest`,
//! `kubectl`, `status`) are unit-tested; `masters` finds where kubectl runs (the cnf code's
//! masters and failover), `ops` holds the steps on the runner.

pub mod kubectl;
pub mod manifest;
pub mod masters;
pub mod names;
pub mod ops;
pub mod ports;
pub mod spec;
pub mod status;

use std::path::PathBuf;

/// Deployment or StatefulSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Deployment,
    #[value(name = "statefulset")]
    StatefulSet,
}

impl Kind {
    /// As the API spells it (`kind:`).
    pub fn api(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
        }
    }

    /// As kubectl addresses it.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::StatefulSet => "statefulset.apps",
        }
    }

    /// A spec's `kind:` (the API's spelling, or kubectl's lowercase one).
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "Deployment" | "deployment" => Ok(Kind::Deployment),
            "StatefulSet" | "statefulset" => Ok(Kind::StatefulSet),
            _ => Err(format!("'{}' is not Deployment or StatefulSet", crate::error::excerpt(s))),
        }
    }
}

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

/// Where kubectl runs: the cluster recorded by `instantiate-end` under an id, or an inventory's
/// master group.
#[derive(Clone, Debug, Default)]
pub struct Where {
    pub cluster_instance: Option<String>,
    pub inventory: Option<PathBuf>,
    pub master_group: String,
    pub inventory_opts: crate::inventory::LoadOptions,
    pub known_hosts: Option<PathBuf>,
}
