//! Faults against the real lab: the controller interrupted (SIGINT, SIGTERM) or killed
//! (SIGKILL) while commands run, a node flooding stdout, sshd killed in the middle of an install,
//! two hooks on one instance at once, and a full disk under the state store. Each test ends in a
//! clear error naming node and step, or in completion: never a hang (every run has a deadline),
//! never a remote process left running (checked out of band, inside the node's namespaces).
//!
//! Needs root (namespaces, a tmpfs mount). See docs/reliability.md for the table of faults.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use support::harness::{shared_lab, Suite};
use support::kit::{check, doc, s, Cluster, R};
use support::phase::phase;
use support::{inventory, spawn, Lab, Run};

const NODES: usize = 3;

fn lab() -> &'static Lab {
    shared_lab()
}

/// Inventory of the shared lab's nodes: root by key, or the lab user by password (for sudo).
fn inv(dir: &Path, as_root: bool) -> std::path::PathBuf {
    let lab = lab();
    let who = if as_root {
        format!("  user: root\n  identity_file: {}\n", lab.file("id_ed25519").display())
    } else {
        "  user: mduser\n  password_env: LAB_PW\n  become_password_env: LAB_PW\n".to_string()
    };
    let mut y = format!(
        "defaults:\n  known_hosts: {}\n  host_key_check: strict\n{who}groups:\n  g:\n",
        lab.file("known_hosts").display()
    );
    for i in 1..=NODES {
        y.push_str(&format!("    - {{name: {}, ssh_ip: {}}}\n", lab.node(i), lab.ip(i)));
    }
    inventory(dir, "inv.yaml", &y)
}

