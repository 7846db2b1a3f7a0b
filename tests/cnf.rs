//! Helm CNF operations end to end: a kit lab cluster (2 masters behind a VIP + 1 worker) built by
//! our own `instantiate-end`, with the REAL Helm 3 or Helm 4 binary installed on the masters
//! through the air-gapped path (`install_helm.sh` offline mode), a REAL chart repository served
//! over HTTP from the test host, and the lab kit's stand-in only for the verbs that need a
//! Kubernetes API server (install, upgrade, rollback, uninstall, status, get, list, history).
//!
//! Needs root and npm (the Helm binaries come from npm packages); see tests/labkit/fetch-helm.sh.
//! Outside CI a non-root run skips the lab tests loudly; under CI=true it fails
//! (tests/support/harness.rs).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, s, Cluster, R};
use support::phase::{phase, phases};
use support::{mgmt, repo};

/// The real Helm binaries and their offline tarballs (fetched once per machine; once per run
/// here, since the tests run in parallel threads).
fn helm_dir() -> PathBuf {
    static FETCHED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FETCHED
        .get_or_init(|| {
            let d = repo().join("target/helm");
            let o = Command::new("bash").arg(repo().join("tests/labkit/fetch-helm.sh")).arg(&d).output().unwrap();
            assert!(
                o.status.success(),
                "fetch-helm.sh: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            d
        })
        .clone()
}

fn tarball(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-linux-amd64.tar.gz"))
        .unwrap_or_else(|| panic!("no helm tarball in {}", dir.display()))
}

/// The chart repository served to the lab; killed on drop.
struct RepoServer {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_repo(c: &Cluster, helm: &Path, port: u16, auth: Option<(&str, &str)>) -> RepoServer {
    let addr = format!("198.18.{}.1", c.lab.net);
    let url = format!("http://{addr}:{port}");
    let dir = c.dir.path().join(format!("charts-{port}"));
    let o = Command::new("bash")
        .arg(repo().join("tests/labkit/make-chart-repo.sh"))
        .arg(&dir)
        .arg(helm)
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "make-chart-repo.sh: {}", String::from_utf8_lossy(&o.stderr));
    let mut cmd = Command::new("python3");
    cmd.arg(repo().join("tests/labkit/serve-repo.py"))
        .arg(dir.join("repo"))
        .arg(&addr)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null());
    if let Some((u, p)) = auth {
        cmd.env("REPO_USER", u).env("REPO_PASSWORD", p);
    }
    let child = cmd.spawn().unwrap();
    for _ in 0..50 {
        if std::net::TcpStream::connect((addr.as_str(), port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    RepoServer { child, url, dir }
}

/// A cluster with Helm `major` on both masters, installed by our own hook.
fn cluster(name: &str, net: u8, major: u32) -> Cluster {
    let c = Cluster::new(name, net, 3, &[1, 2], &[3], true);
    // The air-gapped path: the real Helm tarball replaces the kit's in the package's offline dir.
    let off = c.pkg.join("Files/offline");
    for e in std::fs::read_dir(&off).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".tar.gz") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let t = tarball(&helm_dir().join(format!("helm{major}")));
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

/// The package's VNFD, flavour `helmchart`, in the shape of Tacker's Helm CNF samples: VDU1
/// (release vdu1) 1 to 3 instances, +1 per step; VDU2 (release vdu2) 1 to 3, +1 per step, and
/// its aspect at most 1 step above the initial 1 (max_scale_level 1).
const CNF_VNFD: &str = r#"tosca_definitions_version: tosca_simple_yaml_1_2
description: mgmt-driver lab test, a Helm CNF with two VDUs
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
            vdu2_aspect: {name: vdu2_aspect, max_scale_level: 1, step_deltas: [delta_1]}
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

/// The CNF request: a local chart (Tacker's `<chart>-<version>.tgz`) and a chart from the repo,
/// in Tacker's shape (no extension keys: scaling comes from the package's VNFD).
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
                 "helmparameter": ["a=b; touch /tmp/pwned", "service.port=8081"],
                 "helmsecretparameter": [format!("secretGreeting={HELM_SECRET}")]},
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

/// A secret helm value of release vdu1: it must reach Helm and never our output.
const HELM_SECRET: &str = "S3cretHelmValue";

/// `cnf <flags> --vnf-instance-id <id> --cluster-instance <cluster> -i <inventory> --state-dir
/// <state>`: how every `cnf` run against the lab cluster starts.
fn cnf_args<'a>(c: &'a Cluster, flags: &[&'a str], id: &'a str) -> Vec<&'a str> {
    let mut a = vec!["cnf"];
    a.extend(flags);
    a.extend(["--vnf-instance-id", id, "--cluster-instance", &c.id, "-i", s(&c.inv), "--state-dir", s(&c.state)]);
    a
}

/// `cnf -o json` on instance cnf1, with the package and fast status events.
fn cnf(c: &Cluster, args: &[&str]) -> support::Run {
    let mut a = cnf_args(c, &["-o", "json"], "cnf1");
    a.extend(["--package-dir", s(&c.pkg), "--status-interval", "0.5"]);
    a.extend(args);
    mgmt(&a, &[])
}

fn out(r: &support::Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}\n--- stderr\n{}", r.stdout, r.stderr))
}

