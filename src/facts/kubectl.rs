//! Facts read with kubectl from the cluster: the VIM's bearer token, the pods a drain left, a
//! Service as the cluster has it, a CNF workload's selector and pods, a Kubernetes workload's
//! status and running pods. Names and values read back
//! reach later command lines, records and events: each is checked before it is kept.

use serde_json::Value;

use crate::cluster::node_cmd;
use crate::cnf::names;
use crate::cnf::services::{get_service, with_live, Service};
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::Fact;
use crate::redact::Redact;
use crate::secret::Secret;
use crate::workload::kind::Kind;
use crate::workload::kubectl as workload_kubectl;
use crate::workload::status::{self as workload_status, Pod, Status};

/// The VIM's bearer token (`admin_token.sh` in the run directory `run_dir`): a JWT's characters
/// only, at most 16 KiB; it goes into the VIM record and the state. The whole output is the
/// secret: never streamed, never quoted.
pub struct BearerToken<'a> {
    pub run_dir: &'a str,
}

impl Fact for BearerToken<'_> {
    type Value = Secret;

    fn what(&self) -> String {
        "the VIM bearer token".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::admin_token(self.run_dir)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Secret {
        Secret::new("<bearer token>")
    }

    fn parse(&self, out: &str) -> std::result::Result<Secret, String> {
        parse_bearer(out)
    }
}

/// The VIM bearer token: a JWT's characters only (base64url and dots), at most 16 KiB; it goes
/// into the VIM record and the state. The message never quotes the output: it may be a secret.
fn parse_bearer(out: &str) -> std::result::Result<Secret, String> {
    let t = out.trim();
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"-_.=".contains(&b);
    match t {
        "" => Err("the token is empty".into()),
        t if t.len() > 16 * 1024 || !t.bytes().all(ok) => {
            Err("the token has characters a service-account token does not have, or is too long".into())
        }
        t => Ok(Secret::new(t)),
    }
}

/// The pods still on the node `k8s_name` after a drain that a drain must evict (not DaemonSet
/// or static mirror pods), as `namespace/name`, escaped: they are only shown in the error that
/// stops the node's removal. A plan assumes none are left.
pub struct PodsLeft<'a> {
    pub k8s_name: &'a str,
}

impl Fact for PodsLeft<'_> {
    type Value = Vec<String>;

    fn what(&self) -> String {
        "the pods left on the node".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::pods_on(self.k8s_name)?))
    }

    fn placeholder(&self) -> Vec<String> {
        Vec::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<String>, String> {
        node_cmd::evictable_pods(out)
    }
}

/// A Service of a release with what the cluster allocated (`cnf/services.rs`' `with_live`: its
/// type and ports as the cluster has them, IPs parsed as IP addresses); unchanged when the
/// cluster has no such Service. `prefix` is the cluster's Helm environment. A plan goes on with
/// the Service as the manifest has it.
pub struct ServiceLive<'a> {
    pub prefix: &'a str,
    pub service: &'a Service,
}

impl Fact for ServiceLive<'_> {
    type Value = Service;

    fn what(&self) -> String {
        format!("service {}", self.service.name)
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(get_service(self.prefix, &self.service.name, &self.service.namespace)?))
    }

    fn placeholder(&self) -> Service {
        self.service.clone()
    }

    fn parse(&self, out: &str) -> std::result::Result<Service, String> {
        with_live(self.service.clone(), out)
    }
}

/// A workload's `spec.selector.matchLabels` as a `-l` selector, every key and value checked
/// (they are read back from the cluster; a heal matches pods with them, `cnf/heal_program.rs`).
pub fn selector_of(workload_json: &str) -> std::result::Result<String, String> {
    let v: Value = serde_json::from_str(workload_json.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let m = v.pointer("/spec/selector/matchLabels").and_then(Value::as_object).ok_or("no spec.selector.matchLabels")?;
    let ok = |s: &str, extra: &[u8], max: usize| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c) || extra.contains(&c))
    };
    let mut parts = Vec::new();
    for (k, x) in m {
        let x = x.as_str().ok_or("a selector value that is not a string")?;
        if !ok(k, b"/", 317) || !(x.is_empty() || ok(x, b"", 63)) {
            return Err(format!("'{}' is not a label selector", crate::error::excerpt(&format!("{k}={x}"))));
        }
        parts.push(format!("{k}={x}"));
    }
    if parts.is_empty() {
        return Err("an empty selector".into());
    }
    Ok(parts.join(","))
}

/// A pod as a heal reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodState {
    pub name: String,
    pub uid: String,
    pub phase: String,
    pub ready: bool,
}

