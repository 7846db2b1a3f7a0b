//! What an interrupted run tells the operator: which nodes finished, failed, were cut off in a
//! command (and which), were between steps, or never started, from the event ledger. `main.rs`
//! catches SIGINT/SIGTERM and calls [`report`]; the leash on each node does the rest
//! (docs/reliability.md).

use serde_json::json;

use crate::cli::envelope::{Envelope, ErrorItem};
use crate::console;
use crate::error::printable;
use crate::event::LEDGER;

/// Tell the operator what was cut off (stderr; the progress bar is taken off the terminal first so
/// it cannot overwrite the report), and return the result document for the caller (`-o json|yaml`
/// on stdout).
pub fn report(signal: &str, operation: &str, dry_run: bool) -> Envelope {
    console::clear_progress();
    let r = LEDGER.interruption();
    let mut text = vec![format!(
        "interrupted by {signal}: the connections close and each node stops the command this run started there; \
         re-running is safe for idempotent steps (the hooks resume from their saved state)"
    )];
    text.extend(r.lines());
    console::err_line(&text.join("\n"));
    let mut env = Envelope::new(operation, dry_run);
    env.ok = false;
    env.errors.push(ErrorItem { kind: "interrupted", message: format!("interrupted by {signal}"), node: None });
    for (host, command) in &r.interrupted {
        let message = format!("{}: interrupted by {signal} while running: {}", printable(host), printable(command));
        env.errors.push(ErrorItem { kind: "interrupted", message, node: Some(host.clone()) });
    }
    env.result = json!({"interrupted": {
        "signal": signal,
        "finished": r.finished,
        "failed": r.failed,
        "interrupted": r.interrupted.iter().map(|(h, c)| json!({"node": h, "command": c})).collect::<Vec<_>>(),
        "idle": r.idle,
        "notStarted": r.not_started,
    }});
    env
}
