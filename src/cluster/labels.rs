//! Placement labels on workers, as Tacker's sample driver sets them right after a worker joined:
//! `CIS-node=<compute host>` and `kubernetes.io/zone=<zone>`, so pods can be spread over
//! hypervisors and zones (Tacker's CNF samples use them in affinity rules).
//!
//! Where the values come from:
//! - an inventory: `placement: {<host>: {host_compute: ..., zone: ...}}` (`inventory/placement.rs`);
//! - a VnfInstance: the VNFC's SOL003 `vnfcResourceInfo[].zoneId` (Tacker v2 fills it from the
//!   VDU's placement), else `vnfcResourceInfo[].metadata.zone` (Tacker v2's metadata copy), and
//!   `vnfcResourceInfo[].metadata.host_compute` for the compute host (SOL003 has no field for it;
//!   Tacker v1 read Nova's `OS-EXT-SRV-ATTR:host`, which a VNFM's glue can copy there).
//!
//! A worker with neither value gets no label and no step (`labels_apply.rs`). Values are checked
//! as Kubernetes label values when the topology is read, before anything runs.

use crate::error::{Error, Result};
use crate::inventory::placement::Placement;
use crate::kube::kubectl::Kubectl;
use crate::request::VnfcResourceInfo;

pub const HOST_LABEL: &str = "CIS-node";
pub const ZONE_LABEL: &str = "kubernetes.io/zone";

/// A VNFC's placement from the VnfInstance (`at`: its JSON path, for messages).
pub fn placement_of(v: &VnfcResourceInfo, file: &str, at: &str) -> Result<Placement> {
    let meta = |key: &str| -> Result<Option<String>> {
        match v.metadata.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Error::input(file, format!("{at}.metadata.{key}"), "must be a string")),
        }
    };
    let (zone, zone_field) = match &v.zone_id {
        Some(z) => (Some(z.clone()), "zoneId"),
        None => (meta("zone")?, "metadata.zone"),
    };
    let p = Placement { host_compute: meta("host_compute")?, zone };
    p.check().map_err(|(field, m)| {
        let f = if field == "zone" { zone_field } else { "metadata.host_compute" };
        Error::input(file, format!("{at}.{f}"), m)
    })?;
    Ok(p)
}

/// The labels for a placement, in Tacker's order.
pub fn labels(p: &Placement) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(h) = &p.host_compute {
        v.push((HOST_LABEL.to_string(), h.clone()));
    }
    if let Some(z) = &p.zone {
        v.push((ZONE_LABEL.to_string(), z.clone()));
    }
    v
}

