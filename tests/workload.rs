//! Kubernetes workload operations (ONAP DCAE) end to end: a kit lab cluster (1 master + 1
//! worker) built by our own `instantiate-end`, then `mgmt-driver workload ...` with the lab kit's
//! `kubectl` stand-in on the master (tests/labkit/kubectl: Deployments applied as JSON get pods,
//! revisions, scale, set image, rollout undo, exec in a sandbox; docs/labkit.md). Every test
//! drives the real binary over real SSH.
//!
//! The generated manifests are also checked against the Kubernetes API's own schemas with
//! `kubernetes-validate` (strict), and a wrong one must fail that check (no root needed).
//! Lab tests need root; outside CI a non-root run skips them loudly (tests/support/harness.rs).

use crate::support;

use std::path::PathBuf;

use mgmt_driver::workload::{manifest, spec};
use serde_json::{json, Value};
use support::harness::Suite;
use support::k8s_validate::{validate, validator, VERSIONS};
use support::kit::{check, s, Cluster, R};
use support::mgmt;
use support::phase::{phase, phases};

/// Two ports (one a NodePort, DCAE's `5000/udp:30080`), env with shell metacharacters, both
/// probes, a configMap and an emptyDir volume.
const SPEC: &str = r#"
name: vnf-web
image: registry.example/web:1.0
replicas: 2
labels: {tier: front}
env: {MODE: "a'b; touch /tmp/pwned-wl", RETRIES: 3}
resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
readiness: {http: "/healthz:8080", period: 10s, initial_delay: 5}
liveness: {tcp: 8080, period: 1m}
volumes:
  - {name: cfg, config_map: web-config, mount: /etc/web, read_only: true}
  - {name: scratch, empty_dir: {}, mount: /scratch}
ports: ["8080/tcp", "5000/udp:30080"]
"#;

struct Wl {
    c: Cluster,
    spec: PathBuf,
    /// The pods of the workload after `scale 3` (names), for the exec checks.
    pods: Vec<String>,
}

