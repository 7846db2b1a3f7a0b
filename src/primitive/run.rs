//! One primitive run on one target, as steps: upload the script and its parameters into a
//! private run directory (`~/.mgmt-driver/primitives/<run id>/`, the script 0700, `params.json`
//! and `params.env` 0600), run it there through `primitive_run.sh` under the primitive's timeout
//! (as root when it says so), then read back its exit status and structured result with
//! `primitive_result.sh`, which also removes the directory. The parameters never reach a command
//! line: the script finds them in `$PARAM_<NAME>` and in the JSON file `$MGMT_DRIVER_PARAMS`,
//! and may write JSON to `$MGMT_DRIVER_RESULT` (at most [`RESULT_MAX`](crate::facts::primitive::RESULT_MAX) bytes, checked as JSON).
//!
//! The status record moves `pending → running → completed | failed` as this goes, saved and
//! emitted at each step (`status.rs`); `running`, with its start time, once the target holds
//! the script. [`run`] does this on every target at once, every run recorded (with its owner,
//! this process) before the first connection and marked interrupted if the command is stopped;
//! one whose driver is killed outright reads as abandoned (`status.rs`). However a run ends,
//! `primitive_run.sh` leaves no parameters on the node, and sweeps older runs' leftovers.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::command::RemoteCommand;
use crate::error::{exit, Error, Result};
use crate::facts::primitive::PrimitiveResult;
use crate::inventory::Host;
use crate::lifecycle::owner::{Owner, ProcFs};
use crate::lifecycle::state::Store;
use crate::lifecycle::Runner;
use crate::primitive::spec::{env_file, Primitive};
use crate::primitive::status::{tail, ErrorKind, RunRecord, Status};
use crate::remote::PRIMITIVE_RUN;
use crate::target::become_for;
use crate::transport::{Source, UploadFile};

/// A primitive ready to run: checked parameters, the script's bytes (opened inside the
/// primitives' directory), and the parameter files. No `Debug`: the files hold the values.
#[derive(Clone)]
pub struct Prepared {
    pub primitive: Primitive,
    pub script: Source,
    params_json: Arc<[u8]>,
    params_env: Arc<[u8]>,
}

impl Prepared {
    pub fn new(primitive: Primitive, script: Source, params: Map<String, Value>) -> Result<Prepared> {
        let json = serde_json::to_vec_pretty(&Value::Object(params.clone())).expect("parameters serialize");
        let env = env_file(&params)?;
        Ok(Prepared { primitive, script, params_json: json.into(), params_env: env.into_bytes().into() })
    }

    /// The script's file name on the node.
    fn script_name(&self) -> &str {
        self.primitive.script.rsplit('/').next().unwrap_or(&self.primitive.script)
    }
}

/// Run `prep` on `host`, moving `rec` through its statuses. The error (if any) is also in the
/// record, with its kind.
pub async fn run_on(rt: &Runner, store: &Store, prep: &Prepared, host: &Host, rec: &mut RunRecord) -> Result<()> {
    let ev = rt.ev(host);
    let r = steps(rt, store, prep, host, rec).await;
    let (status, detail) = match &r {
        Ok(_) => (Status::Completed, "completed (exit code 0)".to_string()),
        Err(e) => {
            let kind = ErrorKind::of(e);
            rec.error_kind = Some(kind);
            rec.error = Some(e.to_string());
            (Status::Failed, format!("failed: {}", kind.as_str()))
        }
    };
    // A record that cannot be saved is reported, but never hides the run's own outcome.
    let saved = rec.set(status, detail, store, &ev);
    rt.forget(host).await;
    match (r, saved) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
        (Ok(()), Ok(())) => Ok(()),
    }
}

