use clap::Parser;
use mgmt_driver::cli::{main as cli_main, parse_error, Cli};
use mgmt_driver::error::exit;

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
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(async {
        tokio::select! {
            code = cli_main(cli) => code,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("interrupted: hosts may be half done; re-running is safe for idempotent steps");
                exit::INTERRUPTED
            }
        }
    });
    // Do not wait for lingering connections to close politely.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    std::process::exit(code);
}
