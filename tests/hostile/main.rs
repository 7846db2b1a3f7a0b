//! The hostile-input corpus: every case runs the real binary with `--dry-run -o json` on inputs
//! an attacker, a typo or a broken VNFM could send, and checks what an operator needs:
//! - **rejected**: exit 2 (bad input), the message names the field, nothing was planned, nothing
//!   connected, nothing ran, and it took less than [`case::TIME_LIMIT`];
//! - **accepted safely**: exit 0, the plan shows the value in its harmless form (quoted, masked)
//!   and never in the harmful one.
//!
//! Tables live in one file per input family (`inventory.rs`, `cluster.rs`, `cnf.rs`,
//! `fanout.rs`, ...); what a VNFM's API user may not do has its own tables (`tenant_*.rs`:
//! secret references, options, other tenants' clusters, a state directory changed behind the
//! store's back). `case.rs` is the runner. The corpus is the suite `hostile` of the `offline` test
//! binary (tests/bin/offline.rs, which also gives the tables their `crate::case`):
//! `cargo test --test offline -- hostile:: --list` lists them all; the last line of its run
//! counts rejected and accepted cases.

use crate::support::harness::Suite;

pub(crate) mod case;
mod cluster;
mod cnf;
mod ee;
pub(crate) mod fanout;
mod hook;
mod inventory;
mod registry;
mod storage;
mod tenant_cluster;
mod tenant_options;
mod tenant_secrets;
mod tenant_state;
mod tenant_vim;
mod workload;

/// The corpus as one suite: one trial per case.
pub fn suite() -> Suite {
    let mut cases = Vec::new();
    cases.extend(fanout::cases());
    cases.extend(inventory::cases());
    cases.extend(hook::cases());
    cases.extend(tenant_options::cases());
    cases.extend(cluster::cases());
    cases.extend(cnf::cases());
    cases.extend(registry::cases());
    cases.extend(storage::cases());
    cases.extend(ee::cases());
    cases.extend(workload::cases());
    cases.extend(tenant_cluster::cases());
    cases.extend(tenant_secrets::cases());
    cases.extend(tenant_state::cases());
    cases.extend(tenant_vim::cases());
    case::suite(file!(), cases)
}
