//! Per-site runs against REAL Kubernetes APIs (issue 21, "a few sites"): two sites, each its own
//! real-API kit lab (`--kit --control-plane BINDIR`: 1 master + 1 worker, its own etcd, API
//! server, controller manager and scheduler), a catalogue rendered from the shipped
//! templates/edge as tests/sites.rs renders it, and the real `mgmt-driver sites` commands:
//! `apply instantiate` of both at once, `status`, a re-run that skips them, `apply
//! cnf-instantiate` and `cnf-terminate` (the sample package's chart, by the real Helm 3 that
//! `install_helm.sh` put on each master), `apply terminate`.
//! Every check reads each site's own API with the real kubectl: on its master, and from this
//! machine with the bearer token the driver recorded for the site.
//!
//! Needs root (namespaces) and the control plane built. Labs `rs1`/`rs2`, nets 85/86 (two control
//! planes, ~1.2 GB). The kit-only suite (tests/sites.rs) keeps the refusals, the stopped node and
//! the resume across twelve sites, which do not depend on the API.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::real_cluster::control_plane;
use support::harness::Suite;
use support::kit::{check, doc, s, R};
use support::phase::{phase, timed_phases};
use support::{mgmt, repo, Lab, Run};

/// (lab name, net) of each site.
const LABS: [(&str, u8); 2] = [("rs1", 85), ("rs2", 86)];

struct Sites {
    labs: Vec<Lab>,
    bindir: PathBuf,
    dir: tempfile::TempDir,
    pkg: PathBuf,
    out: PathBuf,
    state: PathBuf,
}

fn site_name(j: usize) -> String {
    format!("s{:02}", j + 1)
}

