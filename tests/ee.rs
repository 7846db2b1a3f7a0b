//! Execution environments, the driver's own key and named primitives, against real sshd nodes
//! (scripts/lab.sh, no kit): the key made once and injected by `ee register --install-key
//! --drop-password`, then password-less logins with it; primitives with typed parameters (bad
//! ones refused before any connection, a hostile value arriving byte-exact), their status
//! records and events, their error kinds and exit codes (execution, timeout, invalid
//! certificate); and a key rotation across two EEs while one of them is down.
//!
//! Needs root (namespaces), as every lab main (tests/support/harness.rs).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::harness::{shared_lab, Suite};
use support::kit::{check, s, R};
use support::phase::phase;
use support::{mgmt, Lab, Run};

/// Lab `e1` on net 120. The trials run at once, so each edits its own nodes' authorized_keys:
/// node 3 for the key test, node 4 for the primitives, nodes 1 and 2 for the rotation.
fn lab() -> &'static Lab {
    shared_lab()
}

/// One test's own state store and files.
struct Ctx {
    dir: tempfile::TempDir,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx { dir: tempfile::tempdir().unwrap() }
    }
    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `mgmt-driver ARGS --state-dir STATE` (before a `--`, which starts a remote command).
    fn run(&self, args: &[&str]) -> Run {
        let state = self.state();
        let mut a: Vec<&str> = args.to_vec();
        let at = a.iter().position(|x| *x == "--").unwrap_or(a.len());
        a.splice(at..at, ["--state-dir", s(&state)]);
        mgmt(&a, &[])
    }
    /// Register lab node `i` as `name` with mduser's password, installing our key.
    fn register(&self, name: &str, i: usize, extra: &[&str]) -> Run {
        let pw = self.p("pw");
        std::fs::write(&pw, lab().password()).unwrap();
        let ip = lab().ip(i);
        let mut a =
            vec!["-o", "json", "ee", "register", name, "--host", &ip, "--user", "mduser", "--password-file", s(&pw)];
        a.extend_from_slice(extra);
        self.run(&a)
    }
}

fn doc(r: &Run) -> Value {
    serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr))
}

/// Every file under `dir`, as text, for "no password at rest".
fn all_text(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_file() {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
        }
    }
    out
}

