//! Integration tests against a real OpenSSH lab (network + mount + pid namespaces, one sshd per
//! node; see scripts/lab.sh). No SSH is mocked: every test drives the real `mgmt-driver` binary
//! (or the library's SSH transport) against real sshd processes.
//!
//! Needs root (namespaces). Outside CI a non-root run skips loudly; under CI=true it fails
//! (tests/support/harness.rs). The lab is shared by all tests and torn down after the last.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use libtest_mimic::Failed;
use support::harness::{shared_lab, Suite};
use support::{inventory, mgmt, Lab};

/// Primary nodes 1..=FANOUT are shared read-only; the ones after are owned by single tests.
const FANOUT: usize = 50;
const NODE_RETRY: usize = 51;
const NODE_MISC: usize = 52;
const NODE_NO_SFTP: usize = 53;
const NODE_KEYS: usize = 54;
/// Links cut mid-upload (SFTP, and exec without SFTP), and an sftp-server stopped mid-upload.
const NODE_CUT: usize = 55;
const NODE_CUT_EXEC: usize = 56;
const NODE_STOP: usize = 57;
const NODES: usize = 57;

fn lab() -> &'static Lab {
    shared_lab()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// An inventory with one group `g` of the given primary nodes, plus extra defaults.
fn inv_for(dir: &Path, nodes: &[usize], defaults: &str) -> PathBuf {
    let lab = lab();
    let mut y = format!(
        "defaults:\n  known_hosts: {}\n  host_key_check: strict\n{defaults}groups:\n  g:\n",
        lab.file("known_hosts").display()
    );
    for &i in nodes {
        y.push_str(&format!("    - {{name: {}, ssh_ip: {}}}\n", lab.node(i), lab.ip(i)));
    }
    inventory(dir, "inv.yaml", &y)
}

fn root_key_defaults(key: &str) -> String {
    format!("  user: root\n  identity_file: {}\n", lab().file(key).display())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(msg().into())
    }
}

// ---------------------------------------------------------------- auth

fn key_auth_each_key_type() -> Result<(), Failed> {
    for key in ["id_ed25519", "id_ecdsa", "id_rsa"] {
        let d = tmp();
        let inv = inv_for(d.path(), &[NODE_KEYS], &root_key_defaults(key));
        let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "echo", "key-$(id -u)"], &[]);
        r.ok();
        check(r.stdout.contains(&format!("{}: key-0", lab().node(NODE_KEYS))), || format!("{key}: {}", r.all()))?;
    }
    Ok(())
}

fn password_auth_and_wrong_password_fails_fast() -> Result<(), Failed> {
    let d = tmp();
    let pw = lab().password();
    let inv = inv_for(d.path(), &[NODE_KEYS], "  user: mduser\n  password_env: LAB_PW\n");
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "id", "-un"], &[("LAB_PW", &pw)]);
    r.ok();
    check(r.stdout.contains(&format!("{}: mduser", lab().node(NODE_KEYS))), || r.all())?;
    check(!r.all().contains(&pw), || "password leaked into output".into())?;

    let wrong = "definitely-wrong-pw";
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--retry-for", "60", "--", "true"], &[("LAB_PW", wrong)]);
    r.fails(1, "authentication failed for user 'mduser'");
    check(!r.all().contains("retrying"), || format!("wrong password was retried:\n{}", r.all()))?;
    check(!r.all().contains(wrong), || "wrong password echoed".into())?;
    // Fail fast: with 60 s of retry budget a retry loop would take far longer than this.
    check(r.elapsed < Duration::from_secs(10), || format!("took {:?}", r.elapsed))
}

fn passphrase_key_auth() -> Result<(), Failed> {
    let d = tmp();
    let defaults = format!(
        "  user: mduser\n  identity_file: {}\n  identity_passphrase_file: {}\n",
        lab().file("id_ed25519_pass").display(),
        lab().file("key_passphrase").display()
    );
    let inv = inv_for(d.path(), &[NODE_KEYS], &defaults);
    mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "true"], &[]).ok();

    std::fs::write(d.path().join("bad"), "not-the-passphrase\n").unwrap();
    let defaults = format!(
        "  user: mduser\n  identity_file: {}\n  identity_passphrase_file: {}\n",
        lab().file("id_ed25519_pass").display(),
        d.path().join("bad").display()
    );
    let inv = inv_for(d.path(), &[NODE_KEYS], &defaults);
    mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "true"], &[]).fails(1, "wrong passphrase?");
    Ok(())
}

fn agent_auth() -> Result<(), Failed> {
    let d = tmp();
    let sock = d.path().join("agent.sock");
    let agent = std::process::Command::new("ssh-agent").arg("-D").arg("-a").arg(&sock).spawn()?;
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _agent = Kill(agent);
    for _ in 0..50 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let add = std::process::Command::new("ssh-add").arg(lab().file("id_ecdsa")).env("SSH_AUTH_SOCK", &sock).output()?;
    check(add.status.success(), || String::from_utf8_lossy(&add.stderr).into_owned())?;
    let inv = inv_for(d.path(), &[NODE_KEYS], "  user: root\n");
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "echo", "via-agent"], &[("SSH_AUTH_SOCK", s(&sock))]);
    r.ok();
    check(r.stdout.contains("via-agent"), || r.all())?;
    // Without the agent the same inventory is bad input: no credential at all.
    mgmt(&["exec", "-i", s(&inv), "--", "true"], &[]).fails(2, "no credential");
    Ok(())
}

// ---------------------------------------------------------------- host keys