/// `workload <args> -o json` against the lab cluster recorded under the cluster's id.
fn wl(c: &Cluster, args: &[&str]) -> support::Run {
    // The shared flags go before the op's own words: `exec NAME -- CMD...` ends the line.
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

/// The kit API server's objects and the workload's pods (name → pod record).
fn kit(c: &Cluster) -> (Value, Vec<(String, Value)>) {
    let k = c.kit();
    let cl = k["cluster"].clone();
    let pods = cl["pods"]
        .as_object()
        .map(|m| {
            m.values()
                .filter(|p| p["workload"] == "Deployment/default/vnf-web")
                .map(|p| (p["name"].as_str().unwrap().to_string(), p.clone()))
                .collect()
        })
        .unwrap_or_default();
    (cl["objects"].clone(), pods)
}

fn lifecycle() -> R {
    let mut t = phase("bring up 1 master + 1 worker with our instantiate-end", || {
        let c = Cluster::new("w1", 125, 2, &[1], &[2], true);
        let mut req = c.request();
        req["additionalParams"]["k8s_cluster_installation_param"]["helm_installation_script_path"] =
            "Scripts/install_helm.sh".into();
        c.instantiate(&req).ok();
        let spec = c.dir.path().join("web.yaml");
        std::fs::write(&spec, SPEC).unwrap();
        Ok(Wl { c, spec, pods: vec![] })
    })?;
    phases(
        &mut t,
        &[
            ("deploy: the objects exist as generated, available", deploy),
            ("scale 3: three pods", scale),
            ("set-image: a new revision; rollback: the previous image", set_image_and_rollback),
            ("exec in every pod: per-pod results, a failing pod named", exec),
            ("wait with DCAE intervals; an invalid spec is exit 2", wait),
            ("undeploy: everything gone", undeploy),
            ("a StatefulSet: ordinal pods, scale, set-image, undeploy", statefulset),
            ("an inventory's master group, the first master unreachable: the next one", inventory_failover),
        ],
    )
}

fn deploy(t: &mut Wl) -> R {
    let c = &t.c;
    let r = wl(c, &["deploy", s(&t.spec)]);
    r.ok();
    let d = out(&r);
    check(d["context"]["master"] == c.lab.ip(1), || format!("context: {}", d["context"]))?;
    check(
        d["result"]["objects"] == json!(["deployment.apps/vnf-web", "service/vnf-web", "service/vnf-web-nodeport"]),
        || format!("objects: {}", d["result"]),
    )?;
    check(!r.all().contains("a'b; touch"), || "an env value was shown in the output".into())?;
    check(c.on(1, "ls /tmp/pwned-wl 2>&1; ls ~/.mgmt-driver/workloads/").trim().contains("No such file"), || {
        "the env value ran, or the manifest file was left behind".into()
    })?;
    // What the API server holds is what the pure function generated.
    let w = spec::parse(SPEC, "web.yaml", None, None).unwrap();
    let (objs, pods) = kit(c);
    let want = manifest::objects(&w);
    let have_d = &objs["Deployment/default/vnf-web"];
    check(have_d["spec"] == want[0]["spec"] && have_d["metadata"]["labels"] == want[0]["metadata"]["labels"], || {
        format!("deployment {have_d}\nwant {}", want[0])
    })?;
    let np = &objs["Service/default/vnf-web-nodeport"];
    check(np["spec"]["type"] == "NodePort" && np["spec"]["ports"][0]["nodePort"] == 30080, || format!("{np}"))?;
    check(objs["Service/default/vnf-web"]["spec"]["type"] == "ClusterIP", || "ClusterIP service".into())?;
    check(pods.len() == 2, || format!("pods: {pods:?}"))?;
    let a = wl(c, &["available", "vnf-web"]);
    check(!a.all().contains("touch /tmp/pwned-wl"), || {
        format!("the read-back JSON (env values) was streamed:\n{}", a.stderr)
    })?;
    for (name, p) in &pods {
        let parts: Vec<&str> = name.split('-').collect();
        check(parts.len() == 4 && parts[2].len() == 10 && parts[3].len() == 5, || format!("pod name {name}"))?;
        check(p["node"] == "worker12", || format!("{name} is on {} (the master is tainted)", p["node"]))?;
    }
    let a = out(wl(c, &["available", "vnf-web"]).ok());
    check(a["result"]["available"] == true && a["result"]["status"]["desired"] == 2, || format!("{}", a["result"]))
}

fn scale(t: &mut Wl) -> R {
    let c = &t.c;
    let d = out(wl(c, &["scale", "vnf-web", "3"]).ok());
    check(d["result"] == json!({"from": 2, "to": 3}), || format!("{}", d["result"]))?;
    let (_, pods) = kit(c);
    check(pods.len() == 3, || format!("pods after scale 3: {pods:?}"))?;
    t.pods = pods.into_iter().map(|(n, _)| n).collect();
    t.pods.sort();
    let a = out(wl(c, &["available", "vnf-web"]).ok());
    check(a["result"]["status"]["available"] == 3 && a["result"]["available"] == true, || format!("{}", a["result"]))
}

fn set_image_and_rollback(t: &mut Wl) -> R {
    let c = &t.c;
    let d = out(wl(c, &["set-image", "vnf-web", "vnf-web=registry.example/web:2.0"]).ok());
    check(d["result"]["revisionBefore"] == 1 && d["result"]["revision"] == 2, || format!("{}", d["result"]))?;
    check(d["result"]["images"] == json!({"vnf-web": "registry.example/web:2.0"}), || format!("{}", d["result"]))?;
    let (_, pods) = kit(c);
    check(pods.len() == 3 && pods.iter().all(|(_, p)| p["image"] == "registry.example/web:2.0"), || {
        format!("{pods:?}")
    })?;
    // A container the workload does not have: refused naming it, nothing changed.
    wl(c, &["set-image", "vnf-web", "sidecar=registry.example/x:1"]).fails(2, "no container 'sidecar'");
    let d = out(wl(c, &["rollback", "vnf-web"]).ok());
    check(d["result"]["replicas"] == 3 && d["result"]["readyReplicas"] == 3, || format!("{}", d["result"]))?;
    check(d["result"]["revision"] == 3 && d["result"]["images"]["vnf-web"] == "registry.example/web:1.0", || {
        format!("{}", d["result"])
    })?;
    let (_, pods) = kit(c);
    check(pods.iter().all(|(_, p)| p["image"] == "registry.example/web:1.0"), || format!("{pods:?}"))?;
    // Back to revision 2 by number, then an unknown revision is the stand-in's (kubectl's) error.
    let d = out(wl(c, &["rollback", "vnf-web", "--to-revision", "2"]).ok());
    check(d["result"]["images"]["vnf-web"] == "registry.example/web:2.0", || format!("{}", d["result"]))?;
    wl(c, &["rollback", "vnf-web", "--to-revision", "99"]).fails(1, "unable to find specified revision 99");
    let (_, pods) = kit(c);
    t.pods = pods.into_iter().map(|(n, _)| n).collect();
    t.pods.sort();
    Ok(())
}

fn exec(t: &mut Wl) -> R {
    let c = &t.c;
    let d = out(wl(c, &["exec", "vnf-web", "--", "sh", "-c", "echo $HOSTNAME; id -un; echo \"$MODE\""]).ok());
    let rows = d["result"]["pods"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["pod"].as_str()).collect();
    check(names == t.pods.iter().map(String::as_str).collect::<Vec<_>>(), || {
        format!("pods {names:?}, want {:?}", t.pods)
    })?;
    for r in &rows {
        let want = format!("{}\nnobody\na'b; touch /tmp/pwned-wl\n", r["pod"].as_str().unwrap());
        check(r["exitCode"] == 0 && r["stdoutTail"] == want.as_str(), || format!("{r}"))?;
    }
    check(c.on(1, "ls /tmp/pwned-wl 2>&1").contains("No such file"), || "the env value ran as code".into())?;
    // One failing pod (the last by name) fails the operation, naming it; every pod still reports.
    let last = t.pods.last().unwrap().clone();
    let script = format!("[ \"$HOSTNAME\" != {last} ] || {{ echo broken >&2; exit 3; }}; echo fine");
    let r = wl(c, &["exec", "vnf-web", "--", "sh", "-c", &script]);
    r.fails(1, &format!("exit code 3 in pod {last}"));
    let d = out(&r);
    check(
        d["ok"] == false && d["result"]["failedCount"] == 1 && d["result"]["pods"].as_array().unwrap().len() == 3,
        || format!("{}", d["result"]),
    )?;
    let bad = d["result"]["pods"].as_array().unwrap().iter().find(|p| p["pod"] == last.as_str()).cloned().unwrap();
    check(bad["exitCode"] == 3 && bad["stderrTail"].as_str().unwrap_or("").contains("broken"), || format!("{bad}"))
}

fn wait(t: &mut Wl) -> R {
    let c = &t.c;
    let d = out(wl(c, &["wait", "vnf-web", "--interval", "1s", "--timeout", "30s"]).ok());
    check(d["result"]["available"] == true && d["result"]["polls"] == 1, || format!("{}", d["result"]))?;
    for (flag, bad) in [("--interval", "5x"), ("--timeout", "ten"), ("--interval", "0")] {
        let r = wl(c, &["wait", "vnf-web", flag, bad, "--timeout", "30s"]);
        r.fails(2, flag);
    }
    // Not available: a fourth replica cannot be scheduled on the cordoned worker (the master
    // is tainted), so `wait` gives up after its timeout; uncordoned, it becomes available.
    let kubectl = "KUBECONFIG=/etc/kubernetes/admin.conf kubectl";
    c.on(1, &format!("{kubectl} cordon worker12"));
    out(wl(c, &["scale", "vnf-web", "4"]).ok());
    let r = wl(c, &["wait", "vnf-web", "--interval", "1", "--timeout", "3"]);
    c.on(1, &format!("{kubectl} uncordon worker12"));
    r.fails(1, "not available after");
    check(r.stderr.contains("3/4 available"), || format!("the polls' status events: {}", r.stderr))?;
    let d = out(wl(c, &["wait", "vnf-web", "--interval", "1s", "--timeout", "30s"]).ok());
    check(d["result"]["status"]["available"] == 4, || format!("{}", d["result"]))
}

fn undeploy(t: &mut Wl) -> R {
    let c = &t.c;
    // Someone else's Service with the workload's name label but not ours: kept.
    let foreign = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"vnf-web-other","namespace":"default","labels":{"app.kubernetes.io/name":"vnf-web"}},"spec":{"ports":[{"port":80}]}}"#;
    c.on(1, &format!("echo '{foreign}' | KUBECONFIG=/etc/kubernetes/admin.conf kubectl apply -f -"));
    let d = out(wl(c, &["undeploy", "vnf-web"]).ok());
    check(d["result"]["deleted"].as_array().is_some_and(|a| a.len() == 3), || format!("{}", d["result"]))?;
    let svcs = c.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get services -n default");
    let rows: Vec<Vec<&str>> = svcs.lines().map(|l| l.split_whitespace().collect()).collect();
    check(
        rows.len() == 2
            && rows[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
            && rows[1][..2] == ["vnf-web-other", "ClusterIP"]
            && rows[1][4] == "80/TCP",
        || format!("kubectl get services after undeploy:\n{svcs}"),
    )?;
    let (objs, pods) = kit(c);
    let left: Vec<&String> = objs.as_object().unwrap().keys().filter(|k| k.contains("vnf-web")).collect();
    check(left == ["Service/default/vnf-web-other"] && pods.is_empty(), || format!("left: {left:?}, pods {pods:?}"))?;
    // Again: nothing to delete is fine; the workload is gone for `available`.
    out(wl(c, &["undeploy", "vnf-web"]).ok());
    wl(c, &["available", "vnf-web"]).fails(1, "NotFound");
    Ok(())
}

