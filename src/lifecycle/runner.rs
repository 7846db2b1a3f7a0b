//! Running steps on nodes: one connection per node for the whole operation (opened on first
//! use), bounded fan-out over many nodes, phases for the plan and the operator. Operations read
//! as lists of steps on nodes; this is the only place that knows about connections, and the one
//! fan-out engine every command uses (the fan-out commands, the cluster hooks, the CNF steps).
//!
//! Whether steps run or are only planned is the connector's business (see `plan.rs`): the
//! runner does the same thing either way.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use tokio::sync::{Mutex, OnceCell, Semaphore};

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, HostEvents};
use crate::target::become_for;
use crate::target::Node;
use crate::transport::{Connector, ExecOutput, Transport, UploadFile, UploadResult};

type Slot = Arc<OnceCell<Arc<dyn Transport>>>;

/// Deadlines of lifecycle steps (Tacker: 2700 s install, 300 s Helm, 30 s commands).
#[derive(Clone, Debug)]
pub struct Timeouts {
    pub install: Duration,
    pub helm: Duration,
    pub command: Duration,
    /// How long a drain waits for pods to leave before it fails.
    pub drain: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            install: Duration::from_secs(2700),
            helm: Duration::from_secs(600),
            command: Duration::from_secs(120),
            drain: Duration::from_secs(300),
        }
    }
}

/// How many nodes at once, and whether the first failure stops new nodes from starting.
#[derive(Clone, Debug)]
pub struct FanOut {
    pub parallel: usize,
    pub fail_fast: bool,
    /// Report every node's start and end as events (fan-out commands, where a node's whole job
    /// is one unit and the progress bar counts them). Lifecycle phases report failures only.
    pub report_each: bool,
}

/// Default concurrency: enough for a few hundred VMs at once. A connection costs one socket and
/// a few hundred KiB here, and handshakes are CPU-bound on the controller either way.
pub const DEFAULT_PARALLEL: usize = 256;

impl Default for FanOut {
    fn default() -> Self {
        FanOut { parallel: DEFAULT_PARALLEL, fail_fast: false, report_each: false }
    }
}

pub struct Runner {
    connector: Arc<dyn Connector>,
    conns: Mutex<HashMap<String, Slot>>,
    pub events: Events,
    pub fan_out: FanOut,
    pub timeouts: Timeouts,
    /// Set once any node failed under `fail_fast`.
    failed: AtomicBool,
}

impl Runner {
    pub fn new(connector: Arc<dyn Connector>, events: Events, fan_out: FanOut, timeouts: Timeouts) -> Self {
        let fan_out = FanOut { parallel: fan_out.parallel.max(1), ..fan_out };
        Runner {
            connector,
            conns: Mutex::new(HashMap::new()),
            events,
            fan_out,
            timeouts,
            failed: AtomicBool::new(false),
        }
    }

    pub fn ev(&self, node: &dyn Node) -> HostEvents {
        self.events.for_host(node.name())
    }

    /// Announce a phase (shown in plans and in plain output).
    pub fn phase<N: Node>(&self, name: &str, nodes: &[&N], parallel: bool) {
        self.events.for_host("plan").emit(EventKind::Phase {
            name: name.to_string(),
            parallel,
            nodes: nodes.iter().map(|n| n.name().to_string()).collect(),
        });
    }

    async fn transport(&self, node: &dyn Node) -> Result<Arc<dyn Transport>> {
        let slot = {
            let mut m = self.conns.lock().await;
            m.entry(node.name().to_string()).or_insert_with(|| Arc::new(OnceCell::new())).clone()
        };
        let ev = self.ev(node);
        slot.get_or_try_init(|| async {
            tracing::debug!(node = node.name(), addr = %node.host().endpoint(), "connect");
            self.connector.connect(node.host(), &ev).await.map(Arc::from)
        })
        .await
        .cloned()
    }

