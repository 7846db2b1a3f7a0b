//! The `cnf` test binary: what runs on a built cluster — Helm CNF operations with the real Helm 3
//! and 4 (tests/cnf.rs, needs npm) and Kubernetes workloads (tests/workload.rs). One binary, not
//! one per file: each links russh, tokio and the driver.
//!
//! The suites run one after another (tests/support/harness.rs), so at most one suite's labs are
//! up at once, as when each was its own binary. One suite: `cargo test --test cnf -- workload::`.

// A test binary reports to the test log and exits as a harness must; the print and exit lints
// (Cargo.toml) guard the driver's own output path (src/console.rs).
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../cnf.rs"]
mod cnf;
#[path = "../workload.rs"]
mod workload;

fn main() {
    support::harness::run(vec![cnf::suite(), workload::suite()])
}
