//! Dry run, done once for every operation: `--dry-run` swaps the SSH connector for a
//! [`PlanConnector`]. Operations run exactly the same code; every step they would take reaches
//! the plan transport, which records it as a numbered `plan` event and answers "planned". Code
//! that needs a value back from a node asks through [`crate::lifecycle::Runner::fact`], which
//! gives a placeholder for planned output. So no operation branches on dry run, and what a plan
//! shows is what a real run does, in the same order. A plan step never shows a URL's userinfo (a
//! repository or proxy password in a command's text): every step is masked where it is recorded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use crate::command::{Become, RemoteCommand};
use crate::error::Result;
use crate::event::{EventKind, HostEvents};
use crate::inventory::Host;
use crate::transport::{Connector, ExecOutput, Source, Transport, UploadFile, UploadResult};
use crate::url_mask::mask_userinfo;

/// Connects to nothing; every transport it opens records steps. Steps are numbered across the
/// whole plan, so a plan reads top to bottom in the order a real run takes them.
#[derive(Clone, Default)]
pub struct PlanConnector {
    step: Arc<AtomicUsize>,
}

impl PlanConnector {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Connector for PlanConnector {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>> {
        events.emit(EventKind::Plan { step: 0, action: mask_userinfo(&describe_connect(host)).into_owned() });
        Ok(Box::new(PlanTransport { node: host.name.clone(), step: self.step.clone() }))
    }
}

struct PlanTransport {
    node: String,
    step: Arc<AtomicUsize>,
}

impl PlanTransport {
    fn record(&self, events: &HostEvents, action: String) {
        let step = self.step.fetch_add(1, Ordering::SeqCst) + 1;
        events.emit(EventKind::Plan { step, action: mask_userinfo(&action).into_owned() });
    }
}

#[async_trait]
impl Transport for PlanTransport {
    fn node(&self) -> &str {
        &self.node
    }

    async fn exec(&self, cmd: &RemoteCommand, events: &HostEvents) -> Result<ExecOutput> {
        self.record(events, describe_exec(cmd));
        Ok(ExecOutput::planned())
    }

    async fn upload(&self, files: &[UploadFile], events: &HostEvents) -> Result<Vec<UploadResult>> {
        if !files.is_empty() {
            self.record(events, describe_upload(files));
        }
        Ok(files.iter().map(|f| UploadResult { remote: f.remote.clone(), bytes: 0, skipped: false }).collect())
    }

    async fn download(&self, remote: &str, local: &std::path::Path, events: &HostEvents) -> Result<u64> {
        self.record(events, format!("download {remote} -> {}", local.display()));
        Ok(0)
    }

    async fn close(&self) {}
}

/// `connect user@host:port via jump (host key: policy)`: who we would log in as, and how.
pub fn describe_connect(h: &Host) -> String {
    let via = if h.jump.is_empty() {
        String::new()
    } else {
        format!(" via {}", h.jump.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(" -> "))
    };
    format!("connect {}@{}{via} (host key: {})", h.user, h.endpoint(), h.host_key_check)
}

/// One exec step: as whom, under which deadline (the exact `timeout` wrapper the node runs), and
/// the command as the node's shell gets it inside that wrapper. Secrets are never part of a
/// command: sudo reads its password from stdin, scripts read theirs from 0600 files.
pub fn describe_exec(c: &RemoteCommand) -> String {
    let who = match c.become_ {
        Become::No => "as the login user",
        Become::SudoNoPassword => "as root (sudo -n)",
        Become::SudoWithPassword => "as root (sudo -S, password ******** on stdin)",
    };
    let deadline = match c.timeout {
        Some(t) => format!(" under timeout -k {} {}", secs(crate::command::KILL_AFTER), secs(t)),
        None => String::new(),
    };
    format!("exec {who}{deadline}: {}", c.display())
}

fn secs(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.3}")
    }
}

pub fn describe_upload(files: &[UploadFile]) -> String {
    files
        .iter()
        .map(|f| {
            let src = match &f.source {
                Source::Path(p) => p.display().to_string(),
                Source::Bytes(b) => format!("<{} bytes>", b.len()),
            };
            format!("upload {src} -> {} (mode {:04o}, skipped if sha256 matches)", f.remote, f.mode)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Events;
    use std::time::Duration;

    #[tokio::test]
    async fn steps_are_numbered_across_hosts_and_nothing_connects() {
        let (events, mut rx) = Events::channel();
        let pc = PlanConnector::new();
        let a = Host::for_test("a", "192.0.2.1");
        let b = Host::for_test("b", "192.0.2.2");
        let ta = pc.connect(&a, &events.for_host("a")).await.unwrap();
        let tb = pc.connect(&b, &events.for_host("b")).await.unwrap();
        let cmd = RemoteCommand::new("echo 'x y'").with_timeout(Some(Duration::from_secs(5)));
        assert!(ta.exec(&cmd, &events.for_host("a")).await.unwrap().planned);
        tb.exec(&cmd, &events.for_host("b")).await.unwrap();
        drop(events);
        let mut seen = Vec::new();
        while let Some(e) = rx.recv().await {
            if let EventKind::Plan { step, action } = e.kind {
                seen.push((e.host.to_string(), step, action));
            }
        }
        assert_eq!(seen[0].1, 0);
        assert!(seen[0].2.starts_with("connect root@192.0.2.1"), "{seen:?}");
        assert_eq!((seen[2].0.as_str(), seen[2].1), ("a", 1));
        assert_eq!((seen[3].0.as_str(), seen[3].1), ("b", 2));
        assert_eq!(seen[3].2, "exec as the login user under timeout -k 3 5: echo 'x y'");
    }

    #[tokio::test]
    async fn a_url_password_in_a_command_never_reaches_the_plan() {
        let (events, mut rx) = Events::channel();
        let t = PlanConnector::new().connect(&Host::for_test("a", "192.0.2.1"), &events.for_host("a")).await.unwrap();
        let cmd = RemoteCommand::new("helm repo add r 'https://u:Repo-Pw@charts.example/' --username u");
        t.exec(&cmd, &events.for_host("a")).await.unwrap();
        t.download("https://tok@h/x", std::path::Path::new("/tmp/x"), &events.for_host("a")).await.unwrap();
        drop(events);
        let mut actions = Vec::new();
        while let Some(e) = rx.recv().await {
            if let EventKind::Plan { action, .. } = e.kind {
                actions.push(action);
            }
        }
        assert_eq!(actions.len(), 3, "{actions:?}");
        assert!(actions[1].ends_with("helm repo add r 'https://********@charts.example/' --username u"), "{actions:?}");
        assert!(actions.iter().all(|a| !a.contains("Repo-Pw") && !a.contains("tok@")), "{actions:?}");
    }

    #[test]
    fn sudo_password_is_shown_masked() {
        let c = RemoteCommand::new("id").with_become(Become::SudoWithPassword);
        let d = describe_exec(&c);
        assert!(d.contains("sudo -S") && d.contains("********"), "{d}");
    }
}
