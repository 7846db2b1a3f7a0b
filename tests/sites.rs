//! Per-site runs on the lab kit: twelve sites of one master and one worker each, rendered from
//! the shipped templates/edge, on one 24-node kit lab, every site its own simulated cluster
//! (each pair of nodes bind-mounts its own kit state directory, out of band). Drives the real
//! `mgmt-driver sites` commands.
//!
//! Needs root (namespaces), as every lab main (tests/support/harness.rs).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, package, request, s, R};
use support::phase::phase;
use support::{mgmt, repo, Lab, Run};

const SITES: usize = 12;

/// The fleet: the lab, the package, the sites rendered from templates/edge, the state directory.
struct Fleet {
    lab: Lab,
    dir: tempfile::TempDir,
    out: PathBuf,
    state: PathBuf,
}

fn site_name(j: usize) -> String {
    format!("s{:02}", j + 1)
}

impl Fleet {
    /// Lab node numbers of site `j`: (master, worker).
    fn nodes(j: usize) -> (usize, usize) {
        (2 * j + 1, 2 * j + 2)
    }

    /// Give node `i` the simulated cluster of site `j` (the kit keeps one per lab otherwise):
    /// `/var/lib/labkit` inside the node becomes DIR/kit/<site>. Done again after a restart.
    fn isolate(&self, i: usize, j: usize) {
        let n = site_name(j);
        let cmd = format!(
            "mkdir -p /var/lib/labkit/{n} && chmod 0777 /var/lib/labkit/{n} && mount --bind /var/lib/labkit/{n} /var/lib/labkit"
        );
        let o = self.lab.node_exec(&i.to_string(), &["sh", "-c", &cmd]);
        assert!(o.status.success(), "isolate node {i}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// A catalogue of the 12 sites over the SHIPPED templates/edge, with the shipped sample's
    /// defaults: every site on the lab's one network, its nodes from `first_node` on.
    /// `broken`: a site whose `network` is missing (a template error).
    fn catalogue(&self, pkg: &Path, name: &str, broken: Option<usize>) -> PathBuf {
        let sample = std::fs::read_to_string(repo().join("samples/sites/sites.yaml")).unwrap();
        let head = &sample[..sample.find("\nsecrets:").expect("the sample has secrets:")];
        let head = head
            .lines()
            .map(|l| {
                if l.starts_with("templates:") {
                    format!("templates: {}", repo().join("templates/edge").display())
                } else if l.starts_with("package:") {
                    format!("package: {}", pkg.display())
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let lab = &self.lab;
        let mut y =
            format!("{head}\nsecrets:\n  node_password: {{file: {}}}\nsites:\n", lab.file("password").display());
        for j in 0..SITES {
            let region = if j % 2 == 0 { "eu" } else { "us" };
            let network = if broken == Some(j) { String::new() } else { format!("network: 198.18.{}.0/24, ", lab.net) };
            y.push_str(&format!(
                "  - name: {}\n    labels: {{region: {region}}}\n    vars: {{{network}first_node: {}, helm: false, identity_file: {}, known_hosts: {}}}\n",
                site_name(j),
                10 + Fleet::nodes(j).0,
                lab.file("id_ed25519").display(),
                lab.file("known_hosts").display(),
            ));
        }
        let p = self.dir.path().join(name);
        std::fs::write(&p, y).unwrap();
        p
    }

    fn render(&self, cat: &Path, out: &Path) {
        mgmt(&["sites", "render", "-o", "json", "--sites", s(cat), "--out", s(out)], &[]).ok();
    }

    fn sites(&self, args: &[&str], out: &Path) -> Run {
        let mut a = vec!["sites"];
        a.extend_from_slice(args);
        a.extend([
            "-o",
            "json",
            "--rendered",
            s(out),
            "--state-dir",
            s(&self.state),
            "--retry-for",
            "2",
            "--connect-timeout",
            "2",
        ]);
        mgmt(&a, &[])
    }

    /// Kubernetes node names site `j`'s master sees (its own simulated cluster).
    fn k8s_nodes(&self, j: usize) -> Vec<String> {
        let (m, _) = Fleet::nodes(j);
        let o = self.lab.node_exec(
            &m.to_string(),
            &["sh", "-c", "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes -o name"],
        );
        String::from_utf8_lossy(&o.stdout).lines().map(|l| l.trim_start_matches("node/").to_string()).collect()
    }

    /// Every kit event recorded on any site (empty: no stand-in ever ran).
    fn kit_events(&self) -> usize {
        (0..SITES)
            .map(|j| match std::fs::read_to_string(self.lab.file("kit").join(site_name(j)).join("state.json")) {
                Ok(t) => serde_json::from_str::<Value>(&t).unwrap()["events"].as_array().map_or(0, Vec::len),
                Err(_) => 0,
            })
            .sum()
    }
}

fn by_site(d: &Value) -> std::collections::BTreeMap<String, Value> {
    d["result"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["site"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

#[allow(clippy::print_stderr)] // phase times go to the test log (the lint guards the binary's output)
fn timed<T>(name: &str, f: impl FnOnce() -> Result<T, libtest_mimic::Failed>) -> Result<T, libtest_mimic::Failed> {
    let t = Instant::now();
    let r = phase(name, f);
    eprintln!("sites: phase '{name}': {:.1}s", t.elapsed().as_secs_f64());
    r
}

/// 12 sites at once; a bad request stops everything first; a stopped node fails its site only;
/// a re-run resumes only that site.
fn twelve_sites_at_once_with_one_down_and_a_resume() -> R {
    let f = timed("bring up 24 kit nodes, isolate 12 clusters, render 12 sites", || {
        let lab = Lab::up("st1", 81, 2 * SITES, &["--kit"]);
        let dir = tempfile::tempdir().unwrap();
        let f = Fleet { out: dir.path().join("out"), state: dir.path().join("state"), lab, dir };
        for j in 0..SITES {
            let (m, w) = Fleet::nodes(j);
            f.isolate(m, j);
            f.isolate(w, j);
        }
        let pkg = package(f.dir.path());
        let cat = f.catalogue(&pkg, "sites.yaml", None);
        f.render(&cat, &f.out);
        let inv = std::fs::read_to_string(f.out.join("s12/inventory.yaml")).unwrap();
        check(inv.contains("{name: \"s12-worker1\", ssh_ip: \"198.18.81.34\"}"), || inv.clone())?;
        Ok(f)
    })?;
    timed("plan: every site checked, nothing connects", || {
        let r = f.sites(&["plan", "instantiate"], &f.out);
        r.ok();
        let d = doc(&r);
        check(d["dryRun"] == true && by_site(&d).len() == SITES, || format!("{d}"))?;
        check(f.kit_events() == 0 && !f.state.join("sites").exists(), || "a plan ran or wrote something".into())
    })?;
    timed("a template error stops every site before any connection", || {
        let cat = f.catalogue(&f.dir.path().join("pkg"), "broken.yaml", Some(4));
        let r =
            mgmt(&["sites", "apply", "instantiate", "-o", "json", "--sites", s(&cat), "--state-dir", s(&f.state)], &[]);
        r.fails(2, "site s05: ");
        check(r.stderr.contains(".tera:") && r.stderr.contains("network"), || r.stderr.clone())?;
        check(f.kit_events() == 0 && !f.state.join("sites").exists(), || "something ran".into())
    })?;
    timed("a bad rendered request stops every site before any connection", || {
        let bad = f.dir.path().join("bad");
        std::fs::create_dir_all(&bad).unwrap();
        f.render(&f.dir.path().join("sites.yaml"), &bad);
        let req_file = bad.join("s07/cluster/instantiate.json");
        let mut req: Value = serde_json::from_str(&std::fs::read_to_string(&req_file).unwrap()).unwrap();
        req["additionalParams"]["k8s_cluster_installation_param"]["master_node"]["pod_cidr"] = "10.0.0.0/99".into();
        std::fs::write(&req_file, req.to_string()).unwrap();
        let started = Instant::now();
        let r = f.sites(&["apply", "instantiate"], &bad);
        r.fails(2, "site s07: s07/cluster/instantiate.json");
        check(r.stderr.contains("pod_cidr") && r.stderr.contains("nothing was run on any site"), || r.stderr.clone())?;
        check(doc(&r)["errors"].as_array().unwrap().len() == 1, || r.stdout.clone())?;
        check(f.kit_events() == 0, || "a stand-in ran: something connected".into())?;
        check(!f.state.join("sites").join("s01.json").exists(), || "a site's status was written".into())?;
        check(started.elapsed().as_secs() < 10, || format!("refusing took {:?}", started.elapsed()))
    })?;
    let down = 5; // site s06
    let (_, down_node) = Fleet::nodes(down);
    timed("apply: 11 sites instantiate at once, the one with a stopped node fails naming it", || {
        f.lab.stop(&down_node.to_string());
        let r = f.sites(&["apply", "instantiate", "--max-sites", "12", "--max-sessions", "16"], &f.out);
        r.fails(1, "");
        let d = doc(&r);
        let sites = by_site(&d);
        for j in 0..SITES {
            let n = site_name(j);
            let st = &sites[&n];
            if j == down {
                let e = st["error"].as_str().unwrap_or("");
                check(
                    st["status"] == "failed"
                        && e.starts_with("s06-worker1: cannot connect to")
                        && e.contains(&f.lab.ip(down_node)),
                    || format!("{st}"),
                )?;
            } else {
                check(st["status"] == "done", || format!("{n}: {st}"))?;
                let nodes = f.k8s_nodes(j);
                check(nodes.len() == 2, || format!("{n}: kubectl get nodes on its master: {nodes:?}"))?;
            }
        }
        check(d["result"]["doneCount"] == SITES - 1 && d["result"]["failedCount"] == 1, || format!("{}", d["result"]))?;
        // The measure the refusal phases rely on sees a run: kit events exist now.
        check(f.kit_events() > 0, || "no kit event after an apply".into())
    })?;
    timed("restart the node; a re-run runs only the failed site", || {
        f.lab.start(&down_node.to_string());
        f.isolate(down_node, down);
        let cat = f.dir.path().join("sites.yaml");
        let r =
            mgmt(&["sites", "apply", "instantiate", "-o", "json", "--sites", s(&cat), "--state-dir", s(&f.state)], &[]);
        r.ok();
        let d = doc(&r);
        let sites = by_site(&d);
        for (n, st) in &sites {
            let want = if *n == site_name(down) { "done" } else { "skipped" };
            check(st["status"] == want, || format!("{n}: {st}"))?;
        }
        check(f.k8s_nodes(down).len() == 2, || format!("{:?}", f.k8s_nodes(down)))?;
        let st = mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&f.state)], &[]);
        st.ok();
        let all = doc(&st)["result"]["sites"].as_array().unwrap().clone();
        check(all.len() == SITES && all.iter().all(|x| x["status"] == "done" && x["op"] == "instantiate"), || {
            format!("{all:?}")
        })
    })?;
    timed("run-script on every host of two sites, arguments quoted", || {
        let script = f.dir.path().join("mark.sh");
        std::fs::write(&script, "#!/bin/sh\nprintf '%s\\n' \"$1\" > /tmp/site-mark\n").unwrap();
        let r = mgmt(
            &[
                "sites",
                "apply",
                "-o",
                "json",
                "--rendered",
                s(&f.out),
                "--state-dir",
                s(&f.state),
                "--only",
                "s01,s12",
                "run-script",
                s(&script),
                "a b;$(id)",
            ],
            &[],
        );
        r.ok();
        check(by_site(&doc(&r)).len() == 2, || r.stdout.clone())?;
        for i in [1, 2, 23, 24] {
            let o = f.lab.node_exec(&i.to_string(), &["cat", "/tmp/site-mark"]);
            let got = String::from_utf8_lossy(&o.stdout).into_owned();
            check(got == "a b;$(id)\n", || format!("node {i}: {got:?}"))?;
        }
        let o = f.lab.node_exec("3", &["sh", "-c", "test -e /tmp/site-mark && echo present || echo absent"]);
        check(String::from_utf8_lossy(&o.stdout).trim() == "absent", || "a site outside --only ran".into())
    })?;
    timed("a site whose inputs changed since it was done runs again; sites diff shows the change", || {
        let script = f.dir.path().join("mark.sh");
        let run = |verb: &str| {
            let a = ["sites", verb, "-o", "json", "--rendered", s(&f.out), "--state-dir", s(&f.state)];
            let mut a = a.to_vec();
            a.extend(["--only", "s01,s12", "run-script", s(&script), "again"]);
            mgmt(&a, &[])
        };
        let r = run("apply");
        r.ok();
        let st = by_site(&doc(&r));
        check(st.values().all(|x| x["status"] == "skipped"), || r.stdout.clone())?;
        // s12 re-rendered with another inventory (a comment is enough: its digest moves).
        let inv = f.out.join("s12/inventory.yaml");
        let text = std::fs::read_to_string(&inv).unwrap();
        std::fs::write(&inv, format!("{text}# changed after the run\n")).unwrap();
        let r = run("diff");
        r.ok();
        let d = by_site(&doc(&r));
        check(d["s01"]["inputs"] == "unchanged" && d["s01"]["diff"] == "", || r.stdout.clone())?;
        let diff = d["s12"]["diff"].as_str().unwrap_or("");
        check(d["s12"]["inputs"] == "changed", || r.stdout.clone())?;
        check(diff.starts_with("--- a/s12/inventory.yaml\n+++ b/s12/inventory.yaml\n"), || diff.to_string())?;
        check(diff.contains("\n+# changed after the run\n"), || diff.to_string())?;
        let r = run("apply");
        r.ok();
        let st = by_site(&doc(&r));
        check(st["s01"]["status"] == "skipped" && st["s12"]["status"] == "done", || r.stdout.clone())?;
        let o = f.lab.node_exec("24", &["cat", "/tmp/site-mark"]);
        check(String::from_utf8_lossy(&o.stdout) == "again\n", || "s12 did not run again".into())
    })?;
    timed("plan a scale-in of one site's worker; terminate two sites", || {
        let r = f.sites(&["plan", "scale-in", "--node", "s01-worker1", "--only", "s01"], &f.out);
        r.ok();
        check(r.stderr.contains(r#""host":"s01/s01-master1""#) && r.stderr.contains("drain"), || r.stderr.clone())?;
        let r = f.sites(&["apply", "terminate", "--only", "s01,s02"], &f.out);
        r.ok();
        check(!f.state.join("site-s01.json").exists() && f.state.join("site-s03.json").exists(), || {
            "terminate must remove the terminated sites' state only".into()
        })?;
        let st = doc(&mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&f.state)], &[]));
        let ops: Vec<String> =
            st["result"]["sites"].as_array().unwrap().iter().map(|x| x["op"].as_str().unwrap().to_string()).collect();
        check(ops[0] == "terminate" && ops[1] == "terminate" && ops[2] == "instantiate", || format!("{ops:?}"))
    })?;
    Ok(())
}

/// Sites whose nodes are nowhere (TEST-NET-1 addresses, nothing answers): a plan still
/// passes at once (it connects to nothing), and a bad request on one site refuses the whole
/// apply at once, naming site and file, with no status written.
fn plan_and_refusal_connect_to_nothing() -> R {
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path());
    let out = dir.path().join("out");
    let state = dir.path().join("state");
    std::fs::write(dir.path().join("kh"), "").unwrap();
    for j in 0..3 {
        let name = site_name(j);
        let d = out.join(&name);
        std::fs::create_dir_all(d.join("cluster")).unwrap();
        // As `sites render` writes it: the catalogue's declared references are the ones honoured.
        let site = json!({"name": name, "index": j, "labels": {"region": if j == 1 { "us" } else { "eu" }},
                          "package": pkg, "secret_refs": ["@env:SITES_TEST_NODE_PW"]});
        std::fs::write(d.join("site.json"), site.to_string()).unwrap();
        let inv = format!(
            "defaults: {{known_hosts: {}}}\ngroups:\n  master_instance:\n    - {{name: m1, ssh_ip: 192.0.2.{}}}\n  worker_instance:\n    - {{name: w1, ssh_ip: 192.0.2.{}}}\n",
            dir.path().join("kh").display(),
            10 + 2 * j,
            11 + 2 * j
        );
        std::fs::write(d.join("inventory.yaml"), inv).unwrap();
        let req = request("master_instance", "worker_instance", "ubuntu", "@env:SITES_TEST_NODE_PW", "masterNode_CP1");
        std::fs::write(d.join("cluster/instantiate.json"), req.to_string()).unwrap();
    }
    let run = |args: &[&str]| {
        let mut a = vec!["sites"];
        a.extend_from_slice(args);
        a.extend(["-o", "json", "--rendered", s(&out), "--state-dir", s(&state)]);
        let t = Instant::now();
        let r = mgmt(&a, &[("SITES_TEST_NODE_PW", "pw-sites-never-shown")]);
        (r, t.elapsed())
    };
    let (r, took) = run(&["plan", "instantiate", "--selector", "region=eu"]);
    r.ok();
    let d = doc(&r);
    let planned: Vec<String> = by_site(&d).into_keys().collect();
    check(planned == ["s01", "s03"], || format!("selector: {planned:?}"))?;
    check(r.stderr.contains(r#""host":"s01/m1""#) && r.stderr.contains(r#""event":"plan""#), || r.stderr.clone())?;
    check(took.as_secs() < 10, || format!("a plan took {took:?}: did it try to connect?"))?;
    check(!r.all().contains("pw-sites-never-shown"), || "the referenced password was shown".into())?;
    check(!state.exists(), || "a plan created the state directory".into())?;
    // A selection that matches nothing is bad input, not zero sites done.
    let (r, _) = run(&["plan", "instantiate", "--selector", "region=nowhere"]);
    r.fails(2, "--selector: region=nowhere matches no rendered site");
    // Nothing was ever applied: every input of every selected site is new; nothing is written.
    let (r, _) = run(&["diff", "instantiate", "--selector", "region=eu"]);
    r.ok();
    let d = doc(&r);
    let diffs = by_site(&d);
    check(diffs.len() == 2 && diffs.values().all(|v| v["inputs"] == "new"), || r.stdout.clone())?;
    check(diffs["s01"]["diff"].as_str().unwrap_or("").contains("+++ b/s01/cluster/instantiate.json"), || {
        r.stdout.clone()
    })?;
    check(!state.exists(), || "a diff created the state directory".into())?;
    // The referenced password unset: every site refused, naming the field.
    let (r, _) = {
        let mut a = vec!["sites", "plan", "instantiate", "-o", "json", "--rendered", s(&out), "--state-dir", s(&state)];
        a.extend(["--only", "s02"]);
        (mgmt(&a, &[]), ())
    };
    r.fails(
        2,
        "site s02: s02/cluster/instantiate.json: additionalParams.k8s_cluster_installation_param.master_node.password",
    );
    // A bad request on one site: the whole apply refused before any connection.
    std::fs::write(out.join("s02/cluster/instantiate.json"), "{\"additionalParams\": 1}").unwrap();
    let (r, took) = run(&["apply", "instantiate"]);
    r.fails(2, "site s02: s02/cluster/instantiate.json");
    check(took.as_secs() < 10, || format!("refusing took {took:?}"))?;
    check(!state.join("sites").join("s01.json").exists(), || "a status was written for a refused run".into())?;
    let (r, _) = run(&["apply", "instantiate", "--index", "3"]);
    r.fails(2, "--index");
    // Fixed, and run for real: nothing answers, the first site fails naming its node, and
    // under --fail-fast (one site at a time) the others never start; their status says why.
    let req = request("master_instance", "worker_instance", "ubuntu", "@env:SITES_TEST_NODE_PW", "masterNode_CP1");
    std::fs::write(out.join("s02/cluster/instantiate.json"), req.to_string()).unwrap();
    let (r, _) =
        run(&["apply", "instantiate", "--fail-fast", "--max-sites", "1", "--retry-for", "1", "--connect-timeout", "1"]);
    r.fails(1, "site s01: ");
    let sites = by_site(&doc(&r));
    check(
        sites["s01"]["status"] == "failed" && sites["s01"]["error"].as_str().unwrap_or("").contains("192.0.2.1"),
        || format!("{}", sites["s01"]),
    )?;
    check(sites["s02"]["status"] == "not-started" && sites["s03"]["status"] == "not-started", || r.stdout.clone())?;
    let why = "not started: the rollout stopped after 1 of 3 sites failed (--fail-fast)";
    check(sites["s03"]["error"] == why, || r.stdout.clone())?;
    check(r.stderr.contains("stops at the first failed site; an unreachable node is retried for 1s"), || {
        r.stderr.clone()
    })?;
    let st = mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&state)], &[]);
    st.ok();
    let all = doc(&st)["result"]["sites"].as_array().unwrap().clone();
    check(all.len() == 3 && all[0]["site"] == "s01" && all[0]["status"] == "failed", || format!("{all:?}"))?;
    check(all[1..].iter().all(|x| x["status"] == "not-started" && x["error"] == why), || format!("{all:?}"))?;
    Ok(())
}

/// From a catalogue: `--sites` renders first; a template error stops plan and apply before
/// anything connects, naming site, template file and line; a good catalogue plans.
fn catalogue_render_then_plan_and_template_errors() -> R {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pkg = package(d);
    std::fs::write(d.join("kh"), "").unwrap();
    let tpl = d.join("tpl");
    std::fs::create_dir_all(tpl.join("cluster")).unwrap();
    std::fs::write(
        tpl.join("inventory.yaml.tera"),
        "defaults: {known_hosts: {{ known_hosts | json }}}\ngroups:\n  master_instance:\n    - {name: m1, ssh_ip: {{ m }}}\n  worker_instance:\n    - {name: w1, ssh_ip: {{ w }}}\n",
    )
    .unwrap();
    let req = request("master_instance", "worker_instance", "ubuntu", "SECRET_REF", "masterNode_CP1");
    let req = serde_json::to_string_pretty(&req).unwrap().replace("\"SECRET_REF\"", "{{ secrets.node_pw | json }}");
    std::fs::write(tpl.join("cluster/instantiate.json.tera"), req).unwrap();
    let cat = |extra_site: &str| {
        format!(
            "apiVersion: mgmt-driver/v1\nkind: SiteCatalogue\ntemplates: tpl\npackage: {}\ndefaults: {{known_hosts: {}}}\n\
             secrets: {{node_pw: {{env: SITES_TEST_NODE_PW}}}}\nsites:\n  - name: par1\n    vars: {{m: 192.0.2.10, w: 192.0.2.11}}\n{extra_site}",
            pkg.display(),
            d.join("kh").display()
        )
    };
    std::fs::write(d.join("sites.yaml"), cat("  - name: ber2\n    vars: {m: 192.0.2.12, w: 192.0.2.13}\n")).unwrap();
    let out = d.join("out");
    let env = [("SITES_TEST_NODE_PW", "pw-sites-never-shown")];
    let sites = s(&d.join("sites.yaml")).to_string();
    let r = mgmt(
        &[
            "sites",
            "plan",
            "instantiate",
            "-o",
            "json",
            "--sites",
            &sites,
            "--out",
            s(&out),
            "--state-dir",
            s(&d.join("st")),
        ],
        &env,
    );
    r.ok();
    check(by_site(&doc(&r)).len() == 2, || r.stdout.clone())?;
    let rendered = std::fs::read_to_string(out.join("ber2/cluster/instantiate.json")).unwrap();
    check(rendered.contains("@env:SITES_TEST_NODE_PW") && !r.all().contains("pw-sites-never-shown"), || {
        rendered.clone()
    })?;
    // ber2 uses a variable nobody set, on line 6 of the inventory template.
    std::fs::write(d.join("sites.yaml"), cat("  - name: ber2\n    vars: {m: 192.0.2.12}\n")).unwrap();
    for verb in ["plan", "apply"] {
        let t = Instant::now();
        let r = mgmt(
            &["sites", verb, "instantiate", "-o", "json", "--sites", &sites, "--state-dir", s(&d.join("st"))],
            &env,
        );
        r.fails(2, "site ber2: ");
        check(r.stderr.contains("inventory.yaml.tera:6") && r.stderr.contains("`w`"), || r.stderr.clone())?;
        check(t.elapsed().as_secs() < 10 && !d.join("st/sites").exists(), || format!("{verb}: ran or wrote a status"))?;
    }
    Ok(())
}

/// The set-up commands of the sample catalogue's header (`#   ` lines), the lab's own excepted
/// (the test brings up its lab itself), with the sample's `target/edge-*` outputs moved to `tmp`.
fn sample_setup(header: &str, tmp: &Path) -> Vec<String> {
    header
        .lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("#   "))
        .filter(|l| !l.contains("lab.sh") && !l.contains("sites render"))
        .map(|l| l.split("  #").next().unwrap_or(l).trim().replace("target/edge-", &format!("{}/edge-", tmp.display())))
        .collect()
}

/// The shipped sample, set up exactly as its header says, runs its CNF: `sites apply
/// instantiate` then `sites apply cnf-instantiate` on one of its sites moved onto a kit lab,
/// and the sample chart's release is deployed on the site's master.
fn the_sample_set_up_as_its_header_says_runs_its_cnf() -> R {
    let sample = std::fs::read_to_string(repo().join("samples/sites/sites.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let setup = sample_setup(&sample, d);
    check(setup.iter().any(|c| c.contains("make-package.sh")), || format!("{setup:?}"))?;
    timed("the sample header's set-up commands", || {
        for c in &setup {
            let o = std::process::Command::new("bash").args(["-c", c]).current_dir(repo()).output().unwrap();
            check(o.status.success(), || {
                format!("{c}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
            })?;
        }
        Ok(())
    })?;
    let lab = Lab::up("st2", 82, 2, &["--kit"]);
    // The sample's head (defaults: the CNF, helm on the masters), its site par1 on this lab.
    let head = &sample[..sample.find("\nsecrets:").expect("the sample has secrets:")];
    let head: Vec<String> = head
        .lines()
        .map(|l| {
            if l.starts_with("templates:") {
                format!("templates: {}", repo().join("templates/edge").display())
            } else if l.starts_with("package:") {
                format!("package: {}", d.join("edge-package").display())
            } else {
                l.to_string()
            }
        })
        .collect();
    let cat = d.join("sites.yaml");
    std::fs::write(
        &cat,
        format!(
            "{}\nsecrets:\n  node_password: {{file: {}}}\nsites:\n  - name: par1\n    labels: {{region: eu}}\n    \
             vars: {{network: 198.18.{}.0/24, identity_file: {}, known_hosts: {}}}\n",
            head.join("\n"),
            lab.file("password").display(),
            lab.net,
            lab.file("id_ed25519").display(),
            lab.file("known_hosts").display()
        ),
    )
    .unwrap();
    let (out, state) = (d.join("out"), d.join("state"));
    let apply = |op: &str| {
        let a = ["sites", "apply", op, "-o", "json", "--sites", s(&cat), "--out", s(&out), "--state-dir", s(&state)];
        mgmt(&a, &[])
    };
    timed("sites apply instantiate on the sample", || {
        let r = apply("instantiate");
        r.ok();
        check(by_site(&doc(&r))["par1"]["status"] == "done", || r.stdout.clone())
    })?;
    timed("sites apply cnf-instantiate on the sample", || {
        let r = apply("cnf-instantiate");
        check(r.code == 0, || format!("{}\n{}", r.stdout, r.stderr))?;
        check(by_site(&doc(&r))["par1"]["status"] == "done", || r.stdout.clone())?;
        let o = lab.node_exec(
            "1",
            &["sh", "-c", "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n edge -o json; helm version --short"],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let list: Value = serde_json::from_str(text.lines().next().unwrap_or("")).unwrap_or(Value::Null);
        check(list[0]["name"] == "app" && list[0]["status"] == "deployed", || text.clone())?;
        check(text.contains("v3.17."), || format!("the master's helm is not the real one: {text}"))
    })?;
    Ok(())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .without_root(&[
            ("plan_and_refusal_connect_to_nothing", plan_and_refusal_connect_to_nothing),
            ("catalogue_render_then_plan_and_template_errors", catalogue_render_then_plan_and_template_errors),
        ])
        .needing_root(&[
            ("twelve_sites_at_once_with_one_down_and_a_resume", twelve_sites_at_once_with_one_down_and_a_resume),
            ("the_sample_set_up_as_its_header_says_runs_its_cnf", the_sample_set_up_as_its_header_says_runs_its_cnf),
        ])
}
