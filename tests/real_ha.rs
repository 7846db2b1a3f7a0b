//! An HA cluster against a REAL Kubernetes API (issue 21): 3 masters + 1 worker in a lab-kit
//! lab in the real-API mode (docs/labkit.md, "Real-API mode"). The first master runs
//! `kubeadm init` through the VIP; the others `kubeadm join --control-plane`, which adds a real
//! etcd member and a real API server, controller manager and scheduler (leader election) on
//! each. keepalived's VIP is a real address on a master's eth0; haproxy's data path is the kit's
//! TCP forwarder (tests/labkit/labkit-lb, a stand-in). Every check reads the real API with the
//! real kubectl, or etcd with the real etcdctl.
//!
//! Needs root and the control plane built (see tests/real_cluster.rs). Lab `rh`, net 96;
//! about 1.7 GB for the three control planes.

use crate::support;

use serde_json::{json, Value};
use std::path::PathBuf;

use crate::real_cluster::control_plane;
use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, Cluster, R};
use support::phase::{phase, phases};

struct HaCluster {
    c: Cluster,
    /// The control plane's binaries (the host's real kubectl).
    bindir: PathBuf,
    /// Where `--kubeconfig-out` wrote the cluster's kubeconfig.
    kubeconfig: PathBuf,
    /// SOL002 heal request for master 3.
    heal: PathBuf,
}

fn ha_three_masters_on_the_real_api() -> R {
    let mut t = phase("bring up a real-API kit lab: 3 masters + 1 worker", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let b = bindir.to_str().unwrap().to_string();
        let c = Cluster::with_lab_args("rh", 96, 4, &[1, 2, 3], &[4], true, &["--control-plane", &b]);
        let heal = c.write("heal-m.json", &json!({"vnfcInstanceId": [c.lab.node(3)], "cause": "healing"}));
        let kubeconfig = c.dir.path().join("out/rh.kubeconfig");
        std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
        Ok(HaCluster { c, bindir, kubeconfig, heal })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate-end with the VIP against the real API", instantiate),
            ("etcd has 3 started voting members named after the masters", etcd_three_members),
            ("the real API lists 3 control-plane nodes and the worker, all Ready", nodes),
            ("each master's own API server is ready; one controller manager and one scheduler lead", api_servers),
            ("the recorded bearer token works through the VIP from the worker", through_the_vip),
            (
                "from the controller host: real kubectl and Helm 3/4 through the VIP with --kubeconfig-out",
                host_through_the_vip,
            ),
            ("heal-start of master 3 removes its etcd member", heal_start_master),
            ("the VNFM rebuilds master 3; heal-end rejoins it: 3 members again", heal_end_master),
            ("kubeadm reset -f on master 3 removes its member first, then stops its daemons", reset_master),
        ],
    )
}

