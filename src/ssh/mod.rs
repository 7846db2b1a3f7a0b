//! The SSH transport: one russh connection per host for a whole operation, a channel per
//! command, SFTP opened at most once.

mod auth;
mod client;
mod connect;
mod exec;
pub mod host_key;
mod known_hosts;
mod options;
mod session;
mod transfer;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::HostEvents;
use crate::inventory::Host;
use crate::transport::{Connector, ExecOutput, Transport, UploadFile, UploadResult};

pub use exec::LineSplitter;
pub use options::SshOptions;
use session::SshSession;
pub use transfer::{parse_probe, probe_script};

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
            handle: Arc::new(c.handle),
            hops: c.hops,
            sftp: OnceCell::new(),
            become_password: host.become_password.clone(),
            grace: self.opts.grace,
            stall: self.opts.stall,
            quiet: HostEvents::discard(&host.name),
            warmed: AtomicBool::new(false),
            round_trips: AtomicU64::new(0),
            spare: std::sync::Mutex::new(None),
        }))
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

    /// One exec when the file is small: the leash receives it on stdin, then runs the command
    /// (one round trip and one login shell where an upload and an exec take two of each).
    async fn upload_and_exec(
        &self,
        file: &UploadFile,
        cmd: &RemoteCommand,
        events: &HostEvents,
    ) -> Result<(UploadResult, ExecOutput)> {
        let opened = self.open_all(std::slice::from_ref(file)).await?;
        let Some(receive) = SshSession::receivable(file, &opened[0]) else {
            let mut up = self.upload_files(std::slice::from_ref(file), events).await?;
            let out = exec::exec(self, cmd, events).await?;
            return Ok((up.remove(0), out));
        };
        exec::exec_receiving(self, cmd, exec::Incoming { file, opened: &opened[0], receive }, events).await
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

    fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Best effort, and bounded: after a stall the link may be dead, and saying goodbye on it
    /// must not hang the run.
    async fn close(&self) {
        self.drop_spare();
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
