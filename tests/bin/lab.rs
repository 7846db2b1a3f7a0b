//! The `lab` test binary: the SSH engine and what runs on it against real sshd lab nodes (most
//! without the lab kit) — transport and auth (tests/lab.rs), faults (tests/faults.rs), execution
//! environments and primitives (tests/ee.rs), the Indexed Job played locally
//! (tests/sites_job.rs). One binary, not one per file: each links russh, tokio and the driver.
//!
//! The suites run one after another (tests/support/harness.rs), so at most one suite's labs are
//! up at once, as when each was its own binary. One suite: `cargo test --test lab -- faults::`.

// A test binary reports to the test log and exits as a harness must; the print and exit lints
// (Cargo.toml) guard the driver's own output path (src/console.rs).
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../ee.rs"]
mod ee;
#[path = "../faults.rs"]
mod faults;
#[path = "../lab.rs"]
mod lab;
#[path = "../sites_job.rs"]
mod sites_job;

fn main() {
    support::harness::run(vec![lab::suite(), faults::suite(), ee::suite(), sites_job::suite()])
}
