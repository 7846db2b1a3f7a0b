//! Workloads, storage, labels and access against a REAL Kubernetes API (issue 21, item 5): the
//! lab kit's real-API mode (docs/labkit.md), 1 master + 1 worker + a storage server VM, built by
//! our own `instantiate-end`. Then `mgmt-driver workload ...` is answered by the real API server,
//! the real Deployment/ReplicaSet controllers and the real scheduler, with pods moved to Running
//! by KWOK (the kubelet stand-in); the PVs the storage step registers are bound by the real PV
//! controller; the worker's placement labels are real Node labels; and the cluster is reached
//! from the controller host (outside the lab) with the real kubectl and the real Helm 3 and 4
//! through the kubeconfig `--kubeconfig-out` wrote, the recorded bearer token, and a floating IP.
//!
//! `workload exec` is not tried: no container runs here (KWOK fakes the pods), so a real
//! `kubectl exec` has nothing to reach; the kit-only suite (tests/workload.rs) covers it.
//!
//! Needs root (namespaces, a loop device) and the control plane built. Lab `rw`, net 92 (its own: nets are global on the machine).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, s, Cluster, R};
use support::mgmt;
use support::phase::{phase, phases};
use support::repo;

use crate::real_cluster::control_plane;

/// The Cinder volume's id; its first 20 characters name the by-id link KVM would make.
const VOLUME_ID: &str = "1a2b3c4d-5e6f-4708-9a1b-2c3d4e5f6a7b";
const STORAGE_NODE: usize = 3;
/// The floating IP: a second address of the master's own eth0 (its network namespace only),
/// which the API server's certificate does not name.
fn fip(c: &Cluster) -> String {
    format!("198.18.{}.200", c.lab.net)
}

/// A spec as tests/workload.rs deploys it, without what needs a real container to matter.
const SPEC: &str = r#"
name: vnf-web
image: registry.example/web:1.0
replicas: 2
labels: {tier: front}
env: {MODE: "a'b; touch /tmp/pwned-wl"}
resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
ports: ["8080/tcp", "5000/udp:30080"]
"#;

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

/// What the phases share. `c` drops (the lab goes down) before `_vol`.
struct Rw {
    c: Cluster,
    _vol: Loop,
    bindir: PathBuf,
    spec: PathBuf,
    kubeconfig: PathBuf,
    started: Instant,
}

fn pv_yaml(name: &str, path: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  capacity:\n    storage: 1Gi\n  \
         persistentVolumeReclaimPolicy: Retain\n  accessModes:\n    - ReadWriteOnce\n  nfs:\n    server: 0.0.0.0\n    path: \"{path}\"\n"
    )
}

/// The real kubectl on the master with the admin kubeconfig.
fn kubectl(c: &Cluster, args: &str) -> String {
    c.on(1, &format!("KUBECONFIG=/etc/kubernetes/admin.conf kubectl {args} 2>&1"))
}

