//! One operation on many sites at once: every selected site is read and checked first (a bad
//! request anywhere stops the run before any connection), then at most `max_sites` sites run at
//! the same time, each with its own runner, while one semaphore bounds the SSH work in flight
//! across all of them (`max_sessions`: connection handshakes, commands and transfers). Each
//! site's events carry the site in their host name (`par1/par1-m1`), and each site's outcome
//! goes to its status document, so a re-run skips the sites that finished this operation on
//! the same inputs: the digest of what the operation reads from the site's folder is recorded
//! with the status (and the files beside it, for `sites diff`), and a site re-rendered with
//! other values runs again.
//!
//! The operations themselves are the hooks' and the CNF commands' own (`cluster::run`,
//! `cnf::run::run`, the run-script job): nothing here knows what a step does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, HostEvents};
use crate::inventory::Host;
use crate::lifecycle::job::CommandOpts;
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::sites::inputs;
use crate::sites::plan::{prepare_site, Env, Op, SiteDir, Work};
use crate::sites::rollout::{self, MaxFail, Size};
use crate::sites::status::{AppliedInputs, SiteStatus, Statuses};
use crate::transport::{Connector, ExecOutput, Transport, UploadFile, UploadResult};

/// A connector whose SSH work, across every site sharing it, is bounded by one semaphore: a
/// permit is held while a connection is being opened and while a command or transfer runs, not
/// while a connection sits idle between steps (an idle connection costs a socket, not CPU, and
/// holding permits across steps would let sites that each wait for their next node deadlock).
pub struct Bounded {
    inner: Arc<dyn Connector>,
    sessions: Arc<Semaphore>,
}

impl Bounded {
    pub fn new(inner: Arc<dyn Connector>, max_sessions: usize) -> Bounded {
        Bounded { inner, sessions: Arc::new(Semaphore::new(max_sessions.max(1))) }
    }
}

async fn permit(s: &Arc<Semaphore>) -> tokio::sync::OwnedSemaphorePermit {
    s.clone().acquire_owned().await.expect("the sessions semaphore is never closed")
}

#[async_trait]
impl Connector for Bounded {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>> {
        let _p = permit(&self.sessions).await;
        let inner = self.inner.connect(host, events).await?;
        Ok(Box::new(BoundedTransport { inner, sessions: self.sessions.clone() }))
    }
}

struct BoundedTransport {
    inner: Box<dyn Transport>,
    sessions: Arc<Semaphore>,
}

#[async_trait]
impl Transport for BoundedTransport {
    fn node(&self) -> &str {
        self.inner.node()
    }
    async fn exec(&self, cmd: &RemoteCommand, events: &HostEvents) -> Result<ExecOutput> {
        let _p = permit(&self.sessions).await;
        self.inner.exec(cmd, events).await
    }
    async fn upload(&self, files: &[UploadFile], events: &HostEvents) -> Result<Vec<UploadResult>> {
        let _p = permit(&self.sessions).await;
        self.inner.upload(files, events).await
    }
    async fn download(&self, remote: &str, local: &std::path::Path, events: &HostEvents) -> Result<u64> {
        let _p = permit(&self.sessions).await;
        self.inner.download(remote, local, events).await
    }
    async fn upload_and_exec(
        &self,
        file: &UploadFile,
        cmd: &RemoteCommand,
        events: &HostEvents,
    ) -> Result<(UploadResult, ExecOutput)> {
        let _p = permit(&self.sessions).await;
        self.inner.upload_and_exec(file, cmd, events).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
    fn round_trips(&self) -> u64 {
        self.inner.round_trips()
    }
}

/// A site's own event stream, forwarded into the run's stream with every host name prefixed
/// by the site: one renderer shows every site, and two sites' `master1` never mix.
pub fn site_events(all: &Events, site: &str) -> (Events, JoinHandle<()>) {
    let (events, mut rx) = Events::channel();
    let all = all.clone();
    let site = site.to_string();
    let task = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            let kind = match ev.kind {
                // A phase is shown by its name and nodes, not its host: tag those.
                EventKind::Phase { name, parallel, nodes } => EventKind::Phase {
                    name: format!("{site}: {name}"),
                    parallel,
                    nodes: nodes.iter().map(|n| format!("{site}/{n}")).collect(),
                },
                k => k,
            };
            all.for_host(&format!("{site}/{}", ev.host)).emit(kind);
        }
    });
    (events, task)
}

