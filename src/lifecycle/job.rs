//! Jobs: what to do on one host, as data. Building a job is pure (the fan-out commands build one
//! per host before anything connects); running it is a straight walk over its actions on the
//! runner, which plans or runs them.

use std::path::PathBuf;

use crate::command::RemoteCommand;
use crate::error::Result;
use crate::inventory::Host;
use crate::lifecycle::runner::Runner;
use crate::target::{become_for, Node};
use crate::transport::{ExecOutput, UploadFile};

#[derive(Clone, Debug)]
pub enum Action {
    Upload(Vec<UploadFile>),
    /// Run a command; a non-zero exit fails the host.
    Exec(RemoteCommand),
    /// Upload one file, then run a command that needs it (run-script: its script, then its run),
    /// in one round trip where the transport can.
    UploadAndExec(UploadFile, RemoteCommand),
    /// Fetch a remote file to a local path.
    Download {
        remote: String,
        local: PathBuf,
    },
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

impl Runner {
    /// Run a job's actions in order on one node; the first failure ends it.
    pub async fn run_job(&self, node: &dyn Node, job: &Job) -> Result<JobOutput> {
        let mut out = JobOutput::default();
        for a in &job.actions {
            match a {
                Action::Upload(files) => {
                    for r in self.upload(node, files.clone()).await? {
                        if r.skipped {
                            out.skipped += 1
                        } else {
                            out.uploaded += 1
                        }
                    }
                }
                Action::Exec(cmd) => out.last = Some(self.exec(node, cmd.clone()).await?),
                Action::UploadAndExec(file, cmd) => {
                    let (up, last) = self.upload_and_exec(node, file, cmd.clone()).await?;
                    if up.skipped {
                        out.skipped += 1
                    } else {
                        out.uploaded += 1
                    }
                    out.last = Some(last);
                }
                Action::Download { remote, local } => {
                    self.download(node, remote, local).await?;
                }
            }
        }
        Ok(out)
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::command::Become;
    use crate::secret::Secret;

    /// A test host logging in as `user`, with a sudo password when `pw`.
    pub(crate) fn host(user: &str, pw: bool) -> Host {
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
}