/// `kubectl get pods -o json` → the pods, names checked; Ready is the Ready condition (and
/// phase Running when a pod has no conditions yet).
pub fn parse_pods(out: &str) -> std::result::Result<Vec<PodState>, String> {
    let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let items = v.get("items").and_then(Value::as_array).ok_or("no items list")?;
    let mut pods = Vec::new();
    for p in items {
        let s = |ptr: &str| p.pointer(ptr).and_then(Value::as_str).unwrap_or("").to_string();
        let name = s("/metadata/name");
        if !names::dns_subdomain(&name) {
            return Err(format!("'{}' is not a pod name", crate::error::excerpt(&name)));
        }
        let uid = s("/metadata/uid");
        if !uid.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-') || uid.len() > 64 {
            return Err(format!("pod {name}: uid is not a UID"));
        }
        let phase = s("/status/phase");
        let cond = p
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").map(|c| c["status"] == "True"));
        let ready = cond.unwrap_or(phase == "Running") && phase == "Running";
        let phase = if phase.bytes().all(|c| c.is_ascii_alphabetic()) { phase } else { "Unknown".into() };
        pods.push(PodState { name, uid, phase, ready });
    }
    Ok(pods)
}

/// A Deployment's or StatefulSet's status (`workload/status.rs`: replicas, revision, images,
/// selector, each checked), or None in a plan. The object's JSON holds the pod template's
/// environment values: never streamed.
pub struct WorkloadStatus<'a> {
    pub kind: Kind,
    pub ns: &'a str,
    pub name: &'a str,
}

impl Fact for WorkloadStatus<'_> {
    type Value = Option<Status>;

    fn what(&self) -> String {
        format!("the {} status", self.kind.api())
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(workload_kubectl::get(self.kind, self.ns, self.name)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Option<Status> {
        None
    }

    fn parse(&self, out: &str) -> std::result::Result<Option<Status>, String> {
        workload_status::parse(out, self.kind, self.name).map(Some)
    }
}

/// The running pods a selector picks (names and nodes checked); a plan goes on with one
/// placeholder pod. Pod JSON holds environment values too: never streamed.
pub struct RunningPods<'a> {
    pub ns: &'a str,
    pub selector: &'a str,
}

