//! File transfer: SFTP when the server offers it, a plain `cat` over exec otherwise.
//!
//! A single small file (scripts, configs: up to [`INLINE_MAX`]) goes in **one** exec: the
//! content travels on stdin, and a short shell program on the node compares sha256 with the
//! existing file (identical: left untouched, "skipped"), else writes a temporary file, verifies
//! its sha256 and renames it into place. One round trip instead of five is what makes N=1 fast.
//!
//! The node-side programs are `src/remote/upload_*.sh`.
//!
//! Anything else is three steps on one connection, whatever the number of files:
//! 1. one probe command reports each remote file's mode and sha256 (and creates parents);
//! 2. only files whose content differs are streamed to a temporary name next to the target;
//! 3. one finalize command checks each temporary file's sha256 against the local one, sets
//!    the mode and renames it over the target — so a reader never sees a half file and a
//!    corrupted transfer never replaces a good one.

use std::path::Path;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use russh::ChannelMsg;
use russh_sftp::client::SftpSession;
use russh_sftp::protocol::{FileAttributes, OpenFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::session::SshSession;
use crate::command::{Receive, RemoteCommand};
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::quote::quote;
use crate::remote;
use crate::transport::{
    check_not_an_option, check_remote_path, open_source, reopen, Opened, Source, UploadFile, UploadResult,
};

const CHUNK: usize = 256 * 1024;

/// Single files up to this size are sent inline (content always transferred, then compared).
pub const INLINE_MAX: u64 = 256 * 1024;

/// SFTP requests of one file in flight at once (each up to 32 KiB).
const SFTP_IN_FLIGHT: usize = 64;

/// Files sent at once over SFTP, and over exec channels when the node has no SFTP.
const SEND_AT_ONCE: usize = 8;
const SEND_AT_ONCE_EXEC: usize = 4;

/// The one-exec upload of a small file (`src/remote/upload_inline.sh`): stdin carries the
/// content. Prints `skipped` or `written`.
pub fn inline_script(f: &UploadFile, sha: &str, tmp: &str) -> Result<String> {
    remote::UPLOAD_INLINE.command(&[f.remote.as_str(), tmp, sha, &format!("{:o}", f.mode)])
}

/// The probe: one output line per file, `<octal mode> <sha256>` or `-` when absent.
/// Parent directories are created on the way; inside the home directory (relative paths)
/// they are private (umask 077), elsewhere the usual 022. Temporary files of earlier, dead
/// uploads of these targets (not written for `stale`) are removed. `src/remote/upload_probe.sh`.
pub fn probe_script(stale: Duration, remotes: &[&str]) -> Result<String> {
    let mut args = vec![stale.as_secs().max(1).to_string()];
    args.extend(remotes.iter().map(|r| r.to_string()));
    remote::UPLOAD_PROBE.command(&args)
}

/// Parse the probe output into `(mode, sha256)` per file.
pub fn parse_probe(out: &str, n: usize) -> std::result::Result<Vec<Option<(u32, String)>>, String> {
    let lines: Vec<&str> = out.lines().collect();
    if lines.len() != n {
        return Err(format!("expected {n} probe lines, got {}", lines.len()));
    }
    lines
        .iter()
        .map(|l| {
            if *l == "-" {
                return Ok(None);
            }
            let (mode, hash) = l.split_once(' ').ok_or_else(|| format!("bad probe line {l:?}"))?;
            let mode = u32::from_str_radix(mode, 8).map_err(|_| format!("bad mode in {l:?}"))?;
            Ok(Some((mode, hash.to_string())))
        })
        .collect()
}

/// What to do with each file after the probe.
#[derive(Debug, PartialEq, Eq)]
pub enum Todo {
    /// Already there with this content and mode.
    Nothing,
    /// Content matches, mode does not.
    Chmod,
    /// Transfer to `tmp`, verify `sha256`, then rename.
    Send { tmp: String },
}

/// After the transfers: fix modes, verify and rename the streamed files into place, in order
/// (`src/remote/upload_finalize.sh`).
pub fn finalize_script(items: &[(&UploadFile, &Todo, &str)]) -> Result<String> {
    let mut args: Vec<String> = Vec::new();
    for (f, todo, sha) in items {
        let mode = format!("{:o}", f.mode);
        match todo {
            Todo::Nothing => {}
            Todo::Chmod => args.extend(["chmod".into(), mode, f.remote.clone()]),
            Todo::Send { tmp } => args.extend(["move".into(), tmp.clone(), f.remote.clone(), sha.to_string(), mode]),
        }
    }
    remote::UPLOAD_FINALIZE.command(&args)
}

/// A temporary name next to the target, so the final rename stays on one filesystem.
/// `upload_probe.sh` knows this form (16 hex digits) to sweep stale ones.
fn temp_name(remote: &str) -> String {
    format!("{remote}.mgmtd-{:016x}", fastrand::u64(..))
}

impl SshSession {
    /// The SFTP session, opened once per connection; `None` when the server has no sftp (or
    /// does not answer within the stall timeout: the exec fallback then meets the same stall
    /// and reports it).
    async fn sftp(&self) -> Option<&SftpSession> {
        self.sftp
            .get_or_init(|| async {
                let open = async {
                    let mut ch = self.channel().await.ok()?;
                    ch.request_subsystem(true, "sftp").await.ok()?;
                    loop {
                        match ch.wait().await? {
                            ChannelMsg::Success => break,
                            ChannelMsg::Failure | ChannelMsg::Close | ChannelMsg::Eof => return None,
                            _ => {}
                        }
                    }
                    // 64 writes (or reads) of 32 KiB in flight, 2 MiB: the SSH channel's window.
                    // The library's 16 (512 KiB) bound a transfer to that much per round trip:
                    // 4 MB took 14 round trips, 0.7 s at 50 ms, where the link could do more.
                    let cfg = russh_sftp::client::Config {
                        max_concurrent_writes: SFTP_IN_FLIGHT,
                        max_concurrent_reads: SFTP_IN_FLIGHT,
                        ..Default::default()
                    };
                    SftpSession::new_with_config(ch.into_stream(), cfg).await.ok()
                };
                let s = tokio::time::timeout(self.stall, open).await.ok().flatten()?;
                // An SFTP request gets twice the stall timeout (russh-sftp's default is 10 s):
                // our own per-step timer fires first and names the stall; this one only
                // bounds requests outside a step.
                s.set_timeout(2 * self.stall.as_secs().max(1));
                Some(s)
            })
            .await
            .as_ref()
    }

    pub(super) async fn upload_files(&self, files: &[UploadFile], ev: &HostEvents) -> Result<Vec<UploadResult>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let node = self.node.as_str();
        let terr = |what: &str, m: String| Error::Transfer { node: node.into(), what: what.into(), message: m };
        let opened = self.open_all(files).await?;
        if let ([f], [o]) = (files, opened.as_slice()) {
            if o.size <= INLINE_MAX {
                let script = inline_script(f, &o.sha256, &temp_name(&f.remote))?;
                let (code, out, err) =
                    self.exec_stdin(&script, &f.source, o, &f.remote).await.map_err(|m| terr(&f.remote, m))?;
                let skipped = match (code, out.trim_ascii()) {
                    (Some(0), b"skipped") => true,
                    (Some(0), b"written") => false,
                    _ => {
                        return Err(terr(
                            &f.remote,
                            format!("{}: {}", status(code), String::from_utf8_lossy(&err).trim()),
                        ))
                    }
                };
                ev.emit(EventKind::Uploaded {
                    path: f.remote.clone(),
                    bytes: o.size,
                    skipped,
                    via: if skipped { "none" } else { "exec" },
                });
                return Ok(vec![UploadResult { remote: f.remote.clone(), bytes: o.size, skipped }]);
            }
        }
        let remotes: Vec<&str> = files.iter().map(|f| f.remote.as_str()).collect();
        let total: u64 = opened.iter().map(|o| o.size).sum();
        // One short line per file: make sure a large tree never hits the capture limit. The
        // probe and the finalizer hash files on the node: they get the stall timeout plus
        // time to hash what was sent, so a node that never answers cannot hold the run.
        let limit = Some(self.stall + hash_time(total));
        let probe = RemoteCommand::new(probe_script(self.stall, &remotes)?)
            .with_capture(remotes.len() * 128 + 4096)
            .with_timeout(limit);
        let out = self.exec_quiet(&probe).await?.check(node, &probe)?;
        let state = parse_probe(&out.stdout_text(), files.len()).map_err(|m| terr("probe", m))?;

        let mut todos = Vec::with_capacity(files.len());
        for ((f, o), st) in files.iter().zip(&opened).zip(&state) {
            todos.push(match st {
                Some((mode, h)) if *h == o.sha256 && *mode == f.mode => Todo::Nothing,
                Some((_, h)) if *h == o.sha256 => Todo::Chmod,
                _ => Todo::Send { tmp: temp_name(&f.remote) },
            });
        }
        // Several files at once: each file's open and close is a round trip of its own, so
        // 13 files one after another cost some 30 round trips (3 s at 50 ms RTT) where 8 at
        // a time cost a handful. SFTP requests share the one session; the exec fallback takes
        // a channel per file, so it sends fewer at once (OpenSSH allows 10 sessions).
        let at_once = if self.sftp().await.is_some() { SEND_AT_ONCE } else { SEND_AT_ONCE_EXEC };
        let mut sends: Vec<futures::future::BoxFuture<'_, Result<&'static str>>> = Vec::new();
        for ((f, o), todo) in files.iter().zip(&opened).zip(&todos) {
            if let Todo::Send { tmp } = todo {
                sends.push(Box::pin(async move { self.send_one(f, o, tmp).await.map_err(|m| terr(&f.remote, m)) }));
            }
        }
        let sent: Vec<&'static str> =
            futures::stream::iter(sends).buffer_unordered(at_once).try_collect::<Vec<_>>().await?;
        let via = sent.last().copied().unwrap_or("none");
        let items: Vec<(&UploadFile, &Todo, &str)> =
            files.iter().zip(&todos).zip(&opened).map(|((f, t), o)| (f, t, o.sha256.as_str())).collect();
        if todos.iter().any(|t| *t != Todo::Nothing) {
            let fin = RemoteCommand::new(finalize_script(&items)?).with_capture(STDOUT_KEEP).with_timeout(limit);
            let out = self.exec_quiet(&fin).await?;
            if !out.success() {
                return Err(terr("finalize", out.stderr_tail));
            }
        }
        let mut results = Vec::with_capacity(files.len());
        for ((f, t), o) in files.iter().zip(&todos).zip(&opened) {
            let skipped = !matches!(t, Todo::Send { .. });
            ev.emit(EventKind::Uploaded {
                path: f.remote.clone(),
                bytes: o.size,
                skipped,
                via: if skipped { "none" } else { via },
            });
            results.push(UploadResult { remote: f.remote.clone(), bytes: o.size, skipped });
        }
        Ok(results)
    }

    /// Check every target path and open and hash every source, before anything is sent.
    pub(super) async fn open_all(&self, files: &[UploadFile]) -> Result<Vec<Opened>> {
        let mut opened = Vec::with_capacity(files.len());
        for f in files {
            check_remote_path(&f.remote)?;
            let o = open_source(&f.source).await.map_err(|e| match &f.source {
                Source::Bytes(_) => {
                    Error::Transfer { node: self.node.clone(), what: f.remote.clone(), message: e.to_string() }
                }
                src => Error::input(src.shown(), "source", format!("cannot read: {e}")),
            })?;
            opened.push(o);
        }
        Ok(opened)
    }

    /// What the leash needs to receive `f` on stdin in front of a command, when it is small
    /// enough to go inline (see [`RemoteCommand::wire_receiving`]); `None` otherwise.
    pub(super) fn receivable(f: &UploadFile, o: &Opened) -> Option<Receive> {
        (o.size <= INLINE_MAX).then(|| Receive {
            remote: f.remote.clone(),
            tmp: temp_name(&f.remote),
            sha256: o.sha256.clone(),
            mode: f.mode,
            size: o.size,
        })
    }

    /// Stream one file to `tmp` (mode 0600). Returns the method used.
    async fn send_one(&self, f: &UploadFile, o: &Opened, tmp: &str) -> std::result::Result<&'static str, String> {
        if let Some(sftp) = self.sftp().await {
            let attrs = FileAttributes { permissions: Some(0o600), ..Default::default() };
            let open = sftp.open_with_flags_and_attributes(
                tmp,
                OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE,
                attrs,
            );
            self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut file = step(self.stall, &format!("sftp open {tmp}"), open).await?;
            match &f.source {
                Source::Bytes(b) => copy(&mut &b[..], &mut file, self.stall).await?,
                src => copy(&mut local_file(src, o)?, &mut file, self.stall).await?,
            };
            step(self.stall, "sftp close", file.shutdown()).await?;
            return Ok("sftp");
        }
        let cmd = remote::UPLOAD_STREAM.command(&[tmp, &o.size.to_string()]).map_err(|e| e.to_string())?;
        let (code, _, err) = self.exec_stdin(&cmd, &f.source, o, tmp).await?;
        if code != Some(0) {
            return Err(format!("cat > {tmp} failed ({}): {}", status(code), String::from_utf8_lossy(&err).trim()));
        }
        Ok("exec")
    }

    /// Run `script` with `src` streamed to its stdin; returns exit code, the first
    /// [`STDOUT_KEEP`] bytes of stdout and the first [`STDERR_KEEP`] of stderr. Every step
    /// (channel open, each chunk, each reply) waits at most the stall timeout.
    async fn exec_stdin(
        &self,
        script: &str,
        src: &Source,
        o: &Opened,
        what: &str,
    ) -> std::result::Result<(Option<u32>, Vec<u8>, Vec<u8>), String> {
        let mut ch = self.channel().await.map_err(|e| format!("cannot open channel: {e}"))?;
        step(self.stall, "exec request", ch.exec(true, script.as_bytes().to_vec())).await?;
        send_content(&ch, src, o, what, self.stall).await?;
        step(self.stall, "end of input", ch.eof()).await?;
        let mut out = Capped::new(STDOUT_KEEP);
        let (code, err, _) = drain(&mut ch, &mut out, self.stall).await?;
        Ok((code, out.buf, err))
    }

    pub(super) async fn download_file(&self, remote: &str, local: &Path, ev: &HostEvents) -> Result<u64> {
        check_not_an_option("REMOTE", remote)?;
        let node = self.node.as_str();
        let terr = |m: String| Error::Transfer { node: node.into(), what: format!("download of {remote}"), message: m };
        let tmp = local.with_file_name(format!(
            ".{}.mgmtd-{:016x}",
            local.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            fastrand::u64(..)
        ));
        let mut out = tokio::fs::File::create(&tmp).await.map_err(|e| terr(format!("{}: {e}", tmp.display())))?;
        let res: std::result::Result<u64, String> = async {
            if let Some(sftp) = self.sftp().await {
                self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut f = step(self.stall, "sftp open", sftp.open(remote)).await?;
                copy(&mut f, &mut out, self.stall).await
            } else {
                let mut ch = self.channel().await.map_err(|e| format!("cannot open channel: {e}"))?;
                let cmd = format!("cat -- {}", quote(remote).map_err(|e| e.to_string())?);
                step(self.stall, "exec request", ch.exec(true, cmd.into_bytes())).await?;
                step(self.stall, "end of input", ch.eof()).await?;
                let (code, err, n) = drain(&mut ch, &mut out, self.stall).await?;
                if code != Some(0) {
                    return Err(format!("cat failed ({}): {}", status(code), String::from_utf8_lossy(&err).trim()));
                }
                Ok(n)
            }
        }
        .await;
        let finish = async {
            out.flush().await?;
            out.sync_all().await
        };
        match (res, finish.await) {
            (Ok(n), Ok(())) => {
                tokio::fs::rename(&tmp, local)
                    .await
                    .map_err(|e| terr(format!("rename to {}: {e}", local.display())))?;
                ev.emit(EventKind::Uploaded {
                    path: local.display().to_string(),
                    bytes: n,
                    skipped: false,
                    via: "download",
                });
                Ok(n)
            }
            (Err(m), _) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(terr(m))
            }
            (Ok(_), Err(e)) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(terr(e.to_string()))
            }
        }
    }
}

