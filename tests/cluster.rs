//! Cluster lifecycle hooks end to end on real sshd lab nodes with the lab kit (scripts/lab.sh
//! `--kit`): our shipped install scripts run unmodified on the nodes; only `kubeadm`, `kubectl`,
//! `apt-get`, `systemctl`, … are stand-ins (tests/labkit, docs/labkit.md). Every test drives the
//! real `mgmt-driver` binary.
//!
//! Needs root (namespaces). Outside CI a non-root run skips the lab tests loudly; under CI=true
//! it fails (tests/support/harness.rs). Tests that need no node (every Tacker body parses and
//! plans) always run. Each lab test brings up its own lab, torn down when its `Cluster` drops.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, outcome, request, s, Cluster, R};
use support::phase::{phase, phases};
use support::{mgmt, repo};

// ------------------------------------------------------------------ tests

/// What the phases of [`single_master_two_workers_with_request_passwords`] share.
struct PasswordCluster {
    c: Cluster,
    /// The node password, given in the request.
    pw: String,
    req: Value,
    /// The first instantiate's output, and the kubernetes VIM record it returned.
    first_output: String,
    conn: Value,
}

/// Tacker's way: password logins from the request, a non-root user that needs sudo.
fn single_master_two_workers_with_request_passwords() -> R {
    let mut t = phase("bring up 1 master + 2 workers", || {
        let c = Cluster::new("c1", 20, 3, &[1], &[2, 3], false);
        let pw = c.lab.password();
        let req = request("master_instance", "worker_instance", "mduser", &pw, "masterNode_CP1");
        Ok(PasswordCluster { c, pw, req, first_output: String::new(), conn: Value::Null })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate with the request's passwords", instantiate_with_request_passwords),
            ("private state with the real token, /etc/hosts, private run directory", state_hosts_and_run_dir),
            ("a second instantiate changes nothing", second_instantiate_changes_nothing),
            ("a single master cannot heal a master", single_master_cannot_heal_a_master),
        ],
    )
}

fn instantiate_with_request_passwords(t: &mut PasswordCluster) -> R {
    let c = &t.c;
    let r = c.instantiate(&t.req);
    r.ok();
    check(!r.all().contains(&t.pw), || format!("the node password leaked into the output:\n{}", r.all()))?;
    let d = doc(&r);
    let conn = k8s_conn(&d);
    check(conn["accessInfo"]["authUrl"] == format!("https://{}:6443", c.lab.ip(1)), || format!("authUrl: {conn}"))?;
    check(d["result"]["vimConnectionInfo"][0]["vimType"] == "openstack", || {
        "the request's own VIM entry must be kept".into()
    })?;
    check(d["result"]["vim"]["auth_cred"]["bearer_token"] == "********", || {
        format!("bearer token must be masked: {}", d["result"]["vim"])
    })?;
    check(
        d["result"]["vim"]["auth_cred"]["ssl_ca_cert"]
            .as_str()
            .unwrap_or("")
            .starts_with("-----BEGIN CERTIFICATE-----"),
        || format!("{}", d["result"]["vim"]),
    )?;
    check(conn["extra"].get("helm_info").is_none(), || "no Helm script, no helm_info".into())?;
    let mut nodes = c.k8s_nodes();
    nodes.sort();
    let want = vec![format!("master{}", 11), format!("worker{}", 12), format!("worker{}", 13)];
    check(nodes == want, || format!("cluster nodes {nodes:?}, want {want:?}"))?;
    t.first_output = r.all();
    t.conn = conn;
    Ok(())
}

fn state_hosts_and_run_dir(t: &mut PasswordCluster) -> R {
    let c = &t.c;
    // State: private, with the real token.
    let st = c.state_doc().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(c.state.join(format!("{}.json", c.id))).unwrap().permissions().mode() & 0o777;
    check(mode == 0o600, || format!("state mode {mode:o}"))?;
    // The token is kept, sealed (tests/secrets.rs proves that later hooks read it back).
    let sealed = st["bearer_token"]["sealed"].as_str().unwrap_or("").to_string();
    check(sealed.starts_with("v2:") && !t.first_output.contains(&sealed), || {
        format!("bearer token missing from the state or not sealed: {}", st["bearer_token"])
    })?;
    // /etc/hosts on a worker knows every node, once.
    let hosts = c.on(2, "cat /etc/hosts");
    check(
        hosts.matches(&format!("{} master11 # mgmt-driver", c.lab.ip(1))).count() == 1 && hosts.contains("worker13"),
        || hosts.clone(),
    )?;
    // The run directory is private and the env file with secrets is gone.
    let ls = c.on(1, "stat -c '%a %n' /home/mduser/.mgmt-driver/run/inst-c1 /home/mduser/.mgmt-driver/run/inst-c1/install_k8s_cluster.sh; ls /home/mduser/.mgmt-driver/run/inst-c1");
    check(ls.contains("700 /home/mduser/.mgmt-driver/run/inst-c1\n") && !ls.contains("env.install"), || ls.clone())
}

/// A second run changes nothing and gives the same record.
fn second_instantiate_changes_nothing(t: &mut PasswordCluster) -> R {
    let c = &t.c;
    let conn = &t.conn;
    let r2 = c.instantiate(&t.req);
    r2.ok();
    let d2 = doc(&r2);
    check(k8s_conn(&d2) == *conn, || format!("record changed:\n{conn}\n{}", k8s_conn(&d2)))?;
    check(outcome(&d2, &c.lab.node(3)) == "already installed", || format!("{}", d2["result"]["nodes"]))?;
    let inits = c.kit()["events"].as_array().unwrap().iter().filter(|e| e["event"] == "initialized").count();
    check(inits == 1, || format!("kubeadm init ran {inits} times"))
}

fn single_master_cannot_heal_a_master(t: &mut PasswordCluster) -> R {
    let c = &t.c;
    let heal = c.write("heal.json", &json!({"vnfcInstanceId": [c.lab.node(1)]}));
    c.hook("heal-start", Some(&heal), &[]).fails(2, "is the only master");
    Ok(())
}

