//! The hostile-input corpus: every case runs the real binary with `--dry-run -o json` on inputs
//! an attacker, a typo or a broken VNFM could send, and checks what an operator needs:
//! - **rejected**: exit 2 (bad input), the message names the field, nothing was planned, nothing
//!   connected, nothing ran, and it took less than [`case::TIME_LIMIT`];
//! - **accepted safely**: exit 0, the plan shows the value in its harmless form (quoted, masked)
//!   and never in the harmful one.
//!
//! Tables live in one file per input family (`inventory.rs`, `cluster.rs`, `cnf.rs`,
//! `fanout.rs`); `case.rs` is the runner. `cargo test --test hostile -- --list` lists them all;
//! the last line of a run counts rejected and accepted cases.

#[path = "../support/mod.rs"]
mod support;

mod case;
mod cluster;
mod cnf;
mod ee;
mod fanout;
mod hook;
mod inventory;
mod registry;
mod storage;
mod workload;

fn main() {
    let mut cases = Vec::new();
    cases.extend(fanout::cases());
    cases.extend(inventory::cases());
    cases.extend(hook::cases());
    cases.extend(cluster::cases());
    cases.extend(cnf::cases());
    cases.extend(registry::cases());
    cases.extend(storage::cases());
    cases.extend(ee::cases());
    cases.extend(workload::cases());
    case::run(cases);
}
