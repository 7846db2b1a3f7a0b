//! Private registries and worker placement labels end to end on the kit lab (scripts/lab.sh
//! `--kit`): an HA cluster (3 masters + 1 worker) with one HTTPS registry (its CA from the
//! package, a login) and one anonymous HTTP registry. Checked on every node's files (containerd's
//! hosts.toml and ca.crt, /etc/hosts, kubelet's credential file with its mode), the login absent
//! from every output, the state and every process's argv during the runs; a scale-out node gets
//! the registries and its labels; a heal whose params drop the HTTPS registry leaves no trace of
//! it on any node.
//!
//! Needs root (namespaces); lab `r1`, net 110.

use crate::support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, Cluster, R};
use support::phase::{phase, phases};

const PW: &str = "Reg-Lab-pw-7f3a";
const USER: &str = "puller";
const HTTPS_REG: &str = "reg.lab:5443";
const HTTP_REG: &str = "198.18.110.60:5000";

/// base64("puller:Reg-Lab-pw-7f3a"): what kubelet's config.json carries.
fn auth_b64() -> String {
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' '{USER}:{PW}' | base64 -w0"))
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap()
}

/// Every process command line seen while a run goes on (host /proc: the lab nodes' processes
/// are in it too), kept when it holds a secret.
struct ArgvWatch {
    stop: Arc<AtomicBool>,
    hits: Arc<Mutex<BTreeSet<String>>>,
    /// A command line holding `probe` was seen: the watch does see the nodes' commands.
    probed: Arc<AtomicBool>,
    seen: Arc<Mutex<usize>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ArgvWatch {
    fn start(secrets: Vec<String>, probe: &'static str) -> ArgvWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(Mutex::new(BTreeSet::new()));
        let seen = Arc::new(Mutex::new(0usize));
        let probed = Arc::new(AtomicBool::new(false));
        let (s, h, n, p) = (stop.clone(), hits.clone(), seen.clone(), probed.clone());
        let thread = std::thread::spawn(move || {
            let mut pids = BTreeSet::new();
            while !s.load(Ordering::Relaxed) {
                for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
                    let Ok(raw) = std::fs::read(e.path().join("cmdline")) else { continue };
                    pids.insert(pid);
                    let text = String::from_utf8_lossy(&raw).replace('\0', " ");
                    if text.contains(probe) {
                        p.store(true, Ordering::Relaxed);
                    }
                    if secrets.iter().any(|x| text.contains(x.as_str())) {
                        h.lock().unwrap().insert(text);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            *n.lock().unwrap() = pids.len();
        });
        ArgvWatch { stop, hits, probed, seen, thread: Some(thread) }
    }

    /// (command lines holding a secret, processes seen, the probe seen).
    fn finish(mut self) -> (BTreeSet<String>, usize, bool) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let hits = self.hits.lock().unwrap().clone();
        let seen = *self.seen.lock().unwrap();
        (hits, seen, self.probed.load(Ordering::Relaxed))
    }
}

struct RegCluster {
    c: Cluster,
    req: Value,
    /// Everything the runs printed, for the secret checks.
    output: String,
    ca_pem: String,
}

fn registries(with_https: bool) -> Value {
    let mut v = Vec::new();
    if with_https {
        v.push(json!({"connection_type": "1", "server": HTTPS_REG, "username": USER, "password": PW,
                      "certificate_path": "Files/registry/ca.crt", "hosts_string": "198.18.110.61 reg.lab"}));
    }
    v.push(json!({"connection_type": 0, "server": HTTP_REG, "hosts_string": "198.18.110.60 plain.reg.lab"}));
    Value::Array(v)
}

/// Nodes 1-3 masters, 4 a worker, 5 joins by scale-out; placement for the workers in the inventory.
fn write_inventory(c: &Cluster, workers: &[usize]) {
    c.write_inventory(&[1, 2, 3], workers, true);
    let mut y = std::fs::read_to_string(&c.inv).unwrap();
    y.push_str(&format!("placement:\n  {}: {{host_compute: cmp-1, zone: az-1}}\n", c.lab.node(4)));
    if workers.contains(&5) {
        y.push_str(&format!("  {}: {{host_compute: cmp-2, zone: az-2}}\n", c.lab.node(5)));
    }
    std::fs::write(&c.inv, y).unwrap();
}

/// Run one hook while watching every argv on the machine; the run must succeed. `probe`: a
/// node-side command the run must have been seen running (the watch's positive control).
fn watched(t: &mut RegCluster, probe: &'static str, what: impl FnOnce(&Cluster) -> support::Run) -> R {
    let watch = ArgvWatch::start(vec![PW.to_string(), auth_b64()], probe);
    let r = what(&t.c);
    let (hits, seen, probed) = watch.finish();
    r.ok();
    t.output.push_str(&r.all());
    check(seen > 10 && probed, || format!("the argv watch saw {seen} processes, {probe} among them: {probed}"))?;
    check(hits.is_empty(), || format!("the registry login was in a command line: {hits:#?}"))
}

fn registries_and_labels() -> R {
    let mut t = phase("bring up 3 masters + 1 worker (+1 spare)", || {
        let c = Cluster::new("r1", 110, 5, &[1, 2, 3], &[4], true);
        write_inventory(&c, &[4]);
        let dir = c.pkg.join("Files/registry");
        std::fs::create_dir_all(&dir).unwrap();
        let o = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=registry lab CA", "-keyout"])
            .arg(dir.join("ca.key"))
            .arg("-out")
            .arg(dir.join("ca.crt"))
            .output()
            .unwrap();
        assert!(o.status.success(), "openssl: {}", String::from_utf8_lossy(&o.stderr));
        std::fs::remove_file(dir.join("ca.key")).unwrap();
        let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
        let mut req = c.request();
        req["additionalParams"]["k8s_cluster_installation_param"]["private_registry_connection_info"] =
            registries(true);
        Ok(RegCluster { c, req, output: String::new(), ca_pem })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate with an HTTPS registry (CA, login) and an HTTP one; no login in any argv", instantiate),
            ("every node: hosts.toml, ca.crt, /etc/hosts, kubelet credentials 0600, config_path", every_node_has_both),
            ("a second instantiate changes nothing and adds no /etc/hosts line", rerun_is_idempotent),
            ("the worker carries CIS-node and kubernetes.io/zone", worker_labels),
            ("scale-out: the new worker gets the registries and its labels", scale_out_gets_registries),
            ("heal with the HTTPS registry dropped: no trace of it on any node", heal_drops_registry),
            ("the login is in no output, state file or run directory", login_never_leaks),
            ("terminate --reset-nodes removes every registry file of ours", terminate_removes_registries),
        ],
    )
}

fn instantiate(t: &mut RegCluster) -> R {
    let req = t.req.clone();
    watched(t, "install_k8s_cluster.sh", |c| c.instantiate(&req))
}

/// What a node must have for both registries (`https`: the HTTPS one with its login too).
fn node_has(t: &RegCluster, i: usize, https: bool) -> R {
    let c = &t.c;
    let dir = format!("/etc/containerd/certs.d/{HTTPS_REG}");
    let toml = c.on(i, &format!("cat {dir}/hosts.toml 2>/dev/null"));
    let ca = c.on(i, &format!("cat {dir}/ca.crt 2>/dev/null"));
    let http = c.on(i, &format!("cat /etc/containerd/certs.d/{HTTP_REG}/hosts.toml"));
    let hosts = c.on(i, "cat /etc/hosts");
    let kubelet = c.on(i, "cat /var/lib/kubelet/config.json 2>&1");
    let mode = c.on(i, "stat -c '%a' /var/lib/kubelet/config.json 2>&1");
    let n = c.lab.node(i);
    check(http.contains(&format!("server = \"http://{HTTP_REG}\"")) && http.contains("skip_verify = true"), || {
        format!("{n}: HTTP registry hosts.toml:\n{http}")
    })?;
    check(hosts.matches("198.18.110.60 plain.reg.lab # mgmt-driver registry").count() == 1, || {
        format!("{n}: /etc/hosts:\n{hosts}")
    })?;
    if https {
        check(
            toml.contains(&format!("server = \"https://{HTTPS_REG}\""))
                && toml.contains(&format!("ca = \"{dir}/ca.crt\""))
                && !toml.contains("skip_verify"),
            || format!("{n}: HTTPS registry hosts.toml:\n{toml}"),
        )?;
        check(ca == t.ca_pem, || format!("{n}: ca.crt is not the package's CA:\n{ca}"))?;
        check(hosts.matches("198.18.110.61 reg.lab # mgmt-driver registry").count() == 1, || {
            format!("{n}: /etc/hosts:\n{hosts}")
        })?;
        let got: Value = serde_json::from_str(&kubelet).unwrap_or(Value::Null);
        let want = json!({"auths": {HTTPS_REG: {"auth": auth_b64()}}});
        check(got == want && mode.trim() == "600", || {
            format!("{n}: kubelet config.json (mode {mode}, want 600):\n{kubelet}")
        })?;
    } else {
        check(toml.is_empty() && ca.is_empty(), || format!("{n}: the dropped registry is still there:\n{toml}{ca}"))?;
        check(!hosts.contains("198.18.110.61"), || format!("{n}: /etc/hosts keeps the dropped registry:\n{hosts}"))?;
        check(kubelet.contains("No such file"), || format!("{n}: stale kubelet credentials:\n{kubelet}"))?;
    }
    Ok(())
}

fn every_node_has_both(t: &mut RegCluster) -> R {
    for i in 1..=4 {
        node_has(t, i, true)?;
        let cfg = t.c.on(i, "cat /etc/containerd/config.toml");
        check(cfg.contains("config_path = \"/etc/containerd/certs.d\""), || {
            format!("{}: containerd does not read certs.d:\n{cfg}", t.c.lab.node(i))
        })?;
    }
    let spare = t.c.on(5, "ls /etc/containerd/certs.d 2>&1; ls /var/lib/kubelet/config.json 2>&1");
    check(spare.contains("No such file"), || format!("the spare node was touched: {spare}"))
}

fn rerun_is_idempotent(t: &mut RegCluster) -> R {
    let snap = |c: &Cluster| {
        c.on(2, "cat /etc/hosts; cat /etc/containerd/certs.d/*/hosts.toml; cat /var/lib/kubelet/config.json")
    };
    let before = snap(&t.c);
    let req = t.req.clone();
    watched(t, "mgmt-driver", |c| c.instantiate(&req))?;
    let after = snap(&t.c);
    check(before == after, || format!("a re-run changed the node:\n{before}\n---\n{after}"))?;
    node_has(t, 2, true)
}

fn worker_labels_of(c: &Cluster, k8s: &str) -> Value {
    let o = c.on(1, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node {k8s} -o json"));
    serde_json::from_str::<Value>(&o).map(|v| v["metadata"]["labels"].clone()).unwrap_or(Value::Null)
}

fn worker_labels(t: &mut RegCluster) -> R {
    let l = worker_labels_of(&t.c, "worker14");
    check(l["CIS-node"] == "cmp-1" && l["kubernetes.io/zone"] == "az-1", || format!("worker14 labels: {l}"))?;
    let m = worker_labels_of(&t.c, "master11");
    check(m.get("CIS-node").is_none(), || format!("a master got a placement label: {m}"))
}

fn scale_out_gets_registries(t: &mut RegCluster) -> R {
    write_inventory(&t.c, &[4, 5]);
    let out =
        t.c.write("scale-out.json", &json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}));
    watched(t, "install_k8s_cluster.sh", |c| c.hook("scale-end", Some(&out), &[]))?;
    node_has(t, 5, true)?;
    // The existing nodes were brought to the same params: unchanged.
    node_has(t, 4, true)?;
    let l = worker_labels_of(&t.c, "worker15");
    check(l["CIS-node"] == "cmp-2" && l["kubernetes.io/zone"] == "az-2", || format!("worker15 labels: {l}"))
}

fn heal_drops_registry(t: &mut RegCluster) -> R {
    let mut params = t.req["additionalParams"].clone();
    params["k8s_cluster_installation_param"]["private_registry_connection_info"] = registries(false);
    let heal = t.c.write("heal.json", &json!({"vnfcInstanceId": [t.c.lab.node(4)], "additionalParams": params}));
    t.c.hook("heal-start", Some(&heal), &[]).ok();
    t.c.fresh_vm(4);
    watched(t, "install_k8s_cluster.sh", |c| c.hook("heal-end", Some(&heal), &[]))?;
    // heal-end prepares every node again: the dropped registry goes everywhere.
    for i in 1..=5 {
        node_has(t, i, false)?;
    }
    let l = worker_labels_of(&t.c, "worker14");
    check(l["kubernetes.io/zone"] == "az-1", || format!("the healed worker lost its labels: {l}"))
}

fn login_never_leaks(t: &mut RegCluster) -> R {
    let b64 = auth_b64();
    for s in [PW, b64.as_str()] {
        check(!t.output.contains(s), || format!("{s} in the output:\n{}", t.output))?;
    }
    // The plan shows the registry step with its credentials file, and never the login.
    let plan = t.c.hook("instantiate-end", Some(&t.c.dir.path().join("instantiate.json")), &["--dry-run"]);
    plan.ok();
    let p = plan.all();
    check(
        p.contains("registry_apply.sh") && p.contains("env.registry-auth") && p.contains(&format!("-C {HTTPS_REG}")),
        || format!("the plan lacks the registry step:\n{p}"),
    )?;
    check(!p.contains(PW) && !p.contains(&b64), || format!("the plan shows the login:\n{p}"))?;
    let grep =
        std::process::Command::new("grep").args(["-rlF", "-e", PW, "-e", &b64]).arg(&t.c.state).output().unwrap();
    check(grep.status.code() == Some(1), || {
        format!("the login is in the state dir: {}", String::from_utf8_lossy(&grep.stdout))
    })?;
    let st = t.c.state_doc().unwrap();
    let sealed = &st["params"]["private_registry_connection_info"][0]["password"];
    check(sealed["sealed"].as_str().is_some_and(|s| s.starts_with("v2:")), || format!("not sealed: {sealed}"))?;
    for i in 1..=5 {
        let left = t.c.on(i, "ls -a /root/.mgmt-driver/run/inst-r1 2>/dev/null");
        check(!left.contains("env.registry-auth"), || format!("{}: credentials upload left: {left}", t.c.lab.node(i)))?;
    }
    Ok(())
}

/// Tacker's CIR guide body (an HTTP registry, no login) plans the registry step on every node,
/// anonymous: no credentials file; and it needs no root.
fn tacker_cir_body_plans() -> R {
    let dir = tempfile::tempdir().unwrap();
    let pkg = support::kit::package(dir.path());
    let inv = dir.path().join("inv.yaml");
    let mut y = format!("defaults: {{known_hosts: {}/kh}}\ngroups:\n  master_instance:\n", dir.path().display());
    for i in 1..=3 {
        y.push_str(&format!("    - {{name: m{i}, ssh_ip: 192.0.2.{i}}}\n"));
    }
    y.push_str("  worker_instance:\n    - {name: w1, ssh_ip: 192.0.2.21}\ncps: {vip_CP: 192.0.2.100}\n");
    std::fs::write(&inv, y).unwrap();
    let req = support::repo().join("tests/data/tacker/v1/k8s-cluster-cir/private_registry_kubernetes_param_file.json");
    let state = dir.path().join("state");
    let r = support::mgmt(
        &[
            "instantiate-end",
            "--dry-run",
            "-o",
            "json",
            "--request",
            support::kit::s(&req),
            "-i",
            support::kit::s(&inv),
            "--package-dir",
            support::kit::s(&pkg),
            "--vnf-instance-id",
            "i1",
            "--state-dir",
            support::kit::s(&state),
        ],
        &[],
    );
    r.ok();
    let out = r.all();
    let steps = out.matches("registry_apply.sh .mgmt-driver/run/i1 - -s 192.168.246.10:5000").count();
    check(steps >= 4, || format!("the registry step is not planned on all 4 nodes ({steps}):\n{out}"))?;
    check(!out.contains("env.registry-auth") && !out.contains("password1"), || {
        format!("an anonymous registry got credentials, or a secret shows:\n{out}")
    })
}

fn terminate_removes_registries(t: &mut RegCluster) -> R {
    let c = &t.c;
    c.on(2, "mkdir -p /etc/containerd/certs.d/other.example && echo 'server = x' > /etc/containerd/certs.d/other.example/hosts.toml");
    c.hook("terminate-end", None, &["--reset-nodes"]).ok();
    for i in 1..=5 {
        let left = c.on(i, "ls /etc/containerd/certs.d 2>/dev/null; grep -c 'mgmt-driver registry' /etc/hosts; ls /var/lib/kubelet/config.json 2>&1");
        let want = if i == 2 { "other.example\n0\n" } else { "0\n" };
        check(left.starts_with(want) && left.contains("No such file"), || {
            format!("{}: registry files left after terminate (only an operator's own may stay):\n{left}", c.lab.node(i))
        })?;
    }
    Ok(())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .without_root(&[("tacker_cir_body_plans", tacker_cir_body_plans)])
        .needing_root(&[("registries_and_labels", registries_and_labels)])
}
