//! Where the storage pieces are, found before anything connects (`prepare`): the storage
//! server VM, each volume's block device, and each PersistentVolume manifest read from the
//! package, parsed as YAML (never edited as text) with `spec.nfs.server` set to the NFS CP's
//! address. Bad input stops here with exit 2.
//!
//! - The server: with `--vnf-instance`, the VNFC that has a CP `storage_server.ssh_cp_name`
//!   (its address as for masters and workers); with `--inventory`, the first host of the group
//!   named after `ssh_cp_name` (else of the group `storage_server`). It is not a cluster node.
//! - A volume's device: the request's `device` (our extension, for users without a VNFM);
//!   else the VnfInstance's `virtualStorageResourceInfo[]` entry whose `id`,
//!   `virtualStorageDescId` or `storageResource.resourceId` is `volume_resource_id`, through its
//!   `metadata.device`, else `/dev/disk/by-id/virtio-<first 20 characters of its resourceId>`
//!   (how KVM shows an attached Cinder volume); else that by-id path for `volume_resource_id`.
//! - `nfs_server_cp`'s address: the VnfInstance's CP (any VNFC or external CP), the inventory's
//!   `cps`, else the storage server's own cluster address when the CP is its `nic_cp_name` or
//!   `ssh_cp_name`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::params::{ClusterParams, RoleParams};
use crate::cluster::storage::{check_device, StorageServer};
use crate::cluster::topology::{self, ClusterNode, NodeDefaults, Topology};
use crate::error::{excerpt, Error, Result};
use crate::inventory::Inventory;
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::Role;
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

