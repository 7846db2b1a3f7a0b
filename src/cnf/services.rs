//! `cnf services`: the Services of a CNF's releases (OSM's `get_services`). What a release made
//! comes from its manifest (`helm get manifest`): name, namespace, type and ports; what only the
//! cluster knows (the cluster IP, node ports it allocated, a LoadBalancer's external IPs) from
//! `kubectl get service NAME -o json`. Every value read back is checked before it is shown:
//! addresses must parse as IP addresses, ports be ports, names Kubernetes names.
//!
//! Parsing and command text, pure (unit-tested); `run/services.rs` runs them on the active master.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cnf::manifest;
use crate::cnf::names;
use crate::error::Result;
use crate::kube::kubectl::Kubectl;

/// One Service of a release.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Service {
    pub release: String,
    pub name: String,
    pub namespace: String,
    /// ClusterIP, NodePort, LoadBalancer or ExternalName.
    #[serde(rename = "type")]
    pub kind: String,
    pub ports: Vec<Port>,
    /// The cluster IP (none for a headless Service, an ExternalName, or one not in the cluster).
    #[serde(rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    /// A LoadBalancer's ingress IPs, as its load-balancer controller reported them.
    #[serde(rename = "externalIPs")]
    pub external_ips: Vec<String>,
    /// Whether the cluster has the Service (false: in the manifest, not in the cluster).
    #[serde(rename = "inCluster")]
    pub in_cluster: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    pub name: Option<String>,
    pub port: u16,
    /// A port number or a container port's name; the port itself when the Service names none.
    pub target_port: Value,
    pub node_port: Option<u16>,
    pub protocol: String,
}

const TYPES: [&str; 4] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

fn port_number(v: &Value, what: &str) -> std::result::Result<u16, String> {
    v.as_u64()
        .filter(|p| (1..=65535).contains(p))
        .map(|p| p as u16)
        .ok_or_else(|| format!("{what} {v} is not a port number"))
}

/// A Service's ports from its spec (the manifest's or the cluster's).
fn ports(spec: &Value, svc: &str) -> std::result::Result<Vec<Port>, String> {
    let Some(list) = spec.get("ports") else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| format!("service {svc}: spec.ports is not a list"))?;
    let mut out = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let at = format!("service {svc}: spec.ports[{i}]");
        let port = port_number(p.get("port").unwrap_or(&Value::Null), &format!("{at}.port"))?;
        let name = match p.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) if names::dns_label(n, 63) => Some(n.clone()),
            Some(n) => return Err(format!("{at}.name {n} is not a port name")),
        };
        let protocol = match p.get("protocol") {
            None | Some(Value::Null) => "TCP".to_string(),
            Some(Value::String(x)) if PROTOCOLS.contains(&x.as_str()) => x.clone(),
            Some(x) => return Err(format!("{at}.protocol {x} is not TCP, UDP or SCTP")),
        };
        let target_port = match p.get("targetPort") {
            None | Some(Value::Null) => Value::from(port),
            Some(v @ Value::Number(_)) => Value::from(port_number(v, &format!("{at}.targetPort"))?),
            Some(Value::String(n)) if n.len() <= 15 && names::dns_label(n, 15) => Value::String(n.clone()),
            Some(x) => return Err(format!("{at}.targetPort {x} is not a port number or name")),
        };
        let node_port = match p.get("nodePort") {
            None | Some(Value::Null) => None,
            Some(v) => Some(port_number(v, &format!("{at}.nodePort"))?),
        };
        out.push(Port { name, port, target_port, node_port, protocol });
    }
    Ok(out)
}

fn kind_of(spec: &Value, svc: &str) -> std::result::Result<String, String> {
    match spec.get("type") {
        None | Some(Value::Null) => Ok("ClusterIP".into()),
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => Ok(t.clone()),
        Some(t) => Err(format!("service {svc}: spec.type {t} is not a Service type")),
    }
}