fn statefulset(t: &mut Wl) -> R {
    let c = &t.c;
    let spec = c.dir.path().join("db.yaml");
    std::fs::write(&spec, "name: db\nkind: StatefulSet\nimage: registry.example/db:1\nreplicas: 2\nports: ['5432']\n")
        .unwrap();
    let d = out(wl(c, &["deploy", s(&spec)]).ok());
    check(d["context"]["kind"] == "StatefulSet", || format!("{}", d["context"]))?;
    let sts = |c: &Cluster| -> Vec<String> {
        let k = c.kit();
        let mut v: Vec<String> = k["cluster"]["pods"]
            .as_object()
            .unwrap()
            .values()
            .filter(|p| p["workload"] == "StatefulSet/default/db")
            .map(|p| format!("{}={}", p["name"].as_str().unwrap(), p["image"].as_str().unwrap()))
            .collect();
        v.sort();
        v
    };
    check(sts(c) == ["db-0=registry.example/db:1", "db-1=registry.example/db:1"], || format!("{:?}", sts(c)))?;
    let a = out(wl(c, &["wait", "db", "--kind", "statefulset", "--interval", "1", "--timeout", "20"]).ok());
    check(a["result"]["available"] == true, || format!("{}", a["result"]))?;
    out(wl(c, &["scale", "db", "1", "--kind", "statefulset"]).ok());
    out(wl(c, &["set-image", "db", "db=registry.example/db:2", "--kind", "statefulset"]).ok());
    check(sts(c) == ["db-0=registry.example/db:2"], || format!("{:?}", sts(c)))?;
    let d = out(wl(c, &["exec", "db", "--kind", "statefulset", "--", "sh", "-c", "echo $HOSTNAME"]).ok());
    check(d["result"]["pods"][0]["stdoutTail"] == "db-0\n", || format!("{}", d["result"]))?;
    out(wl(c, &["undeploy", "db", "--kind", "statefulset"]).ok());
    check(sts(c).is_empty() && c.kit()["cluster"]["objects"].get("Service/default/db").is_none(), || {
        "db left behind".into()
    })
}