/// Write `src` (as opened: `o`) to the channel's stdin, each chunk within the stall timeout.
pub(super) async fn send_content(
    ch: &russh::Channel<russh::client::Msg>,
    src: &Source,
    o: &Opened,
    what: &str,
    stall: Duration,
) -> std::result::Result<(), String> {
    // Sized to the source: a zeroed 256 KiB buffer per node for a 16 KiB script would be
    // 25 MiB of touched memory when 100 nodes upload at once.
    let mut buf = vec![0u8; usize::try_from(o.size).unwrap_or(CHUNK).clamp(1, CHUNK)];
    let mut reader: Box<dyn tokio::io::AsyncRead + Unpin + Send> = match src {
        Source::Bytes(b) => Box::new(std::io::Cursor::new(b.clone())),
        src => Box::new(local_file(src, o)?),
    };
    loop {
        let k = reader.read(&mut buf).await.map_err(|e| format!("local read: {e}"))?;
        if k == 0 {
            return Ok(());
        }
        step(stall, &format!("sending {what}"), ch.data(&buf[..k])).await?;
    }
}

/// The local file to send: the hashed file itself (see [`reopen`]), read up to the size
/// that was hashed.
fn local_file(src: &Source, o: &Opened) -> std::result::Result<tokio::io::Take<tokio::fs::File>, String> {
    let (Some(p), Some(id)) = (src.local_path(), o.identity.as_ref()) else {
        return Err("not a local file".into());
    };
    let f = reopen(&p, id).map_err(|e| format!("{}: {e}", src.shown()))?;
    Ok(tokio::fs::File::from_std(f).take(o.size))
}