fn changed_host_key_is_refused_with_both_fingerprints() -> Result<(), Failed> {
    let d = tmp();
    let fake = d.path().join("fake");
    let kg =
        std::process::Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&fake).status()?;
    check(kg.success(), || "ssh-keygen".into())?;
    let fake_pub = std::fs::read_to_string(d.path().join("fake.pub"))?;
    let kh = d.path().join("known_hosts");
    std::fs::write(
        &kh,
        format!("{} {}\n", lab().ip(NODE_KEYS), fake_pub.split_whitespace().take(2).collect::<Vec<_>>().join(" ")),
    )?;
    let fp = |p: &Path| -> String {
        let o = std::process::Command::new("ssh-keygen").arg("-lf").arg(p).output().unwrap();
        String::from_utf8_lossy(&o.stdout).split_whitespace().nth(1).unwrap().to_string()
    };
    let expected = fp(&d.path().join("fake.pub"));
    let y = format!(
        "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: accept-new\ngroups:\n  g:\n    - {{name: {}, ssh_ip: {}}}\n",
        lab().file("id_ed25519").display(),
        kh.display(),
        lab().node(NODE_KEYS),
        lab().ip(NODE_KEYS)
    );
    let inv = inventory(d.path(), "inv.yaml", &y);
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "touch", "/tmp/should-not-run"], &[]);
    r.fails(1, "HOST KEY HAS CHANGED");
    check(r.stderr.contains(&expected), || format!("expected fingerprint {expected} missing:\n{}", r.stderr))?;
    // The offered fingerprint is the node's real key: find it in the lab's known_hosts.
    let line = std::fs::read_to_string(lab().file("known_hosts"))?
        .lines()
        .find(|l| l.starts_with(&format!("{} ", lab().ip(NODE_KEYS))))
        .unwrap()
        .to_string();
    std::fs::write(d.path().join("real.pub"), line.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))?;
    let offered = fp(&d.path().join("real.pub"));
    check(r.stderr.contains(&offered), || format!("offered fingerprint {offered} missing:\n{}", r.stderr))?;
    let o = lab().node_exec(&NODE_KEYS.to_string(), &["test", "-e", "/tmp/should-not-run"]);
    check(!o.status.success(), || "command ran despite a changed host key".into())
}

fn unknown_host_strict_refused_accept_new_recorded() -> Result<(), Failed> {
    let d = tmp();
    let kh = d.path().join("kh");
    let y = |mode: &str| {
        format!(
            "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: {mode}\ngroups:\n  g:\n    - {{name: {}, ssh_ip: {}}}\n",
            lab().file("id_ed25519").display(),
            kh.display(),
            lab().node(NODE_KEYS),
            lab().ip(NODE_KEYS)
        )
    };
    let strict = inventory(d.path(), "strict.yaml", &y("strict"));
    mgmt(&["exec", "-o", "plain", "-i", s(&strict), "--", "true"], &[]).fails(1, "strict checking");
    check(!kh.exists() || std::fs::read_to_string(&kh)?.is_empty(), || "strict mode wrote known_hosts".into())?;
    let tofu = inventory(d.path(), "tofu.yaml", &y("accept-new"));
    mgmt(&["exec", "-o", "plain", "-i", s(&tofu), "--", "true"], &[]).ok().fails(0, "recorded in");
    let recorded = std::fs::read_to_string(&kh)?;
    let lab_line = std::fs::read_to_string(lab().file("known_hosts"))?
        .lines()
        .find(|l| l.starts_with(&format!("{} ", lab().ip(NODE_KEYS))))
        .unwrap()
        .to_string();
    let key_of = |l: &str| l.split_whitespace().nth(2).map(str::to_string);
    check(key_of(recorded.trim()) == key_of(&lab_line), || format!("recorded {recorded:?} vs lab {lab_line:?}"))?;
    // And now strict accepts it.
    mgmt(&["exec", "-o", "plain", "-i", s(&strict), "--", "true"], &[]).ok();
    Ok(())
}

fn concurrent_runs_learn_each_host_key_once() -> Result<(), Failed> {
    // Two processes (say, two per-site runs) share one known_hosts under accept-new: every
    // node must end up recorded exactly once, not once per process.
    let d = tmp();
    let kh = d.path().join("shared_known_hosts");
    let nodes: Vec<usize> = (2..=21).collect();
    let mut y = format!(
        "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: accept-new\ngroups:\n  g:\n",
        lab().file("id_ed25519").display(),
        kh.display()
    );
    for &i in &nodes {
        y.push_str(&format!("    - {{name: {}, ssh_ip: {}}}\n", lab().node(i), lab().ip(i)));
    }
    let inv = inventory(d.path(), "inv.yaml", &y);
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let inv = inv.clone();
            std::thread::spawn(move || mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "true"], &[]))
        })
        .collect();
    for r in runs {
        r.join().map_err(|_| "run panicked")?.ok();
    }
    let text = std::fs::read_to_string(&kh)?;
    let mut hosts: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let total = hosts.len();
    hosts.sort();
    hosts.dedup();
    check(total == nodes.len() && hosts.len() == nodes.len(), || {
        format!("{total} lines for {} nodes:\n{text}", nodes.len())
    })
}

// ---------------------------------------------------------------- jump host

fn jump_host_reaches_a_node_on_a_hidden_network() -> Result<(), Failed> {
    let d = tmp();
    let lab = lab();
    let y = format!(
        "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: strict\ngroups:\n  bastion:\n    - {{name: {}, ssh_ip: {}}}\n  hidden:\n    - {{name: {}-h1, ssh_ip: {}, jump: [{}]}}\n  direct:\n    - {{name: direct-h1, ssh_ip: {}}}\n",
        lab.file("id_ed25519").display(),
        lab.file("known_hosts").display(),
        lab.node(1),
        lab.ip(1),
        lab.name,
        lab.hidden_ip(1),
        lab.node(1),
        lab.hidden_ip(1)
    );
    let inv = inventory(d.path(), "inv.yaml", &y);
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--group", "hidden", "--", "hostname"], &[]);
    r.ok();
    check(r.stdout.contains(&format!("{0}-h1: {0}-h1", lab.name)), || r.all())?;
    // The test host itself cannot route there.
    let r = mgmt(
        &[
            "exec",
            "-o",
            "plain",
            "-i",
            s(&inv),
            "--group",
            "direct",
            "--retry-for",
            "1",
            "--connect-timeout",
            "2",
            "--",
            "hostname",
        ],
        &[],
    );
    r.fails(1, "cannot connect to");
    Ok(())
}

// ---------------------------------------------------------------- become

