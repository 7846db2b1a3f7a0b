//! How to reach the cluster afterwards: (a) the VIM registration record a VNFM stores
//! (`{name, type: kubernetes, auth_url, auth_cred, extra.helm_info}`) and (b) the
//! `vimConnectionInfo` entry it appends to the VNF instance. `helm_info` is a real JSON object
//! (Tacker wrote a Python repr string); the node password goes in only with the explicit
//! Tacker-compatibility flag, otherwise a reference to the state store stands in for it: a
//! bearer secret bound to the cluster by its token (`credential_ref.rs`), in the record the
//! store keeps and the VNFM's entry, masked in every record shown.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::cluster::credential_ref;
use crate::cluster::params::ClusterParams;
use crate::cluster::state::ClusterFacts;
use crate::cluster::topology::Topology;
use crate::request::VimConnection;
use crate::secret::{Secret, MASK};

/// A stable UUID-shaped id from `seed`, so a re-run produces the same record.
pub fn stable_uuid(seed: &str) -> String {
    let h = hex::encode(Sha256::digest(seed.as_bytes()));
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// The API server URL for the VIM. With a floating IP for the cluster (or single master), the
/// host part of the script's `server:` is replaced by it, as Tacker does.
pub fn auth_url(server: &str, fip: Option<&str>) -> String {
    let Some(fip) = fip else { return server.to_string() };
    let Some(rest) = server.strip_prefix("https://") else { return server.to_string() };
    let port = rest.rsplit_once(':').map(|(_, p)| p.trim_end_matches('/')).unwrap_or("6443");
    let host = if fip.contains(':') { format!("[{fip}]") } else { fip.to_string() };
    format!("https://{host}:{port}")
}

/// What stands for the masters' password in `helm_info`.
pub enum HelmPassword<'a> {
    /// Without `--tacker-compat`: a reference to the state store, which keeps the login, bound
    /// to the cluster by this token (hex).
    Reference(&'a str),
    /// `--tacker-compat`: the password the first master logs in with.
    Reveal(&'a str),
    /// `--tacker-compat`, but the first master logs in with a key: there is no password to give.
    None,
}

pub struct HelmInfo<'a> {
    pub master_ips: Vec<String>,
    pub username: &'a str,
    pub password: HelmPassword<'a>,
    pub vnf_instance_id: &'a str,
}

impl HelmInfo<'_> {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "masternode_ip": self.master_ips,
            "masternode_username": self.username,
        });
        match self.password {
            HelmPassword::Reveal(p) => v["masternode_password"] = json!(p),
            HelmPassword::Reference(token) => {
                v[credential_ref::FIELD] = json!(credential_ref::format(self.vnf_instance_id, token))
            }
            HelmPassword::None => {}
        }
        v
    }
}

/// How one master logs in (its resolved inventory host), for [`helm_login_warnings`].
pub struct Login<'a> {
    pub node: &'a str,
    pub user: &'a str,
    pub password: Option<&'a str>,
}

/// `helm_info` holds one username and password, the first master's, and Tacker v1's Helm client
/// logs in with them to every master it lists. A master that logs in with a key (the password is
/// then left out) or with another login cannot be reached that way: each gets a warning naming
/// it. The messages never hold a password.
pub fn helm_login_warnings(masters: &[Login]) -> Vec<String> {
    let Some(first) = masters.first() else { return Vec::new() };
    let mut out = Vec::new();
    if first.password.is_none() {
        out.push(format!(
            "--tacker-compat: master {} logs in with a key, so helm_info has no masternode_password; \
             Tacker v1's Helm client logs in with a password and cannot use this VIM's helm_info \
             (give the masters a password login, or let the VNFM run Helm with the kubeconfig)",
            first.node
        ));
    }
    for m in &masters[1..] {
        if m.user != first.user || m.password != first.password {
            out.push(format!(
                "--tacker-compat: master {} does not log in as {} with the password helm_info holds \
                 (that is {}'s login); Tacker v1's Helm client cannot log in to it",
                m.node, first.user, first.node
            ));
        }
    }
    out
}