/// 3 masters behind a VIP + 3 workers: masters join in order, workers at the same time.
fn ha_masters_in_order_workers_in_parallel() -> R {
    let c = Cluster::new("c2", 21, 6, &[1, 2, 3], &[4, 5, 6], true);
    c.kit_ctl(&["set-delay", "1.5"]);
    let r = c.instantiate(&c.request());
    r.ok();
    // Join tokens and certificate keys were used, and none of them reached our output.
    let cluster = &c.kit()["cluster"];
    let tokens: Vec<&String> = cluster["tokens"].as_object().unwrap().keys().collect();
    check(!tokens.is_empty(), || "no join token in the kit state".into())?;
    for t in tokens {
        let secret = t.split('.').nth(1).unwrap_or(t);
        check(!r.all().contains(secret), || format!("join token {t} leaked into the output"))?;
    }
    let key = cluster["certificate_key"]["key"].as_str().unwrap_or("").to_string();
    check(key.len() == 64 && !r.all().contains(&key), || format!("certificate key missing or leaked: {key}"))?;
    let d = doc(&r);
    check(k8s_conn(&d)["accessInfo"]["authUrl"] == format!("https://{}:16443", c.vip()), || {
        format!("{}", k8s_conn(&d))
    })?;
    let timing = c.kit()["timing"].clone();
    let span = |n: &str| -> (f64, f64) {
        let t = &timing[n];
        let start = t["init_started"]
            .as_f64()
            .or(t["join_started"].as_f64())
            .unwrap_or_else(|| panic!("no start for {n}: {timing}"));
        (start, t["joined_at"].as_f64().unwrap_or_else(|| panic!("no end for {n}: {timing}")))
    };
    let m: Vec<(f64, f64)> = ["master11", "master12", "master13"].iter().map(|n| span(n)).collect();
    check(m[0].1 <= m[1].0 && m[1].1 <= m[2].0, || format!("masters overlapped or ran out of order: {m:?}"))?;
    let w: Vec<(f64, f64)> = ["worker14", "worker15", "worker16"].iter().map(|n| span(n)).collect();
    let latest_start = w.iter().map(|x| x.0).fold(f64::MIN, f64::max);
    let earliest_end = w.iter().map(|x| x.1).fold(f64::MAX, f64::min);
    check(latest_start < earliest_end, || format!("workers did not overlap in time: {w:?}"))?;
    check(w.iter().all(|x| x.0 >= m[2].1), || "workers must start after the last master".into())?;
    let cfg = c.on(2, "cat /etc/haproxy/haproxy.cfg");
    for (i, ip) in [(11, c.lab.ip(1)), (12, c.lab.ip(2)), (13, c.lab.ip(3))] {
        check(cfg.contains(&format!("server  master{i}  {ip}:6443 check")), || {
            format!("haproxy.cfg lacks master{i}:\n{cfg}")
        })?;
    }
    check(c.k8s_nodes().len() == 6, || format!("{:?}", c.k8s_nodes()))?;
    Ok(())
}

/// Proxy with credentials: no_proxy from CIDRs, credentials never in our output; Helm → helm_info.
fn proxy_and_helm_info() -> R {
    let c = Cluster::new("c3", 22, 2, &[1], &[2], true);
    let mut req = c.request();
    let p = &mut req["additionalParams"]["k8s_cluster_installation_param"];
    p["proxy"] = json!({"http_proxy": "http://user1:Pr0xyS3cret@proxy.lab:3128", "https_proxy": "http://user1:Pr0xyS3cret@proxy.lab:3128",
                        "no_proxy": "192.168.246.0/24,10.0.0.1", "k8s_node_cidr": "198.18.22.0/24"});
    p["helm_installation_script_path"] = "Scripts/install_helm.sh".into();
    let r = c.instantiate(&req);
    r.ok();
    check(!r.all().contains("Pr0xyS3cret"), || format!("proxy credentials in the output:\n{}", r.all()))?;
    let d = doc(&r);
    let hi = &k8s_conn(&d)["extra"]["helm_info"];
    check(hi["masternode_ip"] == json!([c.lab.ip(1)]) && hi["masternode_username"] == "root", || {
        format!("helm_info: {hi}")
    })?;
    check(
        // The reference is a bearer secret: the result masks it (the VNFM's entry holds it).
        hi.get("masternode_password").is_none() && hi["masternode_credential_ref"] == "********",
        || format!("{hi}"),
    )?;
    check(c.on(1, "helm version --short").contains("v3.99.0-lab"), || "helm is not installed on the master".into())?;
    // What the scripts were given: the proxy config they wrote on the node.
    let conf = c.on(
        2,
        "cat /etc/systemd/system/containerd.service.d/*proxy* 2>/dev/null; cat /etc/apt/apt.conf.d/*proxy* 2>/dev/null",
    );
    check(conf.contains("Pr0xyS3cret"), || format!("the script did not get the proxy: {conf}"))?;
    let np = conf.lines().find(|l| l.to_ascii_lowercase().contains("no_proxy")).unwrap_or("").to_string();
    for want in [
        "192.168.246.0/24",
        "10.0.0.1",
        "198.18.22.0/24",
        "192.168.0.0/16",
        "10.199.187.0/24",
        "127.0.0.1",
        "localhost",
        ".svc",
    ] {
        check(np.contains(want), || format!("no_proxy lacks {want}: {np}"))?;
    }
    check(np.len() < 400, || format!("no_proxy is built from networks, not addresses: {} bytes", np.len()))?;
    // And nothing on the nodes logged it where a user could read it.
    let leaks = c.on(2, "grep -rl Pr0xyS3cret /tmp /home /var/log 2>/dev/null; stat -c '%a %n' /etc/systemd/system/containerd.service.d/*proxy* 2>/dev/null");
    check(!leaks.contains("/tmp") && !leaks.contains("/home") && !leaks.contains("/var/log"), || {
        format!("proxy credentials left readable: {leaks}")
    })?;
    Ok(())
}

/// Worker 2's script fails: the run fails naming it; the re-run completes only what is missing.
fn rerun_after_worker_failure() -> R {
    let c = phase("bring up 1 master + 2 workers, worker13's install set to fail", || {
        let c = Cluster::new("c4", 23, 3, &[1], &[2, 3], true);
        c.kit_ctl(&["fail", "worker13", "injected: disk full"]);
        Ok(c)
    })?;
    let req = c.request();
    phase("the failing worker fails the run, named, with its error", || failed_worker_fails_the_run(&c, &req))?;
    phase("the re-run completes only what is missing", || rerun_completes_what_is_missing(&c, &req))
}

fn failed_worker_fails_the_run(c: &Cluster, req: &Value) -> R {
    let r = c.instantiate(req);
    r.fails(1, &c.lab.node(3));
    check(r.all().contains("injected: disk full"), || format!("the node's error must be shown:\n{}", r.all()))?;
    let st = c.state_doc().unwrap();
    check(st["nodes"][c.lab.node(2)]["installed"] == true && st["nodes"][c.lab.node(3)]["installed"] != true, || {
        format!("{}", st["nodes"])
    })?;
    check(st["vim"].is_null(), || "no record before the cluster is complete".into())
}

