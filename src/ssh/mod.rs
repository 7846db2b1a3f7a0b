//! The SSH transport: one russh connection per host for a whole operation, a channel per
//! command, SFTP opened at most once.

mod auth;
mod client;
mod connect;
mod exec;
pub mod host_key;
mod known_hosts;
mod transfer;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use russh::client::{Handle, Msg};
use russh::Channel;
use russh_sftp::client::SftpSession;
use tokio::sync::OnceCell;

use crate::backoff::Backoff;
use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::HostEvents;
use crate::inventory::Host;
use crate::secret::Secret;
use crate::transport::{Connector, ExecOutput, Transport, UploadFile, UploadResult};

pub use exec::LineSplitter;
pub use transfer::{parse_probe, probe_script};

/// Connection behaviour, shared by every host of a run.
#[derive(Clone, Debug)]
pub struct SshOptions {
    /// Per attempt: TCP connect + SSH handshake + login.
    pub connect_timeout: Duration,
    /// Keep retrying "not up yet" errors (refused, unreachable, reset in banner) this long.
    pub retry_for: Duration,
    pub backoff: Backoff,
    /// Send a keepalive after this much silence; 3 unanswered ones drop the connection, so a
    /// dead link ends a command instead of hanging it.
    pub keepalive: Duration,
    /// Key exchange preference, most preferred first.
    pub kex: Vec<String>,
    /// Extra local wait beyond a command's timeout before we give up on the remote kill.
    pub grace: Duration,
    /// A transfer step (a chunk sent or received, a reply, an SFTP request) or a channel open
    /// that makes no progress this long fails, naming node and path: a stalled or hostile
    /// node cannot hold a run. `--stall-timeout`.
    pub stall: Duration,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            connect_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(60),
            backoff: Backoff::default(),
            keepalive: Duration::from_secs(15),
            // Post-quantum hybrid second: it costs several times the CPU of curve25519 and
            // a fleet run pays that per host (see docs/benchmarks.md).
            kex: vec![
                "curve25519-sha256".into(),
                "curve25519-sha256@libssh.org".into(),
                "mlkem768x25519-sha256".into(),
                "diffie-hellman-group16-sha512".into(),
                "diffie-hellman-group14-sha256".into(),
            ],
            grace: Duration::from_secs(10),
            // A flaky WAN link shared by 200 uploads still moves each one every few seconds;
            // two minutes of total silence is a dead or hostile node, not congestion.
            stall: Duration::from_secs(120),
        }
    }
}

/// At most this long for each goodbye in [`SshSession::close`].
const CLOSE_WAIT: Duration = Duration::from_secs(5);

pub struct SshConnector {
    opts: SshOptions,
    config: Arc<russh::client::Config>,
}

impl SshConnector {
    pub fn new(opts: SshOptions) -> Result<Self> {
        let config = Arc::new(connect::client_config(&opts)?);
        Ok(SshConnector { opts, config })
    }
}

#[async_trait]
impl Connector for SshConnector {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>> {
        let c = connect::connect(host, &self.opts, &self.config, events).await?;
        Ok(Box::new(SshSession {
            node: host.name.clone(),
            handle: c.handle,
            hops: c.hops,
            sftp: OnceCell::new(),
            become_password: host.become_password.clone(),
            grace: self.opts.grace,
            stall: self.opts.stall,
            quiet: HostEvents::discard(&host.name),
            warmed: AtomicBool::new(false),
        }))
    }
}

pub struct SshSession {
    node: String,
    handle: Handle<client::Client>,
    hops: Vec<Handle<client::Client>>,
    sftp: OnceCell<Option<SftpSession>>,
    become_password: Option<Secret>,
    grace: Duration,
    stall: Duration,
    /// Sink for internal commands (probes, finalizers) whose output is data, not news.
    quiet: HostEvents,
    /// Whether the first channel has been opened (see [`SshSession::channel`]).
    warmed: AtomicBool,
}

impl SshSession {
    async fn exec_quiet(&self, cmd: &RemoteCommand) -> Result<ExecOutput> {
        exec::exec(self, cmd, &self.quiet).await
    }

    /// Open a session channel, within the stall timeout (a node that never confirms the
    /// open must not hold the run).
    ///
    /// OpenSSH follows a key login with a burst of small packets (host keys, key-option
    /// notices) and keeps Nagle on for exec sessions, so each packet of the burst after the
    /// first waits for our ACK, which the kernel delays by 40 ms when we have nothing to
    /// send; the first channel's confirmation sits behind them. While the first channel opens
    /// we therefore send a tiny keepalive (no reply asked) every 3 ms, at most 20: each one
    /// carries the ACK at once. Later channels do not need it.
    async fn channel(&self) -> std::result::Result<Channel<Msg>, russh::Error> {
        let stall = self.stall;
        tokio::time::timeout(stall, self.open_channel()).await.unwrap_or_else(|_| {
            Err(russh::Error::IO(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the node did not open a channel within {stall:?} (--stall-timeout)"),
            )))
        })
    }

    async fn open_channel(&self) -> std::result::Result<Channel<Msg>, russh::Error> {
        if self.warmed.swap(true, Ordering::Relaxed) {
            return self.handle.channel_open_session().await;
        }
        let open = self.handle.channel_open_session();
        tokio::pin!(open);
        for _ in 0..20 {
            tokio::select! {
                r = &mut open => return r,
                _ = tokio::time::sleep(Duration::from_millis(3)) => {
                    let _ = self.handle.send_keepalive(false).await;
                }
            }
        }
        open.await
    }
}

#[async_trait]
impl Transport for SshSession {
    fn node(&self) -> &str {
        &self.node
    }

    async fn exec(&self, cmd: &RemoteCommand, events: &HostEvents) -> Result<ExecOutput> {
        exec::exec(self, cmd, events).await
    }

    async fn upload(&self, files: &[UploadFile], events: &HostEvents) -> Result<Vec<UploadResult>> {
        self.upload_files(files, events).await
    }

    async fn download(&self, remote: &str, local: &Path, events: &HostEvents) -> Result<u64> {
        if let Some(dir) = local.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::Transfer {
                node: self.node.clone(),
                what: format!("download of {remote}"),
                message: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        self.download_file(remote, local, events).await
    }

    /// Best effort, and bounded: after a stall the link may be dead, and saying goodbye on it
    /// must not hang the run.
    async fn close(&self) {
        let bound = CLOSE_WAIT.min(self.stall);
        if let Some(Some(s)) = self.sftp.get() {
            let _ = tokio::time::timeout(bound, s.close()).await;
        }
        let _ = tokio::time::timeout(bound, self.handle.disconnect(russh::Disconnect::ByApplication, "", "en")).await;
        for h in self.hops.iter().rev() {
            let _ = tokio::time::timeout(bound, h.disconnect(russh::Disconnect::ByApplication, "", "en")).await;
        }
    }
}
