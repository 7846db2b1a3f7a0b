//! Host keys of rebuilt VMs and each VNF instance's own known_hosts (addresses a VIM hands out
//! again: a rolled-back instantiate retried, another instance), secrets out of the install
//! script's argv, and terminate's cleanup,
//! end to end on real sshd lab nodes with the lab kit (scripts/lab.sh `--kit`): the real
//! `mgmt-driver` binary, our shipped install scripts, `lab.sh rebuild` for a VNFM's heal (a
//! fresh disk and a NEW ssh host key at the same address).
//!
//! Needs root (namespaces); see tests/support/harness.rs for the skip policy.

use crate::support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, s, Cluster, R};
use support::mgmt;
use support::phase::{phase, phases};
use support::repo;

/// What the phases share.
struct Keys {
    c: Cluster,
    /// The known_hosts the hooks use (accept-new), and the request.
    kh: PathBuf,
    req: Value,
    /// What /etc/environment, the apt and systemd proxy places looked like on each node
    /// before install wrote anything (node 2: after its rebuild, before its reinstall).
    before: Vec<(usize, String)>,
}

/// What terminate must restore: the files install may write proxy settings to, their mode.
const PROXY_PLACES: &str = "cat /etc/environment; stat -c '%a %u:%g' /etc/environment; \
    ls -A /etc/apt/apt.conf.d; ls -A /etc/systemd/system/containerd.service.d /etc/systemd/system/kubelet.service.d 2>&1";

/// A sampler inside lab node `i`: every 20 ms, the argv (`ps`, from /proc/PID/cmdline) of every
/// process on the node, until /tmp/stop-sampler appears. The distinct argv lines seen go to a file
/// on the node, not to a pipe nobody reads while the run goes on: the driver's command lines are
/// kilobytes long, and a full pipe would stop the sampling half-way.
fn sampler(c: &Cluster, i: usize) -> Child {
    let script =
        "rm -f /tmp/stop-sampler /tmp/sampler-up; n=0; while [ ! -e /tmp/stop-sampler ] && [ $n -lt 6000 ]; do \
        ps -eww -o args=; [ $n -gt 0 ] || : >/tmp/sampler-up; n=$((n+1)); sleep 0.02; done | awk '!seen[$0]++' >/tmp/argv-seen";
    let child = Command::new("bash")
        .arg(repo().join("scripts/lab.sh"))
        .args(["exec", &i.to_string(), "--name", &c.lab.name, "--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the argv sampler");
    // The watch must be sampling before the run it watches starts.
    let up = (0..250).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.on(i, "test -e /tmp/sampler-up && echo up").trim() == "up"
    });
    assert!(up, "the argv sampler on node {i} did not start within 5 s");
    child
}

fn stop_sampler(c: &Cluster, i: usize, child: Child) -> String {
    c.on(i, "touch /tmp/stop-sampler");
    child.wait_with_output().unwrap();
    c.on(i, "cat /tmp/argv-seen")
}

/// The secret half of every bootstrap token the kit's cluster knows, and its certificate key.
fn token_secrets(c: &Cluster) -> Vec<String> {
    let k = c.kit();
    let mut s: Vec<String> = k["cluster"]["tokens"]
        .as_object()
        .map(|t| t.keys().filter_map(|t| t.split('.').nth(1)).map(String::from).collect())
        .unwrap_or_default();
    s.extend(k["cluster"]["certificate_key"]["key"].as_str().map(String::from));
    s
}

fn fingerprint_of(pubkey_line: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("k.pub");
    std::fs::write(&f, pubkey_line).unwrap();
    let o = Command::new("ssh-keygen").arg("-l").arg("-f").arg(&f).output().unwrap();
    String::from_utf8_lossy(&o.stdout).split_whitespace().nth(1).unwrap_or("").to_string()
}

/// The lab's current key line for node `i` (`lab.sh` keeps DIR/known_hosts up to date).
fn lab_key(c: &Cluster, i: usize) -> String {
    let kh = std::fs::read_to_string(c.lab.file("known_hosts")).unwrap();
    let ip = c.lab.ip(i);
    kh.lines().find(|l| l.split(' ').next() == Some(ip.as_str())).unwrap_or_default().to_string()
}

