//! `storage_server` and `pv_registration_params` of `k8s_cluster_installation_param`: an NFS
//! server VM with Cinder volumes, and PersistentVolumes that point at it. Checked here, before
//! anything runs; every value that reaches a node's shell or a file there (`/etc/fstab`, the
//! exports) is held to a shape that cannot change the meaning of that file. Errors name the JSON
//! path and the file, as the rest of the params do.
//!
//! Where the server, its volumes' devices and the PV manifests are found is
//! `storage_setup.rs`; the steps on the nodes are `storage_ops.rs`.

use serde_json::Value;

use crate::cluster::cidr::Cidr;
use crate::cluster::param_obj::{kind, package_path, password, Obj};
use crate::error::{excerpt, Result};
use crate::secret::Secret;

/// Both storage blocks; `None` in [`super::params::ClusterParams`] when the request has neither.
#[derive(Clone, Debug)]
pub struct Storage {
    pub server: Option<StorageServer>,
    pub pvs: Vec<PvParam>,
}

/// `storage_server`: the VM that serves NFS. `Debug` masks the password (a [`Secret`]).
#[derive(Clone, Debug)]
pub struct StorageServer {
    pub ssh_cp_name: String,
    pub nic_cp_name: String,
    pub username: String,
    pub password: Secret,
    pub volumes: Vec<Volume>,
    pub exports: Vec<Export>,
}

/// `cinder_volume_setup_params[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    /// The VNFD's volume resource (Tacker: the Heat resource name), or the volume's id.
    pub volume_resource_id: String,
    pub mount_to: String,
    /// Our extension, for users without a VNFM: the block device, when neither the VnfInstance
    /// nor `/dev/disk/by-id/virtio-<id>` tells it.
    pub device: Option<String>,
}

/// `nfs_server_setup_params[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    pub export_dir: String,
    pub export_to: String,
}

/// `pv_registration_params[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PvParam {
    pub pv_manifest_file_path: String,
    pub nfs_server_cp: String,
}

/// Parse both blocks of `o` (`k8s_cluster_installation_param`).
pub(crate) fn parse(o: &Obj, warnings: &mut Vec<String>) -> Result<Option<Storage>> {
    let server = match o.opt_obj("storage_server")? {
        Some(s) => Some(server(&s, warnings)?),
        None => None,
    };
    let pvs = pv_params(o, warnings)?;
    if server.is_none() && pvs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Storage { server, pvs }))
}

fn server(o: &Obj, warnings: &mut Vec<String>) -> Result<StorageServer> {
    let ssh_cp_name = o.req_name("ssh_cp_name")?;
    let nic_cp_name = o.opt_name("nic_cp_name")?.unwrap_or_else(|| ssh_cp_name.clone());
    let username = o.req_str("username")?;
    crate::inventory::check_user(&username).map_err(|m| o.err("username", m))?;
    let password = password(o, &o.req_str("password")?, &|k| std::env::var(k).ok())?;
    let mut volumes = Vec::new();
    for (i, v) in items(o, "cinder_volume_setup_params")?.iter().enumerate() {
        let v = item(o, "cinder_volume_setup_params", i, v)?;
        let volume_resource_id = v.req_str("volume_resource_id")?;
        let ok = volume_resource_id.len() <= 255
            && volume_resource_id.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.:-".contains(&c));
        if !ok {
            return Err(v.err(
                "volume_resource_id",
                format!(
                    "'{}' is not a resource name or id (letters, digits, '_', '.', ':', '-')",
                    excerpt(&volume_resource_id)
                ),
            ));
        }
        let mount_to = v.req_str("mount_to")?;
        check_dir(&mount_to).map_err(|m| v.err("mount_to", m))?;
        let device = v.opt_str("device")?;
        if let Some(d) = &device {
            check_device(d).map_err(|m| v.err("device", m))?;
        }
        v.unknown(&["volume_resource_id", "mount_to", "device"], warnings);
        volumes.push(Volume { volume_resource_id, mount_to, device });
    }
    let mut mounts = std::collections::BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        if !mounts.insert(v.mount_to.trim_end_matches('/')) {
            return Err(o.err(
                &format!("cinder_volume_setup_params[{i}].mount_to"),
                format!("'{}' is the mount point of another volume too", v.mount_to),
            ));
        }
    }
    let mut exports = Vec::new();
    for (i, e) in items(o, "nfs_server_setup_params")?.iter().enumerate() {
        let e = item(o, "nfs_server_setup_params", i, e)?;
        let export_dir = e.req_str("export_dir")?;
        check_dir(&export_dir).map_err(|m| e.err("export_dir", m))?;
        let export_to = e.req_str("export_to")?;
        check_export_to(&export_to).map_err(|m| e.err("export_to", m))?;
        e.unknown(&["export_dir", "export_to"], warnings);
        exports.push(Export { export_dir, export_to });
    }
    o.unknown(
        &[
            "ssh_cp_name",
            "nic_cp_name",
            "username",
            "password",
            "cinder_volume_setup_params",
            "nfs_server_setup_params",
        ],
        warnings,
    );
    Ok(StorageServer { ssh_cp_name, nic_cp_name, username, password, volumes, exports })
}

