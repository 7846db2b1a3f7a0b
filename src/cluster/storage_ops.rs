//! The storage steps (Tacker's `storage_server` / `pv_registration_params`), each hook with one
//! call:
//!
//! - instantiate ([`setup`]), after the cluster is up: the NFS client (`nfs-common`) on every
//!   cluster node; on the storage server each volume's filesystem (made only when the device
//!   has none), its `/etc/fstab` entry and mount, `nfs-kernel-server` and the exports; then on
//!   a master each PV applied and waited for until `Available` (or `Bound`), bounded by
//!   `--drain-timeout`, polling with backoff. A PV that does not get there is deleted and named
//!   in the error (node, PV, last phase).
//! - scale-out / heal of cluster nodes ([`client_step`]): the NFS client on the new nodes.
//! - heal of the storage server: [`heal_start`] refuses while a PV is `Bound` (as Tacker) and
//!   otherwise deletes the PVs; [`heal_end`] redoes the server steps, which keep every
//!   filesystem that is there, and registers the PVs again.
//! - terminate ([`terminate`]) with `--reset-nodes` (the only case where the cluster outlives
//!   the VNF): deletes the PVs first.
//!
//! The PV names are kept in `<id>.storage.json` of the state store, for the hooks that run
//! without the package.

use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::cluster::hook::Hook;
use crate::cluster::members::installed_masters;
use crate::cluster::script_env;
use crate::cluster::storage_cmd::{packages, packages_with_env, pv_apply, pv_delete};
use crate::cluster::storage_setup::{Pv, ServerNode, StorageRecord, KIND};
use crate::cluster::topology::ClusterNode;
use crate::error::{Error, Result};
use crate::facts::storage::{ExportsChanged, PvList, PvPhase, VolumeFilesystem};
use crate::lifecycle::all_ok;
use crate::transport::{Source, UploadFile};

fn server(h: &Hook) -> Option<&ServerNode> {
    h.storage.as_ref()?.server.as_ref()
}

/// The masters kubectl may run on: those the state records as installed, else (a plan without a
/// recorded instantiate) every master of the topology.
fn masters(h: &Hook) -> Vec<&ClusterNode> {
    let m = installed_masters(h);
    if m.is_empty() {
        h.topo.masters.iter().collect()
    } else {
        m
    }
}

fn pvs(h: &Hook) -> &[Pv] {
    h.storage.as_ref().map(|s| s.pvs.as_slice()).unwrap_or_default()
}

/// Instantiate (also a whole-VNF heal): clients, server, PVs.
pub async fn setup(h: &Hook) -> Result<()> {
    if h.storage.is_none() {
        return Ok(());
    }
    // Members only: a worker that failed to join is named by the hook's error, not here.
    let all: Vec<&ClusterNode> = h.topo.all().filter(|n| h.installed(n)).collect();
    client_step(h, &all).await?;
    if let Some(s) = server(h) {
        server_setup(h, s).await?;
    }
    register_pvs(h).await
}

/// `nfs-common` on cluster nodes (after their install), when the params have storage.
pub async fn client_step(h: &Hook, nodes: &[&ClusterNode]) -> Result<()> {
    if h.storage.is_none() || nodes.is_empty() {
        return Ok(());
    }
    h.rt.phase("storage: NFS client (nfs-common)", nodes, true);
    let res =
        h.rt.each(nodes, |n| async move {
            h.rt.exec(n, h.rt.root_cmd(n, packages(&["nfs-common"])?, h.rt.timeouts.install)).await.map(|_| ())
        })
        .await;
    all_ok(res).map(|_| ())
}

