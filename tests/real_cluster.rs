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

use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, Cluster, R};
use support::phase::{phase, phases};
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

/// 1 master + 2 workers on the real API: instantiate, then the checks, then a re-run.
fn single_master_two_workers_on_the_real_api() -> R {
    let mut t = phase("bring up a real-API kit lab: 1 master + 2 workers", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let b = bindir.to_str().unwrap().to_string();
        let c = Cluster::with_lab_args("rc", 95, 3, &[1], &[2, 3], true, &["--control-plane", &b]);
        Ok(RealCluster { c, conn: serde_json::Value::Null, ca: String::new() })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate-end against the real API", instantiate),
            ("the real API lists the 3 nodes with their names and addresses", nodes_and_addresses),
            ("the recorded bearer token lists the nodes through the real API", bearer_token),
            ("a second instantiate-end reads the real cluster again", second_instantiate),
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

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("single_master_two_workers_on_the_real_api", single_master_two_workers_on_the_real_api)])
}