fn pv_params(o: &Obj, warnings: &mut Vec<String>) -> Result<Vec<PvParam>> {
    let key = "pv_registration_params";
    if matches!(o.map.get(key), None | Some(Value::Null)) {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    for (i, p) in items(o, key)?.iter().enumerate() {
        let p = item(o, key, i, p)?;
        let pv_manifest_file_path =
            package_path(&p, "pv_manifest_file_path")?.ok_or_else(|| p.err("pv_manifest_file_path", "is required"))?;
        let nfs_server_cp = p.req_name("nfs_server_cp")?;
        p.unknown(&["pv_manifest_file_path", "nfs_server_cp"], warnings);
        out.push(PvParam { pv_manifest_file_path, nfs_server_cp });
    }
    Ok(out)
}

/// A required array of objects (Tacker required both lists when `storage_server` is given).
fn items<'a>(o: &Obj<'a>, key: &str) -> Result<&'a Vec<Value>> {
    match o.map.get(key) {
        Some(Value::Array(a)) if a.is_empty() => Err(o.err(key, "must list at least one entry")),
        Some(Value::Array(a)) => Ok(a),
        None | Some(Value::Null) => Err(o.err(key, "is required")),
        Some(other) => Err(o.err(key, format!("must be an array, got {}", kind(other)))),
    }
}

fn item<'a>(o: &Obj<'a>, key: &str, i: usize, v: &'a Value) -> Result<Obj<'a>> {
    match v {
        Value::Object(m) => Ok(Obj { map: m, path: format!("{}.{key}[{i}]", o.path), file: o.file, refs: o.refs }),
        other => Err(o.err(&format!("{key}[{i}]"), format!("must be an object, got {}", kind(other)))),
    }
}

/// Directories that a volume must never be mounted over, nor exported: the system's own.
const SYSTEM_DIRS: [&str; 16] = [
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp",
    "/usr", "/var",
];

/// An absolute directory path that reads the same in `/etc/fstab`, `/etc/exports` and a shell
/// argument: letters, digits, `_ . - + /`; no `.`/`..` component; not a system directory (nor
/// under `/proc`, `/sys`, `/dev`, `/etc`, `/usr`, `/boot`).
pub fn check_dir(p: &str) -> std::result::Result<(), String> {
    let shown = excerpt(p);
    if !p.starts_with('/') {
        return Err(format!("'{shown}' must be an absolute path"));
    }
    if p.len() > 1024 || !p.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.-+/".contains(&c)) {
        return Err(format!("'{shown}': a path here has letters, digits, '_', '.', '-', '+' and '/' only"));
    }
    if p.split('/').any(|c| c == ".." || c == ".") {
        return Err(format!("'{shown}' must not have '.' or '..' components"));
    }
    let norm = p.trim_end_matches('/');
    let norm = if norm.is_empty() { "/" } else { norm };
    let under = ["/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/boot/"];
    if SYSTEM_DIRS.contains(&norm) || under.iter().any(|u| norm.starts_with(u)) || norm.contains("//") {
        return Err(format!("'{shown}' is a system directory (or under one); use a directory of its own"));
    }
    Ok(())
}