fn rerun_completes_what_is_missing(c: &Cluster, req: &Value) -> R {
    c.kit_ctl(&["unfail", "worker13"]);
    let r = c.instantiate(req);
    r.ok();
    let d = doc(&r);
    check(
        outcome(&d, &c.lab.node(1)) == "already installed" && outcome(&d, &c.lab.node(2)) == "already installed",
        || format!("{}", d["result"]["nodes"]),
    )?;
    check(outcome(&d, &c.lab.node(3)) == "joined as worker", || format!("{}", d["result"]["nodes"]))?;
    let joins = c.kit()["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "joined" && e["node"] == "worker12")
        .count();
    check(joins == 1, || format!("worker12 joined {joins} times"))?;
    let again = doc(c.instantiate(req).ok());
    check(k8s_conn(&again) == k8s_conn(&d), || "the record must be the same on every run".into())
}

/// What the phases of [`heal_sol002_worker_and_master`] share.
struct HealCluster {
    c: Cluster,
    /// SOL002 heal requests for worker 4 and master 3.
    worker: PathBuf,
    master: PathBuf,
}

/// SOL002 heal of a worker and of a master in an HA cluster; haproxy and etcd follow.
fn heal_sol002_worker_and_master() -> R {
    let mut h = phase("instantiate 3 masters + 1 worker with Helm, a chart and a repository", || {
        let c = Cluster::new("c5", 24, 4, &[1, 2, 3], &[4], true);
        let mut req = c.request();
        req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
            "Scripts/install_helm.sh".into();
        c.instantiate(&req).ok();
        // A chart and a repository on the survivors, as a CNF deployment leaves them.
        for i in [1, 2] {
            c.on(i, "mkdir -p /var/tacker/helm/vnf1/localhelm && echo 'name: localhelm' > /var/tacker/helm/vnf1/localhelm/Chart.yaml && helm repo add bitnami https://charts.bitnami.com/bitnami >/dev/null");
        }
        let worker = c.write("heal-w.json", &json!({"vnfcInstanceId": c.lab.node(4)}));
        let master = c.write("heal-m.json", &json!({"vnfcInstanceId": [c.lab.node(3)], "cause": "healing"}));
        Ok(HealCluster { c, worker, master })
    })?;
    phases(
        &mut h,
        &[
            ("heal-start removes the worker, evicting its pod; a retry is a no-op", heal_start_worker),
            ("heal-end joins the fresh worker", heal_end_worker),
            ("heal-start removes master 3 from haproxy and etcd", heal_start_master),
            ("heal-end refuses a survivor's chart root with a link out of it", heal_end_refuses_a_chart_link),
            ("heal-end, re-run, joins the fresh master 3: haproxy, etcd, Helm", heal_end_master),
        ],
    )
}

/// Worker: a pod on it must be evicted.
fn heal_start_worker(h: &mut HealCluster) -> R {
    let c = &h.c;
    c.kit_ctl(&["add-pod", "worker14", "web-1"]);
    c.hook("heal-start", Some(&h.worker), &[]).ok();
    check(!c.k8s_nodes().contains(&"worker14".to_string()), || format!("{:?}", c.k8s_nodes()))?;
    // A VNFM that retries the hook: nothing left to do, and no error.
    let again = doc(c.hook("heal-start", Some(&h.worker), &[]).ok());
    check(outcome(&again, &c.lab.node(4)).starts_with("already removed"), || format!("{}", again["result"]["nodes"]))
}

fn heal_end_worker(h: &mut HealCluster) -> R {
    let c = &h.c;
    c.fresh_vm(4);
    c.hook("heal-end", Some(&h.worker), &[]).ok();
    check(c.k8s_nodes().contains(&"worker14".to_string()), || format!("{:?}", c.k8s_nodes()))
}

fn etcd_members(c: &Cluster) -> String {
    c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl -n kube-system exec etcd-master11 -- etcdctl member list")
}

fn heal_start_master(h: &mut HealCluster) -> R {
    let c = &h.c;
    c.hook("heal-start", Some(&h.master), &[]).ok();
    let cfg = c.on(1, "cat /etc/haproxy/haproxy.cfg");
    check(!cfg.contains("master13"), || format!("master13 still a backend on a survivor:\n{cfg}"))?;
    let members = etcd_members(c);
    check(!members.contains("master13") && members.lines().count() == 2, || members.clone())
}

/// The VNFM replaced master 3's VM. A survivor's chart root holds a symbolic link to /etc: the
/// healed master refuses the copy before extracting anything, and no archive is left anywhere.
fn heal_end_refuses_a_chart_link(h: &mut HealCluster) -> R {
    let c = &h.c;
    c.fresh_vm(3);
    c.on(1, "ln -s /etc /var/tacker/helm/vnf1/escape");
    let r = c.hook("heal-end", Some(&h.master), &[]);
    r.fails(1, "refused the archive");
    let refused_on_3 = format!("{}: command failed", c.lab.node(3));
    check(r.all().contains(&refused_on_3) && r.all().contains("not a plain file or directory"), || r.all())?;
    let run = format!("/root/.mgmt-driver/run/{}", c.id);
    let on3 = c.on(3, &format!("ls -A /var/tacker /var/tacker/helm {run}"));
    check(!on3.contains("escape") && !on3.contains(".helm-restore") && !on3.contains("helm-charts.tgz"), || {
        on3.clone()
    })?;
    let on1 = c.on(1, &format!("ls -A {run}"));
    check(!on1.contains("helm-charts.tgz"), || format!("the survivor kept its archive:\n{on1}"))?;
    c.on(1, "rm /var/tacker/helm/vnf1/escape");
    Ok(())
}

/// The previous phase's heal-end stopped at the chart copy; the VNFM retries it.
fn heal_end_master(h: &mut HealCluster) -> R {
    let c = &h.c;
    let r = c.hook("heal-end", Some(&h.master), &[]);
    r.ok();
    for i in [1, 2] {
        let cfg = c.on(i, "cat /etc/haproxy/haproxy.cfg");
        check(cfg.matches(&format!("server  master13  {}:6443 check", c.lab.ip(3))).count() == 1, || {
            format!("node {i}:\n{cfg}")
        })?;
    }
    let units = c.on(1, "cat /var/lib/labkit-node/state.json");
    check(units.contains("reload"), || "haproxy was not reloaded".into())?;
    let members = etcd_members(c);
    check(members.contains("master13") && members.lines().count() == 3, || members.clone())?;
    // Helm, its charts and its repositories are back on the healed master (no sshpass involved).
    let helm = c.on(3, "helm version --short; cat /var/tacker/helm/vnf1/localhelm/Chart.yaml; helm repo list -o json");
    check(
        helm.contains("v3.99.0-lab")
            && helm.contains("name: localhelm")
            && helm.contains("https://charts.bitnami.com/bitnami"),
        || format!("helm not restored:\n{helm}"),
    )?;
    check(k8s_conn(&doc(&r))["extra"]["helm_info"]["masternode_ip"].as_array().map(|a| a.len()) == Some(3), || {
        "helm_info lists the masters".into()
    })
}

/// SOL003 heal: the whole VNF is re-instantiated and the VIM record replaced.
fn heal_sol003_whole_vnf() -> R {
    let c = Cluster::new("c6", 25, 2, &[1], &[2], true);
    let req = c.request();
    let first = doc(c.instantiate(&req).ok());
    let heal = c.write("heal-all.json", &json!({"additionalParams": {"all": true}}));
    c.hook("heal-start", Some(&heal), &[]).ok();
    let st = c.state_doc().unwrap();
    check(st["vim"].is_null() && st["nodes"].as_object().unwrap().is_empty(), || format!("{st}"))?;
    // The VNFM recreates every VM: a new cluster.
    c.fresh_vm(2);
    c.fresh_vm(1);
    let r = c.hook("heal-end", Some(&heal), &[]);
    r.ok();
    let d = doc(&r);
    check(k8s_conn(&d)["accessInfo"] == k8s_conn(&first)["accessInfo"], || "same endpoint".into())?;
    let st = c.state_doc().unwrap();
    check(st["vim"]["auth_cred"]["ssl_ca_cert"] != Value::Null && st["nodes"].as_object().unwrap().len() == 2, || {
        format!("{st}")
    })?;
    let inits = c.kit()["events"].as_array().unwrap().iter().filter(|e| e["event"] == "initialized").count();
    check(inits == 2, || format!("expected a second kubeadm init, got {inits}"))?;
    Ok(())
}

/// Scale out by 2, in by 1 (with a pod to evict; a stuck pod fails the drain), then terminate.
fn scale_out_in_and_terminate() -> R {
    let mut c = phase("instantiate 1 master + 1 worker", || {
        let c = Cluster::new("c7", 26, 4, &[1], &[2], true);
        let req = c.request();
        c.instantiate(&req).ok();
        Ok(c)
    })?;
    phases(
        &mut c,
        &[
            ("scale out by 2 workers", scale_out_by_two),
            ("scale in needs --node, then drains and removes worker13", scale_in_one),
            ("terminate with --reset-nodes", terminate_and_reset),
        ],
    )
}

fn scale_out_by_two(c: &mut Cluster) -> R {
    c.write_inventory(&[1], &[2, 3, 4], true);
    let out =
        c.write("scale-out.json", &json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": "2"}));
    let r = c.hook("scale-end", Some(&out), &[]);
    r.ok();
    let mut nodes = c.k8s_nodes();
    nodes.sort();
    check(nodes == ["master11", "worker12", "worker13", "worker14"], || format!("{nodes:?}"))?;
    check(
        c.on(1, "cat /etc/hosts").contains("worker14 # mgmt-driver")
            && c.on(2, "cat /etc/hosts").contains("worker13 # mgmt-driver"),
        || "hosts not updated everywhere".into(),
    )
}

fn scale_in_one(c: &mut Cluster) -> R {
    let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    c.hook("scale-start", Some(&inn), &[]).fails(2, "--node");
    c.kit_ctl(&["add-pod", "worker13", "web-1"]);
    let node3 = c.lab.node(3);
    c.hook("scale-start", Some(&inn), &["--node", &node3]).ok();
    let nodes = c.k8s_nodes();
    check(!nodes.contains(&"worker13".to_string()) && nodes.contains(&"worker14".to_string()), || {
        format!("{nodes:?}")
    })?;
    let hosts = c.on(1, "cat /etc/hosts");
    check(!hosts.contains("worker13") && hosts.contains("worker14"), || hosts.clone())?;
    check(c.state_doc().unwrap()["nodes"].get(&node3).is_none(), || "removed node still in state".into())
}

/// Terminate with a reset: state gone, nodes reset.
fn terminate_and_reset(c: &mut Cluster) -> R {
    let r = c.hook("terminate-end", None, &["--reset-nodes"]);
    r.ok();
    check(c.state_doc().is_none(), || "state not removed".into())?;
    check(c.on(2, "test -e /etc/kubernetes/kubelet.conf && echo present").is_empty(), || {
        "kubeadm reset did not run".into()
    })?;
    check(k8s_conn(&doc(&r)).is_null(), || "the kubernetes vimConnectionInfo must be gone".into())
}

/// A drain that cannot evict a pod fails with a clear error and keeps the node.
fn drain_that_cannot_evict_fails() -> R {
    let c = Cluster::new("c9", 28, 2, &[1], &[2], true);
    c.instantiate(&c.request()).ok();
    c.kit_ctl(&["add-pod", "worker12", "db-0", "--stuck"]);
    let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    let node2 = c.lab.node(2);
    let r = c.hook("scale-start", Some(&inn), &["--node", &node2, "--drain-timeout", "2"]);
    r.fails(1, "db-0");
    check(c.k8s_nodes().contains(&"worker12".to_string()), || "the node must stay when its pods cannot leave".into())?;
    Ok(())
}

/// What [`hostile_node_output_and_leftover_secrets`] shares.
struct Hostile {
    c: Cluster,
    req: Value,
    /// `stat -c '%a %u %g %i' /etc/hosts` on the master before the first run.
    hosts_before: String,
}

/// A node that prints a hostile hostname, and env files (secrets) that a dropped connection
/// left behind: the hostname is refused as `unreadable` (node and command named) and reaches
/// neither the state nor any /etc/hosts; the next run deletes the leftovers; /etc/hosts on the
/// nodes' overlay root is replaced by a rename with its mode and owner.
fn hostile_node_output_and_leftover_secrets() -> R {
    let mut h = phase("bring up 1 master + 1 worker whose `hostname` prints an injection", || {
        let c = Cluster::new("nd1", 42, 2, &[1], &[2], true);
        // Prints the real name, then a line meant for /etc/hosts or haproxy.cfg.
        let shim = r#"cat >/usr/local/bin/hostname <<'EOF'
#!/bin/sh
printf '%s\n10.6.6.6 evil # mgmt-driver\n' "$(cat /proc/sys/kernel/hostname)"
EOF
chmod 755 /usr/local/bin/hostname"#;
        c.on(2, shim);
        let shim = c.on(2, "/usr/local/bin/hostname");
        assert!(shim.ends_with("\n10.6.6.6 evil # mgmt-driver\n"), "the shim prints {shim:?}");
        let hosts_before = c.on(1, "stat -c '%a %u %g %i' /etc/hosts");
        Ok(Hostile { req: c.request(), c, hosts_before })
    })?;
    phases(
        &mut h,
        &[
            ("the hostile hostname is unreadable, named, and stored nowhere", hostile_hostname_is_refused),
            ("leftover env files are deleted by the next run, which completes", leftover_env_files_are_swept),
        ],
    )
}

fn hostile_hostname_is_refused(h: &mut Hostile) -> R {
    let c = &h.c;
    let r = c.instantiate(&h.req);
    r.fails(1, "cannot read the node's hostname");
    let d = doc(&r);
    let node2 = c.lab.node(2);
    let err = d["errors"].as_array().and_then(|e| e.first()).cloned().unwrap_or_default();
    check(err["kind"] == "unreadable" && err["node"] == node2.as_str(), || format!("{}", d["errors"]))?;
    let msg = err["message"].as_str().unwrap_or("");
    check(msg.starts_with(&format!("{node2}: cannot read the node's hostname from the output of: hostname")), || {
        msg.to_string()
    })?;
    let st = c.state_doc().unwrap();
    check(st["nodes"][&node2]["installed"] != true && !st.to_string().contains("evil"), || format!("{st}"))?;
    for i in [1, 2] {
        let hosts = c.on(i, "cat /etc/hosts");
        check(!hosts.contains("evil") && hosts.contains("worker12 # mgmt-driver"), || format!("node {i}:\n{hosts}"))?;
    }
    // The master's hosts file was replaced (a new inode on the overlay root), mode and owner kept,
    // and no temp file is left beside it.
    let after = c.on(1, "stat -c '%a %u %g %i' /etc/hosts; ls -a /etc | grep -c mgmt-driver");
    let (b, a) = (h.hosts_before.split_whitespace().collect::<Vec<_>>(), after.split_whitespace().collect::<Vec<_>>());
    check(a.len() == 5 && b[..3] == a[..3] && b[3] != a[3] && a[4] == "0", || format!("before {b:?}, after {a:?}"))
}

fn leftover_env_files_are_swept(h: &mut Hostile) -> R {
    let c = &h.c;
    c.on(2, "rm /usr/local/bin/hostname");
    // As a connection that dropped between the upload and the exec leaves them.
    let run = format!("/root/.mgmt-driver/run/{}", c.id);
    c.on(
        2,
        &format!(
            "echo K8S_JOIN_TOKEN=left >{run}/env.install; cp {run}/env.install {run}/env.old; chmod 600 {run}/env.*"
        ),
    );
    check(c.on(2, &format!("ls {run}")).contains("env.old"), || "the leftovers were not planted".into())?;
    let r = c.instantiate(&h.req);
    r.ok();
    let ls = c.on(2, &format!("ls -A {run}"));
    check(!ls.contains("env."), || format!("env files left in {run}:\n{ls}"))?;
    check(c.state_doc().unwrap()["nodes"][c.lab.node(2)]["k8s_name"] == "worker12", || "worker12 recorded".into())
}

/// Bad input: exit 2, a message naming the field, nothing run on any node, state unchanged.
fn bad_inputs_change_nothing() -> R {
    let c = Cluster::new("c8", 27, 2, &[1], &[2], true);
    let base = c.request();
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["master_node"].as_object_mut().unwrap().remove("password");
    cases.push((v, "additionalParams.k8s_cluster_installation_param.master_node.password: is required"));
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["master_node"]["pod_cidr"] = "192.168.0.0/40".into();
    cases.push((v, "master_node.pod_cidr"));
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["script_path"] = "../../etc/passwd".into();
    cases.push((v, "script_path: '../../etc/passwd' must stay inside the VNF package"));
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["worker_node"]["aspect_id"] = "no_such_aspect".into();
    cases.push((v, "worker_node.aspect_id: 'no_such_aspect' is not a group"));
    std::os::unix::fs::symlink("/etc/shadow", c.pkg.join("Scripts/evil.sh")).unwrap();
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] = "Scripts/evil.sh".into();
    cases.push((v, "is no file inside the VNF package"));
    let mut v = base.clone();
    v["additionalParams"]["k8s_cluster_installation_param"]["storage_server"] = json!({"ssh_cp_name": "s"});
    cases.push((v, "storage_server.username: is required"));
    for (req, needle) in cases {
        let r = c.instantiate(&req);
        r.fails(2, needle);
        let d = doc(&r);
        check(d["ok"] == false && d["errors"][0]["kind"] == "input" && d["result"].is_null(), || format!("{d}"))?;
    }
    let r = c.hook("instantiate-end", Some(Path::new("/nonexistent.json")), &[]);
    r.fails(2, "/nonexistent.json");
    let mal = c.dir.path().join("mal.json");
    std::fs::write(&mal, "{\"flavourId\": \"x\", \"additionalParams\": [1]}").unwrap();
    c.hook("instantiate-end", Some(&mal), &[]).fails(2, "additionalParams");
    for i in [1, 2] {
        let touched = c.on(i, "ls -a /root; ls /root/.mgmt-driver 2>&1; grep -c mgmt-driver /etc/hosts");
        check(!touched.contains(".mgmt-driver\n") && touched.trim_end().ends_with('0'), || {
            format!("node {i} was touched:\n{touched}")
        })?;
    }
    check(c.state_doc().is_none(), || "state written for a refused request".into())?;
    check(c.kit()["cluster"].is_null(), || "the cluster was touched".into())?;
    Ok(())
}

/// What the phases of [`tacker_bodies_parse_and_plan`] share: a package, two inventories and a
/// state dir, for dry runs only (the nodes are TEST-NET addresses nobody answers on).
struct Plans {
    data: PathBuf,
    /// Holds the files above; removed when the test ends.
    _dir: tempfile::TempDir,
    pkg: PathBuf,
    /// One master and one worker (and Tacker's v2 group names); `inv3`: three masters behind a VIP.
    inv1: PathBuf,
    inv3: PathBuf,
    st: PathBuf,
    /// The state an instantiate would have recorded (its file's bytes), once
    /// [`record_an_instantiate`] wrote it.
    state: Vec<u8>,
    /// A VnfInstance that maps a vnfcInstanceId to a VM's address.
    inst: PathBuf,
}

impl Plans {
    fn new() -> Plans {
        let data = repo().join("tests/data/tacker");
        let d = tempfile::tempdir().unwrap();
        let pkg = d.path().join("pkg");
        std::fs::create_dir_all(pkg.join("Scripts")).unwrap();
        for f in ["install_k8s_cluster.sh", "install_helm.sh"] {
            std::fs::copy(repo().join("scripts").join(f), pkg.join("Scripts").join(f)).unwrap();
        }
        let kh = "defaults: {known_hosts: ./kh}\ngroups:\n";
        let inv1 = d.path().join("inv1.yaml");
        std::fs::write(&inv1, format!("{kh}  master_instance:\n    - {{name: m1, ssh_ip: 192.0.2.11}}\n  worker_instance:\n    - {{name: w1, ssh_ip: 192.0.2.21}}\n  masterNode:\n    - {{name: vm1, ssh_ip: 192.0.2.31}}\n  workerNode:\n    - {{name: vm2, ssh_ip: 192.0.2.32}}\n")).unwrap();
        let inv3 = d.path().join("inv3.yaml");
        std::fs::write(&inv3, format!("{kh}  master_instance:\n    - {{name: m1, ssh_ip: 192.0.2.11}}\n    - {{name: m2, ssh_ip: 192.0.2.12}}\n    - {{name: m3, ssh_ip: 192.0.2.13}}\n  worker_instance:\n    - {{name: w1, ssh_ip: 192.0.2.21}}\ncps: {{vip_CP: 192.0.2.100}}\n")).unwrap();
        let st = d.path().join("st");
        let inst = d.path().join("vnf_instance.json");
        Plans { data, _dir: d, pkg, inv1, inv3, st, state: Vec::new(), inst }
    }

    /// `op --dry-run` with the Tacker body `f` (under tests/data/tacker).
    fn plan(&self, op: &str, f: &str, extra: &[&str]) -> support::Run {
        let req = self.data.join(f);
        let inv = if req.display().to_string().contains("complex") { &self.inv3 } else { &self.inv1 };
        let mut a = vec![
            op,
            "--dry-run",
            "-o",
            "plain",
            "--request",
            s(&req),
            "-i",
            s(inv),
            "--package-dir",
            s(&self.pkg),
            "--vnf-instance-id",
            "i1",
            "--state-dir",
            s(&self.st),
        ];
        a.extend(extra);
        mgmt(&a, &[])
    }
}

/// What the phases of [`kubeconfig_and_the_login_in_helm_info`] share.
struct KubeconfigCluster {
    c: Cluster,
    req: Value,
    /// Where `--kubeconfig-out` writes.
    kc: PathBuf,
}

/// OSM/ONAP access and `--tacker-compat`'s credential: the kubeconfig works with kubectl on a
/// master; helm_info carries the login the masters really use (a key: no password and a
/// warning; an inventory password that is not the request's: that one).
fn kubeconfig_and_the_login_in_helm_info() -> R {
    let mut t = phase("bring up 1 master + 1 worker, root key logins", || {
        let c = Cluster::new("kcfg", 73, 2, &[1], &[2], true);
        let mut req = c.request();
        req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
            "Scripts/install_helm.sh".into();
        let kc = c.dir.path().join("out/kubeconfig");
        std::fs::create_dir_all(kc.parent().unwrap()).unwrap();
        Ok(KubeconfigCluster { c, req, kc })
    })?;
    phases(
        &mut t,
        &[
            ("--kubeconfig-out writes a 0600 kubeconfig and no token to the output", kubeconfig_written),
            ("kubectl --kubeconfig on a master lists the nodes with the VIM's token", kubeconfig_works_on_a_master),
            ("--tacker-compat with key logins: no password, a warning naming the master", compat_with_key_logins),
            (
                "--tacker-compat with an inventory password: that password, not the request's",
                compat_with_inventory_password,
            ),
            (
                "with a floating IP the real Helm client verifies TLS against the cluster IP",
                floating_ip_kubeconfig_with_real_helm,
            ),
        ],
    )
}

fn kubeconfig_written(t: &mut KubeconfigCluster) -> R {
    let c = &t.c;
    let p = c.write("instantiate.json", &t.req);
    let r = c.hook("instantiate-end", Some(&p), &["--kubeconfig-out", s(&t.kc)]);
    r.ok();
    let d = doc(&r);
    check(d["result"]["kubeconfig"] == s(&t.kc), || format!("result.kubeconfig: {}", d["result"]))?;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&t.kc).unwrap().permissions().mode() & 0o777;
    check(mode == 0o600, || format!("kubeconfig mode {mode:o}"))?;
    let text = std::fs::read_to_string(&t.kc).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .ok_or_else(|| format!("no token in the kubeconfig:\n{text}"))?
        .to_string();
    check(token.len() > 20 && !r.all().contains(&token), || "the bearer token reached the output".into())?;
    check(text.contains(&format!("server: https://{}:6443", c.lab.ip(1))), || text.clone())?;
    // Not instantiate-end: refused before anything runs.
    c.hook("heal-end", Some(&p), &["--kubeconfig-out", s(&t.kc)]).fails(2, "--kubeconfig-out");
    Ok(())
}