fn key_is_made_once_and_registers_a_machine_for_password_less_logins() -> R {
    let c = Ctx::new();
    let first = phase("key: made on first use, the same line after", || {
        let a = c.run(&["key"]);
        a.ok();
        let line = a.stdout.trim().to_string();
        check(line.starts_with("ssh-ed25519 AAAA") && !line.contains('\n'), || format!("{line:?}"))?;
        let b = c.run(&["-o", "json", "key", "show"]);
        b.ok();
        let d = doc(&b);
        check(d["result"]["publicKey"] == line.as_str() && d["result"]["generated"] == false, || format!("{d:#}"))?;
        let text = all_text(&c.state());
        check(!text.contains("PRIVATE KEY"), || "the private key is in clear in the store".into())?;
        Ok(line)
    })?;
    phase("register with a password, install our key, drop the password", || {
        let r = c.register("lab-3", 3, &["--install-key", "--drop-password", "--namespace", ".ns1.vnf1.vdu-1"]);
        r.ok();
        let d = doc(&r);
        let res = &d["result"];
        check(res["id"].as_str().is_some_and(|i| i.len() == 36), || format!("{d:#}"))?;
        check(res["credentials"]["driverKey"] == true && res["credentials"]["passwordStored"] == false, || {
            format!("{d:#}")
        })?;
        check(res["namespace"]["vdu"] == "vdu" && res["namespace"]["count"] == 1, || format!("{d:#}"))?;
        check(res["hostKey"].as_str().is_some_and(|k| k.starts_with("SHA256:")), || format!("{d:#}"))?;
        check(!all_text(&c.state()).contains(&lab().password()), || "the password is in the store".into())?;
        // Our public key is in mduser's authorized_keys, once, with a 0600 file.
        let o = lab().node_exec(
            &lab().node(3),
            &["sh", "-c", "stat -c %a /home/mduser/.ssh/authorized_keys; cat /home/mduser/.ssh/authorized_keys"],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        check(text.starts_with("600\n") && text.matches(first.as_str()).count() == 1, || text.clone())
    })?;
    phase("exec --ee logs in with our key alone", || {
        let r = c.run(&["-o", "json", "exec", "--ee", "lab-3", "--", "id", "-un"]);
        r.ok();
        let d = doc(&r);
        check(d["result"]["hosts"][0]["stdout"] == "mduser\n", || format!("{d:#}"))?;
        // run-script and get take --ee too.
        let script = c.p("hello.sh");
        std::fs::write(&script, "#!/bin/sh\necho \"hello $1\" > ee-hello.txt\n").unwrap();
        // (run-script's options go before SCRIPT: what follows it is the script's arguments)
        let state = c.state();
        mgmt(&["run-script", "--ee", "lab-3", "--state-dir", s(&state), s(&script), "from the driver"], &[]).ok();
        let got = c.p("got");
        c.run(&["get", "--ee", "lab-3", "ee-hello.txt", s(&got)]).ok();
        let text = std::fs::read_to_string(got.join("lab-3/ee-hello.txt")).unwrap_or_default();
        check(text == "hello from the driver\n", || format!("{text:?}"))
    })?;
    phase("a second registration of the name is refused before connecting; list filters by namespace", || {
        c.register("lab-3", 3, &[]).fails(2, "registered already");
        let l = c.run(&["-o", "json", "ee", "list", "--namespace", ".ns1.vnf1"]);
        l.ok();
        check(doc(&l)["result"]["ees"].as_array().map(Vec::len) == Some(1), || l.stdout.clone())?;
        let l = c.run(&["-o", "json", "ee", "list", "--namespace", ".ns2"]);
        check(doc(&l)["result"]["ees"].as_array().map(Vec::len) == Some(0), || l.stdout.clone())?;
        c.run(&["ee", "list", "--namespace", "ns1"]).fails(2, "--namespace");
        // Under strict checking a host key the store has not learned is refused, and nothing is
        // registered.
        c.register("strict-1", 1, &["--host-key-check", "strict"]).fails(1, "host key");
        c.run(&["ee", "show", "strict-1"]).fails(2, "no such execution environment");
        Ok(())
    })?;
    phase("ee delete --remove-key takes our line out again", || {
        c.run(&["ee", "delete", "lab-3", "--remove-key"]).ok();
        let o = lab().node_exec(&lab().node(3), &["cat", "/home/mduser/.ssh/authorized_keys"]);
        check(!String::from_utf8_lossy(&o.stdout).contains(&first), || "our key is still there".into())?;
        c.run(&["exec", "--ee", "lab-3", "--", "true"]).fails(2, "no such execution environment");
        Ok(())
    })?;
    phase("register with no credential: the driver's key went in by cloud-init (OSM's flow)", || {
        // What cloud-init does with `mgmt-driver key`'s line: it is in the user's authorized_keys.
        let add = "f=/home/mduser/.ssh/authorized_keys; printf '%s\\n' \"$1\" >> $f; chown mduser: $f; chmod 600 $f";
        let o = lab().node_exec(&lab().node(3), &["sh", "-c", add, "sh", &first]);
        check(o.status.success(), || String::from_utf8_lossy(&o.stderr).into_owned())?;
        let ip = lab().ip(3);
        let r = c.run(&["-o", "json", "ee", "register", "vm-3", "--host", &ip, "--user", "mduser"]);
        r.ok();
        let d = doc(&r);
        let cred = &d["result"]["credentials"];
        check(cred["driverKey"] == true && cred["passwordStored"] == false && cred["identityFile"].is_null(), || {
            format!("{d:#}")
        })?;
        let x = c.run(&["-o", "json", "exec", "--ee", "vm-3", "--", "id", "-un"]);
        x.ok();
        check(doc(&x)["result"]["hosts"][0]["stdout"] == "mduser\n", || x.stdout.clone())?;
        c.run(&["ee", "delete", "vm-3", "--remove-key"]).ok();
        // With no key at all, the refusal says how to make one, before connecting.
        let bare = Ctx::new();
        bare.run(&["ee", "register", "vm-x", "--host", &ip, "--user", "mduser"]).fails(2, "mgmt-driver key");
        Ok(())
    })
}

const PRIMITIVES: &str = "primitives:
  - name: echo
    description: hand the parameters back
    script: echo.sh
    timeout: 20s
    runs_on: ee
    parameters:
      - {name: msg, type: string, required: true}
      - {name: count, type: int, default: 1}
      - {name: mode, type: enum, values: [fast, slow], default: fast}
      - {name: loud, type: bool, default: false}
  - name: fail
    script: fail.sh
    runs_on: ee
  - name: slow
    script: slow.sh
    timeout: 2s
    runs_on: ee
  - name: long
    script: long.sh
    timeout: 60s
    runs_on: ee
  - name: as-root
    script: echo.sh
    root: true
    runs_on: ee
    parameters:
      - {name: msg, type: string, default: root}
      - {name: count, type: int, default: 0}
  - name: anywhere
    script: echo.sh
    parameters:
      - {name: msg, type: string, required: true}
      - {name: count, type: int, default: 1}
  - name: secrets
    script: secrets.sh
    runs_on: ee
    secret_results: [otp]
";

/// What `secrets.sh` hands back: a secret by name, a secret by declaration, a public key.
const ADMIN_PW: &str = "Adm-Pw-5150";
const OTP: &str = "Otp-2468-x";
const PUBKEY: &str = "ssh-ed25519 AAAAC3NzaLabPub mgmt@ee";

/// The hostile value: quotes, a command substitution, backticks, newlines, a backslash, a
/// trailing newline, UTF-8.
const HOSTILE: &str = "it's \"$(touch /tmp/pwned)\" `id` $HOME\nsecond line; rm -rf / \\ é\n";

fn write_primitives(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("primitives.yaml"), PRIMITIVES).unwrap();
    // The value's bytes as hex on stdout (byte-exact, whatever they are), and a JSON result.
    std::fs::write(
        dir.join("echo.sh"),
        "#!/bin/sh\nprintf %s \"$PARAM_MSG\" | od -An -v -tx1 | tr -d ' \\n'; echo\n\
         printf '{\"count\": %s, \"user\": \"%s\"}' \"$PARAM_COUNT\" \"$(id -un)\" > \"$MGMT_DRIVER_RESULT\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("fail.sh"), "#!/bin/sh\necho about to fail\necho 'disk full' >&2\nexit 3\n").unwrap();
    std::fs::write(dir.join("slow.sh"), "#!/bin/sh\nsleep 30\n").unwrap();
    std::fs::write(dir.join("long.sh"), "#!/bin/sh\nsleep 41.5\n").unwrap();
    std::fs::write(
        dir.join("secrets.sh"),
        format!(
            "#!/bin/sh\nprintf '{{\"admin_password\": \"{ADMIN_PW}\", \"otp\": \"{OTP}\", \"public_key\": \"{PUBKEY}\"}}' > \"$MGMT_DRIVER_RESULT\"\n"
        ),
    )
    .unwrap();
}

/// The parameter files left under the node's run directories (none, ever, once a run ended).
fn params_left(node: usize) -> String {
    let o = lab().node_exec(
        &lab().node(node),
        &["sh", "-c", "find /home/mduser/.mgmt-driver/primitives -name 'params.*' 2>/dev/null; true"],
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// No parameter file is left on node `node` (within the leash's TERM-then-KILL time).
fn no_params_left(node: usize) -> R {
    let none = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        params_left(node).is_empty()
    });
    check(none, || {
        let o = lab().node_exec(
            &lab().node(node),
            &["sh", "-c", "ls -la /home/mduser/.mgmt-driver/primitives/*; ps -ef | grep -v ps"],
        );
        format!("parameters left on the node: {}\n{}", params_left(node), String::from_utf8_lossy(&o.stdout))
    })
}

/// The `status` events of a `-o json` run's stderr, in order.
fn statuses(r: &Run) -> Vec<String> {
    r.stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "status" && e["subject"].as_str().is_some_and(|s| s.starts_with("primitive ")))
        .map(|e| e["status"].as_str().unwrap_or("").to_string())
        .collect()
}

