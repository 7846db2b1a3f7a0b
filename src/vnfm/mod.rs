//! The VNFM hook protocol (docs/hook-protocol.md): the documents a VNFM's shim exchanges with
//! `mgmt-driver hook`, which of our operations each hook runs, and the `vimConnectionInfo`
//! entry each VNFM needs. Pure: the command that runs it is `cli/vnfm_hook.rs`.

pub mod dispatch;
pub mod document;
pub mod vim_entry;
