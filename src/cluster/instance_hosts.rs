//! The host keys one VNF instance learned, in a file of its own: `<state_dir>/<id>.known_hosts`
//! (private, 0600), the default known_hosts of every node of the instance (the hooks with
//! `--vnf-instance` or a package inventory, the storage server). The file goes when the
//! instance is forgotten (terminate-end, instantiate_rollback_start).
//!
//! Why not one file for all instances: a VIM hands addresses out again. A rolled-back
//! instantiate retried on new VMs, or a new instance whose VMs get an address another (gone)
//! instance used, would meet the old VM's key and be refused as "REMOTE HOST KEY HAS CHANGED"
//! by a file nobody prunes. Scoped to its instance, a key only stands for a VM that instance
//! holds; a changed key on such a node is still refused (`ssh/host_key.rs`).
//!
//! Instances recorded before this file existed have their keys in the shared
//! `<state_dir>/known_hosts` (or, with an operator's inventory that named none, the conductor
//! user's `~/.ssh/known_hosts`): on the first hook that opens their file, it is seeded with
//! those files' lines for the addresses the instance recorded (nothing else comes along; those
//! files are only read). An operator's `--known-hosts` / `options.known_hosts` is used as given.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cluster::state::InstanceState;
use crate::error::{Error, Result};
use crate::lifecycle::private_file;
use crate::lifecycle::state::Store;

/// The instance's own known_hosts.
pub fn path(store: &Store, id: &str) -> PathBuf {
    store.dir().join(format!("{id}.known_hosts"))
}

/// The file every instance shared before: read once, to seed an instance recorded then.
pub fn shared(store: &Store) -> PathBuf {
    store.dir().join("known_hosts")
}

/// Where an instance recorded before kept its keys: the store's shared file (nodes from the
/// VnfInstance or a package inventory), and the conductor user's `~/.ssh/known_hosts` (an
/// operator's inventory that named none).
fn earlier_files(store: &Store) -> Vec<PathBuf> {
    let mut v = vec![shared(store)];
    v.extend(dirs::home_dir().map(|h| h.join(".ssh/known_hosts")));
    v
}

