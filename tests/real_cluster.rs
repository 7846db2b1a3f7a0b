//! The cluster hooks against a REAL Kubernetes API (issue 21): a lab-kit lab in the real-API mode
//! (docs/labkit.md), where the kit's kubeadm runs the real control plane that
//! scripts/build-control-plane.sh built, workers join through the real bootstrap-token and CSR
//! flow, and kubectl on the nodes is the real one. The driver runs unmodified, as against the
//! kit-only lab (tests/cluster.rs); every check here reads the real API with the real kubectl.
//!
//! Needs root (namespaces) and the control plane built: without the build, the lab trials are
//! ignored with a loud message that says how to build it. Lab `rc`, net 95.

use crate::support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, Cluster, R};
use support::phase::{phase, timed_phases};
use support::repo;

/// The directory `scripts/build-control-plane.sh` builds into for this checkout (it builds
/// nothing with `--print-key`), when every binary the real-API mode needs is there.
pub fn control_plane() -> Result<PathBuf, String> {
    let o = Command::new("bash")
        .arg(repo().join("scripts/build-control-plane.sh"))
        .arg("--print-key")
        .output()
        .map_err(|e| format!("cannot run scripts/build-control-plane.sh: {e}"))?;
    let out = String::from_utf8_lossy(&o.stdout);
    let dir = PathBuf::from(out.lines().last().unwrap_or("").trim());
    for b in ["etcd", "etcdctl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"] {
        if !dir.join(b).is_file() {
            return Err(format!(
                "the control plane is not built ({} is missing): run scripts/build-control-plane.sh once (~10 min)",
                dir.join(b).display()
            ));
        }
    }
    Ok(dir)
}

struct RealCluster {
    c: Cluster,
    conn: serde_json::Value,
    /// The CA the VIM record carries (`vim.auth_cred.ssl_ca_cert`).
    ca: String,
}

/// The inventory: master 1, `workers`, and a placement of each (for the workers' labels).
fn write_inventory(c: &Cluster, workers: &[usize]) {
    c.write_inventory(&[1], workers, true);
    let mut y = std::fs::read_to_string(&c.inv).unwrap();
    y.push_str("placement:\n");
    for &i in workers {
        y.push_str(&format!("  {}: {{host_compute: cmp-{i}, zone: az-{i}}}\n", c.lab.node(i)));
    }
    std::fs::write(&c.inv, y).unwrap();
}

/// 1 master + 2 workers on the real API (node 4 spare): instantiate, the checks, a re-run, the
/// placement labels; then a workload on the workers, scale out and in (a real drain and Node
/// delete), a worker heal on a rebuilt VM, and terminate with `kubeadm reset` on every node.
fn single_master_two_workers_on_the_real_api() -> R {
    let mut t = phase("bring up a real-API kit lab: 1 master + 2 workers (+1 spare)", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let b = bindir.to_str().unwrap().to_string();
        let c = Cluster::with_lab_args("rc", 95, 4, &[1], &[2, 3], true, &["--control-plane", &b]);
        write_inventory(&c, &[2, 3]);
        Ok(RealCluster { c, conn: serde_json::Value::Null, ca: String::new() })
    })?;
    timed_phases(
        &mut t,
        &[
            ("instantiate-end against the real API", instantiate),
            ("the real API lists the 3 nodes with their names and addresses", nodes_and_addresses),
            ("the recorded bearer token lists the nodes through the real API", bearer_token),
            ("a second instantiate-end reads the real cluster again", second_instantiate),
            ("the workers carry their placement labels on the real Nodes", placement_labels),
            ("a Deployment of 4 replicas runs on both workers (real scheduler)", deployment_on_the_workers),
            ("scale-end joins worker14 through the bootstrap token and a CSR", scale_out_one),
            ("a PodDisruptionBudget blocks the drain: scale-start fails, worker13 stays", drain_blocked_by_a_pdb),
            ("scale-start drains worker13 (real kubectl drain) and deletes its Node", scale_in_one),
            ("heal-start removes worker14; heal-end joins its rebuilt VM", heal_a_rebuilt_worker),
            ("terminate-end --reset-nodes: kubeadm reset stops the daemons and wipes the files", terminate_and_reset),
        ],
    )
}

fn instantiate(t: &mut RealCluster) -> R {
    let r = t.c.instantiate(&t.c.request());
    r.ok();
    let d = doc(&r);
    t.conn = k8s_conn(&d);
    t.ca = d["result"]["vim"]["auth_cred"]["ssl_ca_cert"].as_str().unwrap_or("").to_string();
    check(d["result"]["vim"]["auth_cred"]["bearer_token"] == "********", || format!("{}", d["result"]["vim"]))?;
    let url = format!("https://{}:6443", t.c.lab.ip(1));
    check(t.conn["accessInfo"]["authUrl"] == url.as_str(), || format!("authUrl: {}", t.conn))
}

