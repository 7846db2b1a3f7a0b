//! Helm CNF operations against a REAL Kubernetes API (issue 21): a lab-kit lab in the real-API
//! mode (docs/labkit.md; 1 master + 2 workers, built by our own `instantiate-end`), the REAL Helm
//! 3 or 4 on the master (installed by `install_helm.sh` from the package's offline directory), a
//! REAL chart repository served over HTTP from the test host. No stand-in answers an API call:
//! helm talks to the real kube-apiserver, the real controllers make the ReplicaSets and pods, the
//! real scheduler places them, and the kit's node agent (`kubelet --labkit-agent`) plays the
//! kubelet (it moves pods bound to its node to Running and Ready, and creates none).
//!
//! The kit-only suite (tests/cnf.rs) covers the driver's refusals, masking and hostile inputs;
//! this one covers what the API decides: install, scale, upgrade, rollback, heal (a real
//! `kubectl rollout restart` and `rollout status`), services, an interrupted install, terminate.
//!
//! Needs root, npm (the Helm binaries, tests/labkit/fetch-helm.sh) and the control plane built
//! (tests/real_cluster.rs). Labs `rn3` (net 97) and `rn4` (net 94): one control plane each.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, s, Cluster, R};
use support::phase::{phase, timed_phases};
use support::{mgmt, repo};

/// The real Helm binaries and their offline tarballs (fetched once per machine).
pub(crate) fn helm_dir() -> PathBuf {
    static FETCHED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FETCHED
        .get_or_init(|| {
            let d = repo().join("target/helm");
            let o = Command::new("bash").arg(repo().join("tests/labkit/fetch-helm.sh")).arg(&d).output().unwrap();
            assert!(o.status.success(), "fetch-helm.sh: {}", String::from_utf8_lossy(&o.stderr));
            d
        })
        .clone()
}