fn kubeconfig_works_on_a_master(t: &mut KubeconfigCluster) -> R {
    let c = &t.c;
    let r = mgmt(
        &[
            "put",
            "-o",
            "plain",
            "-i",
            s(&c.inv),
            "--host",
            &c.lab.node(1),
            "--mode",
            "600",
            s(&t.kc),
            "/root/osm-kubeconfig",
        ],
        &[],
    );
    r.ok();
    let nodes = c.on(1, "kubectl --kubeconfig /root/osm-kubeconfig get nodes -o name 2>&1; echo exit=$?");
    check(nodes.contains("node/master11") && nodes.contains("node/worker12") && nodes.contains("exit=0"), || {
        format!("kubectl with our kubeconfig: {nodes}")
    })?;
    // The kit's kubectl really reads the file: another server in it is refused.
    let bad = c.on(
        1,
        "sed 's#:6443#:6999#' /root/osm-kubeconfig > /root/bad-kubeconfig; kubectl --kubeconfig /root/bad-kubeconfig get nodes 2>&1; echo exit=$?",
    );
    check(bad.contains("refused") && !bad.contains("exit=0"), || format!("a wrong server was accepted: {bad}"))?;
    // The token is the ServiceAccount token the cluster issued for the VIM.
    let issued = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get secret -n kube-system mgmt-driver-admin-token -o jsonpath='{.data.token}' | base64 -d");
    let text = std::fs::read_to_string(&t.kc).unwrap();
    check(!issued.trim().is_empty() && text.contains(&format!("token: {}", issued.trim())), || {
        format!("the kubeconfig's token is not the issued one ({} bytes issued)", issued.trim().len())
    })
}