fn rebuild(c: &Cluster, i: usize) {
    let o = c.lab.script(&["rebuild".into(), i.to_string(), "--name".into(), c.lab.name.clone()]);
    assert!(o.status.success(), "lab rebuild {i}: {}", String::from_utf8_lossy(&o.stderr));
}

/// The JSON events (stderr of `-o json`) of one kind.
fn events(stderr: &str, kind: &str) -> Vec<Value> {
    stderr.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|e| e["event"] == kind).collect()
}

fn rebuilt_vms() -> R {
    let mut t = phase("bring up 1 master + 1 worker (accept-new known_hosts), a proxy and Helm", || {
        let c = Cluster::new("k2", 101, 2, &[1], &[2], true);
        let kh = c.dir.path().join("known_hosts");
        let inv = format!(
            "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: accept-new\n\
             groups:\n  master_instance:\n    - {{name: {}, ssh_ip: {}}}\n  worker_instance:\n    - {{name: {}, ssh_ip: {}}}\n",
            c.lab.file("id_ed25519").display(),
            kh.display(),
            c.lab.node(1),
            c.lab.ip(1),
            c.lab.node(2),
            c.lab.ip(2)
        );
        std::fs::write(&c.inv, inv).unwrap();
        // A Tacker-contract script: ours without the marker line (it takes -t/-k).
        let ours = std::fs::read_to_string(c.pkg.join("Scripts/install_k8s_cluster.sh")).unwrap();
        let tacker: String =
            ours.lines().filter(|l| *l != "# mgmt-driver: secrets-from-env").map(|l| format!("{l}\n")).collect();
        assert_ne!(ours, tacker, "our script carries the marker");
        std::fs::write(c.pkg.join("Scripts/tacker_install.sh"), tacker).unwrap();
        let mut req = c.request();
        let p = &mut req["additionalParams"]["k8s_cluster_installation_param"];
        p["proxy"] = json!({"http_proxy": "http://proxy.lab:3128", "https_proxy": "http://proxy.lab:3128", "no_proxy": "10.0.0.1"});
        p["helm_installation_script_path"] = "Scripts/install_helm.sh".into();
        // Debian 12 (the lab nodes' os-release) is supported: no K8S_ALLOW_ANY_OS.
        p.as_object_mut().unwrap().remove("script_environment");
        // An operator's own setting, which terminate must keep.
        c.on(1, "echo 'OPERATOR_SETTING=keep' >> /etc/environment");
        let before = vec![(1, c.on(1, PROXY_PLACES)), (2, c.on(2, PROXY_PLACES))];
        Ok(Keys { c, kh, req, before })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate: no argv (script, kubeadm) holds a join secret", instantiate_without_token_in_argv),
            ("heal-end of a rebuilt worker re-learns its key, and only its key", heal_relearns_the_rebuilt_worker),
            ("scale-out onto a reused address re-learns that worker's key", scale_out_onto_a_reused_address),
            ("a whole-VNF heal (SOL003) re-learns every rebuilt node's key", whole_vnf_heal_relearns_every_node),
            ("terminate --reset-nodes restores the proxy places", terminate_restores_proxy_places),
            ("a rebuilt node that was not healed is refused, by name", unhealed_rebuild_is_refused),
        ],
    )
}

fn instantiate_without_token_in_argv(t: &mut Keys) -> R {
    let c = &t.c;
    c.kit_ctl(&["set-delay", "2"]);
    let sampling = sampler(c, 2);
    let r = c.instantiate(&t.req);
    let seen = stop_sampler(c, 2, sampling);
    r.ok();
    let script: Vec<&str> = seen.lines().filter(|l| l.starts_with("bash ./install_k8s_cluster.sh -w")).collect();
    check(!script.is_empty(), || {
        format!("the sampler never saw the worker's install script:\n{seen}\n{}\n{}", r.stdout, r.stderr)
    })?;
    // Positive control: the watch sees kubeadm itself while it joins (the kit's join sleeps 2 s).
    check(seen.lines().any(|l| l.contains("/kubeadm join ")), || {
        format!("the sampler never saw the worker's kubeadm join:\n{seen}")
    })?;
    let secrets = token_secrets(c);
    check(secrets.len() >= 2, || format!("no join token and certificate key in the kit state: {secrets:?}"))?;
    for l in &script {
        check(!l.contains(" -t "), || format!("the install script got -t: {l}"))?;
    }
    for l in seen.lines() {
        check(!secrets.iter().any(|s| l.contains(s.as_str())), || {
            format!("a join secret (token or certificate key) is in a process's argv: {l}")
        })?;
    }
    let kh = std::fs::read_to_string(&t.kh).unwrap();
    check(kh.lines().filter(|l| !l.is_empty()).count() == 2, || format!("both nodes learned:\n{kh}"))
}