/// `kubectl label nodes <name> k=v... --overwrite` for each node, in one command for a master
/// (values checked again here); the first that fails stops the rest, and kubectl's message
/// names the node.
pub fn label_cmd(nodes: &[(String, Vec<(String, String)>)]) -> Result<String> {
    let mut lines = Vec::with_capacity(nodes.len());
    for (i, (k8s_name, labels)) in nodes.iter().enumerate() {
        let mut pairs = Vec::with_capacity(labels.len());
        for (k, v) in labels {
            crate::inventory::placement::check_label_value(v).map_err(|m| Error::input("placement", k, m))?;
            pairs.push(format!("{k}={v}"));
        }
        let mut words = vec!["label", "nodes", k8s_name.as_str()];
        words.extend(pairs.iter().map(String::as_str));
        words.push("--overwrite");
        // The first exports the admin kubeconfig; the ones chained after it run in that shell.
        let kubectl = if i == 0 { Kubectl::admin() } else { Kubectl::ambient() };
        lines.push(kubectl.args(&words)?);
    }
    Ok(lines.join(" && "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vnfc(v: serde_json::Value) -> VnfcResourceInfo {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn placement_from_zone_id_or_metadata_and_checked() {
        let at = "instantiatedVnfInfo.vnfcResourceInfo[id=w1]";
        let p = placement_of(
            &vnfc(json!({"id": "w1", "vduId": "w", "zoneId": "az-1", "metadata": {"zone": "other", "host_compute": "cmp-7"}})),
            "inst.json",
            at,
        )
        .unwrap();
        assert_eq!(p, Placement { host_compute: Some("cmp-7".into()), zone: Some("az-1".into()) });
        let p = placement_of(&vnfc(json!({"id": "w1", "vduId": "w", "metadata": {"zone": "nova"}})), "f", at).unwrap();
        assert_eq!(labels(&p), vec![(ZONE_LABEL.to_string(), "nova".to_string())]);
        assert!(placement_of(&vnfc(json!({"id": "w1", "vduId": "w"})), "f", at).unwrap().is_empty());
        let e = placement_of(&vnfc(json!({"id": "w1", "vduId": "w", "zoneId": "a z"})), "inst.json", at).unwrap_err();
        assert!(
            e.to_string().starts_with("inst.json: instantiatedVnfInfo.vnfcResourceInfo[id=w1].zoneId: 'a z'"),
            "{e}"
        );
        let e = placement_of(&vnfc(json!({"id": "w1", "vduId": "w", "metadata": {"host_compute": "$(id)"}})), "f", at)
            .unwrap_err();
        assert!(e.to_string().contains("metadata.host_compute"), "{e}");
        let e = placement_of(&vnfc(json!({"id": "w1", "vduId": "w", "metadata": {"zone": 1}})), "f", at).unwrap_err();
        assert!(e.to_string().contains("metadata.zone: must be a string"), "{e}");
    }

    #[test]
    fn the_label_command_overwrites_both_labels() {
        let p = Placement { host_compute: Some("cmp-7".into()), zone: Some("az-1".into()) };
        assert_eq!(
            label_cmd(&[("worker21".into(), labels(&p))]).unwrap(),
            "export KUBECONFIG=/etc/kubernetes/admin.conf; kubectl label nodes worker21 CIS-node=cmp-7 \
             kubernetes.io/zone=az-1 --overwrite"
        );
        let zone = |z: &str| vec![(ZONE_LABEL.to_string(), z.to_string())];
        assert_eq!(
            label_cmd(&[("w1".into(), zone("a")), ("w 2".into(), zone("b"))]).unwrap(),
            "export KUBECONFIG=/etc/kubernetes/admin.conf; kubectl label nodes w1 kubernetes.io/zone=a --overwrite \
             && kubectl label nodes 'w 2' kubernetes.io/zone=b --overwrite"
        );
        assert!(label_cmd(&[("w".into(), zone("a;b"))]).is_err());
    }

    #[test]
    fn an_inventory_placement_is_checked_and_names_a_host() {
        let d = tempfile::tempdir().unwrap();
        let load = |extra: &str| {
            let p = d.path().join("inv.yaml");
            std::fs::write(&p, format!("defaults: {{known_hosts: /dev/null}}\ngroups:\n  g:\n    - {{name: h1, ssh_ip: 192.0.2.1}}\n{extra}")).unwrap();
            let opts = crate::inventory::LoadOptions { credentials_from_request: true, ..Default::default() };
            crate::inventory::Inventory::load(&p, &opts).map_err(|e| e.to_string())
        };
        let inv = load("placement:\n  h1: {host_compute: c1, zone: z1}\n").unwrap();
        assert_eq!(inv.placement["h1"].zone.as_deref(), Some("z1"));
        let e = load("placement:\n  h2: {zone: z1}\n").unwrap_err();
        assert!(e.contains("placement.h2: names no host"), "{e}");
        let e = load("placement:\n  h1: {zone: 'a b'}\n").unwrap_err();
        assert!(e.contains("placement.h1.zone: 'a b' is not a Kubernetes label value"), "{e}");
        let e = load("placement:\n  h1: {rack: r1}\n").unwrap_err();
        assert!(e.contains("rack"), "{e}");
    }
}