/// Processes whose command line holds `marker` on lab node `i` (out of band: `lab.sh exec`).
fn on_node(lab: &Lab, i: usize, marker: &str) -> String {
    let o = lab.node_exec(&i.to_string(), &["pgrep", "-af", marker]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Poll until `cond` holds, at most `within`.
fn until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Nothing with `marker` runs on any of `nodes` (allowing a few seconds for TERM, then KILL).
fn none_left(lab: &Lab, nodes: &[usize], marker: &str) -> R {
    let gone = until(Duration::from_secs(6), || nodes.iter().all(|&i| on_node(lab, i, marker).is_empty()));
    check(gone, || {
        let left: Vec<String> =
            nodes.iter().map(|&i| format!("{}: {}", lab.node(i), on_node(lab, i, marker))).collect();
        format!("left running on the nodes:\n{}", left.join("\n"))
    })
}

fn marker(what: &str) -> String {
    format!("mgmtd-fault-{what}-{}", fastrand::u32(..))
}

// ---------------------------------------------------------------- the controller stopped

/// `exec -- 'sleep 300'` on every node, the controller stopped by `sig`: the exit code, the
/// report, and no `sleep` left on any node.
fn stop_exec(sig: &str, become_: bool) -> R {
    let d = tempfile::tempdir()?;
    let inv = inv(d.path(), !become_);
    let m = marker(&format!("{}-{sig}", if become_ { "sudo" } else { "login" }));
    let script = format!("echo started; sleep 300; : {m}");
    let mut args = vec!["exec", "-o", "json", "-i", s(&inv)];
    if become_ {
        args.push("--become");
    }
    args.extend(["--", &script]);
    let pw = lab().password();
    let run = spawn(&args, &[("LAB_PW", &pw)]);
    let all = [1, 2, 3];
    let started = until(Duration::from_secs(15), || all.iter().all(|&i| !on_node(lab(), i, &m).is_empty()));
    if !started {
        run.signal("KILL");
        return Err(format!("the command never ran on every node: {}", run.wait(Duration::from_secs(5)).all()).into());
    }
    if become_ {
        // The command runs as root under sudo; its leash stays with the login user.
        let ps = lab().node_exec("1", &["ps", "-eo", "user=,args="]);
        let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
        let mine: Vec<&str> = ps.lines().filter(|l| l.contains(&m)).collect();
        let has = |user: &str, start: &str| {
            mine.iter().any(|l| l.strip_prefix(user).is_some_and(|a| a.trim_start().starts_with(start)))
        };
        check(has("root", "timeout -k 3 3600 sh -c") && has("mduser", "sh -c"), || mine.join("\n"))?;
    }
    run.signal(sig);
    let r = run.wait(Duration::from_secs(10));
    match sig {
        "INT" | "TERM" => {
            let code = if sig == "INT" { 130 } else { 143 };
            r.fails(code, &format!("interrupted by SIG{sig}"));
            for i in all {
                let n = lab().node(i);
                check(r.stderr.contains(&n) && r.stdout.contains(&format!("\"node\":\"{n}\"")), || {
                    format!("{n} must be named as interrupted:\n{}", r.all())
                })?;
            }
            let d = doc(&r);
            check(d["result"]["interrupted"]["interrupted"].as_array().map(Vec::len) == Some(3), || d.to_string())?;
            check(d["errors"][0]["kind"] == "interrupted", || d.to_string())?;
        }
        _ => check(r.code == -1, || format!("expected death by SIGKILL: {}", r.code))?,
    }
    none_left(lab(), &all, &m)
}

fn sigint_sigterm_sigkill_stop_remote_commands() -> R {
    for sig in ["INT", "TERM", "KILL"] {
        phase(&format!("exec sleep 300 on 3 nodes, controller gets SIG{sig}"), || stop_exec(sig, false))?;
    }
    Ok(())
}

fn with_become_the_root_commands_stop_too() -> R {
    for sig in ["TERM", "KILL"] {
        phase(&format!("exec --become sleep 300 on 3 nodes, controller gets SIG{sig}"), || stop_exec(sig, true))?;
    }
    Ok(())
}

/// `--parallel 1` over 3 nodes, SIGINT while the second runs: the first is reported finished,
/// the second cut off in its command, the third never started; nothing is left running.
fn interrupted_fanout_names_finished_cut_off_and_unstarted_nodes() -> R {
    let d = tempfile::tempdir()?;
    let inv = inv(d.path(), true);
    let m = marker("parallel");
    let first = lab().node(1);
    let script = format!("if [ \"$(hostname)\" = {first} ]; then echo quick; else sleep 300; fi; : {m}");
    let run = spawn(&["exec", "-o", "json", "--parallel", "1", "-i", s(&inv), "--", &script], &[]);
    if !until(Duration::from_secs(15), || !on_node(lab(), 2, &m).is_empty()) {
        run.signal("KILL");
        return Err(format!("the command never ran on node 2: {}", run.wait(Duration::from_secs(5)).all()).into());
    }
    run.signal("INT");
    let r = run.wait(Duration::from_secs(10));
    r.fails(130, "interrupted by SIGINT");
    let d = doc(&r);
    let i = &d["result"]["interrupted"];
    check(i["finished"] == serde_json::json!([first]), || d.to_string())?;
    check(i["interrupted"][0]["node"] == lab().node(2) && i["interrupted"][0]["command"] == script, || d.to_string())?;
    check(i["notStarted"] == serde_json::json!([lab().node(3)]), || d.to_string())?;
    check(r.stderr.contains(&format!("  finished: {first}\n")), || r.stderr.clone())?;
    none_left(lab(), &[1, 2, 3], &m)
}

/// run-script sends its script and runs it in one exec (the leash receives the file first):
/// the output is the script's alone, a second run finds the script in place, as root and
/// through sudo with a password (which reaches neither the file nor the script); and a
/// controller killed while the script runs leaves nothing running on any node.
fn run_script_in_one_exec_keeps_the_leash() -> R {
    let d = tempfile::tempdir()?;
    let m = marker("script");
    let script = d.path().join("job.sh");
    // `cat`: stdin is /dev/null (neither the file nor the password line reaches the script).
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$(id -un) $1\"\ncat\n[ \"$1\" != sleep ] || sh -c 'sleep 300; : {m}'\n"),
    )?;
    let pw = lab().password();
    for (as_root, who) in [(true, "root"), (false, "root")] {
        let inv = inv(d.path(), as_root);
        let mut args = vec!["run-script", "-o", "json", "-i", s(&inv)];
        if !as_root {
            args.push("--become");
        }
        args.extend([s(&script), "hi"]);
        for pass in ["written", "in place"] {
            let r = support::mgmt(&args, &[("LAB_PW", &pw)]);
            r.ok();
            let doc = doc(&r);
            let hosts = doc["result"]["hosts"].as_array().cloned().unwrap_or_default();
            check(hosts.len() == NODES, || doc.to_string())?;
            check(hosts.iter().all(|h| h["stdout"] == format!("{who} hi\n")), || format!("{pass}: {doc}"))?;
            check(!r.stdout.contains(&pw), || "the password is in the output".into())?;
        }
    }
    let inv = inv(d.path(), false);
    let run = spawn(&["run-script", "-o", "json", "--become", "-i", s(&inv), s(&script), "sleep"], &[("LAB_PW", &pw)]);
    let all = [1, 2, 3];
    if !until(Duration::from_secs(15), || all.iter().all(|&i| !on_node(lab(), i, &m).is_empty())) {
        run.signal("KILL");
        return Err(format!("the script never ran on every node: {}", run.wait(Duration::from_secs(5)).all()).into());
    }
    run.signal("KILL");
    run.wait(Duration::from_secs(10));
    none_left(lab(), &all, &m)
}

