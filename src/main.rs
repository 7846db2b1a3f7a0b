use std::time::Duration;

use clap::Parser;
use mgmt_driver::cli::envelope::{Envelope, ErrorItem};
use mgmt_driver::cli::{main as cli_main, parse_error, Cli, Command};
use mgmt_driver::error::{exit, printable};
use mgmt_driver::event::LEDGER;
use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Only to find `-o json`: the command line itself was parsed from the raw OS strings.
            let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
            std::process::exit(parse_error(&e, &args));
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MGMT_DRIVER_LOG"))
        .init();
    let (operation, output, dry_run) = (operation(&cli.command), cli.output, cli.run.dry_run);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(async {
        let signals = (
            signal(SignalKind::interrupt()).expect("SIGINT handler"),
            signal(SignalKind::terminate()).expect("SIGTERM handler"),
        );
        tokio::select! {
            code = cli_main(cli) => code,
            (name, code, signals) = first_signal(signals) => {
                // A second signal ends the process at once.
                tokio::spawn(async move {
                    let _ = first_signal(signals).await;
                    std::process::exit(code);
                });
                mgmt_driver::cli::fanout::hide_progress();
                report_interruption(name, &operation, dry_run).print(output);
                code
            }
        }
    });
    // Leaving `block_on` dropped the operation and with it every SSH connection; the process's
    // exit closes their sockets. Each node's sshd then closes the sessions' stdin, and the leash
    // of every command still running there kills its process group (src/remote/leash.sh): the
    // same as when this process is killed outright. No polite close is awaited.
    rt.shutdown_timeout(Duration::from_millis(100));
    std::process::exit(code);
}

/// Wait for SIGINT or SIGTERM: its name, the exit code it means, and the handlers back.
async fn first_signal(mut s: (Signal, Signal)) -> (&'static str, i32, (Signal, Signal)) {
    let (name, code) = tokio::select! {
        _ = s.0.recv() => ("SIGINT", exit::INTERRUPTED),
        _ = s.1.recv() => ("SIGTERM", exit::TERMINATED),
    };
    (name, code, s)
}

/// Tell the operator what was cut off (stderr), and return the result document for the caller
/// (`-o json|yaml` on stdout).
fn report_interruption(signal: &str, operation: &str, dry_run: bool) -> Envelope {
    let r = LEDGER.interruption();
    let mut text = vec![format!(
        "interrupted by {signal}: the connections close and each node stops the command this run started there; \
         re-running is safe for idempotent steps (the hooks resume from their saved state)"
    )];
    text.extend(r.lines());
    eprintln!("{}", text.join("\n"));
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

/// The operation's name as its result document names it.
fn operation(c: &Command) -> String {
    match c {
        Command::Exec(_) => "exec",
        Command::Put(_) => "put",
        Command::Get(_) => "get",
        Command::RunScript(_) => "run-script",
        Command::InstantiateEnd(_) => "instantiate_end",
        Command::HealStart(_) => "heal_start",
        Command::HealEnd(_) => "heal_end",
        Command::ScaleStart(_) => "scale_start",
        Command::ScaleEnd(_) => "scale_end",
        Command::TerminateEnd(_) => "terminate_end",
        Command::Cnf { op, .. } => op.name(),
        Command::Version => "version",
        Command::Completion { .. } => "completion",
    }
    .to_string()
}
