//! The kubeconfig of a recorded cluster, as a document (`kubeconfig.rs` writes it): the
//! cluster's CA, the same API server URL as the VIM record (the VIP, or the floating IP) and the
//! cluster-admin ServiceAccount token. Built from the instance state only, so it can be written
//! again later without touching a node.

use data_encoding::BASE64;
use serde::Serialize;

use crate::cluster::state::InstanceState;
use crate::error::{Error, Result};
use crate::secret::Secret;

/// What a kubeconfig says, read from the instance state.
pub struct Kubeconfig {
    /// The cluster's and the context's name: the VIM name.
    pub name: String,
    /// `https://HOST:PORT`, as in the VIM record.
    pub server: String,
    pub ca_pem: String,
    /// With a floating IP: the address the API server certificate names (the cluster IP).
    pub tls_server_name: Option<String>,
    pub token: Secret,
}

/// The user entry's name: the ServiceAccount the token belongs to (`node_cmd::admin_token_manifest`).
const USER: &str = "mgmt-driver-admin";

/// The kubeconfig of the cluster recorded in `st`. `at` (the state file) names where a missing
/// fact should have been.
pub fn from_state(st: &InstanceState, at: &str) -> Result<Kubeconfig> {
    let not_yet = |field: &str, what: &str| {
        Error::input(
            at,
            field,
            format!(
                "VNF instance {} has no {what} recorded: the cluster is not instantiated (run instantiate-end first)",
                st.vnf_instance_id
            ),
        )
    };
    let facts = st.facts.as_ref().ok_or_else(|| not_yet("facts", "cluster facts"))?;
    let token = st
        .bearer_token
        .as_ref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| not_yet("bearer_token", "VIM bearer token"))?;
    let vim = st.vim.as_ref().ok_or_else(|| not_yet("vim", "VIM record"))?;
    let server = vim.get("auth_url").and_then(|v| v.as_str()).unwrap_or(&facts.server).to_string();
    let name = vim.get("name").and_then(|v| v.as_str()).filter(|n| !n.is_empty()).unwrap_or("kubernetes").to_string();
    if !server.starts_with("https://") {
        return Err(Error::input(
            at,
            "vim.auth_url",
            format!("'{}' is not an https URL", crate::error::excerpt(&server)),
        ));
    }
    if !facts.ca_pem.trim_start().starts_with("-----BEGIN CERTIFICATE-----") {
        return Err(Error::input(at, "facts.ca_pem", "is not a PEM certificate"));
    }
    // The VIM URL names another host than the API server's own address only with a floating
    // IP; the certificate does not name that address, so TLS checks the cluster IP instead.
    let tls_server_name = (host(&server) != host(&facts.server)).then(|| {
        if facts.cluster_ip.is_empty() {
            host(&facts.server).to_string()
        } else {
            facts.cluster_ip.clone()
        }
    });
    Ok(Kubeconfig { name, server, ca_pem: facts.ca_pem.clone(), tls_server_name, token: Secret::new(token.clone()) })
}

/// The host part of `https://HOST:PORT/...` (brackets kept off an IPv6 address).
fn host(url: &str) -> &str {
    let rest = url.strip_prefix("https://").unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority.rsplit_once(':').map(|(h, _)| h).unwrap_or(authority)
}

#[derive(Serialize)]
struct Doc<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    clusters: [Named<'a, ClusterEntry<'a>>; 1],
    users: [Named<'a, UserEntry<'a>>; 1],
    contexts: [Named<'a, ContextEntry<'a>>; 1],
    #[serde(rename = "current-context")]
    current_context: &'a str,
}

#[derive(Serialize)]
struct Named<'a, T> {
    name: &'a str,
    #[serde(flatten)]
    entry: T,
}

#[derive(Serialize)]
struct ClusterEntry<'a> {
    cluster: ClusterFields<'a>,
}

#[derive(Serialize)]
struct ClusterFields<'a> {
    #[serde(rename = "certificate-authority-data")]
    ca_data: String,
    server: &'a str,
    #[serde(rename = "tls-server-name", skip_serializing_if = "Option::is_none")]
    tls_server_name: Option<&'a str>,
}

#[derive(Serialize)]
struct UserEntry<'a> {
    user: UserFields<'a>,
}

#[derive(Serialize)]
struct UserFields<'a> {
    token: &'a str,
}

