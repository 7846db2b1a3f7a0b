//! Test fixture for the cluster hooks' decision logic on the scripted fake transport: real
//! request, inventory and package files in a temp dir, the real `prepare`, and nodes that answer
//! like a healthy cluster unless a test scripts otherwise. No root, no lab.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::cluster::prepare::{prepare, Inputs, Op, Prepared};
use crate::event::Events;
use crate::lifecycle::state::Store;
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::transport::fake::FakeConnector;

pub const TOKEN: &str = "abcdef.0123456789abcdef";

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub fake: FakeConnector,
    pub masters: usize,
}

/// `m1..mN` at 192.0.2.11.., `w1..wN` at 192.0.2.21..; Kubernetes names as Tacker's script sets
/// them (`master11`, `worker21`).
pub fn master(i: usize) -> (String, String, String) {
    (format!("m{i}"), format!("192.0.2.{}", 10 + i), format!("master{}", 10 + i))
}

pub fn worker(i: usize) -> (String, String, String) {
    (format!("w{i}"), format!("192.0.2.{}", 20 + i), format!("worker{}", 20 + i))
}

impl Fixture {
    pub fn new(masters: usize, workers: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir, fake: FakeConnector::new(), masters };
        let scripts = f.dir.path().join("pkg/Scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        for s in ["install_k8s_cluster.sh", "install_helm.sh"] {
            std::fs::write(scripts.join(s), "#!/bin/bash\n").unwrap();
        }
        f.write_inventory(masters, workers);
        f.healthy();
        f
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The inventory lists `masters` masters and `workers` workers (scale-out adds some).
    pub fn write_inventory(&self, masters: usize, workers: usize) {
        let mut y = String::from("defaults:\n  known_hosts: /dev/null\ngroups:\n  master:\n");
        for (n, ip, _) in (1..=masters).map(master) {
            y.push_str(&format!("    - {{name: {n}, ssh_ip: {ip}}}\n"));
        }
        y.push_str("  worker:\n");
        for (n, ip, _) in (1..=workers).map(worker) {
            y.push_str(&format!("    - {{name: {n}, ssh_ip: {ip}}}\n"));
        }
        y.push_str("cps: {vip_CP: 192.0.2.100}\n");
        std::fs::write(self.path("inv.yaml"), y).unwrap();
    }

