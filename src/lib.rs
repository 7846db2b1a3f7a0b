//! mgmt-driver: turns freshly booted VMs into a working Kubernetes cluster with Helm, and runs
//! Helm-packaged network functions on it, all over SSH.
//!
//! Layers (docs/architecture.md): a pure core (quoting, command building, inventory, requests,
//! params, plans), the lifecycle layer every operation stands on (`lifecycle`), the operations
//! (`fanout`, `cluster`, `cnf`), and the effectful edge (the [`transport::Transport`] seam with
//! its SSH implementation and the in-process fake, the renderers, the CLI).
//!
//! The public API is what the binary and the integration tests use: the CLI entry point, the
//! transport seam (SSH and the fake), the inventory, events and errors. Everything else is
//! crate-private, so the compiler reports what nothing uses.

#[cfg(test)]
mod architecture;
pub(crate) mod backoff;
pub mod cli;
pub(crate) mod cluster;
pub(crate) mod cnf;
pub mod command;
pub mod console;
#[cfg(test)]
mod debug_audit;
pub(crate) mod ee;
pub mod env_vars;
pub mod error;
pub mod event;
pub(crate) mod fanout;
pub(crate) mod input_limit;
pub mod inventory;
pub(crate) mod lifecycle;
pub(crate) mod mask;
pub(crate) mod primitive;
pub(crate) mod quote;
pub(crate) mod redact;
mod remote;
pub(crate) mod render;
pub(crate) mod request;
pub mod secret;
pub mod sites;
pub mod ssh;
pub(crate) mod target;
pub mod transport;
pub mod url_mask;
pub(crate) mod vnfm;
pub mod workload;
