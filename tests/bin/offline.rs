//! The `offline` test binary: the suites that need no lab and no root — the install script's
//! checks (tests/install_script.rs, real gpg), the exported Job against Kubernetes' schemas
//! (tests/k8s_job.rs, python3), the binary's manners at its edge (tests/output.rs: closed pipes,
//! planned hosts, the compiler in `version`), snapshots of `--help`, dry-run plans and result documents
//! (tests/snapshot.rs) and the hostile-input corpus (tests/hostile/, last: its closing line
//! counts the cases). One binary, not one per file: each links the driver's dependencies.
//!
//! One suite: `cargo test --test offline -- hostile::`. Update the snapshots after a meant
//! change: `UPDATE_SNAPSHOTS=1 cargo test --test offline snapshot`.

// A test binary reports to the test log and exits as a harness must; the print and exit lints
// (Cargo.toml) guard the driver's own output path (src/console.rs).
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../hostile/main.rs"]
mod hostile;
#[path = "../install_script.rs"]
mod install_script;
#[path = "../k8s_job.rs"]
mod k8s_job;
#[path = "../output.rs"]
mod output;
#[path = "../snapshot.rs"]
mod snapshot;

// The corpus tables name their runner and shared inventory from the crate root, as when
// tests/hostile/ was its own binary.
use hostile::{case, fanout};

fn main() {
    support::harness::run(vec![
        install_script::suite(),
        k8s_job::suite(),
        output::suite(),
        snapshot::suite(),
        hostile::suite(),
    ])
}
