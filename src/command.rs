//! Building the exact string a node's shell receives. Pure: unit-tested without SSH.
//!
//! Every command runs inside the node-side program `leash.sh` (`src/remote/leash.sh`), which
//! gives three guarantees:
//! - **a process group and a deadline**: the command runs under coreutils `timeout`, which makes
//!   itself a process-group leader and, on expiry or on TERM, signals the whole group (TERM,
//!   then KILL after [`KILL_AFTER`]). So a timed-out command leaves nothing running on the
//!   node — unlike Tacker, whose remote process kept running and was then started a second time.
//!   Without a timeout the duration is 0 (no limit); the group and the TERM-then-KILL remain.
//! - **a leash**: the session's stdin stays open for the command's whole life (see
//!   `ssh/exec.rs`). When the controller goes away (killed by any signal, link reset, session
//!   closed), sshd closes the session's pipes, the leash reads end-of-file and TERMs the group.
//! - **become**: `sudo -S` reads the password from the first stdin line, never from argv, so it
//!   does not show in the node's process list. The leash hands exactly that line to sudo and
//!   gives the command `/dev/null` as stdin, so the password cannot reach the command even where
//!   sudo does not ask for it (NOPASSWD). The leash itself stays with the login user.

use std::time::Duration;

use crate::error::Result;
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

