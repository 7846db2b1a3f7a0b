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
pub mod error;
pub mod event;
pub mod fanout;
pub mod inventory;
pub mod lifecycle;
pub mod quote;
pub mod redact;
pub mod render;
pub mod secret;
pub mod ssh;
pub mod transport;
