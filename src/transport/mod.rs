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
pub mod local;

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
    open_source(src).await.map(|o| (o.sha256, o.size))
}

/// A local upload source, checked and hashed through one open handle.
pub struct Opened {
    pub sha256: String,
    pub size: u64,
    /// What the hashed file was (`None` for in-memory sources): the upload reopens the path
    /// with [`reopen`], which refuses anything else.
    pub identity: Option<Identity>,
}

/// A regular file's identity as `fstat` on its open handle reports it. Holding the handle
/// itself until the transfer would cost one descriptor per file of a tree for every node
/// uploading at once (256 by default): a chart tree would exhaust the descriptor limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        use std::os::unix::fs::MetadataExt;
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        }
    }
}

/// Open `src`, check the open file (a regular file, by `fstat` on the handle) and hash it from
/// that handle. Runs off the async threads.
pub async fn open_source(src: &Source) -> std::io::Result<Opened> {
    match src {
        Source::Bytes(b) => Ok(Opened { sha256: hex::encode(Sha256::digest(b)), size: b.len() as u64, identity: None }),
        Source::Path(_) | Source::Open(_) => {
            let p = src.local_path().expect("a local file");
            tokio::task::spawn_blocking(move || open_and_hash(&p)).await.map_err(std::io::Error::other)?
        }
    }
}

/// Open a local regular file without blocking on a FIFO planted at the path.
fn open_regular(p: &std::path::Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: opening a FIFO must fail the check below, not wait for a writer.
    // (Regular files ignore the flag.)
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(p)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok((f, meta))
}

fn open_and_hash(p: &std::path::Path) -> std::io::Result<Opened> {
    use std::io::Read;
    let (mut f, meta) = open_regular(p)?;
    let identity = Identity::of(&meta);
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
    if n != identity.size || Identity::of(&f.metadata()?) != identity {
        return Err(std::io::Error::other("changed while being read"));
    }
    Ok(Opened { sha256: hex::encode(h.finalize()), size: n, identity: Some(identity) })
}

/// Reopen a hashed source for the transfer; the open handle must be the very file that was
/// hashed (same device, inode, size and mtime), so a path swapped in between (a symlink out of
/// the package, a FIFO, another file) is refused, never read. The node verifies the content
/// by sha256 on top.
pub fn reopen(p: &std::path::Path, want: &Identity) -> std::io::Result<std::fs::File> {
    let (f, meta) = open_regular(p)?;
    if Identity::of(&meta) != *want {
        return Err(std::io::Error::other("changed since it was checked (replaced or modified during the upload)"));
    }
    Ok(f)
}

/// A remote file path we can transfer to: not empty, not a directory, no newline or NUL
/// (the node-side programs read one line per file), not an option (see [`check_not_an_option`]).
pub fn check_remote_path(p: &str) -> Result<()> {
    if p.is_empty() || p.ends_with('/') || p.contains(['\n', '\0']) {
        return Err(Error::input(
            "DEST",
            p.escape_debug().to_string(),
            "not a usable remote file path (empty, a directory, or has a newline)",
        ));
    }
    check_not_an_option("DEST", p)
}

/// A remote path reaches the node-side programs (and `chmod`, `mv`, `rm`, `cat`) as an operand;
/// one whose first character is `-` would be read as an option there. The programs put `--`
/// before their operands too, but the driver refuses such a path anyway, naming `field`: only
/// the whole argument's first character matters (`/tmp/-x` and `./-x` are harmless).
pub fn check_not_an_option(field: &str, p: &str) -> Result<()> {
    if p.starts_with('-') {
        return Err(Error::input(
            field,
            p.escape_debug().to_string(),
            "a remote path must not start with '-' (it would read as an option): write ./ in front",
        ));
    }
    Ok(())
}

/// Where an upload's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    Path(PathBuf),
    Bytes(Arc<[u8]>),
    /// A file opened and checked once (a VNF package file, see `Package::file`).
    Open(OpenFile),
}