    /// Forget a node's connection (after a reboot or a failed node), so the next step reconnects.
    pub async fn forget(&self, node: &dyn Node) {
        let slot = self.conns.lock().await.remove(node.name());
        if let Some(t) = slot.and_then(|s| s.get().cloned()) {
            self.report_round_trips(t.as_ref());
            t.close().await;
        }
    }

    /// A command as root (sudo when the login user is not root) with a timeout.
    pub fn root_cmd(&self, node: &dyn Node, script: String, timeout: Duration) -> RemoteCommand {
        RemoteCommand::new(script).with_timeout(Some(timeout)).with_become(become_for(node.host(), true))
    }

    /// Run a command; a non-zero exit is an error naming node, command and stderr tail.
    pub async fn exec(&self, node: &dyn Node, cmd: RemoteCommand) -> Result<ExecOutput> {
        let t = self.transport(node).await?;
        tracing::debug!(node = node.name(), command = cmd.display(), "exec");
        let out = t.exec(&cmd, &self.ev(node)).await?;
        let ms = out.elapsed.as_millis() as u64;
        tracing::debug!(node = node.name(), status = %out.status_text(), ms, "exec done");
        out.check(node.name(), &cmd)
    }

    /// Run a command whose exit status is a result, not a failure (a command run in every pod
    /// of a workload reports each pod's status): only a transport failure or a timeout is an
    /// error here.
    pub async fn exec_status(&self, node: &dyn Node, cmd: RemoteCommand) -> Result<ExecOutput> {
        let t = self.transport(node).await?;
        tracing::debug!(node = node.name(), command = cmd.display(), "exec");
        t.exec(&cmd, &self.ev(node)).await
    }

    pub async fn upload(&self, node: &dyn Node, files: Vec<UploadFile>) -> Result<Vec<UploadResult>> {
        if files.is_empty() {
            return Ok(vec![]);
        }
        let t = self.transport(node).await?;
        t.upload(&files, &self.ev(node)).await
    }

    /// Upload one file, then run a command that needs it (run-script); a non-zero exit fails
    /// like [`exec`](Self::exec). One round trip over SSH when the file is small.
    pub async fn upload_and_exec(
        &self,
        node: &dyn Node,
        file: &UploadFile,
        cmd: RemoteCommand,
    ) -> Result<(UploadResult, ExecOutput)> {
        let t = self.transport(node).await?;
        tracing::debug!(node = node.name(), command = cmd.display(), "upload and exec");
        let (up, out) = t.upload_and_exec(file, &cmd, &self.ev(node)).await?;
        Ok((up, out.check(node.name(), &cmd)?))
    }

    pub async fn download(&self, node: &dyn Node, remote: &str, local: &Path) -> Result<u64> {
        let t = self.transport(node).await?;
        t.download(remote, local, &self.ev(node)).await
    }

