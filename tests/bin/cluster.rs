//! The `cluster` test binary: the cluster hooks end to end on lab-kit clusters — lifecycle
//! (tests/cluster.rs), rebuilt VMs' host keys (tests/keys.rs), no secret at rest
//! (tests/secrets.rs), private registries and labels (tests/registry.rs), the storage server
//! (tests/storage.rs), per-site runs (tests/sites.rs). One binary, not one per file: each links
//! russh, tokio and the driver.
//!
//! The suites run one after another (tests/support/harness.rs), so at most one suite's labs are
//! up at once, as when each was its own binary. One suite: `cargo test --test cluster -- keys::`.

// A test binary reports to the test log and exits as a harness must; the print and exit lints
// (Cargo.toml) guard the driver's own output path (src/console.rs).
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../cluster.rs"]
mod cluster;
#[path = "../keys.rs"]
mod keys;
#[path = "../registry.rs"]
mod registry;
#[path = "../secrets.rs"]
mod secrets;
#[path = "../sites.rs"]
mod sites;
#[path = "../storage.rs"]
mod storage;

fn main() {
    support::harness::run(vec![
        cluster::suite(),
        keys::suite(),
        secrets::suite(),
        registry::suite(),
        storage::suite(),
        sites::suite(),
    ])
}