/// Poll `f` every 500 ms until it is true or `within` passed; the last value either way.
fn eventually(within: Duration, mut f: impl FnMut() -> (bool, String)) -> (bool, String) {
    let end = Instant::now() + within;
    loop {
        let (ok, v) = f();
        if ok || Instant::now() >= end {
            return (ok, v);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn on_the_real_api() -> R {
    let started = Instant::now();
    let mut t = phase("bring up a real-API kit lab: 1 master + 1 worker + a storage VM", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let b = bindir.to_str().unwrap().to_string();
        let c = Cluster::with_lab_args("rw", 92, 3, &[1], &[2], true, &["--control-plane", &b]);
        let inv = std::fs::read_to_string(&c.inv).unwrap().replace(
            "cps:\n",
            &format!("  storage_server_CP:\n    - {{name: {}, ssh_ip: {}}}\ncps:\n", c.lab.node(3), c.lab.ip(3)),
        );
        let inv = format!(
            "{inv}  fip_CP: {}\nplacement:\n  {}: {{host_compute: cmp-1, zone: az-1}}\n",
            fip(&c),
            c.lab.node(2)
        );
        std::fs::write(&c.inv, inv).unwrap();
        let vol = Loop::new(&c.lab.file("volume.img"));
        let (maj, min) = vol.numbers();
        let link = format!("/dev/disk/by-id/virtio-{}", &VOLUME_ID[..20]);
        c.on(
            STORAGE_NODE,
            &format!("mknod -m 660 /dev/vdb b {maj} {min} && mkdir -p /dev/disk/by-id && ln -s ../../vdb {link}"),
        );
        let kdir = c.pkg.join("Files/kubernetes");
        std::fs::create_dir_all(&kdir).unwrap();
        for i in 1..=2 {
            std::fs::write(
                kdir.join(format!("nfs-pv{i}.yaml")),
                pv_yaml(&format!("nfs-pv{i}"), &format!("/volume/nfs/pv{i}")),
            )
            .unwrap();
        }
        // The air-gapped Helm install puts the real Helm 3 on the master (the kit's helm wrapper
        // hands every verb to it in this mode); the workload commands need the cluster recorded
        // with Helm.
        let off = c.pkg.join("Files/offline");
        std::fs::remove_dir_all(&off).unwrap();
        let tgz = helms()[0].with_file_name("helm-v3.17.3-linux-amd64.tar.gz");
        let o = Command::new("bash")
            .arg(repo().join("tests/labkit/make-offline-dir.sh"))
            .arg(&off)
            .arg(&tgz)
            .output()
            .unwrap();
        assert!(o.status.success(), "make-offline-dir: {}", String::from_utf8_lossy(&o.stderr));
        let spec = c.dir.path().join("web.yaml");
        std::fs::write(&spec, SPEC).unwrap();
        let kubeconfig = c.dir.path().join("out/rw.kubeconfig");
        std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
        Ok(Rw { c, _vol: vol, bindir, spec, kubeconfig, started })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate-end: storage server, PVs, placement labels, a floating IP, --kubeconfig-out", instantiate),
            ("the PVs are real objects, Available; a real PVC binds to one", storage),
            ("the worker's placement labels are real Node labels; the master has none", labels),
            ("workload deploy: real objects, pods scheduled on the worker and Running", deploy),
            ("workload scale 3: three Running pods", scale),
            ("workload set-image and rollback: real revisions", set_image_and_rollback),
            ("workload wait: a replica that cannot be scheduled, then can", wait),
            ("workload exec: refused by the pods' (fake) kubelet, every pod named", exec),
            ("workload undeploy: the objects and pods are gone", undeploy),
            ("a StatefulSet: ordinal pods, scale, set-image, undeploy", statefulset),
            ("from the controller host: real kubectl and helm with --kubeconfig-out", access_kubeconfig),
            ("from the controller host: the bearer token alone, and the floating IP", access_token_and_fip),
            ("heal of the storage VM: refused while the real claim is bound, then the PVs again", storage_heal),
            ("terminate-end --reset-nodes with a bound PV: the PVs go, the run does not hang", terminate),
        ],
    )?;
    eprintln!("real_workload: the whole trial took {:.0?}", t.started.elapsed());
    Ok(())
}

fn request(c: &Cluster) -> Value {
    let mut req = c.request();
    req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
        "Scripts/install_helm.sh".into();
    let net = format!("198.18.{}.0/24", c.lab.net);
    let p = &mut req["additionalParams"]["k8s_cluster_installation_param"];
    p["master_node"]["cluster_fip_name"] = "fip_CP".into();
    p["storage_server"] = json!({
        "ssh_cp_name": "storage_server_CP", "nic_cp_name": "storage_server_CP",
        "username": "ubuntu", "password": "unused-password",
        "cinder_volume_setup_params": [{"volume_resource_id": VOLUME_ID, "mount_to": "/volume"}],
        "nfs_server_setup_params": [{"export_dir": "/volume/nfs/pv1", "export_to": net},
                                    {"export_dir": "/volume/nfs/pv2", "export_to": net}]});
    p["pv_registration_params"] = json!([
        {"pv_manifest_file_path": "Files/kubernetes/nfs-pv1.yaml", "nfs_server_cp": "storage_server_CP"},
        {"pv_manifest_file_path": "Files/kubernetes/nfs-pv2.yaml", "nfs_server_cp": "storage_server_CP"}]);
    req
}

fn instantiate(t: &mut Rw) -> R {
    let c = &t.c;
    // The floating IP answers for the master (its own namespace), as a cloud's NAT would.
    c.on(1, &format!("ip addr add {}/32 dev eth0", fip(c)));
    let p = c.write("instantiate.json", &request(c));
    let r = c.hook("instantiate-end", Some(&p), &["--kubeconfig-out", s(&t.kubeconfig)]);
    r.ok();
    eprintln!("real_workload: instantiate-end took {:.1?}", r.elapsed);
    let d = doc(&r);
    let conn = k8s_conn(&d);
    check(conn["accessInfo"]["authUrl"].as_str().is_some_and(|u| u.ends_with(":6443")), || format!("{conn}"))
}

fn storage(t: &mut Rw) -> R {
    let c = &t.c;
    let pvs = kubectl(
        c,
        "get pv -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nfs.server} {.spec.nfs.path} {.status.phase}{\"\\n\"}{end}'",
    );
    let want = format!(
        "nfs-pv1 {ip} /volume/nfs/pv1 Available\nnfs-pv2 {ip} /volume/nfs/pv2 Available\n",
        ip = c.lab.ip(STORAGE_NODE)
    );
    check(pvs == want, || format!("PVs:\n{pvs}\nwant:\n{want}"))?;
    // A claim with no class binds to one of them: the real PV controller's work.
    let pvc = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"default"},"spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"","resources":{"requests":{"storage":"1Gi"}}}}"#;
    let out = c.on(1, &format!("echo '{pvc}' | KUBECONFIG=/etc/kubernetes/admin.conf kubectl apply -f - 2>&1"));
    check(out.contains("persistentvolumeclaim/data created"), || out.clone())?;
    let (ok, got) = eventually(Duration::from_secs(30), || {
        let o = kubectl(c, "get pvc data -o jsonpath='{.status.phase} {.spec.volumeName}'");
        (o.starts_with("Bound nfs-pv"), o)
    });
    check(ok, || format!("the claim did not bind: {got}"))?;
    let vol = got.split_whitespace().nth(1).unwrap_or("").to_string();
    let pv = kubectl(c, &format!("get pv {vol} -o jsonpath='{{.status.phase}} {{.spec.claimRef.name}}'"));
    check(pv == "Bound data", || format!("{vol}: {pv}"))?;
    // The other PV stays Available.
    let other = if vol == "nfs-pv1" { "nfs-pv2" } else { "nfs-pv1" };
    let o = kubectl(c, &format!("get pv {other} -o jsonpath='{{.status.phase}}'"));
    check(o == "Available", || format!("{other}: {o}"))
}

fn labels(t: &mut Rw) -> R {
    let c = &t.c;
    let l = |n: &str| -> Value {
        serde_json::from_str::<Value>(&kubectl(c, &format!("get node {n} -o json")))
            .map(|v| v["metadata"]["labels"].clone())
            .unwrap_or(Value::Null)
    };
    let w = l("worker12");
    check(w["CIS-node"] == "cmp-1" && w["kubernetes.io/zone"] == "az-1", || format!("worker12 labels: {w}"))?;
    let m = l("master11");
    check(m.get("CIS-node").is_none() && m.get("kubernetes.io/zone").is_none(), || format!("master11: {m}"))?;
    // NodeRestriction: the admin set `kubernetes.io/zone` above; the worker's own credentials
    // may not (a kubernetes.io/ label outside the kubelet's allowed set), may set a label of
    // another prefix on itself, and may not touch another node.
    let as_node = |cmd: &str| c.on(2, &format!("KUBECONFIG=/etc/kubernetes/kubelet.conf kubectl {cmd} 2>&1"));
    let o = as_node("label node worker12 kubernetes.io/zone=az-9 --overwrite");
    check(o.contains("forbidden") && o.contains("kubernetes.io/zone"), || format!("the node set its zone: {o}"))?;
    let o = as_node("label node worker12 example.com/own=x");
    check(o.contains("labeled"), || format!("the node could not set its own non-reserved label: {o}"))?;
    let o = as_node("label node master11 example.com/own=x");
    check(o.contains("forbidden"), || format!("the worker labelled the master: {o}"))?;
    check(l("worker12")["kubernetes.io/zone"] == "az-1", || "the zone changed".into())
}

/// `workload <args> -o json` against the lab cluster recorded under the cluster's id.
fn wl(c: &Cluster, args: &[&str]) -> support::Run {
    let mut a = vec!["workload", args[0]];
    a.extend([
        "-o",
        "json",
        "--vnf-instance-id",
        &c.id,
        "-i",
        s(&c.inv),
        "--state-dir",
        s(&c.state),
        "--retry-for",
        "10",
    ]);
    a.extend(&args[1..]);
    mgmt(&a, &[])
}

fn out(r: &support::Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}\n--- stderr\n{}", r.stdout, r.stderr))
}

