//! Each site's last operation, kept in the state store as `sites/<site>.json`, so a re-run of
//! `sites apply` knows which sites are done and `sites status` can show the fleet. A site's
//! instance documents (cluster, CNF) stay where the hooks keep them; this only records what
//! the fleet run did with the site. It holds no secret: an error message is already masked.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::lifecycle::state::{now_rfc3339, Store};
use crate::lifecycle::state_key::StateKey;

/// Where a site's run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
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
    pub started: String,
    pub ended: Option<String>,
    /// Wall seconds of the last run, once it ended.
    pub seconds: Option<f64>,
    pub error: Option<String>,
    /// The digest of what the operation read from the site's folder (`inputs.rs`): a run of the
    /// same operation skips the site only while the folder still has this digest. Absent in a
    /// status written before digests were recorded (such a done site is still skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
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
        SiteStatus {
            op: op.into(),
            status: State::Running,
            started: now_rfc3339(),
            ended: None,
            seconds: None,
            error: None,
            inputs: None,
        }
    }

    /// A site the rollout did not start, and why (nothing ran on it: no time, no inputs).
    pub fn not_started(op: &str, reason: &str) -> SiteStatus {
        SiteStatus { status: State::NotStarted, error: Some(reason.into()), ..SiteStatus::running(op) }
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

    pub fn load(&self, site: &str) -> Result<Option<SiteStatus>> {
        self.store.load_doc(site, "")
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
}
