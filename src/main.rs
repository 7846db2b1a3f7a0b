//! The process's edge: parse the command line, set up the log and the runtime, run the command,
//! catch SIGINT/SIGTERM, exit with the code. Everything written goes through
//! `mgmt_driver::console` (a closed pipe ends quietly there, with the run's own exit code).

use std::time::Duration;

use clap::FromArgMatches;
use mgmt_driver::cli::{help, interrupt, main as cli_main, parse_error, vnfm_hook, Cli};
use mgmt_driver::console;
use mgmt_driver::error::exit;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = match help::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(c) => c,
        Err(e) => {
            // Only to find `-o json`: the command line itself was parsed from the raw OS strings.
            let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
            std::process::exit(parse_error(&e, &args));
        }
    };
    // Colours only for a person: a log piped to a file or a VNFM stays plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_writer(|| console::LogWriter)
        .with_ansi(ansi)
        .with_env_filter(log_filter(cli.verbose))
        .init();
    let (operation, output, dry_run) = (cli.command.name(), cli.output, cli.run.dry_run);
    // One thread: the driver waits on the network and computes little, and a fan-out's many
    // small tasks (every SSH session's, every host's job) hand each other work all the time; on
    // a multi-thread runtime each hand-off between threads is a futex wake-up (issue 24's
    // profile: about 60 % of the controller's CPU on a loaded machine). Measured on this 2-core
    // lab (docs/benchmarks.md, "One thread"): on a quiet machine the same CPU per node, 5 % less
    // wall time and 20 % less peak memory at 100 and 240 nodes; on one loaded by a test run,
    // 20-30 % less CPU (measured before the renderer got a thread of its own, render.rs: it
    // writes synchronously).
    // Blocking work goes to tokio's blocking pool (known_hosts, file hashes), and the one
    // blocking HTTP client (vim/client.rs) runs before any session is open.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
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
                let report = interrupt::report(name, &operation, dry_run);
                if operation == "hook" {
                    vnfm_hook::print_interrupted(report);
                } else {
                    report.print(output);
                }
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

/// The log's filter: `MGMT_DRIVER_LOG` when set, else the driver's own warnings (its libraries'
/// errors only), or its debug log with `-vv` (docs/environment.md).
fn log_filter(verbose: u8) -> EnvFilter {
    let default = if verbose >= 2 { "error,mgmt_driver=debug" } else { "error,mgmt_driver=warn" };
    match std::env::var(mgmt_driver::env_vars::LOG) {
        Ok(v) if !v.trim().is_empty() => EnvFilter::builder().parse_lossy(v),
        _ => EnvFilter::new(default),
    }
}

/// Wait for SIGINT or SIGTERM: its name, the exit code it means, and the handlers back.
async fn first_signal(mut s: (Signal, Signal)) -> (&'static str, i32, (Signal, Signal)) {
    let (name, code) = tokio::select! {
        _ = s.0.recv() => ("SIGINT", exit::INTERRUPTED),
        _ = s.1.recv() => ("SIGTERM", exit::TERMINATED),
    };
    (name, code, s)
}
