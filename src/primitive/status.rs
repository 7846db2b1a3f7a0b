//! A primitive run's status record (OSM writes `status`, `detailed-status` and `status-time` to
//! its database on every change): `pending → running → completed | failed`, with times, the
//! primitive, the target, the exit code, the error kind, the output tails and the structured
//! result. One document per run in the state store (`<run id>.primitive.json`, 0600, secrets
//! sealed), rewritten on every change and emitted as a `status` event at the same time, so the
//! JSON-lines stream and `primitive status RUN_ID` never disagree.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::lifecycle::owner::{liveness, Liveness, Owner, Processes};
use crate::lifecycle::state::{now_rfc3339, Store};

pub const KIND: &str = "primitive";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Running,
    Completed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

/// Why a run failed, as OSM's connector distinguishes it; each has its own exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Parameters that do not fit the declaration (nothing connected). Exit 3.
    BadArguments,
    /// The machine could not be reached or logged in to. Exit 4.
    Connection,
    /// The script ran past the primitive's timeout and was killed. Exit 5.
    Timeout,
    /// The script failed (non-zero exit, or a result that is not JSON). Exit 6.
    Execution,
    /// The host key changed or is revoked (or unknown under strict checking). Exit 7.
    InvalidCertificate,
    /// The driver was stopped (SIGINT/SIGTERM) while the run was pending or running. Exit 8.
    Interrupted,
    /// The driver running it is gone without a word (SIGKILL, a crash, a reboot): found so
    /// when the record is read. Exit 9 (never `primitive run`'s own: it is only read back).
    Abandoned,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::BadArguments => 3,
            ErrorKind::Connection => 4,
            ErrorKind::Timeout => 5,
            ErrorKind::Execution => 6,
            ErrorKind::InvalidCertificate => 7,
            ErrorKind::Interrupted => 8,
            ErrorKind::Abandoned => 9,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadArguments => "bad_arguments",
            ErrorKind::Connection => "connection",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Execution => "execution",
            ErrorKind::InvalidCertificate => "invalid_certificate",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Abandoned => "abandoned",
        }
    }

    /// The kind of an engine error met while running a primitive.
    pub fn of(e: &Error) -> ErrorKind {
        match e {
            Error::Input { .. } => ErrorKind::BadArguments,
            Error::HostKey { .. } => ErrorKind::InvalidCertificate,
            Error::Connect { .. } | Error::Auth { .. } | Error::Session { .. } | Error::Skipped { .. } => {
                ErrorKind::Connection
            }
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Remote { .. } | Error::Transfer { .. } | Error::Unreadable { .. } | Error::State { .. } => {
                ErrorKind::Execution
            }
        }
    }
}

/// One run of one primitive on one target. `Debug` masks secret-named parameters.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: String,
    pub primitive: String,
    pub target: String,
    pub status: Status,
    pub detailed_status: String,
    pub created: String,
    /// When the status last changed (OSM's `status-time`).
    pub status_time: String,
    #[serde(default)]
    pub started: Option<String>,
    #[serde(default)]
    pub finished: Option<String>,
    /// The parameters as the script got them (secret-named ones are sealed by the store).
    #[serde(default)]
    pub params: Map<String, Value>,
    #[serde(default)]
    pub exit_code: Option<u32>,
    #[serde(default)]
    pub error_kind: Option<ErrorKind>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stdout_tail: Option<String>,
    #[serde(default)]
    pub stderr_tail: Option<String>,
    #[serde(default)]
    pub result: Option<Value>,
    /// The result fields `primitives.yaml` declares secret (`secret_results`), kept apart from
    /// `result` under a secret name so the store seals them whole; outputs show each as the mask
    /// in its place in `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_result: Option<Map<String, Value>>,
    /// The driver process running it, so a reader can tell when it died with the run pending
    /// or running (`lifecycle/owner.rs`). None in records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

crate::secret::impl_debug_masked!(RunRecord);

/// How much of stdout a record keeps (the whole output was streamed as events).
pub const TAIL_BYTES: usize = 4096;

/// The last `TAIL_BYTES` of `s`, cut at a character boundary.
pub fn tail(s: &str) -> String {
    if s.len() <= TAIL_BYTES {
        return s.to_string();
    }
    let mut at = s.len() - TAIL_BYTES;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    s[at..].to_string()
}

