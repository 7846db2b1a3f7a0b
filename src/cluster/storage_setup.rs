//! What the storage steps work on, resolved from the params before anything connects
//! (`storage_locate.rs` finds it): the storage server VM with its volumes' block devices, and
//! each PersistentVolume with its manifest, parsed as YAML (never edited as text) with
//! `spec.nfs.server` set to the NFS CP's address. Also the record of the registered PVs' names.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::storage::StorageServer;
use crate::cluster::topology::ClusterNode;
use crate::error::excerpt;
use crate::request::VnfInstance;

/// The store document (`<id>.storage.json`) that remembers the registered PVs' names, so
/// terminate and heal can delete them without the package.
pub const KIND: &str = "storage";

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StorageRecord {
    #[serde(default)]
    pub pvs: Vec<String>,
}

/// Everything the storage steps need, resolved.
#[derive(Clone, Debug)]
pub struct StorageSetup {
    pub server: Option<ServerNode>,
    pub pvs: Vec<Pv>,
    /// A SOL002 heal names the storage server (set by `prepare` from the heal's targets).
    pub healed: bool,
    /// What the operator should know (a PV outside every export); `prepare` hands them to the
    /// result's warnings with the params' own.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct ServerNode {
    pub node: ClusterNode,
    pub params: StorageServer,
    /// The block device of each `cinder_volume_setup_params[]` entry, in order.
    pub devices: Vec<String>,
}

/// One PersistentVolume: its name, and its manifest as JSON with the NFS server set (absent
/// when the package was not given: terminate and heal-start only delete by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pv {
    pub name: String,
    pub manifest: Option<String>,
}

impl StorageSetup {
    /// Whether `names` (a heal's or `--node`'s targets) include the storage server.
    pub fn is_target(&self, names: &[String]) -> bool {
        self.server.as_ref().is_some_and(|s| names.iter().any(|n| n == s.node.name()))
    }

    /// The storage server's name when a SOL002 `vnfcInstanceId` names it (directly, or through
    /// the instance's `vnfcInfo`).
    pub fn heal_target(&self, inst: Option<&VnfInstance>, id: &str) -> Option<String> {
        let s = self.server.as_ref()?;
        let via_inst = inst.and_then(|i| i.vnfc_resource_for(id)).map(|v| v.id.as_str());
        (id == s.node.name() || via_inst == Some(s.node.name())).then(|| s.node.name().to_string())
    }
}

/// A Kubernetes object name (DNS subdomain, RFC 1123).
pub fn check_k8s_name(n: &str) -> std::result::Result<(), String> {
    let ok = !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!("'{}' is not a Kubernetes object name (lower-case DNS subdomain)", excerpt(n)))
    }
}

/// Parse one PersistentVolume manifest (YAML, one document), check it is a v1
/// PersistentVolume with `spec.nfs.path`, set `spec.nfs.server` to `server`, and return its
/// name and the object as JSON (what `kubectl apply -f` gets).
pub fn pv_manifest(text: &str, server: &str) -> std::result::Result<(String, String), String> {
    use serde::Deserialize as _;
    crate::inventory::yaml_limits::check(text)?;
    let mut docs = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| format!("not YAML: {e}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    let mut v = match docs.len() {
        1 => docs.remove(0),
        n => return Err(format!("must hold exactly one PersistentVolume, found {n} documents")),
    };
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    if s("/apiVersion") != "v1" || s("/kind") != "PersistentVolume" {
        return Err(format!("is a {} {}, not a v1 PersistentVolume", excerpt(&s("/apiVersion")), excerpt(&s("/kind"))));
    }
    let name = s("/metadata/name");
    check_k8s_name(&name).map_err(|m| format!("metadata.name: {m}"))?;
    if v.pointer("/metadata/namespace").is_some() {
        return Err("a PersistentVolume is cluster-scoped: remove metadata.namespace".into());
    }
    let Some(nfs) = v.pointer_mut("/spec/nfs").and_then(Value::as_object_mut) else {
        return Err("has no spec.nfs (only NFS PersistentVolumes are registered)".into());
    };
    match nfs.get("path").and_then(Value::as_str) {
        Some(p) if p.starts_with('/') => {}
        _ => return Err("spec.nfs.path must be an absolute path".into()),
    }
    nfs.insert("server".into(), Value::String(server.to_string()));
    Ok((name, serde_json::to_string(&v).expect("serializes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const PV1: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nfs-pv1\nspec:\n  capacity:\n    storage: 1Gi\n  persistentVolumeReclaimPolicy: Retain\n  accessModes:\n    - ReadWriteOnce\n  nfs:\n    server: 0.0.0.0\n    path: \"/volume/nfs/pv1\"\n";

    #[test]
    fn the_server_is_set_in_the_parsed_object_not_in_the_text() {
        let (name, json) = pv_manifest(PV1, "10.10.0.45").unwrap();
        assert_eq!(name, "nfs-pv1");
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["spec"]["nfs"]["server"], "10.10.0.45");
        assert_eq!(v["spec"]["nfs"]["path"], "/volume/nfs/pv1");
        assert_eq!(v["spec"]["capacity"]["storage"], "1Gi");
        // A comment or a look-alike line elsewhere is not touched (a sed would have).
        let tricky = PV1.replace("metadata:", "metadata:\n  annotations: {note: \"server: 0.0.0.0\"}");
        let (_, json) = pv_manifest(&tricky, "10.10.0.45").unwrap();
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["metadata"]["annotations"]["note"], "server: 0.0.0.0");
    }

    #[test]
    fn what_is_not_one_nfs_persistent_volume_is_refused() {
        for (text, why) in [
            ("kind: Pod\napiVersion: v1\nmetadata: {name: p}\n", "not a v1 PersistentVolume"),
            (
                &PV1.replace(
                    "  nfs:\n    server: 0.0.0.0\n    path: \"/volume/nfs/pv1\"\n",
                    "  hostPath: {path: /x}\n",
                ),
                "no spec.nfs",
            ),
            (&PV1.replace("nfs-pv1", "NFS_pv1"), "metadata.name"),
            (&format!("{PV1}---\n{PV1}"), "found 2 documents"),
            (&PV1.replace("\"/volume/nfs/pv1\"", "relative"), "absolute"),
            ("a: [b", "not YAML"),
            (&PV1.replace("  name: nfs-pv1\n", "  name: nfs-pv1\n  namespace: default\n"), "cluster-scoped"),
        ] {
            let e = pv_manifest(text, "10.0.0.1").unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