impl Source {
    /// The path the transfer opens: for [`Source::Open`], one that opens the checked file
    /// itself, whatever became of its name since. `None` for in-memory content.
    pub fn local_path(&self) -> Option<PathBuf> {
        match self {
            Source::Path(p) => Some(p.clone()),
            Source::Open(o) => Some(o.fd_path()),
            Source::Bytes(_) => None,
        }
    }

    /// What people see: the file's name, or the size of in-memory content.
    pub fn shown(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Open(o) => o.shown.display().to_string(),
            Source::Bytes(b) => format!("<{} bytes>", b.len()),
        }
    }
}

/// A local file held open after its checks: every later read goes through this open file
/// (`/proc/self/fd/N` opens the very same file), never through its name again, so a name
/// swapped after the check (a symlink out of the package, a FIFO) is never read.
#[derive(Clone, Debug)]
pub struct OpenFile {
    shown: PathBuf,
    file: Arc<std::fs::File>,
}

impl OpenFile {
    /// `file` was checked as the file named `shown`.
    pub fn new(shown: PathBuf, file: std::fs::File) -> OpenFile {
        OpenFile { shown, file: Arc::new(file) }
    }

    fn fd_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
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

    /// Upload one file as [`upload`](Self::upload) does, then run a command as
    /// [`exec`](Self::exec) does (run-script: the script, then its run). This default takes two
    /// round trips; the SSH transport does both in one exec when the file is small.
    async fn upload_and_exec(
        &self,
        file: &UploadFile,
        cmd: &RemoteCommand,
        events: &HostEvents,
    ) -> Result<(UploadResult, ExecOutput)> {
        let mut up = self.upload(std::slice::from_ref(file), events).await?;
        let out = self.exec(cmd, events).await?;
        let r = up.pop().unwrap_or(UploadResult { remote: file.remote.clone(), bytes: 0, skipped: false });
        Ok((r, out))
    }

    async fn close(&self);

    /// The exchanges with the node so far (see [`EventKind::RoundTrips`](crate::event::EventKind)):
    /// every command and every file-transfer step, not the connection's own handshake.
    fn round_trips(&self) -> u64 {
        0
    }
}

/// Opens [`Transport`]s. The SSH connector retries while a VM is still booting.
#[async_trait]
pub trait Connector: Send + Sync {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sources_are_checked_by_handle_and_a_swapped_path_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"hello").unwrap();
        let o = open_source(&Source::Path(f.clone())).await.unwrap();
        assert_eq!((o.sha256.as_str(), o.size), (hex::encode(Sha256::digest(b"hello")).as_str(), 5));
        let id = o.identity.unwrap();
        assert!(reopen(&f, &id).is_ok());
        // Replaced by a symlink to a file outside, or by another file: refused.
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &f).unwrap();
        assert!(reopen(&f, &id).unwrap_err().to_string().contains("changed since it was checked"));
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, b"hello").unwrap();
        assert!(reopen(&f, &id).is_err(), "a new inode is another file");
        // A FIFO fails at once instead of blocking the open; so does a directory.
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let r = tokio::time::timeout(std::time::Duration::from_secs(5), open_source(&Source::Path(fifo.clone())))
            .await
            .expect("open of a FIFO blocked");
        assert!(r.err().unwrap().to_string().contains("not a regular file"));
        assert!(reopen(&fifo, &id).unwrap_err().to_string().contains("not a regular file"));
        assert!(open_source(&Source::Path(d.path().to_path_buf())).await.is_err());
    }

    #[tokio::test]
    async fn an_open_file_is_read_through_its_handle_not_its_name() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("install.sh");
        std::fs::write(&f, b"echo checked\n").unwrap();
        let src = Source::Open(OpenFile::new(f.clone(), std::fs::File::open(&f).unwrap()));
        assert_eq!(src.shown(), f.display().to_string());
        // The name now points outside: the checked file is what gets hashed and reopened.
        std::fs::rename(&f, d.path().join("moved")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &f).unwrap();
        let o = open_source(&src).await.unwrap();
        assert_eq!(o.sha256, hex::encode(Sha256::digest(b"echo checked\n")));
        let mut text = String::new();
        use std::io::Read;
        reopen(&src.local_path().unwrap(), &o.identity.unwrap()).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "echo checked\n");
    }
}
