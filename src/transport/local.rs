//! A transport whose one "node" is the controller itself: commands run as local `sh -c`
//! processes, as the operator who runs the driver. It exists for a cluster known only by its
//! kubeconfig (OSM's K8s cluster registered by file), where no master is reachable over SSH and
//! Helm runs on the controller. The command lines are the very ones the SSH path sends (the
//! operations do not know which transport they run on); only where they run differs.
//!
//! Every command gets the connector's environment variables (the cluster's private Helm homes,
//! its kubeconfig path) and, when a Helm binary was named, a `PATH` whose first directory holds
//! a `helm` link to it. Relative paths (values files) live under the connector's directory.
//! `sudo` is never used: a command's [`Become`](crate::command::Become) is ignored, since Helm
//! with a kubeconfig needs no root and the controller's operator is who it runs as.
//! Output is masked as the SSH path masks it ([`Redactor`]) and emitted once the process ends.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use async_trait::async_trait;

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::inventory::Host;
use crate::redact::Redactor;
use crate::transport::{Connector, ExecOutput, Source, Transport, UploadFile, UploadResult};

const STDERR_TAIL_LINES: usize = 20;

/// Opens the controller's [`LocalTransport`]; whatever host it is asked for, the process runs
/// here (the caller's targets name the controller).
#[derive(Clone, Debug)]
pub struct LocalConnector {
    /// Working directory of every command, and the root of relative upload paths (0700).
    pub dir: PathBuf,
    /// Extra environment of every command, e.g. `KUBECONFIG`, `HELM_CACHE_HOME`.
    pub vars: Vec<(String, OsString)>,
    /// A directory put first on `PATH` (holding the `helm` to run), if any.
    pub bin_dir: Option<PathBuf>,
}

impl LocalConnector {
    /// The `PATH` every command sees: `bin_dir` first, then the driver's own.
    pub fn path_var(&self) -> Option<OsString> {
        let bin = self.bin_dir.as_ref()?;
        let mut dirs = vec![bin.clone()];
        if let Some(p) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&p));
        }
        std::env::join_paths(dirs).ok()
    }

    /// The process a command runs as (not started): `sh -c SCRIPT` in `dir` with `vars`.
    pub fn command(&self, cmd: &RemoteCommand) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg(&cmd.script).current_dir(&self.dir).stdin(Stdio::null());
        // Its own process group, so a timeout ends Helm too, not only the shell around it.
        c.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        if let Some(p) = self.path_var() {
            c.env("PATH", p);
        }
        c
    }
}

#[async_trait]
impl Connector for LocalConnector {
    async fn connect(&self, host: &Host, events: &HostEvents) -> Result<Box<dyn Transport>> {
        events.emit(EventKind::Connected { ms: 0 });
        Ok(Box::new(LocalTransport { node: host.name.clone(), conn: self.clone() }))
    }
}

pub struct LocalTransport {
    node: String,
    conn: LocalConnector,
}

impl LocalTransport {
    fn local(&self, remote: &str) -> PathBuf {
        let p = Path::new(remote);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.conn.dir.join(p)
        }
    }

    fn io_err(&self, during: String, e: std::io::Error) -> Error {
        Error::Session { node: self.node.clone(), during, message: e.to_string() }
    }
}

#[async_trait]
impl Transport for LocalTransport {
    fn node(&self) -> &str {
        &self.node
    }

