//! Rendering the event stream: progress bars on a terminal, plain prefixed lines otherwise, or
//! JSON lines (`-o json`) for machines. Node output goes to stdout; our own status goes to
//! stderr, so `mgmt-driver exec ... > out.txt` captures exactly what the nodes printed. The lines
//! reach the terminal through `console.rs`, the one writer.
//!
//! Warnings take one path: an [`EventKind::Warning`], whether a node's (a host key learned, a
//! master that did not answer) or the run's own (`Events::warn`: the operation's warnings). The
//! renderer shows each on stderr in the current output mode and hands them all back when the
//! stream ends, for the result document's `warnings`, so what a person reads and what a machine
//! parses say the same.

use indicatif::{ProgressBar, ProgressStyle};

use crate::console;
use crate::event::{Event, EventKind, EventRx};
use crate::url_mask::mask_userinfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Progress bar on a terminal, plain lines otherwise.
    Auto,
    /// One line per event: `HOST: ...` (node output on stdout, our status on stderr).
    Plain,
    /// A progress bar over the hosts on stderr, with node output and failures above it.
    Progress,
    /// One JSON result document on stdout; events as JSON lines on stderr.
    Json,
    /// One YAML result document on stdout; events as plain lines on stderr.
    Yaml,
}

/// How many warnings a result document lists; past that one line says how many more went to
/// stderr only (a node that floods its output gets one warning per gap, without end).
const MAX_WARNINGS: usize = 100;

pub struct Renderer {
    mode: Output,
    verbose: bool,
    bar: Option<ProgressBar>,
    /// A dry run: phases are part of the plan on stdout.
    plan: bool,
    /// Every warning shown so far, for the result document.
    warnings: Vec<String>,
    /// Warnings shown but not kept (beyond [`MAX_WARNINGS`]).
    unlisted: usize,
}

