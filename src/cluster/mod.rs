//! The Kubernetes-cluster lifecycle hooks: a drop-in for Tacker's sample Kubernetes MgmtDriver.
//! Pure parts (request models, params, topology, node commands, output parsing, records) are
//! unit-tested; `runner` is the edge that talks to nodes; the hook files read like the spec's
//! step lists. The node contract is in docs/cluster-contract.md.

pub mod cli;
pub mod heal;
pub mod hook;
pub mod install_output;
pub mod instantiate;
pub mod node_cmd;
pub mod package;
pub mod params;
pub mod record;
pub mod request;
pub mod runner;
pub mod scale;
pub mod state;
pub mod terminate;
pub mod topology;