/// Generous time for the node to hash `bytes` (probe, verify): 20 MB/s, far below a real disk.
fn hash_time(bytes: u64) -> Duration {
    Duration::from_secs(bytes / (20 << 20))
}

/// Wait at most `stall` for one step of a transfer (a chunk written, a reply read): a
/// transfer that makes no progress for that long fails, naming the step.
pub(crate) async fn step<T, E: std::fmt::Display>(
    stall: Duration,
    what: &str,
    fut: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(stall, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(stalled(stall, what)),
    }
}

fn stalled(stall: Duration, what: &str) -> String {
    format!(
        "no progress for {:?} during {what}: the node stopped reading or answering, or the link is down (--stall-timeout)",
        stall
    )
}

/// Read a channel to its end: stdout into `out`, and the exit code, the first
/// [`STDERR_KEEP`] bytes of stderr and the stdout byte count back. Reads until Close, so the
/// order of exit status, EOF and close does not matter. Silence longer than `stall` fails.
async fn drain<W: tokio::io::AsyncWrite + Unpin>(
    ch: &mut russh::Channel<russh::client::Msg>,
    out: &mut W,
    stall: Duration,
) -> std::result::Result<(Option<u32>, Vec<u8>, u64), String> {
    let (mut code, mut err, mut n) = (None, Vec::new(), 0u64);
    loop {
        let m = tokio::time::timeout(stall, ch.wait()).await.map_err(|_| stalled(stall, "the node's reply"))?;
        let Some(m) = m else { break };
        match m {
            ChannelMsg::Data { data } => {
                step(stall, "writing", out.write_all(&data)).await?;
                n += data.len() as u64;
            }
            ChannelMsg::ExtendedData { data, .. } => {
                let room = STDERR_KEEP.saturating_sub(err.len());
                err.extend_from_slice(&data[..data.len().min(room)]);
            }
            ChannelMsg::ExitStatus { exit_status } => code = Some(exit_status),
            ChannelMsg::Close => break,
            _ => {}
        }
    }
    Ok((code, err, n))
}

