//! The kubectl command lines of the workload operations, every word quoted (`quote.rs`). They
//! run as root on a master, with root's kubeconfig (`/root/.kube/config`, written by the
//! install script), like Helm does. Pure.

use crate::error::Result;
use crate::kube::kubectl::Kubectl;
use crate::workload::kind::Kind;

fn kubectl(words: &[&str]) -> Result<String> {
    Kubectl::ambient().args(words)
}

/// `deployment.apps/NAME` or `statefulset.apps/NAME`.
pub fn object(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.resource())
}

/// Apply the uploaded manifest file, then remove it (it may hold environment values); the
/// apply's exit status is the command's.
pub fn apply(file: &str) -> Result<String> {
    Kubectl::ambient().apply_and_remove(file)
}

pub fn get(kind: Kind, ns: &str, name: &str) -> Result<String> {
    kubectl(&["get", &object(kind, name), "-n", ns, "-o", "json"])
}

/// The object's name only: what `get` prints on success, and its errors, without the object.
pub fn get_name(kind: Kind, ns: &str, name: &str) -> Result<String> {
    kubectl(&["get", &object(kind, name), "-n", ns, "-o", "name"])
}

/// The pods matching `selector` (`k=v,k2=v2`, built from checked labels).
pub fn pods(ns: &str, selector: &str) -> Result<String> {
    kubectl(&["get", "pods", "-n", ns, "-l", selector, "-o", "json"])
}

pub fn scale(kind: Kind, ns: &str, name: &str, replicas: u32) -> Result<String> {
    kubectl(&["scale", &object(kind, name), "-n", ns, &format!("--replicas={replicas}")])
}

pub fn set_image(kind: Kind, ns: &str, name: &str, pairs: &[(String, String)]) -> Result<String> {
    let pairs: Vec<String> = pairs.iter().map(|(c, i)| format!("{c}={i}")).collect();
    let o = object(kind, name);
    let mut w = vec!["set", "image", o.as_str(), "-n", ns];
    w.extend(pairs.iter().map(String::as_str));
    kubectl(&w)
}

pub fn rollback(kind: Kind, ns: &str, name: &str, to: Option<u32>) -> Result<String> {
    let o = object(kind, name);
    let to = to.map(|r| format!("--to-revision={r}"));
    let mut w = vec!["rollout", "undo", o.as_str(), "-n", ns];
    w.extend(to.as_deref());
    kubectl(&w)
}

/// `kubectl exec` of `command` (each word one argument) in one pod.
pub fn exec(ns: &str, pod: &str, container: Option<&str>, command: &[String]) -> Result<String> {
    let mut w = vec!["exec", "-n", ns, pod];
    if let Some(c) = container {
        w.extend(["-c", c]);
    }
    w.push("--");
    w.extend(command.iter().map(String::as_str));
    kubectl(&w)
}

/// Delete the workload, then the Services labelled as ours for it (`manifest.rs` sets the
/// labels); what is already gone is not an error.
pub fn delete(kind: Kind, ns: &str, name: &str) -> Result<String> {
    let workload = kubectl(&["delete", kind.resource(), name, "-n", ns, "--ignore-not-found"])?;
    let selector = format!(
        "{}={name},{}=mgmt-driver",
        crate::workload::manifest::NAME_LABEL,
        crate::workload::manifest::MANAGED_BY
    );
    let services = kubectl(&["delete", "service", "-n", ns, "-l", &selector, "--ignore-not-found"])?;
    Ok(format!("{workload} && {services}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_quoted() {
        assert_eq!(
            get(Kind::Deployment, "default", "web").unwrap(),
            "kubectl get deployment.apps/web -n default -o json"
        );
        assert_eq!(
            scale(Kind::StatefulSet, "ns1", "db", 3).unwrap(),
            "kubectl scale statefulset.apps/db -n ns1 --replicas=3"
        );
        let cmd =
            exec("default", "web-1", Some("web"), &["sh".into(), "-c".into(), "echo $HOSTNAME; id".into()]).unwrap();
        assert_eq!(cmd, "kubectl exec -n default web-1 -c web -- sh -c 'echo $HOSTNAME; id'");
        assert_eq!(
            rollback(Kind::Deployment, "d", "web", Some(2)).unwrap(),
            "kubectl rollout undo deployment.apps/web -n d --to-revision=2"
        );
        assert_eq!(
            set_image(Kind::Deployment, "d", "web", &[("web".into(), "nginx:1".into())]).unwrap(),
            "kubectl set image deployment.apps/web -n d web=nginx:1"
        );
        assert_eq!(
            apply(".mgmt-driver/workloads/d.web.json").unwrap(),
            "kubectl apply -f .mgmt-driver/workloads/d.web.json; rc=$?; rm -f -- .mgmt-driver/workloads/d.web.json; exit $rc"
        );
        assert_eq!(
            delete(Kind::Deployment, "d", "web").unwrap(),
            "kubectl delete deployment.apps web -n d --ignore-not-found && kubectl delete service -n d -l \
             app.kubernetes.io/name=web,app.kubernetes.io/managed-by=mgmt-driver --ignore-not-found"
        );
    }
}