/// Without --vnf-instance-id the masters are an inventory group; an unreachable first master is
/// reported and the next one used (the same `first_reachable` the Helm operations use).
fn inventory_failover(t: &mut Wl) -> R {
    let c = &t.c;
    let inv = c.dir.path().join("masters.yaml");
    let dead = format!("198.18.{}.99", c.lab.net);
    std::fs::write(
        &inv,
        format!(
            "defaults:\n  known_hosts: {}\n  host_key_check: strict\n  user: root\n  identity_file: {}\ngroups:\n  masters:\n    - {{name: gone, ssh_ip: {dead}}}\n    - {{name: m1, ssh_ip: {}}}\n",
            c.lab.file("known_hosts").display(),
            c.lab.file("id_ed25519").display(),
            c.lab.ip(1)
        ),
    )
    .unwrap();
    out(wl(c, &["deploy", s(&t.spec)]).ok());
    let r = mgmt(
        &[
            "workload",
            "available",
            "vnf-web",
            "-o",
            "json",
            "-i",
            s(&inv),
            "--master-group",
            "masters",
            "--retry-for",
            "1",
            "--connect-timeout",
            "2",
        ],
        &[],
    );
    r.ok();
    let d = out(&r);
    check(d["context"]["master"] == c.lab.ip(1) && d["result"]["available"] == true, || format!("{d}"))?;
    check(r.stderr.contains("unreachable, trying the next master"), || format!("no failover warning: {}", r.stderr))?;
    out(wl(c, &["undeploy", "vnf-web"]).ok());
    Ok(())
}

