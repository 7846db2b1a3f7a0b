//! The environment of every script run on a node, as the text of its 0600 env file (sourced and
//! deleted by `run_with_env.sh`): the proxy, with a `no_proxy` made of networks; whether the
//! cluster is HA; the plain-HTTP registries; the params' `script_environment`; the step's own
//! secrets; and where the offline artifacts are. Values are quoted; secrets only ever travel
//! here.

use crate::cluster::cidr::Cidr;
use crate::cluster::node_cmd as cmd;
use crate::cluster::params::ClusterParams;
use crate::cluster::topology::Topology;
use crate::error::Result;
use crate::secret::Secret;

/// `no_proxy` from networks, not from every address in them (Tacker listed 256 or 65536).
pub fn no_proxy(p: &ClusterParams, topo: &Topology) -> String {
    let mut items: Vec<String> = Vec::new();
    if let Some(px) = &p.proxy {
        items.extend(px.no_proxy.iter().flat_map(|s| s.split(',').map(str::to_string)));
        match &px.k8s_node_cidr {
            Some(c) => items.push(c.text.clone()),
            None => items.extend(topo.masters.first().map(|m| slash24(&m.nic_ip))),
        }
    }
    items.extend([p.pod_cidr.text.clone(), p.cluster_cidr.text.clone(), "127.0.0.1".into(), "localhost".into()]);
    items.push(topo.cluster_ip.clone());
    items.extend([".svc".into(), ".cluster.local".into()]);
    let mut seen = std::collections::BTreeSet::new();
    items.retain(|i| !i.is_empty() && seen.insert(i.clone()));
    items.join(",")
}

/// The env file every script run gets (values quoted; secrets only ever here): `extra` holds
/// the secrets of the step.
pub fn env_file(p: &ClusterParams, topo: &Topology, extra: &[(&str, &Secret)]) -> Result<String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    if let Some(px) = &p.proxy {
        vars.push(("http_proxy".into(), px.http_proxy.expose().into()));
        vars.push(("https_proxy".into(), px.https_proxy.expose().into()));
        vars.push(("no_proxy".into(), no_proxy(p, topo)));
    }
    vars.push(("ha_flag".into(), if topo.ha() { "True" } else { "False" }.into()));
    let http: Vec<String> = p.registries.iter().filter(|r| !r.https).map(|r| format!("\"{}\"", r.server)).collect();
    if !http.is_empty() {
        vars.push(("HTTP_PRIVATE_REGISTRIES".into(), http.join(",")));
    }
    vars.extend(p.script_environment.iter().cloned());
    for (k, v) in extra {
        vars.push((k.to_string(), v.expose().to_string()));
    }
    let mut text = cmd::env_file(&vars)?;
    if p.offline_artifacts_path.is_some() {
        // Expanded by the node's shell when sourced: the run directory's absolute path.
        text.push_str(&format!("K8S_OFFLINE_DIR=\"$PWD/{}\"\n", cmd::OFFLINE_DIR));
    }
    Ok(text)
}

/// `a.b.c.d` → `a.b.c.0/24` (Tacker's default node network for `no_proxy`, as a CIDR); an IPv6
/// address gives its /64 network, host bits cleared like the IPv4 case.
fn slash24(ip: &str) -> String {
    let prefix = if ip.contains(':') { 64 } else { 24 };
    Cidr::parse(&format!("{ip}/{prefix}")).map(|c| c.network().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::slash24;

    #[test]
    fn node_network_default_is_a_cidr() {
        assert_eq!(slash24("10.10.0.35"), "10.10.0.0/24");
        assert_eq!(slash24("10.10.0.0"), "10.10.0.0/24");
        assert_eq!(slash24("fd00:1:2:3:4:5:6:7"), "fd00:1:2:3::/64");
        assert_eq!(slash24("fd00:1:2:3::"), "fd00:1:2:3::/64");
        assert_eq!(slash24("node1.example"), "");
    }
}
