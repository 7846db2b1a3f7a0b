//! What the API server says about a workload and its pods (`kubectl get -o json`), read back
//! and checked before anything is reused: the object must be the one asked for, counts are
//! small non-negative integers, the selector's labels and the pod names are valid names, and
//! containers' names and images are valid. Anything else is "unreadable", naming what. Pure.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::workload::kind::Kind;
use crate::workload::names;

/// A workload's replica counts and what identifies its pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub desired: u64,
    pub updated: u64,
    pub ready: u64,
    pub available: u64,
    /// The controller has seen the latest spec (`status.observedGeneration >= metadata.generation`).
    pub observed: bool,
    /// A Deployment's revision (`deployment.kubernetes.io/revision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Container name → image, in the pod template's order.
    #[serde(skip)]
    pub images: Vec<(String, String)>,
    #[serde(skip)]
    pub selector: BTreeMap<String, String>,
}

impl Status {
    /// DCAE's `is_available`: available == updated == desired replicas (and the controller has
    /// seen the latest spec, or the counts are of an older one).
    pub fn is_available(&self) -> bool {
        self.observed && self.available == self.desired && self.updated == self.desired
    }

    /// `k=v,k2=v2`, for `kubectl get pods -l`.
    pub fn selector_text(&self) -> String {
        self.selector.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    pub fn summary(&self) -> String {
        format!("{}/{} available, {}/{} updated", self.available, self.desired, self.updated, self.desired)
    }
}

const MAX_COUNT: u64 = 1_000_000;

fn count(v: &Value, path: &str) -> Result<u64, String> {
    match v.pointer(path) {
        None | Some(Value::Null) => Ok(0), // the API leaves zero counts out
        Some(x) => x.as_u64().filter(|n| *n <= MAX_COUNT).ok_or_else(|| format!("{path} is not a count: {x}")),
    }
}

/// Parse `kubectl get <kind>/<name> -o json`.
pub fn parse(text: &str, kind: Kind, name: &str) -> Result<Status, String> {
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("kind").and_then(Value::as_str) != Some(kind.api())
        || v.pointer("/metadata/name").and_then(Value::as_str) != Some(name)
    {
        return Err(format!("not the {} {name}", kind.api()));
    }
    let desired = match v.pointer("/spec/replicas") {
        None | Some(Value::Null) => 1,
        Some(_) => count(&v, "/spec/replicas")?,
    };
    let generation = count(&v, "/metadata/generation")?;
    let observed = count(&v, "/status/observedGeneration")? >= generation;
    let updated = count(&v, "/status/updatedReplicas")?;
    let ready = count(&v, "/status/readyReplicas")?;
    let available = count(&v, "/status/availableReplicas")?;
    let revision = match v.pointer("/metadata/annotations/deployment.kubernetes.io~1revision") {
        None => None,
        Some(r) => Some(
            r.as_str().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| format!("revision {r} is not a number"))?,
        ),
    };
    let mut selector = BTreeMap::new();
    if let Some(m) = v.pointer("/spec/selector/matchLabels").and_then(Value::as_object) {
        for (k, val) in m {
            let val = val.as_str().ok_or_else(|| format!("selector label {k} is not text"))?;
            // Our own labels are valid selectors too: checked as a plain label key and value.
            let own = names::OWN_LABELS.contains(&k.as_str());
            if !own {
                names::label(k, val)?;
            } else {
                names::label("x", val)?;
            }
            selector.insert(k.clone(), val.to_string());
        }
    }
    if selector.is_empty() {
        return Err("the workload has no matchLabels selector".into());
    }
    let mut images = Vec::new();
    for c in v.pointer("/spec/template/spec/containers").and_then(Value::as_array).into_iter().flatten() {
        let n = c.get("name").and_then(Value::as_str).unwrap_or("");
        let i = c.get("image").and_then(Value::as_str).unwrap_or("");
        names::container(n)?;
        names::image(i)?;
        images.push((n.to_string(), i.to_string()));
    }
    Ok(Status { desired, updated, ready, available, observed, revision, images, selector })
}