/// Where storage inputs come from (what `prepare` already has).
pub struct Sources<'a> {
    pub params: &'a ClusterParams,
    pub req_file: &'a str,
    pub inst: Option<(&'a VnfInstance, String)>,
    pub inventory: Option<(&'a Inventory, String)>,
    pub pkg: Option<&'a Package>,
    pub defaults: &'a NodeDefaults,
    pub topo: &'a Topology,
    pub store: &'a Store,
    pub instance_id: &'a str,
    /// Terminate needs only the PV names: a VnfInstance that no longer lists the storage
    /// server's VM (Tacker v1's terminate_end) is no error then.
    pub server_optional: bool,
}

const ROOT: &str = "additionalParams.k8s_cluster_installation_param";

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

/// [`locate`] with what `prepare` has: the inventory is read again (with the same options as
/// for the cluster's nodes), VMs from the VnfInstance log in as the cluster's do.
#[allow(clippy::too_many_arguments)] // prepare's inputs, passed through as they are
pub fn from_inputs(
    a: &crate::cluster::prepare::Inputs,
    inst: Option<&VnfInstance>,
    params: &ClusterParams,
    req_file: &str,
    pkg: Option<&Package>,
    topo: &Topology,
    store: &Store,
    instance_id: &str,
    server_optional: bool,
) -> Result<Option<StorageSetup>> {
    if params.storage.is_none() {
        return Ok(None);
    }
    let inv = match &a.inventory {
        Some(p) => {
            let opts = crate::inventory::LoadOptions { credentials_from_request: true, ..a.inventory_opts.clone() };
            Some((Inventory::load(p, &opts)?, p.display().to_string()))
        }
        None => None,
    };
    let defaults = NodeDefaults {
        known_hosts: a.known_hosts.clone().unwrap_or_else(|| store.dir().join("known_hosts")),
        host_key_check: crate::inventory::HostKeyCheck::AcceptNew,
    };
    let inst_name = a.vnf_instance.as_ref().map(crate::request::Doc::name).unwrap_or_default();
    locate(&Sources {
        params,
        req_file,
        inst: inst.map(|i| (i, inst_name)),
        inventory: inv.as_ref().map(|(i, f)| (i, f.clone())),
        pkg,
        defaults: &defaults,
        topo,
        store,
        instance_id,
        server_optional,
    })
}

/// Resolve the storage server, its devices and the PVs; `None` when the params have no storage.
pub fn locate(s: &Sources) -> Result<Option<StorageSetup>> {
    let Some(st) = &s.params.storage else { return Ok(None) };
    let server = match &st.server {
        Some(p) => match server_node(s, p) {
            Ok(n) => Some(n),
            Err(_) if s.server_optional => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let recorded: Option<StorageRecord> = s.store.load_doc(s.instance_id, KIND)?;
    let mut pvs = Vec::new();
    match s.pkg {
        Some(pkg) => {
            for (i, p) in st.pvs.iter().enumerate() {
                let at = format!("{ROOT}.pv_registration_params[{i}]");
                let addr = nfs_address(s, server.as_ref(), &p.nfs_server_cp).ok_or_else(|| {
                    Error::input(
                        s.req_file,
                        format!("{at}.nfs_server_cp"),
                        format!(
                            "no address for CP '{}' (in the VnfInstance, the inventory's cps, or the storage server's own CPs)",
                            p.nfs_server_cp
                        ),
                    )
                })?;
                let field = format!("{at}.pv_manifest_file_path");
                let path = pkg.resolve(&p.pv_manifest_file_path, s.req_file, &field, false)?;
                let text = crate::input_limit::read_capped(&path, 1 << 20, &field)?;
                let (name, json) = pv_manifest(&text, &addr).map_err(|m| {
                    Error::input(s.req_file, &field, format!("{}: {m}", excerpt(&p.pv_manifest_file_path)))
                })?;
                if let Some(srv) = &server {
                    let path = serde_json::from_str::<Value>(&json)
                        .ok()
                        .and_then(|v| v.pointer("/spec/nfs/path").and_then(Value::as_str).map(str::to_string));
                    let exported = path.as_deref().is_some_and(|p| {
                        srv.params.exports.iter().any(|e| {
                            let d = e.export_dir.trim_end_matches('/');
                            p == d || p.starts_with(&format!("{d}/"))
                        })
                    });
                    if !exported {
                        tracing::warn!(pv = %name, "the PV's spec.nfs.path is not under any export_dir");
                    }
                }
                if pvs.iter().any(|x: &Pv| x.name == name) {
                    return Err(Error::input(s.req_file, &field, format!("PersistentVolume '{name}' is listed twice")));
                }
                pvs.push(Pv { name, manifest: Some(json) });
            }
        }
        None => {
            for name in recorded.map(|r| r.pvs).unwrap_or_default() {
                if check_k8s_name(&name).is_ok() {
                    pvs.push(Pv { name, manifest: None });
                }
            }
        }
    }
    Ok(Some(StorageSetup { server, pvs, healed: false }))
}

fn server_node(s: &Sources, p: &StorageServer) -> Result<ServerNode> {
    let role = RoleParams {
        group: None,
        ssh_cp_name: p.ssh_cp_name.clone(),
        nic_cp_name: p.nic_cp_name.clone(),
        username: p.username.clone(),
        password: p.password.clone(),
    };
    let field = format!("{ROOT}.storage_server.ssh_cp_name");
    let (node, from_inst) = match (&s.inventory, &s.inst) {
        (Some((inv, inv_file)), _) => {
            let group = [p.ssh_cp_name.as_str(), "storage_server"]
                .into_iter()
                .find_map(|g| inv.groups.iter().find(|(n, _)| n == g))
                .ok_or_else(|| {
                    Error::input(
                        s.req_file,
                        &field,
                        format!(
                            "the inventory {inv_file} has no group '{}' (or 'storage_server') for the storage server",
                            p.ssh_cp_name
                        ),
                    )
                })?;
            let Some(&i) = group.1.first() else {
                return Err(Error::input(inv_file, format!("groups.{}", group.0), "is empty"));
            };
            let h = topology::with_request_credentials(inv.hosts[i].clone(), &role);
            let nic = h.nic_ip.clone().unwrap_or_else(|| h.addr.clone());
            (
                ClusterNode {
                    k8s_name: h.name.clone(),
                    nic_ip: nic,
                    role: Role::Node,
                    host: h,
                    placement: Default::default(),
                },
                None,
            )
        }
        (None, Some((inst, inst_file))) => {
            let vnfcs =
                inst.instantiated_vnf_info.as_ref().map(|i| i.vnfc_resource_info.as_slice()).unwrap_or_default();
            let v =
                vnfcs.iter().find(|v| v.vnfc_cp_info.iter().any(|c| c.cpd_id == p.ssh_cp_name)).ok_or_else(|| {
                    Error::input(
                        s.req_file,
                        &field,
                        format!("no vnfcResourceInfo of {inst_file} has a CP '{}'", p.ssh_cp_name),
                    )
                })?;
            let id_ok = !v.id.is_empty()
                && v.id.len() <= 253
                && v.id.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
            let at = format!("instantiatedVnfInfo.vnfcResourceInfo[id={}]", excerpt(&v.id));
            if !id_ok {
                return Err(Error::input(inst_file, format!("{at}.id"), "a VNFC id is letters, digits, '-', '_', '.'"));
            }
            let ssh = inst.address_of(v, &p.ssh_cp_name).ok_or_else(|| {
                Error::input(inst_file, &at, format!("no address for storage_server.ssh_cp_name '{}'", p.ssh_cp_name))
            })?;
            let nic = inst.address_of(v, &p.nic_cp_name).unwrap_or_else(|| ssh.clone());
            for a in [&ssh, &nic] {
                if a.parse::<std::net::IpAddr>().is_err() {
                    return Err(Error::input(
                        inst_file,
                        &at,
                        format!("the storage server's address '{}' is not an IP address", excerpt(a)),
                    ));
                }
            }
            let host = s.defaults.request_login(&v.id, &ssh, &nic, &role, vec!["storage_server".into()]);
            (
                ClusterNode {
                    k8s_name: v.id.clone(),
                    nic_ip: nic,
                    role: Role::Node,
                    host,
                    placement: Default::default(),
                },
                Some(*inst),
            )
        }
        (None, None) => unreachable!("prepare needs an inventory or a VnfInstance"),
    };
    if s.topo.all().any(|n| n.name() == node.name() || n.host.addr == node.host.addr) {
        return Err(Error::input(
            s.req_file,
            &field,
            format!("the storage server {} is also a node of the cluster; it must be a VM of its own", node.name()),
        ));
    }
    let devices = p
        .volumes
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let d =
                v.device.clone().or_else(|| from_inst.and_then(|inst| instance_device(inst, &v.volume_resource_id)));
            let d = d.unwrap_or_else(|| by_id(&v.volume_resource_id));
            check_device(&d).map(|_| d).map_err(|m| {
                Error::input(
                    s.req_file,
                    format!("{ROOT}.storage_server.cinder_volume_setup_params[{i}].volume_resource_id"),
                    format!("the volume's device: {m}"),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ServerNode { node, params: p.clone(), devices })
}

/// `/dev/disk/by-id/virtio-<first 20 characters>`: the serial KVM gives a virtio disk is the
/// Cinder volume id cut to 20 characters.
pub fn by_id(volume_id: &str) -> String {
    format!("/dev/disk/by-id/virtio-{}", volume_id.chars().take(20).collect::<String>())
}

/// The device of the VnfInstance's storage resource named `rid`.
fn instance_device(inst: &VnfInstance, rid: &str) -> Option<String> {
    let list = inst.instantiated_vnf_info.as_ref()?.rest.get("virtualStorageResourceInfo")?.as_array()?;
    let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let e = list.iter().find(|e| {
        [s(e, "/id"), s(e, "/virtualStorageDescId"), s(e, "/storageResource/resourceId")]
            .iter()
            .any(|x| x.as_deref() == Some(rid))
    })?;
    s(e, "/metadata/device")
        .filter(|d| check_device(d).is_ok())
        .or_else(|| s(e, "/storageResource/resourceId").map(|r| by_id(&r)))
}

/// The address of CP `cp` for the PVs' `spec.nfs.server`.
fn nfs_address(s: &Sources, server: Option<&ServerNode>, cp: &str) -> Option<String> {
    let from_inst = s.inst.as_ref().and_then(|(i, _)| i.any_address_of(cp));
    let from_inv = s.inventory.as_ref().and_then(|(i, _)| i.cps.get(cp).cloned());
    let own = server.and_then(|srv| {
        let p = &srv.params;
        (cp == p.nic_cp_name || cp == p.ssh_cp_name).then(|| srv.node.nic_ip.clone())
    });
    from_inst.or(from_inv).or(own).filter(|a| a.parse::<std::net::IpAddr>().is_ok())
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

    #[test]
    fn a_volume_device_comes_from_the_instance_or_the_by_id_path() {
        let inst: VnfInstance = serde_json::from_value(serde_json::json!({
            "id": "i", "instantiatedVnfInfo": {"virtualStorageResourceInfo": [
                {"id": "vs1", "virtualStorageDescId": "storage_server_volume",
                 "storageResource": {"resourceId": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}},
                {"id": "vs2", "virtualStorageDescId": "other", "storageResource": {"resourceId": "x"},
                 "metadata": {"device": "/dev/vdc"}}]}}))
        .unwrap();
        assert_eq!(
            instance_device(&inst, "storage_server_volume").as_deref(),
            Some("/dev/disk/by-id/virtio-0f1e2d3c-4b5a-6978-8")
        );
        assert_eq!(instance_device(&inst, "other").as_deref(), Some("/dev/vdc"));
        assert_eq!(instance_device(&inst, "missing"), None);
        assert_eq!(by_id("short"), "/dev/disk/by-id/virtio-short");
    }

    #[test]
    fn the_server_comes_from_the_vnfc_with_the_cp_and_terminate_does_without_it() {
        let ap = serde_json::json!({"k8s_cluster_installation_param": {
            "script_path": "s.sh",
            "master_node": {"aspect_id": "m", "ssh_cp_name": "m_CP", "username": "u", "password": "pw", "cluster_cp_name": "m_CP"},
            "worker_node": {"aspect_id": "w", "ssh_cp_name": "w_CP", "username": "u", "password": "pw"},
            "storage_server": {"ssh_cp_name": "s_CP", "username": "u", "password": "pw",
                "cinder_volume_setup_params": [{"volume_resource_id": "vol", "mount_to": "/volume"}],
                "nfs_server_setup_params": [{"export_dir": "/volume/a", "export_to": "10.0.0.0/24"}]}}});
        let params = ClusterParams::from_additional_params(ap.as_object().unwrap(), "req.json", "i").unwrap();
        let cp = |ip: &str| {
            serde_json::json!([{"cpdId": "s_CP", "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
                "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}]}])
        };
        let with_vm: VnfInstance = serde_json::from_value(serde_json::json!({"id": "i", "instantiatedVnfInfo": {
            "vnfcResourceInfo": [{"id": "vm-s", "vduId": "storage", "vnfcCpInfo": cp("10.0.0.45")}]}}))
        .unwrap();
        let emptied: VnfInstance =
            serde_json::from_value(serde_json::json!({"id": "i", "instantiatedVnfInfo": {}})).unwrap();
        let d = tempfile::tempdir().unwrap();
        let store = Store::read_only(d.path());
        let defaults = NodeDefaults {
            known_hosts: d.path().join("kh"),
            host_key_check: crate::inventory::HostKeyCheck::AcceptNew,
        };
        let topo = Topology { masters: vec![], workers: vec![], cluster_ip: "10.0.0.1".into(), cluster_fip: None };
        let src = |inst, server_optional| Sources {
            params: &params,
            req_file: "req.json",
            inst: Some((inst, "inst.json".into())),
            inventory: None,
            pkg: None,
            defaults: &defaults,
            topo: &topo,
            store: &store,
            instance_id: "i",
            server_optional,
        };
        let (with_vm, emptied) = (&with_vm, &emptied);
        let s = locate(&src(with_vm, false)).unwrap().unwrap();
        let srv = s.server.as_ref().unwrap();
        assert_eq!((srv.node.name(), srv.node.host.addr.as_str()), ("vm-s", "10.0.0.45"));
        assert_eq!(srv.devices, vec!["/dev/disk/by-id/virtio-vol".to_string()]);
        assert_eq!(s.heal_target(Some(with_vm), "vm-s").as_deref(), Some("vm-s"));
        assert!(s.is_target(&["vm-s".to_string()]) && !s.is_target(&["m1".to_string()]));
        let e = locate(&src(emptied, false)).unwrap_err().to_string();
        assert!(e.contains("storage_server.ssh_cp_name: no vnfcResourceInfo of inst.json has a CP 's_CP'"), "{e}");
        assert!(locate(&src(emptied, true)).unwrap().unwrap().server.is_none());
    }
}
