//! Hostile inputs to the storage blocks of `k8s_cluster_installation_param` (`storage_server`,
//! `pv_registration_params`), on Tacker's v1 sample body with a storage block shaped like
//! Tacker's PV guide: every bad value exits 2 naming its JSON path, nothing planned; the good
//! body plans every storage step and never shows the storage server's password.

use serde_json::{json, Value};

use crate::case::{remove, set, Case};

const P: &str = "/additionalParams/k8s_cluster_installation_param";
const PW: &str = "pw-hostile-storage";
const ROOT: &str = "additionalParams.k8s_cluster_installation_param";

const PV: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nfs-pv1\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  nfs: {server: 0.0.0.0, path: /volume/nfs/pv1}\n";

/// The sample body with a storage server and one PV.
fn base() -> Value {
    let text = include_str!("../data/tacker/v1/k8s-cluster/simple_kubernetes_param_file.json");
    let v: Value = serde_json::from_str(text).expect("Tacker sample");
    let v = set(v, &format!("{P}/master_node/password"), json!(PW));
    let v = set(v, &format!("{P}/worker_node/password"), json!(PW));
    let v = set(
        v,
        &format!("{P}/storage_server"),
        json!({"ssh_cp_name": "storage_server_CP", "nic_cp_name": "storage_server_CP", "username": "ubuntu",
               "password": PW,
               "cinder_volume_setup_params": [{"volume_resource_id": "storage_server_volume", "mount_to": "/volume"}],
               "nfs_server_setup_params": [{"export_dir": "/volume/nfs/pv1", "export_to": "10.10.0.0/24"}]}),
    );
    set(
        v,
        &format!("{P}/pv_registration_params"),
        json!([{"pv_manifest_file_path": "Files/kubernetes/nfs-pv1.yaml", "nfs_server_cp": "storage_server_CP"}]),
    )
}

const INV: &str = "defaults: {known_hosts: '{dir}/kh'}\ngroups:\n  master_instance:\n    - {name: m1, ssh_ip: 192.0.2.11}\n  worker_instance:\n    - {name: w1, ssh_ip: 192.0.2.21}\n  storage_server_CP:\n    - {name: nfs1, ssh_ip: 192.0.2.31}\n";

