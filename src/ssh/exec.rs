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
use crate::command::{Become, RemoteCommand, KILL_AFTER};
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::redact::Redactor;
use crate::transport::ExecOutput;

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

/// Run `cmd` and stream its output as events.
pub async fn exec(session: &SshSession, cmd: &RemoteCommand, ev: &HostEvents) -> Result<ExecOutput> {
    let (node, grace) = (session.node.as_str(), session.grace);
    let session_err =
        |m: String| Error::Session { node: node.into(), during: format!("command `{}`", cmd.display()), message: m };
    let wire = cmd.wire()?;
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
                if out.stdout.len() < cmd.capture {
                    let room = cmd.capture - out.stdout.len();
                    out.stdout.extend_from_slice(&data[..data.len().min(room)]);
                }
                so.push(&data, &mut push_out);
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
    ev.emit(EventKind::Exit { code: out.code, signal: out.signal.clone(), ms: out.elapsed.as_millis() as u64 });
    // `timeout` that had to KILL the group ends by KILL itself, and the leash ends the same way.
    let killed = out.signal.as_deref() == Some("KILL");
    if cmd.timed_out(out.code.or(killed.then_some(137)), out.elapsed) {
        ev.emit(EventKind::Timeout { command: cmd.display().to_string(), secs: out.elapsed.as_secs_f64() });
        return Err(Error::Timeout { node: node.into(), command: cmd.display().to_string(), elapsed: out.elapsed });
    }
    Ok(out)
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
    fn overlong_lines_are_cut_into_pieces() {
        let big = vec![b'x'; MAX_LINE * 2 + 10];
        let lines = split(&[&big]);
        assert_eq!(lines.iter().map(String::len).collect::<Vec<_>>(), vec![MAX_LINE, MAX_LINE, 10]);
    }
}