/// The Services in a release's manifest (every document checked as `manifest::parse` does),
/// without what only the cluster knows yet.
pub fn from_manifest(text: &str, release: &str, default_ns: &str) -> std::result::Result<Vec<Service>, String> {
    // Kinds, names and namespaces of every document are checked there.
    manifest::parse(text, default_ns)?;
    let mut out = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| e.to_string())?;
        if v.get("kind").and_then(Value::as_str) != Some("Service") {
            continue;
        }
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        let name = s("/metadata/name");
        let ns = Some(s("/metadata/namespace")).filter(|n| !n.is_empty()).unwrap_or_else(|| default_ns.into());
        let spec = v.get("spec").cloned().unwrap_or(Value::Null);
        out.push(Service {
            release: release.into(),
            kind: kind_of(&spec, &name)?,
            ports: ports(&spec, &name)?,
            name,
            namespace: ns,
            cluster_ip: None,
            external_ips: Vec::new(),
            in_cluster: false,
        });
    }
    Ok(out)
}

fn ip(v: &Value, what: &str) -> std::result::Result<String, String> {
    v.as_str()
        .and_then(|s| s.parse::<IpAddr>().ok())
        .map(|a| a.to_string())
        .ok_or_else(|| format!("{what} {v} is not an IP address"))
}

/// Fill in what the cluster knows from `kubectl get service -o json` (`{"absent":true}` when the
/// cluster has no such Service): the type and ports as the cluster has them (node ports
/// allocated), the cluster IP and a LoadBalancer's ingress IPs.
pub fn with_live(mut s: Service, json: &str) -> std::result::Result<Service, String> {
    let v: Value = serde_json::from_str(json.trim()).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("absent") == Some(&Value::Bool(true)) {
        return Ok(s);
    }
    let name = v.pointer("/metadata/name").and_then(Value::as_str);
    if v.get("kind").and_then(Value::as_str) != Some("Service") || name != Some(s.name.as_str()) {
        return Err(format!("not the Service {}", s.name));
    }
    let spec = v.get("spec").cloned().unwrap_or(Value::Null);
    s.kind = kind_of(&spec, &s.name)?;
    s.ports = ports(&spec, &s.name)?;
    s.cluster_ip = match spec.get("clusterIP") {
        None | Some(Value::Null) => None,
        Some(Value::String(x)) if x.is_empty() || x == "None" => None,
        Some(x) => Some(ip(x, &format!("service {}: spec.clusterIP", s.name))?),
    };
    s.external_ips = Vec::new();
    if s.kind == "LoadBalancer" {
        let ingress = v.pointer("/status/loadBalancer/ingress").and_then(Value::as_array);
        for (i, e) in ingress.into_iter().flatten().enumerate() {
            // An ingress point may be a host name only (some clouds): not an IP, not shown.
            if let Some(x) = e.get("ip") {
                s.external_ips.push(ip(x, &format!("service {}: status.loadBalancer.ingress[{i}].ip", s.name))?);
            }
        }
    }
    s.in_cluster = true;
    Ok(s)
}

