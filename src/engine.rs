//! Fan-out: run a job on many hosts with bounded concurrency, collect one report per host,
//! and stop starting new hosts after the first failure when asked to (`--fail-fast`). Hosts
//! already running are allowed to finish: cutting a half-done install is worse than waiting.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::event::{EventKind, Events, HostEvents};
use crate::inventory::Host;
use crate::step::{Job, JobOutput};
use crate::transport::Connector;

#[derive(Clone, Debug)]
pub struct FanOut {
    pub parallel: usize,
    pub fail_fast: bool,
}

/// Default concurrency: enough for a few hundred VMs at once. A connection costs one socket and
/// a few hundred KiB here, and handshakes are CPU-bound on the controller either way.
pub const DEFAULT_PARALLEL: usize = 256;

impl Default for FanOut {
    fn default() -> Self {
        FanOut { parallel: DEFAULT_PARALLEL, fail_fast: false }
    }
}

#[derive(Debug)]
pub struct HostReport<T> {
    pub node: String,
    pub result: Result<T>,
    pub elapsed: Duration,
}

/// Run `f` for every host; reports come back in inventory order.
pub async fn for_each_host<T, F, Fut>(hosts: &[Host], opts: &FanOut, events: &Events, f: F) -> Vec<HostReport<T>>
where
    T: Send + 'static,
    F: Fn(Host, HostEvents) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let sem = Arc::new(Semaphore::new(opts.parallel.max(1)));
    let failed = Arc::new(AtomicBool::new(false));
    let f = Arc::new(f);
    let mut set = JoinSet::new();
    for (i, host) in hosts.iter().cloned().enumerate() {
        let (sem, failed, f, ev) = (sem.clone(), failed.clone(), f.clone(), events.for_host(&host.name));
        let fail_fast = opts.fail_fast;
        set.spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            let node = host.name.clone();
            if fail_fast && failed.load(Ordering::SeqCst) {
                let e = Error::Skipped { node: node.clone() };
                ev.emit(EventKind::Done { ok: false, ms: 0, error: Some(e.to_string()), error_kind: Some(e.kind()) });
                return (i, HostReport { node, result: Err(e), elapsed: Duration::ZERO });
            }
            ev.emit(EventKind::Start);
            let start = Instant::now();
            let result = f(host, ev.clone()).await;
            let elapsed = start.elapsed();
            if result.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            let (error, error_kind) = match &result {
                Ok(_) => (None, None),
                Err(e) => (Some(e.to_string()), Some(e.kind())),
            };
            ev.emit(EventKind::Done { ok: result.is_ok(), ms: elapsed.as_millis() as u64, error, error_kind });
            (i, HostReport { node, result, elapsed })
        });
    }
    let mut out: Vec<Option<HostReport<T>>> = (0..hosts.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, r)) => out[i] = Some(r),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out.into_iter().map(|r| r.expect("every host reported")).collect()
}

/// Builds the job for one host (jobs differ per host only in details such as become).
pub type JobFn = Arc<dyn Fn(&Host) -> Result<Job> + Send + Sync>;

/// Connect, run the host's job, disconnect. One connection per host for the whole job.
pub async fn run_jobs(
    hosts: &[Host],
    jobs: JobFn,
    connector: Arc<dyn Connector>,
    opts: &FanOut,
    events: &Events,
) -> Vec<HostReport<JobOutput>> {
    for_each_host(hosts, opts, events, move |host, ev| {
        let (jobs, connector) = (jobs.clone(), connector.clone());
        async move {
            let job = jobs(&host)?;
            let t = connector.connect(&host, &ev).await?;
            let res = job.run(t.as_ref(), &ev).await;
            t.close().await;
            res
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn hosts(n: usize) -> Vec<Host> {
        (1..=n).map(|i| Host::for_test(&format!("h{i}"), &format!("10.0.0.{i}"))).collect()
    }

    #[tokio::test]
    async fn concurrency_never_exceeds_parallel_and_reports_keep_order() {
        let (events, _rx) = Events::channel();
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (r, p) = (running.clone(), peak.clone());
        let reports = for_each_host(&hosts(20), &FanOut { parallel: 3, fail_fast: false }, &events, move |h, _| {
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(h.name)
            }
        })
        .await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        let names: Vec<String> = reports.into_iter().map(|r| r.result.unwrap()).collect();
        assert_eq!(names, (1..=20).map(|i| format!("h{i}")).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn fail_fast_skips_hosts_not_yet_started() {
        let (events, _rx) = Events::channel();
        let reports = for_each_host(&hosts(5), &FanOut { parallel: 1, fail_fast: true }, &events, |h, _| async move {
            if h.name == "h2" {
                Err(Error::Remote {
                    node: h.name,
                    command: "x".into(),
                    status: "exit code 1".into(),
                    stderr_tail: String::new(),
                })
            } else {
                Ok(())
            }
        })
        .await;
        let kinds: Vec<&str> =
            reports.iter().map(|r| r.result.as_ref().err().map(|e| e.kind()).unwrap_or("ok")).collect();
        assert_eq!(kinds, vec!["ok", "remote", "skipped", "skipped", "skipped"]);
        // Without fail-fast every host runs.
        let reports = for_each_host(&hosts(5), &FanOut { parallel: 1, fail_fast: false }, &events, |h, _| async move {
            if h.name == "h2" {
                Err(Error::Skipped { node: h.name })
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!(reports.iter().filter(|r| r.result.is_ok()).count(), 4);
    }
}