fn heal_relearns_the_rebuilt_worker(t: &mut Keys) -> R {
    let c = &t.c;
    let w = c.lab.node(2);
    // Other lines of the file must come through byte for byte.
    let learned = std::fs::read_to_string(&t.kh).unwrap();
    let other = "# operator's note\r\n198.51.100.7 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDUwKkBIwHQNssAGhDNBL+vzk5ieIlYs0NqfhXmJfF1f\n";
    std::fs::write(&t.kh, format!("{other}{learned}")).unwrap();
    let old = fingerprint_of(&lab_key(c, 2));
    let heal = c.write("heal-w.json", &json!({"vnfcInstanceId": [w]}));
    c.hook("heal-start", Some(&heal), &[]).ok();
    rebuild(c, 2);
    let new_line = lab_key(c, 2);
    let new = fingerprint_of(&new_line);
    check(old != new && !new.is_empty(), || format!("rebuild kept the key {old}"))?;
    t.before[1].1 = c.on(2, PROXY_PLACES);

    // The plan shows the step, and the node's connection as a re-learn.
    let mut req = t.req.clone();
    req["vnfcInstanceId"] = json!([w]);
    req["additionalParams"]["k8s_cluster_installation_param"]["script_path"] = "Scripts/tacker_install.sh".into();
    let heal_end = c.write("heal-end.json", &req);
    let plan = c.hook("heal-end", Some(&heal_end), &["--dry-run"]);
    plan.ok();
    check(plan.all().contains("re-learn their host keys") && plan.all().contains("host key: re-learn"), || {
        format!("the plan does not show the re-learn:\n{}", plan.all())
    })?;
    check(std::fs::read_to_string(&t.kh).unwrap() == format!("{other}{learned}"), || {
        "a plan changed known_hosts".into()
    })?;

    // A key revoked in known_hosts stays refused, even for the VM being healed.
    let key = new_line.split(' ').skip(1).collect::<Vec<_>>().join(" ");
    std::fs::write(&t.kh, format!("{other}{learned}@revoked * {key}\n")).unwrap();
    c.hook("heal-end", Some(&heal_end), &[]).fails(1, "REVOKED HOST KEY");
    std::fs::write(&t.kh, format!("{other}{learned}")).unwrap();

    // The real heal, with the Tacker-contract script (no marker): it still gets -t TOKEN.
    let sampling = sampler(c, 2);
    let r = c.hook("heal-end", Some(&heal_end), &[]);
    let seen = stop_sampler(c, 2, sampling);
    r.ok();
    let ev = events(&r.stderr, "host_key_relearned");
    check(ev.len() == 1 && ev[0]["host"] == w.as_str() && ev[0]["old"] == json!([old]) && ev[0]["new"] == new, || {
        format!("want one host_key_relearned event for {w} ({old} -> {new}): {ev:?}")
    })?;
    let kh = std::fs::read_to_string(&t.kh).unwrap();
    let ip2 = format!("{} ", c.lab.ip(2));
    let kept: String = learned.split_inclusive('\n').filter(|l| !l.starts_with(&ip2)).collect();
    let want = format!("{other}{kept}{ip2}{key}\n");
    check(kh == want, || format!("known_hosts after the heal:\n{kh}\nwant:\n{want}"))?;
    check(c.k8s_nodes().contains(&"worker12".to_string()), || format!("not rejoined: {:?}", c.k8s_nodes()))?;
    let secrets = token_secrets(c);
    // (Uploaded under the contract's name, install_k8s_cluster.sh.)
    let tacker: Vec<&str> = seen.lines().filter(|l| l.starts_with("bash ./install_k8s_cluster.sh -w")).collect();
    check(
        !tacker.is_empty()
            && tacker.iter().all(|l| l.contains(" -t ") && secrets.iter().any(|s| l.contains(s.as_str()))),
        || format!("a script without the marker must get -t TOKEN: {seen}"),
    )
}