/// [`helm_login_warnings`] for the masters of `topo` as they log in, when the record carries
/// `helm_info` for Tacker v1 (`--tacker-compat` and a Helm script); otherwise there is nothing
/// to warn about.
pub fn compat_warnings(params: &ClusterParams, topo: &Topology, tacker_compat: bool) -> Vec<String> {
    if !tacker_compat || params.helm_script_path.is_none() {
        return Vec::new();
    }
    let logins: Vec<Login> = topo
        .masters
        .iter()
        .map(|m| Login {
            node: m.name(),
            user: &m.host.user,
            password: m.host.auth.password.as_ref().map(|p| p.expose()),
        })
        .collect();
    helm_login_warnings(&logins)
}

pub struct Record<'a> {
    pub vim_name: &'a str,
    pub auth_url: String,
    pub bearer_token: &'a str,
    /// Dropped with a floating IP: the API server certificate does not name it (Tacker does the same).
    pub ca_pem: Option<&'a str>,
    pub helm_info: Option<Value>,
    pub vnf_instance_id: &'a str,
}

impl<'a> Record<'a> {
    /// The record of the cluster `topo` whose main master gave `facts`: the API server's URL
    /// (the floating IP's when there is one, and then no CA: its certificate does not name that
    /// address), the bearer token, and `helm_info` when the params install Helm, which holds the
    /// first master's own login (its password only with `tacker_compat`, else the credential
    /// reference bound by `ref_token`).
    pub fn of_cluster(
        params: &'a ClusterParams,
        topo: &'a Topology,
        facts: &'a ClusterFacts,
        bearer: &'a Secret,
        vnf_instance_id: &'a str,
        tacker_compat: bool,
        ref_token: &'a str,
    ) -> Record<'a> {
        let helm = params.helm_script_path.is_some().then(|| {
            let masters: Vec<String> = topo.masters.iter().map(|m| m.host.addr.clone()).collect();
            // The login the first master really uses (the inventory's, else the request's).
            let login = &topo.masters[0].host;
            HelmInfo {
                master_ips: masters,
                username: &login.user,
                password: match (tacker_compat, &login.auth.password) {
                    (false, _) => HelmPassword::Reference(ref_token),
                    (true, Some(p)) => HelmPassword::Reveal(p.expose()),
                    (true, None) => HelmPassword::None,
                },
                vnf_instance_id,
            }
            .to_json()
        });
        Record {
            vim_name: &params.vim_name,
            auth_url: auth_url(&facts.server, topo.cluster_fip.as_deref()),
            bearer_token: bearer.expose(),
            ca_pem: if topo.cluster_fip.is_some() { None } else { Some(&facts.ca_pem) },
            helm_info: helm,
            vnf_instance_id,
        }
    }
}

impl Record<'_> {
    /// The VIM registration record. `reveal` puts the bearer token and the credential reference
    /// in; otherwise they are masked (the state store keeps the real ones, sealed).
    pub fn vim(&self, reveal: bool) -> Value {
        let mut v = json!({
            "id": stable_uuid(&format!("vim:{}", self.vim_name)),
            "name": self.vim_name,
            "type": "kubernetes",
            "auth_url": self.auth_url,
            "vim_project": {"name": ""},
            "auth_cred": {
                "bearer_token": if reveal { self.bearer_token } else { MASK },
            },
        });
        if let Some(ca) = self.ca_pem {
            v["auth_cred"]["ssl_ca_cert"] = json!(ca);
        }
        if let Some(h) = &self.helm_info {
            v["extra"] = json!({"helm_info": h});
        }
        if reveal {
            v
        } else {
            masked_ref(&v)
        }
    }

    pub fn vim_connection(&self) -> VimConnection {
        let mut extra = json!({"vim_name": self.vim_name});
        if let Some(h) = &self.helm_info {
            extra["helm_info"] = h.clone();
        }
        VimConnection {
            id: Some(stable_uuid(&format!("vimconn:{}:{}", self.vnf_instance_id, self.vim_name))),
            vim_id: Some(stable_uuid(&format!("vim:{}", self.vim_name))),
            vim_type: "kubernetes".into(),
            interface_info: None,
            access_info: Some(json!({"authUrl": self.auth_url})),
            extra: Some(extra),
            rest: Default::default(),
        }
    }
}

