//! Test support: a real OpenSSH lab (scripts/lab.sh) that is always torn down, helpers to
//! run the real `mgmt-driver` binary against it, the runner every test binary (tests/bin/) runs
//! its suites with (`harness`), and named phases for long tests (`phase`).
#![allow(dead_code)] // shared by several test binaries; each uses a part
#![allow(clippy::print_stderr, clippy::exit)] // a harness logs and exits as it must; the lints are the binary's

pub mod harness;
pub mod k8s_validate;
pub mod kit;
pub mod phase;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// A running lab. Dropping it tears everything down, also when a test panicked.
pub struct Lab {
    pub name: String,
    pub net: u8,
    pub dir: PathBuf,
}

impl Lab {
    pub fn up(name: &str, net: u8, nodes: usize, extra: &[&str]) -> Lab {
        let dir = repo().join("target/lab").join(name);
        let lab = Lab { name: name.into(), net, dir };
        let mut args: Vec<String> =
            vec!["up".into(), nodes.to_string(), "--name".into(), name.into(), "--net".into(), net.to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = lab.script(&args);
        assert!(
            out.status.success(),
            "lab up failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    pub fn script(&self, args: &[String]) -> Output {
        Command::new("bash").arg(repo().join("scripts/lab.sh")).args(args).output().expect("run scripts/lab.sh")
    }

    fn node_cmd(&self, verb: &str, node: &str) -> Output {
        self.script(&[verb.into(), node.into(), "--name".into(), self.name.clone()])
    }

    pub fn stop(&self, node: &str) {
        let o = self.node_cmd("stop", node);
        assert!(o.status.success(), "lab stop {node}: {}", String::from_utf8_lossy(&o.stderr));
    }

    pub fn start(&self, node: &str) {
        let o = self.node_cmd("start", node);
        assert!(o.status.success(), "lab start {node}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// Run a command inside a node's namespaces, out of band (not through SSH).
    pub fn node_exec(&self, node: &str, cmd: &[&str]) -> Output {
        let mut args = vec!["exec".to_string(), node.to_string(), "--name".into(), self.name.clone(), "--".into()];
        args.extend(cmd.iter().map(|s| s.to_string()));
        self.script(&args)
    }

    pub fn ip(&self, i: usize) -> String {
        format!("198.18.{}.{}", self.net, 10 + i)
    }

    pub fn hidden_ip(&self, j: usize) -> String {
        format!("198.19.{}.{}", self.net, 10 + j)
    }

    pub fn node(&self, i: usize) -> String {
        format!("{}-{i}", self.name)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn password(&self) -> String {
        std::fs::read_to_string(self.file("password")).unwrap().trim_end().to_string()
    }

    /// Tear the lab down (dropping a lab does it; a lab in a static must call it).
    pub fn down(&self) {
        let o = self.script(&["down".into(), "--name".into(), self.name.clone()]);
        if !o.status.success() {
            eprintln!("lab down failed: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.down();
    }
}

/// Output of one `mgmt-driver` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "expected success:\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }

    #[track_caller]
    pub fn fails(&self, code: i32, needle: &str) -> &Self {
        assert_eq!(self.code, code, "expected exit {code}:\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        assert!(
            self.all().contains(needle),
            "expected {needle:?} in output:\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// The state-sealing key every test run uses unless it names its own: inside target/, so tests
/// never create or read the operator's `~/.config/mgmt-driver/state.key`.
pub fn test_state_key() -> PathBuf {
    repo().join("target/test-state.key")
}

/// The real binary with the test environment: the operator's own ~/.ssh/config is not read
/// (tests name their config files explicitly), no agent, no inventory from the environment, the
/// test state key.
pub fn binary() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"));
    c.env_remove("SSH_AUTH_SOCK").env_remove("MGMT_DRIVER_INVENTORY");
    c.env("MGMT_DRIVER_SSH_CONFIG", "none").env("MGMT_DRIVER_STATE_KEY_FILE", test_state_key());
    c
}

/// Run the real binary (see [`binary`]). Every `-o json` run's stdout must be exactly one result
/// document that satisfies docs/result.schema.json, whatever else the test checks.
pub fn mgmt(args: &[&str], env: &[(&str, &str)]) -> Run {
    let start = Instant::now();
    let o = command(args, env).output().expect("run mgmt-driver");
    finish(args, o, start)
}

/// The real binary as [`mgmt`] runs it, for a test that must signal it while it runs: start it
/// with [`spawn`], end with [`wait`] (which checks the result document like [`mgmt`]).
pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = binary();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// A running `mgmt-driver`, its output read into memory as it comes.
pub struct Running {
    pub child: std::process::Child,
    args: Vec<String>,
    start: Instant,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut child = command(args, env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start mgmt-driver");
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    Running { child, args: args.iter().map(|s| s.to_string()).collect(), start: Instant::now(), out, err }
}

impl Running {
    /// Send a signal (`INT`, `TERM`, `KILL`) to the process.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(ok.success(), "kill -{sig} {}", self.child.id());
    }

    /// Wait for the end (at most `within`: a hang fails the test, after killing the process).
    /// Killed by a signal, `code` is -1.
    #[track_caller]
    pub fn wait(mut self, within: Duration) -> Run {
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.start.elapsed() > within {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "mgmt-driver {:?} still ran after {within:?} (killed):\n--- stdout\n{}\n--- stderr\n{}",
                    self.args,
                    String::from_utf8_lossy(&self.out.join().unwrap()),
                    String::from_utf8_lossy(&self.err.join().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let o = Output { status, stdout: self.out.join().unwrap(), stderr: self.err.join().unwrap() };
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        finish(&args, o, self.start)
    }
}

fn finish(args: &[&str], o: Output, start: Instant) -> Run {
    let run = Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        elapsed: start.elapsed(),
    };
    if run.code >= 0 && args.contains(&"hook") {
        check_document(args, &run, "hook.schema.json");
    } else if run.code >= 0 && args.windows(2).any(|w| w == ["-o", "json"] || w == ["--output", "json"]) {
        check_document(args, &run, "result.schema.json");
    }
    run
}

/// A schema from `docs/`, compiled once per test binary.
fn schema(file: &'static str) -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<std::sync::Mutex<Vec<(&str, &'static jsonschema::Validator)>>> =
        std::sync::OnceLock::new();
    let mut all = V.get_or_init(Default::default).lock().unwrap();
    if let Some((_, v)) = all.iter().find(|(f, _)| *f == file) {
        return v;
    }
    let text = std::fs::read_to_string(repo().join("docs").join(file)).expect("the schema file");
    let v = jsonschema::validator_for(&serde_json::from_str(&text).expect("schema is JSON")).expect("a valid schema");
    let v: &'static jsonschema::Validator = Box::leak(Box::new(v));
    all.push((file, v));
    v
}

/// stdout must be one JSON document that satisfies `docs/<file>` and whose `ok` agrees with
/// the exit code: docs/result.schema.json for `-o json`, docs/hook.schema.json for `hook`
/// (which prints its response whatever `-o` says).
#[track_caller]
fn check_document(args: &[&str], run: &Run, file: &'static str) {
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "mgmt-driver {args:?}: stdout is not one JSON document ({e}):\n{}\n--- stderr\n{}",
            run.stdout, run.stderr
        )
    });
    let errors: Vec<String> =
        schema(file).iter_errors(&doc).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "mgmt-driver {args:?}: the document breaks docs/{file}: {errors:#?}\n{doc:#}");
    let kind = if file == "hook.schema.json" { "HookResponse" } else { "Result" };
    assert_eq!(doc["kind"], kind, "mgmt-driver {args:?}: {doc}");
    assert_eq!(doc["ok"] == true, run.code == 0, "mgmt-driver {args:?}: ok disagrees with exit {}: {doc}", run.code);
}

/// Write an inventory file into `dir` and return its path.
pub fn inventory(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, yaml).unwrap();
    p
}
