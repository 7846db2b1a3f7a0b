//! Building the exact string a node's shell receives. Pure: unit-tested without SSH.
//!
//! Two wrappers matter for safety:
//! - **timeout**: the command runs under coreutils `timeout`, which makes itself a process-group
//!   leader and, on expiry, signals the whole group (TERM, then KILL after a grace period). So a
//!   timed-out command leaves nothing running on the node — unlike Tacker, whose remote process
//!   kept running and was then started a second time.
//! - **become**: `sudo -S` reads the password from the channel's stdin, never from argv, so it
//!   does not show in the node's process list. A tiny shell prelude forwards exactly one line to
//!   sudo and gives the command `/dev/null` as stdin, so the password cannot reach the command
//!   even where sudo does not ask for it (NOPASSWD).

use std::time::Duration;

use crate::error::Result;
use crate::quote::quote;
use crate::redact::Redact;

/// Privilege escalation for one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Become {
    /// Run as the login user.
    No,
    /// `sudo -n`: no password configured; fails at once instead of prompting forever.
    SudoNoPassword,
    /// `sudo -S`: the password is written to stdin as the first line.
    SudoWithPassword,
}

#[derive(Clone, Debug)]
pub struct RemoteCommand {
    /// Shell text run by the node's `sh`. Builders quote every value with [`quote`].
    pub script: String,
    pub timeout: Option<Duration>,
    pub become_: Become,
    /// Keep at most this many bytes of stdout in memory (for parsing); 256 hosts in parallel
    /// must not hold 256 full logs. Output is streamed as events either way.
    pub capture: usize,
    /// What of the streamed output must be masked (the captured copy is kept whole for parsing).
    pub redact: Redact,
    /// A short name for the script in [`display`](Self::display), e.g. `hosts_update.sh '10.0.0.1
    /// master1'` for a program of `src/remote/` (set by [`new`](Self::new) for those).
    pub label: Option<String>,
}

/// Default stdout capture per command: plenty for `kubeadm` or `helm` output to be parsed.
pub const DEFAULT_CAPTURE: usize = 1 << 20;

/// How long `timeout` waits after TERM before it sends KILL to the group.
pub const KILL_AFTER: Duration = Duration::from_secs(3);

impl RemoteCommand {
    pub fn new(script: impl Into<String>) -> Self {
        let script = script.into();
        RemoteCommand {
            label: crate::remote::label(&script).map(str::to_string),
            script,
            timeout: None,
            become_: Become::No,
            capture: DEFAULT_CAPTURE,
            redact: Redact::None,
        }
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn with_timeout(mut self, t: Option<Duration>) -> Self {
        self.timeout = t;
        self
    }

    pub fn with_become(mut self, b: Become) -> Self {
        self.become_ = b;
        self
    }

    pub fn with_redact(mut self, r: Redact) -> Self {
        self.redact = r;
        self
    }

    /// Capture up to `bytes` of stdout (e.g. a large `helm get manifest`).
    pub fn with_capture(mut self, bytes: usize) -> Self {
        self.capture = bytes;
        self
    }

    /// What is shown to people (errors, events, dry-run): the label if there is one, else the
    /// script itself. Neither ever holds a secret, because secrets only ever travel on stdin.
    pub fn display(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.script)
    }

    /// The exact string sent in the SSH `exec` request.
    pub fn wire(&self) -> Result<String> {
        let mut inner = self.script.clone();
        if let Some(t) = self.timeout {
            inner = format!("exec timeout -k {} {} sh -c {}", secs(KILL_AFTER), secs(t), quote(&inner)?);
        }
        Ok(match self.become_ {
            Become::No => inner,
            Become::SudoNoPassword => {
                format!("sudo -n -- sh -c {}", quote(&format!("exec </dev/null; {inner}"))?)
            }
            Become::SudoWithPassword => format!(
                "{{ IFS= read -r p; printf '%s\\n' \"$p\"; }} | sudo -S -k -p '' -- sh -c {}",
                quote(&format!("exec </dev/null; {inner}"))?
            ),
        })
    }

