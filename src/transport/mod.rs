//! The seam between the engine and the wire. The engine runs steps against a [`Transport`]
//! (one open session to one host); SSH is one implementation, so lifecycle logic never
//! depends on russh and a different connector (local, container exec) can slot in.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::HostEvents;
use crate::inventory::Host;

pub mod fake;

/// What a finished command left behind.
#[derive(Clone, Debug, Default)]
pub struct ExecOutput {
    pub code: Option<u32>,
    pub signal: Option<String>,
    /// Captured stdout, up to the command's `capture` limit (every line was also streamed as
    /// an event, so nothing is lost for the operator).
    pub stdout: Vec<u8>,
    /// The last lines of stderr, for error messages.
    pub stderr_tail: String,
    pub elapsed: Duration,
    /// Nothing ran: a dry run's plan transport recorded the command instead. Readers of output
    /// take a placeholder (see `Runner::fact`).
    pub planned: bool,
}

impl ExecOutput {
    /// What the plan transport answers: success, no output.
    pub fn planned() -> ExecOutput {
        ExecOutput { code: Some(0), planned: true, ..Default::default() }
    }

    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    pub fn status_text(&self) -> String {
        match (&self.code, &self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "no exit status (connection lost?)".to_string(),
        }
    }

    /// Turn a non-zero exit into a typed error that names node, command, status and stderr tail.
    pub fn check(self, node: &str, cmd: &RemoteCommand) -> Result<ExecOutput> {
        if self.success() {
            Ok(self)
        } else {
            Err(Error::Remote {
                node: node.to_string(),
                command: cmd.display().to_string(),
                status: self.status_text(),
                stderr_tail: self.stderr_tail.clone(),
            })
        }
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Content digest and size of a local source, computed off the async threads.
pub async fn local_digest(src: &Source) -> std::io::Result<(String, u64)> {
    match src {
        Source::Bytes(b) => Ok((hex::encode(Sha256::digest(b)), b.len() as u64)),
        Source::Path(p) => {
            let p = p.clone();
            tokio::task::spawn_blocking(move || {
                use std::io::Read;
                let mut f = std::fs::File::open(&p)?;
                let mut h = Sha256::new();
                let mut buf = vec![0u8; 256 * 1024];
                let mut n = 0u64;
                loop {
                    let r = f.read(&mut buf)?;
                    if r == 0 {
                        break;
                    }
                    n += r as u64;
                    h.update(&buf[..r]);
                }
                Ok((hex::encode(h.finalize()), n))
            })
            .await
            .map_err(std::io::Error::other)?
        }
    }
}

/// A remote file path we can transfer to: not empty, not a directory, no newline or NUL
/// (the node-side programs read one line per file).
pub fn check_remote_path(p: &str) -> Result<()> {
    if p.is_empty() || p.ends_with('/') || p.contains(['\n', '\0']) {
        return Err(Error::input(
            "DEST",
            p.escape_debug().to_string(),
            "not a usable remote file path (empty, a directory, or has a newline)",
        ));
    }
    Ok(())
}

/// Where an upload's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    Path(PathBuf),
    Bytes(Arc<[u8]>),
}

#[derive(Clone, Debug)]
pub struct UploadFile {
    pub source: Source,
    /// Remote path; relative paths are relative to the login user's home.
    pub remote: String,
    pub mode: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadResult {
    pub remote: String,
    pub bytes: u64,
    /// The remote file already had this content (sha256) and only its mode was ensured.
    pub skipped: bool,
}

/// An open session to one host. Implementations keep one connection for the whole operation
/// and open a channel per command.
#[async_trait]
pub trait Transport: Send + Sync {
    fn node(&self) -> &str;

    /// Run one command, streaming its output as events. A non-zero exit is *not* an error
    /// here (callers decide, usually via [`ExecOutput::check`]); a timeout is.
    async fn exec(&self, cmd: &RemoteCommand, events: &HostEvents) -> Result<ExecOutput>;

    /// Upload files atomically (temp name + rename), skipping those whose remote sha256
    /// already matches, and verifying every transferred file end to end.
    async fn upload(&self, files: &[UploadFile], events: &HostEvents) -> Result<Vec<UploadResult>>;

    /// Download one remote file to a local path (written to a temp name and renamed).
    async fn download(&self, remote: &str, local: &std::path::Path, events: &HostEvents) -> Result<u64>;

    async fn close(&self);
}

/// Opens [`Transport`]s. The SSH connector retries while a VM is still booting.
#[async_trait]
pub trait Connector: Send + Sync {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>>;
}