fn compat_with_key_logins(t: &mut KubeconfigCluster) -> R {
    let c = &t.c;
    let p = c.write("instantiate.json", &t.req);
    let r = c.hook("instantiate-end", Some(&p), &["--tacker-compat"]);
    r.ok();
    let d = doc(&r);
    let hi = &k8s_conn(&d)["extra"]["helm_info"];
    check(hi["masternode_username"] == "root" && hi.get("masternode_password").is_none(), || {
        format!("helm_info: {hi}")
    })?;
    check(!r.all().contains("unused-password"), || "the request's password was written, not the login used".into())?;
    let warned = d["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap_or("").contains(&format!("master {} logs in with a key", c.lab.node(1))));
    check(warned, || format!("no warning naming the master: {}", d["warnings"]))
}

fn compat_with_inventory_password(t: &mut KubeconfigCluster) -> R {
    let c = &t.c;
    let pw = c.lab.password();
    c.write_inventory(&[1], &[2], false);
    let inv = std::fs::read_to_string(&c.inv).unwrap();
    let inv = inv.replacen("defaults:\n", &format!("defaults:\n  user: mduser\n  password: '{pw}'\n"), 1);
    std::fs::write(&c.inv, inv).unwrap();
    let p = c.write("instantiate.json", &t.req);
    let r = c.hook("instantiate-end", Some(&p), &["--tacker-compat"]);
    r.ok();
    let d = doc(&r);
    let hi = &k8s_conn(&d)["extra"]["helm_info"];
    check(hi["masternode_username"] == "mduser" && hi["masternode_password"] == pw.as_str(), || {
        format!("helm_info must hold the inventory's login: {}", hi["masternode_username"])
    })?;
    check(!r.all().contains("unused-password"), || "the request's password was written".into())?;
    check(d["warnings"].as_array().unwrap().is_empty(), || format!("{}", d["warnings"]))
}

/// The lab kit has no TLS, so a floating IP's kubeconfig is tried with the real Helm 3 client
/// (client-go, as OSM's and ONAP's Helm is) against a small HTTPS API server on the host: it
/// stands at the "floating IP" 127.0.0.73:6443 with a certificate from the kit cluster's own
/// CA that names the cluster IP only (as kubeadm's does), and accepts only the issued token.
const FIP: &str = "127.0.0.73";

const API_SERVER: &str = r#"
import http.server, json, os, ssl, sys
token = os.environ["API_TOKEN"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "Bearer " + token
        if not ok:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401}
        elif self.path.startswith("/version"):
            body = {"major": "1", "minor": "31", "gitVersion": "v1.31.2"}
        else:
            body = {"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
        sys.stdout.write("%s %s\n" % (self.path, "ok" if ok else "401"))
        sys.stdout.flush()
        b = json.dumps(body).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer((sys.argv[1], 6443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print("ready", flush=True)
s.serve_forever()
"#;

/// Kills the API server stand-in when the phase ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn floating_ip_kubeconfig_with_real_helm(t: &mut KubeconfigCluster) -> R {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let c = &t.c;
    let d = c.dir.path();
    // The params name a floating IP for the cluster; the inventory gives its address.
    let inv = std::fs::read_to_string(&c.inv).unwrap();
    std::fs::write(&c.inv, format!("{inv}  fip_CP: {FIP}\n")).unwrap();
    let mut req = t.req.clone();
    req["additionalParams"]["k8s_cluster_installation_param"]["master_node"]["cluster_fip_name"] = "fip_CP".into();
    let p = c.write("instantiate.json", &req);
    let kc = d.join("out/fip-kubeconfig");
    let r = c.hook("instantiate-end", Some(&p), &["--kubeconfig-out", s(&kc)]);
    r.ok();
    let text = std::fs::read_to_string(&kc).unwrap();
    let master = c.lab.ip(1);
    check(
        text.contains(&format!("server: https://{FIP}:6443")) && text.contains(&format!("tls-server-name: {master}")),
        || format!("the kubeconfig must name the FIP and check TLS against {master}:\n{text}"),
    )?;
    // A server certificate from the cluster's CA that names the cluster IP, not the FIP.
    let cluster = &c.kit()["cluster"];
    let (ca_crt, ca_key) = (d.join("ca.crt"), d.join("ca.key"));
    std::fs::write(&ca_crt, cluster["ca_crt"].as_str().unwrap()).unwrap();
    std::fs::write(&ca_key, cluster["ca_key"].as_str().unwrap()).unwrap();
    let (crt, key, ext) = (d.join("apiserver.crt"), d.join("apiserver.key"), d.join("san.ext"));
    std::fs::write(&ext, format!("subjectAltName=IP:{master},DNS:kubernetes\n")).unwrap();
    let sh = format!(
        "openssl req -newkey rsa:2048 -nodes -keyout {k} -out {k}.csr -subj /CN=kube-apiserver && \
         openssl x509 -req -in {k}.csr -CA {ca} -CAkey {cak} -CAcreateserial -out {crt} -days 1 -extfile {ext}",
        k = s(&key),
        ca = s(&ca_crt),
        cak = s(&ca_key),
        crt = s(&crt),
        ext = s(&ext)
    );
    let o = Command::new("sh").args(["-c", &sh]).output().unwrap();
    check(o.status.success(), || format!("openssl: {}", String::from_utf8_lossy(&o.stderr)))?;
    let issued = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get secret -n kube-system mgmt-driver-admin-token -o jsonpath='{.data.token}' | base64 -d");
    let script = d.join("apiserver.py");
    std::fs::write(&script, API_SERVER).unwrap();
    let mut child = Command::new("python3")
        .args([s(&script), FIP, s(&crt), s(&key)])
        .env("API_TOKEN", issued.trim())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let _server = Killed(child);
    let mut next = || lines.next().and_then(|l| l.ok()).unwrap_or_default();
    check(next() == "ready", || "the API server stand-in did not start".into())?;
    let helm_bin = helm3();
    let helm = |kubeconfig: &Path| {
        let o = Command::new(&helm_bin)
            .args(["list", "-n", "default", "--kubeconfig", s(kubeconfig)])
            .env("HOME", d)
            .output()
            .unwrap();
        (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    };
    let (ok, out) = helm(&kc);
    check(ok && out.starts_with("NAME"), || format!("helm list with our kubeconfig: {out}"))?;
    let seen = [next(), next()];
    check(
        seen[0] == "/version ok"
            && seen[1].starts_with("/api/v1/namespaces/default/secrets")
            && seen[1].ends_with(" ok"),
        || format!("the API server saw: {seen:?}"),
    )?;
    // The same file without tls-server-name fails the certificate check: that line makes TLS work.
    let bare = d.join("out/no-tls-server-name");
    std::fs::write(&bare, text.lines().filter(|l| !l.contains("tls-server-name")).collect::<Vec<_>>().join("\n"))
        .unwrap();
    let (ok, out) = helm(&bare);
    check(!ok && out.contains("x509") && out.contains(&format!("not {FIP}")), || {
        format!("without tls-server-name: {out}")
    })
}

/// The real Helm 3 binary (tests/labkit/fetch-helm.sh: once per machine, verified each run).
fn helm3() -> PathBuf {
    let d = repo().join("target/helm");
    let o = std::process::Command::new("bash").arg(repo().join("tests/labkit/fetch-helm.sh")).arg(&d).output().unwrap();
    assert!(
        o.status.success(),
        "fetch-helm.sh: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    d.join("helm3/helm")
}

/// Every Tacker body we keep parses; every instantiate body plans (dry run, no node touched).
fn tacker_bodies_parse_and_plan() -> R {
    let mut p = phase("write a package, inventories and a state dir", || Ok(Plans::new()))?;
    phases(
        &mut p,
        &[
            ("every instantiate body plans, without secrets", instantiate_bodies_plan),
            ("--kubeconfig-out plans without writing; a bad destination is refused first", kubeconfig_out_plans),
            ("v2 heal and scale bodies plan on their own parameters", v2_bodies_plan_on_their_own),
            ("v1 scale and heal bodies are refused without a recorded instantiate", v1_bodies_need_a_record),
            ("record an instantiate, a new worker VM and a VnfInstance", record_an_instantiate),
            ("v1 and api-ref bodies plan with the recorded parameters", recorded_bodies_plan),
            ("an unknown vnfcInstanceId is refused; dry runs left the state alone", unknown_vnfc_and_state_unchanged),
        ],
    )
}

fn instantiate_bodies_plan(p: &mut Plans) -> R {
    for f in [
        "v1/k8s-cluster/simple_kubernetes_param_file.json",
        "v1/k8s-cluster/complex_kubernetes_param_file.json",
        "v1/k8s-cluster-helm/complex_kubernetes_param_file.json",
        "v2/k8s-cluster/simple/simple_kubernetes_param_file_v2.json",
    ] {
        let r = p.plan("instantiate-end", f, &[]);
        r.ok();
        check(r.stdout.contains("== main master: install") && r.stdout.contains("install_k8s_cluster.sh -m"), || {
            format!("{f}:\n{}", r.all())
        })?;
        check(!r.all().contains("password1") && !r.all().contains("\"ubuntu\""), || {
            format!("{f}: a secret is in the plan")
        })?;
    }
    Ok(())
}

/// A plan reports where the kubeconfig would go and writes nothing; a destination whose
/// directory is missing is bad input before anything runs.
fn kubeconfig_out_plans(p: &mut Plans) -> R {
    let f = "v1/k8s-cluster-helm/complex_kubernetes_param_file.json";
    let kc = p._dir.path().join("kubeconfig");
    let req = p.data.join(f);
    let r = mgmt(
        &[
            "instantiate-end",
            "--dry-run",
            "-o",
            "json",
            "--request",
            s(&req),
            "-i",
            s(&p.inv3),
            "--package-dir",
            s(&p.pkg),
            "--vnf-instance-id",
            "i1",
            "--state-dir",
            s(&p.st),
            "--kubeconfig-out",
            s(&kc),
        ],
        &[],
    );
    r.ok();
    let d = doc(&r);
    check(d["result"]["kubeconfig"] == s(&kc) && d["dryRun"] == true, || format!("{}", d["result"]))?;
    check(!kc.exists(), || "a dry run wrote the kubeconfig".into())?;
    let r = p.plan("instantiate-end", f, &["--kubeconfig-out", s(&kc)]);
    r.ok();
    check(r.stderr.contains(&format!("kubeconfig: would write {}", s(&kc))) && !kc.exists(), || r.all())?;
    let missing = p._dir.path().join("no/such/dir/kubeconfig");
    let r = p.plan("instantiate-end", f, &["--kubeconfig-out", s(&missing)]);
    r.fails(2, "--kubeconfig-out");
    check(r.stderr.contains("its directory does not exist") && !r.stdout.contains("== main master"), || r.all())
}

/// v2 heal/scale bodies repeat the params; v1 bodies rely on the recorded ones.
fn v2_bodies_plan_on_their_own(p: &mut Plans) -> R {
    for (op, f, extra) in [
        ("heal-start", "v2/k8s-cluster/simple/heal_all/simple_additional_params_req", vec![]),
        ("heal-end", "v2/k8s-cluster/simple/heal_all/simple_additional_params_req", vec![]),
        ("heal-start", "v2/k8s-cluster/simple/scale_and_heal_vnfc/simple_additional_params_req", vec!["--node", "vm2"]),
    ] {
        p.plan(op, f, &extra).ok();
    }
    Ok(())
}

/// Without a recorded instantiate, v1 scale/heal bodies (which carry no params) are refused.
fn v1_bodies_need_a_record(p: &mut Plans) -> R {
    for f in [
        "v1/k8s-cluster/scale_out_request.json",
        "v1/k8s-cluster/heal_sol002_request.json",
        "api-ref/v2/scale-vnf-instance-request.json",
    ] {
        let op = if f.contains("heal") { "heal-start" } else { "scale-end" };
        let r = p.plan(op, f, &[]);
        check(
            r.code == 2
                && r.stderr
                    .contains("k8s_cluster_installation_param: is required (and no earlier instantiate recorded it)"),
            || format!("{f}: {}", r.all()),
        )?;
    }
    Ok(())
}

/// Record one (as instantiate-end leaves it); w2 is a new VM in the inventory; the VNFM's
/// VnfInstance maps Tacker's vnfcInstanceId to a VM's address.
fn record_an_instantiate(p: &mut Plans) -> R {
    let simple: Value = serde_json::from_str(
        &std::fs::read_to_string(p.data.join("v1/k8s-cluster/simple_kubernetes_param_file.json")).unwrap(),
    )
    .unwrap();
    std::fs::create_dir_all(&p.st).unwrap();
    let node = |role: &str, ip: &str, k8s: &str| json!({"role": role, "ssh_addr": ip, "nic_ip": ip, "k8s_name": k8s, "installed": true, "helm_installed": false});
    let state = json!({"version": 1, "vnf_instance_id": "i1", "params": simple["additionalParams"]["k8s_cluster_installation_param"],
        "nodes": {"m1": node("master", "192.0.2.11", "master11"), "w1": node("worker", "192.0.2.21", "worker21")},
        "facts": {"server": "https://192.0.2.11:6443", "ca_pem": "PEM", "ca_hash": "ab", "cluster_ip": "192.0.2.11", "main_master": "m1"}});
    // As a run writes it (sealed and authenticated: the store refuses a hand-written document).
    let key = mgmt_driver::StateKey::at(support::test_state_key());
    mgmt_driver::Store::open_with_key(&p.st, key).unwrap().save_doc("i1", "", &state).unwrap();
    std::fs::write(
        &p.inv1,
        std::fs::read_to_string(&p.inv1)
            .unwrap()
            .replace("  masterNode:", "    - {name: w2, ssh_ip: 192.0.2.22}\n  masterNode:"),
    )
    .unwrap();
    std::fs::write(&p.inst, json!({"id": "i1", "instantiatedVnfInfo": {"vnfcResourceInfo": [{"id": "bbce9656-f051-434f-8c4a-660ac23e91f6", "vduId": "workerNode",
        "vnfcCpInfo": [{"cpdId": "workerNode_CP2", "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": ["192.0.2.21"]}]}}]}]}]}}).to_string()).unwrap();
    p.state = std::fs::read(p.st.join("i1.json")).unwrap();
    Ok(())
}

