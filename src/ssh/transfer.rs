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

use russh::ChannelMsg;
use russh_sftp::client::SftpSession;
use russh_sftp::protocol::{FileAttributes, OpenFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::SshSession;
use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::quote::quote;
use crate::remote;
use crate::transport::{check_remote_path, local_digest, Source, UploadFile, UploadResult};

const CHUNK: usize = 256 * 1024;

/// Single files up to this size are sent inline (content always transferred, then compared).
pub const INLINE_MAX: u64 = 256 * 1024;

/// The one-exec upload of a small file (`src/remote/upload_inline.sh`): stdin carries the
/// content. Prints `skipped` or `written`.
pub fn inline_script(f: &UploadFile, sha: &str, tmp: &str) -> Result<String> {
    remote::UPLOAD_INLINE.command(&[f.remote.as_str(), tmp, sha, &format!("{:o}", f.mode)])
}

/// The probe: one output line per file, `<octal mode> <sha256>` or `-` when absent.
/// Parent directories are created on the way; inside the home directory (relative paths)
/// they are private (umask 077), elsewhere the usual 022. `src/remote/upload_probe.sh`.
pub fn probe_script(remotes: &[&str]) -> Result<String> {
    remote::UPLOAD_PROBE.command(remotes)
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
fn temp_name(remote: &str) -> String {
    format!("{remote}.mgmtd-{:016x}", fastrand::u64(..))
}

impl SshSession {
    /// The SFTP session, opened once per connection; `None` when the server has no sftp.
    async fn sftp(&self) -> Option<&SftpSession> {
        self.sftp
            .get_or_init(|| async {
                let ch = self.channel().await.ok()?;
                let mut ch = ch;
                ch.request_subsystem(true, "sftp").await.ok()?;
                loop {
                    match ch.wait().await? {
                        ChannelMsg::Success => break,
                        ChannelMsg::Failure | ChannelMsg::Close | ChannelMsg::Eof => return None,
                        _ => {}
                    }
                }
                SftpSession::new(ch.into_stream()).await.ok()
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
        let mut digests = Vec::with_capacity(files.len());
        for f in files {
            check_remote_path(&f.remote)?;
            let d = local_digest(&f.source).await.map_err(|e| match &f.source {
                Source::Path(p) => Error::input(p.display().to_string(), "source", format!("cannot read: {e}")),
                Source::Bytes(_) => terr(&f.remote, e.to_string()),
            })?;
            digests.push(d);
        }
        if let ([f], [(sha, size)]) = (files, digests.as_slice()) {
            if *size <= INLINE_MAX {
                let script = inline_script(f, sha, &temp_name(&f.remote))?;
                let (code, out, err) = self.exec_stdin(&script, &f.source).await.map_err(|m| terr(&f.remote, m))?;
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
                    bytes: *size,
                    skipped,
                    via: if skipped { "none" } else { "exec" },
                });
                return Ok(vec![UploadResult { remote: f.remote.clone(), bytes: *size, skipped }]);
            }
        }
        let remotes: Vec<&str> = files.iter().map(|f| f.remote.as_str()).collect();
        // One short line per file: make sure a large tree never hits the capture limit.
        let probe = RemoteCommand::new(probe_script(&remotes)?).with_capture(remotes.len() * 128 + 4096);
        let out = self.exec_quiet(&probe).await?.check(node, &probe)?;
        let state = parse_probe(&out.stdout_text(), files.len()).map_err(|m| terr("probe", m))?;

        let mut todos = Vec::with_capacity(files.len());
        for ((f, (sha, _)), st) in files.iter().zip(&digests).zip(&state) {
            todos.push(match st {
                Some((mode, h)) if h == sha && *mode == f.mode => Todo::Nothing,
                Some((_, h)) if h == sha => Todo::Chmod,
                _ => Todo::Send { tmp: temp_name(&f.remote) },
            });
        }
        let mut via = "none";
        for (f, todo) in files.iter().zip(&todos) {
            if let Todo::Send { tmp } = todo {
                via = self.send_one(f, tmp).await.map_err(|m| terr(&f.remote, m))?;
            }
        }
        let items: Vec<(&UploadFile, &Todo, &str)> =
            files.iter().zip(&todos).zip(&digests).map(|((f, t), (sha, _))| (f, t, sha.as_str())).collect();
        if todos.iter().any(|t| *t != Todo::Nothing) {
            let fin = RemoteCommand::new(finalize_script(&items)?);
            let out = self.exec_quiet(&fin).await?;
            if !out.success() {
                return Err(terr("finalize", out.stderr_tail));
            }
        }
        let mut results = Vec::with_capacity(files.len());
        for ((f, t), (_, size)) in files.iter().zip(&todos).zip(&digests) {
            let skipped = !matches!(t, Todo::Send { .. });
            ev.emit(EventKind::Uploaded {
                path: f.remote.clone(),
                bytes: *size,
                skipped,
                via: if skipped { "none" } else { via },
            });
            results.push(UploadResult { remote: f.remote.clone(), bytes: *size, skipped });
        }
        Ok(results)
    }

    /// Stream one file to `tmp` (mode 0600). Returns the method used.
    async fn send_one(&self, f: &UploadFile, tmp: &str) -> std::result::Result<&'static str, String> {
        if let Some(sftp) = self.sftp().await {
            let attrs = FileAttributes { permissions: Some(0o600), ..Default::default() };
            let mut file = sftp
                .open_with_flags_and_attributes(tmp, OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE, attrs)
                .await
                .map_err(|e| format!("sftp open {tmp}: {e}"))?;
            match &f.source {
                Source::Bytes(b) => file.write_all(b).await.map_err(|e| format!("sftp write: {e}"))?,
                Source::Path(p) => {
                    let mut local = tokio::fs::File::open(p).await.map_err(|e| format!("{}: {e}", p.display()))?;
                    copy(&mut local, &mut file).await.map_err(|e| format!("sftp write: {e}"))?;
                }
            }
            file.shutdown().await.map_err(|e| format!("sftp close: {e}"))?;
            return Ok("sftp");
        }
        let cmd = remote::UPLOAD_STREAM.command(&[tmp]).map_err(|e| e.to_string())?;
        let (code, _, err) = self.exec_stdin(&cmd, &f.source).await?;
        if code != Some(0) {
            return Err(format!("cat > {tmp} failed ({}): {}", status(code), String::from_utf8_lossy(&err).trim()));
        }
        Ok("exec")
    }

    /// Run `script` with `src` streamed to its stdin; returns exit code, stdout and stderr.
    async fn exec_stdin(
        &self,
        script: &str,
        src: &Source,
    ) -> std::result::Result<(Option<u32>, Vec<u8>, Vec<u8>), String> {
        let mut ch = self.channel().await.map_err(|e| e.to_string())?;
        ch.exec(true, script.as_bytes().to_vec()).await.map_err(|e| e.to_string())?;
        match src {
            Source::Bytes(b) => ch.data(&b[..]).await.map_err(|e| e.to_string())?,
            Source::Path(p) => {
                let local = tokio::fs::File::open(p).await.map_err(|e| format!("{}: {e}", p.display()))?;
                ch.data(tokio::io::BufReader::with_capacity(CHUNK, local)).await.map_err(|e| e.to_string())?
            }
        }
        ch.eof().await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let (code, err, _) = drain(&mut ch, &mut out).await?;
        Ok((code, out, err))
    }

    pub(super) async fn download_file(&self, remote: &str, local: &Path, ev: &HostEvents) -> Result<u64> {
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
                let mut f = sftp.open(remote).await.map_err(|e| format!("sftp open: {e}"))?;
                copy(&mut f, &mut out).await.map_err(|e| format!("sftp read: {e}"))
            } else {
                let mut ch = self.channel().await.map_err(|e| e.to_string())?;
                ch.exec(true, format!("cat -- {}", quote(remote).map_err(|e| e.to_string())?).into_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                ch.eof().await.map_err(|e| e.to_string())?;
                let (code, err, n) = drain(&mut ch, &mut out).await?;
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

/// Read a channel to its end: stdout into `out`, and the exit code, the first
/// [`STDERR_KEEP`] bytes of stderr and the stdout byte count back. Reads until Close, so the
/// order of exit status, EOF and close does not matter.
async fn drain<W: tokio::io::AsyncWrite + Unpin>(
    ch: &mut russh::Channel<russh::client::Msg>,
    out: &mut W,
) -> std::result::Result<(Option<u32>, Vec<u8>, u64), String> {
    let (mut code, mut err, mut n) = (None, Vec::new(), 0u64);
    while let Some(m) = ch.wait().await {
        match m {
            ChannelMsg::Data { data } => {
                out.write_all(&data).await.map_err(|e| e.to_string())?;
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

fn status(code: Option<u32>) -> String {
    code.map_or_else(|| "no exit status".to_string(), |c| format!("exit code {c}"))
}

/// `tokio::io::copy` with a larger buffer: SFTP throughput depends on big writes.
async fn copy<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin>(
    r: &mut R,
    w: &mut W,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf).await?;
        if k == 0 {
            break;
        }
        w.write_all(&buf[..k]).await?;
        n += k as u64;
    }
    w.flush().await?;
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
        let (code, out, err) = sh(&probe_script(&["a", "sub dir/b'c"]).unwrap(), d.path());
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
    fn stream_writes_a_private_file() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let mut c = Command::new("sh")
            .arg("-c")
            .arg(remote::UPLOAD_STREAM.command(&["it's.tmp"]).unwrap())
            .current_dir(d.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(b"data").unwrap();
        assert!(c.wait().unwrap().success());
        let p = d.path().join("it's.tmp");
        assert_eq!(std::fs::read(&p).unwrap(), b"data");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn probe_output_parsing() {
        assert_eq!(parse_probe("644 abc\n-\n", 2).unwrap(), vec![Some((0o644, "abc".into())), None]);
        assert!(parse_probe("-\n", 2).is_err());
        assert!(parse_probe("xyz\n", 1).is_err());
    }
}
