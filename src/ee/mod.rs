//! Execution environments (OSM N2VC's term): machines registered once (`ee register`), reached
//! afterwards with the driver's own key, and usable as targets of every fan-out command and of
//! primitives (`--ee NAME`). Pure parts: `name.rs` (an EE's name), `namespace.rs` (OSM's
//! `[nsi].ns.vnf.vdu[-count]`), `authorized_keys.rs` (the node-side commands on
//! `~/.ssh/authorized_keys`). On the store: `driver_key.rs` (the key pair), `record.rs` (the
//! registry and how a record becomes a host). The commands, each checking its inputs before
//! anything connects: `key.rs` (show, rotate), `register.rs`, `list.rs` (list, show),
//! `delete.rs`; `rotate.rs` holds a rotation's steps.

pub mod authorized_keys;
pub mod delete;
pub mod driver_key;
pub mod key;
pub mod list;
pub mod name;
pub mod namespace;
pub mod record;
pub mod register;
pub mod rotate;