fn recorded_bodies_plan(p: &mut Plans) -> R {
    let inst = s(&p.inst);
    let cases: Vec<(&str, &str, Vec<&str>, &str)> = vec![
        ("scale-end", "v1/k8s-cluster/scale_out_request.json", vec![], "== scale out: join workers: w2"),
        ("scale-end", "api-ref/v1/scale-vnf-instance-request.json", vec![], "== scale out: join workers: w2"),
        (
            "scale-start",
            "v1/k8s-cluster/scale_in_request.json",
            vec!["--node", "w1"],
            "kubectl drain worker21 --ignore-daemonsets",
        ),
        ("scale-start", "v1/k8s-cluster/scale_out_request.json", vec![], ""),
        (
            "heal-start",
            "v1/k8s-cluster/heal_sol002_request.json",
            vec!["--vnf-instance", inst],
            "kubectl drain worker21",
        ),
        ("heal-end", "v1/k8s-cluster/heal_sol002_request.json", vec!["--vnf-instance", inst], "== heal: reinstall w1"),
        ("heal-start", "api-ref/v2/heal-vnf-instance-request.json", vec!["--node", "w1"], "kubectl drain worker21"),
        ("terminate-end", "api-ref/v1/terminate-vnf-instance-request.json", vec!["--reset-nodes"], "kubeadm reset -f"),
        ("terminate-end", "api-ref/v2/terminate-vnf-instance-request.json", vec![], "remove the VIM record"),
    ];
    for (op, f, extra, want) in cases {
        let r = p.plan(op, f, &extra);
        r.ok();
        check(r.stdout.contains(want), || format!("{op} {f}: expected {want:?} in the plan:\n{}", r.all()))?;
    }
    Ok(())
}