/// `kubectl get service NAME --namespace NS -o json` in the cluster's environment, printing
/// `{"absent":true}` when the cluster has no such Service (other errors fail).
pub fn get_service(prefix: &str, name: &str, ns: &str) -> Result<String> {
    let cmd = Kubectl::new(prefix).args(&["get", "service", name, "--namespace", ns, "-o", "json"])?;
    Ok(format!(
        "out=$({cmd} 2>&1) && printf '%s\\n' \"$out\" || case $out in \
         *'(NotFound)'*) echo '{{\"absent\":true}}' ;; *) echo \"$out\" >&2; exit 1 ;; esac"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `helm create`'s Service, as `helm get manifest` prints it, with a second port.
    const MANIFEST: &str = r#"---
# Source: nginxlab/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: vdu2-nginxlab
  labels:
    app.kubernetes.io/name: nginxlab
spec:
  type: NodePort
  ports:
    - port: 80
      targetPort: http
      protocol: TCP
      name: http
    - port: 5060
      protocol: UDP
  selector:
    app.kubernetes.io/name: nginxlab
---
# Source: nginxlab/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vdu2-nginxlab
spec:
  replicas: 1
"#;

    #[test]
    fn the_manifest_gives_each_services_type_and_ports() {
        let s = from_manifest(MANIFEST, "vdu2", "cnf").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].name.as_str(), s[0].namespace.as_str(), s[0].kind.as_str()),
            ("vdu2-nginxlab", "cnf", "NodePort")
        );
        assert_eq!(
            serde_json::to_value(&s[0].ports).unwrap(),
            json!([{"name": "http", "port": 80, "targetPort": "http", "nodePort": null, "protocol": "TCP"},
                   {"name": null, "port": 5060, "targetPort": 5060, "nodePort": null, "protocol": "UDP"}])
        );
        assert!(!s[0].in_cluster && s[0].cluster_ip.is_none());
        assert!(from_manifest("", "r", "d").unwrap().is_empty());
    }

    #[test]
    fn the_cluster_gives_the_cluster_ip_node_ports_and_load_balancer_ips() {
        let s = from_manifest(MANIFEST, "vdu2", "cnf").unwrap().remove(0);
        let live = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vdu2-nginxlab", "namespace": "cnf"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.17", "clusterIPs": ["10.96.0.17"],
                     "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 31080, "protocol": "TCP"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.18.93.240"}, {"hostname": "lb.example.com"}, {"ip": "2001:db8::7"}]}}});
        let got = with_live(s.clone(), &live.to_string()).unwrap();
        assert_eq!(got.cluster_ip.as_deref(), Some("10.96.0.17"));
        assert_eq!(got.kind, "LoadBalancer");
        assert_eq!(got.ports[0].node_port, Some(31080));
        assert_eq!(got.external_ips, vec!["198.18.93.240", "2001:db8::7"]);
        assert!(got.in_cluster);
        // Headless: no cluster IP. Not in the cluster: as the manifest says.
        let headless = json!({"kind": "Service", "metadata": {"name": "vdu2-nginxlab"}, "spec": {"clusterIP": "None"}});
        assert_eq!(with_live(s.clone(), &headless.to_string()).unwrap().cluster_ip, None);
        assert_eq!(with_live(s.clone(), r#"{"absent":true}"#).unwrap(), s);
    }

    #[test]
    fn values_read_back_that_are_not_what_they_claim_are_refused() {
        let s = from_manifest(MANIFEST, "vdu2", "cnf").unwrap().remove(0);
        let svc = |spec: Value, status: Value| {
            json!({"kind": "Service", "metadata": {"name": "vdu2-nginxlab"}, "spec": spec, "status": status})
                .to_string()
        };
        for bad in [
            svc(json!({"clusterIP": "10.96.0.1; rm -rf /"}), json!({})),
            svc(json!({"clusterIP": "10.96.0.999"}), json!({})),
            svc(json!({"type": "LoadBalancer"}), json!({"loadBalancer": {"ingress": [{"ip": "$(id)"}]}})),
            svc(json!({"ports": [{"port": 70000}]}), json!({})),
            svc(json!({"ports": [{"port": 80, "nodePort": 0}]}), json!({})),
            svc(json!({"ports": [{"port": 80, "protocol": "ICMP"}]}), json!({})),
            svc(json!({"ports": [{"port": 80, "targetPort": "a b"}]}), json!({})),
            svc(json!({"type": "Bogus"}), json!({})),
            json!({"kind": "Service", "metadata": {"name": "other"}}).to_string(),
            "Error from server".into(),
        ] {
            assert!(with_live(s.clone(), &bad).is_err(), "{bad}");
        }
        let bad_manifest = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: '80; id'}]}\n";
        assert!(from_manifest(bad_manifest, "r", "d").is_err());
    }

    #[test]
    fn get_service_prints_absent_only_for_not_found() {
        let c = get_service("", "vdu2-nginxlab", "cnf").unwrap();
        assert!(c.contains("kubectl get service vdu2-nginxlab --namespace cnf -o json"), "{c}");
        let t = tempfile::tempdir().unwrap();
        let fake = |script: &str| {
            std::fs::write(t.path().join("kubectl"), format!("#!/bin/sh\n{script}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(t.path().join("kubectl"), std::fs::Permissions::from_mode(0o755)).unwrap();
            let path = format!("{}:{}", t.path().display(), std::env::var("PATH").unwrap());
            std::process::Command::new("sh").arg("-c").arg(&c).env("PATH", path).output().unwrap()
        };
        let o = fake("echo 'Error from server (NotFound): services \"vdu2-nginxlab\" not found' >&2; exit 1");
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stdout), "{\"absent\":true}\n");
        let o = fake("echo 'error: You must be logged in to the server (Unauthorized)' >&2; exit 1");
        assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Unauthorized"));
        let o = fake("echo '{\"kind\":\"Service\"}'");
        assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Service"));
    }
}