async fn steps(rt: &Runner, store: &Store, prep: &Prepared, host: &Host, rec: &mut RunRecord) -> Result<()> {
    let p = &prep.primitive;
    let ev = rt.ev(host);
    let dir = format!(".mgmt-driver/primitives/{}", rec.run_id);
    rt.upload(
        host,
        vec![
            UploadFile { source: prep.script.clone(), remote: format!("{dir}/{}", prep.script_name()), mode: 0o700 },
            UploadFile {
                source: Source::Bytes(prep.params_json.clone()),
                remote: format!("{dir}/params.json"),
                mode: 0o600,
            },
            UploadFile {
                source: Source::Bytes(prep.params_env.clone()),
                remote: format!("{dir}/params.env"),
                mode: 0o600,
            },
        ],
    )
    .await?;
    // Running (and a start time) only once the target is reached and holds the script: a run
    // that never got there was never started.
    rec.set(Status::Running, format!("running {} (timeout {}s)", p.script, p.timeout.as_secs_f64()), store, &ev)?;
    let become_ = become_for(host, p.root);
    let run = RemoteCommand::new(PRIMITIVE_RUN.command(&[dir.as_str(), prep.script_name(), p.name.as_str()])?)
        .with_timeout(Some(p.timeout))
        .with_become(become_.clone());
    let ran = rt.exec(host, run).await;
    let result = PrimitiveResult { dir: &dir, root: p.root };
    let out = match ran {
        Ok(o) => o,
        Err(e) => {
            // Clean up what can be (the run directory holds the parameters); the run's own
            // error is what counts.
            if !matches!(e, Error::Connect { .. } | Error::Auth { .. } | Error::HostKey { .. }) {
                let _ = rt.read(host, &result).await;
            }
            return Err(e);
        }
    };
    rec.stdout_tail = Some(tail(&out.stdout_text()));
    rec.stderr_tail = Some(tail(&out.stderr_tail));
    let (code, value) = rt.read(host, &result).await?;
    rec.exit_code = code;
    rec.keep_result(value, &p.secret_results);
    match code {
        Some(0) => Ok(()),
        _ => Err(Error::Remote {
            node: host.name.clone(),
            command: format!("primitive {} ({})", p.name, p.script),
            status: code.map(|c| format!("exit code {c}")).unwrap_or_else(|| "no exit status".into()),
            stderr_tail: out.stderr_tail.clone(),
        }),
    }
}

/// What a run on every target left: each target's record, the errors (in target order), and
/// the exit code (the first failed run's kind's).
pub struct Ran {
    pub runs: Vec<RunRecord>,
    pub errors: Vec<Error>,
    pub code: i32,
}

/// Run `prep` on every host at once (as the runner's fan-out allows). Every run is recorded
/// (pending) before the first connection; the runner is dropped once every run has its outcome.
pub async fn run(
    prep: &Prepared,
    params: &Map<String, Value>,
    hosts: Vec<Host>,
    store: &Store,
    rt: Runner,
) -> Result<Ran> {
    let prim = &prep.primitive;
    let mut records: Vec<RunRecord> = Vec::new();
    // Who runs them, so a reader can tell a run whose driver was killed (`status.rs`).
    let owner = Owner::current(&ProcFs);
    for h in &hosts {
        let mut r = RunRecord::new(&crate::ee::record::new_id(), &prim.name, &h.name, params.clone());
        r.owner = owner.clone();
        r.set(Status::Pending, "waiting for the target", store, &rt.ev(h))?;
        records.push(r);
    }
    // Dropped unfinished (a signal drops this future): every run not yet ended is marked so.
    let mut unfinished = Unfinished { store, run_ids: records.iter().map(|r| r.run_id.clone()).collect() };
    let pairs: Vec<(Host, std::sync::Mutex<RunRecord>)> =
        hosts.into_iter().zip(records).map(|(h, r)| (h, std::sync::Mutex::new(r))).collect();
    let nodes: Vec<&Host> = pairs.iter().map(|(h, _)| h).collect();
    let (rt_ref, pairs_ref) = (&rt, &pairs);
    let results = rt
        .each(&nodes, |h| async move {
            let slot = &pairs_ref.iter().find(|(x, _)| x.name == h.name).expect("a target").1;
            let mut rec = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let r = run_on(rt_ref, store, prep, h, &mut rec).await;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = rec;
            r
        })
        .await;
    unfinished.run_ids.clear();
    drop(rt);
    let mut code = exit::OK;
    let mut errors = Vec::new();
    let mut runs = Vec::new();
    for ((_, r), (_, slot)) in results.into_iter().zip(&pairs) {
        let rec = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Err(e) = r {
            if code == exit::OK {
                code = rec.error_kind.unwrap_or(ErrorKind::of(&e)).exit_code();
            }
            errors.push(e);
        }
        runs.push(rec);
    }
    Ok(Ran { runs, errors, code })
}

