//! Jobs: what to do on each host, as data. Building a job is pure (and is what `--dry-run`
//! prints); running it is a straight walk over its actions on one [`Transport`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::command::{Become, RemoteCommand};
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::inventory::Host;
use crate::quote::join;
use crate::transport::{ExecOutput, Source, Transport, UploadFile};

#[derive(Clone, Debug)]
pub enum Action {
    Upload(Vec<UploadFile>),
    /// Run a command; a non-zero exit fails the host.
    Exec(RemoteCommand),
    /// Fetch a remote file to a local path.
    Download {
        remote: String,
        local: PathBuf,
    },
}

impl Action {
    /// One line per action for `--dry-run`: the exact command text the node would receive
    /// (passwords are never part of it; sudo reads them from stdin).
    pub fn describe(&self) -> Result<String> {
        Ok(match self {
            Action::Upload(files) => files
                .iter()
                .map(|f| {
                    let src = match &f.source {
                        Source::Path(p) => p.display().to_string(),
                        Source::Bytes(b) => format!("<{} bytes>", b.len()),
                    };
                    format!("upload {src} -> {} (mode {:04o}, skipped if sha256 matches)", f.remote, f.mode)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Action::Download { remote, local } => format!("download {remote} -> {}", local.display()),
            Action::Exec(c) => {
                let mut s = format!("exec {}", c.wire()?);
                if c.become_ == Become::SudoWithPassword {
                    s.push_str("   [sudo password: ******** on stdin]");
                }
                s
            }
        })
    }
}

#[derive(Clone, Debug, Default)]
pub struct Job {
    pub actions: Vec<Action>,
}

/// What a host's job produced: the last command's output, if any.
#[derive(Debug, Default)]
pub struct JobOutput {
    pub last: Option<ExecOutput>,
    pub uploaded: usize,
    pub skipped: usize,
}

impl Job {
    pub async fn run(&self, t: &dyn Transport, ev: &HostEvents) -> Result<JobOutput> {
        let mut out = JobOutput::default();
        for a in &self.actions {
            match a {
                Action::Upload(files) => {
                    for r in t.upload(files, ev).await? {
                        if r.skipped {
                            out.skipped += 1
                        } else {
                            out.uploaded += 1
                        }
                    }
                }
                Action::Exec(cmd) => out.last = Some(t.exec(cmd, ev).await?.check(t.node(), cmd)?),
                Action::Download { remote, local } => {
                    if let Some(dir) = local.parent() {
                        std::fs::create_dir_all(dir)
                            .map_err(|e| Error::input(dir.display().to_string(), "DEST", e.to_string()))?;
                    }
                    t.download(remote, local, ev).await?;
                }
            }
        }
        Ok(out)
    }

    /// Emit the plan as events (dry run), connecting to nothing.
    pub fn plan(&self, ev: &HostEvents) -> Result<()> {
        for (i, a) in self.actions.iter().enumerate() {
            ev.emit(EventKind::Plan { step: i + 1, action: a.describe()? });
        }
        Ok(())
    }
}

/// How become applies to a host: nothing for root, `sudo -S` with a password, `sudo -n` without.
pub fn become_for(host: &Host, want: bool) -> Become {
    match (want, host.user == "root", host.become_password.is_some()) {
        (false, _, _) | (true, true, _) => Become::No,
        (true, false, true) => Become::SudoWithPassword,
        (true, false, false) => Become::SudoNoPassword,
    }
}

/// `exec -- CMD...`: like ssh, the words are joined with spaces and run by the node's shell.
pub fn exec_job(words: &[String], host: &Host, opts: &CommandOpts) -> Result<Job> {
    if words.is_empty() {
        return Err(Error::input("arguments", "CMD", "no command given (use: exec -- CMD...)"));
    }
    let script = words.join(" ");
    if script.contains('\0') {
        return Err(Error::input("arguments", "CMD", "contains a NUL byte"));
    }
    Ok(Job { actions: vec![Action::Exec(opts.command(script, host))] })
}

/// Options shared by commands that run something.
#[derive(Clone, Debug, Default)]
pub struct CommandOpts {
    pub timeout: Option<std::time::Duration>,
    pub become_: bool,
}

impl CommandOpts {
    pub fn command(&self, script: String, host: &Host) -> RemoteCommand {
        RemoteCommand::new(script).with_timeout(self.timeout).with_become(become_for(host, self.become_))
    }
}

/// `put SRC DEST`: a file, or a directory tree (DEST is then the remote directory).
/// `mode` overrides the local file modes.
pub fn put_job(src: &Path, dest: &str, mode: Option<u32>) -> Result<Job> {
    let meta = std::fs::metadata(src).map_err(|e| Error::input(src.display().to_string(), "SRC", e.to_string()))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        let base = dest.trim_end_matches('/');
        if base.is_empty() {
            return Err(Error::input("arguments", "DEST", "a directory upload needs a destination directory"));
        }
        walk(src, src, &mut |path, rel, m| {
            files.push(UploadFile {
                source: Source::Path(path),
                remote: format!("{base}/{rel}"),
                mode: mode.unwrap_or(m),
            });
        })?;
        if files.is_empty() {
            return Err(Error::input(src.display().to_string(), "SRC", "directory has no files"));
        }
    } else {
        let remote = if dest.ends_with('/') {
            let name = src.file_name().ok_or_else(|| Error::input("arguments", "SRC", "has no file name"))?;
            format!("{dest}{}", name.to_string_lossy())
        } else {
            dest.to_string()
        };
        use std::os::unix::fs::PermissionsExt;
        files.push(UploadFile {
            source: Source::Path(src.to_path_buf()),
            remote,
            mode: mode.unwrap_or(meta.permissions().mode() & 0o777),
        });
    }
    // Refuse unusable destinations here, before any node is touched (exit 2, not 1 per host).
    for f in &files {
        crate::ssh::check_remote_path(&f.remote)?;
    }
    Ok(Job { actions: vec![Action::Upload(files)] })
}

/// `get REMOTE DIR`: fetch one remote file from every host into `DIR/<host>/<file name>`,
/// so files from many hosts never overwrite each other.
pub fn get_job(remote: &str, dir: &Path, host: &Host) -> Result<Job> {
    let name = remote.rsplit('/').next().filter(|n| !n.is_empty() && *n != "." && *n != "..");
    let name = name.ok_or_else(|| Error::input("arguments", "REMOTE", format!("'{remote}' does not name a file")))?;
    if remote.contains(['\n', '\0']) {
        return Err(Error::input("arguments", "REMOTE", "contains a newline or NUL"));
    }
    Ok(Job { actions: vec![Action::Download { remote: remote.to_string(), local: dir.join(&host.name).join(name) }] })
}

fn walk(root: &Path, dir: &Path, f: &mut dyn FnMut(PathBuf, String, u32)) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::input(dir.display().to_string(), "SRC", e.to_string()))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::input(dir.display().to_string(), "SRC", e.to_string()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        // Follow nothing: a symlink in a tree could point anywhere on the controller.
        let m =
            std::fs::symlink_metadata(&p).map_err(|e| Error::input(p.display().to_string(), "SRC", e.to_string()))?;
        if m.file_type().is_symlink() {
            return Err(Error::input(
                p.display().to_string(),
                "SRC",
                "symbolic links are not uploaded; resolve them first",
            ));
        } else if m.is_dir() {
            walk(root, &p, f)?;
        } else if m.is_file() {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
            f(p.clone(), rel, m.permissions().mode() & 0o777);
        }
    }
    Ok(())
}