/// The storage server: volumes (never reformatted), NFS server, exports.
async fn server_setup(h: &Hook, s: &ServerNode) -> Result<()> {
    let n = &s.node;
    h.rt.phase("storage server: volumes, NFS server, exports", &[n], false);
    h.clean_env(n).await?;
    for (v, dev) in s.params.volumes.iter().zip(&s.devices) {
        let made = h.rt.read(n, &VolumeFilesystem { device: dev, mount_to: &v.mount_to }).await?;
        let what = if made { "made a filesystem on" } else { "kept the filesystem of" };
        h.outcome(n, format!("{what} {dev}, mounted at {}", v.mount_to));
    }
    server_package(h, n).await?;
    let pairs: Vec<(&str, &str)> =
        s.params.exports.iter().map(|e| (e.export_dir.as_str(), e.export_to.as_str())).collect();
    let changed = h.rt.read(n, &ExportsChanged { exports: &pairs }).await?;
    let dirs = format!("{} director{}", pairs.len(), if pairs.len() == 1 { "y" } else { "ies" });
    h.outcome(n, format!("exported {dirs} ({})", if changed { "exports file written" } else { "exports unchanged" }));
    Ok(())
}

/// `nfs-kernel-server` on the storage server. It is no cluster node, so no install script set
/// its apt proxy: with a proxy in the params, apt-get gets it from a 0600 env file (the URLs
/// may hold a password; never argv).
async fn server_package(h: &Hook, n: &ClusterNode) -> Result<()> {
    let pkg = ["nfs-kernel-server"];
    let Some(px) = &h.params.proxy else {
        return h.rt.exec(n, h.rt.root_cmd(n, packages(&pkg)?, h.rt.timeouts.install)).await.map(|_| ());
    };
    let vars = vec![
        ("http_proxy".to_string(), px.http_proxy.expose().to_string()),
        ("https_proxy".to_string(), px.https_proxy.expose().to_string()),
        ("no_proxy".to_string(), script_env::no_proxy(&h.params, &h.topo)),
    ];
    let env_name = "env.storage";
    let c = h.rt.root_cmd(n, packages_with_env(&format!("{}/{env_name}", h.run_dir), &pkg)?, h.rt.timeouts.install);
    h.with_env_file(n, env_name, crate::cluster::node_cmd::env_file(&vars)?, h.rt.exec(n, c)).await.map(|_| ())
}

/// Apply each PV on a master and wait until it is Available (or already Bound); a PV that does
/// not get there is deleted and named in the error.
async fn register_pvs(h: &Hook) -> Result<()> {
    let list: Vec<&Pv> = pvs(h).iter().filter(|p| p.manifest.is_some()).collect();
    if list.is_empty() {
        return Ok(());
    }
    let masters = masters(h);
    let via = h.rt.first_reachable(&masters).await?;
    h.rt.phase("storage: register PersistentVolumes", &[via], false);
    record(h, &list)?;
    for pv in list {
        let remote_file = format!("{}/pv-{}.json", h.run_dir, pv.name);
        let manifest = pv.manifest.clone().expect("filtered above");
        let up = UploadFile {
            source: Source::Bytes(manifest.into_bytes().into()),
            remote: remote_file.clone(),
            mode: 0o600,
        };
        h.rt.upload(via, vec![up]).await?;
        h.rt.exec(via, h.rt.root_cmd(via, pv_apply(&remote_file)?, h.rt.timeouts.command)).await?;
        let phase = wait_available(h, via, &pv.name).await?;
        if phase != "Available" && phase != "Bound" {
            let del = h.rt.exec(via, h.rt.root_cmd(via, pv_delete(&[&pv.name], true)?, h.rt.timeouts.command)).await;
            let removed = if del.is_ok() { "it was deleted" } else { "deleting it failed too" };
            return Err(Error::Remote {
                node: via.name().to_string(),
                command: format!("kubectl get pv {}", pv.name),
                status: format!(
                    "PersistentVolume {} still {} after {}s (not Available), {removed}",
                    pv.name,
                    if phase.is_empty() { "absent" } else { &phase },
                    h.rt.timeouts.drain.as_secs()
                ),
                stderr_tail: String::new(),
            });
        }
        h.outcome(via, format!("PersistentVolume {} {phase}", pv.name));
    }
    Ok(())
}