/// A pod of the workload, as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pod {
    pub name: String,
    pub node: String,
    pub phase: String,
}

/// The running pods (phase Running, not being deleted) from `kubectl get pods -o json`, in
/// name order.
pub fn running_pods(text: &str) -> Result<Vec<Pod>, String> {
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let items = v.get("items").and_then(Value::as_array).ok_or("no items list")?;
    let mut out = Vec::new();
    for p in items {
        let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        names::pod(name)?;
        let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        let deleting = p.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
        if phase != "Running" || deleting {
            continue;
        }
        let node = p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
        if !node.is_empty() {
            names::pod(node).map_err(|_| format!("'{}' is not a node name", crate::error::excerpt(node)))?;
        }
        out.push(Pod { name: name.into(), node: node.into(), phase: phase.into() });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deploy(status: Value) -> String {
        json!({"kind": "Deployment", "metadata": {"name": "web", "generation": 2,
               "annotations": {"deployment.kubernetes.io/revision": "3"}},
               "spec": {"replicas": 3, "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                        "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}},
               "status": status})
        .to_string()
    }

    #[test]
    fn available_is_available_equals_updated_equals_desired() {
        let all = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3});
        let s = parse(&deploy(all.clone()), Kind::Deployment, "web").unwrap();
        assert!(s.is_available());
        assert_eq!((s.revision, s.selector_text()), (Some(3), "app.kubernetes.io/name=web".to_string()));
        assert_eq!(s.images, vec![("web".to_string(), "nginx:1".to_string())]);
        let mut half = all.clone();
        half["availableReplicas"] = json!(2);
        assert!(!parse(&deploy(half), Kind::Deployment, "web").unwrap().is_available());
        let mut old = all.clone();
        old["observedGeneration"] = json!(1);
        assert!(!parse(&deploy(old), Kind::Deployment, "web").unwrap().is_available(), "counts of an older spec");
        assert!(!parse(&deploy(json!({})), Kind::Deployment, "web").unwrap().is_available(), "absent counts are 0");
    }

    #[test]
    fn read_back_values_are_checked() {
        let good = json!({"observedGeneration": 2});
        assert!(parse(&deploy(good.clone()), Kind::Deployment, "other").is_err(), "another object");
        assert!(parse(&deploy(good.clone()), Kind::StatefulSet, "web").is_err(), "another kind");
        assert!(parse(&deploy(json!({"availableReplicas": -1})), Kind::Deployment, "web").is_err());
        assert!(parse(&deploy(json!({"availableReplicas": "3"})), Kind::Deployment, "web").is_err());
        let hostile = deploy(good)
            .replace("\"app.kubernetes.io/name\":\"web\"", "\"app.kubernetes.io/name\":\"web,x notin (a)\"");
        assert!(parse(&hostile, Kind::Deployment, "web").is_err(), "a selector that is not a label");
        let img = deploy(json!({})).replace("nginx:1", "nginx; reboot");
        assert!(parse(&img, Kind::Deployment, "web").is_err());
        assert!(parse("Error from server", Kind::Deployment, "web").is_err());
    }

    #[test]
    fn running_pods_only_and_names_checked() {
        let list = json!({"items": [
            {"metadata": {"name": "web-7d9-b2x"}, "spec": {"nodeName": "worker12"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "web-7d9-a1q"}, "spec": {"nodeName": "worker12"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "web-7d9-zzz"}, "status": {"phase": "Pending"}},
            {"metadata": {"name": "web-7d9-del", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}]});
        let pods = running_pods(&list.to_string()).unwrap();
        assert_eq!(pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["web-7d9-a1q", "web-7d9-b2x"]);
        let bad = list.to_string().replace("web-7d9-b2x", "-n; reboot");
        assert!(running_pods(&bad).is_err());
        assert!(running_pods("{}").is_err());
    }
}