fn scale_out_onto_a_reused_address(t: &mut Keys) -> R {
    let c = &t.c;
    let w = c.lab.node(2);
    let scale_in =
        c.write("scale-in.json", &json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    c.hook("scale-start", Some(&scale_in), &["--node", &w]).ok();
    check(!c.k8s_nodes().contains(&"worker12".to_string()), || format!("not scaled in: {:?}", c.k8s_nodes()))?;
    let old = fingerprint_of(&lab_key(c, 2));
    // The VNFM creates a new VM for the new worker, at the address the old one had.
    rebuild(c, 2);
    let new = fingerprint_of(&lab_key(c, 2));
    t.before[1].1 = c.on(2, PROXY_PLACES);
    let before = std::fs::read_to_string(&t.kh).unwrap();
    let scale_out =
        c.write("scale-out.json", &json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}));
    let r = c.hook("scale-end", Some(&scale_out), &[]);
    r.ok();
    let ev = events(&r.stderr, "host_key_relearned");
    check(ev.len() == 1 && ev[0]["host"] == w.as_str() && ev[0]["old"] == json!([old]) && ev[0]["new"] == new, || {
        format!("want one host_key_relearned event for {w} ({old} -> {new}): {ev:?}")
    })?;
    let ip2 = format!("{} ", c.lab.ip(2));
    let kept: String = before.split_inclusive('\n').filter(|l| !l.starts_with(&ip2)).collect();
    let after = std::fs::read_to_string(&t.kh).unwrap();
    check(after.starts_with(&kept) && after.lines().filter(|l| l.starts_with(&ip2)).count() == 1, || {
        format!("known_hosts before:\n{before}\nafter:\n{after}")
    })?;
    check(c.k8s_nodes().contains(&"worker12".to_string()), || format!("not joined: {:?}", c.k8s_nodes()))
}

fn whole_vnf_heal_relearns_every_node(t: &mut Keys) -> R {
    let c = &t.c;
    let heal = c.write("heal-all.json", &json!({"additionalParams": {"all": true}}));
    c.hook("heal-start", Some(&heal), &[]).ok();
    let old: Vec<String> = [1, 2].iter().map(|&i| fingerprint_of(&lab_key(c, i))).collect();
    // The VNFM deletes every VM (the kit's cluster goes with them) and creates new ones.
    c.fresh_vm(2);
    c.fresh_vm(1);
    rebuild(c, 2);
    rebuild(c, 1);
    let new: Vec<String> = [1, 2].iter().map(|&i| fingerprint_of(&lab_key(c, i))).collect();
    c.on(1, "echo 'OPERATOR_SETTING=keep' >> /etc/environment");
    t.before = vec![(1, c.on(1, PROXY_PLACES)), (2, c.on(2, PROXY_PLACES))];
    let before = std::fs::read_to_string(&t.kh).unwrap();
    let r = c.hook("heal-end", Some(&heal), &[]);
    r.ok();
    let ev = events(&r.stderr, "host_key_relearned");
    for (k, i) in [1, 2].into_iter().enumerate() {
        let n = c.lab.node(i);
        let e: Vec<&Value> = ev.iter().filter(|e| e["host"] == n.as_str()).collect();
        check(e.len() == 1 && e[0]["old"] == json!([old[k]]) && e[0]["new"] == new[k], || {
            format!("want one host_key_relearned event for {n} ({} -> {}): {ev:?}", old[k], new[k])
        })?;
    }
    // The operator's lines are untouched; each node has one line, with its new key.
    let ours = |l: &&str| [1, 2].iter().any(|&i| l.starts_with(&format!("{} ", c.lab.ip(i))));
    let after = std::fs::read_to_string(&t.kh).unwrap();
    let others = |t: &str| t.lines().filter(|l| !ours(l)).map(String::from).collect::<Vec<_>>();
    check(others(&before) == others(&after) && after.lines().filter(ours).count() == 2, || {
        format!("known_hosts before:\n{before}\nafter:\n{after}")
    })?;
    let nodes = c.k8s_nodes();
    check(nodes.contains(&"master11".to_string()) && nodes.contains(&"worker12".to_string()), || format!("{nodes:?}"))
}