/// `run-script SCRIPT ARGS...`: the script's bytes and its quoted command line, read and
/// hashed once; [`ScriptJob::job`] turns it into each host's job (only become differs).
///
/// The script goes to a private, content-addressed place in the login user's home
/// (`~/.mgmt-driver/scripts/<sha256 prefix>/`, directories 0700), so re-running the same
/// script skips the upload, and runs there with every argument quoted.
#[derive(Clone, Debug)]
pub struct ScriptJob {
    upload: UploadFile,
    line: String,
}

impl ScriptJob {
    pub async fn new(script: &Path, args: &[String]) -> Result<ScriptJob> {
        let bytes: Arc<[u8]> = std::fs::read(script)
            .map_err(|e| Error::input(script.display().to_string(), "SCRIPT", format!("cannot read: {e}")))?
            .into();
        let name = script
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| Error::input("arguments", "SCRIPT", "has no file name"))?;
        let (sha, _) = crate::ssh::local_digest(&Source::Bytes(bytes.clone()))
            .await
            .map_err(|e| Error::input(script.display().to_string(), "SCRIPT", e.to_string()))?;
        let remote = format!(".mgmt-driver/scripts/{}/{name}", &sha[..16]);
        let mut words = vec![format!("./{remote}")];
        words.extend(args.iter().cloned());
        let line = join(&words)?;
        Ok(ScriptJob { upload: UploadFile { source: Source::Bytes(bytes), remote, mode: 0o700 }, line })
    }

    pub fn job(&self, host: &Host, opts: &CommandOpts) -> Job {
        Job {
            actions: vec![
                Action::Upload(vec![self.upload.clone()]),
                Action::Exec(opts.command(self.line.clone(), host)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn host(user: &str, pw: bool) -> Host {
        Host {
            user: user.into(),
            become_password: pw.then(|| Secret::new("pw")),
            ..Host::for_test("n1", "198.18.0.11")
        }
    }

    #[test]
    fn become_mode_follows_user_and_password() {
        assert_eq!(become_for(&host("root", true), true), Become::No);
        assert_eq!(become_for(&host("ubuntu", true), true), Become::SudoWithPassword);
        assert_eq!(become_for(&host("ubuntu", false), true), Become::SudoNoPassword);
        assert_eq!(become_for(&host("ubuntu", true), false), Become::No);
    }

    #[tokio::test]
    async fn run_script_quotes_every_argument_and_uses_a_private_path() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("hello.sh");
        std::fs::write(&s, "#!/bin/sh\necho hi\n").unwrap();
        let args = vec!["a b".to_string(), "$(reboot)".to_string(), "x;y".to_string()];
        let job = ScriptJob::new(&s, &args).await.unwrap().job(&host("root", false), &CommandOpts::default());
        let Action::Exec(cmd) = &job.actions[1] else { panic!() };
        assert!(cmd.script.starts_with("./.mgmt-driver/scripts/"), "{}", cmd.script);
        assert!(cmd.script.ends_with("/hello.sh 'a b' '$(reboot)' 'x;y'"), "{}", cmd.script);
        let Action::Upload(files) = &job.actions[0] else { panic!() };
        assert_eq!(files[0].mode, 0o700);
    }

    #[test]
    fn dry_run_description_masks_the_sudo_password() {
        let job =
            exec_job(&["id".into()], &host("ubuntu", true), &CommandOpts { become_: true, timeout: None }).unwrap();
        let d = job.actions[0].describe().unwrap();
        assert!(d.contains("sudo -S") && d.contains("********") && !d.contains("pw\n"), "{d}");
    }

    #[test]
    fn get_saves_under_the_host_name_and_needs_a_file_name() {
        let job = get_job("/var/log/syslog", Path::new("out"), &host("root", false)).unwrap();
        let Action::Download { local, .. } = &job.actions[0] else { panic!() };
        assert_eq!(local, Path::new("out/n1/syslog"));
        for bad in ["/var/log/", "..", "/tmp/.."] {
            assert!(get_job(bad, Path::new("out"), &host("root", false)).is_err(), "{bad}");
        }
    }

    #[test]
    fn put_directory_keeps_relative_paths_and_refuses_symlinks() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/c.txt"), "c").unwrap();
        std::fs::write(d.path().join("a/top"), "t").unwrap();
        let job = put_job(&d.path().join("a"), "/srv/x/", None).unwrap();
        let Action::Upload(files) = &job.actions[0] else { panic!() };
        let remotes: Vec<_> = files.iter().map(|f| f.remote.as_str()).collect();
        assert_eq!(remotes, vec!["/srv/x/b/c.txt", "/srv/x/top"]);
        // Unusable destinations fail before any connection (bad input, exit 2).
        let file = d.path().join("a/top");
        for bad in ["", "/srv/x\ny"] {
            let e = put_job(&file, bad, None).unwrap_err();
            assert_eq!(e.kind(), "input", "{bad:?}");
        }
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("a/link")).unwrap();
        assert!(put_job(&d.path().join("a"), "/srv/x", None).is_err());
    }
}