    /// Every node answers as a healthy cluster does.
    pub fn healthy(&self) {
        let f = &self.fake;
        for (n, _, k) in (1..=self.masters).map(master).chain((1..=30).map(worker)) {
            f.reply(Some(&n), "hostname", &format!("{k}\n"));
            let printed = if n.starts_with('m') { master_output() } else { String::new() };
            f.reply(Some(&n), "install_k8s_cluster.sh", &install_reply(&printed, &k));
        }
        f.reply(None, "kubeadm token create", &format!("{TOKEN}\n"));
        f.reply(None, "upload-certs", &format!("{}\n", "c".repeat(64)));
        f.reply(None, "admin_token.sh", "bearer-token");
        f.reply(None, "get pods", r#"{"items": []}"#);
        f.reply(None, "pack_charts.sh", "packed\n");
        f.reply(None, "helm_repo_list.sh", "[]\n");
    }

    /// Rewrite the recorded state (a test that the driver distrusts what it reads back), as
    /// the store writes it (sealed and authenticated: an edit by hand is refused on reading).
    pub fn edit_state(&self, f: impl FnOnce(&mut Value)) {
        let mut st = self.state();
        f(&mut st);
        Store::open(&self.path("state")).unwrap().save_doc("vnf1", crate::cluster::state::KIND, &st).unwrap();
    }

    pub fn request(&self, body: Value) -> PathBuf {
        let p = self.path("req.json");
        std::fs::write(&p, body.to_string()).unwrap();
        p
    }

    pub fn instantiate_body() -> Value {
        json!({
            "flavourId": "simple",
            "additionalParams": {"k8s_cluster_installation_param": {
                "script_path": "Scripts/install_k8s_cluster.sh",
                "helm_installation_script_path": "Scripts/install_helm.sh",
                "vim_name": "kubernetes_vim",
                "master_node": {"aspect_id": "master", "ssh_cp_name": "masterNode_CP1", "nic_cp_name": "masterNode_CP1",
                                "username": "ubuntu", "password": "pw", "cluster_cp_name": "vip_CP"},
                "worker_node": {"aspect_id": "worker", "ssh_cp_name": "workerNode_CP2", "nic_cp_name": "workerNode_CP2",
                                "username": "ubuntu", "password": "pw"}
            }}
        })
    }

    /// The real `prepare` with a runner on the fake transport.
    pub fn prepare(&self, op: Op, body: Value, nodes: &[&str]) -> crate::error::Result<Prepared> {
        self.prepare_with(op, body, nodes, |_| {})
    }

    /// [`Fixture::prepare`] with the inputs changed by `edit` (a flag such as `--tacker-compat`).
    pub fn prepare_with(
        &self,
        op: Op,
        body: Value,
        nodes: &[&str],
        edit: impl FnOnce(&mut Inputs),
    ) -> crate::error::Result<Prepared> {
        let mut inputs = Inputs::new(Some(self.request(body).into()), Default::default(), false)
            .inventory(Some(self.path("inv.yaml")))
            .package_dir(Some(self.path("pkg")))
            .vnf_instance_id(Some("vnf1".into()))
            .node(nodes.iter().map(|s| s.to_string()).collect());
        edit(&mut inputs);
        // Other tests in this process spawn children; a child shares our lock file's open file
        // description from fork until its exec closes it, so a lock just released can look
        // held for a moment. One CLI run is one operation, so this only happens in tests.
        for _ in 0..100 {
            let store = Store::open(&self.path("state")).unwrap();
            let rt =
                Runner::new(Arc::new(self.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
            match prepare(op, &inputs, store, rt) {
                Err(crate::error::Error::Input { field, .. }) if field == "lock" => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                other => return other,
            }
        }
        panic!("the instance lock stayed held")
    }

    /// Run a hook to its end; panics with the error when it fails.
    pub async fn run(&self, op: Op, body: Value, nodes: &[&str]) -> crate::cluster::results::Outcome {
        let p = self.prepare(op, body, nodes).unwrap();
        crate::cluster::run(op, &p, false).await
    }

    pub async fn instantiate(&self) {
        let o = self.run(Op::InstantiateEnd, Self::instantiate_body(), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
    }

    /// Every exec since the last `clear`, as `node: script`.
    pub fn execs(&self) -> Vec<String> {
        self.fake.all_execs()
    }

    /// The cluster document as the hooks read it (its secrets unsealed).
    pub fn state(&self) -> Value {
        let store = Store::read_only(&self.path("state"));
        store.load_doc("vnf1", crate::cluster::state::KIND).unwrap().expect("a recorded cluster")
    }
}

/// What the install script prints on a main master (every master's script prints it here).
pub fn master_output() -> String {
    format!(
        "token:{TOKEN}\nserver:https://192.0.2.100:16443\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nssl_ca_cert_hash:{}\ncertificate_key:{}\n",
        "a".repeat(64),
        "b".repeat(64)
    )
}

/// What an install node program prints: the install script's `printed`, then the node's
/// hostname `k8s` after the marker line (`node_program.rs`).
pub fn install_reply(printed: &str, k8s: &str) -> String {
    format!("{printed}\nmgmt-driver-hostname\n{k8s}\n")
}

/// A VnfInstance `vnf1` as Tacker v2's OpenStack driver records it: each VNFC's
/// vnfcResourceInfo id is its Nova server's id, its vnfcInfo id `<vduId>-<server id>` (Tacker's
/// default, without `VDU_VNFc_mapping`), its address on an external CP; the VIP is an external
/// CP no VNFC owns. `vnfcs` are (vduId: `master` or `worker`, server id, address).
pub fn tacker_instance(vnfcs: &[(&str, &str, &str)]) -> Value {
    let cp = |vdu: &str| if vdu == "master" { "masterNode_CP1" } else { "workerNode_CP2" };
    let addr = |ip: &str| {
        json!([{"layerProtocol": "IP_OVER_ETHERNET",
                                  "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}])
    };
    let res: Vec<Value> = vnfcs
        .iter()
        .map(|(vdu, id, _)| {
            json!({"id": id, "vduId": vdu, "computeResource": {"resourceId": id, "vimLevelResourceType": "OS::Nova::Server"},
                   "vnfcCpInfo": [{"id": format!("{}-{id}", cp(vdu)), "cpdId": cp(vdu), "vnfExtCpId": format!("ext-{id}")}]})
        })
        .collect();
    let mut ext: Vec<Value> = vnfcs
        .iter()
        .map(|(vdu, id, ip)| json!({"id": format!("ext-{id}"), "cpdId": cp(vdu), "cpProtocolInfo": addr(ip)}))
        .collect();
    ext.push(json!({"id": "ext-vip", "cpdId": "vip_CP", "cpProtocolInfo": addr("192.0.2.100")}));
    let info: Vec<Value> = vnfcs
        .iter()
        .map(|(vdu, id, _)| json!({"id": format!("{vdu}-{id}"), "vduId": vdu, "vnfcResourceInfoId": id, "vnfcState": "STARTED"}))
        .collect();
    json!({"id": "vnf1", "vimConnectionInfo": {"vim1": {"vimId": "v", "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3"}},
           "instantiatedVnfInfo": {"flavourId": "simple", "vnfcResourceInfo": res, "extCpInfo": ext, "vnfcInfo": info}})
}

impl Fixture {
    /// Run a hook with its nodes from the VnfInstance `inst` (no inventory), as Tacker calls it;
    /// `inst`'s servers answer `hostname` as Tacker's script names them.
    pub async fn run_tacker(
        &self,
        op: Op,
        body: Value,
        nodes: &[&str],
        inst: &Value,
    ) -> crate::error::Result<crate::cluster::results::Outcome> {
        self.run_tacker_granted(op, body, nodes, inst, None).await
    }

    /// [`Fixture::run_tacker`] with Tacker's grant request (`removeResources` naming servers).
    pub async fn run_tacker_granted(
        &self,
        op: Op,
        body: Value,
        nodes: &[&str],
        inst: &Value,
        grant: Option<&Value>,
    ) -> crate::error::Result<crate::cluster::results::Outcome> {
        for v in inst["instantiatedVnfInfo"]["vnfcResourceInfo"].as_array().into_iter().flatten() {
            let (id, vdu) = (v["id"].as_str().unwrap(), v["vduId"].as_str().unwrap());
            let ext = inst["instantiatedVnfInfo"]["extCpInfo"].as_array().unwrap();
            let e = ext.iter().find(|e| e["id"] == format!("ext-{id}")).unwrap();
            let ip = e["cpProtocolInfo"][0]["ipOverEthernet"]["ipAddresses"][0]["addresses"][0].as_str().unwrap();
            let last = ip.rsplit('.').next().unwrap();
            self.fake.reply(Some(id), "hostname", &format!("{vdu}{last}\n"));
            let printed = if vdu == "master" { master_output() } else { String::new() };
            self.fake.reply(Some(id), "install_k8s_cluster.sh", &install_reply(&printed, &format!("{vdu}{last}")));
        }
        let doc = crate::request::Doc::Inline { name: "vnf_instance".into(), value: inst.clone() };
        let grant = grant.map(|g| crate::request::Doc::Inline { name: "grant_request".into(), value: g.clone() });
        let p = self.prepare_with(op, body, nodes, |i| {
            i.inventory = None;
            i.vnf_instance = Some(doc);
            i.grant_request = grant;
        })?;
        Ok(crate::cluster::run(op, &p, false).await)
    }
}

/// Where the first step on `node` containing `needle` ran: (exec index, offset in that exec's
/// text). Steps of one node program (`node_program.rs`) run in the order of its text, so
/// these compare as the steps ran, whether they were one exec each or one program.
pub fn step(execs: &[String], node: &str, needle: &str) -> Option<(usize, usize)> {
    let i = position(execs, node, needle)?;
    Some((i, execs[i].find(needle).expect("position found it")))
}

/// Index of the first exec matching both `node` and `needle`.
pub fn position(execs: &[String], node: &str, needle: &str) -> Option<usize> {
    execs.iter().position(|e| e.starts_with(&format!("{node}: ")) && e.contains(needle))
}

/// One round trip of the fake transport in [`round_trip_rows`] (any length would do: the
/// counts are the elapsed virtual time divided by it).
pub const RT: std::time::Duration = std::time::Duration::from_millis(50);

/// Run `op` on the fixture with every call one [`RT`] long and return (critical path, total)
/// in round trips: the virtual time it took over [`RT`], and every exec, upload and download.
/// Every node is connected before the clock starts: a connect (its handshake) is a fixed cost
/// per node, not a round trip of the operation's own (as `src/round_trip_table.rs` counts).
/// Needs tokio's paused clock.
pub async fn measure(f: &Fixture, op: Op, body: Value, nodes: &[&str], reset_nodes: bool) -> (usize, usize) {
    let p = f.prepare(op, body, nodes).unwrap();
    f.fake.with_latency(RT);
    let all: Vec<_> = p.hook.topo.all().collect();
    futures::future::join_all(all.iter().map(|n| p.hook.rt.first_reachable(std::slice::from_ref(n)))).await;
    let before = f.fake.round_trips();
    let start = tokio::time::Instant::now();
    let o = crate::cluster::run(op, &p, reset_nodes).await;
    let elapsed = start.elapsed();
    f.fake.with_latency(std::time::Duration::ZERO);
    assert!(o.error.is_none(), "{op:?}: {:?}", o.error);
    assert_eq!(elapsed.as_nanos() % RT.as_nanos(), 0, "{op:?}: {elapsed:?} is whole round trips");
    ((elapsed.as_nanos() / RT.as_nanos()) as usize, f.fake.round_trips() - before)
}

/// The cluster of the round-trip table: 3 masters and 20 workers.
pub const TABLE_MASTERS: usize = 3;
pub const TABLE_WORKERS: usize = 20;

fn table_fixture() -> Fixture {
    Fixture::new(TABLE_MASTERS, TABLE_WORKERS)
}

/// The round trips of every cluster hook on 3 masters + 20 workers, as (operation, critical
/// path, total): the table of docs/cluster-hooks.md and of issue 24. Each row runs on its own
/// fixture; the steps that set it up are not counted. Call it under
/// `#[tokio::test(start_paused = true)]` (the fake's latency is on tokio's clock).
pub async fn round_trip_rows() -> Vec<(String, usize, usize)> {
    let mut rows = Vec::new();
    let mut row = |name: &str, (path, total): (usize, usize)| rows.push((name.to_string(), path, total));
    let inst = Fixture::instantiate_body;
    let heal = |id: &str| serde_json::json!({"vnfcInstanceId": [id]});

    let f = table_fixture();
    row("instantiate_end", measure(&f, Op::InstantiateEnd, inst(), &[], false).await);
    row("instantiate_end again (no-op re-run)", measure(&f, Op::InstantiateEnd, inst(), &[], false).await);

    let f = table_fixture();
    f.instantiate().await;
    f.write_inventory(TABLE_MASTERS, TABLE_WORKERS + 1);
    let out = serde_json::json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": 1});
    row("scale_end SCALE_OUT +1 worker", measure(&f, Op::ScaleEnd, out.clone(), &["w21"], false).await);
    row("scale_end SCALE_OUT again (no-op re-run)", measure(&f, Op::ScaleEnd, out, &["w21"], false).await);
    let scale_in = serde_json::json!({"type": "SCALE_IN", "aspectId": "worker", "numberOfSteps": 1});
    row("scale_start SCALE_IN -1 worker", measure(&f, Op::ScaleStart, scale_in.clone(), &["w21"], false).await);
    row("scale_start SCALE_IN again (no-op re-run)", measure(&f, Op::ScaleStart, scale_in, &["w21"], false).await);

    let f = table_fixture();
    f.instantiate().await;
    row("heal_start worker", measure(&f, Op::HealStart, heal("w1"), &[], false).await);
    row("heal_end worker", measure(&f, Op::HealEnd, heal("w1"), &[], false).await);
    row("heal_start master", measure(&f, Op::HealStart, heal("m3"), &[], false).await);
    row("heal_end master", measure(&f, Op::HealEnd, heal("m3"), &[], false).await);

    let f = table_fixture();
    f.instantiate().await;
    row("terminate_end", measure(&f, Op::TerminateEnd, serde_json::json!({}), &[], false).await);
    let f = table_fixture();
    f.instantiate().await;
    row("terminate_end --reset-nodes", measure(&f, Op::TerminateEnd, serde_json::json!({}), &[], true).await);
    rows
}

#[cfg(test)]
mod round_trip_table {
    /// Every cluster hook's round trips on 3 masters + 20 workers, exact (critical path, in
    /// all). Before issue 24 (commit f3a3323, counted the same way): instantiate_end 24 and 169,
    /// its no-op re-run 5 and 93, scale-out 10 and 54, scale-in 4 and 26, heal_start of a
    /// worker 3 and 3, heal_end of a worker 8 and 96, of a master 18 and 107, terminate
    /// --reset-nodes 4 and 92.
    #[tokio::test(start_paused = true)]
    async fn every_cluster_hook_takes_its_floor() {
        let rows = super::round_trip_rows().await;
        let got: Vec<(&str, usize, usize)> = rows.iter().map(|(o, c, t)| (o.as_str(), *c, *t)).collect();
        assert_eq!(
            got,
            [
                // m1: upload, program (prepare + install + hostname); m2: env upload, program;
                // m3: certificate key from m1, env upload, program; each worker: upload, program;
                // Helm on the masters (env upload, run) while m1 gives the bearer token.
                // 2+2+3+2+2.
                ("instantiate_end", 11, 58),
                // Every node recorded as done with the same inputs, the bearer token recorded:
                // each node's host key checked and its leftover env files swept, at once.
                ("instantiate_end again (no-op re-run)", 1, 23),
                // A token; the worker's upload and program; the 23 old nodes' program.
                ("scale_end SCALE_OUT +1 worker", 4, 26),
                ("scale_end SCALE_OUT again (no-op re-run)", 0, 0),
                // Drain and the pods left (one program), delete; /etc/hosts on the 22 others.
                ("scale_start SCALE_IN -1 worker", 3, 25),
                // The worker is gone: /etc/hosts on the others again, one program each.
                ("scale_start SCALE_IN again (no-op re-run)", 1, 23),
                ("heal_start worker", 2, 2),
                // A token; the worker's upload and program; the others have its line already
                // (their host keys checked and leftover env files swept, at once).
                ("heal_end worker", 3, 25),
                ("heal_start master", 3, 4),
                // A token, a certificate key (the others' sweep meanwhile), upload and program,
                // haproxy on the survivors, Helm (2), the charts (pack, download, discard,
                // upload, unpack), the repositories.
                ("heal_end master", 13, 36),
                ("terminate_end", 0, 0),
                // One program per node: reset, proxy settings, env files, registry files.
                ("terminate_end --reset-nodes", 1, 23),
            ]
        );
    }
}