impl Sites {
    /// The shipped sample's defaults over the shipped templates/edge; each site on its own lab's
    /// network (nodes .11 and .12), its own key and known_hosts.
    fn catalogue(&self) -> PathBuf {
        let sample = std::fs::read_to_string(repo().join("samples/sites/sites.yaml")).unwrap();
        let head = &sample[..sample.find("\nsecrets:").expect("the sample has secrets:")];
        let head = head
            .lines()
            .map(|l| {
                if l.starts_with("templates:") {
                    format!("templates: {}", repo().join("templates/edge").display())
                } else if l.starts_with("package:") {
                    format!("package: {}", self.pkg.display())
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut y = format!(
            "{head}\nsecrets:\n  node_password: {{file: {}}}\nsites:\n",
            self.labs[0].file("password").display()
        );
        for (j, lab) in self.labs.iter().enumerate() {
            y.push_str(&format!(
                "  - name: {}\n    labels: {{region: eu}}\n    vars: {{network: 198.18.{}.0/24, first_node: 11, identity_file: {}, known_hosts: {}}}\n",
                site_name(j),
                lab.net,
                lab.file("id_ed25519").display(),
                lab.file("known_hosts").display(),
            ));
        }
        let p = self.dir.path().join("sites.yaml");
        std::fs::write(&p, y).unwrap();
        p
    }

    fn sites(&self, args: &[&str]) -> Run {
        let mut a = vec!["sites"];
        a.extend_from_slice(args);
        a.extend(["-o", "json", "--rendered", s(&self.out), "--state-dir", s(&self.state)]);
        mgmt(&a, &[])
    }

    /// Real kubectl with the admin kubeconfig on site `j`'s master.
    fn kubectl(&self, j: usize, args: &str) -> String {
        self.on(j, &format!("kubectl {args}"))
    }

    /// A shell command on site `j`'s master with the admin kubeconfig (stdout and stderr).
    fn on(&self, j: usize, cmd: &str) -> String {
        let cmd = format!("export KUBECONFIG=/etc/kubernetes/admin.conf; {{ {cmd}; }} 2>&1");
        let o = self.labs[j].node_exec("1", &["sh", "-c", &cmd]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The names of the Nodes site `j`'s API lists, sorted (`node/` stripped).
    fn nodes(&self, j: usize) -> Vec<String> {
        let mut v: Vec<String> =
            self.kubectl(j, "get nodes -o name").lines().map(|l| l.trim_start_matches("node/").to_string()).collect();
        v.sort();
        v
    }

    /// The install script names a node after its role and its address's last octet (as in
    /// tests/real_cluster.rs), not after the inventory's `s01-master1`: both sites' Nodes are
    /// `master11` and `worker12`, told apart by their addresses, each in its own API.
    fn want_nodes() -> Vec<String> {
        vec!["master11".into(), "worker12".into()]
    }
}

fn by_site(d: &Value) -> std::collections::BTreeMap<String, Value> {
    d["result"]["sites"]
        .as_array()
        .map(|a| a.iter().map(|s| (s["site"].as_str().unwrap_or("").to_string(), s.clone())).collect())
        .unwrap_or_default()
}

fn all_status(d: &Value, want: &str) -> R {
    let sites = by_site(d);
    check(sites.len() == LABS.len() && sites.values().all(|s| s["status"] == want), || format!("want {want}: {d}"))
}

fn instantiate(t: &mut Sites) -> R {
    let r = t.sites(&["apply", "instantiate", "--max-sites", "2"]);
    r.ok();
    let d = doc(&r);
    for (n, st) in by_site(&d) {
        eprintln!("real_sites: site {n} instantiate took {} s", st["seconds"]);
    }
    all_status(&d, "done")
}

/// Each site's real API lists its own two Nodes (Ready, at its own lab's addresses) and no other.
fn each_api_lists_its_own_nodes(t: &mut Sites) -> R {
    for (j, lab) in t.labs.iter().enumerate() {
        let got = t.kubectl(
            j,
            "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.addresses[?(@.type==\"InternalIP\")].address} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
        );
        let mut lines: Vec<&str> = got.lines().collect();
        lines.sort();
        let n = site_name(j);
        let want = vec![format!("master11 {} True", lab.ip(1)), format!("worker12 {} True", lab.ip(2))];
        check(lines == want, || format!("site {n}'s API:\n{got}\nwant {want:?}"))?;
        let v = t.kubectl(j, "version");
        check(v.contains("Server Version: v1.37"), || format!("site {n}: {v}"))?;
    }
    Ok(())
}

/// From this machine, the real kubectl with only the bearer token the driver recorded for the
/// site (written by a re-run of the site's instantiate-end with `--kubeconfig-out`, on the same
/// state): its own two Nodes, and the other site's token is refused by this site's API.
fn recorded_tokens_from_the_controller(t: &mut Sites) -> R {
    let kubectl = t.bindir.join("kubectl");
    let mut tokens = Vec::new();
    for (j, lab) in t.labs.iter().enumerate() {
        let n = site_name(j);
        let site = t.out.join(&n);
        let kc = t.dir.path().join(format!("{n}.kubeconfig"));
        let r = mgmt(
            &[
                "instantiate-end",
                "-o",
                "json",
                "--request",
                s(&site.join("cluster/instantiate.json")),
                "-i",
                s(&site.join("inventory.yaml")),
                "--package-dir",
                s(&t.pkg),
                "--vnf-instance-id",
                &format!("site-{n}"),
                "--state-dir",
                s(&t.state),
                "--kubeconfig-out",
                s(&kc),
                // The request's password is the catalogue's `@file:` reference; the hooks take
                // references only where the operator allows them (`sites` takes the catalogue's).
                "--secrets-dir",
                s(&t.labs[0].dir),
            ],
            &[],
        );
        r.ok();
        let text = std::fs::read_to_string(&kc).unwrap();
        let field = |key: &str| {
            text.lines().find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string())).unwrap_or_default()
        };
        let token = field("token:");
        check(!token.is_empty() && text.contains(&format!("server: https://{}:6443", lab.ip(1))), || text.clone())?;
        let o = Command::new(&kubectl)
            .args(["--kubeconfig", s(&kc), "get", "nodes", "-o", "name"])
            .env("HOME", t.dir.path())
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        let want = Sites::want_nodes().iter().map(|x| format!("node/{x}\n")).collect::<String>();
        check(o.status.success() && got == want, || format!("site {n} from the controller: {got}"))?;
        tokens.push((kc, token));
    }
    // Site 1's kubeconfig with site 2's token: site 1's API did not issue it.
    let text = std::fs::read_to_string(&tokens[0].0).unwrap().replace(&tokens[0].1, &tokens[1].1);
    let cross = t.dir.path().join("cross.kubeconfig");
    std::fs::write(&cross, text).unwrap();
    let o = Command::new(&kubectl)
        .args(["--kubeconfig", s(&cross), "get", "nodes", "-o", "name"])
        .env("HOME", t.dir.path())
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&o.stderr).into_owned();
    check(!o.status.success() && (got.contains("Unauthorized") || got.contains("must be logged in")), || {
        format!("site s02's token on site s01's API: {got}")
    })
}

fn status_then_a_rerun_skips(t: &mut Sites) -> R {
    let st = mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&t.state)], &[]);
    st.ok();
    let all = doc(&st)["result"]["sites"].as_array().cloned().unwrap_or_default();
    check(all.len() == LABS.len() && all.iter().all(|x| x["status"] == "done" && x["op"] == "instantiate"), || {
        format!("{all:?}")
    })?;
    let started = Instant::now();
    let r = t.sites(&["apply", "instantiate"]);
    r.ok();
    all_status(&doc(&r), "skipped")?;
    check(started.elapsed().as_secs() < 10, || format!("a re-run of done sites took {:?}", started.elapsed()))?;
    for j in 0..LABS.len() {
        check(t.nodes(j) == Sites::want_nodes(), || format!("site {}: {:?}", site_name(j), t.nodes(j)))?;
    }
    Ok(())
}