/// Poll a PV's phase with backoff until Available/Bound or the bound runs out; the last phase.
async fn wait_available(h: &Hook, via: &ClusterNode, name: &str) -> Result<String> {
    let start = Instant::now();
    let b = Backoff { base: Duration::from_millis(250), cap: Duration::from_secs(5) };
    let mut attempt = 0;
    loop {
        let phase = h.rt.read(via, &PvPhase { name }).await?;
        if phase == "Available" || phase == "Bound" || start.elapsed() >= h.rt.timeouts.drain {
            return Ok(phase);
        }
        attempt += 1;
        let left = h.rt.timeouts.drain.saturating_sub(start.elapsed());
        tokio::time::sleep(b.delay(attempt, fastrand::f64()).min(left)).await;
    }
}

/// Remember the PV names (terminate and heal may run without the package).
fn record(h: &Hook, list: &[&Pv]) -> Result<()> {
    let doc = StorageRecord { pvs: list.iter().map(|p| p.name.clone()).collect() };
    h.save_doc(KIND, &doc)
}

/// Delete the PVs through the first reachable master; with `refuse_bound` (a heal), refuse first
/// when one of them is Bound (a claim uses it: Tacker refused a storage heal then too) and wait
/// until they are gone, since heal-end registers them again. Without it (terminate), the deletion
/// is only requested: the real API keeps a bound PV until its claim is deleted, and kubectl
/// would wait for that until the command's timeout.
async fn delete_pvs(h: &Hook, refuse_bound: bool) -> Result<()> {
    let names: Vec<&str> = pvs(h).iter().map(|p| p.name.as_str()).collect();
    if names.is_empty() {
        return Ok(());
    }
    let masters = masters(h);
    let via = h.rt.first_reachable(&masters).await?;
    h.rt.phase("storage: delete PersistentVolumes", &[via], false);
    if refuse_bound {
        let list = h.rt.read(via, &PvList { names: &names }).await?;
        let bound: Vec<&str> = list.iter().filter(|(_, p)| p == "Bound").map(|(n, _)| n.as_str()).collect();
        if !bound.is_empty() {
            return Err(Error::Remote {
                node: via.name().to_string(),
                command: format!("kubectl get pv {}", names.join(" ")),
                status: format!(
                    "{} Bound: a claim uses it; delete the claim first (the storage server was not healed)",
                    bound.join(", ")
                ),
                stderr_tail: String::new(),
            });
        }
    }
    h.rt.exec(via, h.rt.root_cmd(via, pv_delete(&names, refuse_bound)?, h.rt.timeouts.command)).await?;
    h.outcome(via, format!("deleted PersistentVolumes {}", names.join(", ")));
    Ok(())
}

/// heal_start: when the storage server is healed, its PVs go first (refused while Bound).
pub async fn heal_start(h: &Hook) -> Result<()> {
    match &h.storage {
        Some(s) if s.healed => delete_pvs(h, true).await,
        _ => Ok(()),
    }
}

/// heal_end: the NFS client on healed cluster nodes; for a healed storage server, its volumes
/// (kept), NFS server and exports again, then the PVs.
pub async fn heal_end(h: &Hook, healed: &[&ClusterNode]) -> Result<()> {
    client_step(h, healed).await?;
    match (&h.storage, server(h)) {
        (Some(st), Some(s)) if st.healed => {
            server_setup(h, s).await?;
            register_pvs(h).await
        }
        _ => Ok(()),
    }
}

/// terminate_end: with `--reset-nodes` the cluster stays, so its PVs (ours) are deleted first.
pub async fn terminate(h: &Hook, reset_nodes: bool) -> Result<()> {
    if reset_nodes {
        delete_pvs(h, false).await?;
    }
    h.remove_doc(KIND).map(|_| ())
}

