//! mgmt-driver: turns freshly booted VMs into a working Kubernetes cluster with Helm, and runs
//! Helm-packaged network functions on it, all over SSH.
//!
//! Layers, as docs/architecture.md's "The layers, file by file" assigns every file (and as its
//! architecture test checks every import):
//! - **pure core**: no I/O beyond reading the file it is asked to parse (quoting, command
//!   building, inventory, requests, params, the parsers and builders of each family, the
//!   node-side programs); it imports only itself;
//! - **lifecycle** (`lifecycle`): how steps reach nodes, with nothing about what they mean (the
//!   runner and its fan-out, plans, facts, the state store and its seal, package files);
//! - **seam** (`transport`): the [`transport::Transport`] / `Connector` traits the lifecycle
//!   layer talks to;
//! - **edge**: the effects behind the seam and on the terminal (`ssh`, the scripted fake
//!   `transport::fake`, `render`);
//! - **operations** (`fanout`, `cluster`, `cnf`, `sites`, `ee`, `primitive`, `workload`,
//!   `vnfm`): what a VNFM or an operator asks for, each reading like the spec's step list; they
//!   may use every layer but the CLI;
//! - **cli** (`cli`): the composition root: parse, resolve, call, print.
//!
//! The public API is what the binary and the integration tests use: the CLI entry point, the
//! transport seam (SSH and the fake), the inventory, events and errors, and the state store
//! with its key (a test that needs a recorded document writes it as a run would: sealed and
//! authenticated, which no hand-written file is). Everything else is crate-private, so the
//! compiler reports what nothing uses.

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
pub(crate) mod duration;
pub(crate) mod ee;
pub mod env_vars;
pub mod error;
pub mod event;
pub(crate) mod facts;
pub(crate) mod fanout;
pub(crate) mod input_limit;
pub mod inventory;
pub(crate) mod k8s_names;
pub(crate) mod kube;
pub(crate) mod lifecycle;
pub(crate) mod mask;
pub(crate) mod primitive;
pub(crate) mod quote;
pub(crate) mod redact;
mod remote;
pub(crate) mod render;
pub(crate) mod request;
#[cfg(test)]
mod round_trip_table;
pub mod secret;
pub mod secret_ref;
pub mod sites;
pub mod ssh;
pub(crate) mod target;
pub mod transport;
pub mod url_mask;
pub mod vim;
pub(crate) mod vnfm;
pub mod workload;

pub use lifecycle::state::Store;
pub use lifecycle::state_key::StateKey;