/// The workload's pods as the real API lists them: `name node phase image ready`, sorted.
fn pods(c: &Cluster) -> Vec<String> {
    let o = kubectl(
        c,
        "get pods -l app.kubernetes.io/name=vnf-web -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.spec.containers[0].image} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
    );
    let mut v: Vec<String> = o.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Wait until exactly `n` pods of the workload run `image` on worker12, Ready.
fn pods_settle(c: &Cluster, n: usize, image: &str) -> R {
    let (ok, got) = eventually(Duration::from_secs(60), || {
        let p = pods(c);
        let good = p.len() == n
            && p.iter().all(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                f.len() == 5 && f[1] == "worker12" && f[2] == "Running" && f[3] == image && f[4] == "True"
            });
        (good, p.join("\n"))
    });
    check(ok, || format!("want {n} Running/Ready pods of {image} on worker12; the API lists:\n{got}"))
}

fn deploy(t: &mut Rw) -> R {
    let c = &t.c;
    let r = wl(c, &["deploy", s(&t.spec)]);
    r.ok();
    let d = out(&r);
    check(
        d["result"]["objects"] == json!(["deployment.apps/vnf-web", "service/vnf-web", "service/vnf-web-nodeport"]),
        || format!("objects: {}", d["result"]),
    )?;
    check(!r.all().contains("a'b; touch"), || "an env value was shown in the output".into())?;
    // Right after the apply the real controllers have not made the pods yet (the kit's rollout
    // was instant): what `available` says then, for the record.
    let a = out(wl(c, &["available", "vnf-web"]).ok());
    eprintln!("real_workload: available right after deploy: {}", a["result"]);
    let np = kubectl(c, "get service vnf-web-nodeport -o jsonpath='{.spec.type} {.spec.ports[0].nodePort}'");
    check(np == "NodePort 30080", || format!("nodeport service: {np}"))?;
    let cip = kubectl(c, "get service vnf-web -o jsonpath='{.spec.type} {.spec.clusterIP}'");
    check(cip.starts_with("ClusterIP 10."), || format!("cluster IP service: {cip}"))?;
    // The pods are the real ReplicaSet's, placed by the real scheduler (the master is tainted).
    pods_settle(c, 2, "registry.example/web:1.0")?;
    for p in pods(c) {
        let name = p.split(' ').next().unwrap_or("");
        let parts: Vec<&str> = name.split('-').collect();
        check(parts.len() == 4 && parts[3].len() == 5, || format!("pod name {name}"))?;
    }
    let a = out(wl(c, &["wait", "vnf-web", "--interval", "1s", "--timeout", "60s"]).ok());
    check(a["result"]["available"] == true && a["result"]["status"]["desired"] == 2, || format!("{}", a["result"]))?;
    let a = out(wl(c, &["available", "vnf-web"]).ok());
    check(a["result"]["available"] == true && a["result"]["status"]["available"] == 2, || format!("{}", a["result"]))
}

