//! The process's stdout and stderr. Every byte the program writes passes here: the renderer's
//! event lines, the result documents, tables, keys, completions, the log. The lints
//! `clippy::print_stdout` and `clippy::print_stderr` (Cargo.toml) keep it that way, for two
//! reasons that only hold if there is one door:
//!
//! - A progress bar on the terminal must be lifted while a line is written, or its next redraw
//!   overwrites the line. Whoever writes, the bar is suspended here.
//! - A reader that goes away (`mgmt-driver completion bash | head -1`, `... -o json | true`)
//!   closes the pipe. Rust ignores SIGPIPE, so the write fails with `BrokenPipe`, and
//!   `println!` turns that into a panic: exit 101 and a backtrace. Here the stream is marked
//!   closed instead, later writes to it are dropped without a word, and the process exits with
//!   the code of what it did. Nothing on the nodes is cut short because nobody reads the output
//!   any more: that was already so for the event lines, and a VNFM hook that changed a cluster
//!   must still record it. (docs/architecture.md, "Errors and exit codes".)
//!
//! Any other write error on stdout (a full disk behind `> file`) is said once on stderr; the
//! stream is then dropped the same way. Errors on stderr itself have nowhere to go.

use std::fmt::Display;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget};

/// Which of the process's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// Set once a write to that stream failed: its reader is gone (or it cannot be written).
static OUT_CLOSED: AtomicBool = AtomicBool::new(false);
static ERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// The progress bar on screen, if any. Writes lift it; an interruption takes it away before its
/// report (a bar redrawn after the report would overwrite the report's last line).
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Node output, tables, a public key, a manifest: exactly `text`, on stdout.
pub fn out(text: &str) {
    write(Stream::Out, text.as_bytes());
}

/// One line on stdout.
pub fn out_line(line: &str) {
    write(Stream::Out, format!("{line}\n").as_bytes());
}

/// One line on stderr: our own status, never data.
pub fn err_line(line: &str) {
    write(Stream::Err, format!("{line}\n").as_bytes());
}

/// `error: MESSAGE` on stderr, as every command reports a failure for a human (the result
/// document, when asked for, carries it for machines).
pub fn error(e: &dyn Display) {
    err_line(&format!("error: {e}"));
}

/// A message clap composed (`--help`, `--version`, a refused command line). clap writes it
/// itself, to stdout or stderr as the message requires, with colour on a terminal; its write
/// errors come back as a value, so a closed pipe ends quietly here too.
pub fn clap_message(e: &clap::Error) {
    let _ = e.print();
}

/// A progress bar of `len` steps drawn on stderr, shown until [`take_progress_bar`] or
/// [`clear_progress`]; lines written meanwhile lift it.
pub fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    *lock_bar() = Some(bar.clone());
    bar
}

/// The bar's owner is done with it (it clears it itself).
pub fn take_progress_bar() -> Option<ProgressBar> {
    lock_bar().take()
}

/// Clear the progress bar for good (the run is being interrupted); no-op without one.
pub fn clear_progress() {
    if let Some(b) = take_progress_bar() {
        b.finish_and_clear();
    }
}

/// A writer for the log (`tracing`): each write goes to stderr through [`write`], so log lines
/// lift the progress bar and stop quietly when stderr is gone.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write(Stream::Err, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lock_bar() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    BAR.lock().unwrap_or_else(|e| e.into_inner())
}

fn closed(s: Stream) -> &'static AtomicBool {
    match s {
        Stream::Out => &OUT_CLOSED,
        Stream::Err => &ERR_CLOSED,
    }
}

/// The one place that writes. The bar's lock is held for the write, so lines from the renderer
/// and the final document never interleave inside a line.
fn write(s: Stream, bytes: &[u8]) {
    if closed(s).load(Ordering::Acquire) {
        return;
    }
    let bar = lock_bar();
    let put = || -> std::io::Result<()> {
        match s {
            Stream::Out => {
                let mut o = std::io::stdout().lock();
                o.write_all(bytes)?;
                o.flush()
            }
            Stream::Err => {
                let mut e = std::io::stderr().lock();
                e.write_all(bytes)?;
                e.flush()
            }
        }
    };
    let r = match bar.as_ref() {
        Some(b) => b.suspend(put),
        None => put(),
    };
    drop(bar);
    if let Some(say) = r.err().and_then(|e| failed(closed(s), s, &e)) {
        err_line(&say);
    }
}

/// A write to `s` failed: `flag` marks it closed from now on. What to tell the operator, if
/// anything: nothing for a reader that went away (the convention of every pipeline), nor twice,
/// nor about stderr itself.
fn failed(flag: &AtomicBool, s: Stream, e: &std::io::Error) -> Option<String> {
    let first = !flag.swap(true, Ordering::AcqRel);
    (first && s == Stream::Out && e.kind() != ErrorKind::BrokenPipe)
        .then(|| format!("error: cannot write to stdout: {e}; the rest of the output is dropped"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for p in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The `print!` family is the lints' to catch (Cargo.toml); the standard streams' handles
    /// are this test's: only this file writes through them (asking whether stderr is a terminal
    /// is not writing).
    #[test]
    fn only_the_console_writes_to_the_standard_streams() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        for f in files.iter().filter(|f| !f.ends_with("console.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            for (i, line) in text.lines().enumerate() {
                let writes = ["io::stdout()", "io::stderr()", "DrawTarget::stderr", "DrawTarget::stdout"]
                    .iter()
                    .any(|h| line.contains(h));
                assert!(
                    !writes || line.contains("is_terminal"),
                    "{}:{}: write through src/console.rs: {line}",
                    f.display(),
                    i + 1
                );
            }
        }
    }

    #[test]
    fn a_reader_that_went_away_ends_the_stream_quietly() {
        use super::{failed, Stream};
        use std::io::{Error, ErrorKind};
        use std::sync::atomic::AtomicBool;
        let flag = AtomicBool::new(false);
        assert_eq!(failed(&flag, Stream::Out, &Error::from(ErrorKind::BrokenPipe)), None);
        assert!(flag.load(std::sync::atomic::Ordering::Acquire), "later writes are dropped");
        let full = AtomicBool::new(false);
        let said = failed(&full, Stream::Out, &Error::other("No space left on device"));
        assert!(said.is_some_and(|m| m.contains("cannot write to stdout: No space left")));
        assert_eq!(failed(&full, Stream::Out, &Error::other("again")), None, "said once");
        assert_eq!(failed(&AtomicBool::new(false), Stream::Err, &Error::other("x")), None);
    }
}
