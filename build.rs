//! Records the compiler that builds the binary, for `mgmt-driver version`: Cargo.toml's
//! `rust-version` is the oldest compiler that may build it, not the one that did, and Cargo
//! tells a build script which one it uses (`RUSTC`) but not the crate itself.

use std::process::Command;

// Cargo reads a build script's instructions from its stdout: printing is the interface here,
// not a stray write around the program's one output path (src/console.rs).
#[allow(clippy::print_stdout)]
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "rustc (unknown version)".to_string());
    println!("cargo:rustc-env=BUILD_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=build.rs");
}
