//! Running one command on a channel and reading it to the end.
//!
//! SSH delivers `ExitStatus`, `Eof` and `Close` in whatever order the server likes, and data
//! may still arrive after the exit status. We therefore read until the channel closes (or the
//! stream ends) and only then decide — never at the first EOF or exit status.
//!
//! The channel's stdin is the command's leash (see `command.rs` and `src/remote/leash.sh`): it
//! stays open while the command runs and carries nothing but the sudo password line. If this
//! process dies or the link goes, sshd closes it and the node kills the command's process
//! group. We send EOF ourselves only once the command has exited.

use std::collections::VecDeque;
use std::time::Instant;

use russh::ChannelMsg;

use super::session::SshSession;
use crate::command::{Become, Receive, RemoteCommand, KILL_AFTER};
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::redact::Redactor;
use crate::transport::{ExecOutput, Opened, UploadFile, UploadResult};

/// Lines longer than this are emitted in pieces, so a binary blob cannot grow memory unbounded.
const MAX_LINE: usize = 64 * 1024;
const STDERR_TAIL_LINES: usize = 20;

/// Splits a byte stream into lines as chunks arrive.
#[derive(Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
}

impl LineSplitter {
    pub fn push(&mut self, data: &[u8], mut emit: impl FnMut(String)) {
        self.buf.extend_from_slice(data);
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            emit(String::from_utf8_lossy(&line).into_owned());
        }
        while self.buf.len() >= MAX_LINE {
            let piece: Vec<u8> = self.buf.drain(..MAX_LINE).collect();
            emit(String::from_utf8_lossy(&piece).into_owned());
        }
    }

    pub fn finish(&mut self, mut emit: impl FnMut(String)) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            emit(String::from_utf8_lossy(&rest).into_owned());
        }
    }
}

/// The first stdout line of a command that received a file first (the leash's `skipped` or
/// `written`), split off the command's own output as chunks arrive.
#[derive(Default)]
struct Verdict {
    line: Vec<u8>,
    done: bool,
}

impl Verdict {
    /// The verdict is one short word: a longer first line is kept only this far.
    const MAX: usize = 64;

    /// Take the verdict's bytes from `data`; what is left belongs to the command.
    fn take<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        if self.done {
            return data;
        }
        let (head, rest) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.done = true;
                (&data[..i], &data[i + 1..])
            }
            None => (data, &data[data.len()..]),
        };
        let room = Self::MAX.saturating_sub(self.line.len());
        self.line.extend_from_slice(&head[..head.len().min(room)]);
        rest
    }

    /// `Some(skipped)` once a whole `skipped` or `written` line came; `None` otherwise.
    fn skipped(&self) -> Option<bool> {
        match (self.done, self.line.as_slice()) {
            (true, b"skipped") => Some(true),
            (true, b"written") => Some(false),
            _ => None,
        }
    }
}

/// A file the command receives first, in the same exec (run-script's one round trip).
pub(super) struct Incoming<'a> {
    pub file: &'a UploadFile,
    pub opened: &'a Opened,
    pub receive: Receive,
}

/// Run `cmd` and stream its output as events.
pub async fn exec(session: &SshSession, cmd: &RemoteCommand, ev: &HostEvents) -> Result<ExecOutput> {
    run(session, cmd, None, ev).await.map(|(_, out)| out)
}

/// Run `cmd` receiving `inc` first: the file is in place (or was already) before the command
/// starts, and a file that does not arrive whole is an upload error, the command not run.
pub(super) async fn exec_receiving(
    session: &SshSession,
    cmd: &RemoteCommand,
    inc: Incoming<'_>,
    ev: &HostEvents,
) -> Result<(UploadResult, ExecOutput)> {
    let (skipped, out) = run(session, cmd, Some(&inc), ev).await?;
    let bytes = inc.opened.size;
    match skipped {
        Some(skipped) => Ok((UploadResult { remote: inc.file.remote.clone(), bytes, skipped }, out)),
        None => Err(Error::Transfer {
            node: session.node.clone(),
            what: inc.file.remote.clone(),
            message: format!("{}: {}", super::transfer::status(out.code), out.stderr_tail),
        }),
    }
}