fn scale(t: &mut Rw) -> R {
    let c = &t.c;
    let d = out(wl(c, &["scale", "vnf-web", "3"]).ok());
    check(d["result"] == json!({"from": 2, "to": 3}), || format!("{}", d["result"]))?;
    pods_settle(c, 3, "registry.example/web:1.0")?;
    let a = out(wl(c, &["wait", "vnf-web", "--interval", "1s", "--timeout", "60s"]).ok());
    check(a["result"]["status"]["available"] == 3 && a["result"]["available"] == true, || format!("{}", a["result"]))
}

fn set_image_and_rollback(t: &mut Rw) -> R {
    let c = &t.c;
    let d = out(wl(c, &["set-image", "vnf-web", "vnf-web=registry.example/web:2.0"]).ok());
    check(d["result"]["revisionBefore"] == 1 && d["result"]["revision"] == 2, || format!("{}", d["result"]))?;
    check(d["result"]["images"] == json!({"vnf-web": "registry.example/web:2.0"}), || format!("{}", d["result"]))?;
    pods_settle(c, 3, "registry.example/web:2.0")?;
    wl(c, &["set-image", "vnf-web", "sidecar=registry.example/x:1"]).fails(2, "no container 'sidecar'");
    let d = out(wl(c, &["rollback", "vnf-web"]).ok());
    check(d["result"]["revision"] == 3 && d["result"]["images"]["vnf-web"] == "registry.example/web:1.0", || {
        format!("{}", d["result"])
    })?;
    pods_settle(c, 3, "registry.example/web:1.0")?;
    let d = out(wl(c, &["rollback", "vnf-web", "--to-revision", "2"]).ok());
    check(d["result"]["images"]["vnf-web"] == "registry.example/web:2.0", || format!("{}", d["result"]))?;
    pods_settle(c, 3, "registry.example/web:2.0")?;
    wl(c, &["rollback", "vnf-web", "--to-revision", "99"]).fails(1, "unable to find specified revision 99");
    let h = kubectl(c, "rollout history deployment/vnf-web");
    check(h.contains("REVISION") && h.lines().count() >= 4, || format!("rollout history:\n{h}"))
}

