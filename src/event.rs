//! One event stream for everything that happens on hosts. Renderers (progress bars, plain
//! lines, JSON lines) and the VNFM hook protocol all consume this same stream, so what an
//! operator sees and what a machine parses can never disagree.
//!
//! The stream is bounded where it could grow without end: node output. At most
//! [`OUTPUT_BUDGET`] bytes of output lines wait for the renderer at any time; a node that
//! prints faster than the terminal (or the pipe) takes them loses lines, and the renderer then
//! shows one warning per gap saying how many lines were not shown. Everything else (starts,
//! commands, exits, failures) is never dropped: there are only a few such events per command.
//!
//! The stream also keeps a [`Ledger`] of what each host is doing, so an interrupted run can say
//! which nodes finished and which were cut off in which command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use indexmap::IndexMap;

use crate::error::printable;
use serde::Serialize;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// How many bytes of node output lines may wait for the renderer (with a small per-line
/// overhead counted too). Beyond this, lines are dropped and counted, never queued.
pub const OUTPUT_BUDGET: usize = 8 << 20;

/// What one queued output line is counted as: its text plus the event around it.
fn cost(line: &str) -> usize {
    line.len() + 64
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A host's job is starting.
    Start,
    /// Opening TCP (first hop when `via` is not empty).
    Connecting {
        addr: String,
        via: Vec<String>,
    },
    /// A connection attempt failed with a "not up yet" error; trying again after `delay_ms`.
    Retry {
        attempt: u32,
        delay_ms: u64,
        error: String,
    },
    Connected {
        ms: u64,
    },
    /// A warning that needs a human (e.g. host key checking is off, a host key was learned).
    /// The host is empty for a warning about the run as a whole ([`Events::warn`]). Every
    /// warning also reaches the result document's `warnings` (`render.rs`).
    Warning {
        message: String,
    },
    /// A rebuilt VM's new host key replaced its old entries in `known_hosts` (heal, scale-out):
    /// which file, the fingerprints removed, the one recorded now.
    HostKeyRelearned {
        addr: String,
        known_hosts: String,
        old: Vec<String>,
        new: String,
    },
    /// A command is starting (display form: no secrets).
    Command {
        command: String,
    },
    Stdout {
        line: String,
    },
    Stderr {
        line: String,
    },
    Exit {
        code: Option<u32>,
        signal: Option<String>,
        ms: u64,
    },
    Timeout {
        command: String,
        secs: f64,
    },
    Uploaded {
        path: String,
        bytes: u64,
        skipped: bool,
        via: &'static str,
    },
    /// A lifecycle phase starts: its nodes, and whether they run at the same time.
    Phase {
        name: String,
        parallel: bool,
        nodes: Vec<String>,
    },
    /// A long operation's progress (e.g. a Helm release's status while `helm install` runs).
    Status {
        subject: String,
        status: String,
    },
    /// Dry run: what would run, in order.
    Plan {
        step: usize,
        action: String,
    },
    /// How many exchanges with the node the run's connection to it made (each command, each
    /// file-transfer step: one request and its answer), sent when the connection closes. Over a
    /// link of round-trip time R, the node's share of the run costs at least count × R; unlike a
    /// wall time, the count does not depend on machine noise.
    RoundTrips {
        count: u64,
    },
    /// The host's job ended.
    Done {
        ok: bool,
        ms: u64,
        error: Option<String>,
        error_kind: Option<&'static str>,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct Event {
    /// Milliseconds since the run started.
    pub t_ms: u64,
    pub host: Arc<str>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Sender side of the stream, shared by all host tasks.
#[derive(Clone)]
pub struct Events {
    tx: UnboundedSender<Event>,
    shared: Arc<Shared>,
}

/// What senders and the receiver share: the clock and the output budget's accounts.
struct Shared {
    start: Instant,
    /// Bytes of output lines sent and not yet received.
    queued: AtomicUsize,
    /// Whether `dropped` may hold anything (so the common path takes no lock).
    any_dropped: AtomicBool,
    /// Lines not shown per host since that host's last shown event.
    dropped: Mutex<HashMap<Arc<str>, u64>>,
}

/// Receiver side: the renderer's.
pub struct EventRx {
    rx: UnboundedReceiver<Event>,
    shared: Arc<Shared>,
}

impl EventRx {
    /// The next event, or None once every sender is gone.
    pub async fn recv(&mut self) -> Option<Event> {
        let ev = self.rx.recv().await?;
        Some(self.taken(ev))
    }

    /// The same, blocking the thread: for the renderer's own thread (`render.rs`), never the
    /// runtime's.
    pub fn blocking_recv(&mut self) -> Option<Event> {
        let ev = self.rx.blocking_recv()?;
        Some(self.taken(ev))
    }

    /// An event leaves the queue: its output line no longer counts against the queue's bound.
    fn taken(&self, ev: Event) -> Event {
        if let EventKind::Stdout { line } | EventKind::Stderr { line } = &ev.kind {
            self.shared.queued.fetch_sub(cost(line), Ordering::AcqRel);
        }
        ev
    }

    /// The next event if one is waiting (tests read a finished run's stream this way).
    pub fn try_recv(&mut self) -> Result<Event, tokio::sync::mpsc::error::TryRecvError> {
        let ev = self.rx.try_recv()?;
        Ok(self.taken(ev))
    }
}

impl Events {
    pub fn channel() -> (Events, EventRx) {
        let (tx, rx) = unbounded_channel();
        let shared = Arc::new(Shared {
            start: Instant::now(),
            queued: AtomicUsize::new(0),
            any_dropped: AtomicBool::new(false),
            dropped: Mutex::new(HashMap::new()),
        });
        (Events { tx, shared: shared.clone() }, EventRx { rx, shared })
    }

    pub fn for_host(&self, host: &str) -> HostEvents {
        HostEvents { host: Arc::from(host), events: self.clone() }
    }

    /// A warning about the run as a whole, not one node (an unknown key in the request, nothing
    /// recorded to act on). It takes the nodes' warnings' path: the renderer shows it on stderr
    /// in the current output mode and hands it on to the result document's `warnings`.
    pub fn warn(&self, message: impl Into<String>) {
        self.for_host("").emit(EventKind::Warning { message: message.into() });
    }
}

/// Sender bound to one host.
#[derive(Clone)]
pub struct HostEvents {
    host: Arc<str>,
    events: Events,
}

impl HostEvents {
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn emit(&self, kind: EventKind) {
        let shared = &self.events.shared;
        if let EventKind::Stdout { line } | EventKind::Stderr { line } = &kind {
            let c = cost(line);
            if shared.queued.fetch_add(c, Ordering::AcqRel) + c > OUTPUT_BUDGET {
                shared.queued.fetch_sub(c, Ordering::AcqRel);
                let mut d = shared.dropped.lock().unwrap_or_else(|e| e.into_inner());
                *d.entry(self.host.clone()).or_default() += 1;
                shared.any_dropped.store(true, Ordering::Release);
                return;
            }
        }
        if shared.any_dropped.load(Ordering::Acquire) {
            self.report_dropped();
        }
        LEDGER.note(&self.host, &kind);
        self.send(kind);
    }

    /// Say how many of this host's lines were not shown, before its next event.
    fn report_dropped(&self) {
        let shared = &self.events.shared;
        let n = {
            let mut d = shared.dropped.lock().unwrap_or_else(|e| e.into_inner());
            let n = d.remove(&self.host);
            if d.is_empty() {
                shared.any_dropped.store(false, Ordering::Release);
            }
            n
        };
        if let Some(n) = n {
            let message = format!(
                "{n} lines of output not shown: the node printed faster than they could be written \
                 (at most {} MiB of output waits)",
                OUTPUT_BUDGET >> 20
            );
            self.send(EventKind::Warning { message });
        }
    }

    fn send(&self, kind: EventKind) {
        let t_ms = self.events.shared.start.elapsed().as_millis() as u64;
        // A closed receiver means the renderer is gone (shutting down); nothing to do.
        if let Err(e) = self.events.tx.send(Event { t_ms, host: self.host.clone(), kind }) {
            if let EventKind::Stdout { line } | EventKind::Stderr { line } = &e.0.kind {
                self.events.shared.queued.fetch_sub(cost(line), Ordering::AcqRel);
            }
        }
    }

    /// A sink for tests and library users that do not care about events.
    pub fn discard(host: &str) -> HostEvents {
        let (events, rx) = Events::channel();
        drop(rx);
        events.for_host(host)
    }
}

/// Where a host stands, as far as its events tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Waiting for its turn in a fan-out (`--parallel`); nothing ran on it yet.
    Queued,
    /// Started, connected or between commands.
    Busy,
    /// A command is running on it (its display form).
    Running(String),
    /// Its job ended, well or not.
    Finished { ok: bool },
}

/// What each host of this process's run is doing, in the order hosts first appeared. Fed by
/// every [`HostEvents::emit`]; read when the run is interrupted (`main.rs`).
pub struct Ledger {
    hosts: Mutex<IndexMap<Arc<str>, Progress>>,
}

/// The process's ledger (one run per process).
pub static LEDGER: LazyLock<Ledger> = LazyLock::new(|| Ledger { hosts: Mutex::new(IndexMap::new()) });

impl Ledger {
    fn note(&self, host: &Arc<str>, kind: &EventKind) {
        let next = match kind {
            EventKind::Start | EventKind::Connecting { .. } | EventKind::Exit { .. } => Progress::Busy,
            EventKind::Command { command } => Progress::Running(command.clone()),
            EventKind::Done { ok, .. } => Progress::Finished { ok: *ok },
            _ => return,
        };
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        match hosts.get_mut(host) {
            // A failure reported outside a fan-out's own end stays a failure.
            Some(Progress::Finished { ok: false }) if next != (Progress::Finished { ok: true }) => {}
            Some(p) => *p = next,
            None => {
                hosts.insert(host.clone(), next);
            }
        }
    }

    /// Hosts a fan-out is about to run, so an interruption can name those it never started.
    pub fn expect<'a>(&self, hosts: impl IntoIterator<Item = &'a str>) {
        let mut known = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        for h in hosts {
            if !known.contains_key(h) {
                known.insert(Arc::from(h), Progress::Queued);
            }
        }
    }

    /// Every host seen so far and where it stands.
    pub fn snapshot(&self) -> Vec<(String, Progress)> {
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        hosts.iter().map(|(h, p)| (h.to_string(), p.clone())).collect()
    }

    /// The hosts sorted for an interruption report.
    pub fn interruption(&self) -> Interruption {
        let mut r = Interruption::default();
        for (host, p) in self.snapshot() {
            match p {
                Progress::Finished { ok: true } => r.finished.push(host),
                Progress::Finished { ok: false } => r.failed.push(host),
                Progress::Running(command) => r.interrupted.push((host, command)),
                Progress::Busy => r.idle.push(host),
                Progress::Queued => r.not_started.push(host),
            }
        }
        r
    }
}