/// The chart repository served to the lab; killed on drop.
pub(crate) struct RepoServer {
    child: Child,
    pub(crate) url: String,
    dir: PathBuf,
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve_repo(c: &Cluster, helm: &Path, port: u16) -> RepoServer {
    let addr = format!("198.18.{}.1", c.lab.net);
    let url = format!("http://{addr}:{port}");
    let dir = c.dir.path().join(format!("charts-{port}"));
    let o = Command::new("bash")
        .arg(repo().join("tests/labkit/make-chart-repo.sh"))
        .args([s(&dir), s(helm), &url])
        .output()
        .unwrap();
    assert!(o.status.success(), "make-chart-repo.sh: {}", String::from_utf8_lossy(&o.stderr));
    let child = Command::new("python3")
        .arg(repo().join("tests/labkit/serve-repo.py"))
        .arg(dir.join("repo"))
        .arg(&addr)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..50 {
        if std::net::TcpStream::connect((addr.as_str(), port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    RepoServer { child, url, dir }
}

/// A real-API cluster (1 master + 2 workers) with Helm `major` on the master, by our own hook.
pub(crate) fn cluster(name: &str, net: u8, major: u32, bindir: &str) -> Cluster {
    let c = Cluster::with_lab_args(name, net, 3, &[1], &[2, 3], true, &["--control-plane", bindir]);
    let off = c.pkg.join("Files/offline");
    for e in std::fs::read_dir(&off).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".tar.gz") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let hd = helm_dir().join(format!("helm{major}"));
    let t = std::fs::read_dir(&hd)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-linux-amd64.tar.gz"))
        .unwrap_or_else(|| panic!("no helm tarball in {}", hd.display()));
    std::fs::copy(&t, off.join(t.file_name().unwrap())).unwrap();
    let sums = Command::new("sh")
        .arg("-c")
        .arg(
            "find . -type f ! -name SHA256SUMS -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum > SHA256SUMS",
        )
        .current_dir(&off)
        .status()
        .unwrap();
    assert!(sums.success());
    let mut req = c.request();
    req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
        "Scripts/install_helm.sh".into();
    c.instantiate(&req).ok();
    c
}

/// The package's VNFD (flavour `helmchart`): VDU1 (release vdu1) and VDU2 (release vdu2), 1 to 3
/// instances each, +1 per step.
const CNF_VNFD: &str = r#"tosca_definitions_version: tosca_simple_yaml_1_2
description: mgmt-driver real-API lab test, a Helm CNF with two VDUs
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
topology_template:
  substitution_mappings:
    node_type: labtest.VNF
    properties: {flavour_id: helmchart}
  node_templates:
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties: {name: VDU1, vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}}
    VDU2:
      type: tosca.nodes.nfv.Vdu.Compute
      properties: {name: VDU2, vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}}
  policies:
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            vdu1_aspect: {name: vdu1_aspect, max_scale_level: 2, step_deltas: [delta_1]}
            vdu2_aspect: {name: vdu2_aspect, max_scale_level: 2, step_deltas: [delta_1]}
    - vdu1_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties: {initial_delta: {number_of_instances: 1}}
        targets: [VDU1]
    - vdu2_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties: {initial_delta: {number_of_instances: 1}}
        targets: [VDU2]
    - vdu1_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: vdu1_aspect, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [VDU1]
    - vdu2_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: vdu2_aspect, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [VDU2]
"#;

/// The CNF request (Tacker's shape): vdu1 from the package's local chart, vdu2 from the repo.
fn cnf_request(c: &Cluster, repo_url: &str, charts: &Path) -> PathBuf {
    let files = c.pkg.join("Files/kubernetes");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::copy(charts.join("local/localhelm-0.1.0.tgz"), files.join("localhelm-0.1.0.tgz")).unwrap();
    std::fs::create_dir_all(c.pkg.join("TOSCA-Metadata")).unwrap();
    std::fs::create_dir_all(c.pkg.join("Definitions")).unwrap();
    std::fs::write(
        c.pkg.join("TOSCA-Metadata/TOSCA.meta"),
        "TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\nCreated-By: mgmt-driver tests\nEntry-Definitions: Definitions/cnf_top.yaml\n",
    )
    .unwrap();
    std::fs::write(
        c.pkg.join("Definitions/cnf_top.yaml"),
        "tosca_definitions_version: tosca_simple_yaml_1_2\nimports:\n  - cnf_df_helmchart.yaml\n",
    )
    .unwrap();
    std::fs::write(c.pkg.join("Definitions/cnf_df_helmchart.yaml"), CNF_VNFD).unwrap();
    c.write("cnf.json", &json!({
        "flavourId": "helmchart",
        "additionalParams": {
            "use_helm": "True",
            "namespace": "cnf",
            "using_helm_install_param": [
                {"exthelmchart": "false", "helmreleasename": "vdu1", "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz",
                 "helmparameter": ["service.port=8081"]},
                {"exthelmchart": "TRUE", "helmreleasename": "vdu2", "helmrepositoryname": "labrepo", "helmchartname": "nginxlab",
                 "exthelmrepo_url": repo_url, "helmchartversion": "0.1.0"}
            ],
            "helm_replica_values": {"vdu1_aspect": "replicaCount", "vdu2_aspect": "replicaCount"},
            "vdu_mapping": {
                "VDU1": {"kind": "Deployment", "name": "vdu1-localhelm", "helmreleasename": "vdu1"},
                "VDU2": {"kind": "Deployment", "name": "vdu2-nginxlab", "helmreleasename": "vdu2"}
            }
        },
        "vimConnectionInfo": [{"id": "817954e4-c321-4a31-ae06-cedcc4ddb85c", "vimId": "690edc6b-7581-48d8-9ac9-910c2c3d7c02", "vimType": "kubernetes"}]
    }))
}

fn cnf_args<'a>(c: &'a Cluster, flags: &[&'a str], id: &'a str) -> Vec<&'a str> {
    let mut a = vec!["cnf"];
    a.extend(flags);
    a.extend(["--vnf-instance-id", id, "--cluster-instance", &c.id, "-i", s(&c.inv), "--state-dir", s(&c.state)]);
    a
}

