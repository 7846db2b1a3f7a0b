//! The cluster's instance document: what every node has done, the facts learned from the main
//! master, and the VIM record. Written to the state store after every finished node
//! (`state_store.rs`), so a re-run after a failure completes the missing nodes only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::target::Role;

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
    /// The digest of what the prepare steps set on the node (`/etc/hosts` lines, registries,
    /// their files and login: `prepare_nodes.rs`) when they last ran. A re-run whose steps
    /// have the same digest leaves an installed node alone: the store is authenticated, so
    /// this is what the driver itself did. Secret-named, so the store seals it (it covers the
    /// registry login).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared_secret_digest: Option<String>,
}

/// One node a SOL002 heal_start took out, under the VNFC id the request named: what heal_end
/// finds it by after the VNFM replaced its VM (`healing.rs`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Healing {
    /// The node's name at heal_start (the old server id, for nodes from a VnfInstance).
    pub node: String,
    pub ssh_addr: String,
    pub port: u16,
    /// The cluster-network address: the one the replacement VM keeps.
    pub nic_ip: String,
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

/// `Debug` shows the document with its secrets (request passwords, proxy URLs, bearer token)
/// masked.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct InstanceState {
    pub version: u32,
    pub vnf_instance_id: String,
    /// The validated `k8s_cluster_installation_param` as received (later hooks reuse it).
    #[serde(default)]
    pub params: Value,
    /// The inventory the instantiate request itself named (`additionalParams.mgmt_driver.inventory`,
    /// a path in the VNF package). A later hook whose request names none reads the same file, as
    /// the request's still (package mode: nodes only): a Tacker v1 heal or scale body carries no
    /// params, and the nodes must not fall back to the instance's addresses, which a VNF that
    /// needed an inventory does not have. Only this option is recorded: the operator's options
    /// (flags, the document's `options`) come with every hook and a change of them must take
    /// effect; the request's timeouts are that operation's waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_inventory: Option<String>,
    /// Inventory host name → what it has done, in cluster order.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeState>,
    #[serde(default)]
    pub facts: Option<ClusterFacts>,
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// The password the first master really logs in with (the inventory's, else the request's),
    /// for CNF operations whose helm_info refers to this record. Sealed at rest like the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_login_password: Option<String>,
    /// What binds the cluster's credential reference (`helm_info.masternode_credential_ref`)
    /// to it: 32 random bytes (hex), minted when the record is first written and kept across
    /// re-records, so a CNF request can use the cluster's credential only by presenting it
    /// (`cluster/credential_ref.rs`). Secret-named, so the store seals it. None in records
    /// written before tokens (the next instantiate_end or heal_end mints one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_ref_token: Option<String>,
    /// The VIM registration record (with the bearer token) and the vimConnectionInfo entry.
    #[serde(default)]
    pub vim: Option<Value>,
    #[serde(default)]
    pub vim_connection_info: Option<Value>,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// What the last SOL002 heal_start learned, by the request's VNFC id: heal_end's request
    /// repeats that id after the VNFM gave the node a new one (`healing.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub healing: BTreeMap<String, Healing>,
}