fn wait(t: &mut Rw) -> R {
    let c = &t.c;
    kubectl(c, "cordon worker12");
    out(wl(c, &["scale", "vnf-web", "4"]).ok());
    let r = wl(c, &["wait", "vnf-web", "--interval", "1", "--timeout", "4"]);
    let pending =
        kubectl(c, "get pods -l app.kubernetes.io/name=vnf-web --field-selector=status.phase=Pending -o name");
    kubectl(c, "uncordon worker12");
    r.fails(1, "not available after");
    check(r.stderr.contains("3/4 available"), || format!("the polls' status events: {}", r.stderr))?;
    check(pending.lines().count() == 1, || format!("the unschedulable replica: {pending}"))?;
    let d = out(wl(c, &["wait", "vnf-web", "--interval", "1s", "--timeout", "60s"]).ok());
    check(d["result"]["status"]["available"] == 4, || format!("{}", d["result"]))
}

/// No container runs (KWOK fakes the pods), so the real `kubectl exec` cannot reach one: the
/// operation fails and names every pod, as it does for any failing pod.
fn exec(t: &mut Rw) -> R {
    let c = &t.c;
    let r = wl(c, &["exec", "vnf-web", "--", "true"]);
    let d = out(&r);
    let rows = d["result"]["pods"].as_array().cloned().unwrap_or_default();
    check(r.code == 1 && d["result"]["failedCount"] == 4 && rows.len() == 4, || {
        format!("exec: {}\n{}", r.stdout, r.stderr)
    })?;
    eprintln!("real_workload: workload exec under KWOK: {}", rows[0]["stderrTail"]);
    Ok(())
}