/// `record` (a VIM record or a vimConnectionInfo entry) with its `helm_info`'s credential
/// reference masked: what is shown of a record (results, logs), never what is kept or returned
/// to the VNFM.
pub fn masked_ref(record: &Value) -> Value {
    let mut v = record.clone();
    if let Some(Value::Object(h)) = v.pointer_mut("/extra/helm_info") {
        if let Some(r) = h.get_mut(credential_ref::FIELD).filter(|r| !r.is_null()) {
            *r = json!(MASK);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floating_ip_replaces_the_host_and_keeps_the_port() {
        assert_eq!(auth_url("https://10.10.0.91:16443", Some("192.0.2.7")), "https://192.0.2.7:16443");
        assert_eq!(auth_url("https://10.10.0.91:6443", None), "https://10.10.0.91:6443");
    }

    #[test]
    fn helm_info_is_json_and_holds_a_password_only_when_asked() {
        let h = HelmInfo {
            master_ips: vec!["10.0.0.1".into()],
            username: "ubuntu",
            password: HelmPassword::Reference("t0k"),
            vnf_instance_id: "i1",
        };
        let v = h.to_json();
        assert_eq!(v["masternode_ip"][0], "10.0.0.1");
        assert!(v.get("masternode_password").is_none());
        assert_eq!(v["masternode_credential_ref"], "mgmt-driver-state:i1:t0k");
        let h = HelmInfo { password: HelmPassword::Reveal("pw"), ..h };
        assert_eq!(h.to_json()["masternode_password"], "pw");
        let v = HelmInfo { password: HelmPassword::None, ..h }.to_json();
        assert!(v.get("masternode_password").is_none() && v.get("masternode_credential_ref").is_none(), "{v}");
        assert_eq!(v["masternode_username"], "ubuntu");
    }

    #[test]
    fn a_master_without_a_password_or_with_another_login_is_named_without_the_password() {
        let l = |node, user, password| Login { node, user, password };
        assert!(helm_login_warnings(&[l("m1", "u", Some("pw")), l("m2", "u", Some("pw"))]).is_empty());
        assert!(helm_login_warnings(&[]).is_empty());
        let w = helm_login_warnings(&[l("m1", "root", None)]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("master m1 logs in with a key") && w[0].contains("no masternode_password"), "{w:?}");
        let w = helm_login_warnings(&[
            l("m1", "u", Some("S3cret-A")),
            l("m2", "u", Some("S3cret-B")),
            l("m3", "v", Some("S3cret-A")),
        ]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("master m2") && w[1].contains("master m3"), "{w:?}");
        assert!(w.iter().all(|x| !x.contains("S3cret")), "{w:?}");
    }

    #[test]
    fn records_are_stable_and_mask_the_token() {
        let r = Record {
            vim_name: "v",
            auth_url: "https://a:6443".into(),
            bearer_token: "tok",
            ca_pem: Some("PEM"),
            helm_info: None,
            vnf_instance_id: "i",
        };
        assert_eq!(r.vim(false)["auth_cred"]["bearer_token"], MASK);
        assert_eq!(r.vim(true)["auth_cred"]["bearer_token"], "tok");
        assert_eq!(r.vim_connection(), r.vim_connection());
        assert_eq!(r.vim_connection().access_info.unwrap()["authUrl"], "https://a:6443");
        assert_eq!(stable_uuid("x").len(), 36);
    }

    #[test]
    fn the_credential_reference_is_kept_and_returned_but_masked_where_shown() {
        let h = HelmInfo {
            master_ips: vec!["10.0.0.1".into()],
            username: "ubuntu",
            password: HelmPassword::Reference("t0k"),
            vnf_instance_id: "i",
        };
        let r = Record {
            vim_name: "v",
            auth_url: "https://a:6443".into(),
            bearer_token: "tok",
            ca_pem: None,
            helm_info: Some(h.to_json()),
            vnf_instance_id: "i",
        };
        let stored = r.vim(true);
        assert_eq!(stored["extra"]["helm_info"]["masternode_credential_ref"], "mgmt-driver-state:i:t0k");
        let shown = r.vim(false);
        assert_eq!(shown["extra"]["helm_info"]["masternode_credential_ref"], MASK);
        assert_eq!(shown["extra"]["helm_info"]["masternode_username"], "ubuntu");
        let conn = serde_json::to_value(r.vim_connection()).unwrap();
        assert_eq!(conn["extra"]["helm_info"]["masternode_credential_ref"], "mgmt-driver-state:i:t0k");
        let shown = masked_ref(&conn);
        assert!(!shown.to_string().contains("t0k") && shown["extra"]["vim_name"] == "v", "{shown}");
        // Nothing to mask: unchanged.
        assert_eq!(masked_ref(&json!({"extra": {"vim_name": "v"}})), json!({"extra": {"vim_name": "v"}}));
    }
}