async fn run(
    session: &SshSession,
    cmd: &RemoteCommand,
    inc: Option<&Incoming<'_>>,
    ev: &HostEvents,
) -> Result<(Option<bool>, ExecOutput)> {
    let (node, grace) = (session.node.as_str(), session.grace);
    let session_err =
        |m: String| Error::Session { node: node.into(), during: format!("command `{}`", cmd.display()), message: m };
    let wire = match inc {
        Some(inc) => cmd.wire_receiving(&inc.receive)?,
        None => cmd.wire()?,
    };
    ev.emit(EventKind::Command { command: cmd.display().to_string() });
    let started = Instant::now();
    let mut ch = session.channel().await.map_err(|e| session_err(format!("cannot open channel: {e}")))?;
    ch.exec(true, wire.into_bytes()).await.map_err(|e| session_err(e.to_string()))?;
    if cmd.become_ == Become::SudoWithPassword {
        let pw = session
            .become_password
            .as_ref()
            .ok_or_else(|| Error::input("inventory", "become_password", "needed for --become but not set"))?;
        ch.data_bytes(format!("{}\n", pw.expose()).into_bytes()).await.map_err(|e| session_err(e.to_string()))?;
    }
    // The file goes after the password line, and the leash stays open after it.
    let mut verdict = inc.map(|_| Verdict::default());
    if let Some(inc) = inc {
        super::transfer::send_content(&ch, &inc.file.source, inc.opened, &inc.file.remote, session.stall)
            .await
            .map_err(|m| Error::Transfer { node: node.into(), what: inc.file.remote.clone(), message: m })?;
    }

    // Local deadline: the remote `timeout` should fire first; this catches a dead link.
    let deadline = cmd.timeout.map(|t| started + t + KILL_AFTER + grace);
    let mut out = ExecOutput::default();
    let (mut so, mut se) = (LineSplitter::default(), LineSplitter::default());
    let (mut ro, mut re) = (Redactor::new(cmd.redact), Redactor::new(cmd.redact.for_stderr()));
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut push_out = |line: String| {
        if let Some(line) = ro.line(&line) {
            ev.emit(EventKind::Stdout { line });
        }
    };
    let mut push_err = |line: String, tail: &mut VecDeque<String>| {
        let Some(line) = re.line(&line) else { return };
        ev.emit(EventKind::Stderr { line: line.clone() });
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    };
    let mut request_refused = false;
    loop {
        let msg = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), ch.wait()).await {
                Ok(m) => m,
                Err(_) => {
                    let _ = ch.close().await;
                    let elapsed = started.elapsed();
                    ev.emit(EventKind::Timeout { command: cmd.display().to_string(), secs: elapsed.as_secs_f64() });
                    return Err(Error::Timeout { node: node.into(), command: cmd.display().to_string(), elapsed });
                }
            },
            None => ch.wait().await,
        };
        match msg {
            None | Some(ChannelMsg::Close) => break,
            Some(ChannelMsg::Data { data }) => {
                let data = match (&mut verdict, inc) {
                    (Some(v), Some(inc)) if !v.done => {
                        let rest = v.take(&data);
                        if let Some(skipped) = v.skipped() {
                            let (path, bytes) = (inc.file.remote.clone(), inc.opened.size);
                            let via = if skipped { "none" } else { "exec" };
                            ev.emit(EventKind::Uploaded { path, bytes, skipped, via });
                        }
                        rest
                    }
                    _ => &data[..],
                };
                if out.stdout.len() < cmd.capture {
                    let room = cmd.capture - out.stdout.len();
                    out.stdout.extend_from_slice(&data[..data.len().min(room)]);
                }
                so.push(data, &mut push_out);
            }
            Some(ChannelMsg::ExtendedData { data, .. }) => se.push(&data, |l| push_err(l, &mut tail)),
            Some(ChannelMsg::ExitStatus { exit_status }) => {
                out.code = Some(exit_status);
                // The command is over: let go of the leash (the node has stopped reading it).
                let _ = ch.eof().await;
            }
            Some(ChannelMsg::ExitSignal { signal_name, .. }) => {
                out.signal = Some(format!("{signal_name:?}"));
                let _ = ch.eof().await;
            }
            Some(ChannelMsg::Failure) => request_refused = true,
            Some(_) => {}
        }
    }
    so.finish(&mut push_out);
    se.finish(|l| push_err(l, &mut tail));
    out.elapsed = started.elapsed();
    out.stderr_tail = tail.into_iter().collect::<Vec<_>>().join("\n");
    if request_refused && out.code.is_none() {
        return Err(session_err("the server refused the exec request".into()));
    }
    let skipped = verdict.as_ref().and_then(Verdict::skipped);
    if verdict.is_some() && skipped.is_none() {
        // The file did not arrive: the command never ran, and this is not its exit.
        return Ok((None, out));
    }
    ev.emit(EventKind::Exit { code: out.code, signal: out.signal.clone(), ms: out.elapsed.as_millis() as u64 });
    // `timeout` that had to KILL the group ends by KILL itself, and the leash ends the same way.
    let killed = out.signal.as_deref() == Some("KILL");
    if cmd.timed_out(out.code.or(killed.then_some(137)), out.elapsed) {
        ev.emit(EventKind::Timeout { command: cmd.display().to_string(), secs: out.elapsed.as_secs_f64() });
        return Err(Error::Timeout { node: node.into(), command: cmd.display().to_string(), elapsed: out.elapsed });
    }
    Ok((skipped, out))
}

