//! Helm CNF lifecycle over SSH: Tacker's HelmClient and OSM's Helm connector, done right. Pure
//! parts (helm_info parsing, params, Helm 3/4 command lines, manifests) are unit-tested; the
//! session picks a master (with failover) and runs Helm there.

pub mod cli;
pub mod helm_cmd;
pub mod helm_info;
pub mod manifest;
pub mod ops;
pub mod params;
pub mod session;