fn sudo_with_password_never_shows_it() -> Result<(), Failed> {
    let d = tmp();
    let pw = lab().password();
    let inv =
        inv_for(d.path(), &[NODE_MISC], "  user: mduser\n  password_env: LAB_PW\n  become_password_env: LAB_PW\n");
    let r = mgmt(
        &["exec", "-o", "plain", "--become", "-i", s(&inv), "--", "echo uid=$(id -u); ps -eo args"],
        &[("LAB_PW", &pw)],
    );
    r.ok();
    check(r.stdout.contains(&format!("{}: uid=0", lab().node(NODE_MISC))), || r.all())?;
    check(r.stdout.contains("ps -eo args"), || format!("process list not captured:\n{}", r.stdout))?;
    check(!r.all().contains(&pw), || "sudo password visible in the node's process list or in output".into())?;
    let json = mgmt(&["exec", "-o", "json", "--become", "-i", s(&inv), "--", "id -u"], &[("LAB_PW", &pw)]);
    json.ok();
    check(!json.all().contains(&pw), || "password in JSON events".into())?;
    let dry = mgmt(&["exec", "--dry-run", "-o", "plain", "--become", "-i", s(&inv), "--", "id -u"], &[("LAB_PW", &pw)]);
    dry.ok();
    check(dry.stdout.contains("sudo -S") && !dry.all().contains(&pw), || dry.all())?;

    // Wrong sudo password: sudo refuses, we report it, nothing hangs.
    let inv =
        inv_for(d.path(), &[NODE_MISC], "  user: mduser\n  password_env: LAB_PW\n  become_password: wrong-sudo-pw\n");
    let r = mgmt(&["exec", "-o", "plain", "--become", "-i", s(&inv), "--", "id -u"], &[("LAB_PW", &pw)]);
    r.fails(1, "command failed with exit code 1");
    check(!r.all().contains("wrong-sudo-pw"), || "wrong sudo password echoed".into())?;
    // No sudo password configured: sudo -n fails at once instead of waiting for a prompt.
    let inv = inv_for(d.path(), &[NODE_MISC], "  user: mduser\n  password_env: LAB_PW\n");
    mgmt(&["exec", "-o", "plain", "--become", "-i", s(&inv), "--", "id -u"], &[("LAB_PW", &pw)])
        .fails(1, "password is required");
    Ok(())
}

// ---------------------------------------------------------------- exec semantics

fn timeout_leaves_no_process_behind() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[NODE_MISC], &root_key_defaults("id_ed25519"));
    let r = mgmt(
        &["exec", "-o", "plain", "--timeout", "1", "-i", s(&inv), "--", "sleep 4242 & sleep 4243; echo never"],
        &[],
    );
    r.fails(1, "timed out after");
    check(r.stderr.contains(&lab().node(NODE_MISC)) && r.stderr.contains("sleep 4242 & sleep 4243"), || {
        r.stderr.clone()
    })?;
    check(r.elapsed < Duration::from_secs(15), || format!("took {:?}", r.elapsed))?;
    std::thread::sleep(Duration::from_millis(300));
    let o = lab().node_exec(&NODE_MISC.to_string(), &["pgrep", "-f", "sleep 424[23]"]);
    check(o.stdout.is_empty(), || format!("left behind on the node: {}", String::from_utf8_lossy(&o.stdout)))
}

fn late_sshd_is_reached_by_retry() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[NODE_RETRY], &root_key_defaults("id_ed25519"));
    let node = NODE_RETRY.to_string();
    lab().stop(&node);
    let starter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        lab().start(&node);
    });
    let r = mgmt(&["exec", "-o", "plain", "--retry-for", "30", "-i", s(&inv), "--", "echo", "up"], &[]);
    starter.join().map_err(|_| "start thread panicked")?;
    r.ok();
    check(r.stderr.contains("not reachable yet"), || format!("no retry seen:\n{}", r.all()))?;
    check(r.stdout.contains(&format!("{}: up", lab().node(NODE_RETRY))), || r.all())?;
    check(r.elapsed >= Duration::from_secs(3), || "connected before sshd started?".into())
}

fn nonzero_exit_names_node_command_code_and_stderr() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[NODE_MISC], &root_key_defaults("id_ed25519"));
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "echo first >&2; echo kaputt >&2; exit 3"], &[]);
    r.fails(
        1,
        &format!(
            "{}: FAILED: command failed with exit code 3: echo first >&2; echo kaputt >&2; exit 3",
            lab().node(NODE_MISC)
        ),
    );
    check(r.stderr.contains("    kaputt"), || r.stderr.clone())?;
    // Killed by a signal: reported as such, not as a missing exit code.
    mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "kill -9 $$"], &[])
        .fails(1, "command failed with signal KILL: kill -9 $$");
    let j = mgmt(&["exec", "-o", "json", "-i", s(&inv), "--", "exit 3"], &[]);
    // One result document on stdout (events are on stderr): the failure counted and named.
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim())?;
    let one = lab().node(NODE_MISC);
    check(
        v["ok"] == false
            && v["result"]["failedCount"] == 1
            && v["errors"][0]["kind"] == "remote"
            && v["errors"][0]["node"] == one.as_str(),
        || j.all(),
    )
}

fn hostile_strings_arrive_byte_exact() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[NODE_MISC], &root_key_defaults("id_ed25519"));
    let script = d.path().join("echo-args.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s' \"$a\" | od -An -tx1 | tr -d ' \\n'; echo; done\n",
    )?;
    let hostile = [
        "it's",
        "\"q\"",
        "$(touch /tmp/pwned)",
        "`touch /tmp/pwned`",
        "a=b; touch /tmp/pwned",
        "x && y || z",
        "multi\nline",
        "ünïcödé ✓",
        "*?[a]{b}~#",
        "back\\slash",
        "-n",
        "",
    ];
    let mut args = vec!["run-script", "-o", "plain", "-i", s(&inv), s(&script)];
    args.extend(hostile.iter().copied());
    let r = mgmt(&args, &[]);
    r.ok();
    let prefix = format!("{}: ", lab().node(NODE_MISC));
    let got: Vec<String> = r.stdout.lines().filter_map(|l| l.strip_prefix(&prefix)).map(str::to_string).collect();
    let want: Vec<String> = hostile.iter().map(|h| h.bytes().map(|b| format!("{b:02x}")).collect()).collect();
    check(got == want, || format!("got {got:?}\nwant {want:?}"))?;
    let o = lab().node_exec(&NODE_MISC.to_string(), &["test", "-e", "/tmp/pwned"]);
    check(!o.status.success(), || "/tmp/pwned exists: an argument was executed".into())?;
    Ok(())
}