impl SshSession {
    /// Run an internal command (a probe, a finalizer) whose output is data, not news.
    pub(super) async fn exec_quiet(&self, cmd: &RemoteCommand) -> Result<ExecOutput> {
        exec(self, cmd, &self.quiet).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::default();
        let mut lines = Vec::new();
        for c in chunks {
            s.push(c, |l| lines.push(l));
        }
        s.finish(|l| lines.push(l));
        lines
    }

    #[test]
    fn lines_across_chunks_and_a_final_partial_line() {
        assert_eq!(split(&[b"he", b"llo\nwor", b"ld\r\n", b"tail"]), vec!["hello", "world", "tail"]);
        assert_eq!(split(&[b"\n\n"]), vec!["", ""]);
        assert!(split(&[]).is_empty());
    }

    #[test]
    fn the_verdict_line_is_split_off_the_commands_output_across_chunks() {
        let mut v = Verdict::default();
        assert_eq!(v.take(b"writ"), b"");
        assert_eq!(v.skipped(), None);
        assert_eq!(v.take(b"ten\nran 1\n"), b"ran 1\n");
        assert_eq!(v.skipped(), Some(false));
        assert_eq!(v.take(b"skipped\n"), b"skipped\n", "later lines are the command's");
        let mut v = Verdict::default();
        assert_eq!((v.take(b"skipped\n"), v.skipped()), (&b""[..], Some(true)));
        // An upload that failed prints no verdict: whatever came first is not one.
        for bad in [&b"checksum mismatch\n"[..], b"written", b""] {
            let mut v = Verdict::default();
            v.take(bad);
            assert_eq!(v.skipped(), None, "{}", String::from_utf8_lossy(bad));
        }
        let mut v = Verdict::default();
        v.take(&[b'x'; 1000]);
        assert!(v.line.len() <= Verdict::MAX);
    }

    #[test]
    fn overlong_lines_are_cut_into_pieces() {
        let big = vec![b'x'; MAX_LINE * 2 + 10];
        let lines = split(&[&big]);
        assert_eq!(lines.iter().map(String::len).collect::<Vec<_>>(), vec![MAX_LINE, MAX_LINE, 10]);
    }
}