/// `kubectl` with the admin kubeconfig on the master: the real binary (v1.37), the real API.
fn kubectl(c: &Cluster, args: &str) -> String {
    c.on(1, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl {args} 2>&1"))
}

fn nodes_and_addresses(t: &mut RealCluster) -> R {
    let c = &t.c;
    let v = kubectl(c, "version");
    check(v.contains("Client Version: v1.37") && v.contains("Server Version: v1.37"), || v.clone())?;
    let got = kubectl(
        c,
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.addresses[?(@.type==\"InternalIP\")].address} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
    );
    let mut lines: Vec<&str> = got.lines().collect();
    lines.sort();
    let want = vec![
        format!("master11 {} True", c.lab.ip(1)),
        format!("worker12 {} True", c.lab.ip(2)),
        format!("worker13 {} True", c.lab.ip(3)),
    ];
    check(lines == want, || format!("nodes:\n{got}\nwant {want:?}"))?;
    // The workers' credentials come from the real CSR flow: approved and issued by the
    // controller manager, requested by the bootstrap token.
    let csr = kubectl(
        c,
        "get csr -o jsonpath='{range .items[*]}{.spec.username} {.status.conditions[*].type}{\"\\n\"}{end}'",
    );
    check(csr.lines().filter(|l| l.starts_with("system:bootstrap:") && l.ends_with("Approved")).count() == 2, || {
        format!("CSRs:\n{csr}")
    })
}

fn bearer_token(t: &mut RealCluster) -> R {
    let c = &t.c;
    // The VIM record's token is masked in the output: read the same Secret the driver read (a
    // re-run prints the same token), and use it alone, without any kubeconfig.
    let out = c.on(
        1,
        "T=$(KUBECONFIG=/etc/kubernetes/admin.conf kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{.data.token}' | base64 -d) && \
         KUBECONFIG=/dev/null kubectl --server https://127.0.0.1:6443 --certificate-authority /etc/kubernetes/pki/ca.crt --token \"$T\" get nodes -o name 2>&1",
    );
    check(out.lines().count() == 3 && out.contains("node/master11"), || format!("kubectl --token: {out}"))?;
    // The record's CA is the real cluster's (kubeadm's /etc/kubernetes/pki/ca.crt).
    let ca = c.on(1, "cat /etc/kubernetes/pki/ca.crt");
    check(!ca.is_empty() && t.ca.trim() == ca.trim(), || format!("VIM record CA:\n{}\nthe cluster's:\n{ca}", t.ca))
}

fn second_instantiate(t: &mut RealCluster) -> R {
    let r = t.c.instantiate(&t.c.request());
    r.ok();
    let d = doc(&r);
    check(k8s_conn(&d) == t.conn, || format!("record changed:\n{}\n{}", t.conn, k8s_conn(&d)))
}

fn labels_of(c: &Cluster, node: &str) -> Value {
    let o = kubectl(c, &format!("get node {node} -o json"));
    serde_json::from_str::<Value>(&o).map(|v| v["metadata"]["labels"].clone()).unwrap_or(Value::Null)
}

/// `CIS-node` and `kubernetes.io/zone` from the inventory's placement, on the worker's Node.
fn check_placement(c: &Cluster, i: usize) -> R {
    let node = format!("worker1{i}");
    let l = labels_of(c, &node);
    check(l["CIS-node"] == format!("cmp-{i}").as_str() && l["kubernetes.io/zone"] == format!("az-{i}").as_str(), || {
        format!("{node} labels: {l}")
    })
}

fn placement_labels(t: &mut RealCluster) -> R {
    check_placement(&t.c, 2)?;
    check_placement(&t.c, 3)?;
    let m = labels_of(&t.c, "master11");
    check(m.get("CIS-node").is_none() && m.get("node-role.kubernetes.io/control-plane").is_some(), || {
        format!("master11 labels: {m}")
    })
}

/// Pods of Deployment `web`: (name, node, phase, Ready).
fn web_pods(c: &Cluster) -> Vec<(String, String, String, bool)> {
    let v: Value = serde_json::from_str(&kubectl(c, "get pods -l app=web -o json")).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    let ready = p["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                    let gone = p["metadata"]["deletionTimestamp"].is_string();
                    (
                        p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                        p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                        if gone {
                            "Terminating".into()
                        } else {
                            p["status"]["phase"].as_str().unwrap_or("").to_string()
                        },
                        ready,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Poll `ok` every 500 ms until it holds or `within` passes; the last value either way.
fn wait_until<T>(within: Duration, mut get: impl FnMut() -> T, ok: impl Fn(&T) -> bool) -> (bool, T) {
    let t0 = Instant::now();
    loop {
        let v = get();
        if ok(&v) || t0.elapsed() > within {
            return (ok(&v), v);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn all_running(pods: &[(String, String, String, bool)], n: usize) -> bool {
    pods.len() == n && pods.iter().all(|p| p.2 == "Running" && p.3)
}

/// The real scheduler places the pods (the master is tainted), the node agent runs them.
fn deployment_on_the_workers(t: &mut RealCluster) -> R {
    let c = &t.c;
    let out = kubectl(c, "create deployment web --image=registry.invalid/web:1 --replicas=4");
    check(out.contains("deployment.apps/web created"), || out.clone())?;
    let (ok, pods) = wait_until(Duration::from_secs(60), || web_pods(c), |p| all_running(p, 4));
    check(ok, || format!("web's 4 pods not Running and Ready: {pods:?}"))?;
    let on = |n: &str| pods.iter().filter(|p| p.1 == n).count();
    check(on("worker12") > 0 && on("worker13") > 0 && on("master11") == 0, || format!("placement: {pods:?}"))
}

/// Ready status of every Node, by name.
fn nodes_ready(c: &Cluster) -> Vec<String> {
    let got = kubectl(
        c,
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
    );
    let mut v: Vec<String> = got.lines().map(str::to_string).collect();
    v.sort();
    v
}

fn approved_bootstrap_csrs(c: &Cluster) -> usize {
    let csr = kubectl(
        c,
        "get csr -o jsonpath='{range .items[*]}{.spec.username} {.status.conditions[*].type}{\"\\n\"}{end}'",
    );
    csr.lines().filter(|l| l.starts_with("system:bootstrap:") && l.ends_with("Approved")).count()
}

fn scale_out_one(t: &mut RealCluster) -> R {
    let c = &t.c;
    write_inventory(c, &[2, 3, 4]);
    let out =
        c.write("scale-out.json", &json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}));
    c.hook("scale-end", Some(&out), &[]).ok();
    let want = ["master11=True", "worker12=True", "worker13=True", "worker14=True"];
    let (ok, nodes) = wait_until(Duration::from_secs(30), || nodes_ready(c), |n| n == &want);
    check(ok, || format!("nodes: {nodes:?}"))?;
    check(approved_bootstrap_csrs(c) == 3, || format!("bootstrap CSRs approved: {}", approved_bootstrap_csrs(c)))?;
    check_placement(c, 4)?;
    check(c.on(2, "cat /etc/hosts").contains("worker14 # mgmt-driver"), || "hosts not updated on worker12".into())
}

/// A PodDisruptionBudget that allows no disruption of `web`: the real API refuses every eviction
/// (429), kubectl retries until the drain timeout; the driver fails naming a pod, and the Node
/// stays. The budget removed, the next phase's scale-in goes through.
fn drain_blocked_by_a_pdb(t: &mut RealCluster) -> R {
    let c = &t.c;
    let out = kubectl(c, "create poddisruptionbudget web --selector=app=web --max-unavailable=0");
    check(out.contains("created"), || out.clone())?;
    // The disruption controller must have computed the budget before an eviction reads it.
    let (ok, st) = wait_until(
        Duration::from_secs(30),
        || kubectl(c, "get pdb web -o jsonpath='{.status.expectedPods} {.status.disruptionsAllowed}'"),
        |s| s.trim() == "4 0",
    );
    check(ok, || format!("the PodDisruptionBudget's status: {st}"))?;
    let on13: Vec<String> = web_pods(c).into_iter().filter(|p| p.1 == "worker13").map(|p| p.0).collect();
    let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    let r = c.hook("scale-start", Some(&inn), &["--node", &c.lab.node(3), "--drain-timeout", "3"]);
    kubectl(c, "delete pdb web");
    r.fails(1, "");
    check(on13.iter().any(|p| r.all().contains(p.as_str())), || {
        format!("the error names no pod of {on13:?}:\n{}", r.all())
    })?;
    check(c.k8s_nodes().contains(&"worker13".to_string()), || "the node must stay when its pods cannot leave".into())?;
    let left: Vec<String> = web_pods(c).into_iter().filter(|p| p.1 == "worker13").map(|p| p.0).collect();
    check(left == on13, || format!("pods evicted despite the budget: {on13:?} -> {left:?}"))
}

fn scale_in_one(t: &mut RealCluster) -> R {
    let c = &t.c;
    let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    c.hook("scale-start", Some(&inn), &[]).fails(2, "--node");
    let before: Vec<String> = web_pods(c).into_iter().filter(|p| p.1 == "worker13").map(|p| p.0).collect();
    check(!before.is_empty(), || "no pod of web on worker13 to evict".into())?;
    let node3 = c.lab.node(3);
    c.hook("scale-start", Some(&inn), &["--node", &node3]).ok();
    let nodes = c.k8s_nodes();
    check(!nodes.contains(&"worker13".to_string()) && nodes.len() == 3, || format!("{nodes:?}"))?;
    // The evicted pods are gone; their ReplicaSet made new ones on the other workers.
    let (ok, pods) = wait_until(Duration::from_secs(60), || web_pods(c), |p| all_running(p, 4));
    check(ok && pods.iter().all(|p| p.1 == "worker12" || p.1 == "worker14"), || {
        format!("web after the drain: {pods:?}")
    })?;
    check(pods.iter().all(|p| !before.contains(&p.0)), || format!("{before:?} not evicted: {pods:?}"))?;
    let hosts = c.on(1, "cat /etc/hosts");
    check(!hosts.contains("worker13") && hosts.contains("worker14"), || hosts.clone())?;
    write_inventory(c, &[2, 4]);
    check(c.state_doc().unwrap()["nodes"].get(&node3).is_none(), || "removed node still in state".into())
}

/// SOL002 heal of worker14: heal-start drains and deletes it; the VNFM replaces its VM (a fresh
/// disk and host key: `lab.sh rebuild`); heal-end joins the new VM with a new CSR.
fn heal_a_rebuilt_worker(t: &mut RealCluster) -> R {
    let c = &t.c;
    let heal = c.write("heal-w.json", &json!({"vnfcInstanceId": [c.lab.node(4)], "cause": "healing"}));
    c.hook("heal-start", Some(&heal), &[]).ok();
    check(!c.k8s_nodes().contains(&"worker14".to_string()), || format!("{:?}", c.k8s_nodes()))?;
    let (ok, pods) = wait_until(Duration::from_secs(60), || web_pods(c), |p| all_running(p, 4));
    check(ok && pods.iter().all(|p| p.1 == "worker12"), || format!("web after heal-start: {pods:?}"))?;
    let o = c.lab.script(&["rebuild".into(), "4".into(), "--name".into(), c.lab.name.clone()]);
    check(o.status.success(), || format!("lab rebuild 4: {}", String::from_utf8_lossy(&o.stderr)))?;
    let csrs = approved_bootstrap_csrs(c);
    c.hook("heal-end", Some(&heal), &[]).ok();
    let want = ["master11=True", "worker12=True", "worker14=True"];
    let (ok, nodes) = wait_until(Duration::from_secs(30), || nodes_ready(c), |n| n == &want);
    check(ok, || format!("nodes: {nodes:?}"))?;
    check(approved_bootstrap_csrs(c) == csrs + 1, || "the healed worker did not bootstrap with a new CSR".into())?;
    check_placement(c, 4)
}

/// Terminate with a reset: the record gone; on the master the control plane's daemons stopped,
/// etcd's data and kubeadm's files gone; on the workers the node agent stopped and kubelet.conf
/// gone.
fn terminate_and_reset(t: &mut RealCluster) -> R {
    let c = &t.c;
    let r = c.hook("terminate-end", None, &["--reset-nodes"]);
    r.ok();
    check(c.state_doc().is_none(), || "state not removed".into())?;
    check(k8s_conn(&doc(&r)).is_null(), || "the kubernetes vimConnectionInfo must be gone".into())?;
    let left = c.on(
        1,
        "for p in /run/labkit/*.pid; do [ -e \"$p\" ] && kill -0 \"$(cat \"$p\")\" 2>/dev/null && echo \"running: $p\"; done; \
         pgrep -a 'etcd|kube-apiserver|kube-controller|kube-scheduler' ; \
         find /etc/kubernetes/pki /etc/kubernetes/manifests /var/lib/etcd -mindepth 1 2>/dev/null; \
         ls /etc/kubernetes/*.conf 2>/dev/null; true",
    );
    check(left.trim().is_empty(), || format!("left on master11 after the reset:\n{left}"))?;
    for i in [2, 4] {
        let left = c.on(
            i,
            "p=/run/labkit/labkit-kubelet.pid; [ -e $p ] && kill -0 \"$(cat $p)\" 2>/dev/null && echo \"running: $p\"; \
             ls /etc/kubernetes/kubelet.conf /var/lib/kubelet/pki 2>/dev/null; true",
        );
        check(left.trim().is_empty(), || format!("left on node {i} after the reset:\n{left}"))?;
    }
    Ok(())
}

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("single_master_two_workers_on_the_real_api", single_master_two_workers_on_the_real_api)])
}