/// How a fleet run is bounded and what it does on failure.
#[derive(Clone, Debug)]
pub struct Bounds {
    pub max_sites: usize,
    /// Nodes at once within one site (the hooks' `--parallel`).
    pub parallel: usize,
    /// How many failed sites the rollout tolerates before it starts no more (`--max-fail`;
    /// `--fail-fast` is 0); none: every site runs whatever the others do.
    pub max_fail: Option<MaxFail>,
    /// Canary batches (`--batch`): a batch starts once the one before it has finished.
    pub batches: Vec<Size>,
    /// Run sites whose status says this op is done, too.
    pub force: bool,
    pub timeouts: Timeouts,
}

/// One site's line in the final table and report.
#[derive(Clone, Debug, Serialize)]
pub struct SiteResult {
    pub site: String,
    /// `done`, `failed`, `skipped` (done by an earlier run), `not-started` (the rollout
    /// stopped first: `--max-fail`, `--fail-fast`; `error` says so).
    pub status: &'static str,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(rename = "errorKind", skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<&'static str>,
}

/// What `apply` did, or the input errors that stopped it before anything connected.
pub enum Applied {
    Ran(Vec<SiteResult>),
    Refused(Vec<Error>),
}

/// Run `op` on `sites`: check them all, then run them concurrently within `bounds`.
pub async fn apply(
    sites: &[SiteDir],
    op: &Op,
    env: &Env<'_>,
    connector: Arc<dyn Connector>,
    events: &Events,
    bounds: &Bounds,
) -> Result<Applied> {
    let statuses = Statuses::open(env.state_dir, (env.key)())?;
    let mut results: Vec<Option<SiteResult>> = vec![None; sites.len()];
    let mut ready = Vec::new();
    let mut refused = Vec::new();
    let mut forwarders = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        let last = statuses.load(&site.name).map_err(|e| crate::sites::plan::in_site(site, e))?;
        // What the op reads now: a site done on other inputs (re-rendered since) runs again.
        let files = match crate::sites::export::read_site_files(&site.dir, &site.name) {
            Ok(f) => inputs::of(op, &f.files),
            Err(e) => {
                refused.push(crate::sites::plan::in_site(site, e));
                continue;
            }
        };
        let digest = inputs::digest(&files);
        if !bounds.force && last.as_ref().is_some_and(|s| s.done_with(op.name(), &digest)) {
            results[i] = Some(SiteResult {
                site: site.name.clone(),
                status: "skipped",
                seconds: 0.0,
                error: None,
                error_kind: None,
            });
            continue;
        }
        let (ev, fwd) = site_events(events, &site.name);
        forwarders.push(fwd);
        let rt = runner(&connector, &ev, bounds);
        match prepare_site(site, op, env, rt).await {
            Ok(w) => ready.push((i, site, w, ev, AppliedInputs { digest, files })),
            Err(e) => refused.push(e),
        }
    }
    // Every site of this run shows before the first starts: pending, owned by this process.
    let queue = if refused.is_empty() { &ready[..] } else { &[] };
    for (_, site, _, _, read) in queue {
        let q = SiteStatus { inputs: Some(read.digest.clone()), ..SiteStatus::pending(op.name()) };
        if let Err(e) = statuses.save(&site.name, &q) {
            refused.push(crate::sites::plan::in_site(site, e));
        }
    }
    if !refused.is_empty() {
        drop(ready);
        for f in forwarders {
            let _ = f.await;
        }
        return Ok(Applied::Refused(refused));
    }
    // Batch by batch (`--batch`); within a batch at most `max_sites` at once. The stop rule
    // (`--max-fail`, `--fail-fast`) is checked as each site is about to start: once it holds,
    // no site starts, in this batch or a later one, and each of them is reported and recorded
    // as not started, with the reason, so a re-run picks them up.
    let total = ready.len();
    let failed = AtomicUsize::new(0);
    let mut ran: Vec<(usize, SiteResult)> = Vec::with_capacity(total);
    let mut queue = ready.into_iter();
    for batch in rollout::plan(&bounds.batches, total) {
        let sites: Vec<_> = queue.by_ref().take(batch.len()).collect();
        let out: Vec<(usize, SiteResult)> = stream::iter(sites)
            .map(|(i, site, work, ev, read)| {
                let (failed, statuses, connector) = (&failed, &statuses, &connector);
                async move {
                    let stopped = bounds.max_fail.and_then(|m| {
                        let n = failed.load(Ordering::Acquire);
                        m.exceeded(n, total).then(|| rollout::stop_reason(m, n, total))
                    });
                    if let Some(reason) = stopped {
                        drop((work, ev));
                        return (i, not_started(statuses, site, op, reason));
                    }
                    let r = run_site(site, op, work, ev, read, statuses, connector, bounds).await;
                    if r.status == "failed" {
                        failed.fetch_add(1, Ordering::AcqRel);
                    }
                    (i, r)
                }
            })
            .buffer_unordered(bounds.max_sites.max(1))
            .collect()
            .await;
        ran.extend(out);
    }
    for f in forwarders {
        let _ = f.await;
    }
    for (i, r) in ran {
        results[i] = Some(r);
    }
    Ok(Applied::Ran(results.into_iter().flatten().collect()))
}

