//! Where Helm runs: the masters named by helm_info, the first one that answers (Tacker only ever
//! used `masternode_ip[0]`), with Helm's major version detected once. Charts and repositories go
//! to every master, so any of them can take over.

use std::time::Duration;

use crate::cnf::cluster_env::HelmEnv;
use crate::cnf::helm_cmd::Helm;
use crate::error::Result;
use crate::event::EventKind;
use crate::facts::helm::{release_status, HelmVersion, Json, Output, ReleaseStatusOrAbsent};
use crate::lifecycle::{Runner, Target};
use crate::redact::Redact;
use crate::transport::ExecOutput;

pub struct Session {
    pub rt: Runner,
    pub masters: Vec<Target>,
    /// Index of the master Helm runs on.
    pub active: usize,
    pub helm: Helm,
    pub status_every: Duration,
}

impl Session {
    /// Pick the first reachable master, detect its Helm (a plan assumes Helm 3) and, when
    /// `prepare`, make the cluster's Helm environment there (`env`; a reset that uninstalls
    /// nothing must not make the environment it is about to remove).
    pub async fn open(
        rt: Runner,
        masters: Vec<Target>,
        status_every: Duration,
        env: HelmEnv,
        prepare: bool,
    ) -> Result<Session> {
        let refs: Vec<&Target> = masters.iter().collect();
        let m = rt.first_reachable(&refs).await?;
        let active = masters.iter().position(|x| x.host.name == m.host.name).expect("one of them");
        let major = rt.read(m, &HelmVersion).await?;
        rt.ev(m).emit(EventKind::Status { subject: "helm".into(), status: format!("major version {major}") });
        let s = Session { rt, masters, active, helm: Helm { major, env }, status_every };
        if prepare {
            s.prepare_env(s.master()).await?;
        }
        Ok(s)
    }

    /// Make (or refresh) the cluster's Helm environment on `n`: done for the active master when
    /// the session opens, and by the steps that reach every master (charts and repositories).
    pub async fn ensure_env(&self, n: &Target) -> Result<()> {
        if n.host.name == self.master().host.name {
            return Ok(());
        }
        self.prepare_env(n).await
    }

    async fn prepare_env(&self, n: &Target) -> Result<()> {
        if let Some(cmd) = self.helm.env.prepare() {
            self.rt.exec(n, self.rt.root_cmd(n, cmd, Duration::from_secs(30))).await?;
        }
        Ok(())
    }

    pub fn master(&self) -> &Target {
        &self.masters[self.active]
    }

    /// Run a Helm command (as root) on the active master.
    pub async fn run(&self, script: String, timeout: Duration) -> Result<ExecOutput> {
        self.run_redacted(script, timeout, Redact::None).await
    }

    /// Run a Helm command whose output may hold secret values: streamed as `redact` says.
    pub async fn run_redacted(&self, script: String, timeout: Duration, redact: Redact) -> Result<ExecOutput> {
        let m = self.master();
        self.rt.exec(m, self.rt.root_cmd(m, script, timeout).with_redact(redact)).await
    }

    /// Run a Helm command that prints JSON on the active master and parse it (null in a plan).
    /// Not streamed: release values and status (`config`) hold secret values; what is shown
    /// is the parsed, masked result.
    pub async fn json(&self, script: String, what: &str) -> Result<serde_json::Value> {
        self.rt.read(self.master(), &Json::new(script, what)).await
    }

    /// Run a Helm command whose text output is the result (empty in a plan).
    pub async fn text(&self, script: String, timeout: Duration) -> Result<String> {
        self.rt.read(self.master(), &Output { script, wait: timeout }).await
    }

    /// `(status, revision)` of a release, or None when it does not exist; in a plan, `planned`.
    pub async fn release(&self, rel: &str, ns: &str, planned: Option<(String, u64)>) -> Result<Option<(String, u64)>> {
        let status = ReleaseStatusOrAbsent { helm: &self.helm, release: rel, namespace: ns, planned };
        self.rt.read(self.master(), &status).await
    }

    /// Run a long Helm command while polling `helm status` every `status_every` on a second
    /// channel, reporting each status as an event (OSM's `_store_status`), and a final one.
    /// `redact`: how Helm's own output is streamed (all of it hidden when the release has
    /// secret values: chart NOTES may print them).
    pub async fn run_watched(
        &self,
        script: String,
        timeout: Duration,
        rel: &str,
        ns: &str,
        redact: Redact,
    ) -> Result<ExecOutput> {
        let status_cmd = self.helm.status(rel, ns)?;
        let main = self.run_redacted(script, timeout, redact);
        let poll = async {
            loop {
                tokio::time::sleep(self.status_every).await;
                self.report_status(&status_cmd, rel).await;
            }
        };
        // The final status is reported by whoever reads it next (`ops::describe`).
        tokio::select! {
            r = main => r,
            _ = poll => unreachable!("the poll loop never ends"),
        }
    }

    async fn report_status(&self, status_cmd: &str, rel: &str) {
        let m = self.master();
        let c = self.rt.root_cmd(m, status_cmd.to_string(), Duration::from_secs(30)).with_redact(Redact::All);
        let status = match self.rt.exec(m, c).await {
            Ok(o) => release_status(&o.stdout_text())
                .map(|(s, r)| format!("{s} (revision {r})"))
                .unwrap_or_else(|| "unknown".into()),
            Err(_) => "not found yet".into(),
        };
        self.rt.ev(m).emit(EventKind::Status { subject: format!("release {rel}"), status });
    }

    /// Every master, for steps that must reach all of them (charts, repositories).
    pub fn all(&self) -> Vec<&Target> {
        self.masters.iter().collect()
    }
}
