//! The storage server and NFS PersistentVolumes end to end on the kit lab (1 master, 1 worker,
//! 1 storage server VM), driving the real `mgmt-driver` binary.
//!
//! What is real here: the storage VM's volume is a real block device (a loop device over a
//! sparse file in the lab directory, its device node made in that node's own /dev, detached when
//! the test ends), so `blkid`, `mkfs.ext4`, `mount` and `/etc/fstab` are the real ones in the
//! node's mount namespace. The NFS server and client need kernel support this machine does not
//! give a namespace: `exportfs` and `mount.nfs` are kit stand-ins that read the real exports
//! files (docs/labkit.md). PersistentVolumes live in the kit's simulated API server.
//!
//! The PV manifests exactly as the driver sent them (kubectl's last-applied-configuration) are
//! valid Kubernetes objects by `kubernetes-validate` (offline schemas, strict; PyPI the first
//! time, scripts/k8s-validate-venv.sh), and a wrong one is not.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use support::harness::Suite;
use support::k8s_validate::{validate, validator, VERSIONS};
use support::kit::{check, doc, outcome, Cluster, R};
use support::phase::{phase, phases};
use support::repo;

/// The Cinder volume's id; its first 20 characters name the by-id link KVM would make.
const VOLUME_ID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

fn pv_yaml(name: &str, path: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  capacity:\n    storage: 1Gi\n  \
         persistentVolumeReclaimPolicy: Retain\n  accessModes:\n    - ReadWriteOnce\n  nfs:\n    server: 0.0.0.0   # set by the driver\n    path: \"{path}\"\n"
    )
}

/// A loop device over a sparse file, detached when dropped (after the lab that used it).
struct Loop {
    dev: String,
    file: PathBuf,
}

impl Loop {
    fn new(file: &Path) -> Loop {
        let f = std::fs::File::create(file).unwrap();
        f.set_len(64 << 20).unwrap();
        let o = Command::new("losetup").args(["-f", "--show"]).arg(file).output().unwrap();
        assert!(o.status.success(), "losetup: {}", String::from_utf8_lossy(&o.stderr));
        Loop { dev: String::from_utf8(o.stdout).unwrap().trim().to_string(), file: file.to_path_buf() }
    }