fn undeploy(t: &mut Rw) -> R {
    let c = &t.c;
    let d = out(wl(c, &["undeploy", "vnf-web"]).ok());
    check(d["result"]["deleted"].as_array().is_some_and(|a| a.len() == 3), || format!("{}", d["result"]))?;
    let (ok, got) = eventually(Duration::from_secs(60), || {
        let o = kubectl(c, "get deploy,rs,pods,services -l app.kubernetes.io/name=vnf-web -o name");
        (o.trim().is_empty() || o.contains("No resources found"), o)
    });
    check(ok, || format!("left after undeploy:\n{got}"))
}

fn statefulset(t: &mut Rw) -> R {
    let c = &t.c;
    let spec = c.dir.path().join("db.yaml");
    std::fs::write(&spec, "name: db\nkind: StatefulSet\nimage: registry.example/db:1\nreplicas: 2\nports: ['5432']\n")
        .unwrap();
    let d = out(wl(c, &["deploy", s(&spec)]).ok());
    check(d["context"]["kind"] == "StatefulSet", || format!("{}", d["context"]))?;
    let sts = |want: &str| {
        eventually(Duration::from_secs(60), || {
            let o = kubectl(
                c,
                "get pods -l app.kubernetes.io/name=db -o jsonpath='{range .items[*]}{.metadata.name}={.spec.containers[0].image}={.status.phase} {end}'",
            );
            (o.trim() == want, o)
        })
    };
    // The real StatefulSet controller makes the ordinals one after the other, each once the
    // previous one is Ready.
    let (ok, o) = sts("db-0=registry.example/db:1=Running db-1=registry.example/db:1=Running");
    check(ok, || format!("StatefulSet pods: {o}"))?;
    let a = out(wl(c, &["wait", "db", "--kind", "statefulset", "--interval", "1", "--timeout", "60"]).ok());
    check(a["result"]["available"] == true, || format!("{}", a["result"]))?;
    out(wl(c, &["scale", "db", "1", "--kind", "statefulset"]).ok());
    let d = out(wl(c, &["set-image", "db", "db=registry.example/db:2", "--kind", "statefulset"]).ok());
    check(d["result"]["images"] == json!({"db": "registry.example/db:2"}), || format!("{}", d["result"]))?;
    let (ok, o) = sts("db-0=registry.example/db:2=Running");
    check(ok, || format!("StatefulSet pods after scale 1 and set-image: {o}"))?;
    out(wl(c, &["undeploy", "db", "--kind", "statefulset"]).ok());
    let (ok, o) = sts("");
    check(ok, || format!("db pods left: {o}"))?;
    let svc = kubectl(c, "get service db --ignore-not-found -o name");
    check(svc.is_empty(), || format!("db service left: {svc}"))
}

