//! One event stream for everything that happens on hosts. Renderers (progress bars, plain
//! lines, JSON lines) and the VNFM hook protocol all consume this same stream, so what an
//! operator sees and what a machine parses can never disagree.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

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
    Warning {
        message: String,
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
    start: Instant,
}

impl Events {
    pub fn channel() -> (Events, UnboundedReceiver<Event>) {
        let (tx, rx) = unbounded_channel();
        (Events { tx, start: Instant::now() }, rx)
    }

    pub fn for_host(&self, host: &str) -> HostEvents {
        HostEvents { host: Arc::from(host), events: self.clone() }
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
        let t_ms = self.events.start.elapsed().as_millis() as u64;
        // A closed receiver means the renderer is gone (shutting down); nothing to do.
        let _ = self.events.tx.send(Event { t_ms, host: self.host.clone(), kind });
    }

    /// A sink for tests and library users that do not care about events.
    pub fn discard(host: &str) -> HostEvents {
        let (events, rx) = Events::channel();
        drop(rx);
        events.for_host(host)
    }
}
