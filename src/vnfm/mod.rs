//! The VNFM hook protocol (docs/hook-protocol.md): the documents a VNFM's shim exchanges with
//! `mgmt-driver hook`, which of our operations each hook runs, and the `vimConnectionInfo`
//! entry each VNFM needs. Pure: `document.rs` (the request, its options), `tenant_options.rs`
//! (what the request itself may set), `dispatch.rs` (hook name → action), `vim_entry.rs` (the
//! entry per VNFM). The steps: `prepare.rs` (the document checked, the options settled),
//! `run.rs` (the action, through the cluster and CNF operations), `respond.rs` (what goes
//! back). The command that reads and prints is `cli/vnfm_hook.rs`.

pub mod dispatch;
pub mod document;
pub mod prepare;
pub mod respond;
pub mod run;
pub mod tenant_options;
pub mod vim_entry;