fn storage_heal(t: &mut Rw) -> R {
    let c = &t.c;
    let heal = c.write("heal.json", &json!({"vnfcInstanceId": [c.lab.node(STORAGE_NODE)]}));
    let bound = kubectl(c, "get pvc data -o jsonpath='{.spec.volumeName}'");
    let r = c.hook("heal-start", Some(&heal), &[]);
    r.fails(1, &format!("{bound} Bound"));
    // The claim goes: with Retain, the PV is Released (not Available), and heal-start deletes it.
    kubectl(c, "delete pvc data");
    let (ok, o) = eventually(Duration::from_secs(30), || {
        let o = kubectl(c, &format!("get pv {bound} -o jsonpath='{{.status.phase}}'"));
        (o == "Released", o)
    });
    check(ok, || format!("{bound} after its claim was deleted: {o}"))?;
    c.hook("heal-start", Some(&heal), &[]).ok();
    let o = kubectl(c, "get pv -o name");
    check(o.contains("No resources found") || o.is_empty(), || format!("heal-start left PVs: {o}"))?;
    c.hook("heal-end", Some(&heal), &[]).ok();
    let o = kubectl(c, "get pv -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}'");
    check(o.trim() == "nfs-pv1=Available nfs-pv2=Available", || format!("PVs after heal-end: {o}"))
}

/// A claim binds again; terminate-end --reset-nodes deletes the PVs first. The real API keeps
/// a bound PV (the `kubernetes.io/pv-protection` finalizer) until its claim is gone.
fn terminate(t: &mut Rw) -> R {
    let c = &t.c;
    let pvc = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data2","namespace":"default"},"spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"","resources":{"requests":{"storage":"1Gi"}}}}"#;
    c.on(1, &format!("echo '{pvc}' | KUBECONFIG=/etc/kubernetes/admin.conf kubectl apply -f -"));
    let (ok, o) = eventually(Duration::from_secs(30), || {
        let o = kubectl(c, "get pvc data2 -o jsonpath='{.status.phase}'");
        (o == "Bound", o)
    });
    check(ok, || format!("data2: {o}"))?;
    let r = c.hook("terminate-end", None, &["--reset-nodes"]);
    eprintln!("real_workload: terminate-end --reset-nodes took {:.1?}", r.elapsed);
    r.ok();
    let o = support::kit::outcome(&doc(&r), &c.lab.node(1));
    check(o.contains("deleted PersistentVolumes nfs-pv1, nfs-pv2"), || o.clone())?;
    check(r.elapsed < Duration::from_secs(60), || format!("terminate-end took {:.0?}", r.elapsed))
}

/// The real Helm 3 and 4 binaries (tests/labkit/fetch-helm.sh, once per machine) in the target
/// directory the tests were built in.
pub fn helms() -> Vec<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"));
    let d = target.join("helm");
    let bins = vec![d.join("helm3/helm"), d.join("helm4/helm")];
    if !bins.iter().all(|b| b.is_file()) {
        let o = Command::new("bash").arg(repo().join("tests/labkit/fetch-helm.sh")).arg(&d).output().unwrap();
        assert!(o.status.success(), "fetch-helm.sh: {}", String::from_utf8_lossy(&o.stderr));
    }
    bins
}