/// Which hosts had finished when the run was interrupted, which were cut off in which command,
/// and which were connected but between steps (a hook's node whose part is done, a fan-out
/// host between its upload and its command).
#[derive(Debug, Default, Serialize)]
pub struct Interruption {
    pub finished: Vec<String>,
    pub failed: Vec<String>,
    pub interrupted: Vec<(String, String)>,
    pub idle: Vec<String>,
    pub not_started: Vec<String>,
}

impl Interruption {
    /// The lines an operator reads on stderr (after the first line naming the signal). Names
    /// and commands are shown through [`printable`]: a newline in a command cannot forge a line.
    pub fn lines(&self) -> Vec<String> {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.iter().map(|h| printable(h).into_owned()).collect::<Vec<_>>().join(", ")
            }
        };
        let cut: Vec<String> = self.interrupted.iter().map(|(h, c)| format!("{h} (running: {c})")).collect();
        vec![
            format!("  finished: {}", list(&self.finished)),
            format!("  failed: {}", list(&self.failed)),
            format!("  interrupted: {}", list(&cut)),
            format!("  between steps: {}", list(&self.idle)),
            format!("  not started: {}", list(&self.not_started)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_beyond_the_budget_is_counted_not_queued_and_other_events_always_pass() {
        let (events, mut rx) = Events::channel();
        let ev = events.for_host("flood-test-node");
        let line = "x".repeat(1000);
        let sent = 3 * OUTPUT_BUDGET / cost(&line);
        for _ in 0..sent {
            ev.emit(EventKind::Stdout { line: line.clone() });
        }
        // Lifecycle events are never dropped, however full the queue is.
        ev.emit(EventKind::Exit { code: Some(0), signal: None, ms: 1 });
        drop((ev, events));
        let (mut lines, mut warned, mut exit) = (0usize, 0u64, false);
        while let Some(e) = rx.recv().await {
            match e.kind {
                EventKind::Stdout { .. } => lines += 1,
                EventKind::Warning { message } => {
                    warned += message.split(' ').next().unwrap().parse::<u64>().unwrap();
                    assert!(message.contains("lines of output not shown"), "{message}");
                }
                EventKind::Exit { .. } => exit = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(exit);
        assert!(lines * cost(&line) <= OUTPUT_BUDGET, "{lines} lines were queued at once");
        assert_eq!(lines as u64 + warned, sent as u64, "every line is shown or counted");
        assert_eq!(rx.shared.queued.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_reader_that_keeps_up_loses_nothing() {
        let (events, mut rx) = Events::channel();
        let ev = events.for_host("steady-test-node");
        let line = "y".repeat(1000);
        let mut got = 0;
        for _ in 0..(2 * OUTPUT_BUDGET / cost(&line)) {
            ev.emit(EventKind::Stdout { line: line.clone() });
            if let Some(e) = rx.recv().await {
                assert!(matches!(e.kind, EventKind::Stdout { .. }), "{e:?}");
                got += 1;
            }
        }
        assert_eq!(got, 2 * OUTPUT_BUDGET / cost(&line));
    }

    #[test]
    fn the_ledger_follows_each_host() {
        let (events, _rx) = Events::channel();
        let (a, b, c) = (events.for_host("ledger-a"), events.for_host("ledger-b"), events.for_host("ledger-c"));
        events.for_host("ledger-d").emit(EventKind::Connecting { addr: "x:22".into(), via: vec![] });
        LEDGER.expect(["ledger-a", "ledger-e"]);
        a.emit(EventKind::Start);
        a.emit(EventKind::Command { command: "sleep 300".into() });
        b.emit(EventKind::Command { command: "true".into() });
        b.emit(EventKind::Exit { code: Some(0), signal: None, ms: 1 });
        b.emit(EventKind::Done { ok: true, ms: 1, error: None, error_kind: None });
        c.emit(EventKind::Done { ok: false, ms: 1, error: Some("x".into()), error_kind: Some("remote") });
        c.emit(EventKind::Done { ok: true, ms: 1, error: None, error_kind: None });
        let snap: HashMap<String, Progress> = LEDGER.snapshot().into_iter().collect();
        assert_eq!(snap["ledger-a"], Progress::Running("sleep 300".into()));
        assert_eq!(snap["ledger-b"], Progress::Finished { ok: true });
        assert_eq!(snap["ledger-c"], Progress::Finished { ok: true });
        let r = LEDGER.interruption();
        assert!(r.interrupted.contains(&("ledger-a".into(), "sleep 300".into())), "{r:?}");
        assert!(r.finished.contains(&"ledger-b".to_string()), "{r:?}");
        assert!(r.idle.contains(&"ledger-d".to_string()) && !r.idle.contains(&"ledger-a".to_string()), "{r:?}");
        assert!(r.not_started.contains(&"ledger-e".to_string()), "{r:?}");
        assert!(!r.not_started.contains(&"ledger-a".to_string()), "{r:?}");
        let text = r.lines().join("\n");
        assert!(text.contains("ledger-a (running: sleep 300)"), "{text}");
        let forged = Interruption { interrupted: vec![("n".into(), "x\nerror: forged".into())], ..Default::default() };
        assert_eq!(forged.lines().len(), 5, "{:?}", forged.lines());
        assert!(forged.lines()[2].contains("x\\nerror: forged"), "{:?}", forged.lines());
    }
}