fn fifty_nodes_in_one_run() -> Result<(), Failed> {
    let d = tmp();
    let nodes: Vec<usize> = (1..=FANOUT).collect();
    let inv = inv_for(d.path(), &nodes, &root_key_defaults("id_ed25519"));
    let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "hostname"], &[]);
    r.ok();
    for i in nodes {
        let n = lab().node(i);
        check(r.stdout.contains(&format!("{n}: {n}\n")), || format!("{n} missing:\n{}", r.stdout))?;
    }
    check(r.stderr.contains("summary: 50 ok, 0 failed"), || r.stderr.clone())
}

// ---------------------------------------------------------------- transfer

fn remote_sha(node: usize, path: &str) -> String {
    let o = lab().node_exec(&node.to_string(), &["sha256sum", path]);
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap_or("").to_string()
}

fn local_sha(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

fn upload_skips_identical_and_falls_back_to_exec_without_sftp() -> Result<(), Failed> {
    // A large file takes the probe + SFTP (or exec without SFTP) + finalize path; a small one
    // the single-exec inline path. Both must skip identical content and leave no temp file.
    for (node, big_via) in [(NODE_MISC, "sftp"), (NODE_NO_SFTP, "exec")] {
        for (size, via) in [(300 * 1024, big_via), (100, "exec")] {
            let d = tmp();
            let inv = inv_for(d.path(), &[node], &root_key_defaults("id_ed25519"));
            let f = d.path().join("cfg.txt");
            let body: String = (0..size).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            std::fs::write(&f, &body)?;
            let dir = format!("/opt/mgmtd-test-{node}-{size}");
            let dest = format!("{dir}/cfg.txt");
            let r = mgmt(&["put", "-v", "-o", "plain", "-i", s(&inv), "--mode", "640", s(&f), &dest], &[]);
            r.ok();
            check(r.stderr.contains(&format!("uploaded {dest} ({size} bytes, {via})")), || r.all())?;
            check(remote_sha(node, &dest) == local_sha(&f), || "content differs".into())?;
            let mode = lab().node_exec(&node.to_string(), &["stat", "-c", "%a", &dest]);
            check(String::from_utf8_lossy(&mode.stdout).trim() == "640", || format!("mode {:?}", mode.stdout))?;
            let r = mgmt(&["put", "-v", "-o", "plain", "-i", s(&inv), "--mode", "640", s(&f), &dest], &[]);
            r.ok();
            check(r.stderr.contains("unchanged, upload skipped"), || r.all())?;
            // Changed content is uploaded again; no temp file is left next to the target.
            std::fs::write(&f, format!("changed {body}"))?;
            mgmt(&["put", "-o", "plain", "-i", s(&inv), s(&f), &dest], &[]).ok();
            check(remote_sha(node, &dest) == local_sha(&f), || "update not applied".into())?;
            let ls = lab().node_exec(&node.to_string(), &["ls", "-a", &dir]);
            let names = String::from_utf8_lossy(&ls.stdout).into_owned();
            check(!names.contains("mgmtd-"), || format!("temp file left: {names}"))?;
        }
    }
    Ok(())
}

fn directory_tree_upload() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[NODE_MISC], &root_key_defaults("id_ed25519"));
    let tree = d.path().join("chart");
    std::fs::create_dir_all(tree.join("templates"))?;
    std::fs::write(tree.join("Chart.yaml"), "name: x\n")?;
    std::fs::write(tree.join("templates/deploy.yaml"), "kind: Deployment\n")?;
    mgmt(&["put", "-o", "plain", "-i", s(&inv), s(&tree), "/var/tmp/tree-test/"], &[]).ok();
    check(
        remote_sha(NODE_MISC, "/var/tmp/tree-test/templates/deploy.yaml")
            == local_sha(&tree.join("templates/deploy.yaml")),
        || "tree".into(),
    )
}

fn get_fetches_one_file_per_host() -> Result<(), Failed> {
    let d = tmp();
    let inv = inv_for(d.path(), &[1, 2], &root_key_defaults("id_ed25519"));
    let out = d.path().join("fetched");
    mgmt(&["get", "-o", "plain", "-i", s(&inv), "/etc/hostname", s(&out)], &[]).ok();
    for i in [1, 2] {
        let got = std::fs::read_to_string(out.join(lab().node(i)).join("hostname"))?;
        check(got.trim() == lab().node(i), || format!("node {i}: {got:?}"))?;
    }
    mgmt(&["get", "-o", "plain", "-i", s(&inv), "/nonexistent/file", s(&out)], &[])
        .fails(1, "download of /nonexistent/file");
    Ok(())
}

fn large_upload_and_download_intact() -> Result<(), Failed> {
    use mgmt_driver::event::Events;
    use mgmt_driver::inventory::{Inventory, LoadOptions};
    use mgmt_driver::ssh::{SshConnector, SshOptions};
    use mgmt_driver::transport::{Connector, Source, UploadFile};
    let d = tmp();
    let big = d.path().join("big.bin");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big)?;
        let mut rng = fastrand::Rng::with_seed(42);
        let mut buf = vec![0u8; 1 << 20];
        for _ in 0..64 {
            rng.fill(&mut buf);
            f.write_all(&buf)?;
        }
    }
    let rt = tokio::runtime::Runtime::new()?;
    for node in [NODE_MISC, NODE_NO_SFTP] {
        let inv_path = inv_for(d.path(), &[node], &root_key_defaults("id_ed25519"));
        let inv = Inventory::load(&inv_path, &LoadOptions::default())?;
        let host = inv.hosts[0].clone();
        let back = d.path().join(format!("back-{node}.bin"));
        rt.block_on(async {
            let (events, _rx) = Events::channel();
            let ev = events.for_host(&host.name);
            let t = SshConnector::new(SshOptions::default())?.connect(&host, &ev).await?;
            let up = t
                .upload(
                    &[UploadFile { source: Source::Path(big.clone()), remote: "/var/tmp/big.bin".into(), mode: 0o600 }],
                    &ev,
                )
                .await?;
            assert_eq!(up[0].bytes, 64 << 20);
            t.download("/var/tmp/big.bin", &back, &ev).await?;
            t.close().await;
            Ok::<_, mgmt_driver::error::Error>(())
        })?;
        check(remote_sha(node, "/var/tmp/big.bin") == local_sha(&big), || format!("node {node}: remote copy differs"))?;
        check(local_sha(&back) == local_sha(&big), || format!("node {node}: download differs"))?;
    }
    Ok(())
}

