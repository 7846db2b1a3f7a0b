//! `cnf --kubeconfig` against a REAL Kubernetes API (issue 23 item 5): a cluster known only by
//! its kubeconfig. The lab's real-API cluster (lab `rk`, net 93, one master) is built by our own
//! hook; then its admin kubeconfig is copied to this machine (0600) and every Helm command runs
//! HERE, with the real Helm 3 (`--helm-bin`), against the apiserver at 198.18.93.x:6443: no
//! inventory, no SSH. What it did is read back through kubectl on the master.

use crate::support;
use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use support::harness::Suite;
use support::kit::{check, s, Cluster, R};
use support::mgmt;

use crate::real_cnf::{cluster, control_plane, helm_dir, kubectl, serve_repo, RepoServer};

const NET: u8 = 93;

struct Kc {
    c: Cluster,
    repo: RepoServer,
    /// The kubeconfig copied from the master, 0600.
    file: String,
    /// A piece of the client key it holds, which must show up nowhere.
    secret: String,
}

fn cnf(k: &Kc, args: &[&str]) -> support::Run {
    let helm = helm_dir().join("helm3/helm");
    let mut a = vec!["cnf", "-o", "json", "--vnf-instance-id", "kc1", "--cluster-uuid", "kcns:edge"];
    a.extend(["--kubeconfig", &k.file, "--helm-bin", s(&helm), "--state-dir", s(&k.c.state)]);
    a.extend(args);
    let r = mgmt(&a, &[]);
    assert!(!r.all().contains(&k.secret), "the kubeconfig's key leaked into the output of {args:?}");
    r
}

fn out(r: &support::Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}\n--- stderr\n{}", r.stdout, r.stderr))
}

fn greeting(c: &Cluster) -> String {
    kubectl(
        c,
        "get configmap -n kcns -o jsonpath='{.items[?(@.metadata.name==\"web-nginxlab-greeting\")].data.greeting}'",
    )
    .trim()
    .to_string()
}

fn helm_on_the_controller_with_a_kubeconfig() -> R {
    let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
    let c = cluster("rk", NET, 3, bindir.to_str().unwrap());
    let repo = serve_repo(&c, &helm_dir().join("helm3/helm"), 8879);
    let admin = c.on(1, "cat /etc/kubernetes/admin.conf");
    check(admin.contains("current-context") && admin.contains(":6443"), || {
        format!("admin.conf: {} bytes", admin.len())
    })?;
    let secret = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-key-data: "))
        .map(|k| k.chars().skip(40).take(40).collect::<String>())
        .unwrap_or_default();
    check(secret.len() == 40, || "no client-key-data in admin.conf".to_string())?;
    let file = c.dir.path().join("kubeconfig");
    std::fs::write(&file, &admin).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let k = Kc { file: s(&file).to_string(), c, repo, secret };
    let c = &k.c;

    // Refused together with masters, naming the flag, before anything runs.
    let both = cnf(&k, &["list", "-i", s(&c.inv)]);
    check(both.code != 0 && both.all().contains("--kubeconfig") && both.all().contains("--inventory"), || both.all())?;

    let add = out(cnf(&k, &["repo-add", &format!("labrepo={}", k.repo.url)]).ok());
    check(add["context"]["clusterId"] == "edge", || format!("{add}"))?;
    let home = c.state.join("helm/edge");
    let mode = std::fs::metadata(&home).unwrap().permissions().mode() & 0o777;
    check(mode == 0o700, || format!("{} is {mode:o}", home.display()))?;
    check(home.join("config/repositories.yaml").exists(), || "the repository is not in the private homes".into())?;

    let ins = out(cnf(&k, &["install", "labrepo/nginxlab", "--release", "web", "--version", "0.1.0", "--wait"]).ok());
    check(greeting(c) == "hello from 0.1.0", || format!("install did not reach the API: {} {ins}", greeting(c)))?;
    let st = out(cnf(&k, &["status", "--release", "web"]).ok());
    check(st.to_string().contains("deployed"), || format!("{st}"))?;
    let list = out(cnf(&k, &["list"]).ok());
    check(list.to_string().contains("\"web\""), || format!("{list}"))?;

    let values = c.dir.path().join("values.yaml");
    std::fs::write(&values, "greeting: from the controller\n").unwrap();
    let up = out(cnf(&k, &["upgrade", "--release", "web", "--values", s(&values)]).ok());
    check(greeting(c) == "from the controller", || {
        format!("upgrade --values did not reach the API: {} {up}", greeting(c))
    })?;

    cnf(&k, &["uninstall", "--release", "web"]).ok();
    let left = kubectl(c, "get deploy,configmap -n kcns -o name");
    check(!left.contains("web-nginxlab"), || format!("left after uninstall:\n{left}"))?;
    cnf(&k, &["repo-remove", "labrepo"]).ok();
    Ok(())
}

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("helm_on_the_controller_with_a_kubeconfig", helm_on_the_controller_with_a_kubeconfig)])
}
