//! The cluster's `vimConnectionInfo` entry in the shape each VNFM needs, built from what
//! `instantiate_end` recorded, and put into the instance's own `vimConnectionInfo` (a map in
//! Tacker v2, a list in v1) in place of an older entry for the same VIM.
//!
//! Tacker v2 deploys a CNF on a cluster only with `vimType` `ETSINFV.KUBERNETES.V_1` or
//! `ETSINFV.HELM.V_3`, `interfaceInfo.endpoint`, and for Helm also `interfaceInfo.ssl_ca_cert`
//! and `accessInfo.bearer_token` (its `instantiate_post_grant` checks them). v1 and generic
//! callers get the v1 entry (`accessInfo.authUrl`, no token): they register the VIM with the
//! record in the result or use a kubeconfig.

use serde_json::{json, Map, Value};

use crate::request::VimConnection;
use crate::vnfm::document::Vnfm;

/// What `instantiate_end` recorded that the entry is made of: fields of the cluster's state
/// document (`vnfm/respond.rs` takes them from it), so this file needs no store.
#[derive(Clone, Copy, Debug, Default)]
pub struct Recorded<'a> {
    /// The v1 entry as recorded.
    pub vim_connection_info: Option<&'a Value>,
    /// The VIM registration record (`auth_url`, `auth_cred`).
    pub vim: Option<&'a Value>,
    pub bearer_token: Option<&'a str>,
    /// The cluster's CA, from the facts read at install.
    pub ca_pem: Option<&'a str>,
}

/// The key of the entry in a v2 map (the prefix is not doubled: see `VimConnections::key_for`).
pub fn key(vim_name: &str) -> String {
    crate::request::VimConnections::key_for(vim_name)
}

/// The entry for `vnfm`, or None when nothing is recorded (not instantiated, or terminated).
pub fn entry(vnfm: Vnfm, st: &Recorded) -> Option<Value> {
    let v1 = st.vim_connection_info.cloned()?;
    if vnfm != Vnfm::TackerV2 {
        return Some(v1);
    }
    let vim = st.vim?;
    let extra = v1.get("extra").cloned().unwrap_or_else(|| json!({}));
    let helm = extra.get("helm_info").is_some();
    // The VIM record drops the CA with a floating IP (the certificate does not name it);
    // Tacker v2 still requires one for Helm, and it is the right CA for the cluster.
    let ca = vim.pointer("/auth_cred/ssl_ca_cert").and_then(Value::as_str).or(st.ca_pem).unwrap_or_default();
    Some(json!({
        "vimId": v1.get("vimId").cloned().unwrap_or(Value::Null),
        "vimType": if helm { "ETSINFV.HELM.V_3" } else { "ETSINFV.KUBERNETES.V_1" },
        "interfaceInfo": {"endpoint": vim.get("auth_url").cloned().unwrap_or(Value::Null), "ssl_ca_cert": ca},
        "accessInfo": {"bearer_token": st.bearer_token.unwrap_or_default()},
        "extra": extra,
    }))
}

/// Whether an existing entry is this cluster's: the same key, or a Kubernetes entry naming
/// the same VIM.
fn is_ours(k: Option<&str>, e: &Value, vim_name: &str) -> bool {
    let named = || {
        let c: Option<VimConnection> = serde_json::from_value(e.clone()).ok();
        c.is_some_and(|c| c.is_kubernetes() && c.vim_name() == Some(vim_name))
    };
    k == Some(key(vim_name).as_str()) || named()
}

