//! Running cluster steps on nodes: one SSH connection per node for the whole hook (opened on
//! first use), bounded parallel groups, and a dry-run mode in which the same code prints every
//! step instead of running it. Lifecycle code reads as a list of steps on nodes; this is the
//! only place that knows about connections.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::{Mutex, OnceCell, Semaphore};

use crate::cluster::topology::ClusterNode;
use crate::command::{Become, RemoteCommand};
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, HostEvents};
use crate::step::{become_for, Action};
use crate::transport::{Connector, ExecOutput, Transport, UploadFile};

type Slot = Arc<OnceCell<Arc<dyn Transport>>>;

/// Timeouts of the cluster steps (Tacker: 2700 s install, 300 s Helm, 30 s commands).
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

pub struct Runner {
    connector: Arc<dyn Connector>,
    conns: Mutex<HashMap<String, Slot>>,
    pub events: Events,
    pub dry: bool,
    pub parallel: usize,
    pub timeouts: Timeouts,
    step: AtomicUsize,
}

impl Runner {
    pub fn new(connector: Arc<dyn Connector>, events: Events, dry: bool, parallel: usize, timeouts: Timeouts) -> Self {
        Runner {
            connector,
            conns: Mutex::new(HashMap::new()),
            events,
            dry,
            parallel: parallel.max(1),
            timeouts,
            step: AtomicUsize::new(0),
        }
    }

    pub fn ev(&self, node: &ClusterNode) -> HostEvents {
        self.events.for_host(node.name())
    }

    /// Announce a phase (shown in plans and in plain output).
    pub fn phase(&self, name: &str, nodes: &[&ClusterNode], parallel: bool) {
        let list: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
        self.events.for_host("plan").emit(EventKind::Phase {
            name: name.to_string(),
            parallel,
            nodes: list.iter().map(|s| s.to_string()).collect(),
            dry: self.dry,
        });
    }

    async fn transport(&self, node: &ClusterNode) -> Result<Arc<dyn Transport>> {
        let slot = {
            let mut m = self.conns.lock().await;
            m.entry(node.name().to_string()).or_insert_with(|| Arc::new(OnceCell::new())).clone()
        };
        let ev = self.ev(node);
        slot.get_or_try_init(|| async { self.connector.connect(&node.host, &ev).await.map(Arc::from) }).await.cloned()
    }

    /// Forget a node's connection (after a reboot or a failed node), so the next step reconnects.
    pub async fn forget(&self, node: &ClusterNode) {
        let slot = self.conns.lock().await.remove(node.name());
        if let Some(t) = slot.and_then(|s| s.get().cloned()) {
            t.close().await;
        }
    }

    /// Dry run: one numbered step. Commands are shown as the node's shell gets them inside the
    /// sudo/timeout wrapper (which `-v` runs show in full); secrets are never part of them.
    fn plan(&self, node: &ClusterNode, a: &Action) -> Result<()> {
        let step = self.step.fetch_add(1, Ordering::SeqCst) + 1;
        let action = match a {
            Action::Exec(c) => {
                let who = match c.become_ {
                    Become::No => "as the login user",
                    Become::SudoNoPassword => "as root (sudo -n)",
                    Become::SudoWithPassword => "as root (sudo -S, password on stdin)",
                };
                let t = c.timeout.map(|t| format!(", timeout {}s", t.as_secs())).unwrap_or_default();
                format!("exec {who}{t}: {}", c.display())
            }
            other => other.describe()?,
        };
        self.ev(node).emit(EventKind::Plan { step, action });
        Ok(())
    }

    /// A command as root (sudo when the login user is not root) with a timeout.
    pub fn root_cmd(&self, node: &ClusterNode, script: String, timeout: Duration) -> RemoteCommand {
        RemoteCommand::new(script).with_timeout(Some(timeout)).with_become(become_for(&node.host, true))
    }

    /// Run a command; a non-zero exit is an error naming node, command and stderr tail.
    pub async fn exec(&self, node: &ClusterNode, cmd: RemoteCommand) -> Result<ExecOutput> {
        if self.dry {
            self.plan(node, &Action::Exec(cmd))?;
            return Ok(ExecOutput { code: Some(0), ..Default::default() });
        }
        let t = self.transport(node).await?;
        t.exec(&cmd, &self.ev(node)).await?.check(node.name(), &cmd)
    }

    /// Run a command and return its stdout as text.
    pub async fn output(&self, node: &ClusterNode, cmd: RemoteCommand) -> Result<String> {
        Ok(self.exec(node, cmd).await?.stdout_text())
    }

    pub async fn upload(&self, node: &ClusterNode, files: Vec<UploadFile>) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        if self.dry {
            return self.plan(node, &Action::Upload(files));
        }
        let t = self.transport(node).await?;
        t.upload(&files, &self.ev(node)).await.map(|_| ())
    }

    pub async fn download(&self, node: &ClusterNode, remote: &str, local: &Path) -> Result<()> {
        if self.dry {
            return self.plan(node, &Action::Download { remote: remote.into(), local: local.to_path_buf() });
        }
        let t = self.transport(node).await?;
        t.download(remote, local, &self.ev(node)).await.map(|_| ())
    }

    /// Run `f` on every node at once (bounded by `--parallel`); results in node order.
    pub async fn each<'a, T, F, Fut>(&self, nodes: &[&'a ClusterNode], f: F) -> Vec<(&'a ClusterNode, Result<T>)>
    where
        F: Fn(&'a ClusterNode) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let sem = Semaphore::new(self.parallel);
        let futs = nodes.iter().map(|n| {
            let (sem, f) = (&sem, &f);
            async move {
                let _p = sem.acquire().await.expect("never closed");
                let r = f(n).await;
                self.done(n, &r);
                (*n, r)
            }
        });
        join_all(futs).await
    }

    /// Report a node's step outcome as an event (the renderer prints failures).
    pub fn done<T>(&self, node: &ClusterNode, r: &Result<T>) {
        if self.dry {
            return;
        }
        if let Err(e) = r {
            self.ev(node).emit(EventKind::Done {
                ok: false,
                ms: 0,
                error: Some(e.to_string()),
                error_kind: Some(e.kind()),
            });
        }
    }

    /// The first master that answers, in order (Tacker only ever used the first).
    pub async fn first_reachable<'a>(&self, masters: &[&'a ClusterNode]) -> Result<&'a ClusterNode> {
        let mut last = None;
        for m in masters {
            if self.dry {
                return Ok(m);
            }
            match self.transport(m).await {
                Ok(_) => return Ok(m),
                Err(e) => {
                    self.ev(m)
                        .emit(EventKind::Warning { message: format!("unreachable, trying the next master: {e}") });
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::input("state", "masters", "no installed master to run kubectl on")))
    }

    pub async fn close(&self) {
        let all: Vec<Slot> = self.conns.lock().await.drain().map(|(_, s)| s).collect();
        join_all(all.iter().filter_map(|s| s.get().cloned()).map(|t| async move { t.close().await })).await;
    }
}

/// Collapse per-node results: the first error wins, all are reported as events already.
pub fn all_ok<T>(results: Vec<(&ClusterNode, Result<T>)>) -> Result<Vec<T>> {
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