    async fn exec(&self, cmd: &RemoteCommand, ev: &HostEvents) -> Result<ExecOutput> {
        ev.emit(EventKind::Command { command: cmd.display().to_string() });
        let started = Instant::now();
        let during = || format!("command `{}`", cmd.display());
        let child = self.conn.command(cmd).spawn().map_err(|e| self.io_err(during(), e))?;
        let group = child.id();
        let waited = match cmd.timeout {
            Some(t) => match tokio::time::timeout(t, child.wait_with_output()).await {
                Ok(r) => r,
                Err(_) => {
                    // The whole group: the shell and whatever it started (Helm).
                    if let Some(pid) = group.and_then(|p| i32::try_from(p).ok()) {
                        // SAFETY: kill(2) on our own child's process group; no memory involved.
                        unsafe {
                            libc::kill(-pid, libc::SIGKILL);
                        }
                    }
                    let elapsed = started.elapsed();
                    ev.emit(EventKind::Timeout { command: cmd.display().to_string(), secs: elapsed.as_secs_f64() });
                    return Err(Error::Timeout {
                        node: self.node.clone(),
                        command: cmd.display().to_string(),
                        elapsed,
                    });
                }
            },
            None => child.wait_with_output().await,
        };
        let o = waited.map_err(|e| self.io_err(during(), e))?;
        let mut ro = Redactor::new(cmd.redact);
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some(line) = ro.line(line) {
                ev.emit(EventKind::Stdout { line });
            }
        }
        let mut re = Redactor::new(cmd.redact.for_stderr());
        let mut tail = std::collections::VecDeque::new();
        for line in String::from_utf8_lossy(&o.stderr).lines() {
            if let Some(line) = re.line(line) {
                ev.emit(EventKind::Stderr { line: line.clone() });
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        use std::os::unix::process::ExitStatusExt;
        let mut stdout = o.stdout;
        stdout.truncate(cmd.capture);
        let out = ExecOutput {
            code: o.status.code().map(|c| c as u32),
            signal: o.status.signal().map(|s| s.to_string()),
            stdout,
            stderr_tail: tail.into_iter().collect::<Vec<_>>().join("\n"),
            elapsed: started.elapsed(),
            planned: false,
        };
        ev.emit(EventKind::Exit { code: out.code, signal: out.signal.clone(), ms: out.elapsed.as_millis() as u64 });
        Ok(out)
    }

    async fn upload(&self, files: &[UploadFile], ev: &HostEvents) -> Result<Vec<UploadResult>> {
        let mut done = Vec::new();
        for f in files {
            let to = self.local(&f.remote);
            let during = || format!("writing {}", to.display());
            let bytes: Vec<u8> = match &f.source {
                Source::Bytes(b) => b.to_vec(),
                src => std::fs::read(src.local_path().expect("a local file")).map_err(|e| self.io_err(during(), e))?,
            };
            if let Some(parent) = to.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)
                    .map_err(|e| self.io_err(during(), e))?;
            }
            let tmp = to.with_extension("mgmt-driver-tmp");
            let _ = std::fs::remove_file(&tmp);
            let write = || -> std::io::Result<()> {
                use std::io::Write;
                let mut w = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
                w.write_all(&bytes)?;
                w.sync_all()?;
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(f.mode))?;
                std::fs::rename(&tmp, &to)
            };
            write().map_err(|e| self.io_err(during(), e))?;
            ev.emit(EventKind::Uploaded {
                path: f.remote.clone(),
                bytes: bytes.len() as u64,
                skipped: false,
                via: "local",
            });
            done.push(UploadResult { remote: f.remote.clone(), bytes: bytes.len() as u64, skipped: false });
        }
        Ok(done)
    }

    async fn download(&self, remote: &str, local: &Path, _ev: &HostEvents) -> Result<u64> {
        let from = self.local(remote);
        std::fs::copy(&from, local).map_err(|e| self.io_err(format!("copying {}", from.display()), e))
    }

    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Events;
    use crate::redact::Redact;

    fn conn(dir: &Path) -> LocalConnector {
        LocalConnector {
            dir: dir.to_path_buf(),
            vars: vec![("HELM_CACHE_HOME".into(), dir.join("cache").into_os_string())],
            bin_dir: Some(dir.join("bin")),
        }
    }

    #[tokio::test]
    async fn a_command_runs_here_with_the_vars_the_path_and_masked_output() {
        let d = tempfile::tempdir().unwrap();
        let c = conn(d.path());
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("helm"), "#!/bin/sh\necho \"fake helm $*\"\n").unwrap();
        std::fs::set_permissions(bin.join("helm"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let (events, mut rx) = Events::channel();
        let t = c.connect(&Host::for_test("controller", "localhost"), &events.for_host("controller")).await.unwrap();
        let cmd = RemoteCommand::new(
            "echo \"$HELM_CACHE_HOME\"; pwd; helm version; echo https://u:s3\"\"cret@repo.example/x >&2",
        );
        let o = t.exec(&cmd, &events.for_host("controller")).await.unwrap();
        assert!(o.success());
        let text = o.stdout_text();
        assert!(text.contains(&d.path().join("cache").display().to_string()), "{text}");
        assert!(text.contains(&format!("{}\n", d.path().display())), "runs in its directory: {text}");
        assert!(text.contains("fake helm version"), "helm is the named binary: {text}");
        // Hidden output stays out of events but is captured for parsing.
        let secret = RemoteCommand::new("echo token-\"abc\"").with_redact(Redact::All);
        let o = t.exec(&secret, &events.for_host("controller")).await.unwrap();
        assert_eq!(o.stdout_text(), "token-abc\n");
        drop((t, events));
        let mut seen = String::new();
        while let Some(e) = rx.recv().await {
            seen.push_str(&format!("{e:?}\n"));
        }
        assert!(!seen.contains("s3cret") && !seen.contains("token-abc"), "{seen}");
        assert!(seen.contains("fake helm version"), "{seen}");
    }

    #[tokio::test]
    async fn failures_time_outs_and_uploads() {
        let d = tempfile::tempdir().unwrap();
        let c = conn(d.path());
        let (events, _rx) = Events::channel();
        let ev = events.for_host("controller");
        let t = c.connect(&Host::for_test("controller", "localhost"), &ev).await.unwrap();
        let o = t.exec(&RemoteCommand::new("echo bad >&2; exit 3"), &ev).await.unwrap();
        assert_eq!((o.code, o.stderr_tail.as_str()), (Some(3), "bad"));
        // A timeout ends the command's children too (here a sleep that would write a file).
        let late = d.path().join("late");
        let slow = RemoteCommand::new(format!("(sleep 1; touch {}) & wait", late.display()))
            .with_timeout(Some(std::time::Duration::from_millis(200)));
        assert!(matches!(t.exec(&slow, &ev).await, Err(Error::Timeout { .. })));
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert!(!late.exists(), "the command's child outlived its timeout");
        let up =
            UploadFile { source: Source::Bytes(b"a: 1\n".to_vec().into()), remote: "run/x/v.yaml".into(), mode: 0o600 };
        t.upload(&[up], &ev).await.unwrap();
        let f = d.path().join("run/x/v.yaml");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a: 1\n");
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(f.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    }
}
