//! The fan-out commands as jobs: `exec`, `put`, `get` and `run-script` each build one job per
//! host from the command line (pure, before anything connects, so bad input fails for every host
//! at once with exit 2); the runner then fans the jobs out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::inventory::Host;
use crate::lifecycle::job::{Action, CommandOpts, Job};
use crate::quote::join;
use crate::transport::{Source, UploadFile};

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
        crate::transport::check_remote_path(&f.remote)?;
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
    crate::transport::check_not_an_option("REMOTE", remote)?;
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
        let (sha, _) = crate::transport::local_digest(&Source::Bytes(bytes.clone()))
            .await
            .map_err(|e| Error::input(script.display().to_string(), "SCRIPT", e.to_string()))?;
        let remote = format!(".mgmt-driver/scripts/{}/{name}", &sha[..16]);
        let mut words = vec![format!("./{remote}")];
        words.extend(args.iter().cloned());
        let line = join(&words)?;
        Ok(ScriptJob { upload: UploadFile { source: Source::Bytes(bytes), remote, mode: 0o700 }, line })
    }

    /// The script and its run as one action: the transport may do both in one round trip.
    pub fn job(&self, host: &Host, opts: &CommandOpts) -> Job {
        Job { actions: vec![Action::UploadAndExec(self.upload.clone(), opts.command(self.line.clone(), host))] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::job::tests::host;

    #[tokio::test]
    async fn run_script_quotes_every_argument_and_uses_a_private_path() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("hello.sh");
        std::fs::write(&s, "#!/bin/sh\necho hi\n").unwrap();
        let args = vec!["a b".to_string(), "$(reboot)".to_string(), "x;y".to_string()];
        let job = ScriptJob::new(&s, &args).await.unwrap().job(&host("root", false), &CommandOpts::default());
        let [Action::UploadAndExec(file, cmd)] = &job.actions[..] else { panic!("{:?}", job.actions) };
        assert!(cmd.script.starts_with("./.mgmt-driver/scripts/"), "{}", cmd.script);
        assert!(cmd.script.ends_with("/hello.sh 'a b' '$(reboot)' 'x;y'"), "{}", cmd.script);
        assert_eq!(file.mode, 0o700);
    }

    /// run-script puts the script in place and runs it in one round trip per node (an upload
    /// and then an exec took two), every node at once: after the connect, one round trip.
    #[tokio::test(start_paused = true)]
    async fn run_script_is_one_round_trip_per_node() {
        use crate::event::Events;
        use crate::lifecycle::runner::{FanOut, Runner, Timeouts};
        use crate::transport::fake::{Call, FakeConnector};
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("job.sh");
        std::fs::write(&s, "#!/bin/sh\necho hi\n").unwrap();
        let sj = ScriptJob::new(&s, &["x".to_string()]).await.unwrap();
        let f = FakeConnector::new();
        let rtt = std::time::Duration::from_millis(50);
        f.with_latency(rtt);
        let rt = Runner::new(Arc::new(f.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let hosts: Vec<Host> = (1..=3).map(|i| Host::for_test(&format!("n{i}"), &format!("192.0.2.{i}"))).collect();
        let nodes: Vec<&Host> = hosts.iter().collect();
        let start = tokio::time::Instant::now();
        let done = rt
            .each(&nodes, |h| {
                let (rt, job) = (&rt, sj.job(h, &CommandOpts::default()));
                async move { rt.run_job(h, &job).await }
            })
            .await;
        let trips = start.elapsed().as_millis() / rtt.as_millis();
        for (h, r) in &done {
            let out = r.as_ref().unwrap_or_else(|e| panic!("{}: {e}", h.name));
            assert_eq!((out.uploaded, out.skipped), (1, 0));
        }
        assert_eq!(f.most_round_trips_on_one_node(), 1, "{:?}", f.calls());
        assert_eq!(f.round_trips(), 3);
        assert_eq!(trips, 1, "one round trip, every node at once (a connect costs no virtual time)");
        let Some(Call::UploadExec { remote, script, .. }) =
            f.calls().into_iter().find(|c| !matches!(c, Call::Connect { .. }))
        else {
            panic!("{:?}", f.calls())
        };
        assert!(remote.starts_with(".mgmt-driver/scripts/") && remote.ends_with("/job.sh"), "{remote}");
        assert_eq!(script, format!("./{remote} x"));
    }

    #[test]
    fn get_saves_under_the_host_name_and_needs_a_file_name() {
        let job = get_job("/var/log/syslog", Path::new("out"), &host("root", false)).unwrap();
        let Action::Download { local, .. } = &job.actions[0] else { panic!() };
        assert_eq!(local, Path::new("out/n1/syslog"));
        for bad in ["/var/log/", "..", "/tmp/..", "-rf", "--help", "-x/y"] {
            assert!(get_job(bad, Path::new("out"), &host("root", false)).is_err(), "{bad}");
        }
        // Only a leading '-' is an option; later components are plain names.
        for ok in ["/tmp/-x", "./-x", "a/-b"] {
            assert!(get_job(ok, Path::new("out"), &host("root", false)).is_ok(), "{ok}");
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
        for bad in ["", "/srv/x\ny", "-rf", "--target-directory=/etc", "-x/", "-x/y"] {
            let e = put_job(&file, bad, None).unwrap_err();
            assert_eq!(e.kind(), "input", "{bad:?}");
        }
        for ok in ["/tmp/-x", "./-x", "a/-b"] {
            assert!(put_job(&file, ok, None).is_ok(), "{ok}");
        }
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("a/link")).unwrap();
        assert!(put_job(&d.path().join("a"), "/srv/x", None).is_err());
    }
}