impl Renderer {
    pub fn new(mode: Output, verbose: bool, hosts: usize) -> Self {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let mode = match mode {
            Output::Auto if tty => Output::Progress,
            Output::Auto => Output::Plain,
            m => m,
        };
        let bar = (mode == Output::Progress).then(|| {
            let b = console::progress_bar(hosts as u64);
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} hosts {msg}")
                    .expect("static template"),
            );
            // Keep the clock moving while hosts are silent (a 40-minute install, say).
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            b
        });
        Renderer { mode, verbose, bar, plan: false, warnings: vec![], unlisted: 0 }
    }

    /// For lifecycle operations: no progress bar (hosts finish many steps, not one).
    pub fn for_hooks(mode: Output, verbose: bool) -> Self {
        let mode = if matches!(mode, Output::Auto | Output::Progress) { Output::Plain } else { mode };
        Renderer { mode, verbose, bar: None, plan: false, warnings: vec![], unlisted: 0 }
    }

    /// Render a dry run's plan (phases go to stdout with the steps).
    pub fn plan(mut self, plan: bool) -> Self {
        self.plan = plan;
        self
    }

    /// Render on a thread of its own (tokio's blocking pool), returning the warnings shown, for
    /// the result document. The runtime is one thread (main.rs): a renderer on it would keep up
    /// with the nodes by slowing them, so a node flooding its output would be printed in full
    /// at the speed of the terminal or pipe, where the event queue is meant to drop what a
    /// lagging renderer cannot take (a 256 MiB flood: 65 s and 92 MiB shown on the runtime's
    /// thread, 6 s and 7 MiB on its own).
    pub fn spawn(self, rx: EventRx) -> tokio::task::JoinHandle<Vec<String>> {
        tokio::task::spawn_blocking(move || self.run(rx))
    }

    /// Consume events until every sender is gone (blocking: see [`spawn`](Self::spawn)).
    fn run(mut self, mut rx: EventRx) -> Vec<String> {
        let (mut ok, mut failed) = (0u64, 0u64);
        while let Some(ev) = rx.blocking_recv() {
            if let EventKind::Done { ok: o, .. } = ev.kind {
                if o {
                    ok += 1
                } else {
                    failed += 1
                }
                if let Some(b) = &self.bar {
                    b.inc(1);
                    b.set_message(if failed > 0 {
                        format!("({ok} ok, {failed} failed)")
                    } else {
                        format!("({ok} ok)")
                    });
                }
            }
            if let EventKind::Warning { message } = &ev.kind {
                self.keep_warning(&ev.host, message);
            }
            self.render(&ev);
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
            console::take_progress_bar();
        }
        self.into_warnings()
    }

    /// The warnings kept, and a last one saying how many more there were.
    fn into_warnings(mut self) -> Vec<String> {
        if self.unlisted > 0 {
            self.warnings.push(format!("{} more warnings, not listed here: see stderr", self.unlisted));
        }
        self.warnings
    }

    /// A warning as the result document lists it: the node first, when it is a node's.
    fn keep_warning(&mut self, host: &str, message: &str) {
        if self.warnings.len() >= MAX_WARNINGS {
            self.unlisted += 1;
            return;
        }
        let w = if host.is_empty() { message.to_string() } else { format!("{host}: {message}") };
        self.warnings.push(mask_userinfo(&w).into_owned());
    }

    fn render(&self, ev: &Event) {
        if self.mode == Output::Json {
            // The result document owns stdout; events go to stderr.
            console::err_line(&json_line(ev));
            return;
        }
        let Some((to_stdout, line)) = self.line(ev) else { return };
        // With -o yaml the document owns stdout.
        if to_stdout && self.mode != Output::Yaml {
            console::out_line(&line);
        } else {
            console::err_line(&line);
        }
    }

    /// An event as a plain line, and whether it belongs on stdout (node output and plans) or
    /// stderr (our own status); None for events this mode does not show.
    fn line(&self, ev: &Event) -> Option<(bool, String)> {
        let h = &ev.host;
        let (to_stdout, line) = match &ev.kind {
            EventKind::Stdout { line } => (true, format!("{h}: {line}")),
            EventKind::Stderr { line } => (true, format!("{h}! {line}")),
            EventKind::Plan { step, action } => {
                let mut lines = action.lines();
                let first = lines.next().unwrap_or("");
                let mut s = format!("{h}: {step}. {first}");
                for l in lines {
                    s.push_str(&format!("\n{h}:    {l}"));
                }
                (true, s)
            }
            EventKind::Phase { name, parallel, nodes } => {
                let how = if nodes.len() < 2 {
                    ""
                } else if *parallel {
                    " (in parallel)"
                } else {
                    " (one after another)"
                };
                (self.plan, format!("== {name}{how}: {}", nodes.join(", ")))
            }
            EventKind::Status { subject, status } => (false, format!("{h}: {subject}: {status}")),
            EventKind::Retry { attempt, delay_ms, error } => (
                false,
                format!(
                    "{h}: not reachable yet (attempt {attempt}: {error}); retrying in {:.1}s",
                    *delay_ms as f64 / 1000.0
                ),
            ),
            // The run's own warnings have no node.
            EventKind::Warning { message } if h.is_empty() => (false, format!("warning: {message}")),
            EventKind::Warning { message } => (false, format!("{h}: warning: {message}")),
            EventKind::HostKeyRelearned { addr, known_hosts, old, new } => (
                false,
                format!(
                    "{h}: host key re-learned for the rebuilt VM at {addr}: {new} replaces {} in {known_hosts}",
                    old.join(", ")
                ),
            ),
            EventKind::Timeout { command, secs } => (false, format!("{h}: TIMEOUT after {secs:.1}s: {command}")),
            // A plan's host is planned, not done: the same word as the result document's status.
            EventKind::Done { ok: true, .. } if self.plan => (false, format!("{h}: planned")),
            EventKind::Done { ok: true, ms, .. } => (false, format!("{h}: ok ({:.2}s)", *ms as f64 / 1000.0)),
            EventKind::Done { ok: false, error, .. } => {
                let e = error.as_deref().unwrap_or("unknown error");
                // Errors name their node already; do not say it twice.
                let e = e.strip_prefix(&format!("{h}: ")).unwrap_or(e);
                (false, format!("{h}: FAILED: {e}"))
            }
            EventKind::Connecting { addr, via } if self.verbose => {
                let via = if via.is_empty() { String::new() } else { format!(" via {}", via.join(" -> ")) };
                (false, format!("{h}: connecting to {addr}{via}"))
            }
            EventKind::Connected { ms } if self.verbose => (false, format!("{h}: connected in {ms} ms")),
            EventKind::RoundTrips { count } if self.verbose => (false, format!("{h}: {count} round trips")),
            EventKind::Command { command } if self.verbose => (false, format!("{h}: $ {command}")),
            EventKind::Exit { code, signal, ms } if self.verbose => (
                false,
                format!(
                    "{h}: exited {} in {ms} ms",
                    code.map(|c| c.to_string()).or(signal.clone()).unwrap_or_default()
                ),
            ),
            EventKind::Uploaded { path, bytes, skipped, via } if self.verbose => (
                false,
                if *skipped {
                    format!("{h}: {path} unchanged, upload skipped")
                } else {
                    format!("{h}: uploaded {path} ({bytes} bytes, {via})")
                },
            ),
            _ => return None,
        };
        // The last stop before a terminal or a log: no URL's userinfo (a password) passes.
        Some((to_stdout, mask_userinfo(&line).into_owned()))
    }
}

