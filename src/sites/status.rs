//! Each site's last operation, kept in the state store as `sites/<site>.json`, so a re-run of
//! `sites apply` knows which sites are done and `sites status` can show the fleet. A site's
//! instance documents (cluster, CNF) stay where the hooks keep them; this only records what
//! the fleet run did with the site. It holds no secret: an error message is already masked.
//!
//! A run records its owner (`lifecycle/owner.rs`) in every site it queues or starts: a site
//! whose run was SIGKILLed or crashed would otherwise say `running` for ever. Read back
//! ([`Statuses::load`]), such a site is `failed`, abandoned. Every site of a run is recorded
//! `pending` (no start time) before the first one starts, so one never started still shows.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::lifecycle::owner::{liveness, Liveness, Owner, ProcFs, Processes};
use crate::lifecycle::state::{now_rfc3339, Store};
use crate::lifecycle::state_key::StateKey;

/// Where a site's run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Queued by a run and not started (yet): no start time.
    Pending,
    /// Started and not (yet) finished: a run that was killed leaves this, and a re-run runs
    /// the site again (the operations themselves resume).
    Running,
    Done,
    Failed,
    /// Never started: the rollout stopped first (`--max-fail`, `--fail-fast`); `error` says
    /// why, and a re-run runs the site. Spelled as `sites apply` reports it.
    #[serde(rename = "not-started")]
    NotStarted,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::NotStarted => "not-started",
        }
    }
}

/// One site's status document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteStatus {
    pub op: String,
    pub status: State,
    /// None while the site was never started.
    #[serde(default)]
    pub started: Option<String>,
    pub ended: Option<String>,
    /// Wall seconds of the last run, once it ended.
    pub seconds: Option<f64>,
    pub error: Option<String>,
    /// The digest of what the operation read from the site's folder (`inputs.rs`): a run of the
    /// same operation skips the site only while the folder still has this digest. Absent in a
    /// status written before digests were recorded (such a done site is still skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// The driver process of the run that wrote it (None in statuses of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// `abandoned` for a site whose run is gone without a word (set when read, never stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
}

/// The files a successful run of an operation read, kept for `sites diff`: no secret values
/// (rendered files hold references), and sealed and authenticated like every state document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppliedInputs {
    pub digest: String,
    pub files: crate::sites::inputs::Files,
}

impl SiteStatus {
    pub fn running(op: &str) -> SiteStatus {
        SiteStatus { status: State::Running, started: Some(now_rfc3339()), ..SiteStatus::pending(op) }
    }

    /// Queued by this process's run of `op`, not started: no start time.
    pub fn pending(op: &str) -> SiteStatus {
        SiteStatus {
            op: op.into(),
            status: State::Pending,
            started: None,
            ended: None,
            seconds: None,
            error: None,
            inputs: None,
            owner: Owner::current(&ProcFs),
            error_kind: None,
        }
    }

    /// A site the rollout did not start, and why (nothing ran on it: no time, no inputs, no
    /// owner: it is no run's to abandon).
    pub fn not_started(op: &str, reason: &str) -> SiteStatus {
        SiteStatus { status: State::NotStarted, error: Some(reason.into()), owner: None, ..SiteStatus::pending(op) }
    }

    /// The status as a reader reports it: pending or running with its run's process gone
    /// (SIGKILLed, crashed, the machine restarted) is failed, abandoned, saying why.
    pub fn reported(mut self, procs: &dyn Processes) -> SiteStatus {
        if !matches!(self.status, State::Pending | State::Running) {
            return self;
        }
        if let Some(Liveness::Gone(why)) = self.owner.as_ref().map(|o| liveness(o, procs)) {
            let was = self.status.name();
            self.status = State::Failed;
            self.error = Some(format!("abandoned: the run of {} is gone ({why}) while the site was {was}", self.op));
            self.error_kind = Some("abandoned".into());
        }
        self
    }

