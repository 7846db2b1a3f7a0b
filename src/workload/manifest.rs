//! The Kubernetes objects of a [`Workload`]: a Deployment or StatefulSet (`apps/v1`), a
//! ClusterIP Service (`v1`) for its ports, and a NodePort Service for the ports given a node
//! port (DCAE's `8080/udp:30080`). Real API objects, validated against the API's own schemas in
//! `tests/k8s_workload.rs`; sent to kubectl as one JSON `List`. Pure.
//!
//! DCAE's deploy parity: `imagePullPolicy` (`always_pull`), `imagePullSecrets`, init
//! containers, `https` probes, and `POD_IP` in every container's environment (from the
//! downward API's `status.podIP`).
//!
//! Every object carries `app.kubernetes.io/name: <name>` (the pod selector) and
//! `app.kubernetes.io/managed-by: mgmt-driver`, so `undeploy` finds exactly what `deploy` made.

use serde_json::{json, Map, Value};

use crate::workload::kind::Kind;
use crate::workload::spec::{Check, InitContainer, Probe, Source, Workload, POD_IP_ENV};

pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The NodePort Service's name for workload `name`.
pub fn node_port_service(name: &str) -> String {
    format!("{name}-nodeport")
}

/// The Services `deploy` creates for `w` (and `undeploy` removes): `<name>` when there are
/// ports (always for a StatefulSet, whose pods need a governing Service), `<name>-nodeport`
/// when a port has a node port.
pub fn service_names(w: &Workload) -> Vec<String> {
    let mut out = Vec::new();
    if !w.ports.is_empty() || w.kind == Kind::StatefulSet {
        out.push(w.name.clone());
    }
    if w.ports.iter().any(|p| p.node_port.is_some()) {
        out.push(node_port_service(&w.name));
    }
    out
}

fn labels(w: &Workload) -> Map<String, Value> {
    let mut m: Map<String, Value> = w.labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    m.insert(NAME_LABEL.into(), json!(w.name));
    m.insert(MANAGED_BY.into(), json!("mgmt-driver"));
    m
}

fn selector(w: &Workload) -> Value {
    json!({ NAME_LABEL: w.name })
}