fn case(name: &str, body: Value, field: Option<&str>) -> Case {
    let args = crate::case::INSTANTIATE_ARGS;
    let c = match field {
        Some(f) => Case::rejected(format!("storage/{name}"), &args, f),
        None => Case::accepted(
            format!("storage/{name}"),
            &args,
            &[
                "storage_volume.sh /dev/disk/by-id/virtio-storage_server_volum /volume",
                "nfs_exports.sh /volume/nfs/pv1 10.10.0.0/24",
                "nfs_packages.sh nfs-common",
                "kubectl apply -f",
            ],
            &[PW],
        ),
    };
    c.never(PW)
        .file("inv.yaml", INV)
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\n")
        .file("pkg/Files/kubernetes/nfs-pv1.yaml", PV)
        .file("pkg/Files/kubernetes/not-a-pv.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
        .file("req.json", serde_json::to_string_pretty(&body).expect("json"))
}

fn bad(name: &str, ptr: &str, v: Value, field: &str) -> Case {
    case(name, set(base(), &format!("{P}{ptr}"), v), Some(&format!("{ROOT}{field}")))
}

pub fn cases() -> Vec<Case> {
    let s = "/storage_server";
    vec![
        case("tacker-pv-guide-shape-plans-every-step", base(), None),
        bad(
            "export-to-wildcard",
            &format!("{s}/nfs_server_setup_params/0/export_to"),
            json!("*"),
            ".storage_server.nfs_server_setup_params[0].export_to",
        ),
        bad(
            "export-to-with-options",
            &format!("{s}/nfs_server_setup_params/0/export_to"),
            json!("10.0.0.0/8(rw,no_root_squash)"),
            ".storage_server.nfs_server_setup_params[0].export_to",
        ),
        bad(
            "export-to-newline",
            &format!("{s}/nfs_server_setup_params/0/export_to"),
            json!("10.0.0.1\n/ *(rw)"),
            ".storage_server.nfs_server_setup_params[0].export_to",
        ),
        bad(
            "export-dir-dotdot",
            &format!("{s}/nfs_server_setup_params/0/export_dir"),
            json!("/volume/../etc"),
            ".storage_server.nfs_server_setup_params[0].export_dir",
        ),
        bad(
            "export-dir-root",
            &format!("{s}/nfs_server_setup_params/0/export_dir"),
            json!("/"),
            ".storage_server.nfs_server_setup_params[0].export_dir",
        ),
        bad(
            "mount-to-relative",
            &format!("{s}/cinder_volume_setup_params/0/mount_to"),
            json!("volume"),
            ".storage_server.cinder_volume_setup_params[0].mount_to",
        ),
        bad(
            "mount-to-etc",
            &format!("{s}/cinder_volume_setup_params/0/mount_to"),
            json!("/etc"),
            ".storage_server.cinder_volume_setup_params[0].mount_to",
        ),
        bad(
            "mount-to-shell",
            &format!("{s}/cinder_volume_setup_params/0/mount_to"),
            json!("/v;reboot"),
            ".storage_server.cinder_volume_setup_params[0].mount_to",
        ),
        bad(
            "device-outside-dev",
            &format!("{s}/cinder_volume_setup_params/0/device"),
            json!("/etc/shadow"),
            ".storage_server.cinder_volume_setup_params[0].device",
        ),
        bad(
            "volume-id-shell",
            &format!("{s}/cinder_volume_setup_params/0/volume_resource_id"),
            json!("$(reboot)"),
            ".storage_server.cinder_volume_setup_params[0].volume_resource_id",
        ),
        case(
            "missing-volume-resource-id",
            remove(base(), &format!("{P}{s}/cinder_volume_setup_params/0/volume_resource_id")),
            Some(&format!("{ROOT}.storage_server.cinder_volume_setup_params[0].volume_resource_id")),
        ),
        case(
            "missing-exports",
            remove(base(), &format!("{P}{s}/nfs_server_setup_params")),
            Some(&format!("{ROOT}.storage_server.nfs_server_setup_params")),
        ),
        case(
            "missing-password",
            remove(base(), &format!("{P}{s}/password")),
            Some(&format!("{ROOT}.storage_server.password")),
        ),
        bad("username-option", &format!("{s}/username"), json!("-oProxyCommand=x"), ".storage_server.username"),
        bad(
            "pv-path-dotdot",
            "/pv_registration_params/0/pv_manifest_file_path",
            json!("../../etc/passwd"),
            ".pv_registration_params[0].pv_manifest_file_path",
        ),
        bad(
            "pv-path-absolute",
            "/pv_registration_params/0/pv_manifest_file_path",
            json!("/etc/passwd"),
            ".pv_registration_params[0].pv_manifest_file_path",
        ),
        bad(
            "pv-manifest-not-a-pv",
            "/pv_registration_params/0/pv_manifest_file_path",
            json!("Files/kubernetes/not-a-pv.yaml"),
            ".pv_registration_params[0].pv_manifest_file_path",
        ),
        bad(
            "pv-manifest-missing",
            "/pv_registration_params/0/pv_manifest_file_path",
            json!("Files/kubernetes/none.yaml"),
            ".pv_registration_params[0].pv_manifest_file_path",
        ),
        bad(
            "pv-cp-unknown",
            "/pv_registration_params/0/nfs_server_cp",
            json!("nowhere_CP"),
            ".pv_registration_params[0].nfs_server_cp",
        ),
        bad("pv-registration-not-array", "/pv_registration_params", json!({"a": 1}), ".pv_registration_params"),
    ]
}