fn primitives_run_with_typed_parameters_status_and_error_kinds() -> R {
    let c = Ctx::new();
    let prims = c.p("prims");
    write_primitives(&prims);
    let d = s(&prims).to_string();
    phase("register lab-4 with our key", || {
        c.register("lab-4", 4, &["--install-key", "--drop-password"]).ok();
        Ok(())
    })?;
    phase("list and show", || {
        let l = c.run(&["-o", "json", "primitive", "list", "--dir", &d]);
        l.ok();
        check(doc(&l)["result"]["primitives"].as_array().map(Vec::len) == Some(7), || l.stdout.clone())?;
        let sh = c.run(&["-o", "json", "primitive", "show", "echo", "--dir", &d]);
        sh.ok();
        check(doc(&sh)["result"]["parameters"][2]["values"][1] == "slow", || sh.stdout.clone())
    })?;
    phase("bad parameters: all named, exit 3, before connecting to an address nobody answers", || {
        let inv = c.p("dead.yaml");
        std::fs::write(
            &inv,
            format!(
                "defaults: {{user: mduser, password: x, known_hosts: {}, host_key_check: strict}}\ngroups:\n  g:\n    - {{name: dead, ssh_ip: {}}}\n",
                s(&c.p("kh")),
                lab().ip(99)
            ),
        )
        .unwrap();
        // `primitive run anywhere` on the dead inventory, with these `--param`s.
        let run_dead = |params: &[&str]| {
            let mut a = vec!["-o", "json", "--retry-for", "1s", "--connect-timeout", "1s", "primitive", "run"];
            a.extend(["anywhere", "--dir", &d, "-i", s(&inv)]);
            for p in params {
                a.extend(["--param", p]);
            }
            c.run(&a)
        };
        let r = run_dead(&["count=many", "colour=red"]);
        r.fails(3, "bad arguments for primitive anywhere");
        let dd = doc(&r);
        let names: Vec<&str> =
            dd["result"]["badArguments"].as_array().unwrap().iter().filter_map(|b| b["name"].as_str()).collect();
        check(names == ["count", "colour", "msg"], || format!("{dd:#}"))?;
        check(!r.stderr.contains("connecting"), || format!("it connected:\n{}", r.stderr))?;
        check(r.elapsed < Duration::from_secs(3), || format!("took {:?}", r.elapsed))?;
        // The same target with good parameters really is unreachable: a connection error, exit 4.
        let r = run_dead(&["msg=x"]);
        r.fails(4, "cannot connect");
        check(doc(&r)["result"]["runs"][0]["errorKind"] == "connection", || r.stdout.clone())
    })?;
    phase("a hostile string arrives byte-exact; events pending, running, completed; the record agrees", || {
        let r = c.run(&[
            "-o",
            "json",
            "primitive",
            "run",
            "echo",
            "--dir",
            &d,
            "--ee",
            "lab-4",
            "--param",
            &format!("msg={HOSTILE}"),
            "--param",
            "count=7",
        ]);
        r.ok();
        let dd = doc(&r);
        let run = &dd["result"]["runs"][0];
        let hex: String = HOSTILE.bytes().map(|b| format!("{b:02x}")).collect();
        check(run["stdoutTail"] == format!("{hex}\n").as_str(), || format!("{dd:#}"))?;
        check(run["result"] == serde_json::json!({"count": 7, "user": "mduser"}), || format!("{dd:#}"))?;
        check(run["status"] == "completed" && run["exitCode"] == 0, || format!("{dd:#}"))?;
        check(statuses(&r) == ["pending", "running", "completed"], || format!("{:?}\n{}", statuses(&r), r.stderr))?;
        let o = lab()
            .node_exec(&lab().node(4), &["sh", "-c", "ls /tmp/pwned 2>&1; ls -A /home/mduser/.mgmt-driver/primitives"]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        check(text.contains("No such file") && !text.contains('-'), || format!("left behind: {text}"))?;
        let id = run["runId"].as_str().unwrap().to_string();
        let st = c.run(&["-o", "json", "primitive", "status", &id]);
        st.ok();
        let rec = &doc(&st)["result"]["runs"][0];
        check(rec["status"] == "completed" && rec["started"].is_string() && rec["finished"].is_string(), || {
            st.stdout.clone()
        })
    })?;
    phase("a failing primitive: status failed, kind execution naming it, its exit code, exit 6", || {
        let r = c.run(&["-o", "json", "primitive", "run", "fail", "--dir", &d, "--ee", "lab-4"]);
        r.fails(6, "primitive fail");
        let dd = doc(&r);
        let run = &dd["result"]["runs"][0];
        check(run["status"] == "failed" && run["errorKind"] == "execution" && run["exitCode"] == 3, || {
            format!("{dd:#}")
        })?;
        check(run["stderrTail"].as_str().is_some_and(|t| t.contains("disk full")), || format!("{dd:#}"))?;
        check(statuses(&r) == ["pending", "running", "failed"], || r.stderr.clone())?;
        let st = c.run(&["primitive", "status", run["runId"].as_str().unwrap()]);
        st.ok();
        check(st.stdout.contains("failed") && st.stdout.contains("execution"), || st.stdout.clone())
    })?;
    phase("root: true runs the script through sudo with the EE's kept (sealed) password", || {
        c.register("lab-4pw", 4, &["--install-key"]).ok();
        let r = c.run(&["-o", "json", "primitive", "run", "as-root", "--dir", &d, "--ee", "lab-4pw"]);
        r.ok();
        let dd = doc(&r);
        check(dd["result"]["runs"][0]["result"]["user"] == "root", || format!("{dd:#}"))?;
        check(!r.all().contains(&lab().password()), || "the sudo password is in the output".into())
    })?;
    phase("results: a public key readable, secrets masked in every output, never streamed", || {
        let r = c.run(&["-o", "json", "primitive", "run", "secrets", "--dir", &d, "--ee", "lab-4"]);
        r.ok();
        let dd = doc(&r);
        let res = &dd["result"]["runs"][0]["result"];
        check(res["public_key"] == PUBKEY && res["admin_password"] == "********" && res["otp"] == "********", || {
            format!("{dd:#}")
        })?;
        let id = dd["result"]["runs"][0]["runId"].as_str().unwrap().to_string();
        let plain = c.run(&["-o", "plain", "primitive", "run", "secrets", "--dir", &d, "--ee", "lab-4"]);
        plain.ok();
        check(plain.all().contains(PUBKEY), || plain.all())?;
        let yaml = c.run(&["-o", "yaml", "primitive", "status", &id]);
        yaml.ok();
        check(yaml.all().contains(PUBKEY), || yaml.all())?;
        for (what, text) in
            [("json", r.all()), ("plain", plain.all()), ("status", yaml.all()), ("store", all_text(&c.state()))]
        {
            check(!text.contains(ADMIN_PW) && !text.contains(OTP), || format!("a secret result in {what}:\n{text}"))?;
        }
        Ok(())
    })?;
    phase("a primitive past its timeout: kind timeout, exit 5", || {
        let r = c.run(&["-o", "json", "primitive", "run", "slow", "--dir", &d, "--ee", "lab-4"]);
        r.fails(5, "timed out");
        check(doc(&r)["result"]["runs"][0]["errorKind"] == "timeout", || r.stdout.clone())?;
        check(r.elapsed < Duration::from_secs(20), || format!("took {:?}", r.elapsed))
    })?;
    phase(
        "SIGTERM while a primitive runs: exit 143, the record failed and interrupted, nothing left on the node",
        || {
            let state = c.state();
            let run = support::spawn(
                &["-o", "json", "primitive", "run", "long", "--dir", &d, "--ee", "lab-4", "--state-dir", s(&state)],
                &[],
            );
            let node = || lab().node_exec("4", &["pgrep", "-af", "sleep 41.5"]);
            let started = (0..300).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                !node().stdout.is_empty()
            });
            if !started {
                run.signal("KILL");
                return Err(format!("the primitive never started: {}", run.wait(Duration::from_secs(5)).all()).into());
            }
            run.signal("TERM");
            let r = run.wait(Duration::from_secs(15));
            check(r.code == 143, || format!("exit {}: {}", r.code, r.all()))?;
            let st = c.run(&["-o", "json", "primitive", "status"]);
            st.ok();
            let runs = doc(&st)["result"]["runs"].as_array().cloned().unwrap_or_default();
            let long: Vec<&Value> = runs.iter().filter(|x| x["primitive"] == "long").collect();
            check(long.len() == 1, || st.stdout.clone())?;
            check(long[0]["status"] == "failed", || st.stdout.clone())?;
            check(long[0]["detailedStatus"].as_str().is_some_and(|t| t.contains("interrupted")), || st.stdout.clone())?;
            check(long[0]["errorKind"] == "interrupted" && long[0]["started"].is_string(), || st.stdout.clone())?;
            check(long[0]["finished"].is_string(), || st.stdout.clone())?;
            let gone = (0..120).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                node().stdout.is_empty()
            });
            check(gone, || format!("still on the node: {}", String::from_utf8_lossy(&node().stdout)))?;
            no_params_left(4)
        },
    )?;
    phase("SIGKILL while a primitive runs: the run reads as failed, abandoned; no parameters left", || {
        let state = c.state();
        let run = support::spawn(
            &["-o", "json", "primitive", "run", "long", "--dir", &d, "--ee", "lab-4", "--state-dir", s(&state)],
            &[],
        );
        let node = || lab().node_exec("4", &["pgrep", "-af", "sleep 41.5"]);
        let started = (0..300).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            !node().stdout.is_empty()
        });
        run.signal("KILL");
        let r = run.wait(Duration::from_secs(15));
        check(started, || format!("the primitive never started: {}", r.all()))?;
        let st = c.run(&["-o", "json", "primitive", "status"]);
        st.ok();
        let runs = doc(&st)["result"]["runs"].as_array().cloned().unwrap_or_default();
        let gone: Vec<&Value> = runs.iter().filter(|x| x["errorKind"] == "abandoned").collect();
        check(gone.len() == 1 && gone[0]["primitive"] == "long" && gone[0]["status"] == "failed", || {
            st.stdout.clone()
        })?;
        check(gone[0]["detailedStatus"].as_str().is_some_and(|t| t.contains("abandoned")), || st.stdout.clone())?;
        check(runs.iter().all(|x| x["status"] != "running" && x["status"] != "pending"), || st.stdout.clone())?;
        let ended = (0..120).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            node().stdout.is_empty()
        });
        check(ended, || format!("left on the node: {}", String::from_utf8_lossy(&node().stdout)))?;
        no_params_left(4)
    })?;
    phase("a changed host key: kind invalid_certificate, exit 7", || {
        // The store's known_hosts now records another node's key for node 1's address.
        let kh = c.state().join("known_hosts");
        let lab_kh = std::fs::read_to_string(lab().file("known_hosts")).unwrap();
        let other = lab_kh.lines().find(|l| l.starts_with(&format!("{} ", lab().ip(2)))).unwrap();
        let forged = other.replacen(&lab().ip(2), &lab().ip(4), 1);
        std::fs::write(&kh, format!("{forged}\n")).unwrap();
        let r = c.run(&["-o", "json", "primitive", "run", "echo", "--dir", &d, "--ee", "lab-4", "--param", "msg=x"]);
        r.fails(7, "host key");
        check(doc(&r)["result"]["runs"][0]["errorKind"] == "invalid_certificate", || r.stdout.clone())
    })
}