fn terminate(t: &mut Sites) -> R {
    let r = t.sites(&["apply", "terminate", "--max-sites", "2"]);
    r.ok();
    all_status(&doc(&r), "done")?;
    let st = mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&t.state)], &[]);
    st.ok();
    let all = doc(&st)["result"]["sites"].as_array().cloned().unwrap_or_default();
    check(all.len() == LABS.len() && all.iter().all(|x| x["status"] == "done" && x["op"] == "terminate"), || {
        format!("{all:?}")
    })?;
    // terminate-end forgets the cluster (the VNFM deletes the VMs): the instance state is gone,
    // and nothing was done to the clusters themselves.
    for j in 0..LABS.len() {
        let f = t.state.join(format!("site-{}.json", site_name(j)));
        check(!f.exists(), || format!("{} is still there", f.display()))?;
        check(t.nodes(j) == Sites::want_nodes(), || format!("site {}: {:?}", site_name(j), t.nodes(j)))?;
    }
    Ok(())
}

/// The real Helm 3 binary and its tarball (tests/labkit/fetch-helm.sh, fetched once per machine).
fn helm3() -> PathBuf {
    let d = repo().join("target/helm");
    if !d.join("helm3/helm").is_file() {
        let o = Command::new("bash").arg(repo().join("tests/labkit/fetch-helm.sh")).arg(&d).output().unwrap();
        assert!(o.status.success(), "fetch-helm.sh: {}", String::from_utf8_lossy(&o.stderr));
    }
    d.join("helm3")
}

/// The sample package as an operator builds it (samples/package/make-package.sh): our scripts,
/// the sample chart packaged by the real Helm 3, and the kit's offline artifacts with the real
/// Helm 3 tarball in place of the kit's, so `install_helm.sh` puts the real helm on each master.
fn cnf_package(dir: &Path) -> PathBuf {
    let off = dir.join("offline");
    let o = Command::new("bash").arg(repo().join("tests/labkit/make-offline-dir.sh")).arg(&off).output().unwrap();
    assert!(o.status.success(), "make-offline-dir: {}", String::from_utf8_lossy(&o.stderr));
    for e in std::fs::read_dir(&off).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.ends_with(".tar.gz") || n == "SHA256SUMS" {
            std::fs::remove_file(p).unwrap();
        }
    }
    let h = helm3();
    let tgz = std::fs::read_dir(&h)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-linux-amd64.tar.gz"))
        .unwrap_or_else(|| panic!("no helm tarball in {}", h.display()));
    std::fs::copy(&tgz, off.join(tgz.file_name().unwrap())).unwrap();
    let pkg = dir.join("pkg");
    let o = Command::new("bash")
        .arg(repo().join("samples/package/make-package.sh"))
        .args([s(&pkg), "--offline-from", s(&off), "--helm", s(&h.join("helm"))])
        .output()
        .unwrap();
    assert!(o.status.success(), "make-package.sh: {}", String::from_utf8_lossy(&o.stderr));
    pkg
}