/// The library honours an OpenSSH client config given in `LoadOptions`: the inventory names only
/// a `Host` alias, and HostName, User, IdentityFile, UserKnownHostsFile and a ProxyJump through
/// another alias all come from the config, as `ssh lab-hidden` would use them.
fn ssh_config_alias_and_proxyjump_from_config_file() -> Result<(), Failed> {
    use mgmt_driver::command::RemoteCommand;
    use mgmt_driver::event::Events;
    use mgmt_driver::inventory::{Inventory, Jump, LoadOptions, SshConfigSource};
    use mgmt_driver::ssh::{SshConnector, SshOptions};
    use mgmt_driver::transport::Connector;
    let d = tmp();
    let lab = lab();
    let config = d.path().join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host lab-hidden\n  HostName {}\n  ProxyJump lab-bastion\n\
             Host lab-bastion\n  HostName {}\n\
             Match all\n  User nobody\n\
             Host lab-*\n  User root\n  IdentityFile {}\n  UserKnownHostsFile {}\n",
            lab.hidden_ip(1),
            lab.ip(1),
            lab.file("id_ed25519").display(),
            lab.file("known_hosts").display(),
        ),
    )?;
    let inv_path = inventory(
        d.path(),
        "inv.yaml",
        "defaults:\n  host_key_check: strict\ngroups:\n  g:\n    - {name: via-alias, ssh_ip: lab-hidden}\n",
    );
    let opts = LoadOptions { ssh_config: SshConfigSource::File(config), ..Default::default() };
    let host = Inventory::load(&inv_path, &opts)?.hosts.remove(0);
    check(host.addr == lab.hidden_ip(1) && host.user == "root" && host.known_hosts == lab.file("known_hosts"), || {
        format!("{host:?}")
    })?;
    check(host.jump == vec![Jump { user: "root".into(), addr: lab.ip(1), port: 22, ..Default::default() }], || {
        format!("{:?}", host.jump)
    })?;
    let rt = tokio::runtime::Runtime::new()?;
    let out = rt.block_on(async {
        let (events, _rx) = Events::channel();
        let ev = events.for_host(&host.name);
        let t = SshConnector::new(SshOptions::default())?.connect(&host, &ev).await?;
        let out = t.exec(&RemoteCommand::new("hostname"), &ev).await?;
        t.close().await;
        Ok::<_, mgmt_driver::error::Error>(out)
    })?;
    let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
    check(out.code == Some(0) && got == format!("{}-h1", lab.name), || format!("hostname {got:?}, {out:?}"))
}

// ---------------------------------------------------------------- input handling

fn bad_input_and_dry_run_touch_nothing() -> Result<(), Failed> {
    let d = tmp();
    let bad = inventory(d.path(), "bad.yaml", "defaults:\n  pasword_env: X\ngroups: {}\n");
    mgmt(&["exec", "-i", s(&bad), "--", "true"], &[]).fails(2, "pasword_env");
    mgmt(&["exec", "-i", s(&d.path().join("missing.yaml")), "--", "true"], &[]).fails(2, "missing.yaml");
    // Dry run against an address where nothing listens: prints the plan, connects to nothing.
    let y = format!(
        "defaults:\n  user: ubuntu\n  password: pw-in-file\n  become_password: sudo-in-file\n  known_hosts: {}\ngroups:\n  g:\n    - {{name: ghost, ssh_ip: 198.18.{}.250}}\n",
        d.path().join("kh").display(),
        lab().net
    );
    let inv = inventory(d.path(), "ghost.yaml", &y);
    let script = d.path().join("s.sh");
    std::fs::write(&script, "echo hi\n")?;
    let r = mgmt(
        &["run-script", "--dry-run", "--become", "--timeout", "5", "-o", "plain", "-i", s(&inv), s(&script), "arg one"],
        &[],
    );
    r.ok();
    check(r.stdout.contains("ghost: 0. connect ubuntu@198.18"), || r.all())?;
    check(r.stdout.contains("ghost: 1. upload") && r.stdout.contains("ghost: 2. exec"), || r.all())?;
    check(r.stdout.contains("'arg one'") && r.stdout.contains("timeout -k 3 5"), || r.all())?;
    check(!r.all().contains("pw-in-file") && !r.all().contains("sudo-in-file"), || "secret in dry-run".into())?;
    check(!d.path().join("kh").exists(), || "dry run touched known_hosts".into())?;
    check(r.elapsed < Duration::from_secs(3), || format!("dry run took {:?}", r.elapsed))
}

// ---------------------------------------------------------------- hostile edge (issue 9)