/// The real Helm `major` binary on the test host.
fn helm_bin(major: u32) -> PathBuf {
    helm_dir().join(format!("helm{major}/helm"))
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `helm` on a master in cluster `id`'s own Helm environment, where `cnf` runs it: the lab
/// CNFs' default cluster id is their `--cluster-instance`.
fn env_helm(id: &str) -> String {
    let d = format!("/var/lib/mgmt-driver/helm/{id}");
    format!(
        "KUBECONFIG={d}/kubeconfig HELM_CACHE_HOME={d}/cache HELM_CONFIG_HOME={d}/config HELM_DATA_HOME={d}/data helm"
    )
}

/// What the phases of [`helm_lifecycle`] share.
struct HelmCnf {
    /// The chart repository; declared first so that it stops before the cluster's lab goes down.
    repo: RepoServer,
    c: Cluster,
    major: u32,
    /// The CNF request: releases vdu1 (local chart) and vdu2 (from the repository).
    req: PathBuf,
    /// The vdu3 request whose install [`interrupt_an_install`] leaves pending.
    req3: Option<PathBuf>,
}

/// Every Helm CNF operation against a real Helm `major`, one named phase after the other.
fn helm_lifecycle(name: &str, net: u8, major: u32) -> R {
    let c = phase("build a cluster with real Helm on both masters", || {
        let c = cluster(name, net, major);
        let hv = c.on(1, "helm version --short");
        check(hv.starts_with(&format!("v{major}.")), || format!("real Helm {major} expected on the master, got {hv}"))?;
        Ok(c)
    })?;
    let mut h = phase("serve the chart repository", move || {
        let repo = serve_repo(&c, &helm_bin(major), 8879, None);
        let req = cnf_request(&c, &repo.url, &repo.dir);
        Ok(HelmCnf { repo, c, major, req, req3: None })
    })?;
    phases(
        &mut h,
        &[
            ("refuse a chart path outside the package", refuse_chart_outside_package),
            ("install local and external charts", install_local_and_external_charts),
            ("a hostile parameter stays a value", hostile_parameter_stays_a_value),
            ("re-run instantiate upgrades in place", rerun_upgrades_in_place),
            ("helm show against the repository", show_chart_from_repository),
            ("a SOL002 heal replaces the VNFC's pod", heal_replaces_the_pod),
            ("a whole-CNF heal re-creates every pod", whole_cnf_heal_recreates_every_pod),
            ("a pod that does not come back fails the heal", heal_fails_naming_a_pod_not_back),
            ("--namespace selects the releases' namespace", namespace_flag),
            ("scale within and out of bounds", scale_within_and_out_of_bounds),
            ("upgrade vdu2 and roll back", upgrade_and_roll_back),
            ("status with the first master down", status_with_first_master_down),
            ("interrupt an install mid-way", interrupt_an_install),
            ("a re-run recovers the pending install", rerun_recovers_pending_install),
            ("private repository and generated release name", private_repository_and_generated_name),
            ("two CNFs with one repository name", two_cnfs_one_repository_name),
            ("repository sync adds and removes", repository_sync),
            (
                "OSM's shape: repo-add, show, install with a values file, upgrade, uninstall, repo-remove",
                osm_shaped_helm,
            ),
            ("services of the CNF, then as a LoadBalancer", services_of_the_cnf),
            ("two cluster ids on one master never share repositories", two_cluster_ids_one_master),
            ("terminate leaves nothing on the masters", terminate_leaves_nothing),
            ("reset --uninstall removes the releases and the environment, twice", reset_uninstall),
            ("a tenant's CNF reaches only its own cluster", tenant_reaches_only_its_own_cluster),
        ],
    )
}

/// A chart path that leaves the package is refused before any connection.
fn refuse_chart_outside_package(h: &mut HelmCnf) -> R {
    let bad = h.c.write("bad.json", &json!({"additionalParams": {"use_helm": true, "using_helm_install_param": [
        {"exthelmchart": false, "helmreleasename": "x", "helmchartfile_path": "../../etc/x-1.0.tgz"}]}, "flavourId": "s"}));
    cnf(&h.c, &["instantiate", "--request", s(&bad)]).fails(2, "must stay inside the VNF package");
    Ok(())
}

/// Instantiate both releases.
fn install_local_and_external_charts(h: &mut HelmCnf) -> R {
    let r = cnf(&h.c, &["instantiate", "--request", s(&h.req), "--wait"]);
    r.ok();
    let d = out(&r);
    check(d["context"]["helmMajor"] == h.major, || format!("{d}"))?;
    for rel in ["vdu1", "vdu2"] {
        let st = &d["result"]["releases"][rel];
        check(st["status"] == "deployed" && st["revision"] == 1, || format!("{rel}: {st}"))?;
        check(
            st["resources"].as_array().unwrap().iter().any(|x| x["kind"] == "Deployment" && x["namespace"] == "cnf"),
            || format!("{rel}: {st}"),
        )?;
    }
    check(r.stderr.contains(r#""event":"status","subject":"release vdu1""#), || {
        "no status events while helm ran".into()
    })
}

/// The hostile parameter is a literal value; nothing ran on the node. Both masters have the
/// chart and the repository.
fn hostile_parameter_stays_a_value(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let r = cnf(c, &["values", "--release", "vdu1"]);
    let vals = out(&r);
    check(vals["result"]["a"] == "b; touch /tmp/pwned", || format!("{vals}"))?;
    // The secret value reached Helm (through a 0600 file and --set-file, since removed) and is
    // masked in everything we print.
    check(vals["result"]["secretGreeting"] == "********" && !r.all().contains(HELM_SECRET), || {
        let all = r.all();
        let leaks: Vec<&str> = all.lines().filter(|l| l.contains(HELM_SECRET)).collect();
        format!("{vals}\nleaked in: {leaks:?}")
    })?;
    let on_master = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm get values vdu1 -n cnf -o json");
    check(on_master.contains(HELM_SECRET), || format!("the secret value did not reach Helm: {on_master}"))?;
    check(!c.on(1, "ls -a /root/.mgmt-driver/run/cnf1").contains("set-"), || "a secret value file was left".into())?;
    for i in [1, 2] {
        check(c.on(i, "test -e /tmp/pwned && echo PWNED").is_empty(), || "/tmp/pwned exists".into())?;
        let have = c.on(i, &format!("ls /var/tacker/helm/cnf1; {} repo list -o json", env_helm(&c.id)));
        check(have.contains("localhelm") && have.contains("labrepo"), || {
            format!("master {i} lacks the chart or repo: {have}")
        })?;
    }
    Ok(())
}

/// Re-running instantiate upgrades in place (idempotent, no "name in use"); roll back on
/// failure is Helm 3's --atomic or Helm 4's --rollback-on-failure, and the real binary accepts it.
fn rerun_upgrades_in_place(h: &mut HelmCnf) -> R {
    let again = cnf(&h.c, &["instantiate", "--request", s(&h.req), "--atomic", "-v"]);
    let flag = if h.major >= 4 { "--rollback-on-failure" } else { "--atomic" };
    check(again.stderr.contains(flag), || format!("{flag} not used:\n{}", again.stderr))?;
    let again = out(again.ok());
    check(again["result"]["releases"]["vdu1"]["revision"] == 2, || format!("{again}"))?;
    let list = out(&cnf(&h.c, &["list"]));
    let names: Vec<&str> = list["result"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    check(names.contains(&"vdu1") && names.contains(&"vdu2"), || format!("{list}"))
}

/// helm show, for real, against the repository.
fn show_chart_from_repository(h: &mut HelmCnf) -> R {
    let show = out(&cnf(&h.c, &["show", "chart", "nginxlab", "--repo", &h.repo.url, "--version", "0.2.0"]));
    check(show["result"].as_str().unwrap_or("").contains("version: 0.2.0"), || format!("{show}"))
}

/// The pods of release vdu1, by name.
fn vdu1_pods(c: &Cluster) -> Vec<String> {
    let j = c.on(
        1,
        "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get pods -n cnf -l app.kubernetes.io/instance=vdu1 -o json",
    );
    let v: Value = serde_json::from_str(&j).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// A VnfInstance as Tacker holds it for the CNF: one VNFC per pod of vdu1, its vnfcInfo id
/// (`vnfc-<n>`) → vnfcResourceInfo (`res-<n>`) → computeResource.resourceId (the pod name).
fn vnf_instance(c: &Cluster, pods: &[String]) -> PathBuf {
    let res: Vec<Value> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({"id": format!("res-{i}"), "vduId": "VDU1",
            "computeResource": {"resourceId": p, "vimLevelResourceType": "Deployment"}})
        })
        .collect();
    let info: Vec<Value> = (0..pods.len())
        .map(|i| json!({"id": format!("vnfc-{i}"), "vduId": "VDU1", "vnfcResourceInfoId": format!("res-{i}"), "vnfcState": "STARTED"}))
        .collect();
    c.write(
        "vnf-instance.json",
        &json!({"id": "cnf1", "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {"flavourId": "helmchart", "vnfState": "STARTED", "vnfcResourceInfo": res, "vnfcInfo": info}}),
    )
}

/// SOL002 heal: vnfcInstanceId is Tacker's VNFC id, mapped through the VnfInstance to its pod,
/// which is replaced; an id the instance does not hold is exit 2 naming the field.
fn heal_replaces_the_pod(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before_pods = vdu1_pods(c);
    check(!before_pods.is_empty(), || "vdu1 has no pods".into())?;
    let inst = vnf_instance(c, &before_pods);
    let heal = c.write("heal.json", &json!({"vnfcInstanceId": ["vnfc-0"]}));
    let r = out(cnf(c, &["heal", "--request", s(&heal), "--vnf-instance", s(&inst)]).ok());
    check(r["result"][0]["pod"] == json!(before_pods[0]) && r["result"][0]["vnfcInstanceId"] == "vnfc-0", || {
        format!("{r}")
    })?;
    let after_pods = vdu1_pods(c);
    check(!after_pods.contains(&before_pods[0]) && after_pods.len() == before_pods.len(), || {
        format!("{before_pods:?} -> {after_pods:?}")
    })?;
    let bad = c.write("heal-bad.json", &json!({"vnfcInstanceId": [after_pods[0]]}));
    cnf(c, &["heal", "--request", s(&bad), "--vnf-instance", s(&inst)]).fails(2, "vnfcInstanceId[0]");
    check(vdu1_pods(c) == after_pods, || "a refused heal changed the pods".into())
}

/// Every pod of namespace cnf: name → (uid, Ready).
fn cnf_pods(c: &Cluster) -> std::collections::BTreeMap<String, (String, bool)> {
    let j = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get pods -n cnf -o json");
    let v: Value = serde_json::from_str(&j).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    let ready = p["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                    let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                    (name, (p["metadata"]["uid"].as_str().unwrap_or("").to_string(), ready))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// SOL003 heal (no vnfcInstanceId): every workload of both releases is restarted; every pod is
/// new (name and uid) and Ready when the heal returns.
fn whole_cnf_heal_recreates_every_pod(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before = cnf_pods(c);
    check(before.len() >= 2, || format!("expected the pods of vdu1 and vdu2: {before:?}"))?;
    let heal = c.write("heal-all.json", &json!({"cause": "whole CNF"}));
    // The plan shows the one node program that restarts and waits for every workload (from the
    // recorded manifests), and changes nothing.
    let plan = cnf(c, &["--dry-run", "heal", "--request", s(&heal)]);
    plan.ok();
    let step = "cnf_heal.sh cnf 300 deployment/vdu1-localhelm deployment/vdu2-nginxlab";
    check(plan.all().contains(step), || format!("the plan lacks {step}:\n{}", plan.all()))?;
    check(cnf_pods(c) == before, || "a dry run changed the pods".into())?;
    c.kit_ctl(&["set-helm-delay", "2"]);
    let t0 = std::time::Instant::now();
    let r = cnf(c, &["heal", "--request", s(&heal), "--timeout", "60"]);
    c.kit_ctl(&["set-helm-delay", "0"]);
    let d = out(r.ok());
    check(t0.elapsed() >= std::time::Duration::from_secs(2), || "the heal did not wait for the new pods".into())?;
    let rels: Vec<&str> =
        d["result"]["workloads"].as_array().unwrap().iter().filter_map(|w| w["release"].as_str()).collect();
    check(rels.contains(&"vdu1") && rels.contains(&"vdu2"), || format!("{d}"))?;
    let after = cnf_pods(c);
    check(after.len() == before.len(), || format!("{before:?} -> {after:?}"))?;
    let old_uids: Vec<&String> = before.values().map(|(u, _)| u).collect();
    for (name, (uid, ready)) in &after {
        check(!before.contains_key(name) && !old_uids.contains(&uid), || format!("{name} was not re-created"))?;
        check(*ready, || format!("{name} is not Ready after the heal"))?;
    }
    Ok(())
}

/// A pod that does not become Ready within the timeout fails the heal, naming it; a later heal
/// (the cause gone) brings every pod back.
fn heal_fails_naming_a_pod_not_back(h: &mut HelmCnf) -> R {
    let c = &h.c;
    c.kit_ctl(&["set-helm-delay", "3600"]);
    let heal = c.write("heal-all.json", &json!({}));
    let r = cnf(c, &["heal", "--request", s(&heal), "--timeout", "3"]);
    c.kit_ctl(&["set-helm-delay", "0"]);
    check(r.code != 0 && r.stderr.contains("not every pod was Ready again within 3s"), || r.all())?;
    let pending: Vec<String> = cnf_pods(c).into_iter().filter(|(_, (_, ready))| !ready).map(|(n, _)| n).collect();
    check(!pending.is_empty() && pending.iter().any(|p| r.stderr.contains(p.as_str())), || {
        format!("the error does not name a pod that is not Ready ({pending:?}):\n{}", r.stderr)
    })?;
    cnf(c, &["heal", "--request", s(&heal), "--timeout", "60"]).ok();
    check(cnf_pods(c).values().all(|(_, ready)| *ready), || "pods still not Ready after a second heal".into())
}

/// `--namespace` is where helm looks for the releases (over the recorded namespace), checked.
fn namespace_flag(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let list = out(cnf(c, &["list", "--namespace", "cnf"]).ok());
    let names: Vec<&str> = list["result"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    check(names.contains(&"vdu1") && names.contains(&"vdu2"), || format!("{list}"))?;
    check(out(&cnf(c, &["list", "--namespace", "default"]))["result"] == json!([]), || "default has releases".into())?;
    cnf(c, &["status", "--release", "vdu1", "--namespace", "default"])
        .fails(1, "helm status --namespace default -o json -- vdu1");
    cnf(c, &["status", "--release", "vdu1", "--namespace", "Bad_NS"]).fails(2, "--namespace");
    let st = out(cnf(c, &["status", "--release", "vdu1", "--namespace", "cnf"]).ok());
    check(st["result"]["info"]["status"] == "deployed", || format!("{st}"))
}

/// Scale both releases of the unmodified Tacker body (no aspect_id or bounds in vdu_mapping):
/// aspect → VDU → release and the bounds come from the package's VNFD; beyond them is exit 2
/// with Tacker's wording, naming the aspect and the bound.
fn scale_within_and_out_of_bounds(h: &mut HelmCnf) -> R {
    let c = &h.c;
    for aspect in ["vdu1_aspect", "vdu2_aspect"] {
        let sc = c.write("scale.json", &json!({"type": "SCALE_OUT", "aspectId": aspect, "numberOfSteps": 1}));
        let d = out(cnf(c, &["scale", "--request", s(&sc)]).ok());
        check(d["result"]["from"] == 1 && d["result"]["to"] == 2, || format!("{aspect}: {d}"))?;
        let release = &d["result"]["release"]["resources"];
        check(release.to_string().contains(&aspect.replace("_aspect", "-")), || format!("{aspect}: {d}"))?;
    }
    let big = c.write("scale-big.json", &json!({"type": "SCALE_OUT", "aspectId": "vdu1_aspect", "numberOfSteps": 5}));
    let r = cnf(c, &["scale", "--request", s(&big)]);
    r.fails(2, "is out of range");
    check(r.stderr.contains("aspect 'vdu1_aspect' (VDU1) allows 1 to 3 instances (vdu_profile)"), || r.stderr.clone())?;
    let lvl = c.write("scale-lvl.json", &json!({"type": "SCALE_OUT", "aspectId": "vdu2_aspect", "numberOfSteps": 1}));
    let r = cnf(c, &["scale", "--request", s(&lvl)]);
    r.fails(2, "is out of range");
    check(r.stderr.contains("aspect 'vdu2_aspect' (VDU2) is at most max_scale_level 1 (2 instances)"), || {
        r.stderr.clone()
    })?;
    for aspect in ["vdu1_aspect", "vdu2_aspect"] {
        let inn = c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": aspect, "numberOfSteps": "1"}));
        let d = out(cnf(c, &["scale", "--request", s(&inn)]).ok());
        check(d["result"]["to"] == 1, || format!("{aspect}: {d}"))?;
    }
    Ok(())
}

/// Upgrade vdu2 to 0.2.0, then roll back: the old values return.
fn upgrade_and_roll_back(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let before = out(&cnf(c, &["values", "--release", "vdu2", "--all"]))["result"].clone();
    let up = out(cnf(c, &["upgrade", "--release", "vdu2", "--chart", "labrepo/nginxlab", "--version", "0.2.0"]).ok());
    let after = out(&cnf(c, &["values", "--release", "vdu2", "--all"]))["result"].clone();
    check(before != after, || "0.2.0 must change a default value".into())?;
    let rb = out(cnf(c, &["rollback", "--release", "vdu2"]).ok());
    check(rb["result"]["revision"].as_u64() > up["result"]["revision"].as_u64(), || format!("{rb}"))?;
    let back = out(&cnf(c, &["values", "--release", "vdu2", "--all"]))["result"].clone();
    check(back == before, || format!("rollback did not restore the values:\n{before}\n{back}"))?;
    let hist = out(&cnf(c, &["history", "--release", "vdu2"]));
    // install, the idempotent re-run, scale out and in (the chart's version kept: 0.1.0), the
    // upgrade, the rollback
    let charts: Vec<&str> = hist["result"].as_array().unwrap().iter().filter_map(|r| r["chart"].as_str()).collect();
    check(
        charts
            == [
                "nginxlab-0.1.0",
                "nginxlab-0.1.0",
                "nginxlab-0.1.0",
                "nginxlab-0.1.0",
                "nginxlab-0.2.0",
                "nginxlab-0.1.0",
            ],
        || format!("{hist}"),
    )
}

/// Master 0 down → master 1 runs Helm.
fn status_with_first_master_down(h: &mut HelmCnf) -> R {
    let c = &h.c;
    c.lab.stop("1");
    let st = cnf(c, &["status", "--release", "vdu1"]);
    c.lab.start("1");
    let st = out(st.ok());
    check(st["context"]["master"] == c.lab.ip(2) && st["result"]["info"]["status"] == "deployed", || format!("{st}"))
}

/// An interrupted install (the helm process dies mid-way) leaves pending-install.
fn interrupt_an_install(h: &mut HelmCnf) -> R {
    let c = &h.c;
    c.kit_ctl(&["set-helm-delay", "30"]);
    let mut req3 = read_json(&h.req);
    req3["additionalParams"]["using_helm_install_param"] = json!([{"exthelmchart": true, "helmreleasename": "vdu3", "helmrepositoryname": "labrepo3",
        "helmchartname": "nginxlab", "exthelmrepo_url": h.repo.url, "helmchartversion": "0.1.0"}]);
    req3["additionalParams"]["vdu_mapping"] = json!({});
    let req3 = c.write("cnf3.json", &req3);
    let mut a = cnf_args(c, &["-o", "json"], "cnf3");
    a.extend(["instantiate", "--request", s(&req3), "--wait"]);
    let mut child = support::binary()
        .args(a)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut pending = false;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        if c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm status vdu3 -n cnf -o json 2>/dev/null")
            .contains("pending-install")
        {
            pending = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    c.on(1, "pkill -9 -f 'helm.*install vdu3' ; true");
    check(pending, || "the install never showed pending-install".into())?;
    c.kit_ctl(&["set-helm-delay", "0"]);
    h.req3 = Some(req3);
    Ok(())
}

/// A re-run of the interrupted install recovers it; then its instance is terminated.
fn rerun_recovers_pending_install(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let req3 = h.req3.as_deref().expect("the vdu3 request, written by the previous phase");
    let mut a = cnf_args(c, &["-o", "json"], "cnf3");
    a.extend(["instantiate", "--request", s(req3)]);
    let r = mgmt(&a, &[]);
    r.ok();
    check(r.stderr.contains("stuck in pending-install"), || format!("no recovery reported:\n{}", r.stderr))?;
    check(out(&r)["result"]["releases"]["vdu3"]["status"] == "deployed", || r.stdout.clone())?;
    let mut a = cnf_args(c, &[], "cnf3");
    a.push("terminate");
    mgmt(&a, &[]).ok();
    Ok(())
}

/// A repository with a login, and no release name (OSM's rule names it): the password reaches
/// Helm on stdin from a 0600 file that is removed, never argv or our output.
fn private_repository_and_generated_name(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let private = serve_repo(c, &helm_bin(h.major), 8880, Some(("cnfuser", "S3cretRepoPw")));
    let mut req4 = read_json(&h.req);
    req4["additionalParams"]["using_helm_install_param"] = json!([{"exthelmchart": true, "helmrepositoryname": "privrepo", "helmchartname": "nginxlab",
        "exthelmrepo_url": private.url, "exthelmrepo_username": "cnfuser", "exthelmrepo_password": "S3cretRepoPw"}]);
    req4["additionalParams"]["vdu_mapping"] = json!({});
    let req4 = c.write("cnf4.json", &req4);
    let mut a = cnf_args(c, &["-o", "json", "-v"], "cnf4");
    a.extend(["instantiate", "--request", s(&req4)]);
    let r4 = mgmt(&a, &[]);
    r4.ok();
    check(!r4.all().contains("S3cretRepoPw"), || "the repository password is in our output".into())?;
    // Nor at rest: the CNF document keeps the request's params (later operations reuse them)
    // with the password sealed (tests/secrets.rs covers the cluster document).
    let at_rest: Vec<String> = std::fs::read_dir(&c.state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && std::fs::read(p).unwrap().windows(12).any(|w| w == b"S3cretRepoPw"))
        .map(|p| p.display().to_string())
        .collect();
    check(at_rest.is_empty() && c.state.join("cnf4.cnf.json").exists(), || {
        format!("the repository password is at rest in clear: {at_rest:?}")
    })?;
    let rels = out(&r4)["result"]["releases"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    check(rels.len() == 1 && rels[0].starts_with("nginxlab-") && rels[0].len() == "nginxlab-".len() + 10, || {
        format!("{rels:?}")
    })?;
    // The same request again, even with the record gone: the same name, upgraded in place.
    std::fs::remove_file(c.state.join("cnf4.cnf.json")).unwrap();
    let again = out(mgmt(&a, &[]).ok())["result"]["releases"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    check(again == rels, || format!("{rels:?} then {again:?}"))?;
    let listed = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -A -o json");
    check(listed.matches("\"name\":\"nginxlab-").count() == 1, || format!("a second release was installed: {listed}"))?;
    check(!c.on(1, "ls -a /root/.mgmt-driver/run/cnf4").contains(".pw"), || {
        "the password file was left behind".into()
    })?;
    let mut a = cnf_args(c, &[], "cnf4");
    a.push("terminate");
    mgmt(&a, &[]).ok();
    check(!c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -A -o json").contains(&rels[0]), || {
        "generated release not uninstalled".into()
    })?;
    drop(private);
    Ok(())
}

/// Repository sync: add a missing one, report; then remove the extra. The CNF's own
/// repository (`cnf1@labrepo`) is left alone both times.
fn repository_sync(h: &mut HelmCnf) -> R {
    let url = &h.repo.url;
    let sync = out(cnf(&h.c, &["repo-sync", "--repo", &format!("extra={url}")]).ok());
    let both = |v: &Value, key: &str| {
        v["result"].as_array().is_some_and(|a| a.len() == 2 && a.iter().all(|m| m[key] == json!(["extra"])))
    };
    check(both(&sync, "added"), || format!("{sync}"))?;
    let sync = out(cnf(&h.c, &["repo-sync"]).ok());
    check(both(&sync, "removed"), || format!("{sync}"))?;
    let left = h.c.on(1, &format!("{} repo list -o json", env_helm(&h.c.id)));
    check(left.contains(r#""name":"cnf1@labrepo""#), || format!("repo-sync removed the CNF's repository: {left}"))
}

/// OSM's Helm connector's verbs, without a request: one repository added on both masters
/// (real Helm's list shows it), a chart shown by it, installed from it as `CHART:VERSION` with a
/// values file into the `--cluster-uuid`'s namespace, upgraded with another values file,
/// uninstalled alone (its record gone with it), the repository removed, and removed again.
fn osm_shaped_helm(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let uuid = format!("osm:{}", c.id);
    let run = |args: &[&str]| {
        let mut a = cnf_args(c, &["-o", "json", "--cluster-uuid", &uuid], "osm1");
        a.extend(args);
        mgmt(&a, &[])
    };
    let added = out(run(&["repo-add", &format!("osmrepo={}", h.repo.url)]).ok());
    check(added["result"].as_array().map(Vec::len) == Some(2), || format!("{added}"))?;
    for i in [1, 2] {
        let listed = c.on(i, &format!("{} repo list -o json", env_helm(&c.id)));
        check(listed.contains(r#""name":"osmrepo""#), || format!("master {i}: {listed}"))?;
    }
    let shown = out(run(&["show", "chart", "osmrepo/nginxlab", "--version", "0.1.0"]).ok());
    check(shown["result"].as_str().is_some_and(|t| t.contains("name: nginxlab")), || format!("{shown}"))?;
    let v1 = c.write("osm-values-1.json", &json!({"replicaCount": 2, "osmNote": "first"}));
    let installed = out(run(&["install", "osmrepo/nginxlab:0.1.0", "--release", "web", "--values", s(&v1)]).ok());
    check(installed["result"]["namespace"] == "osm" && installed["result"]["revision"] == 1, || {
        format!("{installed}")
    })?;
    let listed = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n osm -o json");
    check(listed.contains(r#""name":"web""#), || listed.clone())?;
    let vals = out(run(&["values", "--release", "web"]).ok());
    check(vals["result"]["osmNote"] == "first" && vals["result"]["replicaCount"] == 2, || format!("{vals}"))?;
    let v2 = c.write("osm-values-2.json", &json!({"replicaCount": 1, "osmNote": "second"}));
    let up = out(run(&["upgrade", "--release", "web", "--values", s(&v2)]).ok());
    check(up["result"]["revision"] == 2, || format!("{up}"))?;
    let vals = out(run(&["values", "--release", "web"]).ok());
    check(vals["result"]["osmNote"] == "second", || format!("{vals}"))?;
    let left = c.on(1, "ls -a /root/.mgmt-driver/run/osm1 2>&1");
    check(!left.contains("values-web"), || format!("a values file was left behind: {left}"))?;
    let gone = out(run(&["uninstall", "--release", "web"]).ok());
    check(gone["result"]["outcome"] == "uninstalled" && gone["result"]["recordRemoved"] == true, || format!("{gone}"))?;
    let listed = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n osm -o json");
    check(!listed.contains(r#""name":"web""#), || listed.clone())?;
    check(!c.state.join("osm1.cnf.json").exists(), || "the install's record is left".into())?;
    for want in ["removed", "absent"] {
        let r = out(run(&["repo-remove", "osmrepo"]).ok());
        let got: Vec<&str> =
            r["result"].as_array().into_iter().flatten().filter_map(|m| m["outcome"].as_str()).collect();
        check(got == [want, want], || format!("{r}"))?;
    }
    let listed = c.on(2, &format!("{} repo list -o json", env_helm(&c.id)));
    check(!listed.contains("osmrepo") && listed.contains("cnf1@labrepo"), || listed.clone())
}

/// Two CNFs name their repository `labrepo`, at different URLs: each gets its own
/// (`<instance>@labrepo`), and terminating one leaves the other's in place.
fn two_cnfs_one_repository_name(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let other = serve_repo(c, &helm_bin(h.major), 8881, None);
    let mut req5 = read_json(&h.req);
    req5["additionalParams"]["using_helm_install_param"] = json!([{"exthelmchart": true, "helmreleasename": "vdu5",
        "helmrepositoryname": "labrepo", "helmchartname": "nginxlab", "exthelmrepo_url": other.url, "helmchartversion": "0.2.0"}]);
    req5["additionalParams"]["vdu_mapping"] = json!({});
    let req5 = c.write("cnf5.json", &req5);
    let mut a = cnf_args(c, &["-o", "json"], "cnf5");
    a.extend(["instantiate", "--request", s(&req5)]);
    mgmt(&a, &[]).ok();
    let urls = |c: &Cluster| -> Value {
        serde_json::from_str(&c.on(1, &format!("{} repo list -o json", env_helm(&c.id)))).unwrap_or(Value::Null)
    };
    let url_of = |v: &Value, name: &str| {
        v.as_array().and_then(|a| a.iter().find(|r| r["name"] == name)).map(|r| r["url"].clone())
    };
    let list = urls(c);
    check(url_of(&list, "cnf1@labrepo") == Some(json!(h.repo.url)), || format!("cnf1's repository moved: {list}"))?;
    check(url_of(&list, "cnf5@labrepo") == Some(json!(other.url)), || format!("{list}"))?;
    let mut a = cnf_args(c, &[], "cnf5");
    a.push("terminate");
    mgmt(&a, &[]).ok();
    let list = urls(c);
    check(url_of(&list, "cnf5@labrepo").is_none() && url_of(&list, "cnf1@labrepo").is_some(), || format!("{list}"))?;
    // cnf1 still upgrades from its own repository.
    out(cnf(c, &["upgrade", "--release", "vdu2", "--chart", "labrepo/nginxlab", "--reuse-values"]).ok());
    drop(other);
    Ok(())
}

/// `kubectl get service NAME -n cnf -o json` on master 1: the cluster's own view.
fn kubectl_service(c: &Cluster, name: &str) -> Value {
    let o = c.on(1, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl get service {name} -n cnf -o json"));
    serde_json::from_str(&o).unwrap_or(Value::Null)
}

/// `cnf services`: the Services of both releases from their manifests (helm create's: ClusterIP,
/// port → targetPort `http`, TCP), with the cluster IP the cluster allocated; then vdu2 as a
/// LoadBalancer: a node port allocated, no external IP (no load-balancer controller in a lab).
fn services_of_the_cnf(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let r = out(cnf(c, &["services"]).ok());
    let svcs = r["result"]["services"].as_array().cloned().unwrap_or_default();
    let by_name = |svcs: &[Value], n: &str| svcs.iter().find(|x| x["name"] == n).cloned().unwrap_or(Value::Null);
    for (rel, name, port) in [("vdu1", "vdu1-localhelm", 8081), ("vdu2", "vdu2-nginxlab", 80)] {
        let svc = by_name(&svcs, name);
        check(svc["release"] == rel && svc["namespace"] == "cnf" && svc["type"] == "ClusterIP", || format!("{r}"))?;
        let want_port =
            json!([{"name": "http", "port": port, "targetPort": "http", "nodePort": null, "protocol": "TCP"}]);
        check(svc["ports"] == want_port, || format!("{name}: {svc}"))?;
        let ip = svc["clusterIP"].as_str().unwrap_or("");
        check(ip.parse::<std::net::Ipv4Addr>().is_ok(), || format!("{name}: no cluster IP: {svc}"))?;
        let live = kubectl_service(c, name);
        check(live["spec"]["clusterIP"] == ip && svc["inCluster"] == true, || {
            format!(
                "{name}: {svc}
{live}"
            )
        })?;
    }
    out(cnf(c, &["upgrade", "--release", "vdu2", "--reuse-values", "--set", "service.type=LoadBalancer"]).ok());
    let r = out(cnf(c, &["services", "--release", "vdu2"]).ok());
    let svc = by_name(r["result"]["services"].as_array().map(Vec::as_slice).unwrap_or_default(), "vdu2-nginxlab");
    let node_port = svc["ports"][0]["nodePort"].as_u64().unwrap_or(0);
    check(svc["type"] == "LoadBalancer" && (30000..=32767).contains(&node_port), || format!("{r}"))?;
    check(svc["externalIPs"] == json!([]), || format!("an external IP with no load balancer: {svc}"))?;
    let live = kubectl_service(c, "vdu2-nginxlab");
    check(live["spec"]["ports"][0]["nodePort"] == node_port, || format!("{svc}\n{live}"))
}

/// Two cluster ids reached from one master: a repository added in one's environment is not
/// listed in the other's (nor in Helm's default homes); each has its own 0600 kubeconfig; a
/// reset removes one environment from both masters, and a second reset finds nothing.
fn two_cluster_ids_one_master(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let run = |id: &str, uuid: &str, args: &[&str]| {
        let mut a = cnf_args(c, &["-o", "json", "--cluster-uuid", uuid], id);
        a.extend(args);
        mgmt(&a, &[])
    };
    let extra = format!("east-only={}", h.repo.url);
    let sync = out(run("ops-east", "cnf:east", &["repo-sync", "--repo", &extra]).ok());
    check(sync["context"]["clusterId"] == "east", || format!("{sync}"))?;
    let names = |v: &Value| -> Vec<String> {
        v["result"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str().map(String::from)).collect()
    };
    let east = out(run("ops-east", "east", &["repo-list"]).ok());
    let west = out(run("ops-west", "west", &["repo-list"]).ok());
    check(names(&east) == ["east-only"], || format!("{east}"))?;
    check(names(&west).is_empty(), || format!("west sees east's repositories: {west}"))?;
    for i in [1, 2] {
        let on = c.on(i, &format!("{} repo list -o json; helm repo list -o json 2>&1", env_helm("west")));
        check(!on.contains("east-only"), || format!("master {i}: {on}"))?;
        let modes = c.on(i, "stat -c '%a %n' /var/lib/mgmt-driver/helm/east /var/lib/mgmt-driver/helm/east/kubeconfig");
        check(
            modes.contains(
                "700 /var/lib/mgmt-driver/helm/east
",
            ) && modes.contains("600 /var/lib/mgmt-driver/helm/east/kubeconfig"),
            || format!("master {i}: {modes}"),
        )?;
    }
    for (n, want) in [(1, "removed"), (2, "absent")] {
        let r = out(run("ops-east", "east", &["reset"]).ok());
        let got: Vec<&str> =
            r["result"]["masters"].as_array().into_iter().flatten().filter_map(|m| m["environment"].as_str()).collect();
        check(got == [want, want], || format!("reset {n}: {r}"))?;
    }
    check(c.on(1, "ls /var/lib/mgmt-driver/helm").split_whitespace().all(|d| d != "east"), || "east left".into())?;
    let west = out(run("ops-west", "west", &["reset"]).ok());
    check(west["result"]["masters"][0]["environment"] == "removed", || format!("{west}"))
}

/// `cnf reset --uninstall` of a CNF: its release uninstalled, its repository and chart
/// directory gone with the whole environment from both masters, its record gone; again: a no-op.
fn reset_uninstall(h: &mut HelmCnf) -> R {
    let c = &h.c;
    let mut req6 = read_json(&h.req);
    req6["additionalParams"]["using_helm_install_param"] = json!([{"exthelmchart": true, "helmreleasename": "vdu6",
        "helmrepositoryname": "labrepo", "helmchartname": "nginxlab", "exthelmrepo_url": h.repo.url, "helmchartversion": "0.1.0"}]);
    req6["additionalParams"]["vdu_mapping"] = json!({});
    let req6 = c.write("cnf6.json", &req6);
    let mut a = cnf_args(c, &["-o", "json"], "cnf6");
    a.extend(["instantiate", "--request", s(&req6)]);
    mgmt(&a, &[]).ok();
    let env_dir = format!("/var/lib/mgmt-driver/helm/{}", c.id);
    let listed = c.on(1, &format!("{} repo list -o json", env_helm(&c.id)));
    check(listed.contains("cnf6@labrepo"), || listed.clone())?;
    let mut a = cnf_args(c, &["-o", "json"], "cnf6");
    a.extend(["reset", "--uninstall"]);
    let r = out(mgmt(&a, &[]).ok());
    let vdu6 = json!([{"vnfInstanceId": "cnf6", "release": "vdu6", "outcome": "uninstalled"}]);
    check(r["result"]["releases"] == vdu6, || format!("{r}"))?;
    let envs: Vec<&str> =
        r["result"]["masters"].as_array().into_iter().flatten().filter_map(|m| m["environment"].as_str()).collect();
    check(envs == ["removed", "removed"], || format!("{r}"))?;
    for i in [1, 2] {
        let left = c.on(i, &format!("KUBECONFIG=/etc/kubernetes/admin.conf helm list -A -o json; ls -d {env_dir} /var/tacker/helm/cnf6 2>&1"));
        check(!left.contains("vdu6") && left.matches("No such file").count() == 2, || format!("master {i}: {left}"))?;
    }
    check(!c.state.join("cnf6.cnf.json").exists(), || "the record is left".into())?;
    let again = out(mgmt(&a, &[]).ok());
    check(again["result"]["releases"] == json!([]) && again["result"]["masters"][0]["environment"] == "absent", || {
        format!("{again}")
    })
}

/// Terminate: no release, repository or chart directory left on any master.
fn terminate_leaves_nothing(h: &mut HelmCnf) -> R {
    let c = &h.c;
    cnf(c, &["terminate"]).ok();
    for i in [1, 2] {
        let left = c.on(
            i,
            &format!(
                "KUBECONFIG=/etc/kubernetes/admin.conf helm list -A -o json; ls /var/tacker/helm; {} repo list 2>&1",
                env_helm(&c.id)
            ),
        );
        check(
            !left.contains("vdu1") && !left.contains("vdu2") && !left.contains("cnf1") && !left.contains("labrepo"),
            || format!("master {i}: {left}"),
        )?;
    }
    Ok(())
}

/// A hook document for cluster `c` as a VNFM sends it, with the operator's options (the
/// inventory the shim passes, the state directory).
fn hook_doc(c: &Cluster, operation: &str, instance: &str, request: Value) -> Value {
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": operation, "request": request,
           "vnf_instance": {"id": instance}, "grant_request": null, "grant_response": null,
           "tmp_csar_dir": c.pkg, "user_script_err_handling_data": {},
           "options": {"inventory": c.inv, "state_dir": c.state}})
}

fn run_hook(c: &Cluster, name: &str, doc: &Value) -> support::Run {
    let input = c.write(name, doc);
    mgmt(&["hook", "--input", s(&input)], &[])
}

/// Event lines (stderr) that mean a node was reached.
fn connections(r: &support::Run) -> Vec<String> {
    r.stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| ["connecting", "connected", "command", "uploaded"].contains(&e["event"].as_str().unwrap_or("")))
        .map(|e| e.to_string())
        .collect()
}

/// Issue 20: tenant A's cluster (this lab's) is recorded; its instantiate response (the hook's
/// `vnf_instance`, which the VNFM keeps) holds A's credential reference. Tenant B's CNF
/// request, a hook document as its VNFM sends it, repeats A's helm_info with (i) the reference
/// before tokens and (ii) a guessed token: exit 2 naming the field, nothing reaches A's masters
/// (no connection event, no Helm environment or repository for B's CNF, A's repositories
/// unchanged). (iii) A's own reference works: A's CNF installs from the repository.
fn tenant_reaches_only_its_own_cluster(h: &mut HelmCnf) -> R {
    let c = &h.c;
    // A's instantiate_end through the VNFM protocol (a re-run: the nodes are done).
    let mut req = c.request();
    req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
        "Scripts/install_helm.sh".into();
    let r = run_hook(c, "hook-a.json", &hook_doc(c, "instantiate_end", &c.id, req));
    r.ok();
    let resp: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let entry = resp["vnf_instance"]["vimConnectionInfo"]
        .as_object()
        .and_then(|m| m.values().find(|e| e["extra"]["helm_info"].is_object()).cloned())
        .ok_or_else(|| format!("no helm_info in the response's vimConnectionInfo: {resp}"))?;
    let a_info = entry["extra"]["helm_info"].clone();
    let a_ref = a_info["masternode_credential_ref"].as_str().unwrap_or_default().to_string();
    let prefix = format!("mgmt-driver-state:{}:", c.id);
    check(a_ref.starts_with(&prefix) && a_ref.len() == prefix.len() + 64, || format!("A's reference: {a_info}"))?;
    check(!resp["result"].to_string().contains(&a_ref), || format!("the reference in the result: {}", resp["result"]))?;
    // What A's masters hold before B tries: the Helm environments and A's repositories.
    let before = |c: &Cluster| -> Vec<String> {
        [1, 2].map(|i| c.on(i, &format!("ls /var/lib/mgmt-driver/helm; {} repo list -o json", env_helm(&c.id)))).into()
    };
    let was = before(c);
    let cnf_request = |info: &Value, release: &str| {
        json!({"flavourId": "helmchart", "additionalParams": {"use_helm": "True", "namespace": "cnf",
            "using_helm_install_param": [{"exthelmchart": "true", "helmreleasename": release,
                "helmrepositoryname": "labrepo", "helmchartname": "nginxlab",
                "exthelmrepo_url": h.repo.url, "helmchartversion": "0.1.0"}]},
            "vimConnectionInfo": {"kubernetes_a": {"vimId": entry["vimId"], "vimType": "ETSINFV.HELM.V_3",
                "extra": {"helm_info": info}}}})
    };
    let field = "extra.helm_info.masternode_credential_ref";
    for (what, forged) in [
        ("(i) the reference before tokens", format!("mgmt-driver-state:{}", c.id)),
        ("(ii) a guessed token", format!("{prefix}{}", "0".repeat(64))),
    ] {
        let mut info = a_info.clone();
        info["masternode_credential_ref"] = json!(forged);
        let doc = hook_doc(c, "instantiate_end", "cnf-tenant-b", cnf_request(&info, "vdub"));
        let r = run_hook(c, "hook-b.json", &doc);
        check(r.code == 2 && r.all().contains(field), || {
            format!("{what}: expected exit 2 naming {field}:\n{}", r.all())
        })?;
        check(!r.all().contains(&a_ref), || format!("{what}: A's reference in the output"))?;
        let reached = connections(&r);
        check(reached.is_empty(), || format!("{what}: a refused request reached a node: {reached:?}"))?;
        check(!c.state.join("cnf-tenant-b.cnf.json").exists(), || format!("{what}: B's CNF was recorded"))?;
        let now = before(c);
        check(now == was, || format!("{what}: A's masters changed:\nbefore {was:?}\nafter {now:?}"))?;
        check(now.iter().all(|m| !m.contains("cnf-tenant-b")), || format!("{what}: {now:?}"))?;
    }
    // (iii) A's own reference, from its instantiate response: A's CNF installs.
    let doc = hook_doc(c, "instantiate_end", "cnf-tenant-a", cnf_request(&a_info, "vdua"));
    let r = run_hook(c, "hook-a-cnf.json", &doc);
    r.ok();
    check(!r.all().contains(&a_ref), || format!("A's reference in the output:\n{}", r.all()))?;
    let a_env = env_helm("cnf-tenant-a");
    let repos = c.on(1, &format!("{a_env} repo list -o json"));
    check(repos.contains("cnf-tenant-a@labrepo"), || format!("A's CNF repository: {repos}"))?;
    run_hook(c, "hook-a-term.json", &hook_doc(c, "terminate_end", "cnf-tenant-a", json!({}))).ok();
    Ok(())
}

/// Tacker's CNF bodies (the Helm guide's local and external `instance_helm.json`, unchanged)
/// plan: the chart and repository steps and the install of release vdu1, without secrets.
fn tacker_cnf_bodies_plan() -> R {
    let d = tempfile::tempdir().unwrap();
    let vci = d.path().join("vci.json");
    std::fs::write(
        &vci,
        json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "extra": {"helm_info":
        {"masternode_ip": ["192.0.2.35"], "masternode_username": "ubuntu", "masternode_password": "pw-tacker-body"}}}])
        .to_string(),
    )
    .unwrap();
    let pkg = d.path().join("pkg");
    std::fs::create_dir_all(pkg.join("Files/kubernetes")).unwrap();
    std::fs::write(pkg.join("Files/kubernetes/localhelm-0.1.0.tgz"), "a chart").unwrap();
    for (body, step) in [
        ("local", "localhelm-0.1.0.tgz"),
        ("external", " 1 tb@mychart http://helmrepo.example.com/sample-charts '' '' '' "),
    ] {
        let req = repo().join(format!("tests/data/tacker/v1/cnf-helm/{body}/instance_helm.json"));
        let r = mgmt(
            &[
                "cnf",
                "--dry-run",
                "--vnf-instance-id",
                "tb",
                "--state-dir",
                s(&d.path().join("st")),
                "--vim-connection-info",
                s(&vci),
                "--package-dir",
                s(&pkg),
                "instantiate",
                "--request",
                s(&req),
            ],
            &[],
        );
        r.ok();
        // One exec on the master: Helm, the chart or repository, and the release (`-o json`).
        check(r.all().contains(step) && r.all().contains("helm_prepare.sh "), || format!("{body}:\n{}", r.all()))?;
        check(r.all().contains("--set key1=value1 --set key2=value2") && r.all().contains("-o json -- vdu1 "), || {
            format!("{body}:\n{}", r.all())
        })?;
        check(!r.all().contains("pw-tacker-body"), || format!("{body}: the master password is in the plan"))?;
    }
    Ok(())
}

/// helm_info as Tacker stored it (a Python repr string) is understood.
fn tacker_repr_helm_info() -> R {
    let d = tempfile::tempdir().unwrap();
    let vci = d.path().join("vci.json");
    std::fs::write(&vci, json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "accessInfo": {"authUrl": "https://10.10.0.91:16443"},
        "extra": {"helmInfo": "{'masternode_ip': ['192.0.2.35', '192.0.2.63'], 'masternode_username': 'ubuntu', 'masternode_password': \"it's\"}"}}]).to_string()).unwrap();
    let r = mgmt(
        &[
            "cnf",
            "--dry-run",
            "-o",
            "json",
            "--vnf-instance-id",
            "v1",
            "--state-dir",
            s(&d.path().join("st")),
            "--vim-connection-info",
            s(&vci),
            "status",
            "--release",
            "vdu1",
        ],
        &[],
    );
    r.ok();
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    check(v["context"]["master"] == "192.0.2.35", || r.all())?;
    check(!r.all().contains("it's"), || "the password must not be printed".into())?;
    Ok(())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .without_root(&[
            ("tacker_repr_helm_info", tacker_repr_helm_info),
            ("tacker_cnf_bodies_plan", tacker_cnf_bodies_plan),
        ])
        .needing_root(&[
            ("helm3_lifecycle", || helm_lifecycle("h3", 32, 3)),
            ("helm4_lifecycle", || helm_lifecycle("h4", 33, 4)),
        ])
}