/// Enough stderr to explain a failed transfer, without letting a noisy node grow memory.
const STDERR_KEEP: usize = 16 * 1024;

/// The upload programs print one word; a node printing more cannot grow memory.
const STDOUT_KEEP: usize = 4 * 1024;

/// A sink that keeps the first `max` bytes and drops the rest.
struct Capped {
    buf: Vec<u8>,
    max: usize,
}

impl Capped {
    fn new(max: usize) -> Capped {
        Capped { buf: Vec::new(), max }
    }
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let room = me.max.saturating_sub(me.buf.len());
        me.buf.extend_from_slice(&data[..data.len().min(room)]);
        std::task::Poll::Ready(Ok(data.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

pub(super) fn status(code: Option<u32>) -> String {
    code.map_or_else(|| "no exit status".to_string(), |c| format!("exit code {c}"))
}

/// `tokio::io::copy` with a larger buffer (SFTP throughput depends on big writes) and a stall
/// timeout on every read and write.
async fn copy<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin>(
    r: &mut R,
    w: &mut W,
    stall: Duration,
) -> std::result::Result<u64, String> {
    let mut buf = vec![0u8; CHUNK];
    let mut n = 0u64;
    loop {
        let k = step(stall, "read", r.read(&mut buf)).await?;
        if k == 0 {
            break;
        }
        step(stall, "write", w.write_all(&buf[..k])).await?;
        n += k as u64;
    }
    step(stall, "flush", w.flush()).await?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::process::Command;

    fn sh(script: &str, dir: &Path) -> (i32, String, String) {
        let o = Command::new("sh").arg("-c").arg(script).current_dir(dir).env("HOME", dir).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into(),
            String::from_utf8_lossy(&o.stderr).into(),
        )
    }

    #[test]
    fn probe_reports_missing_and_present_files_and_makes_private_parents() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), b"hello").unwrap();
        let (code, out, err) = sh(&probe_script(Duration::from_secs(60), &["a", "sub dir/b'c"]).unwrap(), d.path());
        assert_eq!(code, 0, "{err}");
        let st = parse_probe(&out, 2).unwrap();
        let (_, sha) = st[0].clone().unwrap();
        assert_eq!(sha, hex::encode(Sha256::digest(b"hello")));
        assert!(st[1].is_none());
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(d.path().join("sub dir")).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o700);
    }

    #[test]
    fn finalize_verifies_checksum_before_replacing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("target"), b"old").unwrap();
        std::fs::write(d.path().join("tmp1"), b"corrupt").unwrap();
        let f = UploadFile { source: Source::Bytes(b"new"[..].into()), remote: "target".into(), mode: 0o640 };
        let good = hex::encode(Sha256::digest(b"new"));
        let todo = Todo::Send { tmp: "tmp1".into() };
        let (code, _, err) = sh(&finalize_script(&[(&f, &todo, &good)]).unwrap(), d.path());
        assert_eq!(code, 1);
        assert!(err.contains("checksum mismatch"), "{err}");
        assert_eq!(std::fs::read(d.path().join("target")).unwrap(), b"old");
        assert!(!d.path().join("tmp1").exists());
        std::fs::write(d.path().join("tmp1"), b"new").unwrap();
        let (code, _, err) = sh(&finalize_script(&[(&f, &todo, &good)]).unwrap(), d.path());
        assert_eq!(code, 0, "{err}");
        assert_eq!(std::fs::read(d.path().join("target")).unwrap(), b"new");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(d.path().join("target")).unwrap().permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn inline_upload_writes_verifies_and_skips() {
        let d = tempfile::tempdir().unwrap();
        let f = UploadFile { source: Source::Bytes(b"x"[..].into()), remote: "sub/it's.sh".into(), mode: 0o700 };
        let sha = hex::encode(Sha256::digest(b"data"));
        let run = |stdin: &[u8]| {
            use std::io::Write;
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(inline_script(&f, &sha, "sub/tmp1").unwrap())
                .current_dir(d.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(stdin).unwrap();
            let o = c.wait_with_output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).trim().to_string(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        assert_eq!(run(b"corrupt").0, Some(1));
        assert!(!d.path().join("sub/it's.sh").exists() && !d.path().join("sub/tmp1").exists());
        assert_eq!(run(b"data").1, "written");
        assert_eq!(std::fs::read(d.path().join("sub/it's.sh")).unwrap(), b"data");
        assert_eq!(run(b"data").1, "skipped");
    }

    #[test]
    fn stream_writes_a_private_file_and_removes_a_cut_short_one() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let run = |input: &[u8]| {
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(remote::UPLOAD_STREAM.command(&["it's.tmp", "4"]).unwrap())
                .current_dir(d.path())
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(input).unwrap();
            c.wait_with_output().unwrap()
        };
        assert!(run(b"data").status.success());
        let p = d.path().join("it's.tmp");
        assert_eq!(std::fs::read(&p).unwrap(), b"data");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        // The link drops after 2 of 4 bytes: stdin ends early, nothing is left behind.
        let o = run(b"da");
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("cut short: 2 bytes of 4"));
        assert!(!p.exists());
    }

    #[test]
    fn probe_sweeps_stale_temp_files_of_its_targets_only() {
        let d = tempfile::tempdir().unwrap();
        let old = "t.bin.mgmtd-0123456789abcdef";
        for f in [old, "t.bin.mgmtd-fedcba9876543210", "t.bin.mgmtd-notes", "u.bin.mgmtd-0123456789abcdef"] {
            std::fs::write(d.path().join(f), b"x").unwrap();
        }
        // Only `old` was last written long ago (an upload that died).
        let st = Command::new("touch").args(["-d", "@1000000000", old]).current_dir(d.path()).status().unwrap();
        assert!(st.success());
        let (code, out, err) = sh(&probe_script(Duration::from_secs(60), &["t.bin"]).unwrap(), d.path());
        assert_eq!((code, out.as_str()), (0, "-\n"), "{err}");
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // A fresh temp (an upload in progress), a look-alike and another target's temp stay.
        assert_eq!(left, ["t.bin.mgmtd-fedcba9876543210", "t.bin.mgmtd-notes", "u.bin.mgmtd-0123456789abcdef"]);
    }

    #[tokio::test]
    async fn a_reader_that_stops_reading_stalls_the_copy_clearly() {
        // The far end reads 64 KiB, then stops: the pipe fills and the copy makes no progress.
        let (mut w, mut r) = tokio::io::duplex(16 * 1024);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            r.read_exact(&mut buf).await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(r);
        });
        let data = vec![7u8; 4 << 20];
        let started = std::time::Instant::now();
        let e = copy(&mut &data[..], &mut w, Duration::from_millis(300)).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        assert!(e.contains("no progress for 300ms during write") && e.contains("--stall-timeout"), "{e}");
        reader.abort();
    }

    #[tokio::test]
    async fn a_slow_but_steady_transfer_is_not_a_stall() {
        // Each chunk takes 100 ms, the whole copy ~1 s: far over the 300 ms limit in total,
        // never over it per step.
        let (mut w, mut r) = tokio::io::duplex(CHUNK);
        let reader = tokio::spawn(async move {
            let mut n = 0usize;
            let mut buf = vec![0u8; CHUNK];
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match r.read(&mut buf).await.unwrap() {
                    0 => return n,
                    k => n += k,
                }
            }
        });
        let data = vec![1u8; 8 * CHUNK];
        let n = copy(&mut &data[..], &mut w, Duration::from_millis(300)).await.unwrap();
        drop(w);
        assert_eq!(n as usize, data.len());
        assert_eq!(reader.await.unwrap(), data.len());
    }

    #[tokio::test]
    async fn step_reports_errors_and_stalls_by_name() {
        let ok: std::result::Result<u8, String> = step(Duration::from_secs(1), "x", async { Ok::<_, String>(1) }).await;
        assert_eq!(ok.unwrap(), 1);
        let e = step(Duration::from_secs(1), "sftp open /t", async { Err::<u8, _>("denied") }).await.unwrap_err();
        assert_eq!(e, "sftp open /t: denied");
        let e = step(
            Duration::from_millis(50),
            "the node's reply",
            std::future::pending::<std::result::Result<u8, String>>(),
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("no progress for 50ms during the node's reply"), "{e}");
    }

    #[tokio::test]
    async fn node_output_kept_during_an_upload_is_bounded() {
        let mut c = Capped::new(10);
        for _ in 0..1000 {
            c.write_all(&[b'x'; 1024]).await.unwrap();
        }
        assert_eq!(c.buf.len(), 10);
    }

    #[test]
    fn probe_output_parsing() {
        assert_eq!(parse_probe("644 abc\n-\n", 2).unwrap(), vec![Some((0o644, "abc".into())), None]);
        assert!(parse_probe("-\n", 2).is_err());
        assert!(parse_probe("xyz\n", 1).is_err());
    }
}