fn probe(p: &Probe) -> Value {
    let mut o = match &p.check {
        Check::Http { path, port, https: false } => json!({"httpGet": {"path": path, "port": port}}),
        Check::Http { path, port, https: true } => {
            json!({"httpGet": {"path": path, "port": port, "scheme": "HTTPS"}})
        }
        Check::Tcp { port } => json!({"tcpSocket": {"port": port}}),
        Check::Exec { command } => json!({"exec": {"command": command}}),
    };
    let m = o.as_object_mut().expect("an object");
    for (k, v) in [
        ("initialDelaySeconds", p.initial_delay_s),
        ("periodSeconds", p.period_s),
        ("timeoutSeconds", p.timeout_s),
        ("failureThreshold", p.failure_threshold),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    o
}

/// What every container of the pod has: its name, image, pull policy, command and args, and the
/// environment (the spec's, then `POD_IP`).
fn base_container(w: &Workload, name: &str, image: &str, command: &[String], args: &[String]) -> Map<String, Value> {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    c.insert("image".into(), json!(image));
    if let Some(p) = w.pull_policy {
        c.insert("imagePullPolicy".into(), json!(p.api()));
    }
    if !command.is_empty() {
        c.insert("command".into(), json!(command));
    }
    if !args.is_empty() {
        c.insert("args".into(), json!(args));
    }
    let mut env: Vec<Value> = w.env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect();
    env.push(json!({"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}));
    c.insert("env".into(), Value::Array(env));
    c
}

/// An init container: the pod's volumes mounted as in the main container.
fn init_container(w: &Workload, i: &InitContainer) -> Value {
    let mut c = base_container(w, &i.name, &i.image, &i.command, &i.args);
    if !w.volumes.is_empty() {
        c.insert("volumeMounts".into(), Value::Array(mounts(w)));
    }
    Value::Object(c)
}

fn mounts(w: &Workload) -> Vec<Value> {
    w.volumes
        .iter()
        .map(|v| {
            let mut m = json!({"name": v.name, "mountPath": v.mount});
            if v.read_only {
                m["readOnly"] = json!(true);
            }
            m
        })
        .collect()
}

fn container(w: &Workload) -> Value {
    let mut c = base_container(w, &w.container, &w.image, &w.command, &w.args);
    if !w.ports.is_empty() {
        let ports: Vec<Value> = w
            .ports
            .iter()
            .map(|p| json!({"name": p.name(), "containerPort": p.port, "protocol": p.protocol.api()}))
            .collect();
        c.insert("ports".into(), Value::Array(ports));
    }
    if !w.requests.is_empty() || !w.limits.is_empty() {
        let mut r = Map::new();
        if !w.requests.is_empty() {
            r.insert("requests".into(), json!(w.requests));
        }
        if !w.limits.is_empty() {
            r.insert("limits".into(), json!(w.limits));
        }
        c.insert("resources".into(), Value::Object(r));
    }
    if let Some(p) = &w.readiness {
        c.insert("readinessProbe".into(), probe(p));
    }
    if let Some(p) = &w.liveness {
        c.insert("livenessProbe".into(), probe(p));
    }
    if !w.volumes.is_empty() {
        c.insert("volumeMounts".into(), Value::Array(mounts(w)));
    }
    Value::Object(c)
}

fn volumes(w: &Workload) -> Vec<Value> {
    w.volumes
        .iter()
        .map(|v| match &v.source {
            Source::ConfigMap(n) => json!({"name": v.name, "configMap": {"name": n}}),
            Source::Secret(n) => json!({"name": v.name, "secret": {"secretName": n}}),
            Source::HostPath(p) => json!({"name": v.name, "hostPath": {"path": p}}),
            Source::EmptyDir => json!({"name": v.name, "emptyDir": {}}),
        })
        .collect()
}

/// The Deployment or StatefulSet.
pub fn workload(w: &Workload) -> Value {
    let mut pod_spec = json!({"containers": [container(w)]});
    if !w.init_containers.is_empty() {
        pod_spec["initContainers"] = w.init_containers.iter().map(|i| init_container(w, i)).collect();
    }
    if !w.pull_secrets.is_empty() {
        pod_spec["imagePullSecrets"] = w.pull_secrets.iter().map(|n| json!({"name": n})).collect();
    }
    if !w.volumes.is_empty() {
        pod_spec["volumes"] = Value::Array(volumes(w));
    }
    let template = json!({"metadata": {"labels": labels(w)}, "spec": pod_spec});
    let mut spec = json!({"replicas": w.replicas, "selector": {"matchLabels": selector(w)}, "template": template});
    if w.kind == Kind::StatefulSet {
        spec["serviceName"] = json!(w.name);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": w.kind.api(),
        "metadata": {"name": w.name, "namespace": w.namespace, "labels": labels(w)},
        "spec": spec,
    })
}

/// The Services: ClusterIP for every port (headless for a StatefulSet without ports), NodePort
/// for the ports with a node port.
pub fn services(w: &Workload) -> Vec<Value> {
    let svc = |name: &str, spec: Value| {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": w.namespace, "labels": labels(w)}, "spec": spec})
    };
    let port = |p: &crate::workload::ports::PortSpec, node: bool| {
        let mut v = json!({"name": p.name(), "port": p.port, "targetPort": p.port, "protocol": p.protocol.api()});
        if node {
            v["nodePort"] = json!(p.node_port);
        }
        v
    };
    let mut out = Vec::new();
    if !w.ports.is_empty() {
        let ports: Vec<Value> = w.ports.iter().map(|p| port(p, false)).collect();
        out.push(svc(&w.name, json!({"type": "ClusterIP", "selector": selector(w), "ports": ports})));
    } else if w.kind == Kind::StatefulSet {
        out.push(svc(&w.name, json!({"clusterIP": "None", "selector": selector(w)})));
    }
    let exposed: Vec<Value> = w.ports.iter().filter(|p| p.node_port.is_some()).map(|p| port(p, true)).collect();
    if !exposed.is_empty() {
        out.push(svc(
            &node_port_service(&w.name),
            json!({"type": "NodePort", "selector": selector(w), "ports": exposed}),
        ));
    }
    out
}

/// Every object, workload first.
pub fn objects(w: &Workload) -> Vec<Value> {
    let mut v = vec![workload(w)];
    v.extend(services(w));
    v
}

/// One `v1` List of every object: what `kubectl apply -f` receives.
pub fn list(w: &Workload) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": objects(w)})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::spec::parse;

    const SPEC: &str = r#"
name: vnf-web
image: registry.example/web:1.0
replicas: 2
env: {MODE: "a'b; reboot"}
readiness: {http: "/healthz:8080", period: 10s}
liveness: {exec: [sh, -c, "test -f /tmp/ok"]}
volumes: [{name: cfg, config_map: web-config, mount: /etc/web, read_only: true}]
ports: ["8080", "5000/udp:30080"]
"#;

    #[test]
    fn objects_as_kubernetes_spells_them() {
        let w = parse(SPEC, "s", None, None).unwrap();
        let o = objects(&w);
        assert_eq!(o.len(), 3);
        let d = &o[0];
        assert_eq!((d["apiVersion"].as_str(), d["kind"].as_str()), (Some("apps/v1"), Some("Deployment")));
        assert_eq!(d["spec"]["selector"]["matchLabels"], json!({NAME_LABEL: "vnf-web"}));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["ports"][1], json!({"name": "udp-5000", "containerPort": 5000, "protocol": "UDP"}));
        assert_eq!(c["env"][0]["value"], "a'b; reboot", "a value is data in JSON, never shell text");
        assert_eq!(c["readinessProbe"], json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}));
        assert_eq!(c["volumeMounts"][0], json!({"name": "cfg", "mountPath": "/etc/web", "readOnly": true}));
        assert_eq!(o[1]["spec"]["type"], "ClusterIP");
        assert_eq!(o[1]["spec"]["ports"].as_array().unwrap().len(), 2);
        assert_eq!(o[2]["metadata"]["name"], "vnf-web-nodeport");
        assert_eq!(
            o[2]["spec"]["ports"],
            json!([{"name": "udp-5000", "port": 5000, "targetPort": 5000, "protocol": "UDP", "nodePort": 30080}])
        );
        assert_eq!(service_names(&w), vec!["vnf-web".to_string(), "vnf-web-nodeport".into()]);
    }

    #[test]
    fn dcae_deploy_parity_pull_policy_pull_secrets_pod_ip_https_probes_and_init_containers() {
        let spec = "name: web\nimage: r.example/web:1\nalways_pull: true\nimage_pull_secrets: [regcred]\n\
                    readiness: {https: \"/ready:8443\"}\n\
                    volumes: [{name: data, empty_dir: {}, mount: /data}]\n\
                    init_containers: [{name: setup, image: r.example/setup:1, command: [sh, -c, \"echo ok\"]}]\n";
        let w = parse(spec, "s", None, None).unwrap();
        let pod = &workload(&w)["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
        let pod_ip = json!({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}});
        assert_eq!(c["env"], json!([pod_ip]));
        assert_eq!(c["readinessProbe"], json!({"httpGet": {"path": "/ready", "port": 8443, "scheme": "HTTPS"}}));
        let init = &pod["initContainers"][0];
        assert_eq!(
            (init["name"].as_str(), init["image"].as_str(), init["imagePullPolicy"].as_str()),
            (Some("setup"), Some("r.example/setup:1"), Some("Always"))
        );
        assert_eq!(init["command"], json!(["sh", "-c", "echo ok"]));
        assert_eq!(init["volumeMounts"], json!([{"name": "data", "mountPath": "/data"}]));
        assert_eq!(init["env"], json!([pod_ip]));
        // Without them: no pull policy, secrets or init containers; POD_IP still.
        let plain = parse("name: db\nimage: db:1\n", "s", None, None).unwrap();
        let pod = &workload(&plain)["spec"]["template"]["spec"];
        assert!(pod.get("initContainers").is_none() && pod.get("imagePullSecrets").is_none(), "{pod}");
        assert!(pod["containers"][0].get("imagePullPolicy").is_none());
        assert_eq!(pod["containers"][0]["env"], json!([pod_ip]));
        // Each bad field named.
        for (bad, field) in [
            ("always_pull: true\nimage_pull_policy: Never\n", "image_pull_policy"),
            ("image_pull_policy: Sometimes\n", "image_pull_policy"),
            ("image_pull_secrets: [\"../x\"]\n", "image_pull_secrets[0]"),
            ("env: {POD_IP: 1.2.3.4}\n", "env.POD_IP"),
            ("init_containers: [{name: db, image: x:1}]\n", "init_containers[0].name"),
            ("init_containers: [{name: i, image: \"--privileged\"}]\n", "init_containers[0].image"),
            ("readiness: {https: \"/x:99999\"}\n", "readiness.https"),
            ("readiness: {https: \"/x:1\", http: \"/x:1\"}\n", "readiness"),
        ] {
            let e = parse(&format!("name: db\nimage: db:1\n{bad}"), "s", None, None).unwrap_err().to_string();
            assert!(e.contains(&format!(": {field}")), "{field}: {e}");
        }
    }

    #[test]
    fn a_statefulset_has_its_governing_service() {
        let w = parse("name: db\nimage: db:1\nkind: StatefulSet\n", "s", None, None).unwrap();
        let o = objects(&w);
        assert_eq!(o[0]["kind"], "StatefulSet");
        assert_eq!(o[0]["spec"]["serviceName"], "db");
        assert_eq!(o[1]["spec"], json!({"clusterIP": "None", "selector": {NAME_LABEL: "db"}}));
        let plain = parse("name: db\nimage: db:1\n", "s", None, None).unwrap();
        assert!(services(&plain).is_empty() && service_names(&plain).is_empty());
    }
}