    /// Run `f` on every node at once, at most `parallel` at a time; results in node order.
    /// Under `fail_fast`, nodes not yet started after a failure are skipped (reported as such);
    /// nodes already running finish: cutting a half-done install is worse than waiting.
    pub async fn each<'a, N, T, F, Fut>(&self, nodes: &[&'a N], f: F) -> Vec<(&'a N, Result<T>)>
    where
        N: Node,
        F: Fn(&'a N) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let sem = Semaphore::new(self.fan_out.parallel);
        if self.fan_out.report_each {
            // An interrupted fan-out can then name the hosts it never started.
            crate::event::LEDGER.expect(nodes.iter().map(|n| n.name()));
        }
        let futs = nodes.iter().map(|n| {
            let (sem, f) = (&sem, &f);
            async move {
                let _p = sem.acquire().await.expect("never closed");
                let ev = self.ev(*n);
                if self.fan_out.fail_fast && self.failed.load(Ordering::SeqCst) {
                    let skipped = || Error::Skipped { node: n.name().to_string() };
                    ev.emit(done_event::<()>(&Err(skipped()), Duration::ZERO));
                    return (*n, Err(skipped()));
                }
                if self.fan_out.report_each {
                    ev.emit(EventKind::Start);
                }
                let start = Instant::now();
                let r = f(n).await;
                if r.is_err() {
                    self.failed.store(true, Ordering::SeqCst);
                }
                if self.fan_out.report_each || r.is_err() {
                    ev.emit(done_event(&r, start.elapsed()));
                }
                (*n, r)
            }
        });
        join_all(futs).await
    }

    /// Report one node's failed step outside `each` (steps that run one node at a time).
    pub fn done<T>(&self, node: &dyn Node, r: &Result<T>) {
        if r.is_err() {
            self.ev(node).emit(done_event(r, Duration::ZERO));
        }
    }

    /// The first node that answers, in order (Tacker only ever used the first master).
    pub async fn first_reachable<'a, N: Node>(&self, nodes: &[&'a N]) -> Result<&'a N> {
        let mut last = None;
        for n in nodes {
            match self.transport(*n).await {
                Ok(_) => return Ok(n),
                Err(e) => {
                    let message = format!("unreachable, trying the next {}: {e}", n.role().as_str());
                    self.ev(*n).emit(EventKind::Warning { message });
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::input("state", "masters", "no installed master to run kubectl on")))
    }

    pub async fn close(&self) {
        let all: Vec<Slot> = self.conns.lock().await.drain().map(|(_, s)| s).collect();
        let open: Vec<Arc<dyn Transport>> = all.iter().filter_map(|s| s.get().cloned()).collect();
        open.iter().for_each(|t| self.report_round_trips(t.as_ref()));
        join_all(open.iter().map(|t| async move { t.close().await })).await;
    }

    /// A connection's exchanges with its node, as it closes (a node reconnected after a reboot
    /// reports once per connection: the run's count for it is the sum).
    fn report_round_trips(&self, t: &dyn Transport) {
        let count = t.round_trips();
        if count > 0 {
            self.events.for_host(t.node()).emit(EventKind::RoundTrips { count });
        }
    }
}

/// Every run reports its round trips, including one that ends on an error before `close`: the
/// connections still open report as the runner goes (they close as their handles drop).
impl Drop for Runner {
    fn drop(&mut self) {
        let open: Vec<Slot> = self.conns.get_mut().drain().map(|(_, s)| s).collect();
        for t in open.iter().filter_map(|s| s.get()) {
            self.report_round_trips(t.as_ref());
        }
    }
}

fn done_event<T>(r: &Result<T>, elapsed: Duration) -> EventKind {
    let (error, error_kind) = match r {
        Ok(_) => (None, None),
        Err(e) => (Some(e.to_string()), Some(e.kind())),
    };
    EventKind::Done { ok: r.is_ok(), ms: elapsed.as_millis() as u64, error, error_kind }
}