/// The bastion account has the same password as the target account (the lab's `mduser` on
/// every node), and no key is configured: before the fix the target's password was offered to
/// the bastion and the login succeeded. Now a bastion that is not an inventory host gets keys
/// and agent only, so the login fails — at the jump host, by name. Naming the bastion as an
/// inventory host with its own password works.
fn jump_host_is_never_sent_the_target_password() -> Result<(), Failed> {
    let d = tmp();
    let lab = lab();
    let pw = lab.password();
    let y = |jump: &str| {
        format!(
            "defaults:\n  user: mduser\n  password_env: LAB_PW\n  known_hosts: {}\n  host_key_check: strict\ngroups:\n  bastion:\n    - {{name: {}, ssh_ip: {}}}\n  hidden:\n    - {{name: {}-h1, ssh_ip: {}, jump: [{jump}]}}\n",
            lab.file("known_hosts").display(),
            lab.node(1),
            lab.ip(1),
            lab.name,
            lab.hidden_ip(1),
        )
    };
    let by_address = inventory(d.path(), "addr.yaml", &y(&format!("mduser@{}", lab.ip(1))));
    let args = |inv: &Path| -> Vec<String> {
        ["exec", "-o", "plain", "-i", s(inv), "--group", "hidden", "--retry-for", "5", "--", "id", "-un"]
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let a = args(&by_address);
    let r = mgmt(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[("LAB_PW", &pw)]);
    r.fails(1, &format!("(jump {}:22): authentication failed for user 'mduser' at {}:22", lab.ip(1), lab.ip(1)));
    check(r.all().contains("never sent a password"), || r.all())?;
    check(!r.all().contains(&pw), || "password in output".into())?;
    check(r.elapsed < Duration::from_secs(5), || format!("auth failure was retried: {:?}", r.elapsed))?;
    // The bastion as an inventory host: it logs in with its own credentials (here the same
    // account), so the chain works.
    let by_name = inventory(d.path(), "name.yaml", &y(&lab.node(1)));
    let a = args(&by_name);
    let r = mgmt(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[("LAB_PW", &pw)]);
    r.ok();
    check(r.stdout.contains(&format!("{}-h1: mduser", lab.name)), || r.all())
}

fn lab_known_hosts_line(i: usize) -> String {
    std::fs::read_to_string(lab().file("known_hosts"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(&format!("{} ", lab().ip(i))))
        .unwrap()
        .to_string()
}

fn key_inventory(dir: &Path, kh: &Path, policy: &str, node: usize) -> PathBuf {
    let y = format!(
        "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: {policy}\ngroups:\n  g:\n    - {{name: {}, ssh_ip: {}}}\n",
        lab().file("id_ed25519").display(),
        kh.display(),
        lab().node(node),
        lab().ip(node)
    );
    inventory(dir, &format!("inv-{policy}.yaml"), &y)
}

fn revoked_host_key_is_refused() -> Result<(), Failed> {
    let d = tmp();
    let kh = d.path().join("known_hosts");
    let line = lab_known_hosts_line(NODE_KEYS);
    let key: Vec<&str> = line.split_whitespace().skip(1).take(2).collect();
    // Recorded for the host, and revoked for every host: revocation wins.
    std::fs::write(&kh, format!("{line}\n@revoked * {}\n", key.join(" ")))?;
    for policy in ["strict", "accept-new"] {
        let inv = key_inventory(d.path(), &kh, policy, NODE_KEYS);
        let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "touch", "/tmp/revoked-ran"], &[]);
        r.fails(1, "REVOKED HOST KEY");
        check(r.stderr.contains(&format!("{} line 2", kh.display())), || r.all())?;
    }
    let o = lab().node_exec(&NODE_KEYS.to_string(), &["test", "-e", "/tmp/revoked-ran"]);
    check(!o.status.success(), || "command ran despite a revoked host key".into())?;
    // Without the revocation the same file is fine.
    std::fs::write(&kh, format!("{line}\n"))?;
    mgmt(&["exec", "-o", "plain", "-i", s(&key_inventory(d.path(), &kh, "strict", NODE_KEYS)), "--", "true"], &[]).ok();
    Ok(())
}

fn unreadable_known_hosts_is_refused() -> Result<(), Failed> {
    // Root reads any file whatever its mode: a directory, and a file that is not text, stand
    // for "cannot read". Before, both looked like an empty file: strict said "not known",
    // accept-new learned the key anew (or failed later to append).
    let d = tmp();
    let dir_kh = d.path().join("kh-dir");
    std::fs::create_dir(&dir_kh)?;
    let bin_kh = d.path().join("kh-bin");
    let bin = [&lab_known_hosts_line(NODE_KEYS).into_bytes()[..], b"\n\xff\xfe\n"].concat();
    std::fs::write(&bin_kh, &bin)?;
    for (kh, policy) in [(&dir_kh, "strict"), (&dir_kh, "accept-new"), (&bin_kh, "strict"), (&bin_kh, "accept-new")] {
        let inv = key_inventory(d.path(), kh, policy, NODE_KEYS);
        let r = mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--", "true"], &[]);
        r.fails(1, "host key verification failed");
        check(r.stderr.contains(&format!("cannot read {}", kh.display())) || r.stderr.contains("cannot lock"), || {
            format!("{policy} {}: {}", kh.display(), r.all())
        })?;
    }
    check(std::fs::read(&bin_kh)? == bin, || "accept-new wrote into an unreadable known_hosts".into())
}

/// Slows the host side of a node's link (tbf on the lab's veth, removed on drop), so a 64 MiB
/// upload is still running when the test acts.
struct Throttle(String);

impl Throttle {
    fn new(node: usize) -> Throttle {
        let dev = format!("mdv{}{node}", lab().name);
        let st = std::process::Command::new("tc")
            .args([
                "qdisc", "replace", "dev", &dev, "root", "tbf", "rate", "40mbit", "burst", "64kb", "latency", "50ms",
            ])
            .status()
            .expect("tc");
        assert!(st.success(), "tc on {dev}");
        Throttle(dev)
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tc").args(["qdisc", "del", "dev", &self.0, "root"]).status();
    }
}

fn big_file(dir: &Path) -> PathBuf {
    use std::io::Write;
    let big = dir.join("big.bin");
    let mut f = std::fs::File::create(&big).unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..64 {
        rng.fill(&mut buf);
        f.write_all(&buf).unwrap();
    }
    big
}

/// One transfer through the library, for the stall tests.
enum Transfer {
    /// Upload the local file to the remote path.
    Up(PathBuf, String),
    /// Download the remote path into the local file.
    Down(String, PathBuf),
}

/// Run `what` on `node` with a short stall timeout, in a thread of its own; returns the error
/// text (if any) and how long it took.
fn transfer_in_thread(
    node: usize,
    what: Transfer,
    stall: Duration,
    dir: &Path,
) -> std::thread::JoinHandle<(Option<String>, Duration)> {
    use mgmt_driver::event::Events;
    use mgmt_driver::inventory::{Inventory, LoadOptions};
    use mgmt_driver::ssh::{SshConnector, SshOptions};
    use mgmt_driver::transport::{Connector, Source, UploadFile};
    let inv_path = inv_for(dir, &[node], &root_key_defaults("id_ed25519"));
    let host = Inventory::load(&inv_path, &LoadOptions::default()).unwrap().hosts.remove(0);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let started = std::time::Instant::now();
        let r = rt.block_on(async {
            let (events, _rx) = Events::channel();
            let ev = events.for_host(&host.name);
            let opts = SshOptions { stall, retry_for: Duration::from_secs(5), ..Default::default() };
            let t = SshConnector::new(opts)?.connect(&host, &ev).await?;
            let r = match what {
                Transfer::Up(local, remote) => {
                    t.upload(&[UploadFile { source: Source::Path(local), remote, mode: 0o600 }], &ev).await.map(drop)
                }
                Transfer::Down(remote, local) => t.download(&remote, &local, &ev).await.map(drop),
            };
            t.close().await;
            r
        });
        (r.err().map(|e| e.to_string()), started.elapsed())
    })
}