/// A site the stop rule kept from starting: its result and its status document both say why
/// (a status that cannot be written is named in the result instead: the site is never lost).
fn not_started(statuses: &Statuses, site: &SiteDir, op: &Op, reason: String) -> SiteResult {
    let st = SiteStatus::not_started(op.name(), &reason);
    let error = match statuses.save(&site.name, &st) {
        Ok(()) => reason,
        Err(e) => format!("{reason}; its status could not be written: {e}"),
    };
    SiteResult { site: site.name.clone(), status: "not-started", seconds: 0.0, error: Some(error), error_kind: None }
}

/// One site's run: its status says running, then done or failed, and what a successful run
/// read is recorded for `sites diff`.
#[allow(clippy::too_many_arguments)]
async fn run_site(
    site: &SiteDir,
    op: &Op,
    work: Work,
    ev: Events,
    read: AppliedInputs,
    statuses: &Statuses,
    connector: &Arc<dyn Connector>,
    bounds: &Bounds,
) -> SiteResult {
    let mut st = SiteStatus::running(op.name());
    st.inputs = Some(read.digest.clone());
    let started = Instant::now();
    let mut err = statuses.save(&site.name, &st).err();
    if err.is_none() {
        err = run_work(work, connector, &ev, bounds).await.err();
    }
    drop(ev);
    let secs = started.elapsed().as_secs_f64();
    st.finish(err.as_ref().map(|e| e.to_string()), secs);
    // What this successful run read, for `sites diff`; recorded before the status says done,
    // so a done status always has its inputs beside it.
    if err.is_none() {
        err = statuses.save_applied(&site.name, op.name(), &read).err();
        if err.is_some() {
            st.finish(err.as_ref().map(|e| e.to_string()), secs);
        }
    }
    if let Err(e) = statuses.save(&site.name, &st) {
        err.get_or_insert(e);
    }
    SiteResult {
        site: site.name.clone(),
        status: if err.is_none() { "done" } else { "failed" },
        seconds: (secs * 100.0).round() / 100.0,
        error_kind: err.as_ref().map(Error::kind),
        error: err.map(|e| e.to_string()),
    }
}

pub fn runner(connector: &Arc<dyn Connector>, ev: &Events, b: &Bounds) -> Runner {
    let fan_out = FanOut { parallel: b.parallel, fail_fast: false, report_each: false };
    Runner::new(connector.clone(), ev.clone(), fan_out, b.timeouts.clone())
}