fn terminate_restores_proxy_places(t: &mut Keys) -> R {
    let c = &t.c;
    // Install did write them (else this phase proves nothing).
    let during = c.on(1, PROXY_PLACES);
    check(during.contains("BEGIN mgmt-driver proxy") && during.contains("95mgmt-driver-proxy"), || {
        format!("install wrote no proxy settings on the master:\n{during}")
    })?;
    let during2 = c.on(2, PROXY_PLACES);
    check(during2.contains("http-proxy.conf"), || format!("install wrote no containerd drop-in:\n{during2}"))?;
    let r = c.hook("terminate-end", None, &["--reset-nodes"]);
    r.ok();
    for (i, before) in &t.before {
        let after = c.on(*i, PROXY_PLACES);
        check(after == *before, || format!("node {i}: before install:\n{before}\nafter terminate:\n{after}"))?;
    }
    check(c.on(1, "cat /etc/environment").contains("OPERATOR_SETTING=keep"), || "the operator's line went".into())
}

fn unhealed_rebuild_is_refused(t: &mut Keys) -> R {
    let c = &t.c;
    rebuild(c, 1);
    let before = std::fs::read_to_string(&t.kh).unwrap();
    let r = c.instantiate(&t.req);
    r.fails(1, "REMOTE HOST KEY HAS CHANGED");
    let d = doc(&r);
    let errs = d["errors"].to_string();
    check(errs.contains(&c.lab.node(1)) && errs.contains("host_key"), || {
        format!("the error must name the node: {errs}")
    })?;
    check(events(&r.stderr, "host_key_relearned").is_empty(), || "nothing is re-learned on instantiate".into())?;
    check(std::fs::read_to_string(&t.kh).unwrap() == before, || "known_hosts changed on a refusal".into())?;
    Ok(())
}

/// What the per-instance trial shares: the lab, and the instance's own known_hosts.
struct Own {
    c: Cluster,
    kh: PathBuf,
}

/// A hook document as the VNFM's shim sends it, with the operator's inventory (which names no
/// known_hosts: the conductor user's default until issue 22) and state directory.
fn hook_doc(c: &Cluster, id: &str, operation: &str, request: Value) -> PathBuf {
    let d = json!({"apiVersion": "mgmt-driver.hook/v1", "operation": operation, "request": request,
        "vnf_instance": {"id": id}, "grant_request": null, "grant_response": null,
        "tmp_csar_dir": c.pkg, "user_script_err_handling_data": {},
        "options": {"inventory": c.inv, "state_dir": c.state}});
    c.write(&format!("{operation}.json"), &d)
}

fn vnfm_hook(c: &Cluster, operation: &str, request: Value) -> support::Run {
    vnfm_hook_for(c, &c.id, operation, request)
}

/// [`vnfm_hook`] for VNF instance `id`.
fn vnfm_hook_for(c: &Cluster, id: &str, operation: &str, request: Value) -> support::Run {
    let input = hook_doc(c, id, operation, request);
    mgmt(&["hook", "--retry-for", "20", "--input", s(&input)], &[])
}

fn instance_keys() -> R {
    let mut t = phase("bring up 1 master + 1 worker, an operator's inventory that names no known_hosts", || {
        let c = Cluster::new("k3", 102, 2, &[1], &[2], true);
        let inv = format!(
            "defaults:\n  user: root\n  identity_file: {}\n  host_key_check: accept-new\n\
             groups:\n  master_instance:\n    - {{name: {}, ssh_ip: {}}}\n  worker_instance:\n    - {{name: {}, ssh_ip: {}}}\n",
            c.lab.file("id_ed25519").display(),
            c.lab.node(1),
            c.lab.ip(1),
            c.lab.node(2),
            c.lab.ip(2)
        );
        std::fs::write(&c.inv, inv).unwrap();
        let kh = c.state.join(format!("{}.known_hosts", c.id));
        Ok(Own { c, kh })
    })?;
    phases(
        &mut t,
        &[
            ("instantiate learns into the instance's own known_hosts", own_instantiate),
            (
                "instantiate_rollback_start forgets it; the retry on new VMs at the same addresses learns afresh",
                rollback_and_retry,
            ),
            ("a changed key on a node the instance holds is still refused", held_node_changed_key_is_refused),
            (
                "terminate forgets; another instance on VMs at the same addresses learns afresh",
                another_instance_reuses_the_addresses,
            ),
        ],
    )
}