/// Create the instance's file if it has none yet (nothing in a plan). `nodes` are the
/// `(address, port)` of the hook's nodes that use it; those the instance has recorded
/// (`state`) bring their lines from the shared file.
pub fn open(store: &Store, state: &InstanceState, nodes: &[(&str, u16)]) -> Result<()> {
    let p = path(store, &state.vnf_instance_id);
    if !store.is_writable() || p.symlink_metadata().is_ok() {
        return Ok(());
    }
    let recorded: Vec<(&str, u16)> =
        nodes.iter().copied().filter(|(a, _)| state.nodes.values().any(|n| n.ssh_addr == *a)).collect();
    let state_err = |path: &Path, message: String| Error::State { path: path.display().to_string(), message };
    let mut seed = String::new();
    for s in earlier_files(store).iter().filter(|_| !recorded.is_empty()) {
        match std::fs::read(s) {
            Ok(b) => {
                let text = String::from_utf8(b).map_err(|_| state_err(s, "not UTF-8 text".into()))?;
                let lines = crate::ssh::host_key::entries_for(&text, &recorded).map_err(|m| state_err(s, m))?;
                seed.push_str(&lines);
                if !seed.is_empty() && !seed.ends_with('\n') {
                    seed.push('\n');
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(state_err(s, e.to_string())),
        }
    }
    let mut f = private_file::create_new(&p).map_err(|e| state_err(&p, e.to_string()))?;
    f.write_all(seed.as_bytes()).and_then(|_| f.sync_all()).map_err(|e| state_err(&p, e.to_string()))
}

/// Remove the instance's file; `Ok(false)` when there was none (or in a plan).
pub fn forget(store: &Store, id: &str) -> Result<bool> {
    let p = path(store, id);
    if !store.is_writable() {
        return Ok(false);
    }
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::State { path: p.display().to_string(), message: e.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::prepare::{Op, Prepared};
    use crate::cluster::testkit::Fixture;
    use crate::inventory::HostKeyCheck;
    use crate::request::Doc;
    use crate::ssh::host_key::{verify, Verdict};
    use russh::keys::PublicKey;
    use serde_json::{json, Value};

    /// Two VMs' host keys (one address, two VMs over time).
    const OLD: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINvU9id4WnQaIgfkJaLGanvZETydH3NANbKlD1O8aaRT";
    const NEW: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDUwKkBIwHQNssAGhDNBL+vzk5ieIlYs0NqfhXmJfF1f";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    /// Tacker's VnfInstance for `id`: one master and one worker VM at these addresses.
    fn instance(id: &str, master: &str, worker: &str) -> Value {
        let cp = |cpd: &str, ip: &str| {
            json!({"id": format!("{cpd}-{id}"), "cpdId": cpd, "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
                "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "isDynamic": true, "addresses": [ip]}]}}]})
        };
        json!({"id": id, "vnfdId": "b1bb0ce7-ebca-4fa7-95ed-4840d70a1177", "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {"flavourId": "simple", "vnfState": "STARTED", "vnfcResourceInfo": [
                {"id": format!("m-{id}"), "vduId": "masterNode", "computeResource": {"resourceId": format!("vm-m-{id}")},
                 "vnfcCpInfo": [cp("masterNode_CP1", master)]},
                {"id": format!("w-{id}"), "vduId": "workerNode", "computeResource": {"resourceId": format!("vm-w-{id}")},
                 "vnfcCpInfo": [cp("workerNode_CP2", worker)]}]}})
    }

    fn body() -> Value {
        json!({"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": {
            "script_path": "Scripts/install_k8s_cluster.sh",
            "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1", "cluster_cp_name": "masterNode_CP1",
                           "username": "ubuntu", "password": "pw"},
            "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP2", "username": "ubuntu", "password": "pw"}}}})
    }

    /// The real `prepare` of a hook with `--vnf-instance` (Tacker's VnfInstance), no inventory
    /// and no `--known-hosts`: every node's known_hosts is the default.
    fn prepare(f: &Fixture, op: Op, inst: &Value) -> Prepared {
        f.prepare_with(op, body(), &[], |a| {
            a.inventory = None;
            a.vnf_instance_id = None;
            a.vnf_instance = Some(Doc::Inline { name: "vnf_instance".into(), value: inst.clone() });
        })
        .unwrap()
    }

    /// What the SSH edge decides for `node`'s offered `k` (accept-new).
    fn connect(p: &Prepared, node: usize, k: &str) -> Verdict {
        let h = &p.hook.topo.all().nth(node).unwrap().host;
        assert_eq!(h.host_key_check, HostKeyCheck::AcceptNew);
        verify(h.host_key_check, &h.known_hosts, &h.addr, h.port, &key(k))
    }

    #[test]
    fn a_new_instance_at_an_address_another_instance_used_learns_its_key() {
        let f = Fixture::new(1, 1);
        let a = prepare(
            &f,
            Op::InstantiateEnd,
            &instance("a0ea5d3a-6b5d-4cb4-a3e7-4c8bd3ae3f2c", "10.10.0.11", "10.10.0.12"),
        );
        assert!(matches!(connect(&a, 0, OLD), Verdict::Learned { .. }));
        drop(a);
        // Another VNF instance; the VIM gave its master the first one's (recycled) address.
        let b = prepare(
            &f,
            Op::InstantiateEnd,
            &instance("5b1bd8cb-0bd4-4a15-9f5b-ddd1b9d6e5a5", "10.10.0.11", "10.10.0.13"),
        );
        match connect(&b, 0, NEW) {
            Verdict::Learned { .. } => {}
            v => panic!("the new instance's VM must be learned, not checked against another instance's: {v:?}"),
        }
    }

    #[tokio::test]
    async fn a_rolled_back_instantiate_forgets_its_keys_and_a_changed_key_it_holds_is_still_refused() {
        let f = Fixture::new(1, 1);
        let id = "7f5a3ce8-4a0e-4bb5-8d1e-4e2b1cfb6a10";
        let inst = instance(id, "10.10.0.21", "10.10.0.22");
        let p = prepare(&f, Op::InstantiateEnd, &inst);
        let kh = p.hook.topo.masters[0].host.known_hosts.clone();
        assert_eq!(kh, path(p.hook.store(), id), "the instance's own file by default");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kh).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(connect(&p, 0, OLD), Verdict::Learned { .. }));
        // While the instance holds the node, a changed key is refused.
        match connect(&p, 0, NEW) {
            Verdict::Rejected { message } => assert!(message.contains("REMOTE HOST KEY HAS CHANGED"), "{message}"),
            v => panic!("{v:?}"),
        }
        drop(p);
        // instantiate_rollback_start forgets the instance (terminate-end's forgetting).
        let p = prepare(&f, Op::TerminateEnd, &inst);
        let o = crate::cluster::run(Op::TerminateEnd, &p, false).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        drop(p);
        assert!(!kh.exists(), "the instance's keys go with it");
        // Tacker retries the instantiate of the same instance on new VMs at the same addresses.
        let p = prepare(&f, Op::InstantiateEnd, &inst);
        assert!(matches!(connect(&p, 0, NEW), Verdict::Learned { .. }));
    }

    #[test]
    fn an_instance_recorded_before_takes_its_own_keys_from_the_shared_file() {
        let f = Fixture::new(1, 1);
        let id = "c3f2e1a0-1111-4222-8333-944455556666";
        let inst = instance(id, "10.10.0.31", "10.10.0.32");
        let store = Store::open(&f.path("state")).unwrap();
        // As an earlier version left it: the cluster recorded, its keys in the shared file only.
        let mut st = InstanceState::new(id);
        st.params = body()["additionalParams"]["k8s_cluster_installation_param"].clone();
        for (n, a) in [(format!("m-{id}"), "10.10.0.31"), (format!("w-{id}"), "10.10.0.32")] {
            st.node(&n).ssh_addr = a.into();
            st.node(&n).installed = true;
        }
        crate::cluster::state_store::save(&mut st, &store).unwrap();
        let other = format!("10.10.0.99 {NEW}\n");
        std::fs::write(shared(&store), format!("{other}10.10.0.31 {OLD}\n")).unwrap();
        let p = prepare(&f, Op::HealStart, &inst);
        assert_eq!(std::fs::read_to_string(path(&store, id)).unwrap(), format!("10.10.0.31 {OLD}\n"));
        match connect(&p, 0, NEW) {
            Verdict::Rejected { message } => assert!(message.contains("REMOTE HOST KEY HAS CHANGED"), "{message}"),
            v => panic!("a key the instance holds from before is still checked: {v:?}"),
        }
        assert!(matches!(connect(&p, 0, OLD), Verdict::Trusted));
        assert!(std::fs::read_to_string(shared(&store)).unwrap().starts_with(&other), "the shared file is only read");
    }
}
