//! The `offline` test binary: the suites that need no lab and no root — the install script's
//! checks (tests/install_script.rs, real gpg), the exported Job against Kubernetes' schemas
//! (tests/k8s_job.rs, python3), snapshots of `--help`, dry-run plans and result documents
//! (tests/snapshot.rs) and the hostile-input corpus (tests/hostile/, last: its closing line
//! counts the cases). One binary, not one per file: each links the driver's dependencies.
//!
//! One suite: `cargo test --test offline -- hostile::`. Update the snapshots after a meant
//! change: `UPDATE_SNAPSHOTS=1 cargo test --test offline snapshot`.

#[path = "../support/mod.rs"]
mod support;

#[path = "../hostile/main.rs"]
mod hostile;
#[path = "../install_script.rs"]
mod install_script;
#[path = "../k8s_job.rs"]
mod k8s_job;
#[path = "../snapshot.rs"]
mod snapshot;

// The corpus tables name their runner and shared inventory from the crate root, as when
// tests/hostile/ was its own binary.
use hostile::{case, fanout};

fn main() {
    support::harness::run(vec![install_script::suite(), k8s_job::suite(), snapshot::suite(), hostile::suite()])
}