impl RunRecord {
    pub fn new(run_id: &str, primitive: &str, target: &str, params: Map<String, Value>) -> RunRecord {
        let now = now_rfc3339();
        RunRecord {
            run_id: run_id.into(),
            primitive: primitive.into(),
            target: target.into(),
            status: Status::Pending,
            detailed_status: "waiting for the target".into(),
            created: now.clone(),
            status_time: now,
            started: None,
            finished: None,
            params,
            exit_code: None,
            error_kind: None,
            error: None,
            stdout_tail: None,
            stderr_tail: None,
            result: None,
            secret_result: None,
            owner: None,
        }
    }

    /// Keep the script's result, the fields `secret` names (the declaration's `secret_results`)
    /// apart from the rest.
    pub fn keep_result(&mut self, value: Option<Value>, secret: &[String]) {
        let (mut rest, mut hidden) = (value, Map::new());
        if let Some(Value::Object(m)) = rest.as_mut() {
            for k in secret {
                if let Some(v) = m.remove(k) {
                    hidden.insert(k.clone(), v);
                }
            }
        }
        self.result = rest;
        self.secret_result = (!hidden.is_empty()).then_some(hidden);
    }

    /// Move to `status` with `detail`: saved, then emitted. The transitions only go forward.
    pub fn set(&mut self, status: Status, detail: impl Into<String>, store: &Store, ev: &HostEvents) -> Result<()> {
        self.status = status;
        self.detailed_status = detail.into();
        self.status_time = now_rfc3339();
        match status {
            Status::Running => self.started = Some(self.status_time.clone()),
            Status::Completed | Status::Failed => self.finished = Some(self.status_time.clone()),
            Status::Pending => {}
        }
        let saved = store.save_doc(&self.run_id, KIND, self);
        ev.emit(EventKind::Status {
            subject: format!("primitive {} run {}: {}", self.primitive, self.run_id, self.detailed_status),
            status: status.as_str().into(),
        });
        saved
    }

    /// The driver stopped (SIGINT/SIGTERM) while this run was pending or running: the record
    /// ends `failed`, saying so, instead of staying `running` for ever. No event: the process is
    /// on its way out, and its interruption report says the same. The script itself is killed
    /// on the node by the leash when the connection goes.
    pub fn interrupted(&mut self, store: &Store) -> Result<()> {
        let was = self.status.as_str();
        self.status = Status::Failed;
        self.detailed_status = format!("interrupted: the driver was stopped while the run was {was}");
        self.error = Some(self.detailed_status.clone());
        self.error_kind = Some(ErrorKind::Interrupted);
        self.status_time = now_rfc3339();
        self.finished = Some(self.status_time.clone());
        store.save_doc(&self.run_id, KIND, self)
    }

    /// The record as every output shows it (JSON, YAML, plain, `primitive status`): the one
    /// masking rule of the store ([`crate::secret::masked`]: `admin_password` masked, a
    /// `public_key` readable), the declared secret result fields as the mask in their place,
    /// and URL passwords in the output tails masked as in the streamed output.
    pub fn shown(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("a record serializes");
        if let Some(m) = v.as_object_mut() {
            m.remove("secretResult");
            m.insert("result".into(), self.shown_result().unwrap_or(Value::Null));
            for t in ["stdoutTail", "stderrTail"] {
                if let Some(Value::String(x)) = m.get_mut(t) {
                    *x = crate::url_mask::mask_userinfo(x).into_owned();
                }
            }
        }
        crate::secret::masked(&v)
    }

    /// The structured result as outputs show it (masked as [`RunRecord::shown`]).
    pub fn shown_result(&self) -> Option<Value> {
        let mut r = self.result.clone();
        if let Some(hidden) = &self.secret_result {
            let m = match r.get_or_insert_with(|| Value::Object(Map::new())) {
                Value::Object(m) => m,
                _ => return r.as_ref().map(crate::secret::masked),
            };
            for k in hidden.keys() {
                m.insert(k.clone(), Value::String(crate::secret::MASK.into()));
            }
        }
        r.as_ref().map(crate::secret::masked)
    }

    /// The record as a reader reports it: one still pending or running whose owner is gone
    /// (SIGKILLed, crashed, rebooted: it never wrote its end) is failed, abandoned, saying why.
    /// The stored record is left as it is; every read decides again, from `/proc` (`procs`).
    pub fn reported(mut self, procs: &dyn Processes) -> RunRecord {
        if !matches!(self.status, Status::Pending | Status::Running) {
            return self;
        }
        if let Some(Liveness::Gone(why)) = self.owner.as_ref().map(|o| liveness(o, procs)) {
            let was = self.status.as_str();
            self.status = Status::Failed;
            self.detailed_status = format!("abandoned: the driver running it is gone ({why}) while it was {was}");
            self.error = Some(self.detailed_status.clone());
            self.error_kind = Some(ErrorKind::Abandoned);
        }
        self
    }

