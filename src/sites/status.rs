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
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
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
        }
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
}

/// The status documents of one state directory: `<state-dir>/sites/<site>.json`.
pub struct Statuses {
    store: Store,
}

impl Statuses {
    /// Writable (0700 directory, 0600 files, atomic replace), with the operator's state key
    /// (never used: a status holds no secret; but opening a store checks and creates its key,
    /// and that must be the operator's, not a default one).
    pub fn open(state_dir: &Path, key: StateKey) -> Result<Statuses> {
        Ok(Statuses { store: Store::open_with_key(&state_dir.join("sites"), key)? })
    }

    /// Read only: plans and `sites status` write nothing and create nothing.
    pub fn read_only(state_dir: &Path) -> Statuses {
        Statuses { store: Store::read_only(&state_dir.join("sites")) }
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
        // A read-only view creates nothing.
        let e = tempfile::tempdir().unwrap();
        assert_eq!(Statuses::read_only(e.path()).load("x").unwrap(), None);
        Statuses::read_only(e.path()).save("x", &s).unwrap();
        assert!(!e.path().join("sites").exists());
    }
}