crate::secret::impl_debug_masked!(InstanceState);

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

    /// `name` was just installed at its address: a record of another node at the same cluster
    /// address is the VM the VNFM replaced (a heal gives the new server a new id, the same
    /// port and address), so it goes, and the main master follows the rename. One node per
    /// address is what every later hook's topology requires. Returns the records dropped.
    pub fn supersede_same_address(&mut self, name: &str) -> Vec<String> {
        let Some(ip) = self.nodes.get(name).map(|n| n.nic_ip.clone()).filter(|ip| !ip.is_empty()) else {
            return vec![];
        };
        let old: Vec<String> =
            self.nodes.iter().filter(|(k, n)| k.as_str() != name && n.nic_ip == ip).map(|(k, _)| k.clone()).collect();
        for o in &old {
            self.nodes.remove(o);
            if let Some(f) = self.facts.as_mut().filter(|f| &f.main_master == o) {
                f.main_master = name.to_string();
            }
        }
        old
    }

    /// Migrate a document written before [`Self::supersede_same_address`]: there, a heal_end
    /// left the replaced VM's record beside the new one at the same cluster address (heal_start
    /// had marked it not installed), and every later hook refused the pair. Where the records
    /// of one address are exactly one installed node and others not installed, the others are
    /// that superseded VM: they go (the main master follows). Two installed records, or none
    /// installed, cannot be told apart: refused, naming them. Returns the records dropped.
    pub fn migrate_same_address(&mut self) -> std::result::Result<Vec<String>, String> {
        let mut by_ip: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, n) in &self.nodes {
            if !n.nic_ip.is_empty() {
                by_ip.entry(n.nic_ip.as_str()).or_default().push(name.as_str());
            }
        }
        let mut keep = Vec::new();
        for (ip, names) in by_ip.into_iter().filter(|(_, v)| v.len() > 1) {
            let installed: Vec<&str> = names.iter().copied().filter(|n| self.installed(n)).collect();
            match installed.as_slice() {
                [one] => keep.push(one.to_string()),
                _ => {
                    return Err(format!(
                        "nodes {} record the same cluster address {ip}, and {} installed: which one is the \
                         cluster's cannot be told; remove the stale record (or terminate and instantiate again)",
                        names.join(", "),
                        if installed.is_empty() { "none is".to_string() } else { format!("{} are", installed.len()) }
                    ))
                }
            }
        }
        Ok(keep.iter().flat_map(|k| self.supersede_same_address(k)).collect())
    }

    /// Forget the cluster but keep its params: the VIM record, the facts and every node (a
    /// whole-VNF heal rebuilds them all).
    pub fn forget_cluster(&mut self) {
        self.vim = None;
        self.vim_connection_info = None;
        self.bearer_token = None;
        self.facts = None;
        self.nodes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_installed_at_a_recorded_address_replaces_that_record() {
        let mut st = InstanceState::new("i");
        let rec = |ip: &str, installed| NodeState { nic_ip: ip.into(), installed, ..Default::default() };
        st.nodes.insert("srv-old".into(), rec("10.0.0.2", false));
        st.nodes.insert("srv-m".into(), rec("10.0.0.1", true));
        st.nodes.insert("srv-new".into(), rec("10.0.0.2", true));
        st.facts = Some(ClusterFacts { main_master: "srv-old".into(), ..Default::default() });
        assert_eq!(st.supersede_same_address("srv-new"), ["srv-old"]);
        assert_eq!(st.nodes.keys().collect::<Vec<_>>(), ["srv-m", "srv-new"]);
        assert_eq!(st.facts.as_ref().unwrap().main_master, "srv-new", "the main master follows");
        assert!(st.supersede_same_address("srv-m").is_empty());
        assert!(st.supersede_same_address("unrecorded").is_empty());
    }

    /// A document written before heal_end superseded records: the healed VM's old record (not
    /// installed, heal_start took it out) beside the new one at the same address.
    #[test]
    fn a_superseded_record_of_an_earlier_heal_is_migrated_and_an_ambiguous_pair_refused() {
        let rec = |ip: &str, installed| NodeState { nic_ip: ip.into(), installed, ..Default::default() };
        let mut st = InstanceState::new("i");
        st.nodes.insert("srv-m".into(), rec("10.0.0.1", false));
        st.nodes.insert("srv-mb".into(), rec("10.0.0.1", true));
        st.nodes.insert("srv-w".into(), rec("10.0.0.2", true));
        st.facts = Some(ClusterFacts { main_master: "srv-m".into(), ..Default::default() });
        assert_eq!(st.migrate_same_address().unwrap(), ["srv-m"]);
        assert_eq!(st.nodes.keys().collect::<Vec<_>>(), ["srv-mb", "srv-w"]);
        assert_eq!(st.facts.as_ref().unwrap().main_master, "srv-mb");
        assert!(st.migrate_same_address().unwrap().is_empty(), "a migrated document stays as it is");
        for (a, b, says) in [(true, true, "2 are installed"), (false, false, "none is installed")] {
            let mut st = InstanceState::new("i");
            st.nodes.insert("srv-x".into(), rec("10.0.0.3", a));
            st.nodes.insert("srv-y".into(), rec("10.0.0.3", b));
            let e = st.migrate_same_address().unwrap_err();
            assert!(
                e.contains("nodes srv-x, srv-y record the same cluster address 10.0.0.3") && e.contains(says),
                "{e}"
            );
            assert_eq!(st.nodes.len(), 2, "nothing dropped when refused");
        }
    }
}