fn unknown_vnfc_and_state_unchanged(p: &mut Plans) -> R {
    let r = p.plan("heal-start", "api-ref/v1/heal-vnf-instance-request.json", &[]);
    r.fails(2, "'c51c98dc-b918-4681-a9eb-4f32a57c4e08' names no inventory host");
    check(std::fs::read(p.st.join("i1.json")).unwrap() == p.state, || "a dry run changed the state".into())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!()).without_root(&[("tacker_bodies_parse_and_plan", tacker_bodies_parse_and_plan)]).needing_root(&[
        ("single_master_two_workers_with_request_passwords", single_master_two_workers_with_request_passwords),
        ("ha_masters_in_order_workers_in_parallel", ha_masters_in_order_workers_in_parallel),
        ("proxy_and_helm_info", proxy_and_helm_info),
        ("rerun_after_worker_failure", rerun_after_worker_failure),
        ("heal_sol002_worker_and_master", heal_sol002_worker_and_master),
        ("heal_sol003_whole_vnf", heal_sol003_whole_vnf),
        ("scale_out_in_and_terminate", scale_out_in_and_terminate),
        ("drain_that_cannot_evict_fails", drain_that_cannot_evict_fails),
        ("bad_inputs_change_nothing", bad_inputs_change_nothing),
        ("hostile_node_output_and_leftover_secrets", hostile_node_output_and_leftover_secrets),
        ("kubeconfig_and_the_login_in_helm_info", kubeconfig_and_the_login_in_helm_info),
    ])
}