    /// The end of the run that `self` started.
    pub fn finish(&mut self, error: Option<String>, seconds: f64) {
        self.status = if error.is_none() { State::Done } else { State::Failed };
        self.ended = Some(now_rfc3339());
        self.seconds = Some((seconds * 100.0).round() / 100.0);
        self.error = error;
    }

    /// Whether a run of `op` may skip this site: it finished that very operation.
    pub fn done_for(&self, op: &str) -> bool {
        self.op == op && self.status == State::Done
    }

    /// Whether a run of `op` on inputs of digest `inputs` may skip this site: it finished that
    /// very operation on the same inputs (or before digests were recorded).
    pub fn done_with(&self, op: &str, inputs: &str) -> bool {
        self.done_for(op) && self.inputs.as_deref().is_none_or(|d| d == inputs)
    }
}

/// The status documents of one state directory: `<state-dir>/sites/<site>.json`, and the
/// inputs of each site's last successful run of each operation,
/// `<state-dir>/sites/applied/<site>.<op>.json`.
pub struct Statuses {
    store: Store,
    applied: Store,
}

impl Statuses {
    /// Writable (0700 directory, 0600 files, atomic replace), with the operator's state key
    /// (never used: a status holds no secret; but opening a store checks and creates its key,
    /// and that must be the operator's, not a default one).
    pub fn open(state_dir: &Path, key: StateKey) -> Result<Statuses> {
        let again = StateKey::at(key.path());
        let store = Store::open_with_key(&state_dir.join("sites"), key)?;
        Ok(Statuses { store, applied: Store::open_with_key(&state_dir.join("sites").join("applied"), again)? })
    }

    /// Read only: plans and `sites status` write nothing and create nothing.
    pub fn read_only(state_dir: &Path) -> Statuses {
        Statuses::read_only_with_key(state_dir, StateKey::default_location())
    }

    /// Read only, with the operator's key (`sites diff` opens the recorded inputs with it).
    pub fn read_only_with_key(state_dir: &Path, key: StateKey) -> Statuses {
        let again = StateKey::at(key.path());
        Statuses {
            store: Store::read_only_with_key(&state_dir.join("sites"), key),
            applied: Store::read_only_with_key(&state_dir.join("sites").join("applied"), again),
        }
    }

    /// What the last successful run of `op` on `site` read, if one was recorded.
    pub fn load_applied(&self, site: &str, op: &str) -> Result<Option<AppliedInputs>> {
        self.applied.load_doc(site, op)
    }

    pub fn save_applied(&self, site: &str, op: &str, a: &AppliedInputs) -> Result<()> {
        self.applied.save_doc(site, op, a)
    }

    /// A site's status as a reader reports it ([`SiteStatus::reported`] on this machine).
    pub fn load(&self, site: &str) -> Result<Option<SiteStatus>> {
        self.load_with(site, &ProcFs)
    }

    pub fn load_with(&self, site: &str, procs: &dyn Processes) -> Result<Option<SiteStatus>> {
        Ok(self.store.load_doc::<SiteStatus>(site, "")?.map(|s| s.reported(procs)))
    }

