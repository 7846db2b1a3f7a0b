//! Rendering the event stream: progress bars on a terminal, plain prefixed lines otherwise, or
//! JSON lines (`-o json`) for machines. Node output goes to stdout; our own status goes to
//! stderr, so `mgmt-driver exec ... > out.txt` captures exactly what the nodes printed.

use std::io::Write;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::event::{Event, EventKind, EventRx};
use crate::url_mask::mask_userinfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Progress bar on a terminal, plain lines otherwise.
    Auto,
    Plain,
    Progress,
    /// One JSON result document on stdout; events as JSON lines on stderr.
    Json,
    /// One YAML result document on stdout; events as plain lines on stderr.
    Yaml,
}

/// The progress bar on screen, if any, so an interruption can take it away before the report
/// (a bar redrawn after it would overwrite the report's last line).
static ACTIVE_BAR: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

/// Clear the progress bar for good (the run is being interrupted); no-op without one.
pub fn clear_progress() {
    if let Some(b) = ACTIVE_BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish_and_clear();
    }
}

pub struct Renderer {
    mode: Output,
    verbose: bool,
    bar: Option<ProgressBar>,
    /// A dry run: phases are part of the plan on stdout.
    plan: bool,
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
            let b = ProgressBar::with_draw_target(Some(hosts as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} hosts {msg}")
                    .expect("static template"),
            );
            // Keep the clock moving while hosts are silent (a 40-minute install, say).
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            *ACTIVE_BAR.lock().unwrap_or_else(|e| e.into_inner()) = Some(b.clone());
            b
        });
        Renderer { mode, verbose, bar, plan: false }
    }

    /// For lifecycle operations: no progress bar (hosts finish many steps, not one).
    pub fn for_hooks(mode: Output, verbose: bool) -> Self {
        let mode = if matches!(mode, Output::Auto | Output::Progress) { Output::Plain } else { mode };
        Renderer { mode, verbose, bar: None, plan: false }
    }

    /// Render a dry run's plan (phases go to stdout with the steps).
    pub fn plan(mut self, plan: bool) -> Self {
        self.plan = plan;
        self
    }

    /// Consume events until every sender is gone.
    pub async fn run(mut self, mut rx: EventRx) {
        let (mut ok, mut failed) = (0u64, 0u64);
        while let Some(ev) = rx.recv().await {
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
            self.render(&ev);
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
            ACTIVE_BAR.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    fn render(&self, ev: &Event) {
        if self.mode == Output::Json {
            // The result document owns stdout; events go to stderr.
            let line = json_line(ev);
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            return;
        }
        let Some((to_stdout, line)) = self.line(ev) else { return };
        // With -o yaml the document owns stdout.
        let to_stdout = to_stdout && self.mode != Output::Yaml;
        let emit = || {
            if to_stdout {
                let _ = writeln!(std::io::stdout().lock(), "{line}");
            } else {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        };
        match &self.bar {
            Some(b) => b.suspend(emit),
            None => emit(),
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
            EventKind::Warning { message } => (false, format!("{h}: warning: {message}")),
            EventKind::HostKeyRelearned { addr, known_hosts, old, new } => (
                false,
                format!(
                    "{h}: host key re-learned for the rebuilt VM at {addr}: {new} replaces {} in {known_hosts}",
                    old.join(", ")
                ),
            ),
            EventKind::Timeout { command, secs } => (false, format!("{h}: TIMEOUT after {secs:.1}s: {command}")),
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
