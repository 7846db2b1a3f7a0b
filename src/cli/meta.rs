//! `mgmt-driver version` and `mgmt-driver completion SHELL`.

use serde_json::json;

use crate::cli::common::Ctx;
use crate::cli::envelope::Envelope;
use crate::console;
use crate::error::exit;
use crate::render::Output;

/// `rustc -V` of the compiler that built this binary (`build.rs`).
const RUSTC: &str = env!("BUILD_RUSTC_VERSION");

pub fn version(ctx: &Ctx) -> i32 {
    let version = env!("CARGO_PKG_VERSION");
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut e = Envelope::new("version", false);
            e.result = json!({
                "version": version,
                "apiVersion": crate::cli::envelope::API_VERSION,
                "rustVersion": rust_version(RUSTC),
                "rustc": RUSTC,
            });
            e.print(ctx.output);
        }
        _ => console::out_line(&format!("mgmt-driver {version}, built with {RUSTC}")),
    }
    exit::OK
}

/// `1.95.0` of `rustc 1.95.0 (59807616e 2026-04-14)`.
fn rust_version(rustc: &str) -> &str {
    rustc.split_whitespace().nth(1).unwrap_or(rustc)
}

/// The script is made in memory and written in one go: clap_complete panics on a write error,
/// and the console ends quietly when the reader has gone (`completion bash | head -1`). The
/// parser is the plain one (`Cli::command()`, which the caller hands over: this file does not
/// import the parser it is a subcommand of), so every flag completes after every subcommand.
pub fn completion(shell: clap_complete::Shell, mut cmd: clap::Command) -> i32 {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mgmt-driver", &mut script);
    console::out(&String::from_utf8_lossy(&script));
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_building_compiler_s() {
        assert!(RUSTC.starts_with("rustc "), "{RUSTC}");
        assert!(rust_version(RUSTC).starts_with(|c: char| c.is_ascii_digit()), "{RUSTC}");
        assert_eq!(rust_version("rustc 1.95.0 (59807616e 2026-04-14)"), "1.95.0");
    }
}