    pub fn save(&self, site: &str, s: &SiteStatus) -> Result<()> {
        self.store.save_doc(site, "", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_is_skipped_only_when_the_same_op_is_done() {
        let d = tempfile::tempdir().unwrap();
        let k = tempfile::tempdir().unwrap();
        let st = Statuses::open(d.path(), StateKey::at(k.path().join("key"))).unwrap();
        assert_eq!(st.load("par1").unwrap(), None);
        let mut s = SiteStatus::running("instantiate");
        st.save("par1", &s).unwrap();
        assert!(!st.load("par1").unwrap().unwrap().done_for("instantiate"), "running is not done");
        s.finish(None, 1.234);
        st.save("par1", &s).unwrap();
        let back = st.load("par1").unwrap().unwrap();
        assert!(back.done_for("instantiate") && !back.done_for("terminate"));
        assert_eq!(back.seconds, Some(1.23));
        assert!(d.path().join("sites/par1.json").is_file());
        s.finish(Some("par1-m1: cannot connect".into()), 2.0);
        assert!(!s.done_for("instantiate") && s.status == State::Failed);
        // The inputs' digest: the same op on other inputs is not done.
        let mut s = SiteStatus::running("instantiate");
        s.inputs = Some("sha256:aa".into());
        s.finish(None, 1.0);
        st.save("par1", &s).unwrap();
        let back = st.load("par1").unwrap().unwrap();
        assert!(back.done_with("instantiate", "sha256:aa") && !back.done_with("instantiate", "sha256:bb"));
        assert!(!back.done_with("terminate", "sha256:aa"));
        let old = SiteStatus { inputs: None, ..back };
        assert!(old.done_with("instantiate", "sha256:bb"), "a status from before digests: still done");
        let a = AppliedInputs { digest: "sha256:aa".into(), files: [("inventory.yaml".into(), "x".into())].into() };
        st.save_applied("par1", "instantiate", &a).unwrap();
        assert_eq!(st.load_applied("par1", "instantiate").unwrap(), Some(a));
        assert_eq!(st.load_applied("par1", "terminate").unwrap(), None);
        assert!(d.path().join("sites/applied/par1.instantiate.json").is_file());
        let ro = Statuses::read_only_with_key(d.path(), StateKey::at(k.path().join("key")));
        assert!(ro.load_applied("par1", "instantiate").unwrap().is_some());
        // A read-only view creates nothing.
        let e = tempfile::tempdir().unwrap();
        assert_eq!(Statuses::read_only(e.path()).load("x").unwrap(), None);
        Statuses::read_only(e.path()).save("x", &s).unwrap();
        assert!(!e.path().join("sites").exists());
    }

    /// A site whose run was SIGKILLed says `running` (or `pending`, never started) in the
    /// store; read back once that run's process is gone, it is failed, abandoned. A live run's
    /// sites read as they are; a never-started site has no start time.
    #[test]
    fn a_killed_runs_sites_read_as_abandoned_and_queued_ones_show_unstarted() {
        use crate::lifecycle::owner::FakeProcesses;
        let d = tempfile::tempdir().unwrap();
        let k = tempfile::tempdir().unwrap();
        let st = Statuses::open(d.path(), StateKey::at(k.path().join("key"))).unwrap();
        let live = FakeProcesses::new("ctl", "0f3c2a8e-5b1d-4c7e-9a2f-1e2d3c4b5a69", 31, 400);
        let owner = Owner::current(&live);
        let started = SiteStatus { owner: owner.clone(), ..SiteStatus::running("instantiate") };
        let queued = SiteStatus { owner, ..SiteStatus::pending("instantiate") };
        assert!(queued.started.is_none());
        st.save("par1", &started).unwrap();
        st.save("par2", &queued).unwrap();
        assert_eq!(st.load_with("par1", &live).unwrap().unwrap().status, State::Running);
        assert_eq!(st.load_with("par2", &live).unwrap().unwrap().status, State::Pending);
        let killed = FakeProcesses { procs: Default::default(), ..live };
        for site in ["par1", "par2"] {
            let s = st.load_with(site, &killed).unwrap().unwrap();
            assert_eq!((s.status, s.error_kind.as_deref()), (State::Failed, Some("abandoned")), "{site}");
            assert!(s.error.as_deref().unwrap().contains("process 31"));
            assert!(!s.done_for("instantiate"), "an abandoned site runs again");
        }
        // A site no run started is no run's to abandon, whatever the processes say.
        let ns = SiteStatus::not_started("instantiate", "not started: the rollout stopped");
        assert_eq!((ns.status.name(), ns.started.as_deref()), ("not-started", None));
        assert_eq!(ns.reported(&killed).status, State::NotStarted);
        // A status of an earlier version (a start time, no owner) still reads.
        let old = r#"{"op":"instantiate","status":"running","started":"2026-01-01T00:00:00Z","ended":null,"seconds":null,"error":null}"#;
        let v: SiteStatus = serde_json::from_str(old).unwrap();
        assert_eq!((v.status, v.started.as_deref()), (State::Running, Some("2026-01-01T00:00:00Z")));
    }
}