/// An event as one JSON line, with the userinfo of every URL in it masked.
fn json_line(ev: &Event) -> String {
    mask_userinfo(&serde_json::to_string(ev).unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Events;

    /// A node's warning and the run's own take one path: shown (on stderr) and handed back for
    /// the result document, the node named, URL passwords masked, a flood bounded.
    #[tokio::test]
    async fn every_warning_is_shown_and_handed_back_for_the_document() {
        let (events, rx) = Events::channel();
        let r = Renderer::for_hooks(Output::Yaml, false).spawn(rx);
        events.warn("additionalParams.x: unknown key, ignored");
        let m1 = events.for_host("m1");
        m1.emit(EventKind::Warning { message: "unreachable, trying the next master: https://u:Pw@x/".into() });
        m1.emit(EventKind::Exit { code: Some(0), signal: None, ms: 1 });
        drop((events, m1));
        let got = r.await.unwrap();
        assert_eq!(
            got,
            [
                "additionalParams.x: unknown key, ignored",
                "m1: unreachable, trying the next master: https://********@x/"
            ]
        );
        let plain = Renderer::new(Output::Plain, false, 1);
        let ev = Event { t_ms: 1, host: "".into(), kind: EventKind::Warning { message: "w".into() } };
        assert_eq!(plain.line(&ev), Some((false, "warning: w".to_string())));

        let mut flood = Renderer::for_hooks(Output::Json, false);
        for i in 0..MAX_WARNINGS + 5 {
            flood.keep_warning("n1", &format!("w{i}"));
        }
        let got = flood.into_warnings();
        assert_eq!(got.len(), MAX_WARNINGS + 1);
        assert_eq!(got[MAX_WARNINGS], "5 more warnings, not listed here: see stderr");
    }

    #[test]
    fn no_url_password_passes_in_any_output_mode() {
        let ev = Event {
            t_ms: 1,
            host: "m1".into(),
            kind: EventKind::Command { command: "helm repo add r https://u:Repo-Pw@charts.example/".into() },
        };
        let (_, plain) = Renderer::new(Output::Plain, true, 1).line(&ev).unwrap();
        assert_eq!(plain, "m1: $ helm repo add r https://********@charts.example/");
        let json = json_line(&ev);
        assert!(json.contains("https://********@charts.example/") && !json.contains("Repo-Pw"), "{json}");
    }
}