/// A timeout of 0 or none means no limit, and a finished command still ends at once (the leash
/// does not keep it waiting for the connection).
fn no_timeout_runs_and_finishes_normally() -> R {
    let d = tempfile::tempdir()?;
    let inv = inv(d.path(), true);
    let r =
        support::mgmt(&["exec", "-o", "json", "--timeout", "none", "-i", s(&inv), "--", "sleep 0.2; echo fine"], &[]);
    r.ok();
    check(r.elapsed < Duration::from_secs(10), || format!("took {:?}", r.elapsed))?;
    let d = doc(&r);
    check(d["result"]["hosts"].as_array().unwrap().iter().all(|h| h["stdout"] == "fine\n"), || d.to_string())
}

// ---------------------------------------------------------------- a node that floods stdout

/// The controller's peak resident memory (kB) while one node prints 256 MiB and nobody reads
/// the controller's stdout until the node is done: the event queue must stay bounded.
#[allow(clippy::print_stderr)] // the measurement goes to the test log (the lint guards the binary's output)
fn a_flooding_node_does_not_exhaust_controller_memory() -> R {
    use std::io::Read;
    let d = tempfile::tempdir()?;
    let inv = inv(d.path(), true);
    let m = marker("flood");
    // 256 Mi bytes in lines of 1 KiB; `: marker` keeps the flood findable out of band.
    let script = format!("head -c 268435456 /dev/zero | tr '\\0' x | fold -w 1023; : {m}");
    let mut child =
        support::command(&["exec", "-o", "plain", "--host", &lab().node(1), "-i", s(&inv), "--", &script], &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
    let pid = child.id();
    let hwm = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
            })
            .unwrap_or(0)
    };
    let start = Instant::now();
    let mut peak = 0;
    // Do not read stdout while the node floods: the renderer blocks on the full pipe.
    let _ = until(Duration::from_secs(3), || !on_node(lab(), 1, &m).is_empty());
    let done = until(Duration::from_secs(60), || {
        peak = peak.max(hwm());
        on_node(lab(), 1, &m).is_empty()
    });
    peak = peak.max(hwm());
    // Now drain: what was queued is printed, then the warning about what was not.
    let mut err = child.stderr.take().unwrap();
    let e = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = err.read_to_string(&mut v);
        v
    });
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out)?;
    let st = child.wait()?;
    let err = e.join().unwrap();
    peak = peak.max(hwm());
    eprintln!(
        "flood: 256 MiB from one node, controller peak RSS {} MiB, {} MiB shown, in {:.1}s",
        peak / 1024,
        out.len() >> 20,
        start.elapsed().as_secs_f64()
    );
    check(done, || "the flood did not end within 60 s".into())?;
    check(st.success(), || format!("exit {st}: {err}"))?;
    check(err.contains("lines of output not shown"), || format!("no warning about dropped lines:\n{err}"))?;
    // Bounded: 8 MiB of queued output plus the process itself, far below the 256 MiB sent.
    check(peak < 96 * 1024, || format!("controller peak RSS {} MiB (bound 96 MiB)", peak / 1024))
}

// ---------------------------------------------------------------- hooks

/// The lab kit cluster of the hook faults: 1 master, 2 workers, kubeadm slowed down so that a
/// hook is reliably in the middle of an install when the fault comes.
struct Hooks {
    c: Cluster,
    req: std::path::PathBuf,
}

impl Hooks {
    fn start(&self) -> support::Running {
        let args = [
            "instantiate-end",
            "-o",
            "json",
            "-i",
            s(&self.c.inv),
            "--package-dir",
            s(&self.c.pkg),
            "--vnf-instance-id",
            &self.c.id,
            "--state-dir",
            s(&self.c.state),
            "--retry-for",
            "5",
            "--request",
            s(&self.req),
        ];
        spawn(&args, &[])
    }

    /// The same instantiate through the VNFM protocol (`mgmt-driver hook`), nodes from the
    /// inventory named in the document's options.
    fn start_hook(&self) -> support::Running {
        let doc = serde_json::json!({"operation": "instantiate_end", "request": self.c.request(),
            "vnf_instance": {"id": self.c.id}, "tmp_csar_dir": self.c.pkg,
            "options": {"inventory": self.c.inv, "state_dir": self.c.state}});
        let input = self.c.write("hook.json", &doc);
        spawn(&["hook", "--retry-for", "5", "--input", s(&input)], &[])
    }

