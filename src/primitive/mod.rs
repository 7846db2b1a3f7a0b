//! Named primitives (OSM N2VC's `exec_primitive`): actions a package declares in
//! `primitives.yaml` (`spec.rs`), checked with their parameters, script and targets before
//! anything connects (`prepare.rs`), run on registered machines or cluster nodes with typed
//! parameters passed safely (`run.rs`), each run a status record in the state store emitted as
//! events while it runs (`status.rs`), and failures sorted into OSM's error kinds with their own
//! exit codes.

pub mod prepare;
pub mod run;
pub mod spec;
pub mod status;
