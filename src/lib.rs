//! mgmt-driver: turns freshly booted VMs into a working Kubernetes cluster with Helm, and runs
//! Helm-packaged network functions on it, all over SSH.
//!
//! Layout: a pure core (quoting, command building, inventory, plans) and an effectful edge
//! (the [`transport::Transport`] trait and its SSH implementation, the renderers).

pub mod backoff;
pub mod cli;
pub mod cluster;
pub mod cnf;
pub mod command;
pub mod engine;
pub mod error;
pub mod event;
pub mod inventory;
pub mod quote;
pub mod redact;
mod remote;
pub mod render;
pub mod secret;
pub mod ssh;
pub mod step;
pub mod transport;