    /// Start a hook and wait until `kubeadm` runs on node `i` (the install is under way).
    fn start_until_kubeadm(&self, i: usize) -> Result<support::Running, Failed> {
        let run = self.start();
        if until(Duration::from_secs(30), || !on_node(&self.c.lab, i, "kubeadm (init|join)").is_empty()) {
            Ok(run)
        } else {
            run.signal("KILL");
            Err(format!("kubeadm never ran on node {i}: {}", run.wait(Duration::from_secs(5)).all()).into())
        }
    }

    /// The state document still loads (or was never written), and a plan reads it.
    fn state_loads(&self) -> R {
        if let Ok(t) = std::fs::read_to_string(self.c.state.join(format!("{}.json", self.c.id))) {
            serde_json::from_str::<serde_json::Value>(&t).map_err(|e| format!("state does not load: {e}\n{t}"))?;
        }
        Ok(())
    }

    fn interrupted(&self, sig: &str) -> R {
        let run = self.start_until_kubeadm(1)?;
        run.signal(sig);
        let r = run.wait(Duration::from_secs(10));
        if sig == "KILL" {
            check(r.code == -1, || format!("exit {}", r.code))?;
        } else {
            r.fails(if sig == "INT" { 130 } else { 143 }, &format!("interrupted by SIG{sig}"));
            check(r.stderr.contains(&format!("{} (running: ", self.c.lab.node(1))), || {
                format!("the master must be named with its running step:\n{}", r.stderr)
            })?;
        }
        none_left(&self.c.lab, &[1, 2, 3], "kubeadm (init|join)")?;
        self.state_loads()
    }
}

fn hooks_interrupted_killed_and_refused() -> R {
    let h = phase("bring up a kit cluster (1 master, 2 workers), kubeadm slowed to 20 s", || {
        let c = Cluster::new("fak", 44, 3, &[1], &[2, 3], true);
        c.kit_ctl(&["set-delay", "20"]);
        let req = c.write("instantiate.json", &c.request());
        Ok(Hooks { c, req })
    })?;
    phase("a second hook on the same instance is refused at once, naming the instance", || {
        let first = h.start_until_kubeadm(1)?;
        let second = h.start().wait(Duration::from_secs(10));
        first.signal("KILL");
        let _ = first.wait(Duration::from_secs(5));
        second.fails(2, &format!("another mgmt-driver run is working on VNF instance {}", h.c.id));
        check(second.elapsed < Duration::from_secs(5), || format!("took {:?}", second.elapsed))
    })?;
    phase("SIGINT in the middle of kubeadm init: exit 130, nothing left running, state loads", || {
        h.interrupted("INT")
    })?;
    phase("SIGTERM in the middle of kubeadm init: exit 143, nothing left running, state loads", || {
        h.interrupted("TERM")
    })?;
    phase("SIGKILL in the middle of kubeadm init: nothing left running, state loads", || h.interrupted("KILL"))?;
    phase("SIGTERM in the middle of `mgmt-driver hook`: exit 143 and still a response for the VNFM", || {
        let run = h.start_hook();
        if !until(Duration::from_secs(30), || !on_node(&h.c.lab, 1, "kubeadm (init|join)").is_empty()) {
            run.signal("KILL");
            return Err(format!("kubeadm never ran: {}", run.wait(Duration::from_secs(5)).all()).into());
        }
        run.signal("TERM");
        // The response document is checked against docs/hook.schema.json by wait().
        let r = run.wait(Duration::from_secs(10));
        check(r.code == 143, || format!("exit {}: {}", r.code, r.all()))?;
        let d: serde_json::Value = serde_json::from_str(r.stdout.trim())?;
        check(d["operation"] == "instantiate_end" && d["ok"] == false, || d.to_string())?;
        check(d["user_script_err_handling_data"]["mgmt_driver"]["finished"] == false, || d.to_string())?;
        check(d["result"]["interrupted"]["signal"] == "SIGTERM", || d.to_string())?;
        none_left(&h.c.lab, &[1, 2, 3], "kubeadm (init|join)")?;
        h.state_loads()
    })?;
    phase("sshd of worker 3 killed in the middle of its install: the error names node and step", || {
        h.c.kit_ctl(&["set-delay", "2"]);
        let r = h.start().wait(Duration::from_secs(90));
        r.ok();
        let d = doc(&r);
        check(d["ok"] == true, || d.to_string())?;
        // Forget worker 3 and make its join slow again, then cut its sshd mid-join.
        h.c.on(3, "kubeadm reset -f >/dev/null 2>&1; rm -rf /etc/kubernetes /tmp/installed");
        // Through the store, as a run writes it: a hand-edited document is refused.
        let store =
            mgmt_driver::Store::open_with_key(&h.c.state, mgmt_driver::StateKey::at(support::test_state_key()))?;
        let mut st: serde_json::Value = store.load_doc(&h.c.id, "")?.ok_or("no state recorded")?;
        st["nodes"][h.c.lab.node(3)]["installed"] = false.into();
        store.save_doc(&h.c.id, "", &st)?;
        h.c.kit_ctl(&["set-delay", "20"]);
        let run = h.start();
        let install = "install_k8s_cluster.sh -w";
        if !until(Duration::from_secs(30), || !on_node(&h.c.lab, 3, install).is_empty()) {
            run.signal("KILL");
            return Err(format!("the install never ran on node 3: {}", run.wait(Duration::from_secs(5)).all()).into());
        }
        // The session's sshd (not the listener, the node's pid 1): the connection drops.
        h.c.lab.node_exec("3", &["pkill", "-KILL", "-f", "sshd: root"]);
        let r = run.wait(Duration::from_secs(60));
        r.fails(1, &format!("{}: command failed with no exit status (connection lost?)", h.c.lab.node(3)));
        check(r.stdout.contains("install_k8s_cluster.sh -w 198.18.44.13"), || {
            format!("the step is named:\n{}", r.all())
        })?;
        none_left(&h.c.lab, &[3], install)?;
        h.state_loads()
    })?;
    phase("the re-run completes", || {
        h.c.kit_ctl(&["set-delay", "0"]);
        let r = h.start().wait(Duration::from_secs(90));
        r.ok();
        check(h.c.k8s_nodes().len() == 3, || format!("{:?}", h.c.k8s_nodes()))
    })?;
    phase("disk full under the state store: a clear state error, the previous state intact", || disk_full(&h))
}