/// `conns` (the instance's vimConnectionInfo: map, list or null) without our old entry and,
/// when `entry` is Some, with the new one last (Tacker uses the first entry for the VNF's own
/// VMs, so that one stays first).
pub fn replace(conns: &Value, vnfm: Vnfm, vim_name: &str, entry: Option<Value>) -> Value {
    match conns {
        Value::Array(list) => {
            let mut out: Vec<Value> = list.iter().filter(|e| !is_ours(None, e, vim_name)).cloned().collect();
            out.extend(entry);
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(k, e)| !is_ours(Some(k), e, vim_name))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect();
            if let Some(e) = entry {
                out.insert(key(vim_name), e);
            }
            Value::Object(out)
        }
        _ if vnfm == Vnfm::TackerV2 => replace(&json!({}), vnfm, vim_name, entry),
        _ => replace(&json!([]), vnfm, vim_name, entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::state::{ClusterFacts, InstanceState};

    /// The entry of a recorded state, as `vnfm/respond.rs` builds it.
    fn entry(vnfm: Vnfm, st: &InstanceState) -> Option<Value> {
        super::entry(vnfm, &crate::vnfm::respond::recorded(st))
    }

    fn state(helm: bool, ca_in_record: bool) -> InstanceState {
        let mut st = InstanceState::new("i1");
        let mut extra = json!({"vim_name": "kvim"});
        if helm {
            extra["helm_info"] = json!({"masternode_ip": ["10.0.0.1"], "masternode_username": "ubuntu"});
        }
        st.vim_connection_info = Some(json!({"id": "c", "vimId": "v-1", "vimType": "kubernetes",
            "accessInfo": {"authUrl": "https://192.0.2.7:6443"}, "extra": extra}));
        let mut vim = json!({"auth_url": "https://192.0.2.7:6443", "auth_cred": {"bearer_token": "tok"}});
        if ca_in_record {
            vim["auth_cred"]["ssl_ca_cert"] = json!("PEM-REC");
        }
        st.vim = Some(vim);
        st.bearer_token = Some("tok".into());
        st.facts = Some(ClusterFacts { ca_pem: "PEM-FACTS".into(), ..Default::default() });
        st
    }

    #[test]
    fn tacker_v2_gets_what_its_helm_check_requires() {
        let e = entry(Vnfm::TackerV2, &state(true, true)).unwrap();
        assert_eq!(e["vimType"], "ETSINFV.HELM.V_3");
        assert_eq!(e["vimId"], "v-1");
        assert_eq!(e["interfaceInfo"]["endpoint"], "https://192.0.2.7:6443");
        assert_eq!(e["interfaceInfo"]["ssl_ca_cert"], "PEM-REC");
        assert_eq!(e["accessInfo"]["bearer_token"], "tok");
        assert_eq!(e["extra"]["helm_info"]["masternode_username"], "ubuntu");
        let e = entry(Vnfm::TackerV2, &state(false, false)).unwrap();
        assert_eq!(e["vimType"], "ETSINFV.KUBERNETES.V_1");
        assert_eq!(e["interfaceInfo"]["ssl_ca_cert"], "PEM-FACTS", "with a FIP the record has no CA: the facts' one");
    }

    #[test]
    fn v1_and_generic_get_the_v1_entry_without_the_token() {
        let e = entry(Vnfm::TackerV1, &state(true, true)).unwrap();
        assert_eq!(e["accessInfo"]["authUrl"], "https://192.0.2.7:6443");
        assert!(!e.to_string().contains("tok\""), "{e}");
        assert_eq!(entry(Vnfm::TackerV2, &InstanceState::new("x")), None);
    }

    #[test]
    fn our_old_entry_is_replaced_and_the_vnfs_own_vim_stays_first() {
        let conns = json!({"vim1": {"vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3"},
                           "old": {"vimType": "ETSINFV.HELM.V_3", "extra": {"vim_name": "kvim"}},
                           "other": {"vimType": "ETSINFV.HELM.V_3", "extra": {"vim_name": "another"}}});
        let out = replace(&conns, Vnfm::TackerV2, "kvim", Some(json!({"vimType": "ETSINFV.HELM.V_3"})));
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["vim1", "other", "kubernetes_kvim"]);
        let out = replace(&out, Vnfm::TackerV2, "kvim", None);
        assert_eq!(out.as_object().unwrap().keys().collect::<Vec<_>>(), ["vim1", "other"]);
        let list = json!([{"vimType": "openstack"}, {"vimType": "kubernetes", "extra": {"vim_name": "kvim"}}]);
        let out = replace(&list, Vnfm::TackerV1, "kvim", Some(json!({"vimType": "kubernetes", "id": "new"})));
        assert_eq!(out[0]["vimType"], "openstack");
        assert_eq!(out[1]["id"], "new");
        assert_eq!(out.as_array().unwrap().len(), 2);
        assert!(replace(&Value::Null, Vnfm::TackerV2, "kvim", None).is_object());
        assert!(replace(&Value::Null, Vnfm::TackerV1, "kvim", None).is_array());
    }

    #[test]
    fn the_default_vim_name_keeps_one_prefix() {
        assert_eq!(key("kvim"), "kubernetes_kvim");
        assert_eq!(key("kubernetes_vim_3f9c"), "kubernetes_vim_3f9c");
        let conns = json!({"vim1": {"vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3"},
                           "kubernetes_kubernetes_vim_3f9c": {"vimType": "ETSINFV.HELM.V_3",
                                                              "extra": {"vim_name": "kubernetes_vim_3f9c"}}});
        let out = replace(&conns, Vnfm::TackerV2, "kubernetes_vim_3f9c", Some(json!({"vimType": "ETSINFV.HELM.V_3"})));
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["vim1", "kubernetes_vim_3f9c"],
            "an entry an older version keyed with the doubled prefix is replaced"
        );
    }
}