    /// `major minor` of the device, as mknod wants them.
    fn numbers(&self) -> (u32, u32) {
        let o = Command::new("stat").args(["-c", "%t %T", &self.dev]).output().unwrap();
        let t = String::from_utf8(o.stdout).unwrap();
        let mut it = t.split_whitespace().map(|h| u32::from_str_radix(h, 16).unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// What the phases share. `c` drops (the lab goes down, its mounts with it) before `vol`.
struct Storage {
    c: Cluster,
    _vol: Loop,
    req: Value,
    uuid: String,
    pv_versions: String,
}

const STORAGE_NODE: usize = 3;

fn storage_lifecycle() -> R {
    let mut t = phase("bring up 1 master + 1 worker + a storage VM with a volume", || {
        let c = Cluster::new("s1", 115, 3, &[1], &[2], true);
        // The storage server: a group of the inventory named after its ssh_cp_name.
        let inv = std::fs::read_to_string(&c.inv).unwrap().replace(
            "cps:\n",
            &format!("  storage_server_CP:\n    - {{name: {}, ssh_ip: {}}}\ncps:\n", c.lab.node(3), c.lab.ip(3)),
        );
        std::fs::write(&c.inv, inv).unwrap();
        let vol = Loop::new(&c.lab.file("volume.img"));
        let (maj, min) = vol.numbers();
        let link = format!("/dev/disk/by-id/virtio-{}", &VOLUME_ID[..20]);
        c.on(
            STORAGE_NODE,
            &format!("mknod -m 660 /dev/vdb b {maj} {min} && mkdir -p /dev/disk/by-id && ln -s ../../vdb {link}"),
        );
        check(c.on(STORAGE_NODE, "blkid -p /dev/vdb; echo rc=$?").contains("rc=2"), || {
            "the new volume is not empty".into()
        })?;
        let kdir = c.pkg.join("Files/kubernetes");
        std::fs::create_dir_all(&kdir).unwrap();
        for i in 1..=3 {
            std::fs::write(
                kdir.join(format!("nfs-pv{i}.yaml")),
                pv_yaml(&format!("nfs-pv{i}"), &format!("/volume/nfs/pv{i}")),
            )
            .unwrap();
        }
        let mut req = c.request();
        let net = format!("198.18.{}.0/24", c.lab.net);
        let p = &mut req["additionalParams"]["k8s_cluster_installation_param"];
        p["storage_server"] = json!({
            "ssh_cp_name": "storage_server_CP", "nic_cp_name": "storage_server_CP",
            "username": "ubuntu", "password": "unused-password",
            "cinder_volume_setup_params": [{"volume_resource_id": VOLUME_ID, "mount_to": "/volume"}],
            "nfs_server_setup_params": [{"export_dir": "/volume/nfs/pv1", "export_to": net},
                                        {"export_dir": "/volume/nfs/pv2", "export_to": net}]});
        p["pv_registration_params"] = json!([
            {"pv_manifest_file_path": "Files/kubernetes/nfs-pv1.yaml", "nfs_server_cp": "storage_server_CP"},
            {"pv_manifest_file_path": "Files/kubernetes/nfs-pv2.yaml", "nfs_server_cp": "storage_server_CP"}]);
        Ok(Storage { c, _vol: vol, req, uuid: String::new(), pv_versions: String::new() })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate: filesystem made, mounted, exported, two PVs Available", instantiate_sets_up_storage),
            ("a second instantiate changes nothing", second_run_changes_nothing),
            ("a PV that never becomes Available is removed and named", stuck_pv_fails_cleanly),
            ("heal of the storage server keeps the data", heal_keeps_the_data),
            ("terminate removes the PVs", terminate_removes_the_pvs),
        ],
    )
}

fn pv(c: &Cluster, name: &str, path: &str) -> String {
    c.on(
        1,
        &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl get pv {name} --ignore-not-found -o jsonpath='{path}'"),
    )
}

fn instantiate_sets_up_storage(t: &mut Storage) -> R {
    let c = &t.c;
    let r = c.instantiate(&t.req);
    r.ok();
    let d = doc(&r);
    let node = c.lab.node(STORAGE_NODE);
    let o = outcome(&d, &node);
    check(
        o.contains(&format!("made a filesystem on /dev/disk/by-id/virtio-{}, mounted at /volume", &VOLUME_ID[..20])),
        || o.clone(),
    )?;
    check(o.contains("exported 2 directories (exports file written)"), || o.clone())?;
    // Real: ext4 on the device, mounted, an fstab entry by UUID.
    let uuid = c.on(STORAGE_NODE, "blkid -p -o value -s UUID /dev/vdb").trim().to_string();
    check(c.on(STORAGE_NODE, "blkid -p -o value -s TYPE /dev/vdb").trim() == "ext4" && uuid.len() == 36, || {
        uuid.clone()
    })?;
    let mnt = c.on(STORAGE_NODE, "findmnt -rn -o SOURCE,FSTYPE /volume");
    check(mnt.trim() == "/dev/vdb ext4", || format!("/volume: {mnt}"))?;
    let fstab = c.on(STORAGE_NODE, "cat /etc/fstab");
    let entry = format!("# mgmt-driver: volume for /volume\nUUID={uuid} /volume ext4 defaults,nofail 0 2\n");
    check(fstab.matches(&entry).count() == 1, || fstab.clone())?;
    let exports = c.on(STORAGE_NODE, "cat /etc/exports.d/mgmt-driver.exports; stat -c %u /volume/nfs/pv1");
    let net = format!("198.18.{}.0/24", c.lab.net);
    for pv in ["pv1", "pv2"] {
        let line = format!("/volume/nfs/{pv} {net}(rw,sync,no_subtree_check,insecure,all_squash)\n");
        check(exports.contains(&line), || exports.clone())?;
    }
    check(exports.trim_end().ends_with("65534"), || exports.clone())?;
    check(c.on(STORAGE_NODE, "systemctl is-active nfs-kernel-server").trim() == "active", || {
        "NFS server not active".into()
    })?;
    // The exports took effect: the worker may mount an export, not another directory.
    let m = c.on(2, &format!("mkdir -p /mnt/pv1 && mount -t nfs {}:/volume/nfs/pv1 /mnt/pv1; echo rc=$?", c.lab.ip(3)));
    check(m.contains("rc=0"), || format!("mount -t nfs of an export: {m}"))?;
    let m = c.on(2, &format!("mount -t nfs {}:/volume /mnt/pv1 2>&1; echo rc=$?", c.lab.ip(3)));
    check(m.contains("access denied by server") && m.contains("rc=32"), || format!("mount of a non-export: {m}"))?;
    // nfs-common on both cluster nodes.
    for i in [1, 2] {
        let pk = c.on(i, "cat /var/lib/labkit-node/state.json");
        check(pk.contains("\"nfs-common\""), || format!("node {i}: no nfs-common: {pk}"))?;
    }
    // Two PVs, Available, pointing at the storage server's address.
    for name in ["nfs-pv1", "nfs-pv2"] {
        let got = pv(c, name, "{.status.phase} {.spec.nfs.server} {.spec.nfs.path}");
        let want = format!("Available {} /volume/nfs/{}", c.lab.ip(3), &name[4..]);
        check(got == want, || format!("{name}: {got:?}, want {want:?}"))?;
    }
    pv_as_sent_is_valid_kubernetes(c, "nfs-pv1")?;
    let rec = std::fs::read_to_string(c.state.join(format!("{}.storage.json", c.id))).unwrap_or_default();
    check(rec.contains("nfs-pv1") && rec.contains("nfs-pv2"), || rec.clone())?;
    check(!r.all().contains("unused-password"), || "the storage password leaked".into())?;
    t.uuid = uuid;
    t.pv_versions = pv(c, "nfs-pv1", "{.metadata.resourceVersion}") + &pv(c, "nfs-pv2", "{.metadata.resourceVersion}");
    Ok(())
}

fn second_run_changes_nothing(t: &mut Storage) -> R {
    let c = &t.c;
    let r = c.instantiate(&t.req);
    r.ok();
    let o = outcome(&doc(&r), &c.lab.node(STORAGE_NODE));
    check(o.contains("kept the filesystem of") && !o.contains("made a filesystem"), || o.clone())?;
    check(o.contains("exported 2 directories (exports unchanged)"), || o.clone())?;
    let uuid = c.on(STORAGE_NODE, "blkid -p -o value -s UUID /dev/vdb").trim().to_string();
    check(uuid == t.uuid, || format!("the filesystem changed: {uuid} != {}", t.uuid))?;
    let fstab = c.on(STORAGE_NODE, "cat /etc/fstab");
    check(fstab.matches("mgmt-driver: volume for /volume").count() == 1, || fstab.clone())?;
    let mounts = c.on(STORAGE_NODE, "findmnt -rn /volume | wc -l");
    check(mounts.trim() == "1", || format!("/volume mounted {mounts} times"))?;
    let v = pv(c, "nfs-pv1", "{.metadata.resourceVersion}") + &pv(c, "nfs-pv2", "{.metadata.resourceVersion}");
    check(v == t.pv_versions, || format!("the PVs changed: {v} != {}", t.pv_versions))
}

fn stuck_pv_fails_cleanly(t: &mut Storage) -> R {
    let c = &t.c;
    c.kit_ctl(&["pv-stuck", "nfs-pv3"]);
    let mut req = t.req.clone();
    req["additionalParams"]["k8s_cluster_installation_param"]["pv_registration_params"]
        .as_array_mut()
        .unwrap()
        .push(json!({"pv_manifest_file_path": "Files/kubernetes/nfs-pv3.yaml", "nfs_server_cp": "storage_server_CP"}));
    let p = c.write("instantiate-pv3.json", &req);
    let r = c.hook("instantiate-end", Some(&p), &["--drain-timeout", "3"]);
    r.fails(1, "PersistentVolume nfs-pv3 still Pending after 3s (not Available), it was deleted");
    let named = format!("{}: command failed with PersistentVolume nfs-pv3", c.lab.node(1));
    check(r.all().contains(&named), || r.all())?;
    check(pv(c, "nfs-pv3", "{.metadata.name}").is_empty(), || "nfs-pv3 was left behind".into())?;
    check(pv(c, "nfs-pv1", "{.status.phase}") == "Available", || "nfs-pv1 was touched".into())?;
    c.kit_ctl(&["pv-unstick", "nfs-pv3"]);
    Ok(())
}

fn heal_keeps_the_data(t: &mut Storage) -> R {
    let c = &t.c;
    c.on(STORAGE_NODE, "echo kept-across-heal > /volume/nfs/pv1/data.txt");
    let heal = c.write("heal.json", &json!({"vnfcInstanceId": [c.lab.node(STORAGE_NODE)]}));
    // A claim uses a PV: heal-start refuses, as Tacker's did, and nothing is deleted.
    c.kit_ctl(&["pv-bind", "nfs-pv1"]);
    let r = c.hook("heal-start", Some(&heal), &[]);
    r.fails(1, "nfs-pv1 Bound");
    check(pv(c, "nfs-pv2", "{.status.phase}") == "Available", || "a PV was deleted by a refused heal".into())?;
    c.kit_ctl(&["pv-unbind", "nfs-pv1"]);
    c.hook("heal-start", Some(&heal), &[]).ok();
    check(pv(c, "nfs-pv1", "{.metadata.name}").is_empty() && pv(c, "nfs-pv2", "{.metadata.name}").is_empty(), || {
        "heal-start left the PVs".into()
    })?;
    // The VNFM rebuilds the VM with the same volume: no mount, no fstab entry, no exports.
    c.on(STORAGE_NODE, "umount /volume && sed -i '/mgmt-driver: volume for/,+1d' /etc/fstab && rm -f /etc/exports.d/mgmt-driver.exports");
    check(c.on(STORAGE_NODE, "findmnt -rn /volume | wc -l").trim() == "0", || "still mounted".into())?;
    let r = c.hook("heal-end", Some(&heal), &[]);
    r.ok();
    let o = outcome(&doc(&r), &c.lab.node(STORAGE_NODE));
    check(o.contains("kept the filesystem of") && !o.contains("made a filesystem"), || o.clone())?;
    let data = c.on(STORAGE_NODE, "cat /volume/nfs/pv1/data.txt; blkid -p -o value -s UUID /dev/vdb");
    check(data == format!("kept-across-heal\n{}\n", t.uuid), || format!("after heal: {data}"))?;
    let exports = c.on(STORAGE_NODE, "exportfs -v");
    check(exports.contains("/volume/nfs/pv1") && exports.contains("/volume/nfs/pv2"), || exports.clone())?;
    check(o.contains("exported 2 directories (exports file written)"), || o.clone())?;
    let m = c.on(2, &format!("mkdir -p /mnt/pv2 && mount -t nfs {}:/volume/nfs/pv2 /mnt/pv2; echo rc=$?", c.lab.ip(3)));
    check(m.contains("rc=0"), || format!("mount -t nfs after the heal: {m}"))?;
    for name in ["nfs-pv1", "nfs-pv2"] {
        check(pv(c, name, "{.status.phase}") == "Available", || format!("{name} not back"))?;
    }
    Ok(())
}

fn terminate_removes_the_pvs(t: &mut Storage) -> R {
    let c = &t.c;
    let r = c.hook("terminate-end", None, &["--reset-nodes"]);
    r.ok();
    let o = outcome(&doc(&r), &c.lab.node(1));
    check(o.contains("deleted PersistentVolumes nfs-pv1, nfs-pv2"), || o.clone())?;
    let objects = c.kit()["cluster"]["objects"].clone();
    let left: Vec<&String> = objects
        .as_object()
        .map(|o| o.keys().filter(|k| k.starts_with("PersistentVolume/")).collect())
        .unwrap_or_default();
    check(left.is_empty(), || format!("PVs left after terminate: {left:?}"))?;
    check(!c.state.join(format!("{}.storage.json", c.id)).exists(), || "the storage record was kept".into())?;
    Ok(())
}

// ------------------------------------------------------------------ without root

/// The PV as sent: `kubectl apply` keeps exactly what it got in the
/// last-applied-configuration annotation. Checked against Kubernetes' own schemas (strict, the
/// oldest and newest versions we claim), and a wrong variant must fail the same check.
fn pv_as_sent_is_valid_kubernetes(c: &Cluster, name: &str) -> R {
    let obj = &c.kit()["cluster"]["objects"][format!("PersistentVolume//{name}")];
    let sent = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let v: Value =
        serde_json::from_str(sent.trim()).map_err(|e| format!("{name} as sent is not JSON ({e}): {sent}"))?;
    check(v["spec"]["nfs"]["server"] == c.lab.ip(3), || format!("{v}"))?;
    let d = tempfile::tempdir().unwrap();
    let kv = validator();
    let good = d.path().join("pv.json");
    std::fs::write(&good, sent.trim()).unwrap();
    for ver in VERSIONS {
        let (ok, text) = validate(&kv, &good, ver);
        check(ok && text.contains(&format!("passed for resource persistentvolume/{name}")), || {
            format!("Kubernetes {ver}: {text}\n{sent}")
        })?;
    }
    let mut bad = v.clone();
    bad["spec"]["accessModes"] = json!("ReadWriteOnce");
    bad["spec"]["nfsServer"] = json!("10.10.0.45");
    let badf = d.path().join("bad.json");
    std::fs::write(&badf, bad.to_string()).unwrap();
    let (ok, text) = validate(&kv, &badf, VERSIONS[1]);
    check(!ok, || format!("a wrong PV passed: {text}"))
}

// ------------------------------------------------------------------ without root

/// A plan of `op` with these files in a fresh directory; `args` name them relative to it.
fn plan(files: &[(&str, String)], args: &[&str]) -> support::Run {
    let d = tempfile::tempdir().unwrap();
    for (f, text) in files {
        let p = d.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let dir = d.path().to_str().unwrap().to_string();
    let args: Vec<String> = args.iter().map(|a| a.replace("{dir}", &dir)).collect();
    let mut all = vec!["--dry-run", "-o", "json"];
    all.extend(args.iter().map(String::as_str));
    let r = support::mgmt(&all, &[]);
    drop(d);
    r
}

fn data(f: &str) -> String {
    std::fs::read_to_string(repo().join("tests/data/tacker/v1/k8s-cluster-pv").join(f)).unwrap()
}

fn guide_package() -> Vec<(&'static str, String)> {
    vec![
        ("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\n".into()),
        ("pkg/Files/kubernetes/nfs-pv1.yaml", data("nfs-pv1.yaml")),
        ("pkg/Files/kubernetes/nfs-pv2.yaml", data("nfs-pv2.yaml")),
    ]
}

/// A VnfInstance as Tacker would pass it: a master, a worker and the storage server VNFCs with
/// their CP addresses, the storage resource of the Cinder volume, and the instantiate params.
fn guide_instance() -> String {
    let body: Value = serde_json::from_str(&data("persistent_volumes_kubernetes_param_file.json")).unwrap();
    let cp = |cpd: &str, ip: &str| {
        json!({"cpdId": cpd, "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
               "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}]})
    };
    json!({"id": "i1", "instantiatedVnfInfo": {
        "vnfcResourceInfo": [
            {"id": "vm-m1", "vduId": "master_instance", "vnfcCpInfo": [cp("masterNode_CP1", "10.10.0.84")]},
            {"id": "vm-w1", "vduId": "worker_instance", "vnfcCpInfo": [cp("workerNode_CP2", "10.10.0.85")]},
            {"id": "vm-s1", "vduId": "storage_server", "vnfcCpInfo": [cp("storage_server_CP", "10.10.0.45")]}],
        "vnfcInfo": [{"id": "vnfc-storage", "vduId": "storage_server", "vnfcResourceInfoId": "vm-s1"}],
        "virtualStorageResourceInfo": [{"id": "vs-1", "virtualStorageDescId": "storage_server_volume",
            "storageResource": {"resourceId": "6f0c1a5e-8f8b-4c84-9b6a-0a1b2c3d4e5f"}}],
        "additionalParams": body["additionalParams"]}})
    .to_string()
}

/// Tacker's PV guide body, unchanged, plans every storage step: from an inventory (the storage
/// server is its group `storage_server_CP`) and from a VnfInstance (the device through its
/// storage resource); a SOL002 heal of the storage VNFC plans the storage steps only.
fn tacker_pv_guide_body_plans() -> R {
    let inv = "defaults: {known_hosts: '{dir}/kh'}\ngroups:\n  master_instance:\n    - {name: m1, ssh_ip: 10.10.0.84}\n  worker_instance:\n    - {name: w1, ssh_ip: 10.10.0.85}\n  storage_server_CP:\n    - {name: nfs1, ssh_ip: 10.10.0.45}\n";
    let mut files = guide_package();
    files.push(("inv.yaml", inv.into()));
    files.push(("req.json", data("persistent_volumes_kubernetes_param_file.json")));
    let common = ["--package-dir", "{dir}/pkg", "--state-dir", "{dir}/st", "--request", "{dir}/req.json"];
    let mut args = vec!["instantiate-end", "-i", "{dir}/inv.yaml", "--vnf-instance-id", "i1"];
    args.extend(common);
    let r = plan(&files, &args);
    r.ok();
    let all = r.all();
    for want in [
        "nfs_packages.sh nfs-common",
        "storage_volume.sh /dev/disk/by-id/virtio-storage_server_volum /volume",
        "nfs_packages.sh -e .mgmt-driver/run/i1/env.storage nfs-kernel-server",
        "env.storage (mode 0600",
        "nfs_exports.sh /volume/nfs/pv1 10.10.0.0/24 /volume/nfs/pv2 10.10.0.0/24",
        "pv-nfs-pv1.json",
        "pv-nfs-pv2.json",
        "connect ubuntu@10.10.0.45:22",
    ] {
        check(all.contains(want), || format!("the plan lacks {want:?}:\n{all}"))?;
    }
    check(!all.contains("password1") && !all.contains("\"ubuntu\""), || format!("a secret is in the plan:\n{all}"))?;

    let mut files = guide_package();
    files.push(("inst.json", guide_instance()));
    files.push(("req.json", data("persistent_volumes_kubernetes_param_file.json")));
    let mut args = vec!["instantiate-end", "--vnf-instance", "{dir}/inst.json"];
    args.extend(common);
    let r = plan(&files, &args);
    r.ok();
    let all = r.all();
    check(all.contains("storage_volume.sh /dev/disk/by-id/virtio-6f0c1a5e-8f8b-4c84-9 /volume"), || all.clone())?;
    check(all.contains("\"host\":\"vm-s1\""), || all.clone())?;

    files.push(("heal.json", json!({"vnfcInstanceId": ["vnfc-storage"]}).to_string()));
    let heal = |op: &'static str| {
        plan(
            &files,
            &[
                op,
                "--vnf-instance",
                "{dir}/inst.json",
                "--package-dir",
                "{dir}/pkg",
                "--state-dir",
                "{dir}/st",
                "--request",
                "{dir}/heal.json",
            ],
        )
    };
    let r = heal("heal-start");
    r.ok();
    check(
        r.all().contains("kubectl get pv nfs-pv1 nfs-pv2") && r.all().contains("kubectl delete pv nfs-pv1 nfs-pv2"),
        || r.all(),
    )?;
    check(!r.all().contains("drain"), || format!("a cluster node was taken out:\n{}", r.all()))?;
    let r = heal("heal-end");
    r.ok();
    let all = r.all();
    check(all.contains("storage_volume.sh") && all.contains("pv-nfs-pv2.json"), || all.clone())?;
    check(!all.contains("install_k8s_cluster.sh"), || format!("a cluster node was reinstalled:\n{all}"))
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .without_root(&[("tacker_pv_guide_body_plans", tacker_pv_guide_body_plans)])
        .needing_root(&[("storage_lifecycle", storage_lifecycle)])
}
