//! An in-process transport whose nodes answer from a script: the fake beside the SSH transport.
//! Unit tests of decision logic (heal, scale, failover, Helm pending-state recovery) run real
//! operation code against it without root or a lab; the lab tests stay the proof that the SSH
//! side works. Replies are chosen by the node and a piece of the command text; the newest rule
//! that matches wins, so a test can script a default and then override it. Commands are matched
//! and recorded in their display form (`hosts_update.sh '10.0.0.1' ...` for a node-side program,
//! the command itself otherwise), which is what an operator reads. Every call is recorded in
//! order for the test to assert on.
//!
//! Round trips are counted here, where a count is exact: every exec, upload and download is one
//! (a connect is logged apart and costs no virtual time: its handshake is a fixed cost per node,
//! paid once and in parallel, not a step of the operation). With
//! [`with_latency`](FakeConnector::with_latency) each of those calls also waits that long on tokio's clock,
//! so a test under `#[tokio::test(start_paused = true)]` reads an operation's critical path off
//! the virtual clock: elapsed / latency = the round trips that had to happen one after another
//! (nodes that work in parallel overlap; local work costs no virtual time).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::inventory::Host;
use crate::transport::{Connector, ExecOutput, Transport, UploadFile, UploadResult};

/// One thing a node was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Connect {
        node: String,
    },
    Exec {
        node: String,
        script: String,
    },
    /// One file put in place and a command run, in one call (run-script): one round trip.
    UploadExec {
        node: String,
        remote: String,
        script: String,
    },
    Upload {
        node: String,
        remotes: Vec<String>,
    },
    Download {
        node: String,
        remote: String,
    },
}

#[derive(Clone, Debug)]
struct Rule {
    node: Option<String>,
    needle: String,
    code: u32,
    stdout: String,
    stderr: String,
    /// How many more times this rule answers (None: always).
    left: Option<usize>,
}

#[derive(Default)]
struct Script {
    rules: Vec<Rule>,
    down: Vec<String>,
    calls: Vec<Call>,
    /// How long each call waits (tokio time): see the module doc.
    latency: Duration,
}

/// Cheap to clone: clones share one script and one call log.
#[derive(Clone, Default)]
pub struct FakeConnector {
    script: Arc<Mutex<Script>>,
}

