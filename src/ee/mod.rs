//! Execution environments (OSM N2VC's term): machines registered once (`ee register`), reached
//! afterwards with the driver's own key, and usable as targets of every fan-out command and of
//! primitives (`--ee NAME`). `driver_key.rs` is the key pair, `record.rs` the registry and how a
//! record becomes a host, `namespace.rs` OSM's `[nsi].ns.vnf.vdu[-count]`, `authorized_keys.rs`
//! the node-side commands on `~/.ssh/authorized_keys`, `register.rs` and `rotate.rs` the steps.

pub mod authorized_keys;
pub mod driver_key;
pub mod namespace;
pub mod record;
pub mod register;
pub mod rotate;