/// Wait until the upload's temporary file on the node holds at least 1 MiB.
fn wait_for_partial_temp(node: usize, remote: &str) -> Result<(), Failed> {
    let script = format!("stat -c %s {remote}.mgmtd-* 2>/dev/null | head -n 1");
    for _ in 0..200 {
        let o = lab().node_exec(&node.to_string(), &["sh", "-c", &script]);
        let n: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or(0);
        if n >= 1 << 20 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("node {node}: the upload never got going").into())
}

fn temps_left(node: usize, dir: &str) -> String {
    let o = lab().node_exec(&node.to_string(), &["ls", "-a", dir]);
    String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("mgmtd-")).collect::<Vec<_>>().join(" ")
}

/// The node's link goes down in the middle of a 64 MiB upload (SFTP, and the exec fallback):
/// the upload fails within the stall timeout with an error naming node and path, the target
/// never holds a half file, and once the link is back the same upload completes and the dead
/// upload's temporary file is gone.
fn link_cut_mid_upload_leaves_no_half_file_and_rerun_completes() -> Result<(), Failed> {
    let d = tmp();
    let big = big_file(d.path());
    let (big, dir) = (big.as_path(), d.path());
    // Both transfer paths at once, each on its own node.
    std::thread::scope(|sc| {
        let runs: Vec<_> =
            [NODE_CUT, NODE_CUT_EXEC].map(|node| sc.spawn(move || cut_link_mid_upload(node, big, dir))).into();
        runs.into_iter().try_for_each(|r| r.join().map_err(|_| Failed::from("panicked"))?.map_err(Failed::from))
    })
}