impl Fact for RunningPods<'_> {
    type Value = Vec<Pod>;

    fn what(&self) -> String {
        "the pod list".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(workload_kubectl::pods(self.ns, self.selector)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Vec<Pod> {
        vec![Pod { name: "<each running pod>".into(), node: String::new(), phase: "Running".into() }]
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<Pod>, String> {
        workload_status::running_pods(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testkit::{planned, read, unreadable, value};

    #[tokio::test]
    async fn a_bearer_token_of_jwt_characters_never_quoted() {
        let f = BearerToken { run_dir: "/var/tmp/run" };
        let (sent, got) = read(&f, "eyJhbGciOi.eyJzdWIi.c2ln\n").await;
        assert!(sent.starts_with("admin_token.sh") && sent.contains("/var/tmp/run/"), "{sent}");
        assert_eq!(got.unwrap().expose(), "eyJhbGciOi.eyJzdWIi.c2ln");
        assert!(unreadable(&f, "").await.contains("empty"));
        let m = unreadable(&f, "abc def$(x)").await;
        assert!(!m.contains("abc def"), "{m}");
        unreadable(&f, &"a".repeat(16 * 1024 + 1)).await;
        assert_eq!(planned(&f).await.expose(), "<bearer token>");
        assert_eq!(f.command().unwrap().redact, Redact::All);
    }

    #[tokio::test]
    async fn pods_left_but_daemonsets_escaped() {
        let f = PodsLeft { k8s_name: "worker1" };
        let pods = r#"{"items":[
            {"metadata":{"namespace":"kube-system","name":"proxy","ownerReferences":[{"kind":"DaemonSet"}]}},
            {"metadata":{"namespace":"default","name":"web-1","ownerReferences":[{"kind":"ReplicaSet"}]}}]}"#;
        let (sent, got) = read(&f, pods).await;
        assert!(
            sent.contains("kubectl get pods -A --field-selector") && sent.contains("spec.nodeName=worker1"),
            "{sent}"
        );
        assert_eq!(got.unwrap(), vec!["default/web-1"]);
        assert_eq!(value(&f, r#"{"items":[]}"#).await, Vec::<String>::new());
        assert!(unreadable(&f, "error: the server is down").await.contains("not JSON"));
        assert!(planned(&f).await.is_empty());
    }

    #[tokio::test]
    async fn a_service_with_what_the_cluster_allocated() {
        let manifest =
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: vdu2\nspec:\n  type: NodePort\n  ports:\n  - port: 80\n";
        let svc = crate::cnf::services::from_manifest(manifest, "vdu2", "cnf").unwrap().remove(0);
        let f = ServiceLive { prefix: "", service: &svc };
        let live = r#"{"kind":"Service","metadata":{"name":"vdu2"},"spec":{"type":"NodePort","clusterIP":"10.96.0.9",
                       "ports":[{"port":80,"nodePort":30080,"protocol":"TCP"}]}}"#;
        let (sent, got) = read(&f, live).await;
        assert!(sent.contains("kubectl get service vdu2 --namespace cnf -o json"), "{sent}");
        let got = got.unwrap();
        assert_eq!((got.cluster_ip.as_deref(), got.in_cluster), (Some("10.96.0.9"), true));
        assert_eq!(value(&f, r#"{"absent":true}"#).await, svc);
        assert!(unreadable(&f, r#"{"kind":"Service","metadata":{"name":"other"}}"#).await.contains("not the Service"));
        let bad_ip =
            r#"{"kind":"Service","metadata":{"name":"vdu2"},"spec":{"type":"NodePort","clusterIP":"$(x)","ports":[]}}"#;
        unreadable(&f, bad_ip).await;
        assert_eq!(f.what(), "service vdu2");
        assert_eq!(planned(&f).await, svc);
    }

    #[test]
    fn selectors_and_pods_read_back_are_checked() {
        let d = r#"{"spec": {"selector": {"matchLabels": {"app.kubernetes.io/instance": "vdu1", "app.kubernetes.io/name": "localhelm"}}}}"#;
        assert_eq!(selector_of(d).unwrap(), "app.kubernetes.io/instance=vdu1,app.kubernetes.io/name=localhelm");
        for bad in [r#"{"spec": {"selector": {"matchLabels": {"a": "x;id"}}}}"#, r#"{"spec": {}}"#, "nope"] {
            assert!(selector_of(bad).is_err(), "{bad}");
        }
        let pods = parse_pods(
            r#"{"items": [
              {"metadata": {"name": "a-1", "uid": "0a-1b"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
              {"metadata": {"name": "a-2", "uid": "0c"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}},
              {"metadata": {"name": "a-3", "uid": "0d"}, "status": {"phase": "Pending"}}]}"#,
        )
        .unwrap();
        assert_eq!(pods.iter().map(|p| p.ready).collect::<Vec<_>>(), vec![true, false, false]);
        assert!(parse_pods(r#"{"items": [{"metadata": {"name": "$(x)", "uid": "1"}}]}"#).is_err());
    }

    #[tokio::test]
    async fn a_workload_s_status_is_parsed_checked_and_never_streamed() {
        let f = WorkloadStatus { kind: Kind::Deployment, ns: "dcae", name: "web" };
        assert_eq!(f.command().unwrap().redact, Redact::All);
        let doc = serde_json::json!({"kind": "Deployment", "metadata": {"name": "web", "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                     "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}});
        let (sent, got) = read(&f, &doc.to_string()).await;
        assert!(sent.contains("kubectl get deployment.apps/web -n dcae -o json"), "{sent}");
        assert!(got.unwrap().expect("a status").is_available());
        let other = doc.to_string().replace("\"name\":\"web\",\"generation\"", "\"name\":\"db\",\"generation\"");
        assert!(!unreadable(&f, &other).await.is_empty(), "another object's status");
        assert_eq!(f.what(), "the Deployment status");
        assert!(planned(&f).await.is_none());
    }

    #[tokio::test]
    async fn running_pods_are_named_as_kubernetes_names_them() {
        let f = RunningPods { ns: "dcae", selector: "app.kubernetes.io/name=web" };
        let list = serde_json::json!({"items": [
            {"metadata": {"name": "web-1"}, "spec": {"nodeName": "w1"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "web-2"}, "status": {"phase": "Pending"}}]});
        let (sent, got) = read(&f, &list.to_string()).await;
        assert!(sent.contains("kubectl get pods -n dcae") && sent.contains("app.kubernetes.io/name=web"), "{sent}");
        assert_eq!(got.unwrap().iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["web-1"]);
        let hostile = list.to_string().replace("web-1", "-n; reboot");
        assert!(!unreadable(&f, &hostile).await.is_empty());
        assert_eq!(planned(&f).await[0].name, "<each running pod>");
    }
}
