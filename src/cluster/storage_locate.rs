//! Where the storage pieces are, found before anything connects (`prepare`): the storage
//! server VM, each volume's block device, and each PersistentVolume manifest read from the
//! package (`storage_setup.rs` holds what is found and parses the manifests). Bad input stops
//! here with exit 2.
//!
//! - The server: with `--vnf-instance`, the VNFC that has a CP `storage_server.ssh_cp_name`
//!   (its address as for masters and workers); with `--inventory`, the first host of the group
//!   named after `ssh_cp_name` (else of the group `storage_server`), else the inventory's named
//!   CP `ssh_cp_name` (`cps: {nfs_CP: 10.0.0.45}`, given as the VIP is), logged into with the
//!   request's `storage_server` credentials. It is not a cluster node.
//! - A volume's device: the request's `device` (our extension, for users without a VNFM);
//!   else the VnfInstance's `virtualStorageResourceInfo[]` entry whose `id`,
//!   `virtualStorageDescId` or `storageResource.resourceId` is `volume_resource_id`, through its
//!   `metadata.device`, else `/dev/disk/by-id/virtio-<first 20 characters of its resourceId>`
//!   (how KVM shows an attached Cinder volume); else that by-id path for `volume_resource_id`.
//! - `nfs_server_cp`'s address: the VnfInstance's CP (any VNFC or external CP), the inventory's
//!   `cps`, else the storage server's own cluster address when the CP is its `nic_cp_name` or
//!   `ssh_cp_name`.

use serde_json::Value;

use crate::cluster::inputs::Inputs;
use crate::cluster::params::{ClusterParams, RoleParams};
use crate::cluster::storage::{check_device, StorageServer};
use crate::cluster::storage_setup::{check_k8s_name, pv_manifest, Pv, ServerNode, StorageRecord, StorageSetup, KIND};
use crate::cluster::topology::{self, ClusterNode, NodeDefaults, Topology};
use crate::error::{excerpt, Error, Result};
use crate::inventory::Inventory;
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::Role;
use crate::request::VnfInstance;

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

/// [`locate`] with what `prepare` has: the inventory is read again (with the same options as
/// for the cluster's nodes), VMs from the VnfInstance log in as the cluster's do.
#[allow(clippy::too_many_arguments)] // prepare's inputs, passed through as they are
pub fn from_inputs(
    a: &Inputs,
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
        known_hosts: a.known_hosts.clone().unwrap_or_else(|| crate::cluster::instance_hosts::path(store, instance_id)),
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
    let mut warnings = Vec::new();
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
                        warnings
                            .push(format!("PersistentVolume '{name}': its spec.nfs.path is not under any export_dir"));
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
    Ok(Some(StorageSetup { server, pvs, healed: false, warnings }))
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
        (Some((inv, inv_file)), _) => (server_from_inventory(s, inv, inv_file, p, &role, &field)?, None),
        (None, Some((inst, inst_file))) => (server_from_instance(s, inst, inst_file, p, &role, &field)?, Some(*inst)),
        (None, None) => unreachable!("prepare needs an inventory or a VnfInstance"),
    };
    if s.topo.all().any(|n| n.name() == node.name() || n.host.addr == node.host.addr) {
        return Err(Error::input(
            s.req_file,
            &field,
            format!("the storage server {} is also a node of the cluster; it must be a VM of its own", node.name()),
        ));
    }
    let devices = volume_devices(s, p, from_inst)?;
    Ok(ServerNode { node, params: p.clone(), devices })
}

/// The storage server from the inventory: the first host of the group named after its
/// `ssh_cp_name`, else of the group `storage_server`, else the named CP `ssh_cp_name` (an
/// inventory that lists CP addresses, as it gives the VIP, rather than the VM as a host).
fn server_from_inventory(
    s: &Sources,
    inv: &Inventory,
    inv_file: &str,
    p: &StorageServer,
    role: &RoleParams,
    field: &str,
) -> Result<ClusterNode> {
    let group =
        [p.ssh_cp_name.as_str(), "storage_server"].into_iter().find_map(|g| inv.groups.iter().find(|(n, _)| n == g));
    let Some(group) = group else {
        return server_from_inventory_cp(s, inv, inv_file, p, role, field);
    };
    let Some(&i) = group.1.first() else {
        return Err(Error::input(inv_file, format!("groups.{}", group.0), "is empty"));
    };
    let h = topology::with_request_credentials(inv.hosts[i].clone(), role);
    let nic = h.nic_ip.clone().unwrap_or_else(|| h.addr.clone());
    Ok(ClusterNode { k8s_name: h.name.clone(), nic_ip: nic, role: Role::Node, host: h, placement: Default::default() })
}