/// One site's operation, through the operations' own entry points (with the plan connector,
/// the plan of it).
pub async fn run_work(work: Work, connector: &Arc<dyn Connector>, ev: &Events, b: &Bounds) -> Result<()> {
    match work {
        Work::Cluster(op, p, reset_nodes) => {
            let outcome = crate::cluster::run(op, &p, reset_nodes).await;
            drop(p);
            outcome.error.map_or(Ok(()), Err)
        }
        Work::Cnf(works) => {
            for w in works {
                let rt = runner(connector, ev, b);
                crate::cnf::run::run(&w.op, &w.inputs, w.prepared, rt).await?;
            }
            Ok(())
        }
        Work::Script { job, hosts, rt } => {
            let opts = CommandOpts { timeout: Some(b.timeouts.install), become_: false };
            let refs: Vec<&Host> = hosts.iter().collect();
            let results = rt
                .each(&refs, |h| {
                    let (rt, job, opts) = (&rt, &job, &opts);
                    async move {
                        let r = rt.run_job(h, &job.job(h, opts)).await;
                        rt.forget(h).await;
                        r
                    }
                })
                .await;
            crate::lifecycle::all_ok(results).map(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::state::Store;
    use crate::lifecycle::state_key::StateKey;
    use crate::sites::status::State;
    use std::time::Duration;

    /// A transport that only counts how many of its calls are in flight at once.
    struct Counting {
        now: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    impl Counting {
        async fn busy(&self) {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl Transport for Counting {
        fn node(&self) -> &str {
            "n"
        }
        async fn exec(&self, _: &RemoteCommand, _: &HostEvents) -> Result<ExecOutput> {
            self.busy().await;
            Ok(ExecOutput { code: Some(0), ..Default::default() })
        }
        async fn upload(&self, _: &[UploadFile], _: &HostEvents) -> Result<Vec<UploadResult>> {
            self.busy().await;
            Ok(vec![])
        }
        async fn download(&self, _: &str, _: &std::path::Path, _: &HostEvents) -> Result<u64> {
            Ok(0)
        }
        async fn close(&self) {}
    }

    struct CountingConnector {
        now: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    #[async_trait]
    impl Connector for CountingConnector {
        async fn connect(&self, _: &Host, _: &HostEvents) -> Result<Box<dyn Transport>> {
            let t = Counting { now: self.now.clone(), peak: self.peak.clone() };
            t.busy().await;
            Ok(Box::new(t))
        }
    }

    #[tokio::test]
    async fn one_semaphore_bounds_ssh_work_across_every_runner_that_shares_it() {
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let inner: Arc<dyn Connector> = Arc::new(CountingConnector { now: now.clone(), peak: peak.clone() });
        let bounded: Arc<dyn Connector> = Arc::new(Bounded::new(inner.clone(), 3));
        let hosts: Vec<Host> = (0..10).map(|i| Host::for_test(&format!("h{i}"), "192.0.2.1")).collect();
        // Ten "sites" of one host each, every one connecting and running two commands at once.
        let run = |c: Arc<dyn Connector>| {
            let hosts = hosts.clone();
            async move {
                let all = futures::future::join_all(hosts.iter().map(|h| {
                    let c = c.clone();
                    async move {
                        let ev = HostEvents::discard(&h.name);
                        let t = c.connect(h, &ev).await.unwrap();
                        let cmd = RemoteCommand::new("true");
                        futures::future::join(t.exec(&cmd, &ev), t.exec(&cmd, &ev)).await
                    }
                }));
                all.await
            }
        };
        run(bounded).await;
        assert_eq!(peak.load(Ordering::SeqCst), 3, "at most 3 in flight, and the bound is reached");
        // Without the bound the same work runs wider: the test measures something.
        peak.store(0, Ordering::SeqCst);
        run(inner).await;
        assert!(peak.load(Ordering::SeqCst) > 3);
    }

    /// A site done with `run-script` is skipped while its folder is unchanged; once it is
    /// re-rendered with another inventory the same op runs it again, and what it read is
    /// recorded for `sites diff`.
    #[tokio::test]
    async fn a_site_whose_inputs_changed_since_it_was_done_runs_again() {
        use crate::inventory::{LoadOptions, SshConfigSource};
        use crate::transport::fake::FakeConnector;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("rendered/par1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("site.json"), r#"{"name":"par1","index":0,"labels":{},"package":null}"#).unwrap();
        let id = d.path().join("id_test");
        std::fs::write(&id, "not a real key").unwrap();
        let inv = format!(
            "defaults: {{user: root, host_key_check: \"off\", identity_file: {:?}}}\ngroups:\n  m:\n    - {{name: par1-m1, ssh_ip: 192.0.2.10}}\n",
            id.display().to_string()
        );
        std::fs::write(dir.join("inventory.yaml"), &inv).unwrap();
        let script = d.path().join("check.sh");
        std::fs::write(&script, "true\n").unwrap();
        let state = d.path().join("state");
        let key = d.path().join("key/state.key");
        let store = || Store::open_with_key(&state, StateKey::at(&key));
        let k = || StateKey::at(&key);
        let env = Env {
            state_dir: &state,
            store: &store,
            key: &k,
            inventory_opts: LoadOptions {
                allow_insecure: true,
                ssh_config: SshConfigSource::None,
                ..Default::default()
            },
            dry_run: false,
            helm_timeout: Duration::from_secs(1),
            secrets: Default::default(),
        };
        let op = Op::RunScript { script, args: vec![] };
        let fake = FakeConnector::new();
        let bounds = Bounds {
            max_sites: 1,
            parallel: 1,
            max_fail: None,
            batches: vec![],
            force: false,
            timeouts: Default::default(),
        };
        let run = || async {
            let sites = crate::sites::plan::load_rendered(&d.path().join("rendered")).unwrap();
            let (events, _rx) = Events::channel();
            let c: Arc<dyn Connector> = Arc::new(fake.clone());
            match apply(&sites, &op, &env, c, &events, &bounds).await.unwrap() {
                Applied::Ran(r) => r.into_iter().map(|r| (r.status, r.error)).collect::<Vec<_>>(),
                Applied::Refused(e) => panic!("{e:?}"),
            }
        };
        assert_eq!(run().await, [("done", None)]);
        assert_eq!(run().await, [("skipped", None)], "unchanged: done before");
        let execs = fake.all_execs().len();
        std::fs::write(dir.join("inventory.yaml"), inv.replace("root", "admin")).unwrap();
        assert_eq!(run().await, [("done", None)], "re-rendered: runs again");
        assert!(fake.all_execs().len() > execs);
        let st = Statuses::open(&state, StateKey::at(&key)).unwrap();
        let rec = st.load_applied("par1", "run-script").unwrap().unwrap();
        assert!(rec.files["inventory.yaml"].contains("admin"));
        assert_eq!(st.load("par1").unwrap().unwrap().inputs, Some(rec.digest));
        assert_eq!(run().await, [("skipped", None)]);
    }

    /// `n` rendered sites `s0..` of one node each (`s<i>-m1`), run with `run-script`.
    struct Fleet {
        d: tempfile::TempDir,
        op: Op,
    }

    impl Fleet {
        fn new(n: usize) -> Fleet {
            let d = tempfile::tempdir().unwrap();
            let id = d.path().join("id_test");
            std::fs::write(&id, "not a real key").unwrap();
            for i in 0..n {
                let dir = d.path().join(format!("rendered/s{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                let site = format!(r#"{{"name":"s{i}","index":{i},"labels":{{}},"package":null}}"#);
                std::fs::write(dir.join("site.json"), site).unwrap();
                let inv = format!(
                    "defaults: {{user: root, host_key_check: \"off\", identity_file: {:?}}}\ngroups:\n  m:\n    - {{name: s{i}-m1, ssh_ip: 192.0.2.10}}\n",
                    id.display().to_string()
                );
                std::fs::write(dir.join("inventory.yaml"), inv).unwrap();
            }
            let script = d.path().join("check.sh");
            std::fs::write(&script, "true\n").unwrap();
            Fleet { op: Op::RunScript { script, args: vec![] }, d }
        }

        fn statuses(&self) -> Statuses {
            Statuses::open(&self.d.path().join("state"), StateKey::at(self.d.path().join("key/state.key"))).unwrap()
        }

        /// Each site's (name, status, error) in site order.
        async fn apply(&self, fake: &crate::transport::fake::FakeConnector, bounds: &Bounds) -> Vec<SiteResult> {
            use crate::inventory::{LoadOptions, SshConfigSource};
            let state = self.d.path().join("state");
            let key = self.d.path().join("key/state.key");
            let store = || Store::open_with_key(&state, StateKey::at(&key));
            let k = || StateKey::at(&key);
            let env = Env {
                state_dir: &state,
                store: &store,
                key: &k,
                inventory_opts: LoadOptions {
                    allow_insecure: true,
                    ssh_config: SshConfigSource::None,
                    ..Default::default()
                },
                dry_run: false,
                helm_timeout: Duration::from_secs(1),
                secrets: Default::default(),
            };
            let sites = crate::sites::plan::load_rendered(&self.d.path().join("rendered")).unwrap();
            let (events, _rx) = Events::channel();
            let c: Arc<dyn Connector> = Arc::new(fake.clone());
            match apply(&sites, &self.op, &env, c, &events, bounds).await.unwrap() {
                Applied::Ran(r) => r,
                Applied::Refused(e) => panic!("{e:?}"),
            }
        }
    }

    fn bounds(max_sites: usize, max_fail: Option<&str>, batches: Option<&str>) -> Bounds {
        Bounds {
            max_sites,
            parallel: 1,
            max_fail: max_fail.map(|m| rollout::parse_max_fail(m).unwrap()),
            batches: batches.map(|b| rollout::parse_batches(b).unwrap()).unwrap_or_default(),
            force: false,
            timeouts: Default::default(),
        }
    }

    fn statuses_of(r: &[SiteResult]) -> Vec<&'static str> {
        r.iter().map(|r| r.status).collect()
    }

    /// `--fail-fast` stops the rollout at the first failed site: every site after it is
    /// reported not started, with the reason, and its status document says the same, so a
    /// re-run (the node back) runs exactly those sites and the failed one.
    #[tokio::test]
    async fn fail_fast_reports_and_records_every_site_it_did_not_start() {
        let f = Fleet::new(4);
        let fake = crate::transport::fake::FakeConnector::new();
        fake.down("s1-m1");
        let r = f.apply(&fake, &bounds(1, Some("0"), None)).await;
        assert_eq!(statuses_of(&r), ["done", "failed", "not-started", "not-started"], "{r:#?}");
        let why = "not started: the rollout stopped after 1 of 4 sites failed (--fail-fast)";
        assert_eq!(r[2].error.as_deref(), Some(why));
        let st = f.statuses();
        for s in ["s2", "s3"] {
            let doc = st.load(s).unwrap().unwrap();
            assert_eq!(
                (doc.status, doc.op.as_str(), doc.error.as_deref()),
                (State::NotStarted, "run-script", Some(why))
            );
            assert_eq!(doc.started, None, "a site that never started has no start time");
        }
        assert!(fake.execs("s2-m1").is_empty() && fake.execs("s3-m1").is_empty(), "nothing ran there");
        // Without a stop rule every site runs whatever another does.
        let g = Fleet::new(4);
        let r = g.apply(&fake, &bounds(1, None, None)).await;
        assert_eq!(statuses_of(&r), ["done", "failed", "done", "done"]);
        // The node back: the re-run runs the failed and the not-started sites, not the done one.
        let fake2 = crate::transport::fake::FakeConnector::new();
        let r = f.apply(&fake2, &bounds(1, Some("0"), None)).await;
        assert_eq!(statuses_of(&r), ["skipped", "done", "done", "done"]);
    }

    /// Canary batches: with `--batch 1,100%` the first site runs alone, and when it fails under
    /// `--max-fail 0` the rest never start, however many may run at once; a tolerated failure
    /// (`--max-fail 1`) lets the next batch go.
    #[tokio::test]
    async fn a_failed_canary_batch_stops_the_batches_after_it() {
        let f = Fleet::new(5);
        let fake = crate::transport::fake::FakeConnector::new();
        fake.down("s0-m1");
        let r = f.apply(&fake, &bounds(16, Some("0"), Some("1,100%"))).await;
        assert_eq!(statuses_of(&r), ["failed", "not-started", "not-started", "not-started", "not-started"]);
        let g = Fleet::new(5);
        let r = g.apply(&fake, &bounds(16, Some("1"), Some("1,100%"))).await;
        assert_eq!(statuses_of(&r), ["failed", "done", "done", "done", "done"]);
        // A percentage: 2 of 5 failed is 40%, more than 25%: the third batch never starts.
        let h = Fleet::new(5);
        fake.down("s1-m1");
        let r = h.apply(&fake, &bounds(16, Some("25%"), Some("1,1,100%"))).await;
        assert_eq!(statuses_of(&r), ["failed", "failed", "not-started", "not-started", "not-started"]);
        assert!(r[4].error.as_deref().unwrap().ends_with("after 2 of 5 sites failed (--max-fail 25%)"));
    }

    /// `sites apply terminate --reset-nodes` parses, and reaches the cluster's terminate: every
    /// installed node is reset, so kept machines do not go on running a cluster the state forgot.
    #[tokio::test]
    async fn terminate_with_reset_nodes_resets_every_node() {
        use crate::cluster::prepare::Op as ClusterOp;
        use crate::cluster::testkit::{position, Fixture};
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(subcommand)]
            op: Op,
        }
        let op = Cmd::try_parse_from(["apply", "terminate", "--reset-nodes"]).unwrap().op;
        assert_eq!(op, Op::Terminate { reset_nodes: true });
        assert_eq!(Cmd::try_parse_from(["apply", "terminate"]).unwrap().op, Op::Terminate { reset_nodes: false });
        let f = Fixture::new(1, 1);
        f.instantiate().await;
        let before = f.execs().len();
        let p = f.prepare(ClusterOp::TerminateEnd, serde_json::json!({}), &[]).unwrap();
        let (events, _rx) = Events::channel();
        let c: Arc<dyn Connector> = Arc::new(crate::transport::fake::FakeConnector::new());
        let bounds = Bounds {
            max_sites: 1,
            parallel: 1,
            max_fail: None,
            batches: vec![],
            force: false,
            timeouts: Default::default(),
        };
        run_work(Work::Cluster(ClusterOp::TerminateEnd, Box::new(p), true), &c, &events, &bounds).await.unwrap();
        let e = &f.execs()[before..];
        for n in ["m1", "w1"] {
            assert!(position(e, n, "kubeadm reset -f").is_some(), "{n}: {e:#?}");
        }
    }

    #[tokio::test]
    async fn a_site_s_events_carry_the_site_in_the_host_name() {
        let (all, mut rx) = Events::channel();
        let (ev, fwd) = site_events(&all, "par1");
        ev.for_host("par1-m1").emit(EventKind::Start);
        let phase = EventKind::Phase { name: "workers: join".into(), parallel: true, nodes: vec!["w1".into()] };
        ev.for_host("plan").emit(phase);
        drop(ev);
        fwd.await.unwrap();
        let e = rx.try_recv().unwrap();
        assert_eq!(&*e.host, "par1/par1-m1");
        match rx.try_recv().unwrap().kind {
            EventKind::Phase { name, nodes, .. } => {
                assert_eq!((name.as_str(), nodes), ("par1: workers: join", vec!["par1/w1".to_string()]))
            }
            k => panic!("{k:?}"),
        }
    }
}
