//! No plaintext credentials at rest (issue 9): a cluster instantiated on real sshd lab nodes with
//! the request's node password and a proxy with a password, then healed, then used by a CNF
//! operation through the stored credential (`masternode_credential_ref`), leaves none of those
//! secrets, nor the cluster's bearer token, in clear anywhere in the state directory, and every
//! later operation still worked on what it read back.
//!
//! Needs root (namespaces); see tests/support/harness.rs for the skip policy.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, k8s_conn, request, s, Cluster, R};
use support::mgmt;
use support::phase::{phase, phases};

/// What the phases share.
struct Sealed {
    c: Cluster,
    /// The operator's key file, outside the state directory.
    key: PathBuf,
    /// Every secret that must not be at rest in clear, with its name.
    secrets: Vec<(&'static str, String)>,
}

const PROXY_PW: &str = "Pr0xy-S3cret-se1";

impl Sealed {
    fn hook(&self, op: &str, req: &Path) -> support::Run {
        self.c.hook(op, Some(req), &["--state-key", s(&self.key)])
    }

    /// Every hit of a secret in any file under the state directory (raw bytes, recursively).
    fn hits(&self) -> (usize, Vec<String>) {
        let mut files = Vec::new();
        walk(&self.c.state, &mut files);
        let mut hits = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            for (name, secret) in &self.secrets {
                if bytes.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                    hits.push(format!("{name} in {}", f.display()));
                }
            }
        }
        (files.len(), hits)
    }

    #[allow(clippy::print_stderr)] // counts for the test log (the lint guards the binary's output)
    fn nothing_at_rest(&self, after: &str) -> R {
        let (files, hits) = self.hits();
        eprintln!(
            "secrets: after {after}: {} secrets grepped in {files} files: {} hits",
            self.secrets.len(),
            hits.len()
        );
        check(files > 0 && hits.is_empty(), || format!("after {after}: secrets at rest in clear: {hits:?}"))
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Instantiate → heal a worker → a CNF operation with the stored credential; the state
/// directory is grepped for every secret after each.
fn no_plaintext_credentials_at_rest() -> R {
    let mut t = phase("bring up 1 master + 1 worker with password logins", || {
        let c = Cluster::new("se1", 43, 2, &[1], &[2], false);
        let key = c.dir.path().join("operator/state.key");
        let pw = c.lab.password();
        Ok(Sealed { c, key, secrets: vec![("node password", pw), ("proxy password", PROXY_PW.to_string())] })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate: the secrets are kept sealed", instantiate_seals),
            ("heal a worker with the sealed password and proxy", heal_reads_them_back),
            ("a CNF operation logs in with the stored credential", cnf_uses_the_stored_credential),
            ("without the key nothing opens, and the error names the key file", wrong_key_is_refused),
        ],
    )
}

fn instantiate_seals(t: &mut Sealed) -> R {
    let pw = t.secrets[0].1.clone();
    let mut req = request("master_instance", "worker_instance", "mduser", &pw, "masterNode_CP1");
    let p = &mut req["additionalParams"]["k8s_cluster_installation_param"];
    let proxy = format!("http://user1:{PROXY_PW}@proxy.lab:3128");
    p["proxy"] = json!({"http_proxy": proxy, "https_proxy": proxy, "no_proxy": "10.0.0.1",
                        "k8s_node_cidr": format!("198.18.{}.0/24", t.c.lab.net)});
    p["helm_installation_script_path"] = "Scripts/install_helm.sh".into();
    let r = t.hook("instantiate-end", &t.c.write("instantiate.json", &req));
    r.ok();
    check(!r.all().contains(&pw) && !r.all().contains(PROXY_PW), || format!("a secret in the output:\n{}", r.all()))?;
    check(
        // A bearer secret (it carries the cluster's token): masked in the result.
        k8s_conn(&doc(&r))["extra"]["helm_info"]["masternode_credential_ref"] == "********",
        || format!("{}", k8s_conn(&doc(&r))),
    )?;
    // The key was created where the operator said, private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&t.key).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    check(mode == 0o600, || format!("key file {} mode {mode:o}", t.key.display()))?;
    // The bearer token, read from the cluster itself (as admin_token.sh does).
    let token = t.c.on(
        1,
        "KUBECONFIG=/etc/kubernetes/admin.conf kubectl -n kube-system get secret mgmt-driver-admin-token \
         -o jsonpath='{.data.token}' | base64 -d",
    );
    check(token.len() > 20, || format!("no bearer token in the cluster: {token:?}"))?;
    t.secrets.push(("bearer token", token));
    t.nothing_at_rest("instantiate-end")
}

/// heal-end logs in to the fresh worker with the recorded password and hands the scripts the
/// recorded proxy: both came out of the sealed state.
fn heal_reads_them_back(t: &mut Sealed) -> R {
    let heal = t.c.write("heal-w.json", &json!({"vnfcInstanceId": [t.c.lab.node(2)]}));
    t.hook("heal-start", &heal).ok();
    t.c.fresh_vm(2);
    t.c.on(2, "rm -f /etc/systemd/system/containerd.service.d/*proxy* /etc/apt/apt.conf.d/*proxy*");
    let r = t.hook("heal-end", &heal);
    r.ok();
    check(t.c.k8s_nodes().contains(&"worker12".to_string()), || format!("{:?}", t.c.k8s_nodes()))?;
    let conf =
        t.c.on(2, "cat /etc/systemd/system/containerd.service.d/*proxy* /etc/apt/apt.conf.d/*proxy* 2>/dev/null");
    check(conf.contains(PROXY_PW), || format!("the healed worker did not get the recorded proxy: {conf}"))?;
    t.nothing_at_rest("heal-end")
}

/// `cnf repo-list --cluster-instance`: the master login (user mduser, password only) uses the
/// credential recorded with the cluster.
fn cnf_uses_the_stored_credential(t: &mut Sealed) -> R {
    let c = &t.c;
    let args = [
        "cnf",
        "-o",
        "json",
        "--state-key",
        s(&t.key),
        "--vnf-instance-id",
        "cnf-se1",
        "--cluster-instance",
        &c.id,
        "-i",
        s(&c.inv),
        "--state-dir",
        s(&c.state),
        "repo-list",
    ];
    let r = mgmt(&args, &[]);
    r.ok();
    let d: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    check(d["context"]["master"] == c.lab.ip(1), || format!("{d}"))?;
    check(!r.all().contains(&t.secrets[0].1), || format!("the password in the output:\n{}", r.all()))?;
    t.nothing_at_rest("cnf repo-list")
}

/// Another key (or none) opens nothing: exit 2 naming the key file, and nothing connects.
fn wrong_key_is_refused(t: &mut Sealed) -> R {
    let c = &t.c;
    let other = c.dir.path().join("other.key");
    std::fs::write(&other, format!("{}\n", "11".repeat(32))).unwrap();
    // A key file as a key file is kept (0600): the store refuses one others may read.
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let heal = c.write("heal-w.json", &json!({"vnfcInstanceId": [c.lab.node(2)]}));
    let r = c.hook("heal-start", Some(&heal), &["--state-key", s(&other)]);
    r.fails(2, &other.display().to_string());
    check(r.all().contains("/state_mac") && r.all().contains("another state key"), || r.all())?;
    let missing = c.dir.path().join("missing.key");
    let r = c.hook("heal-start", Some(&heal), &["--dry-run", "--state-key", s(&missing)]);
    r.fails(2, &missing.display().to_string());
    check(!missing.exists(), || "a dry run created the key file".into())?;
    check(c.k8s_nodes().contains(&"worker12".to_string()), || "a refused run changed the cluster".into())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!()).needing_root(&[("no_plaintext_credentials_at_rest", no_plaintext_credentials_at_rest)])
}