    pub fn load(store: &Store, run_id: &str) -> Result<Option<RunRecord>> {
        store.load_doc(run_id, KIND)
    }

    /// Every run recorded in the store, oldest first.
    pub fn list(store: &Store) -> Result<Vec<RunRecord>> {
        let suffix = format!(".{KIND}.json");
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(store.dir()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::input(store.dir().display().to_string(), "state", e.to_string())),
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(&suffix).filter(|id| !id.starts_with('.')) {
                if let Some(r) = RunRecord::load(store, id)? {
                    out.push(r);
                }
            }
        }
        out.sort_by(|a, b| (&a.created, &a.run_id).cmp(&(&b.created, &b.run_id)));
        Ok(out)
    }
}

/// One run's record by id, or every run's (`primitive status [RUN_ID]`), as a reader reports
/// them ([`RunRecord::reported`]: an abandoned run is failed).
pub fn runs(store: &Store, run_id: Option<&str>, procs: &dyn Processes) -> Result<Vec<RunRecord>> {
    let all = match run_id {
        Some(id) => {
            crate::lifecycle::state::check_instance_id(id)?;
            vec![RunRecord::load(store, id)?.ok_or_else(|| {
                Error::input("arguments", "RUN_ID", format!("no run {id} in {}", store.dir().display()))
            })?]
        }
        None => RunRecord::list(store)?,
    };
    Ok(all.into_iter().map(|r| r.reported(procs)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::MASK;

    #[test]
    fn kinds_have_their_own_exit_codes_apart_from_1_and_2() {
        let all = [
            ErrorKind::BadArguments,
            ErrorKind::Connection,
            ErrorKind::Timeout,
            ErrorKind::Execution,
            ErrorKind::InvalidCertificate,
            ErrorKind::Interrupted,
            ErrorKind::Abandoned,
        ];
        let codes: std::collections::BTreeSet<i32> = all.iter().map(|k| k.exit_code()).collect();
        assert_eq!(codes.len(), all.len());
        assert!(codes.iter().all(|c| (3..=9).contains(c)));
        let hk = Error::HostKey { node: "n".into(), addr: "a".into(), message: "changed".into() };
        assert_eq!(ErrorKind::of(&hk), ErrorKind::InvalidCertificate);
        let t = Error::Timeout { node: "n".into(), command: "c".into(), elapsed: std::time::Duration::from_secs(1) };
        assert_eq!(ErrorKind::of(&t), ErrorKind::Timeout);
        let c = Error::Connect { node: "n".into(), addr: "a".into(), message: "refused".into(), attempts: 1 };
        assert_eq!(ErrorKind::of(&c), ErrorKind::Connection);
    }

    #[test]
    fn records_are_saved_on_every_change_and_listed() {
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
        let store = Store::open_with_key(&d.path().join("s"), key).unwrap();
        let (events, mut rx) = crate::event::Events::channel();
        let ev = events.for_host("e1");
        let mut params = Map::new();
        params.insert("db_password".into(), Value::String("Pw-run-1".into()));
        let mut r = RunRecord::new("run-1", "touch", "e1", params);
        r.set(Status::Pending, "queued", &store, &ev).unwrap();
        r.set(Status::Running, "running touch.sh", &store, &ev).unwrap();
        r.set(Status::Completed, "exit code 0", &store, &ev).unwrap();
        let seen: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|e| match e.kind {
                EventKind::Status { status, .. } => Some(status),
                _ => None,
            })
            .collect();
        assert_eq!(seen, ["pending", "running", "completed"]);
        let back = RunRecord::load(&store, "run-1").unwrap().unwrap();
        assert_eq!(back.status, Status::Completed);
        assert!(back.started.is_some() && back.finished.is_some());
        let text = std::fs::read_to_string(store.doc_path("run-1", KIND)).unwrap();
        assert!(!text.contains("Pw-run-1"), "{text}");
        assert_eq!(RunRecord::list(&store).unwrap().len(), 1);
        let t = tail(&"é".repeat(5000));
        assert!(t.len() <= TAIL_BYTES && t.starts_with('é'), "{}", t.len());
    }

    #[test]
    fn outputs_mask_secret_result_fields_and_keep_public_keys() {
        let mut r = RunRecord::new("r1", "p", "n1", Map::new());
        r.result = Some(
            serde_json::json!({"admin_password": "hunter2", "pubkey": "ssh-ed25519 AAAAC3", "db": {"api_token": "t0k"}}),
        );
        for shown in [r.shown()["result"].clone(), r.shown_result().unwrap()] {
            assert_eq!(shown["admin_password"], crate::secret::MASK);
            assert_eq!(shown["db"]["api_token"], crate::secret::MASK);
            assert_eq!(shown["pubkey"], "ssh-ed25519 AAAAC3");
        }
    }

    /// A run whose driver was SIGKILLed stays `running` in the store; a reader reports it failed,
    /// abandoned, once its owner is gone, and leaves a live one alone. One stopped by a signal
    /// carries the kind `interrupted`.
    #[test]
    fn a_run_whose_driver_is_gone_reads_as_abandoned_and_an_interrupted_one_has_its_kind() {
        use crate::lifecycle::owner::FakeProcesses;
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
        let store = Store::open_with_key(&d.path().join("s"), key).unwrap();
        let (events, _rx) = crate::event::Events::channel();
        let boot = "0f3c2a8e-5b1d-4c7e-9a2f-1e2d3c4b5a69";
        let live = FakeProcesses::new("ctl", boot, 77, 900);
        let mut r = RunRecord::new("r3", "p", "n1", Map::new());
        r.owner = Owner::current(&live);
        r.set(Status::Running, "running", &store, &events.for_host("n1")).unwrap();
        let read = runs(&store, Some("r3"), &live).unwrap();
        assert_eq!(read[0].status, Status::Running, "a live owner's run is running");
        let killed = FakeProcesses { procs: Default::default(), ..live.clone() };
        let read = runs(&store, None, &killed).unwrap();
        assert_eq!((read[0].status, read[0].error_kind), (Status::Failed, Some(ErrorKind::Abandoned)));
        assert!(read[0].detailed_status.contains("abandoned") && read[0].detailed_status.contains("77"));
        assert_eq!(RunRecord::load(&store, "r3").unwrap().unwrap().status, Status::Running, "the store is not written");
        // A finished run is what it is, owner gone or not.
        r.set(Status::Completed, "done", &store, &events.for_host("n1")).unwrap();
        assert_eq!(runs(&store, Some("r3"), &killed).unwrap()[0].status, Status::Completed);
        // Interrupted: the kind says so.
        let mut i = RunRecord::new("r4", "p", "n1", Map::new());
        i.interrupted(&store).unwrap();
        let back = RunRecord::load(&store, "r4").unwrap().unwrap();
        assert_eq!((back.status, back.error_kind), (Status::Failed, Some(ErrorKind::Interrupted)));
        assert!(back.started.is_none(), "it never reached its target");
    }

    /// A `public_key` in a result is readable in every output and in the store (it used to be
    /// masked and sealed); a field `primitives.yaml` declares secret is masked in every output
    /// and sealed in the store whatever its name.
    #[test]
    fn declared_secret_results_are_masked_and_sealed_and_public_keys_are_readable() {
        let d = tempfile::tempdir().unwrap();
        let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
        let store = Store::open_with_key(&d.path().join("s"), key).unwrap();
        let mut r = RunRecord::new("r2", "p", "n1", Map::new());
        let v = serde_json::json!({"public_key": "ssh-ed25519 AAAAPub1", "otp": "Otp-7731", "n": 1});
        r.keep_result(Some(v), &["otp".into()]);
        for shown in [r.shown()["result"].clone(), r.shown_result().unwrap()] {
            assert_eq!(shown, serde_json::json!({"public_key": "ssh-ed25519 AAAAPub1", "otp": MASK, "n": 1}));
        }
        assert!(!r.shown().to_string().contains("Otp-7731"));
        assert!(!format!("{r:?}").contains("Otp-7731"));
        let (events, _rx) = crate::event::Events::channel();
        r.set(Status::Completed, "done", &store, &events.for_host("n1")).unwrap();
        let text = std::fs::read_to_string(store.doc_path("r2", KIND)).unwrap();
        assert!(!text.contains("Otp-7731"), "{text}");
        assert!(text.contains("AAAAPub1"), "a public key is not sealed: {text}");
        let back = RunRecord::load(&store, "r2").unwrap().unwrap();
        assert_eq!(back.shown_result(), r.shown_result());
    }
}