#[cfg(test)]
mod tests {
    use crate::cluster::prepare::Op;
    use crate::cluster::testkit::{position, Fixture};
    use serde_json::json;

    const PV1: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: nfs-pv1}\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  nfs: {server: 0.0.0.0, path: /volume/nfs/pv1}\n";

    /// The fixture's cluster with a storage server `nfs1` (inventory group `storage_CP`).
    fn storage_fixture(workers: usize) -> Fixture {
        let f = Fixture::new(1, workers);
        add_storage_group(&f);
        std::fs::create_dir_all(f.path("pkg/Files")).unwrap();
        std::fs::write(f.path("pkg/Files/nfs-pv1.yaml"), PV1).unwrap();
        f.fake.reply(None, "storage_volume.sh", "filesystem=made type=ext4 uuid=u-1\n");
        f.fake.reply(None, "nfs_exports.sh", "exports=changed\n");
        f.fake.reply(None, "-o jsonpath='{.status.phase}'", "Available");
        f
    }

    fn add_storage_group(f: &Fixture) {
        let inv = std::fs::read_to_string(f.path("inv.yaml")).unwrap();
        let inv = inv.replace("cps:", "  storage_CP:\n    - {name: nfs1, ssh_ip: 192.0.2.31}\ncps:");
        std::fs::write(f.path("inv.yaml"), inv).unwrap();
    }

    fn body() -> serde_json::Value {
        let mut b = Fixture::instantiate_body();
        let p = &mut b["additionalParams"]["k8s_cluster_installation_param"];
        p["storage_server"] = json!({"ssh_cp_name": "storage_CP", "username": "ubuntu", "password": "pw",
            "cinder_volume_setup_params": [{"volume_resource_id": "vol-1", "mount_to": "/volume", "device": "/dev/vdb"}],
            "nfs_server_setup_params": [{"export_dir": "/volume/nfs/pv1", "export_to": "192.0.2.0/24"}]});
        p["pv_registration_params"] =
            json!([{"pv_manifest_file_path": "Files/nfs-pv1.yaml", "nfs_server_cp": "storage_CP"}]);
        b
    }

    #[tokio::test]
    async fn storage_comes_after_the_cluster_and_the_pv_after_the_exports() {
        let f = storage_fixture(1);
        let o = f.run(Op::InstantiateEnd, body(), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = f.execs();
        let at = |n: &str, what: &str| position(&e, n, what).unwrap_or_else(|| panic!("{n} {what}: {e:#?}"));
        assert!(at("w1", "install_k8s_cluster.sh") < at("w1", "nfs_packages.sh nfs-common"), "{e:#?}");
        assert!(at("m1", "nfs_packages.sh nfs-common") > 0);
        assert!(at("nfs1", "storage_volume.sh /dev/vdb /volume") < at("nfs1", "nfs_exports.sh"), "{e:#?}");
        assert!(at("nfs1", "nfs_packages.sh nfs-kernel-server") < at("nfs1", "nfs_exports.sh"), "{e:#?}");
        assert!(at("nfs1", "nfs_exports.sh") < at("m1", "kubectl apply -f"), "{e:#?}");
        assert!(at("m1", "kubectl apply -f") < at("m1", "get pv nfs-pv1"), "{e:#?}");
        assert!(position(&e, "nfs1", "install_k8s_cluster.sh").is_none(), "the storage server is no cluster node");
        let nodes = &o.result["nodes"];
        assert!(nodes.to_string().contains("made a filesystem on /dev/vdb, mounted at /volume"), "{nodes}");
        assert!(nodes.to_string().contains("PersistentVolume nfs-pv1 Available"), "{nodes}");
    }

    #[tokio::test]
    async fn scale_out_gives_only_the_new_worker_the_nfs_client() {
        let f = storage_fixture(1);
        assert!(f.run(Op::InstantiateEnd, body(), &[]).await.error.is_none());
        f.write_inventory(1, 2);
        add_storage_group(&f);
        let before = f.execs().len();
        let o = f.run(Op::ScaleEnd, json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": 1}), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        assert!(
            position(e, "w2", "nfs_packages.sh nfs-common").unwrap()
                > position(e, "w2", "install_k8s_cluster.sh").unwrap()
        );
        assert!(
            position(e, "w1", "nfs_packages.sh").is_none() && position(e, "nfs1", "storage_volume.sh").is_none(),
            "{e:#?}"
        );
    }

    #[tokio::test]
    async fn a_storage_heal_is_refused_while_a_pv_is_bound_and_touches_no_cluster_node() {
        let f = storage_fixture(1);
        assert!(f.run(Op::InstantiateEnd, body(), &[]).await.error.is_none());
        f.fake.reply(
            None,
            "--ignore-not-found -o json",
            r#"{"metadata":{"name":"nfs-pv1"},"status":{"phase":"Bound"}}"#,
        );
        let before = f.execs().len();
        let heal = json!({"vnfcInstanceId": ["nfs1"]});
        let o = f.run(Op::HealStart, heal.clone(), &[]).await;
        let err = o.error.expect("refused").to_string();
        assert!(err.contains("nfs-pv1 Bound"), "{err}");
        let e = &f.execs()[before..];
        assert!(!e.iter().any(|x| x.contains("delete pv") || x.contains("drain")), "{e:#?}");
        // Released: heal-start deletes the PV; heal-end sets the server up again, then the PV.
        f.fake.reply(
            None,
            "--ignore-not-found -o json",
            r#"{"metadata":{"name":"nfs-pv1"},"status":{"phase":"Available"}}"#,
        );
        let before_delete = f.execs().len();
        assert!(f.run(Op::HealStart, heal.clone(), &[]).await.error.is_none());
        // heal-end registers the PVs again: the delete waits until they are gone.
        let del = f.execs()[before_delete..].iter().find(|x| x.contains("delete pv")).cloned().unwrap_or_default();
        assert!(del.contains("delete pv nfs-pv1 --ignore-not-found") && !del.contains("--wait=false"), "{del}");
        f.fake.reply(None, "storage_volume.sh", "filesystem=kept type=ext4 uuid=u-1\n");
        f.fake.reply(None, "-o jsonpath='{.status.phase}'", "Available");
        let before = f.execs().len();
        let o = f.run(Op::HealEnd, heal, &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        assert!(
            position(e, "nfs1", "storage_volume.sh").unwrap() < position(e, "m1", "kubectl apply -f").unwrap(),
            "{e:#?}"
        );
        assert!(!e.iter().any(|x| x.contains("install_k8s_cluster.sh") || x.contains("token create")), "{e:#?}");
        assert!(o.result["nodes"].to_string().contains("kept the filesystem of /dev/vdb"), "{}", o.result);
    }

    /// The real API keeps a PV bound to a claim (pv-protection finalizer) until the claim goes, and
    /// `kubectl delete` waits for that: terminate only requests the deletion, so a bound PV does not
    /// hold it until the command's timeout (found against the real API, issue 21).
    #[tokio::test]
    async fn terminate_with_reset_nodes_does_not_wait_for_a_bound_pv_to_go() {
        let f = storage_fixture(1);
        assert!(f.run(Op::InstantiateEnd, body(), &[]).await.error.is_none());
        let before = f.execs().len();
        let p = f.prepare(Op::TerminateEnd, json!({}), &[]).unwrap();
        let o = crate::cluster::run(Op::TerminateEnd, &p, true).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        let del = position(e, "m1", "kubectl delete pv nfs-pv1 --ignore-not-found --wait=false");
        assert!(del.is_some_and(|d| d < position(e, "m1", "kubeadm reset -f").unwrap()), "{e:#?}");
    }
}