/// `sites apply cnf-instantiate`: the sample chart installed by the real helm on each master,
/// against its own real API; the real controllers make the pod, the real scheduler places it on
/// the site's worker, KWOK runs it.
fn cnf_instantiate(t: &mut Sites) -> R {
    let r = t.sites(&["apply", "cnf-instantiate", "--max-sites", "2"]);
    r.ok();
    all_status(&doc(&r), "done")?;
    for j in 0..LABS.len() {
        let n = site_name(j);
        let v = t.on(j, "helm version --short");
        check(v.starts_with("v3.17."), || format!("site {n}: helm on the master: {v}"))?;
        let h = t.on(j, "helm list -n edge -o json");
        let v: Value = serde_json::from_str(h.trim()).unwrap_or(Value::Null);
        check(v[0]["name"] == "app" && v[0]["status"] == "deployed", || format!("site {n}: helm list: {h}"))?;
        let p = t.kubectl(
            j,
            "-n edge get pods -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}'",
        );
        check(p.trim() == "worker12 Running", || format!("site {n}: the release's pods: {p}"))?;
    }
    Ok(())
}

/// `sites apply cnf-terminate`: the release gone from each site's API.
fn cnf_terminate(t: &mut Sites) -> R {
    let r = t.sites(&["apply", "cnf-terminate", "--max-sites", "2"]);
    r.ok();
    all_status(&doc(&r), "done")?;
    for j in 0..LABS.len() {
        let h = t.on(j, "kubectl -n edge get deploy,rs -o name; helm list -n edge -q");
        check(h.trim().is_empty(), || format!("site {}: left in edge: {h}", site_name(j)))?;
    }
    Ok(())
}

fn two_sites_on_real_apis() -> R {
    let t0 = Instant::now();
    let mut t = phase("bring up 2 real-API kit labs (1 master + 1 worker each), render 2 sites", || {
        let bindir = control_plane().map_err(|e| -> libtest_mimic::Failed { e.into() })?;
        let b = bindir.to_str().unwrap().to_string();
        let labs = LABS.iter().map(|(name, net)| Lab::up(name, *net, 2, &["--kit", "--control-plane", &b])).collect();
        let dir = tempfile::tempdir().unwrap();
        let pkg = cnf_package(dir.path());
        let t = Sites { out: dir.path().join("out"), state: dir.path().join("state"), labs, bindir, pkg, dir };
        let cat = t.catalogue();
        mgmt(&["sites", "render", "-o", "json", "--sites", s(&cat), "--out", s(&t.out)], &[]).ok();
        let inv = std::fs::read_to_string(t.out.join("s02/inventory.yaml")).unwrap();
        check(inv.contains("{name: \"s02-worker1\", ssh_ip: \"198.18.86.12\"}"), || inv.clone())?;
        Ok(t)
    })?;
    eprintln!("real_sites: bring-up: {:.1} s", t0.elapsed().as_secs_f64());
    timed_phases(
        &mut t,
        &[
            ("sites apply instantiate: both sites at once, each its own real API", instantiate),
            ("each site's real API lists its own 2 Nodes, Ready, and no other", each_api_lists_its_own_nodes),
            (
                "from the controller: each site's recorded bearer token, real kubectl",
                recorded_tokens_from_the_controller,
            ),
            ("sites status; a re-run skips both sites (done before)", status_then_a_rerun_skips),
            ("sites apply cnf-instantiate: the sample chart by real helm, pods Running", cnf_instantiate),
            ("sites apply cnf-terminate: the release gone from both APIs", cnf_terminate),
            ("sites apply terminate: both sites", terminate),
        ],
    )
}

pub fn suite() -> Suite {
    Suite::new(file!())
        .needing(control_plane().err())
        .needing_root(&[("two_sites_on_real_apis", two_sites_on_real_apis)])
}
