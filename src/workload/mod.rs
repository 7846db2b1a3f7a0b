//! Kubernetes workload operations (ONAP DCAE's Kubernetes plugin, over SSH): deploy a compact
//! spec as a Deployment or StatefulSet with its Services, undeploy, check availability, scale,
//! re-image per container, roll back, exec in every running pod, and wait until available, all
//! with `kubectl` on a cluster master. Pure parts (`kind`, `op`, `ports`, `spec`, `names`,
//! `manifest`, `kubectl`, `status`) are unit-tested; `masters` finds where kubectl runs (the cnf
//! code's masters and failover), `run` checks a command's inputs and runs it, `ops` holds the
//! steps on the runner.
//!
//! Only module lines and re-exports here, so the pure parts never import this file.

pub mod kind;
pub mod kubectl;
pub mod manifest;
pub mod masters;
pub mod names;
pub mod op;
pub mod ops;
pub mod ports;
pub mod run;
pub mod spec;
pub mod status;

pub use kind::Kind;
pub use op::Op;