/// A block device path under `/dev/`, as written in `/etc/fstab`'s neighbourhood: no spaces,
/// no `..`.
pub fn check_device(p: &str) -> std::result::Result<(), String> {
    let ok = p.starts_with("/dev/")
        && p.len() <= 255
        && p.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.:-/".contains(&c))
        && !p.split('/').any(|c| c == ".." || c == ".");
    if ok {
        Ok(())
    } else {
        Err(format!("'{}' is not a device path under /dev/ (letters, digits, '_', '.', ':', '-', '/')", excerpt(p)))
    }
}

/// `export_to`: an IP address, a CIDR, or a host name. No `*`/`?` wildcards, no `@netgroup`,
/// no options: whatever is written here becomes one word of `/etc/exports`.
pub fn check_export_to(s: &str) -> std::result::Result<(), String> {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    if s.contains('/') {
        return Cidr::parse(s).map(|_| ()).map_err(|m| format!("not a CIDR: {m}"));
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
    };
    if s.len() <= 253 && s.split('.').all(label) && !s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return Ok(());
    }
    Err(format!(
        "'{}' is not an IP address, a CIDR or a host name (wildcards, netgroups and options are not accepted)",
        excerpt(s)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::params::ClusterParams;
    use serde_json::json;

    fn body(storage: Value) -> serde_json::Map<String, Value> {
        let mut p = json!({
            "script_path": "Scripts/install_k8s_cluster.sh",
            "master_node": {"aspect_id": "master_instance", "ssh_cp_name": "m_CP", "username": "ubuntu",
                            "password": "pw", "cluster_cp_name": "vip_CP"},
            "worker_node": {"aspect_id": "worker_instance", "ssh_cp_name": "w_CP", "username": "ubuntu", "password": "pw"}
        });
        for (k, v) in storage.as_object().unwrap() {
            p[k] = v.clone();
        }
        json!({"k8s_cluster_installation_param": p}).as_object().unwrap().clone()
    }

    /// Tacker's guide shape (its storage block, with our own values).
    fn tacker_shape() -> Value {
        json!({
            "storage_server": {
                "ssh_cp_name": "storage_server_CP", "username": "ubuntu", "password": "s3cret",
                "cinder_volume_setup_params": [{"volume_resource_id": "storage_server_volume", "mount_to": "/volume"}],
                "nfs_server_setup_params": [
                    {"export_dir": "/volume/nfs/pv1", "export_to": "10.10.0.0/24"},
                    {"export_dir": "/volume/nfs/pv2", "export_to": "10.10.0.0/24"}]},
            "pv_registration_params": [
                {"pv_manifest_file_path": "Files/kubernetes/nfs-pv1.yaml", "nfs_server_cp": "storage_server_CP"},
                {"pv_manifest_file_path": "Files/kubernetes/nfs-pv2.yaml", "nfs_server_cp": "storage_server_CP"}]
        })
    }

    fn parse_err(v: Value) -> String {
        ClusterParams::from_additional_params(&body(v), "req.json", "i", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn tackers_guide_shape_parses_with_defaults_and_a_masked_password() {
        let p = ClusterParams::from_additional_params(
            &body(tacker_shape()),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        let s = p.storage.expect("storage");
        let srv = s.server.expect("server");
        assert_eq!(srv.nic_cp_name, "storage_server_CP", "nic_cp_name defaults to ssh_cp_name");
        assert_eq!(srv.volumes[0].mount_to, "/volume");
        assert_eq!(srv.exports.len(), 2);
        assert_eq!(s.pvs[1].pv_manifest_file_path, "Files/kubernetes/nfs-pv2.yaml");
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert!(!format!("{srv:?}").contains("s3cret"));
        let none = ClusterParams::from_additional_params(
            &body(json!({})),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        assert!(none.storage.is_none());
    }

    #[test]
    fn bad_values_name_their_json_path() {
        let root = "req.json: additionalParams.k8s_cluster_installation_param";
        let with = |ptr: &str, v: Value| {
            let mut b = tacker_shape();
            *b.pointer_mut(ptr).unwrap() = v;
            parse_err(b)
        };
        let e = with("/storage_server/nfs_server_setup_params/1/export_to", json!("*"));
        assert!(e.starts_with(&format!("{root}.storage_server.nfs_server_setup_params[1].export_to: '*'")), "{e}");
        let e = with("/storage_server/nfs_server_setup_params/0/export_to", json!("10.0.0.0/24(rw,no_root_squash)"));
        assert!(e.contains("nfs_server_setup_params[0].export_to"), "{e}");
        let e = with("/storage_server/cinder_volume_setup_params/0/mount_to", json!("/volume/../etc"));
        assert!(e.contains("cinder_volume_setup_params[0].mount_to: '/volume/../etc' must not have"), "{e}");
        let e = with("/storage_server/cinder_volume_setup_params/0/mount_to", json!("volume"));
        assert!(e.contains("mount_to: 'volume' must be an absolute path"), "{e}");
        let e = with("/storage_server/nfs_server_setup_params/0/export_dir", json!("/etc"));
        assert!(e.contains("export_dir: '/etc' is a system directory"), "{e}");
        let e = with("/storage_server/nfs_server_setup_params/0/export_dir", json!("/v 1"));
        assert!(e.contains("export_dir: '/v 1': a path here has"), "{e}");
        let e = with("/pv_registration_params/0/pv_manifest_file_path", json!("../x.yaml"));
        assert!(e.contains("pv_registration_params[0].pv_manifest_file_path: '../x.yaml' must stay inside"), "{e}");
        let e = with("/pv_registration_params/1/nfs_server_cp", json!("a b"));
        assert!(e.contains("pv_registration_params[1].nfs_server_cp"), "{e}");
        let mut b = tacker_shape();
        b["storage_server"]["cinder_volume_setup_params"][0].as_object_mut().unwrap().remove("volume_resource_id");
        assert!(parse_err(b).contains("cinder_volume_setup_params[0].volume_resource_id: is required"));
        let mut b = tacker_shape();
        b["storage_server"].as_object_mut().unwrap().remove("nfs_server_setup_params");
        assert!(parse_err(b).contains("storage_server.nfs_server_setup_params: is required"));
        let e = with("/storage_server/cinder_volume_setup_params", json!([]));
        assert!(e.contains("cinder_volume_setup_params: must list at least one entry"), "{e}");
        let mut b = tacker_shape();
        b["storage_server"]["cinder_volume_setup_params"][0]["device"] = json!("/dev/../etc/passwd");
        assert!(parse_err(b).contains("cinder_volume_setup_params[0].device"));
        let mut b = tacker_shape();
        b["storage_server"]["cinder_volume_setup_params"] =
            json!([{"volume_resource_id": "a", "mount_to": "/v"}, {"volume_resource_id": "b", "mount_to": "/v/"}]);
        assert!(parse_err(b).contains("cinder_volume_setup_params[1].mount_to: '/v/' is the mount point of another"));
    }

    #[test]
    fn export_to_is_an_address_a_cidr_or_a_host_name() {
        for ok in ["10.10.0.0/24", "10.0.0.5", "fd00::/64", "node1", "nfs-client.example.com", "192.168.3.0/16"] {
            assert_eq!(check_export_to(ok), Ok(()), "{ok}");
        }
        for bad in
            ["*", "*.example.com", "@netgroup", "10.0.0.0/33", "a b", "10.0.0.0/24(rw)", "-x", "", "1.2.3", "h;id"]
        {
            assert!(check_export_to(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn directories_and_devices() {
        for ok in ["/volume", "/volume/nfs/pv1", "/srv/nfs/", "/mnt/a_b-c.d+e"] {
            assert_eq!(check_dir(ok), Ok(()), "{ok}");
        }
        for bad in
            ["/", "/etc", "/etc/x", "/usr/", "/proc/1", "rel", "/a/../b", "/a/./b", "/a//b", "/a b", "/a\nb", "/a$b"]
        {
            assert!(check_dir(bad).is_err(), "{bad}");
        }
        for ok in ["/dev/vdb", "/dev/disk/by-id/virtio-0123456789abcdef0123", "/dev/mapper/vg-lv"] {
            assert_eq!(check_device(ok), Ok(()), "{ok}");
        }
        for bad in ["/etc/passwd", "/dev/../etc/passwd", "/dev/vd b", "vdb", "/dev/$x"] {
            assert!(check_device(bad).is_err(), "{bad}");
        }
    }
}