/// The storage server as the inventory's named CP `ssh_cp_name` (its `nic_cp_name` CP, when
/// listed, for the NFS address), reached with the request's `storage_server` login. The node is
/// named after the CP: the inventory names no VM for it.
fn server_from_inventory_cp(
    s: &Sources,
    inv: &Inventory,
    inv_file: &str,
    p: &StorageServer,
    role: &RoleParams,
    field: &str,
) -> Result<ClusterNode> {
    let Some(ssh) = inv.cps.get(&p.ssh_cp_name) else {
        return Err(Error::input(
            s.req_file,
            field,
            format!(
                "the inventory {inv_file} has no group '{}' (or 'storage_server') and no cps entry '{}' for the storage server",
                p.ssh_cp_name, p.ssh_cp_name
            ),
        ));
    };
    let nic = inv.cps.get(&p.nic_cp_name).unwrap_or(ssh);
    for (cp, a) in [(&p.ssh_cp_name, ssh), (&p.nic_cp_name, nic)] {
        if a.parse::<std::net::IpAddr>().is_err() {
            return Err(Error::input(inv_file, format!("cps.{cp}"), format!("'{}' is not an IP address", excerpt(a))));
        }
    }
    let name = &p.ssh_cp_name;
    let host = s.defaults.request_login(name, ssh, nic, role, vec!["storage_server".into()]);
    Ok(ClusterNode {
        k8s_name: name.clone(),
        nic_ip: nic.clone(),
        role: Role::Node,
        host,
        placement: Default::default(),
    })
}

/// The storage server from the VnfInstance: the VNFC that has a CP `ssh_cp_name`, reached as
/// masters and workers are.
fn server_from_instance(
    s: &Sources,
    inst: &VnfInstance,
    inst_file: &str,
    p: &StorageServer,
    role: &RoleParams,
    field: &str,
) -> Result<ClusterNode> {
    let vnfcs = inst.instantiated_vnf_info.as_ref().map(|i| i.vnfc_resource_info.as_slice()).unwrap_or_default();
    let v = vnfcs.iter().find(|v| v.vnfc_cp_info.iter().any(|c| c.cpd_id == p.ssh_cp_name)).ok_or_else(|| {
        Error::input(s.req_file, field, format!("no vnfcResourceInfo of {inst_file} has a CP '{}'", p.ssh_cp_name))
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
    let host = s.defaults.request_login(&v.id, &ssh, &nic, role, vec!["storage_server".into()]);
    Ok(ClusterNode { k8s_name: v.id.clone(), nic_ip: nic, role: Role::Node, host, placement: Default::default() })
}

/// The block device of each `cinder_volume_setup_params[]` entry, in order: the request's
/// `device`, else the VnfInstance's (`from_inst`), else the by-id path of its resource id.
fn volume_devices(s: &Sources, p: &StorageServer, from_inst: Option<&VnfInstance>) -> Result<Vec<String>> {
    p.volumes
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
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let params = ClusterParams::from_additional_params(
            ap.as_object().unwrap(),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
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

        // An inventory that gives the server as it gives the VIP, a named CP address: the
        // server is that address, logged into with the request's storage_server credentials.
        let opts = crate::inventory::LoadOptions {
            ssh_config: crate::inventory::SshConfigSource::None,
            credentials_from_request: true,
            ..Default::default()
        };
        let inv =
            |text: &str| Inventory::parse(text, "inv.yaml", std::path::Path::new("/"), &|_: &str| None, &opts).unwrap();
        let by_cp = inv("groups:\n  m: [{name: m1, ssh_ip: 10.0.0.11}]\ncps:\n  s_CP: 10.0.0.45\n");
        let no_cp = inv("groups:\n  m: [{name: m1, ssh_ip: 10.0.0.11}]\ncps:\n  vip_CP: 10.0.0.1\n");
        let bad_cp = inv("groups:\n  m: [{name: m1, ssh_ip: 10.0.0.11}]\ncps:\n  s_CP: nfs.example\n");
        let from_inv = |i| Sources { inst: None, inventory: Some((i, "inv.yaml".into())), ..src(with_vm, false) };
        let s = locate(&from_inv(&by_cp)).unwrap().unwrap();
        let srv = s.server.as_ref().unwrap();
        assert_eq!(
            (srv.node.name(), srv.node.host.addr.as_str(), srv.node.nic_ip.as_str()),
            ("s_CP", "10.0.0.45", "10.0.0.45")
        );
        assert_eq!(srv.node.host.user, "u");
        assert_eq!(srv.node.host.auth.password.as_ref().map(|p| p.expose()), Some("pw"));
        let e = locate(&from_inv(&no_cp)).unwrap_err().to_string();
        assert!(e.contains("has no group 's_CP' (or 'storage_server') and no cps entry 's_CP'"), "{e}");
        let e = locate(&from_inv(&bad_cp)).unwrap_err().to_string();
        assert!(e.contains("cps.s_CP") && e.contains("is not an IP address"), "{e}");
    }
}