impl FakeConnector {
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, node: Option<&str>, needle: &str, code: u32, stdout: &str, stderr: &str, left: Option<usize>) {
        self.script.lock().expect("fake script").rules.push(Rule {
            node: node.map(str::to_string),
            needle: needle.to_string(),
            code,
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
            left,
        });
    }

    /// Commands on `node` (any node when None) containing `needle` print `stdout` and exit 0.
    pub fn reply(&self, node: Option<&str>, needle: &str, stdout: &str) -> &Self {
        self.add(node, needle, 0, stdout, "", None);
        self
    }

    /// As [`reply`](Self::reply), for the next `times` matching commands only.
    pub fn reply_times(&self, node: Option<&str>, needle: &str, stdout: &str, times: usize) -> &Self {
        self.add(node, needle, 0, stdout, "", Some(times));
        self
    }

    /// Commands containing `needle` fail with exit `code` and `stderr`.
    pub fn fail(&self, node: Option<&str>, needle: &str, code: u32, stderr: &str) -> &Self {
        self.add(node, needle, code, "", stderr, None);
        self
    }

    /// The node does not answer: connecting fails as a dead VM does.
    pub fn down(&self, node: &str) -> &Self {
        self.script.lock().expect("fake script").down.push(node.to_string());
        self
    }

    /// Every later call waits `d` on tokio's clock before it answers: one round trip's time.
    pub fn with_latency(&self, d: Duration) -> &Self {
        self.script.lock().expect("fake script").latency = d;
        self
    }

    /// Exec, upload and download calls on every node: the operation's round trips in all.
    pub fn round_trips(&self) -> usize {
        self.calls().iter().filter(|c| !matches!(c, Call::Connect { .. })).count()
    }

    /// Exec, upload and download calls on `node`.
    pub fn round_trips_on(&self, node: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| match c {
                Call::Exec { node: n, .. }
                | Call::UploadExec { node: n, .. }
                | Call::Upload { node: n, .. }
                | Call::Download { node: n, .. } => n == node,
                Call::Connect { .. } => false,
            })
            .count()
    }

    /// The largest [`round_trips_on`](Self::round_trips_on) of any node.
    pub fn most_round_trips_on_one_node(&self) -> usize {
        let mut nodes: Vec<String> = self
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Exec { node, .. }
                | Call::UploadExec { node, .. }
                | Call::Upload { node, .. }
                | Call::Download { node, .. } => Some(node),
                Call::Connect { .. } => None,
            })
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes.iter().map(|n| self.round_trips_on(n)).max().unwrap_or(0)
    }

    pub fn calls(&self) -> Vec<Call> {
        self.script.lock().expect("fake script").calls.clone()
    }

    /// The scripts run on `node`, in order.
    pub fn execs(&self, node: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Exec { node: n, script } | Call::UploadExec { node: n, script, .. } if n == node => Some(script),
                _ => None,
            })
            .collect()
    }

    /// Every exec on any node as `node: script`, in order.
    pub fn all_execs(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Exec { node, script } | Call::UploadExec { node, script, .. } => {
                    Some(format!("{node}: {script}"))
                }
                _ => None,
            })
            .collect()
    }

    /// Records the call, then waits the configured latency (the lock is not held while waiting).
    async fn log(&self, c: Call) {
        let latency = {
            let mut s = self.script.lock().expect("fake script");
            s.calls.push(c);
            s.latency
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }

    fn answer(&self, node: &str, script: &str) -> ExecOutput {
        let mut s = self.script.lock().expect("fake script");
        let hit =
            s.rules.iter_mut().rev().find(|r| {
                r.node.as_deref().is_none_or(|n| n == node) && script.contains(&r.needle) && r.left != Some(0)
            });
        match hit {
            Some(r) => {
                if let Some(n) = r.left.as_mut() {
                    *n -= 1;
                }
                ExecOutput {
                    code: Some(r.code),
                    stdout: r.stdout.clone().into_bytes(),
                    stderr_tail: r.stderr.clone(),
                    ..Default::default()
                }
            }
            None => ExecOutput { code: Some(0), ..Default::default() },
        }
    }
}

#[async_trait]
impl Connector for FakeConnector {
    async fn connect(&self, host: &Host, _events: &HostEvents) -> Result<Box<dyn Transport>> {
        self.script.lock().expect("fake script").calls.push(Call::Connect { node: host.name.clone() });
        if self.script.lock().expect("fake script").down.contains(&host.name) {
            return Err(Error::Connect {
                node: host.name.clone(),
                addr: host.endpoint(),
                message: "no route to host (fake)".into(),
                attempts: 1,
            });
        }
        Ok(Box::new(FakeTransport { node: host.name.clone(), fake: self.clone(), calls: AtomicU64::new(0) }))
    }
}

struct FakeTransport {
    node: String,
    fake: FakeConnector,
    /// This connection's exec, upload and download calls: [`Transport::round_trips`].
    calls: AtomicU64,
}

impl FakeTransport {
    /// The scripted answer to `cmd`, its output streamed as events as the SSH transport does.
    fn run(&self, cmd: &RemoteCommand, events: &HostEvents) -> ExecOutput {
        let shown = cmd.display().to_string();
        events.emit(EventKind::Command { command: shown.clone() });
        let mut out = self.fake.answer(&self.node, &shown);
        out.elapsed = Duration::from_millis(1);
        // Streamed as the real transport streams it: through the command's redaction.
        let mut redactor = crate::redact::Redactor::new(cmd.redact);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(line) = redactor.line(line) {
                events.emit(EventKind::Stdout { line });
            }
        }
        // And the stderr tail kept for errors, as the real transport keeps it.
        let mut redactor = crate::redact::Redactor::new(cmd.redact.for_stderr());
        let tail: Vec<String> = out.stderr_tail.lines().filter_map(|l| redactor.line(l)).collect();
        out.stderr_tail = tail.join("\n");
        out
    }
}

#[async_trait]
impl Transport for FakeTransport {
    fn node(&self) -> &str {
        &self.node
    }