fn kubectl(c: &Cluster, i: usize, args: &str) -> String {
    c.on(i, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl {args} 2>&1"))
}

/// The real etcdctl on master `i`, on its local member.
fn etcd_members(c: &Cluster, i: usize) -> Result<Vec<Value>, String> {
    let out = c.on(
        i,
        "etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
         --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key \
         member list -w json 2>&1",
    );
    let v: Value = serde_json::from_str(&out).map_err(|e| format!("etcdctl member list on {i}: {e}: {out}"))?;
    Ok(v["members"].as_array().cloned().unwrap_or_default())
}

/// Sorted names of the started voting members, and how many members there are in all.
fn voting(members: &[Value]) -> (Vec<String>, usize) {
    let mut names: Vec<String> = members
        .iter()
        .filter(|m| m["isLearner"] != true && !m["clientURLs"].as_array().map(|a| a.is_empty()).unwrap_or(true))
        .map(|m| m["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    (names, members.len())
}

fn masters() -> Vec<String> {
    vec!["master11".into(), "master12".into(), "master13".into()]
}

fn instantiate(t: &mut HaCluster) -> R {
    let c = &t.c;
    let req = c.write("instantiate.json", &c.request());
    let r = c.hook("instantiate-end", Some(&req), &["--kubeconfig-out", t.kubeconfig.to_str().unwrap()]);
    r.ok();
    let d = doc(&r);
    let url = format!("https://{}:16443", c.vip());
    check(k8s_conn(&d)["accessInfo"]["authUrl"] == url.as_str(), || format!("authUrl: {}", k8s_conn(&d)))
}

fn etcd_three_members(t: &mut HaCluster) -> R {
    let c = &t.c;
    for i in [1, 2, 3] {
        let m = etcd_members(c, i)?;
        check(voting(&m) == (masters(), 3), || format!("members seen from master {i}: {m:?}"))?;
    }
    Ok(())
}

fn nodes(t: &mut HaCluster) -> R {
    let c = &t.c;
    let got = kubectl(
        c,
        1,
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.addresses[?(@.type==\"InternalIP\")].address} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.taints[*].key}{\"\\n\"}{end}'",
    );
    let mut lines: Vec<&str> = got.lines().map(str::trim_end).collect();
    lines.sort();
    let cp = "node-role.kubernetes.io/control-plane";
    let want = vec![
        format!("master11 {} True {cp}", c.lab.ip(1)),
        format!("master12 {} True {cp}", c.lab.ip(2)),
        format!("master13 {} True {cp}", c.lab.ip(3)),
        format!("worker14 {} True", c.lab.ip(4)),
    ];
    check(lines == want, || format!("nodes:\n{got}\nwant {want:?}"))?;
    let cps = kubectl(c, 2, "get nodes -l node-role.kubernetes.io/control-plane -o name");
    check(cps.lines().count() == 3, || format!("control-plane nodes: {cps}"))
}

fn api_servers(t: &mut HaCluster) -> R {
    let c = &t.c;
    for i in [1, 2, 3] {
        let ip = c.lab.ip(i);
        let ready = kubectl(c, i, &format!("--server https://{ip}:6443 get --raw /readyz"));
        check(ready.trim() == "ok", || format!("API server of master {i}: {ready}"))?;
    }
    // The API servers' identity leases: one per master.
    let ids = kubectl(c, 1, "-n kube-system get lease -l apiserver.kubernetes.io/identity=kube-apiserver -o name");
    check(ids.lines().count() == 3, || format!("apiserver identity leases:\n{ids}"))?;
    for l in ["kube-controller-manager", "kube-scheduler"] {
        let h = kubectl(c, 1, &format!("-n kube-system get lease {l} -o jsonpath='{{.spec.holderIdentity}}'"));
        check(masters().iter().any(|m| h.starts_with(&format!("{m}_"))), || format!("{l} lease holder: {h}"))?;
    }
    Ok(())
}

fn through_the_vip(t: &mut HaCluster) -> R {
    let c = &t.c;
    let token = c.on(
        1,
        "KUBECONFIG=/etc/kubernetes/admin.conf kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{.data.token}' | base64 -d",
    );
    check(!token.is_empty(), || "no token in mgmt-driver-admin-token".into())?;
    let out = c.on(
        4,
        &format!(
            "KUBECONFIG=/dev/null kubectl --server https://{}:16443 --certificate-authority /etc/kubernetes/pki/ca.crt --token '{token}' get nodes -o name 2>&1",
            c.vip()
        ),
    );
    check(out.lines().count() == 4 && out.contains("node/master13"), || format!("kubectl through the VIP: {out}"))?;
    // The VIP is a real address on one master, and the forwarder runs on every master.
    let holders: Vec<usize> =
        [1, 2, 3].into_iter().filter(|&i| c.on(i, "ip -4 -o addr show dev eth0").contains(&c.vip())).collect();
    check(holders.len() == 1, || format!("VIP holders: {holders:?}"))?;
    for i in [1, 2, 3] {
        let lb = c.on(i, "cat /var/log/labkit/labkit-lb.log");
        check(lb.contains("listening on *:16443"), || format!("forwarder on master {i}: {lb}"))?;
    }
    Ok(())
}

/// The kubeconfig `--kubeconfig-out` wrote names the VIP; this machine's real kubectl lists the
/// nodes through it, and the real Helm 3 installs a chart through it that Helm 4 lists and
/// removes.
fn host_through_the_vip(t: &mut HaCluster) -> R {
    use crate::real_workload::{helms, host};
    let c = &t.c;
    let home = c.dir.path();
    let kc = t.kubeconfig.to_str().unwrap();
    let text = std::fs::read_to_string(&t.kubeconfig).unwrap_or_default();
    check(text.contains(&format!("server: https://{}:16443", c.vip())), || format!("kubeconfig:\n{text}"))?;
    let (ok, o) = host(&t.bindir.join("kubectl"), &["--kubeconfig", kc, "get", "nodes", "-o", "name"], home);
    check(ok && o.lines().count() == 4 && o.contains("node/master12"), || format!("host kubectl: {o}"))?;
    let helms = helms();
    let chart = home.join("chart");
    let (ok, o) = host(&helms[0], &["create", chart.to_str().unwrap()], home);
    check(ok, || format!("helm create: {o}"))?;
    let install = ["install", "viavip", chart.to_str().unwrap(), "-n", "default", "--kubeconfig", kc, "--wait"];
    let (ok, o) = host(&helms[0], &[&install[..], &["--timeout", "60s"]].concat(), home);
    check(ok && o.contains("STATUS: deployed"), || format!("host helm 3 install through the VIP: {o}"))?;
    let (ok, o) = host(&helms[1], &["list", "-n", "default", "--kubeconfig", kc, "-q"], home);
    check(ok && o == "viavip\n", || format!("host helm 4 list through the VIP: {o}"))?;
    let (ok, o) = host(&helms[1], &["uninstall", "viavip", "-n", "default", "--kubeconfig", kc, "--wait"], home);
    check(ok, || format!("host helm 4 uninstall: {o}"))
}

fn heal_start_master(t: &mut HaCluster) -> R {
    let c = &t.c;
    c.hook("heal-start", Some(&t.heal), &[]).ok();
    let m = etcd_members(c, 1)?;
    check(voting(&m) == (vec!["master11".into(), "master12".into()], 2), || format!("members: {m:?}"))?;
    let n = kubectl(c, 1, "get nodes -o name");
    check(!n.contains("master13"), || format!("master13 is still a Node: {n}"))
}

fn heal_end_master(t: &mut HaCluster) -> R {
    let c = &t.c;
    let o = c.lab.script(&["rebuild".into(), "3".into(), "--name".into(), c.lab.name.clone()]);
    check(o.status.success(), || format!("lab rebuild 3: {}", String::from_utf8_lossy(&o.stderr)))?;
    c.hook("heal-end", Some(&t.heal), &[]).ok();
    for i in [1, 3] {
        let m = etcd_members(c, i)?;
        check(voting(&m) == (masters(), 3), || format!("members seen from master {i}: {m:?}"))?;
    }
    let cps = kubectl(c, 1, "get nodes -l node-role.kubernetes.io/control-plane -o name");
    check(cps.lines().count() == 3 && cps.contains("node/master13"), || format!("control-plane nodes: {cps}"))
}

fn reset_master(t: &mut HaCluster) -> R {
    let c = &t.c;
    let out = c.on(3, "kubeadm reset -f 2>&1");
    check(out.contains("Removed the etcd member of master13"), || format!("kubeadm reset:\n{out}"))?;
    let m = etcd_members(c, 1)?;
    check(voting(&m) == (vec!["master11".into(), "master12".into()], 2), || format!("members: {m:?}"))?;
    let left = c
        .on(3, "ls /run/labkit; ps -eo args | grep -E '^(/opt/control-plane/|/usr/bin/python3 .*(labkit-lb|kubelet))'");
    check(left.trim().is_empty(), || format!("left running on master 3:\n{left}"))?;
    let st = c.on(3, "systemctl is-active haproxy");
    check(st.trim() == "inactive", || format!("haproxy unit: {st}"))?;
    // Two members keep the quorum: the cluster still answers through the VIP.
    let n = kubectl(c, 4, "--kubeconfig /etc/kubernetes/kubelet.conf get node worker14 -o name");
    check(n.trim() == "node/worker14", || format!("through the VIP after the reset: {n}"))
}

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("ha_three_masters_on_the_real_api", ha_three_masters_on_the_real_api)])
}
