//! Where Helm runs: the masters named by helm_info, the first one that answers (Tacker only ever
//! used `masternode_ip[0]`), with Helm's major version detected once. Charts and repositories go
//! to every master, so any of them can take over.

use std::time::Duration;

use crate::cnf::cluster_env::HelmEnv;
use crate::cnf::helm_apply;
use crate::cnf::helm_cmd::Helm;
use crate::cnf::helm_prepare;
use crate::error::Result;
use crate::event::EventKind;
use crate::facts::helm::{release_status, Json, Output};
use crate::lifecycle::fact::unreadable;
use crate::lifecycle::{Node, Runner, Target};
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
    /// Pick the first reachable master, then in one exec there detect its Helm (a plan assumes
    /// Helm 3) and, when `prepare`, make the cluster's Helm environment (`env`; a reset that
    /// uninstalls nothing must not make the environment it is about to remove):
    /// `src/remote/helm_prepare.sh` with nothing else to do.
    pub async fn open(
        rt: Runner,
        masters: Vec<Target>,
        status_every: Duration,
        env: HelmEnv,
        prepare: bool,
    ) -> Result<Session> {
        let mut s = Session::reach(rt, masters, status_every, env).await?;
        let m = s.master().clone();
        let plan = helm_prepare::Plan {
            env: &s.helm.env,
            make_env: prepare,
            chart_dir: "",
            owner: "",
            charts: &[],
            repos: &[],
            releases: &[],
            major: None,
        };
        let cmd = helm_prepare::command(&plan)?;
        let major = match s.program(&m, cmd, Duration::from_secs(60)).await? {
            None => 3,
            Some((out, shown)) => {
                helm_prepare::parse(&out, &[])
                    .map_err(|msg| unreadable(m.name(), &shown, "the Helm version", msg))?
                    .major
            }
        };
        s.set_major(major);
        Ok(s)
    }

    /// Run a node program whose output is read, never streamed (it may hold release values),
    /// on `n` as root: its stdout (up to `helm_apply::MAX_OUTPUT`) and the command as shown, or
    /// None in a plan.
    pub async fn program(&self, n: &Target, script: String, timeout: Duration) -> Result<Option<(Vec<u8>, String)>> {
        let cmd = self.rt.root_cmd(n, script, timeout).with_redact(Redact::All).with_capture(helm_apply::MAX_OUTPUT);
        let shown = cmd.display().to_string();
        let out = self.rt.exec(n, cmd).await?;
        Ok((!out.planned).then_some((out.stdout, shown)))
    }

    /// The first master that answers, nothing run on it yet: the caller detects Helm's version
    /// with its own first exec ([`set_major`](Self::set_major)); until then Helm 3 is assumed.
    pub async fn reach(rt: Runner, masters: Vec<Target>, status_every: Duration, env: HelmEnv) -> Result<Session> {
        let refs: Vec<&Target> = masters.iter().collect();
        let m = rt.first_reachable(&refs).await?;
        let active = masters.iter().position(|x| x.host.name == m.host.name).expect("one of them");
        Ok(Session { rt, masters, active, helm: Helm { major: 3, env }, status_every })
    }

    /// The active master's Helm major version, as its first exec read it.
    pub fn set_major(&mut self, major: u32) {
        self.helm.major = major;
        let m = self.master();
        self.rt.ev(m).emit(EventKind::Status { subject: "helm".into(), status: format!("major version {major}") });
    }

    /// Make (or refresh) the cluster's Helm environment on `n`: done for the active master when
    /// the session opens, and by the steps that reach every master (repositories).
    pub async fn ensure_env(&self, n: &Target) -> Result<()> {
        if n.host.name == self.master().host.name {
            return Ok(());
        }
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
        let m = self.master();
        // Room for a release's JSON (`-o json`), which holds its chart.
        let cmd = self.rt.root_cmd(m, script, timeout).with_redact(redact).with_capture(helm_apply::MAX_OUTPUT);
        // The final status is reported by whoever reads it next (`ops::describe`).
        self.polling(self.rt.exec(m, cmd), || self.report_status(&status_cmd, rel)).await
    }

    /// Run `main` and, every `status_every` until it ends, `report` (a status poll on a second
    /// channel).
    async fn polling<T, R: std::future::Future<Output = ()>>(
        &self,
        main: impl std::future::Future<Output = T>,
        report: impl Fn() -> R,
    ) -> T {
        let poll = async {
            loop {
                tokio::time::sleep(self.status_every).await;
                report().await;
            }
        };
        tokio::select! {
            r = main => r,
            _ = poll => unreachable!("the poll loop never ends"),
        }
    }

    /// Run the node program that installs or upgrades `rels` (`cnf/helm_apply.rs`) on the active
    /// master: read, never streamed (its output is the releases with their values). While it
    /// runs, `helm list` is polled every `status_every` and each release's status reported, as
    /// [`run_watched`](Self::run_watched) does for one release.
    pub async fn run_apply(
        &self,
        script: String,
        timeout: Duration,
        rels: &[String],
        ns: &str,
    ) -> Result<Option<(Vec<u8>, String)>> {
        let list = self.helm.list(Some(ns))?;
        let m = self.master();
        self.polling(self.program(m, script, timeout), || self.report_list(&list, rels)).await
    }

    async fn report_list(&self, list_cmd: &str, rels: &[String]) {
        let m = self.master();
        let c = self.rt.root_cmd(m, list_cmd.to_string(), Duration::from_secs(30)).with_redact(Redact::All);
        let listed = match self.rt.exec(m, c).await {
            Ok(o) => serde_json::from_str::<serde_json::Value>(o.stdout_text().trim()).ok(),
            Err(_) => None,
        };
        for rel in rels {
            let found = listed.as_ref().and_then(|v| v.as_array()).and_then(|a| a.iter().find(|x| x["name"] == **rel));
            let status = match found.and_then(|x| x["status"].as_str()) {
                Some(st)
                    if !st.is_empty() && st.len() <= 32 && st.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') =>
                {
                    st.to_string()
                }
                Some(_) => "unknown".into(),
                None => "not found yet".into(),
            };
            self.rt.ev(m).emit(EventKind::Status { subject: format!("release {rel}"), status });
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