/// A file the leash receives on stdin before it starts the command
/// ([`RemoteCommand::wire_receiving`]): `size` bytes with this sha256, put at `remote` through
/// `tmp` with `mode`, as an inline upload does (`receive` in `src/remote/upload_lib.sh`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receive {
    pub remote: String,
    pub tmp: String,
    pub sha256: String,
    pub mode: u32,
    pub size: u64,
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

    /// The exact string sent in the SSH `exec` request: [`leash.sh`](crate::remote) with the
    /// kill grace, the duration (0: none), how to become root, and the script, all quoted.
    pub fn wire(&self) -> Result<String> {
        crate::remote::LEASH.command(&self.leash_args())
    }

    /// The same command, receiving `file` on stdin first (after the sudo password line): one
    /// exec puts a file in place and runs the command, one round trip where an upload and an
    /// exec take two. The first stdout line is then the leash's `skipped` or `written`, not the
    /// command's.
    pub fn wire_receiving(&self, file: &Receive) -> Result<String> {
        let mut args = self.leash_args();
        args.extend([
            file.remote.clone(),
            file.tmp.clone(),
            file.sha256.clone(),
            format!("{:o}", file.mode),
            file.size.to_string(),
        ]);
        crate::remote::LEASH_RECEIVING.command(&args)
    }

    fn leash_args(&self) -> Vec<String> {
        let become_ = match self.become_ {
            Become::No => "none",
            Become::SudoNoPassword => "sudo",
            Become::SudoWithPassword => "sudo-password",
        };
        let limit = self.timeout.map(limit_secs).unwrap_or_else(|| "0".into());
        vec![secs(KILL_AFTER), limit, become_.into(), self.script.clone()]
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

/// A time limit for `timeout(1)`: never `0`, which would mean no limit at all.
fn limit_secs(d: Duration) -> String {
    secs(d.max(Duration::from_millis(1)))
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
    use std::io::{Read, Write};
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    fn leash(limit: &str, become_: &str, script: &str) -> String {
        crate::remote::LEASH.command(&["3", limit, become_, script]).unwrap()
    }

    /// Start the wire string under a real local `sh`, its stdin a pipe we hold (the leash).
    fn spawn(c: &RemoteCommand) -> Child {
        Command::new("sh")
            .arg("-c")
            .arg(c.wire().unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Wait at most `within` for the child; its exit code (128+N for signal N, as sshd would
    /// report it), or a failure naming what hung.
    fn exit_within(child: &mut Child, within: Duration, what: &str) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        let start = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st.code().or(st.signal().map(|s| 128 + s));
            }
            if start.elapsed() > within {
                let _ = child.kill();
                panic!("{what}: still running after {within:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn running(marker: &str) -> String {
        let o = Command::new("pgrep").arg("-f").arg(marker).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Poll until nothing with `marker` in its command line runs (a few seconds at most).
    fn gone(marker: &str) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if running(marker).is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn marker(name: &str) -> String {
        format!("mgmtd-{name}-{}-{}", std::process::id(), fastrand::u32(..))
    }

    #[test]
    fn every_command_is_sent_inside_the_leash() {
        assert_eq!(RemoteCommand::new("echo hi").wire().unwrap(), leash("0", "none", "echo hi"));
        assert!(leash("0", "none", "echo hi").ends_with(" leash.sh 3 0 none 'echo hi'"));
    }

    #[test]
    fn timeout_wraps_with_group_kill() {
        let c = RemoteCommand::new("sleep 5; echo 'x'").with_timeout(Some(Duration::from_millis(1500)));
        assert_eq!(c.wire().unwrap(), leash("1.500", "none", "sleep 5; echo 'x'"));
        // A limit that rounds to nothing must not become `0`, which means "no limit".
        let tiny = RemoteCommand::new("true").with_timeout(Some(Duration::from_micros(10)));
        assert_eq!(tiny.wire().unwrap(), leash("0.001", "none", "true"));
    }

    #[test]
    fn timeout_really_kills_the_group_locally() {
        // Run the wire string through a real sh: a background child must die with the command.
        let marker = marker("timeout");
        let c = RemoteCommand::new(format!("sh -c 'sleep 30; : {marker}' & sleep 30"))
            .with_timeout(Some(Duration::from_millis(300)));
        let start = Instant::now();
        let mut child = spawn(&c);
        let code = exit_within(&mut child, Duration::from_secs(5), "a timed-out command");
        assert_eq!(code, Some(124));
        assert!(c.timed_out(Some(124), start.elapsed()));
        assert!(gone(&marker), "left behind: {}", running(&marker));
    }

    #[test]
    fn closing_stdin_kills_the_whole_group() {
        // The controller going away closes the session's stdin: a background grandchild started
        // by the command must die too, although the command has no time limit.
        let marker = marker("leash");
        let c = RemoteCommand::new(format!("sh -c 'sleep 30; : {marker}' & sleep 31; : {marker}"));
        let mut child = spawn(&c);
        let start = Instant::now();
        while running(&marker).lines().count() < 2 {
            assert!(start.elapsed() < Duration::from_secs(5), "the command never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(child.stdin.take());
        let code = exit_within(&mut child, Duration::from_secs(5), "a command whose leash was cut");
        assert_eq!(code, Some(128 + 15), "TERM ends it");
        assert!(gone(&marker), "left behind: {}", running(&marker));
    }

    #[test]
    fn a_finished_command_does_not_wait_for_the_leash_and_passes_everything_through() {
        let c = RemoteCommand::new("read x; echo \"out [$x]\"; echo err >&2; exit 7");
        let mut child = spawn(&c);
        // stdin stays open (we hold it) and carries a line the command must not see.
        child.stdin.as_mut().unwrap().write_all(b"not-for-the-command\n").unwrap();
        let code = exit_within(&mut child, Duration::from_secs(5), "a finished command");
        assert_eq!(code, Some(7));
        let (mut out, mut err) = (String::new(), String::new());
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert_eq!(out, "out []\n");
        assert_eq!(err, "err\n");
    }

    #[test]
    fn a_command_ended_by_a_signal_ends_the_leash_by_that_signal() {
        use std::os::unix::process::ExitStatusExt;
        // sshd's child is the leash itself (the login shell execs a lone command): `exec` here.
        let wire = RemoteCommand::new("kill -9 $$").wire().unwrap();
        let mut child = Command::new("sh").arg("-c").arg(format!("exec {wire}")).stdin(Stdio::piped()).spawn().unwrap();
        exit_within(&mut child, Duration::from_secs(5), "kill -9");
        let st = child.wait().unwrap();
        assert_eq!((st.code(), st.signal()), (None, Some(9)));
        let mut child = spawn(&RemoteCommand::new("exit 3"));
        assert_eq!(exit_within(&mut child, Duration::from_secs(5), "exit 3"), Some(3));
    }

    /// A file for [`RemoteCommand::wire_receiving`] at `remote` (relative: under the test's
    /// working directory, as under a login user's home).
    fn receive(remote: &str, content: &[u8]) -> Receive {
        use sha2::Digest;
        Receive {
            remote: remote.into(),
            tmp: format!("{remote}.mgmtd-0123456789abcdef"),
            sha256: hex::encode(sha2::Sha256::digest(content)),
            mode: 0o700,
            size: content.len() as u64,
        }
    }

    /// Start `c` receiving `file` under a real local `sh` in `dir`, stdin a pipe we hold.
    fn spawn_receiving(c: &RemoteCommand, file: &Receive, dir: &std::path::Path) -> Child {
        Command::new("sh")
            .arg("-c")
            .arg(c.wire_receiving(file).unwrap())
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn stdout_of(child: &mut Child) -> String {
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn a_received_file_is_in_place_before_the_command_runs_and_skipped_when_it_is_there() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let content = b"#!/bin/sh\necho \"ran $1\"\n";
        let file = receive(".md/scripts/0123/job.sh", content);
        let c = RemoteCommand::new("./.md/scripts/0123/job.sh 'a b'; read x; echo \"[$x]\"");
        for verdict in ["written", "skipped"] {
            let mut child = spawn_receiving(&c, &file, d.path());
            // The content, then a line that stays on the leash (the command must not see it),
            // and stdin held open: the command must not wait for its end.
            let stdin = child.stdin.as_mut().unwrap();
            stdin.write_all(content).unwrap();
            stdin.write_all(b"leash-only\n").unwrap();
            assert_eq!(exit_within(&mut child, Duration::from_secs(5), "run-script's one exec"), Some(0));
            assert_eq!(stdout_of(&mut child), format!("{verdict}\nran a b\n[]\n"));
            let path = d.path().join(&file.remote);
            assert_eq!(std::fs::read(&path).unwrap(), content);
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
            let dir = std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode();
            assert_eq!(dir & 0o777, 0o700, "private directories in the home");
        }
    }

    #[test]
    fn a_file_cut_short_is_not_put_in_place_and_the_command_does_not_run() {
        let d = tempfile::tempdir().unwrap();
        let content = b"#!/bin/sh\necho hi\n";
        let file = receive("job.sh", content);
        let mut child = spawn_receiving(&RemoteCommand::new("touch ran"), &file, d.path());
        child.stdin.as_mut().unwrap().write_all(&content[..5]).unwrap();
        drop(child.stdin.take());
        assert_eq!(exit_within(&mut child, Duration::from_secs(5), "a cut-short file"), Some(1));
        assert_eq!(stdout_of(&mut child), "", "no verdict line");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "nothing in place, no temporary file, the command never ran: {left:?}");
    }

    #[test]
    fn after_receiving_closing_stdin_still_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let marker = marker("receiving");
        let content = format!("#!/bin/sh\nsh -c 'sleep 30; : {marker}' & sleep 31; : {marker}\n");
        let file = receive("job.sh", content.as_bytes());
        let c = RemoteCommand::new("./job.sh").with_timeout(Some(Duration::from_secs(3600)));
        let mut child = spawn_receiving(&c, &file, d.path());
        child.stdin.as_mut().unwrap().write_all(content.as_bytes()).unwrap();
        let start = Instant::now();
        // The marker is in the script's text only: in the command line of its background child.
        while running(&marker).is_empty() {
            assert!(start.elapsed() < Duration::from_secs(5), "the command never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(child.stdin.take());
        let code = exit_within(&mut child, Duration::from_secs(5), "a received script whose leash was cut");
        assert_eq!(code, Some(128 + 15), "TERM ends it");
        assert!(gone(&marker), "left behind: {}", running(&marker));
    }

    #[test]
    fn receiving_with_a_sudo_password_the_line_reaches_sudo_only() {
        let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
        if !root || Command::new("sudo").arg("-n").arg("true").status().map(|s| !s.success()).unwrap_or(true) {
            eprintln!("skipped: needs root and sudo");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let content = b"#!/bin/sh\ncat; id -u\n";
        let file = receive("job.sh", content);
        let c = RemoteCommand::new("./job.sh").with_become(Become::SudoWithPassword);
        let mut child = spawn_receiving(&c, &file, d.path());
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"pw-line\n").unwrap();
        stdin.write_all(content).unwrap();
        assert_eq!(exit_within(&mut child, Duration::from_secs(5), "sudo"), Some(0));
        assert_eq!(stdout_of(&mut child), "written\n0\n");
        assert_eq!(std::fs::read(d.path().join("job.sh")).unwrap(), content, "the password is not in the file");
    }

    #[test]
    fn become_never_puts_a_password_in_the_command() {
        let c = RemoteCommand::new("id -u").with_become(Become::SudoWithPassword);
        assert_eq!(c.wire().unwrap(), leash("0", "sudo-password", "id -u"));
        let n = RemoteCommand::new("id -u").with_become(Become::SudoNoPassword).wire().unwrap();
        assert_eq!(n, leash("0", "sudo", "id -u"));
    }

    #[test]
    fn the_sudo_password_line_reaches_sudo_only() {
        // As root sudo asks for no password, like NOPASSWD: the line must still not reach the
        // command. Needs root and sudo (the lab tests cover a real password).
        let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
        if !root || Command::new("sudo").arg("-n").arg("true").status().map(|s| !s.success()).unwrap_or(true) {
            eprintln!("skipped: needs root and sudo");
            return;
        }
        let c = RemoteCommand::new("cat; id -u").with_become(Become::SudoWithPassword);
        let mut child = spawn(&c);
        child.stdin.as_mut().unwrap().write_all(b"pw-line\n").unwrap();
        assert_eq!(exit_within(&mut child, Duration::from_secs(5), "sudo"), Some(0));
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, "0\n");
        // sudo -n: no password line at all; the command still runs as root, stdin /dev/null.
        let mut child = spawn(&RemoteCommand::new("cat; id -u").with_become(Become::SudoNoPassword));
        child.stdin.as_mut().unwrap().write_all(b"leash-only\n").unwrap();
        assert_eq!(exit_within(&mut child, Duration::from_secs(5), "sudo -n"), Some(0));
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, "0\n");
    }

    #[test]
    fn a_remote_program_is_shown_by_its_label_and_sent_whole() {
        let script = "sh -c '#!/bin/sh\necho \"$1\"' say.sh 'a b'";
        let c = RemoteCommand::new(script).with_timeout(Some(Duration::from_secs(5)));
        assert_eq!(c.display(), "say.sh 'a b'");
        assert_eq!(c.wire().unwrap(), leash("5", "none", script));
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