/// A program on the controller host (this machine), its output and whether it succeeded.
pub fn host(prog: &Path, args: &[&str], home: &Path) -> (bool, String) {
    let o = Command::new(prog).args(args).env("HOME", home).env_remove("KUBECONFIG").output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn access_kubeconfig(t: &mut Rw) -> R {
    let c = &t.c;
    let home = c.dir.path();
    let text = std::fs::read_to_string(&t.kubeconfig).unwrap();
    let master = c.lab.ip(1);
    check(
        text.contains(&format!("server: https://{}:6443", fip(c)))
            && text.contains(&format!("tls-server-name: {master}")),
        || format!("the kubeconfig must name the floating IP and check TLS against {master}:\n{text}"),
    )?;
    let kc = s(&t.kubeconfig);
    let kubectl = t.bindir.join("kubectl");
    let (ok, o) = host(&kubectl, &["--kubeconfig", kc, "get", "nodes", "-o", "name"], home);
    check(ok && o == "node/master11\nnode/worker12\n", || format!("host kubectl get nodes: {o}"))?;
    // A release installed from the host with the real Helm 3, listed by Helm 3 and Helm 4; its
    // Deployment's pod is the real controllers' and KWOK's.
    let helms = helms();
    let chart = home.join("chart");
    let (ok, o) = host(&helms[0], &["create", s(&chart)], home);
    check(ok, || format!("helm create: {o}"))?;
    let (ok, o) = host(
        &helms[0],
        &["install", "demo", s(&chart), "-n", "default", "--kubeconfig", kc, "--wait", "--timeout", "60s"],
        home,
    );
    check(ok && o.contains("STATUS: deployed"), || format!("host helm install: {o}"))?;
    for h in &helms {
        let (ok, o) = host(h, &["list", "-n", "default", "--kubeconfig", kc, "-o", "json"], home);
        let v: Value = serde_json::from_str(o.trim()).unwrap_or(Value::Null);
        check(ok && v[0]["name"] == "demo" && v[0]["status"] == "deployed", || format!("{}: {o}", h.display()))?;
    }
    // The master's helm (installed by our hook; real, behind the kit's wrapper) sees it too.
    let o = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n default -q 2>&1");
    check(o == "demo\n", || format!("helm list on the master: {o}"))?;
    let (ok, o) = host(&helms[1], &["uninstall", "demo", "-n", "default", "--kubeconfig", kc, "--wait"], home);
    check(ok, || format!("helm 4 uninstall: {o}"))
}

fn access_token_and_fip(t: &mut Rw) -> R {
    let c = &t.c;
    let home = c.dir.path();
    let kubectl = t.bindir.join("kubectl");
    let text = std::fs::read_to_string(&t.kubeconfig).unwrap();
    // The token and CA the kubeconfig carries are the VIM record's (a re-run prints the same).
    let field = |key: &str| {
        text.lines().find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string())).unwrap_or_default()
    };
    let token = field("token:");
    let ca_b64 = field("certificate-authority-data:");
    check(!token.is_empty() && !ca_b64.is_empty(), || format!("kubeconfig without token or CA:\n{text}"))?;
    let ca = home.join("ca.crt");
    let o = Command::new("base64")
        .arg("-d")
        .stdin(std::fs::File::open(write(home, "ca.b64", &ca_b64)).unwrap())
        .output()
        .unwrap();
    std::fs::write(&ca, o.stdout).unwrap();
    let master = c.lab.ip(1);
    let base = ["--kubeconfig", "/dev/null", "--certificate-authority", s(&ca), "--token", &token];
    // The cluster address, the token alone.
    let server = format!("https://{master}:6443");
    let mut a = base.to_vec();
    a.extend(["--server", &server, "get", "nodes", "-o", "name"]);
    let (ok, o) = host(&kubectl, &a, home);
    check(ok && o.lines().count() == 2, || format!("kubectl --token via {server}: {o}"))?;
    // The floating IP: only with tls-server-name, since the certificate names the cluster IP.
    let fserver = format!("https://{}:6443", fip(c));
    let mut a = base.to_vec();
    a.extend(["--server", &fserver, "get", "nodes", "-o", "name"]);
    let (ok, o) = host(&kubectl, &a, home);
    check(!ok && o.contains("x509"), || format!("the floating IP without tls-server-name: {o}"))?;
    let mut a = base.to_vec();
    a.extend(["--server", &fserver, "--tls-server-name", &master, "get", "nodes", "-o", "name"]);
    let (ok, o) = host(&kubectl, &a, home);
    check(ok && o.lines().count() == 2, || format!("kubectl via the floating IP with --tls-server-name: {o}"))?;
    // A token the cluster did not issue is refused.
    let mut a =
        vec!["--kubeconfig", "/dev/null", "--certificate-authority", s(&ca), "--token", "abcdef.0123456789abcdef"];
    a.extend(["--server", &server, "get", "nodes"]);
    let (ok, o) = host(&kubectl, &a, home);
    check(!ok && (o.contains("Unauthorized") || o.contains("must be logged in")), || format!("a foreign token: {o}"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("workloads_storage_labels_and_access_on_the_real_api", on_the_real_api)])
}