/// Collapse per-node results: the first error wins, all are reported as events already.
pub fn all_ok<N: Node, T>(results: Vec<(&N, Result<T>)>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    let mut first = None;
    for (n, r) in results {
        match r {
            Ok(v) => out.push(v),
            Err(e) => {
                failed.push(n.name().to_string());
                first.get_or_insert(e);
            }
        }
    }
    match first {
        None => Ok(out),
        Some(e) if failed.len() == 1 => Err(e),
        Some(e) => Err(Error::Session {
            node: failed.join(", "),
            during: "the parallel step".into(),
            message: format!("{} nodes failed; first: {e}", failed.len()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Host;
    use crate::transport::fake::FakeConnector;
    use std::sync::atomic::AtomicUsize;

    fn hosts(n: usize) -> Vec<Host> {
        (1..=n).map(|i| Host::for_test(&format!("h{i}"), &format!("10.0.0.{i}"))).collect()
    }

    fn runner(parallel: usize, fail_fast: bool) -> Runner {
        let (events, _rx) = Events::channel();
        let fo = FanOut { parallel, fail_fast, report_each: true };
        Runner::new(Arc::new(FakeConnector::new()), events, fo, Timeouts::default())
    }

    #[tokio::test]
    async fn concurrency_never_exceeds_parallel_and_results_keep_order() {
        let rt = runner(3, false);
        let hs = hosts(20);
        let refs: Vec<&Host> = hs.iter().collect();
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let res = rt
            .each(&refs, |h| {
                let (running, peak) = (&running, &peak);
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(h.name.clone())
                }
            })
            .await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        let names: Vec<String> = res.into_iter().map(|(_, r)| r.unwrap()).collect();
        assert_eq!(names, (1..=20).map(|i| format!("h{i}")).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn fail_fast_skips_nodes_not_yet_started() {
        let hs = hosts(5);
        let refs: Vec<&Host> = hs.iter().collect();
        let job = |h: &Host| {
            let name = h.name.clone();
            async move {
                if name == "h2" {
                    Err(Error::Remote {
                        node: name,
                        command: "x".into(),
                        status: "exit code 1".into(),
                        stderr_tail: String::new(),
                    })
                } else {
                    Ok(())
                }
            }
        };
        let res = runner(1, true).each(&refs, job).await;
        let kinds: Vec<&str> = res.iter().map(|(_, r)| r.as_ref().err().map(|e| e.kind()).unwrap_or("ok")).collect();
        assert_eq!(kinds, vec!["ok", "remote", "skipped", "skipped", "skipped"]);
        // Without fail-fast every node runs.
        let res = runner(1, false).each(&refs, job).await;
        assert_eq!(res.iter().filter(|(_, r)| r.is_ok()).count(), 4);
    }

    #[tokio::test]
    async fn failover_takes_the_first_node_that_answers() {
        let fake = FakeConnector::new();
        fake.down("h1");
        let (events, _rx) = Events::channel();
        let rt = Runner::new(Arc::new(fake.clone()), events, FanOut::default(), Timeouts::default());
        let hs = hosts(3);
        let refs: Vec<&Host> = hs.iter().collect();
        assert_eq!(rt.first_reachable(&refs).await.unwrap().name, "h2");
        fake.down("h2").down("h3");
        let rt2 = Runner::new(Arc::new(fake), Events::channel().0, FanOut::default(), Timeouts::default());
        let e = rt2.first_reachable(&refs).await.unwrap_err();
        assert_eq!(e.kind(), "connect", "{e}");
    }

    /// Each connection reports its exchanges once as it closes: through `close`, `forget`, or
    /// the runner going away after an error; nothing for a node never asked anything.
    #[tokio::test]
    async fn every_connection_reports_its_round_trips_once_however_the_run_ends() {
        let fake = FakeConnector::new();
        let (events, mut rx) = Events::channel();
        let rt = Runner::new(Arc::new(fake.clone()), events, FanOut::default(), Timeouts::default());
        let hs = hosts(3);
        rt.exec(&hs[0], RemoteCommand::new("a")).await.unwrap();
        rt.exec(&hs[0], RemoteCommand::new("b")).await.unwrap();
        rt.exec(&hs[1], RemoteCommand::new("c")).await.unwrap();
        rt.forget(&hs[1]).await;
        rt.exec(&hs[1], RemoteCommand::new("d")).await.unwrap();
        rt.exec(&hs[1], RemoteCommand::new("e")).await.unwrap();
        rt.transport(&hs[2]).await.unwrap();
        drop(rt);
        let mut got = vec![];
        while let Ok(e) = rx.try_recv() {
            if let EventKind::RoundTrips { count } = e.kind {
                got.push((e.host.to_string(), count));
            }
        }
        got.sort();
        assert_eq!(got, vec![("h1".to_string(), 2), ("h2".to_string(), 1), ("h2".to_string(), 2)]);
        assert_eq!(fake.round_trips(), 5);
    }
}