    async fn exec(&self, cmd: &RemoteCommand, events: &HostEvents) -> Result<ExecOutput> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.fake.log(Call::Exec { node: self.node.clone(), script: cmd.display().to_string() }).await;
        Ok(self.run(cmd, events))
    }

    /// One call, as the SSH transport does it for a small file: one round trip.
    async fn upload_and_exec(
        &self,
        file: &UploadFile,
        cmd: &RemoteCommand,
        events: &HostEvents,
    ) -> Result<(UploadResult, ExecOutput)> {
        let (remote, script) = (file.remote.clone(), cmd.display().to_string());
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.fake.log(Call::UploadExec { node: self.node.clone(), remote: remote.clone(), script }).await;
        Ok((UploadResult { remote, bytes: 0, skipped: false }, self.run(cmd, events)))
    }

    async fn upload(&self, files: &[UploadFile], _events: &HostEvents) -> Result<Vec<UploadResult>> {
        let remotes: Vec<String> = files.iter().map(|f| f.remote.clone()).collect();
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.fake.log(Call::Upload { node: self.node.clone(), remotes: remotes.clone() }).await;
        Ok(remotes.into_iter().map(|remote| UploadResult { remote, bytes: 0, skipped: false }).collect())
    }

    async fn download(&self, remote: &str, local: &std::path::Path, _events: &HostEvents) -> Result<u64> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.fake.log(Call::Download { node: self.node.clone(), remote: remote.to_string() }).await;
        std::fs::write(local, b"").map_err(|e| Error::Transfer {
            node: self.node.clone(),
            what: format!("download of {remote}"),
            message: e.to_string(),
        })?;
        Ok(0)
    }

    async fn close(&self) {}

    fn round_trips(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Events;

    #[tokio::test]
    async fn newest_matching_rule_answers_and_calls_are_logged() {
        let f = FakeConnector::new();
        f.reply(None, "hostname", "any").reply(Some("m1"), "hostname", "master1").reply_times(None, "x", "once", 1);
        f.down("dead");
        let (ev, _rx) = Events::channel();
        let t = f.connect(&Host::for_test("m1", "192.0.2.1"), &ev.for_host("m1")).await.unwrap();
        let out = t.exec(&RemoteCommand::new("hostname"), &ev.for_host("m1")).await.unwrap();
        assert_eq!(out.stdout_text(), "master1");
        assert_eq!(t.exec(&RemoteCommand::new("x"), &ev.for_host("m1")).await.unwrap().stdout_text(), "once");
        assert_eq!(t.exec(&RemoteCommand::new("x"), &ev.for_host("m1")).await.unwrap().stdout_text(), "");
        assert!(f.connect(&Host::for_test("dead", "192.0.2.9"), &ev.for_host("dead")).await.is_err());
        assert_eq!(f.execs("m1"), vec!["hostname", "x", "x"]);
    }

    /// Two nodes that each run two commands at once take two round trips of virtual time, not
    /// four: the clock measures the critical path, the counter every call.
    #[tokio::test(start_paused = true)]
    async fn the_virtual_clock_measures_the_critical_path_and_the_counter_every_call() {
        let f = FakeConnector::new();
        f.with_latency(Duration::from_secs(1));
        let (ev, _rx) = Events::channel();
        let start = tokio::time::Instant::now();
        let run = |name: &'static str| {
            let (f, ev) = (f.clone(), ev.clone());
            async move {
                let t = f.connect(&Host::for_test(name, "192.0.2.1"), &ev.for_host(name)).await.unwrap();
                let after_connect = tokio::time::Instant::now();
                t.exec(&RemoteCommand::new("a"), &ev.for_host(name)).await.unwrap();
                t.exec(&RemoteCommand::new("b"), &ev.for_host(name)).await.unwrap();
                after_connect.elapsed()
            }
        };
        let (a, b) = tokio::join!(run("m1"), run("m2"));
        assert_eq!((a, b), (Duration::from_secs(2), Duration::from_secs(2)));
        assert_eq!(start.elapsed(), Duration::from_secs(2), "two execs, each node at once; connects cost no time");
        assert_eq!((f.round_trips(), f.round_trips_on("m1"), f.most_round_trips_on_one_node()), (4, 2, 2));
    }
}