fn cut_link_mid_upload(node: usize, big: &Path, dir: &Path) -> Result<(), String> {
    let stall = Duration::from_secs(2);
    let n = node.to_string();
    let remote_dir = format!("/var/tmp/cut{node}");
    let remote = format!("{remote_dir}/big.bin");
    lab().node_exec(&n, &["rm", "-rf", &remote_dir]);
    let throttle = Throttle::new(node);
    let sub = dir.join(&n);
    std::fs::create_dir_all(&sub).unwrap();
    let up = transfer_in_thread(node, Transfer::Up(big.to_path_buf(), remote.clone()), stall, &sub);
    wait_for_partial_temp(node, &remote).map_err(|e| format!("{e:?}"))?;
    let down = lab().node_exec(&n, &["ip", "link", "set", "eth0", "down"]);
    let cut_at = std::time::Instant::now();
    let (err, _) = up.join().map_err(|_| "upload thread panicked")?;
    let took = cut_at.elapsed();
    let up_again = lab().node_exec(&n, &["ip", "link", "set", "eth0", "up"]);
    drop(throttle);
    if !down.status.success() || !up_again.status.success() {
        return Err(format!("node {node}: ip link: {:?} {:?}", down, up_again));
    }
    let err = err.ok_or(format!("node {node}: upload succeeded across a cut link"))?;
    if !(err.contains(&lab().node(node)) && err.contains(&remote) && err.contains("no progress")) {
        return Err(format!("node {node}: {err}"));
    }
    // Stall detection plus a bounded goodbye (2 × the stall at most), no hang.
    if took >= stall * 5 {
        return Err(format!("node {node}: failed after {took:?}"));
    }
    if lab().node_exec(&n, &["test", "-e", &remote]).status.success() {
        return Err(format!("node {node}: a half file is at the target"));
    }
    // The dead connection may still flush buffered bytes into its temp file once the link is
    // back; wait until its node-side session is gone, then past the stall timeout.
    for _ in 0..100 {
        if !lab().node_exec(&n, &["pgrep", "-f", SESSION]).status.success() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(stall + Duration::from_millis(1100));
    let (err, _) =
        transfer_in_thread(node, Transfer::Up(big.to_path_buf(), remote.clone()), stall, &sub).join().unwrap();
    if let Some(e) = err {
        return Err(format!("node {node}: re-run failed: {e}"));
    }
    if remote_sha(node, &remote) != local_sha(big) {
        return Err(format!("node {node}: re-run content differs"));
    }
    let left = temps_left(node, &remote_dir);
    if !left.is_empty() {
        return Err(format!("node {node}: temp files left: {left}"));
    }
    Ok(())
}

/// The title of a login's sshd session process on a lab node (which also serves SFTP: the lab
/// runs `internal-sftp`).
const SESSION: &str = "^sshd: root@notty";

/// The node's sshd session stops (SIGSTOP) in the middle of an upload, then of a download:
/// each fails with the stall error naming node and path instead of hanging.
fn stopped_node_mid_upload_and_mid_download_hits_the_stall_timeout() -> Result<(), Failed> {
    let d = tmp();
    let big = big_file(d.path());
    let stall = Duration::from_secs(2);
    let n = NODE_STOP.to_string();
    let remote = "/var/tmp/stopped.bin";
    let throttle = Throttle::new(NODE_STOP);
    let up = transfer_in_thread(NODE_STOP, Transfer::Up(big, remote.to_string()), stall, d.path());
    wait_for_partial_temp(NODE_STOP, remote)?;
    let stop = lab().node_exec(&n, &["pkill", "-STOP", "-f", SESSION]);
    let stopped_at = std::time::Instant::now();
    let (err, _) = up.join().map_err(|_| "upload thread panicked")?;
    let took = stopped_at.elapsed();
    lab().node_exec(&n, &["pkill", "-CONT", "-f", SESSION]);
    drop(throttle);
    check(stop.status.success(), || "no sshd session to stop".into())?;
    let err = err.ok_or("upload finished although the node stopped reading")?;
    check(err.contains(&lab().node(NODE_STOP)) && err.contains(remote), || err.clone())?;
    check(err.contains("no progress"), || err.clone())?;
    check(took < stall * 5, || format!("took {took:?}"))?;
    let o = lab().node_exec(&n, &["test", "-e", remote]);
    check(!o.status.success(), || "a half file is at the target".into())?;

    // The other direction: the node stops sending in the middle of a download. Its own link is
    // slowed this time (node → controller), by tc inside the node.
    let remote = "/var/tmp/download.bin";
    let made = lab().node_exec(&n, &["sh", "-c", &format!("head -c 67108864 /dev/urandom >{remote}")]);
    check(made.status.success(), || "cannot make the file to download".into())?;
    let shaped = lab().node_exec(
        &n,
        &["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "40mbit", "burst", "64kb", "latency", "50ms"],
    );
    check(shaped.status.success(), || String::from_utf8_lossy(&shaped.stderr).into_owned())?;
    let local_dir = d.path().join("fetched");
    std::fs::create_dir_all(&local_dir)?;
    let local = local_dir.join("download.bin");
    let down = transfer_in_thread(NODE_STOP, Transfer::Down(remote.to_string(), local.clone()), stall, d.path());
    let mut started = false;
    for _ in 0..200 {
        let partial =
            std::fs::read_dir(&local_dir)?.flatten().any(|e| e.metadata().map(|m| m.len() >= 1 << 20).unwrap_or(false));
        if partial {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = lab().node_exec(&n, &["pkill", "-STOP", "-f", SESSION]);
    let stopped_at = std::time::Instant::now();
    let (err, _) = down.join().map_err(|_| "download thread panicked")?;
    let took = stopped_at.elapsed();
    lab().node_exec(&n, &["pkill", "-CONT", "-f", SESSION]);
    lab().node_exec(&n, &["tc", "qdisc", "del", "dev", "eth0", "root"]);
    check(started && stop.status.success(), || "the download never got going".into())?;
    let err = err.ok_or("download finished although the node stopped sending")?;
    check(err.contains(&lab().node(NODE_STOP)) && err.contains(&format!("download of {remote}")), || err.clone())?;
    check(err.contains("no progress"), || err.clone())?;
    check(took < stall * 5, || format!("took {took:?}"))?;
    // Neither the file nor its temporary copy is left on the controller.
    let left: Vec<_> = std::fs::read_dir(&local_dir)?.flatten().map(|e| e.file_name()).collect();
    check(left.is_empty(), || format!("left behind: {left:?}"))
}

/// Something accepts TCP on the SSH port but never says a word: each attempt ends at the
/// connect timeout, the retries end at the retry window, and the error says what happened.
fn tcp_listener_that_never_speaks_ssh_fails_after_the_retry_window() -> Result<(), Failed> {
    let d = tmp();
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            keep.lock().unwrap().push(c);
        }
    });
    let y = format!(
        "defaults:\n  user: root\n  identity_file: {}\n  known_hosts: {}\n  host_key_check: accept-new\ngroups:\n  g:\n    - {{name: mute, ssh_ip: 127.0.0.1, port: {port}}}\n",
        lab().file("id_ed25519").display(),
        d.path().join("kh").display(),
    );
    let inv = inventory(d.path(), "inv.yaml", &y);
    let r =
        mgmt(&["exec", "-o", "plain", "-i", s(&inv), "--connect-timeout", "1", "--retry-for", "3", "--", "true"], &[]);
    r.fails(1, &format!("cannot connect to 127.0.0.1:{port}: 127.0.0.1:{port}: no SSH handshake within 1s (after"));
    check(r.stderr.contains("mute: FAILED"), || r.all())?;
    check(r.elapsed >= Duration::from_secs(2) && r.elapsed < Duration::from_secs(8), || format!("{:?}", r.elapsed))?;
    let attempts = held.lock().unwrap().len();
    check(attempts >= 2, || format!("the listener saw {attempts} attempts"))
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .shared_lab(|| {
            Lab::up("t", 7, NODES, &["--hidden", "1", "--no-sftp", &format!("{NODE_NO_SFTP},{NODE_CUT_EXEC}")])
        })
        .needing_root(&[
            ("key_auth_each_key_type", key_auth_each_key_type),
            ("password_auth_and_wrong_password_fails_fast", password_auth_and_wrong_password_fails_fast),
            ("passphrase_key_auth", passphrase_key_auth),
            ("agent_auth", agent_auth),
            ("changed_host_key_is_refused_with_both_fingerprints", changed_host_key_is_refused_with_both_fingerprints),
            ("unknown_host_strict_refused_accept_new_recorded", unknown_host_strict_refused_accept_new_recorded),
            ("concurrent_runs_learn_each_host_key_once", concurrent_runs_learn_each_host_key_once),
            ("jump_host_reaches_a_node_on_a_hidden_network", jump_host_reaches_a_node_on_a_hidden_network),
            ("sudo_with_password_never_shows_it", sudo_with_password_never_shows_it),
            ("timeout_leaves_no_process_behind", timeout_leaves_no_process_behind),
            ("late_sshd_is_reached_by_retry", late_sshd_is_reached_by_retry),
            ("nonzero_exit_names_node_command_code_and_stderr", nonzero_exit_names_node_command_code_and_stderr),
            ("hostile_strings_arrive_byte_exact", hostile_strings_arrive_byte_exact),
            ("fifty_nodes_in_one_run", fifty_nodes_in_one_run),
            (
                "upload_skips_identical_and_falls_back_to_exec_without_sftp",
                upload_skips_identical_and_falls_back_to_exec_without_sftp,
            ),
            ("directory_tree_upload", directory_tree_upload),
            ("large_upload_and_download_intact", large_upload_and_download_intact),
            ("get_fetches_one_file_per_host", get_fetches_one_file_per_host),
            ("ssh_config_alias_and_proxyjump_from_config_file", ssh_config_alias_and_proxyjump_from_config_file),
            ("bad_input_and_dry_run_touch_nothing", bad_input_and_dry_run_touch_nothing),
            ("jump_host_is_never_sent_the_target_password", jump_host_is_never_sent_the_target_password),
            ("revoked_host_key_is_refused", revoked_host_key_is_refused),
            ("unreadable_known_hosts_is_refused", unreadable_known_hosts_is_refused),
            (
                "link_cut_mid_upload_leaves_no_half_file_and_rerun_completes",
                link_cut_mid_upload_leaves_no_half_file_and_rerun_completes,
            ),
            (
                "stopped_node_mid_upload_and_mid_download_hits_the_stall_timeout",
                stopped_node_mid_upload_and_mid_download_hits_the_stall_timeout,
            ),
            (
                "tcp_listener_that_never_speaks_ssh_fails_after_the_retry_window",
                tcp_listener_that_never_speaks_ssh_fails_after_the_retry_window,
            ),
        ])
}