    /// True when an exit status means our `timeout` wrapper fired (124 = TERM worked,
    /// 137 = it had to KILL), judged together with the elapsed time so a command that merely
    /// exits 124 by itself is not misreported.
    pub fn timed_out(&self, code: Option<u32>, elapsed: Duration) -> bool {
        match (self.timeout, code) {
            (Some(t), Some(124 | 137)) => elapsed + Duration::from_millis(50) >= t,
            _ => false,
        }
    }
}

/// Seconds as `timeout(1)` accepts them; fractions allowed.
fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}", ms / 1000)
    } else {
        format!("{:.3}", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn plain_command_is_sent_unchanged() {
        assert_eq!(RemoteCommand::new("echo hi").wire().unwrap(), "echo hi");
    }

    #[test]
    fn timeout_wraps_with_group_kill() {
        let c = RemoteCommand::new("sleep 5; echo 'x'").with_timeout(Some(Duration::from_millis(1500)));
        assert_eq!(c.wire().unwrap(), "exec timeout -k 3 1.500 sh -c 'sleep 5; echo '\\''x'\\'''");
    }

    #[test]
    fn timeout_really_kills_the_group_locally() {
        // Run the wire string through a real sh: a background child must die with the command.
        let marker = format!("mgmtd-test-{}", std::process::id());
        let c = RemoteCommand::new(format!("sh -c 'sleep 30; : {marker}' & sleep 30"))
            .with_timeout(Some(Duration::from_millis(300)));
        let start = std::time::Instant::now();
        let st = Command::new("sh").arg("-c").arg(c.wire().unwrap()).status().unwrap();
        assert_eq!(st.code(), Some(124));
        assert!(c.timed_out(Some(124), start.elapsed()));
        std::thread::sleep(Duration::from_millis(200));
        let left = Command::new("pgrep").arg("-f").arg(&marker).output().unwrap();
        assert!(left.stdout.is_empty(), "left behind: {}", String::from_utf8_lossy(&left.stdout));
    }

    #[test]
    fn become_never_puts_a_password_in_the_command() {
        let c = RemoteCommand::new("id -u").with_become(Become::SudoWithPassword);
        let w = c.wire().unwrap();
        assert!(w.starts_with("{ IFS= read -r p; printf '%s\\n' \"$p\"; } | sudo -S -k -p '' -- sh -c "), "{w}");
        assert!(w.ends_with("'exec </dev/null; id -u'"), "{w}");
        let n = RemoteCommand::new("id -u").with_become(Become::SudoNoPassword).wire().unwrap();
        assert_eq!(n, "sudo -n -- sh -c 'exec </dev/null; id -u'");
    }

    #[test]
    fn a_remote_program_is_shown_by_its_label_and_sent_whole() {
        let script = "sh -c '#!/bin/sh\necho \"$1\"' say.sh 'a b'";
        let c = RemoteCommand::new(script).with_timeout(Some(Duration::from_secs(5)));
        assert_eq!(c.display(), "say.sh 'a b'");
        assert_eq!(c.wire().unwrap(), format!("exec timeout -k 3 5 sh -c {}", quote(script).unwrap()));
        assert_eq!(RemoteCommand::new("echo hi").display(), "echo hi");
        assert_eq!(RemoteCommand::new("echo hi").with_label("greeting").display(), "greeting");
    }

    #[test]
    fn exit_124_without_a_timeout_is_not_a_timeout() {
        let c = RemoteCommand::new("exit 124");
        assert!(!c.timed_out(Some(124), Duration::from_secs(100)));
        let t = RemoteCommand::new("exit 124").with_timeout(Some(Duration::from_secs(10)));
        assert!(!t.timed_out(Some(124), Duration::from_secs(1)));
        assert!(t.timed_out(Some(124), Duration::from_secs(10)));
    }
}