/// The runs of a `primitive run` that has not come back yet. When the command is stopped
/// (SIGINT/SIGTERM: `main.rs` drops the operation), the runs still pending or running are
/// recorded as failed and interrupted, so `primitive status` never shows a run that is gone as
/// running. Cleared once every run has its own outcome.
struct Unfinished<'a> {
    store: &'a Store,
    run_ids: Vec<String>,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        for id in &self.run_ids {
            if let Ok(Some(mut r)) = RunRecord::load(self.store, id) {
                if matches!(r.status, Status::Pending | Status::Running) {
                    if let Err(e) = r.interrupted(self.store) {
                        tracing::warn!(run = %id, error = %e, "could not record the interrupted run");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::primitive::parse_result;
    use crate::remote::PRIMITIVE_RESULT;

    /// The two node-side programs, run here: parameters arrive through the environment and the
    /// JSON file, params.env is gone before the script starts, a failing script's status and
    /// result come back, and the run directory is removed.
    #[test]
    fn the_programs_pass_parameters_and_bring_back_status_and_result() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        let hostile = "a'b\"$(id)`id`\nc\\";
        let mut params = Map::new();
        params.insert("msg".into(), Value::String(hostile.into()));
        std::fs::write(dir.join("params.env"), env_file(&params).unwrap()).unwrap();
        std::fs::write(dir.join("params.json"), serde_json::to_vec(&Value::Object(params)).unwrap()).unwrap();
        let script = "#!/bin/sh\n[ -e params.env ] && exit 9\nprintf '%s' \"$PARAM_MSG\" > got\n\
                      printf '{\"name\": \"%s\"}' \"$MGMT_DRIVER_PRIMITIVE\" > \"$MGMT_DRIVER_RESULT\"\nexit 4\n";
        std::fs::write(dir.join("s.sh"), script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("s.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let sh = |c: String| {
            let o = std::process::Command::new("sh").arg("-c").arg(c).current_dir(home.path()).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        sh(PRIMITIVE_RUN.command(&["run", "s.sh", "touch"]).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("got")).unwrap(), hostile);
        assert!(!dir.join("params.json").exists(), "the parameters outlived the script");
        let out = sh(PRIMITIVE_RESULT.command(&["run", "65536"]).unwrap());
        assert_eq!(parse_result(&out).unwrap(), (Some(4), Some(serde_json::json!({"name": "touch"}))));
        assert!(!dir.exists());
    }

    /// A target that cannot be reached: the run fails (connection) with no start time.
    #[tokio::test]
    async fn a_run_that_never_reaches_its_target_has_no_start_time() {
        use crate::transport::fake::FakeConnector;
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
        let store = Store::open_with_key(&d.path().join("s"), key).unwrap();
        let fake = FakeConnector::new();
        fake.down("n1");
        let (events, _rx) = crate::event::Events::channel();
        let rt = Runner::new(
            std::sync::Arc::new(fake),
            events,
            crate::lifecycle::runner::FanOut::default(),
            crate::lifecycle::Timeouts::default(),
        );
        let prim = crate::primitive::spec::parse("primitives:\n  - {name: p, script: p.sh}\n", "f").unwrap();
        let prep = Prepared::new(prim[0].clone(), Source::Bytes(b"true".to_vec().into()), Map::new()).unwrap();
        let ran = run(&prep, &Map::new(), vec![Host::for_test("n1", "192.0.2.1")], &store, rt).await.unwrap();
        let r = &ran.runs[0];
        assert_eq!((r.status, r.error_kind), (Status::Failed, Some(ErrorKind::Connection)));
        assert!(r.started.is_none(), "it never reached its target: {:?}", r.started);
        assert!(r.owner.is_some(), "the record names its owner");
    }

    /// One run is one upload and two execs (run, result): removing and sweeping parameters
    /// costs no round trip. The result's secrets reach no event (the reader is never streamed)
    /// and no output (masked), while a public key stays readable.
    #[tokio::test]
    async fn a_run_is_three_round_trips_and_its_secret_results_reach_no_event() {
        use crate::event::EventKind;
        use crate::transport::fake::{Call, FakeConnector};
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
        let store = Store::open_with_key(&d.path().join("s"), key).unwrap();
        let fake = FakeConnector::new();
        fake.reply(None, "primitive_run.sh", "");
        let result = r#"{"admin_password": "Pw-res-9", "otp": "Otp-res-9", "public_key": "ssh-ed25519 AAAAres"}"#;
        fake.reply(None, "primitive_result.sh", &format!("0\n{result}"));
        let (events, mut rx) = crate::event::Events::channel();
        let rt = Runner::new(
            std::sync::Arc::new(fake.clone()),
            events,
            crate::lifecycle::runner::FanOut::default(),
            crate::lifecycle::Timeouts::default(),
        );
        let yaml = "primitives:\n  - {name: p, script: p.sh, secret_results: [otp]}\n";
        let prim = crate::primitive::spec::parse(yaml, "f").unwrap();
        let prep = Prepared::new(prim[0].clone(), Source::Bytes(b"true".to_vec().into()), Map::new()).unwrap();
        let ran = run(&prep, &Map::new(), vec![Host::for_test("n1", "192.0.2.1")], &store, rt).await.unwrap();
        assert_eq!(ran.code, exit::OK, "{:?}", ran.errors);
        let trips: Vec<&str> = fake
            .calls()
            .iter()
            .filter_map(|c| match c {
                Call::Upload { .. } => Some("upload"),
                Call::Exec { script, .. } if script.starts_with("primitive_run.sh") => Some("run"),
                Call::Exec { script, .. } if script.starts_with("primitive_result.sh") => Some("result"),
                Call::Exec { script, .. } => panic!("an extra round trip: {script}"),
                _ => None,
            })
            .collect();
        assert_eq!(trips, ["upload", "run", "result"]);
        let streamed: String = std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|e| match e.kind {
                EventKind::Stdout { line } => Some(line),
                _ => None,
            })
            .collect();
        assert!(!streamed.contains("Pw-res-9") && !streamed.contains("Otp-res-9"), "{streamed}");
        let shown = ran.runs[0].shown().to_string();
        assert!(!shown.contains("Pw-res-9") && !shown.contains("Otp-res-9"), "{shown}");
        assert!(shown.contains("ssh-ed25519 AAAAres"), "{shown}");
        assert!(ran.runs[0].started.is_some());
    }

    fn run_dir(root: &std::path::Path, name: &str, script: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("params.env"), "PARAM_PW='Pw-left-1'\n").unwrap();
        std::fs::write(dir.join("params.json"), "{\"pw\": \"Pw-left-1\"}").unwrap();
        std::fs::write(dir.join("s.sh"), script).unwrap();
        std::fs::set_permissions(dir.join("s.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    /// A run stopped the way the leash stops it (TERM to the process group, here by `timeout`,
    /// as when the driver is killed) leaves no parameters on the node; also when, as there,
    /// its output pipes are gone (sshd closed them: the shell's own "Terminated" line then
    /// raises SIGPIPE).
    #[test]
    fn a_stopped_run_leaves_no_parameters() {
        let home = tempfile::tempdir().unwrap();
        let dir = run_dir(home.path(), "r1", "#!/bin/sh\nsleep 30\n");
        let mut child = std::process::Command::new("timeout")
            .args(["-k", "5", "1", "sh", "-c"])
            .arg(PRIMITIVE_RUN.command(&["r1", "s.sh", "p"]).unwrap())
            .current_dir(home.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        drop(child.stderr.take());
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(124));
        assert!(dir.join("s.sh").exists());
        // `timeout` is gone; the program's trap may still be finishing.
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            !dir.join("params.json").exists() && !dir.join("params.env").exists()
        });
        assert!(gone, "the parameters outlived the run");
    }

    /// A run sweeps what older runs left: the parameters of a run whose program is gone, and of
    /// a run never started that is over an hour old; a live run's and a fresh upload's stay.
    #[test]
    fn a_run_sweeps_the_parameters_older_runs_left() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("primitives");
        let gone = run_dir(&root, "gone", "");
        std::fs::write(gone.join("pid"), "999999999\n").unwrap();
        let live = run_dir(&root, "live", "");
        std::fs::write(live.join("pid"), format!("{}\n", std::process::id())).unwrap();
        let fresh = run_dir(&root, "fresh", "");
        let stale = run_dir(&root, "stale", "");
        let old = std::process::Command::new("touch").args(["-d", "2 hours ago"]).arg(&stale).status().unwrap();
        assert!(old.success());
        run_dir(&root, "now", "#!/bin/sh\nexit 0\n");
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(PRIMITIVE_RUN.command(&["primitives/now", "s.sh", "p"]).unwrap())
            .current_dir(home.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let has = |d: &std::path::Path| d.join("params.json").exists() || d.join("params.env").exists();
        assert!(!has(&gone), "a dead run's parameters stayed");
        assert!(!has(&stale), "a never-started run's parameters stayed");
        assert!(has(&live) && has(&fresh), "a live run's or a fresh upload's parameters were swept");
        assert!(!has(&root.join("now")));
    }
}