/// The state dir on a tiny tmpfs, filled up: the hook's save fails with a state error, and the
/// document on disk is the one from before, whole.
fn disk_full(h: &Hooks) -> R {
    let before = std::fs::read(h.c.state.join(format!("{}.json", h.c.id)))?;
    let saved = h.c.dir.path().join("state.saved");
    std::fs::rename(&h.c.state, &saved)?;
    std::fs::create_dir(&h.c.state)?;
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "fatmpfs"])
        .arg(&h.c.state)
        .status()?;
    check(mount.success(), || "mount tmpfs".into())?;
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(&h.c.state);
    for e in std::fs::read_dir(&saved)? {
        let e = e?;
        std::fs::copy(e.path(), h.c.state.join(e.file_name()))?;
    }
    // Fill what is left (the write fails with ENOSPC when the disk is full).
    let fill = std::fs::File::create(h.c.state.join("filler"))?;
    let _ = std::io::copy(&mut std::io::repeat(0).take_all(), &mut &fill);
    let r: Run = h.start().wait(Duration::from_secs(60));
    r.fails(1, "cannot write the state");
    let d = doc(&r);
    check(d["errors"].as_array().unwrap().iter().any(|e| e["kind"] == "state"), || d.to_string())?;
    check(r.all().contains("No space left on device"), || r.all())?;
    let after = std::fs::read(h.c.state.join(format!("{}.json", h.c.id)))?;
    check(after == before, || "the previous state document changed".into())
}

/// `std::io::repeat` without end, as a reader `io::copy` stops on at the first write error.
trait TakeAll: std::io::Read + Sized {
    fn take_all(self) -> std::io::Take<Self> {
        self.take(u64::MAX)
    }
}
impl<T: std::io::Read> TakeAll for T {}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!()).shared_lab(|| Lab::up("fa", 40, NODES, &[])).needing_root(&[
        ("sigint_sigterm_sigkill_stop_remote_commands", sigint_sigterm_sigkill_stop_remote_commands),
        ("with_become_the_root_commands_stop_too", with_become_the_root_commands_stop_too),
        ("no_timeout_runs_and_finishes_normally", no_timeout_runs_and_finishes_normally),
        ("run_script_in_one_exec_keeps_the_leash", run_script_in_one_exec_keeps_the_leash),
        (
            "interrupted_fanout_names_finished_cut_off_and_unstarted_nodes",
            interrupted_fanout_names_finished_cut_off_and_unstarted_nodes,
        ),
        ("a_flooding_node_does_not_exhaust_controller_memory", a_flooding_node_does_not_exhaust_controller_memory),
        ("hooks_interrupted_killed_and_refused", hooks_interrupted_killed_and_refused),
    ])
}