/// `cnf -o json` on instance cnf1, with the package.
fn cnf(c: &Cluster, args: &[&str]) -> support::Run {
    let mut a = cnf_args(c, &["-o", "json"], "cnf1");
    a.extend(["--package-dir", s(&c.pkg), "--status-interval", "1"]);
    a.extend(args);
    mgmt(&a, &[])
}

fn out(r: &support::Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}\n--- stderr\n{}", r.stdout, r.stderr))
}

pub(crate) fn kubectl(c: &Cluster, args: &str) -> String {
    c.on(1, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl {args} 2>&1"))
}

/// Every pod of namespace cnf: name → (uid, node, Ready), deleted ones left out.
type Pods = std::collections::BTreeMap<String, (String, String, bool)>;

fn cnf_pods(c: &Cluster, selector: &str) -> Pods {
    let v: Value =
        serde_json::from_str(&kubectl(c, &format!("get pods -n cnf {selector} -o json"))).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| !p["metadata"]["deletionTimestamp"].is_string())
                .map(|p| {
                    let ready = p["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                    let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let uid = p["metadata"]["uid"].as_str().unwrap_or("").to_string();
                    (name, (uid, p["spec"]["nodeName"].as_str().unwrap_or("").to_string(), ready))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn vdu1(c: &Cluster) -> Pods {
    cnf_pods(c, "-l app.kubernetes.io/instance=vdu1")
}

/// Poll until `ok` holds or `within` passes; the last value either way.
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

fn all_ready(p: &Pods, n: usize) -> bool {
    p.len() == n && p.values().all(|(_, node, ready)| *ready && node.starts_with("worker"))
}

struct HelmCnf {
    /// Declared first: it stops before the cluster's lab goes down.
    repo: RepoServer,
    c: Cluster,
    major: u32,
    req: PathBuf,
    req3: Option<PathBuf>,
}

fn helm_lifecycle(name: &str, net: u8, major: u32) -> R {
    let c = phase("build a real-API cluster (1 master + 2 workers) with real Helm on the master", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let c = cluster(name, net, major, bindir.to_str().unwrap());
        let hv = c.on(1, "helm version --short");
        check(hv.starts_with(&format!("v{major}.")), || format!("real Helm {major} expected on the master, got {hv}"))?;
        Ok(c)
    })?;
    let mut h = phase("serve the chart repository", move || {
        let repo = serve_repo(&c, &helm_dir().join(format!("helm{major}/helm")), 8879);
        let req = cnf_request(&c, &repo.url, &repo.dir);
        Ok(HelmCnf { repo, c, major, req, req3: None })
    })?;
    timed_phases(
        &mut h,
        &[
            ("install a local and a repository chart with --wait", install_both),
            ("status, list, history and values read the real releases", read_the_releases),
            ("scale vdu1 out and in: the real ReplicaSet follows", scale_out_and_in),
            ("upgrade vdu2 to 0.2.0 and roll back", upgrade_and_roll_back),
            ("a SOL002 heal re-creates the VNFC's pod", heal_one_pod),
            ("a whole-CNF heal: real rollout restart and rollout status", whole_cnf_heal),
            ("a heal whose new pods cannot be scheduled fails, naming one; then succeeds", heal_not_back),
            ("services: the cluster IPs the real API allocated, then a node port", services),
            ("an install interrupted while its pods cannot be scheduled stays pending-install", interrupt_an_install),
            ("a re-run recovers the pending install", rerun_recovers_pending_install),
            ("terminate uninstalls: no release and no workload left in the API", terminate),
        ],
    )
}

fn install_both(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let r = cnf(c, &["instantiate", "--request", s(&h.req), "--wait", "--timeout", "120"]);
    r.ok();
    let d = out(&r);
    check(d["context"]["helmMajor"] == h.major, || format!("{d}"))?;
    for rel in ["vdu1", "vdu2"] {
        let st = &d["result"]["releases"][rel];
        check(st["status"] == "deployed" && st["revision"] == 1, || format!("{rel}: {st}"))?;
    }
    // --wait returned: the Deployments are available, so their pods run on the workers.
    let pods = cnf_pods(c, "");
    check(all_ready(&pods, 2), || format!("pods after the install: {pods:?}"))?;
    let deploys =
        kubectl(c, "get deploy -n cnf -o jsonpath='{range .items[*]}{.metadata.name}={.status.readyReplicas} {end}'");
    check(deploys.trim() == "vdu1-localhelm=1 vdu2-nginxlab=1", || deploys.clone())
}

fn read_the_releases(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let st = out(cnf(c, &["status", "--release", "vdu1"]).ok());
    check(st["result"]["info"]["status"] == "deployed" && st["result"]["namespace"] == "cnf", || format!("{st}"))?;
    let list = out(cnf(c, &["list"]).ok());
    let names: Vec<&str> = list["result"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    check(names == ["vdu1", "vdu2"], || format!("{list}"))?;
    let hist = out(cnf(c, &["history", "--release", "vdu2"]).ok());
    check(
        hist["result"].as_array().map(Vec::len) == Some(1) && hist["result"][0]["chart"] == "nginxlab-0.1.0",
        || format!("{hist}"),
    )?;
    let vals = out(cnf(c, &["values", "--release", "vdu1"]).ok());
    check(vals["result"]["service"]["port"] == 8081, || format!("{vals}"))?;
    // The Service the chart made, as the real API holds it.
    let port = kubectl(c, "get svc -n cnf vdu1-localhelm -o jsonpath='{.spec.ports[0].port}'");
    check(port.trim() == "8081", || port.clone())
}

fn scale_out_and_in(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let sc = c.write("scale.json", &json!({"type": "SCALE_OUT", "aspectId": "vdu1_aspect", "numberOfSteps": 2}));
    let d = out(cnf(c, &["scale", "--request", s(&sc), "--wait"]).ok());
    check(d["result"]["from"] == 1 && d["result"]["to"] == 3, || format!("{d}"))?;
    let (ok, pods) = wait_until(Duration::from_secs(60), || vdu1(c), |p| all_ready(p, 3));
    check(ok, || format!("vdu1 after scaling out to 3: {pods:?}"))?;
    let nodes: std::collections::BTreeSet<&str> = pods.values().map(|p| p.1.as_str()).collect();
    check(nodes.len() == 2, || format!("the scheduler did not spread vdu1 over both workers: {pods:?}"))?;
    let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "vdu1_aspect", "numberOfSteps": "2"}));
    let d = out(cnf(c, &["scale", "--request", s(&inn)]).ok());
    check(d["result"]["to"] == 1, || format!("{d}"))?;
    let (ok, pods) = wait_until(Duration::from_secs(60), || vdu1(c), |p| all_ready(p, 1));
    check(ok, || format!("vdu1 after scaling in to 1: {pods:?}"))
}

fn upgrade_and_roll_back(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before = out(&cnf(c, &["values", "--release", "vdu2", "--all"]))["result"].clone();
    let up = out(cnf(c, &["upgrade", "--release", "vdu2", "--chart", "labrepo/nginxlab", "--version", "0.2.0"]).ok());
    let cm = kubectl(c, "get configmap -n cnf vdu2-nginxlab-greeting -o jsonpath='{.data.greeting}'");
    check(cm.trim() == "hello from 0.2.0", || format!("the upgrade did not reach the API: {cm}"))?;
    let img = kubectl(c, "get deploy -n cnf vdu2-nginxlab -o jsonpath='{.spec.template.spec.containers[0].image}'");
    check(img.ends_with(":1.27"), || img.clone())?;
    let rb = out(cnf(c, &["rollback", "--release", "vdu2"]).ok());
    check(rb["result"]["revision"].as_u64() > up["result"]["revision"].as_u64(), || format!("{rb}"))?;
    let back = out(&cnf(c, &["values", "--release", "vdu2", "--all"]))["result"].clone();
    check(back == before, || format!("rollback did not restore the values:\n{before}\n{back}"))?;
    let cm = kubectl(c, "get configmap -n cnf vdu2-nginxlab-greeting -o jsonpath='{.data.greeting}'");
    check(cm.trim() == "hello from 0.1.0", || format!("the rollback did not reach the API: {cm}"))?;
    let hist = out(&cnf(c, &["history", "--release", "vdu2"]));
    let charts: Vec<&str> = hist["result"].as_array().unwrap().iter().filter_map(|r| r["chart"].as_str()).collect();
    check(charts == ["nginxlab-0.1.0", "nginxlab-0.2.0", "nginxlab-0.1.0"], || format!("{hist}"))?;
    // The rolled-back Deployment's pods come back Ready on the old template.
    let (ok, pods) =
        wait_until(Duration::from_secs(60), || cnf_pods(c, "-l app.kubernetes.io/instance=vdu2"), |p| all_ready(p, 1));
    check(ok, || format!("vdu2 after the rollback: {pods:?}"))
}

/// SOL002 heal by pod name (no VnfInstance): the pod is deleted; its ReplicaSet makes a new one.
fn heal_one_pod(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before = vdu1(c);
    let pod = before.keys().next().cloned().unwrap_or_default();
    let heal = c.write("heal.json", &json!({"vnfcInstanceId": [pod]}));
    let r = out(cnf(c, &["heal", "--request", s(&heal)]).ok());
    check(r["result"][0]["pod"] == json!(pod), || format!("{r}"))?;
    let (ok, after) = wait_until(Duration::from_secs(60), || vdu1(c), |p| all_ready(p, 1) && !p.contains_key(&pod));
    check(ok, || format!("{before:?} -> {after:?}"))
}

/// SOL003 heal: every workload restarted (`kubectl rollout restart`), waited for with `kubectl
/// rollout status`: every pod new (name and uid) and Ready when the heal returns.
fn whole_cnf_heal(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before = cnf_pods(c, "");
    check(before.len() == 2, || format!("{before:?}"))?;
    let heal = c.write("heal-all.json", &json!({"cause": "whole CNF"}));
    let d = out(cnf(c, &["heal", "--request", s(&heal), "--timeout", "90"]).ok());
    let rels: Vec<&str> =
        d["result"]["workloads"].as_array().unwrap().iter().filter_map(|w| w["release"].as_str()).collect();
    check(rels.contains(&"vdu1") && rels.contains(&"vdu2"), || format!("{d}"))?;
    let after = cnf_pods(c, "");
    check(all_ready(&after, 2), || format!("not every pod Ready when the heal returned: {after:?}"))?;
    let old_uids: Vec<&String> = before.values().map(|p| &p.0).collect();
    for (name, (uid, _, _)) in &after {
        check(!before.contains_key(name) && !old_uids.contains(&uid), || format!("{name} was not re-created"))?;
    }
    let ann = kubectl(
        c,
        "get deploy -n cnf vdu1-localhelm -o jsonpath='{.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}'",
    );
    check(!ann.trim().is_empty(), || "no restartedAt annotation: not a rollout restart".into())
}

/// Both workers cordoned: the restarted Deployments' new pods stay Pending (the old ones keep
/// serving: maxUnavailable rounds down to 0), so `rollout status` times out; the heal fails
/// naming a pod that is not Ready. Uncordoned, a second heal brings every pod back.
fn heal_not_back(h: &mut HelmCnf) -> R {
    let c = &h.c;
    kubectl(c, "cordon worker12 worker13");
    let heal = c.write("heal-all.json", &json!({}));
    let r = cnf(c, &["heal", "--request", s(&heal), "--timeout", "5"]);
    let pods = cnf_pods(c, "");
    kubectl(c, "uncordon worker12 worker13");
    check(r.code != 0 && r.stderr.contains("not every pod was Ready again within 5s"), || r.all())?;
    let pending: Vec<&String> = pods.iter().filter(|(_, p)| !p.2).map(|(n, _)| n).collect();
    check(!pending.is_empty() && pending.iter().any(|p| r.stderr.contains(p.as_str())), || {
        format!("the error names no pod that is not Ready ({pods:?}):\n{}", r.stderr)
    })?;
    cnf(c, &["heal", "--request", s(&heal), "--timeout", "90"]).ok();
    let (ok, pods) = wait_until(Duration::from_secs(60), || cnf_pods(c, ""), |p| all_ready(p, 2));
    check(ok, || format!("pods after the second heal: {pods:?}"))
}

fn services(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let r = out(cnf(c, &["services"]).ok());
    let svcs = r["result"]["services"].as_array().cloned().unwrap_or_default();
    let by_name = |svcs: &[Value], n: &str| svcs.iter().find(|x| x["name"] == n).cloned().unwrap_or(Value::Null);
    for (rel, name, port) in [("vdu1", "vdu1-localhelm", 8081), ("vdu2", "vdu2-nginxlab", 80)] {
        let svc = by_name(&svcs, name);
        check(svc["release"] == rel && svc["type"] == "ClusterIP" && svc["ports"][0]["port"] == port, || {
            format!("{name}: {svc}")
        })?;
        let live = kubectl(c, &format!("get svc -n cnf {name} -o jsonpath='{{.spec.clusterIP}}'"));
        check(!live.trim().is_empty() && svc["clusterIP"] == live.trim() && svc["inCluster"] == true, || {
            format!("{name}: {svc}\nthe API's cluster IP: {live}")
        })?;
    }
    out(cnf(c, &["upgrade", "--release", "vdu2", "--reuse-values", "--set", "service.type=NodePort"]).ok());
    let r = out(cnf(c, &["services", "--release", "vdu2"]).ok());
    let svc = by_name(r["result"]["services"].as_array().map(Vec::as_slice).unwrap_or_default(), "vdu2-nginxlab");
    let node_port = svc["ports"][0]["nodePort"].as_u64().unwrap_or(0);
    let live = kubectl(c, "get svc -n cnf vdu2-nginxlab -o jsonpath='{.spec.ports[0].nodePort}'");
    check(
        svc["type"] == "NodePort" && (30000..=32767).contains(&node_port) && live.trim() == node_port.to_string(),
        || format!("{svc}\nthe API's node port: {live}"),
    )
}

/// Both workers cordoned: vdu3's pod stays Pending, so `helm install --wait` blocks with the
/// release in pending-install; Helm is killed there (-9), as a node's crash would, and the driver
/// ends on the failure it reports.
fn interrupt_an_install(h: &mut HelmCnf) -> R {
    let c = &h.c;
    kubectl(c, "cordon worker12 worker13");
    let mut req3: Value = serde_json::from_str(&std::fs::read_to_string(&h.req).unwrap()).unwrap();
    req3["additionalParams"]["using_helm_install_param"] = json!([{"exthelmchart": true, "helmreleasename": "vdu3", "helmrepositoryname": "labrepo3",
        "helmchartname": "nginxlab", "exthelmrepo_url": h.repo.url, "helmchartversion": "0.1.0"}]);
    req3["additionalParams"]["vdu_mapping"] = json!({});
    let req3 = c.write("cnf3.json", &req3);
    let mut a = cnf_args(c, &["-o", "json"], "cnf3");
    a.extend(["instantiate", "--request", s(&req3), "--wait", "--timeout", "300"]);
    let mut child = support::binary()
        .args(a)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (pending, st) = wait_until(
        Duration::from_secs(60),
        || c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm status vdu3 -n cnf -o json 2>/dev/null"),
        |st| st.contains("pending-install"),
    );
    // Helm dies first, hard (a node's OOM killer or reboot), and alone: a Helm that gets TERM
    // cancels its install and marks the release failed, which needs no recovery. So neither the
    // driver nor the node program's shells may die before it: the leash would hand the TERM of a
    // lost session to Helm at once (a pattern that also matched the leash's shell once killed
    // the leash first, and on a loaded CI machine its TERM reached Helm before the KILL did).
    // `-x helm` matches the Helm binary's own name only; the node program then reports the
    // failed install and the driver exits by itself.
    c.on(1, "for i in 1 2 3 4 5 6 7 8 9 10; do pkill -9 -x helm || break; sleep 0.2; done");
    let (exited, _) = wait_until(Duration::from_secs(30), || child.try_wait().ok().flatten().is_some(), |x| *x);
    if !exited {
        let _ = child.kill();
    }
    let _ = child.wait();
    let after = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm status vdu3 -n cnf -o json 2>/dev/null");
    let stuck = cnf_pods(c, "-l app.kubernetes.io/instance=vdu3");
    kubectl(c, "uncordon worker12 worker13");
    check(pending, || format!("the install never showed pending-install: {st}"))?;
    check(after.contains("\"status\":\"pending-install\""), || {
        format!("after the kill, not pending-install: {after}")
    })?;
    check(stuck.values().all(|p| p.1.is_empty() && !p.2), || format!("vdu3's pod was scheduled: {stuck:?}"))?;
    h.req3 = Some(req3);
    Ok(())
}

fn rerun_recovers_pending_install(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let req3 = h.req3.as_deref().expect("the vdu3 request, written by the previous phase");
    let mut a = cnf_args(c, &["-o", "json"], "cnf3");
    a.extend(["instantiate", "--request", s(req3), "--wait", "--timeout", "120"]);
    let r = mgmt(&a, &[]);
    r.ok();
    check(r.stderr.contains("stuck in pending-install"), || format!("no recovery reported:\n{}", r.stderr))?;
    check(out(&r)["result"]["releases"]["vdu3"]["status"] == "deployed", || r.stdout.clone())?;
    let (ok, pods) =
        wait_until(Duration::from_secs(60), || cnf_pods(c, "-l app.kubernetes.io/instance=vdu3"), |p| all_ready(p, 1));
    check(ok, || format!("vdu3 after the recovery: {pods:?}"))?;
    let mut a = cnf_args(c, &[], "cnf3");
    a.push("terminate");
    mgmt(&a, &[]).ok();
    Ok(())
}

fn terminate(h: &mut HelmCnf) -> R {
    let c = &h.c;
    cnf(c, &["terminate"]).ok();
    let left = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -A -o json; ls /var/tacker/helm");
    check(!left.contains("vdu1") && !left.contains("vdu2") && !left.contains("cnf1"), || left.clone())?;
    let (ok, objs) = wait_until(
        Duration::from_secs(60),
        || kubectl(c, "get deploy,rs,svc,configmap,pods -n cnf -o name"),
        |o| o.lines().all(|l| l == "configmap/kube-root-ca.crt"),
    );
    check(ok, || format!("left in namespace cnf after terminate:\n{objs}"))
}

/// The control plane's bin dir (tests/real_cluster.rs says how it is found).
pub(crate) fn control_plane() -> Result<PathBuf, String> {
    crate::real_cluster::control_plane()
}

fn helm3_on_the_real_api() -> R {
    helm_lifecycle("rn3", 97, 3)
}

fn helm4_on_the_real_api() -> R {
    helm_lifecycle("rn4", 94, 4)
}

pub fn suite() -> Suite {
    Suite::new(file!()).needing(control_plane().err()).needing_root(&[
        ("helm3_on_the_real_api", helm3_on_the_real_api),
        ("helm4_on_the_real_api", helm4_on_the_real_api),
    ])
}