#[derive(Serialize)]
struct ContextEntry<'a> {
    context: ContextFields<'a>,
}

#[derive(Serialize)]
struct ContextFields<'a> {
    cluster: &'a str,
    user: &'a str,
}

impl Kubeconfig {
    /// The kubeconfig as YAML (with the token: write it only to a 0600 file).
    pub fn to_yaml(&self) -> String {
        let context = format!("{USER}@{}", self.name);
        let doc = Doc {
            api_version: "v1",
            kind: "Config",
            clusters: [Named {
                name: &self.name,
                entry: ClusterEntry {
                    cluster: ClusterFields {
                        ca_data: BASE64.encode(self.ca_pem.as_bytes()),
                        server: &self.server,
                        tls_server_name: self.tls_server_name.as_deref(),
                    },
                },
            }],
            users: [Named { name: USER, entry: UserEntry { user: UserFields { token: self.token.expose() } } }],
            contexts: [Named {
                name: &context,
                entry: ContextEntry { context: ContextFields { cluster: &self.name, user: USER } },
            }],
            current_context: &context,
        };
        yaml_serde::to_string(&doc).expect("a kubeconfig serializes")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::state::ClusterFacts;
    use serde_json::{json, Value};

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBlab\n-----END CERTIFICATE-----\n";
    pub(crate) const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln";

    pub(crate) fn recorded(fip: Option<&str>) -> InstanceState {
        let mut st = InstanceState::new("vnf1");
        st.facts = Some(ClusterFacts {
            server: "https://10.10.0.100:16443".into(),
            ca_pem: PEM.into(),
            ca_hash: "a".repeat(64),
            cluster_ip: "10.10.0.100".into(),
            main_master: "m1".into(),
        });
        st.bearer_token = Some(TOKEN.into());
        let url = crate::cluster::record::auth_url("https://10.10.0.100:16443", fip);
        st.vim = Some(json!({"name": "kubernetes_vim", "auth_url": url}));
        st
    }

    fn parsed(k: &Kubeconfig) -> Value {
        yaml_serde::from_str(&k.to_yaml()).expect("the kubeconfig is YAML")
    }

    #[test]
    fn one_cluster_user_and_context_with_the_vim_url_ca_and_token() {
        let k = from_state(&recorded(None), "state.json").unwrap();
        let v = parsed(&k);
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Config");
        let cluster = &v["clusters"][0];
        assert_eq!(cluster["name"], "kubernetes_vim");
        assert_eq!(cluster["cluster"]["server"], "https://10.10.0.100:16443");
        let ca = BASE64.decode(cluster["cluster"]["certificate-authority-data"].as_str().unwrap().as_bytes()).unwrap();
        assert_eq!(String::from_utf8(ca).unwrap(), PEM);
        assert!(cluster["cluster"].get("tls-server-name").is_none(), "{v:?}");
        assert_eq!(v["users"][0]["name"], USER);
        assert_eq!(v["users"][0]["user"]["token"], TOKEN);
        let ctx = &v["contexts"][0];
        assert_eq!(v["current-context"], ctx["name"]);
        assert_eq!(ctx["context"]["cluster"], "kubernetes_vim");
        assert_eq!(ctx["context"]["user"], USER);
        assert_eq!(v["clusters"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_floating_ip_is_the_server_and_tls_checks_the_cluster_ip() {
        let k = from_state(&recorded(Some("192.0.2.7")), "state.json").unwrap();
        let v = parsed(&k);
        assert_eq!(v["clusters"][0]["cluster"]["server"], "https://192.0.2.7:16443");
        assert_eq!(v["clusters"][0]["cluster"]["tls-server-name"], "10.10.0.100");
        // The CA stays: the FIP case keeps TLS verification on (the VIM record drops the CA).
        assert!(v["clusters"][0]["cluster"]["certificate-authority-data"].as_str().is_some_and(|s| !s.is_empty()));
        let k = from_state(&recorded(Some("2001:db8::7")), "state.json").unwrap();
        assert_eq!(k.server, "https://[2001:db8::7]:16443");
        assert_eq!(k.tls_server_name.as_deref(), Some("10.10.0.100"));
    }

    #[test]
    fn hosts_of_urls() {
        assert_eq!(host("https://10.0.0.1:6443"), "10.0.0.1");
        assert_eq!(host("https://[fd00::1]:6443/"), "fd00::1");
        assert_eq!(host("https://name.example"), "name.example");
    }
}