// ------------------------------------------------------------------ schemas (no root)

/// Every object a spec generates (a Deployment with everything, a StatefulSet without ports) is
/// valid for the oldest and newest Kubernetes we claim; one wrong field fails the same check.
fn generated_manifests_are_valid_kubernetes() -> R {
    let kv = validator();
    let d = tempfile::tempdir().unwrap();
    let full = spec::parse(SPEC, "web.yaml", None, None).unwrap();
    let sts = spec::parse("name: db\nimage: db:1\nkind: StatefulSet\nreplicas: 3\nvolumes: [{name: data, host_path: /srv/db, mount: /data}]\n", "db.yaml", None, None).unwrap();
    // DCAE's deploy parity: pull policy and secrets, an https probe, an init container (and
    // POD_IP from the downward API, which every container gets).
    let dcae = spec::parse(
        "name: collector\nimage: r.example/ves:1\nalways_pull: true\nimage_pull_secrets: [regcred]\n\
         readiness: {https: \"/ready:8443\"}\nvolumes: [{name: data, empty_dir: {}, mount: /data}]\n\
         init_containers: [{name: setup, image: r.example/setup:1, command: [sh, -c, \"echo ok\"]}]\n",
        "collector.yaml",
        None,
        None,
    )
    .unwrap();
    let mut objects = manifest::objects(&full);
    objects.extend(manifest::objects(&sts));
    objects.extend(manifest::objects(&dcae));
    check(objects.len() == 6, || format!("{} objects", objects.len()))?;
    for version in VERSIONS {
        for (i, o) in objects.iter().enumerate() {
            let f = d.path().join(format!("{i}.json"));
            std::fs::write(&f, serde_json::to_string_pretty(o).unwrap()).unwrap();
            let (ok, text) = validate(&kv, &f, version);
            check(ok, || {
                format!("{} {} is not valid Kubernetes {version}:\n{text}", o["kind"], o["metadata"]["name"])
            })?;
        }
    }
    let mut wrong = objects[0].clone();
    wrong["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("8080/tcp");
    let f = d.path().join("wrong.json");
    std::fs::write(&f, wrong.to_string()).unwrap();
    let (ok, text) = validate(&kv, &f, "1.31.0");
    check(!ok, || format!("a wrong manifest passed:\n{text}"))
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .without_root(&[("generated_manifests_are_valid_kubernetes", generated_manifests_are_valid_kubernetes)])
        .needing_root(&[("workload_lifecycle_on_a_kit_cluster", lifecycle)])
}
