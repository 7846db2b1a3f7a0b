//! The lifecycle layer every operation stands on: the cluster hooks, the CNF operations and the
//! fan-out commands. It owns
//! - **targets** (`crate::target`, pure): a host with a role; the runner takes anything that is
//!   a `Node`;
//! - **the runner** (`runner`): one connection per node, bounded fan-out, phases, failover;
//! - **plans** (`plan`): dry run as a connector that records steps instead of running them;
//! - **facts** (`fact`): run, parse, placeholder in a plan, one typed error when unreadable;
//! - **jobs** (`job`): a host's steps as data, for the fan-out commands;
//! - **the state store** (`state`, its documents sealed and authenticated by `seal` with the
//!   operator's `state_key`; `reseal` upgrades an earlier version's), and **package paths**
//!   (`package`). The SOL002/SOL003 request models are pure
//!   (`crate::request`).
//!
//! It knows nothing of SSH (that is a `Connector` at the edge) nor of clusters or Helm (those are
//! operations on top). See docs/architecture.md.

pub mod fact;
pub mod job;
pub mod owner;
pub mod package;
pub mod plan;
pub mod private_file;
pub mod reseal;
pub mod runner;
pub mod seal;
pub mod state;
pub mod state_key;

pub use crate::target::{Node, Role, Target};
pub use runner::{all_ok, FanOut, Runner, Timeouts};
