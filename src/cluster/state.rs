//! The cluster's instance document in the state store: what every node has done, the facts
//! learned from the main master, and the VIM record. Written after every finished node, so a
//! re-run after a failure completes the missing nodes only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lifecycle::state::{now_rfc3339, Store};
use crate::lifecycle::target::Role;

pub const STATE_VERSION: u32 = 1;

/// The cluster document's kind in the store: `<id>.json`.
pub const KIND: &str = "";

/// What one node has done.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeState {
    pub role: Option<Role>,
    pub ssh_addr: String,
    pub nic_ip: String,
    /// The Kubernetes node name (the node's hostname after the install script ran).
    pub k8s_name: String,
    pub installed: bool,
    pub helm_installed: bool,
}

/// Cluster facts learned from the main master.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterFacts {
    pub server: String,
    pub ca_pem: String,
    pub ca_hash: String,
    pub cluster_ip: String,
    pub main_master: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InstanceState {
    pub version: u32,
    pub vnf_instance_id: String,
    /// The validated `k8s_cluster_installation_param` as received (later hooks reuse it).
    #[serde(default)]
    pub params: Value,
    /// Inventory host name → what it has done, in cluster order.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeState>,
    #[serde(default)]
    pub facts: Option<ClusterFacts>,
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// The VIM registration record (with the bearer token) and the vimConnectionInfo entry.
    #[serde(default)]
    pub vim: Option<Value>,
    #[serde(default)]
    pub vim_connection_info: Option<Value>,
    #[serde(default)]
    pub updated_at: Option<String>,
}

impl InstanceState {
    pub fn new(id: &str) -> Self {
        InstanceState { version: STATE_VERSION, vnf_instance_id: id.to_string(), ..Default::default() }
    }

    pub fn node(&mut self, name: &str) -> &mut NodeState {
        self.nodes.entry(name.to_string()).or_default()
    }

    pub fn installed(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.installed)
    }

    /// The recorded document of instance `id`, if any (a newer or older format is refused).
    pub fn load(store: &Store, id: &str) -> Result<Option<InstanceState>> {
        let s: Option<InstanceState> = store.load_doc(id, KIND)?;
        match s {
            Some(s) if s.version != STATE_VERSION => Err(Error::input(
                store.doc_path(id, KIND).display().to_string(),
                "version",
                format!("state version {} is not {STATE_VERSION}", s.version),
            )),
            other => Ok(other),
        }
    }

    pub fn save(&mut self, store: &Store) -> Result<()> {
        self.updated_at = Some(now_rfc3339());
        store.save_doc(&self.vnf_instance_id.clone(), KIND, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        assert!(InstanceState::load(&st, "abc").unwrap().is_none());
        let mut s = InstanceState::new("abc");
        s.node("m1").installed = true;
        s.save(&st).unwrap();
        let back = InstanceState::load(&st, "abc").unwrap().unwrap();
        assert!(back.installed("m1") && !back.installed("m2") && back.updated_at.is_some());
        std::fs::write(st.doc_path("abc", KIND), r#"{"version": 9, "vnf_instance_id": "abc"}"#).unwrap();
        assert!(InstanceState::load(&st, "abc").unwrap_err().to_string().contains("state version 9"));
    }
}