fn own_instantiate(t: &mut Own) -> R {
    let c = &t.c;
    vnfm_hook(c, "instantiate_end", c.request()).ok();
    let kh = std::fs::read_to_string(&t.kh).unwrap_or_default();
    check(kh.lines().filter(|l| !l.is_empty()).count() == 2, || {
        format!("both nodes learned into {}:\n{kh}", t.kh.display())
    })?;
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&t.kh).unwrap().permissions()) & 0o777;
    check(mode == 0o600, || format!("{} has mode {mode:o}", t.kh.display()))?;
    check(!c.state.join("known_hosts").exists(), || "the shared known_hosts was written".into())
}

fn rollback_and_retry(t: &mut Own) -> R {
    let c = &t.c;
    vnfm_hook(c, "instantiate_rollback_start", c.request()).ok();
    check(!t.kh.exists(), || format!("{} outlived the rolled-back instance", t.kh.display()))?;
    // Tacker deletes the VMs; the retry's new VMs get the same addresses and new host keys.
    let old: Vec<String> = [1, 2].iter().map(|&i| fingerprint_of(&lab_key(c, i))).collect();
    c.fresh_vm(2);
    c.fresh_vm(1);
    rebuild(c, 2);
    rebuild(c, 1);
    let new: Vec<String> = [1, 2].iter().map(|&i| fingerprint_of(&lab_key(c, i))).collect();
    check(old.iter().zip(&new).all(|(o, n)| o != n), || format!("rebuild kept a key: {old:?} {new:?}"))?;
    let r = vnfm_hook(c, "instantiate_end", c.request());
    r.ok();
    check(events(&r.stderr, "host_key_relearned").is_empty(), || "nothing is re-learned on instantiate".into())?;
    let nodes = c.k8s_nodes();
    check(nodes.contains(&"master11".to_string()) && nodes.contains(&"worker12".to_string()), || format!("{nodes:?}"))
}

fn held_node_changed_key_is_refused(t: &mut Own) -> R {
    let c = &t.c;
    // The master's VM is replaced behind the VNFM's back (the kit forgets its cluster with it).
    c.fresh_vm(1);
    rebuild(c, 1);
    let before = std::fs::read_to_string(&t.kh).unwrap();
    let r = vnfm_hook(c, "instantiate_end", c.request());
    check(r.code != 0 && r.all().contains("REMOTE HOST KEY HAS CHANGED"), || format!("want a refusal:\n{}", r.all()))?;
    check(std::fs::read_to_string(&t.kh).unwrap() == before, || "known_hosts changed on a refusal".into())
}

fn another_instance_reuses_the_addresses(t: &mut Own) -> R {
    let c = &t.c;
    vnfm_hook(c, "terminate_end", json!({"terminationType": "FORCEFUL"})).ok();
    check(!t.kh.exists(), || format!("{} outlived the terminated instance", t.kh.display()))?;
    // Tacker deletes the VMs; a new VNF instance's VMs get the recycled addresses.
    c.fresh_vm(2);
    c.fresh_vm(1);
    rebuild(c, 2);
    rebuild(c, 1);
    let other = "0f6cd3a1-1d5e-4c1b-9a55-3f0e7c2d8b41";
    let r = vnfm_hook_for(c, other, "instantiate_end", c.request());
    r.ok();
    let kh = std::fs::read_to_string(c.state.join(format!("{other}.known_hosts"))).unwrap_or_default();
    check(kh.lines().filter(|l| !l.is_empty()).count() == 2, || format!("the new instance learned both nodes:\n{kh}"))?;
    vnfm_hook_for(c, other, "terminate_end", json!({"terminationType": "FORCEFUL"})).ok();
    Ok(())
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!()).needing_root(&[("rebuilt_vms", rebuilt_vms), ("instance_keys", instance_keys)])
}
