//! The cluster's instance document in the state store: what every node has done, the facts
//! learned from the main master, and the VIM record. Written after every finished node, so a
//! re-run after a failure completes the missing nodes only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lifecycle::state::{now_rfc3339, Store};
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
    /// The VIM registration record (with the bearer token) and the vimConnectionInfo entry.
    #[serde(default)]
    pub vim: Option<Value>,
    #[serde(default)]
    pub vim_connection_info: Option<Value>,
    #[serde(default)]
    pub updated_at: Option<String>,
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

    /// The request's secrets, each distinct so a hit names which one leaked.
    const SECRETS: [&str; 4] = ["M4ster-Pw", "W0rker-Pw", "Pr0xy-Pw", "bearer-token"];

    /// Every file in the state directory, recursively, as raw bytes.
    fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
        out
    }

    #[tokio::test]
    async fn no_secret_of_the_request_is_at_rest_after_instantiate_and_heal_still_reads_them() {
        use crate::cluster::prepare::Op;
        use crate::cluster::testkit::Fixture;
        let f = Fixture::new(1, 2);
        let mut body = Fixture::instantiate_body();
        let p = &mut body["additionalParams"]["k8s_cluster_installation_param"];
        p["master_node"]["password"] = SECRETS[0].into();
        p["worker_node"]["password"] = SECRETS[1].into();
        let proxy = format!("http://user1:{}@proxy.example:3128", SECRETS[2]);
        p["proxy"] = serde_json::json!({"http_proxy": proxy, "https_proxy": proxy, "no_proxy": "10.0.0.1",
                                        "k8s_node_cidr": "192.0.2.0/24"});
        let o = f.run(Op::InstantiateEnd, body, &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let all = files(&f.path("state"));
        assert!(
            all.iter().any(|(p, _)| p.ends_with("vnf1.json")),
            "{:?}",
            all.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        let mut hits = Vec::new();
        for (path, bytes) in &all {
            for s in SECRETS {
                if bytes.windows(s.len()).any(|w| w == s.as_bytes()) {
                    hits.push(format!("{s} in {path}"));
                }
            }
        }
        assert!(hits.is_empty(), "secrets at rest: {hits:?}");
        // The hooks still read them back: the recorded request and the bearer token are whole.
        let st = f.state();
        let params = &st["params"];
        assert_eq!(params["master_node"]["password"], SECRETS[0]);
        assert_eq!(params["proxy"]["https_proxy"], proxy.as_str());
        assert_eq!(st["bearer_token"], SECRETS[3]);
        // A later hook (SOL002 heal of a worker) runs on the recorded, sealed state.
        let before = f.execs().len();
        let o = f.run(Op::HealEnd, serde_json::json!({"vnfcInstanceId": ["w2"]}), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let execs = &f.execs()[before..];
        assert!(execs.iter().any(|e| e.starts_with("w2: ") && e.contains("install_k8s_cluster.sh")), "{execs:#?}");
    }
}