/// The new key is RSA 4096 (`--type rsa`), so logins with rsa-sha2 are proven here too.
fn key_rotation_waits_for_a_stopped_ee_then_retires_the_old_key() -> R {
    let c = Ctx::new();
    let (n1, n2) = (lab().node(1), lab().node(2));
    phase("register two EEs with our key", || {
        c.register("rot-1", 1, &["--install-key", "--drop-password"]).ok();
        c.register("rot-2", 2, &["--install-key", "--drop-password"]).ok();
        Ok(())
    })?;
    // The store as it was, to prove later that the old key no longer logs in.
    let old = c.p("old-state");
    std::fs::create_dir_all(&old).unwrap();
    for e in std::fs::read_dir(c.state()).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), old.join(e.file_name())).unwrap();
        }
    }
    let old_line = c.run(&["key"]).stdout.trim().to_string();
    phase("a rotate refused for bad input (exit 2) changes nothing", || {
        for bad in [&["--parallel", "0"][..], &["--kex", "bogus-kex"]] {
            let mut args = vec!["key", "rotate"];
            args.extend(bad);
            c.run(&args).fails(2, bad[0]);
        }
        let now = c.run(&["-o", "json", "key"]);
        let d = doc(&now);
        check(d["result"]["rotation"]["pending"] == false, || format!("{d:#}"))?;
        check(d["result"]["publicKey"] == old_line.as_str(), || format!("{d:#}"))
    })?;
    lab().stop(&n2);
    let restart = Restart(n2.clone());
    let new_line = phase("rotate while rot-2 is down: pending on rot-2, exit 1", || {
        let r =
            c.run(&["-o", "json", "--retry-for", "1s", "--connect-timeout", "2s", "key", "rotate", "--type", "rsa"]);
        r.fails(1, "rot-2");
        let d = doc(&r);
        check(d["result"]["rotation"]["pending"] == true, || format!("{d:#}"))?;
        check(d["result"]["rotation"]["pendingOn"] == serde_json::json!(["rot-2"]), || format!("{d:#}"))?;
        let new = d["result"]["publicKey"].as_str().unwrap().to_string();
        check(new != old_line && new.starts_with("ssh-rsa "), || format!("the new key: {new}"))?;
        // rot-1 has both keys until rot-2 has the new one.
        let o = lab().node_exec(&n1, &["cat", "/home/mduser/.ssh/authorized_keys"]);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        check(t.contains(&new) && t.contains(&old_line), || t.clone())?;
        let l = c.run(&["-o", "json", "ee", "list"]);
        let ees = doc(&l)["result"]["ees"].clone();
        check(ees[1]["rotationPending"] == true && ees[0]["rotationPending"] == true, || format!("{ees:#}"))?;
        c.run(&["key", "rotate"]).fails(2, "finish-rotation");
        Ok(new)
    })?;
    drop(restart);
    phase("finish the rotation once rot-2 is back: the old key is gone everywhere", || {
        let r = c.run(&["-o", "json", "key", "finish-rotation"]);
        r.ok();
        let d = doc(&r);
        check(d["result"]["finished"] == true && d["result"]["rotation"]["pending"] == false, || format!("{d:#}"))?;
        for n in [&n1, &n2] {
            let o = lab().node_exec(n, &["cat", "/home/mduser/.ssh/authorized_keys"]);
            let t = String::from_utf8_lossy(&o.stdout).into_owned();
            check(t.contains(&new_line) && !t.contains(&old_line), || format!("{n}: {t}"))?;
        }
        c.run(&["exec", "--ee", "rot-1", "--ee", "rot-2", "--", "true"]).ok();
        Ok(())
    })?;
    phase("the old key no longer logs in", || {
        let r = mgmt(&["exec", "--ee", "rot-1", "--state-dir", s(&old), "--retry-for", "1s", "--", "true"], &[]);
        r.fails(1, "authentication failed");
        Ok(())
    })
}

/// Starts a stopped node again when dropped (also when a phase failed).
struct Restart(String);
impl Drop for Restart {
    fn drop(&mut self) {
        lab().start(&self.0);
    }
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!()).shared_lab(|| Lab::up("e1", 120, 4, &[])).needing_root(&[
        (
            "key_is_made_once_and_registers_a_machine_for_password_less_logins",
            key_is_made_once_and_registers_a_machine_for_password_less_logins,
        ),
        (
            "primitives_run_with_typed_parameters_status_and_error_kinds",
            primitives_run_with_typed_parameters_status_and_error_kinds,
        ),
        (
            "key_rotation_waits_for_a_stopped_ee_then_retires_the_old_key",
            key_rotation_waits_for_a_stopped_ee_then_retires_the_old_key,
        ),
    ])
}
