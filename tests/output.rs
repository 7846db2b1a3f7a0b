//! The binary's manners at its edge, offline: a reader that goes away ends the output quietly
//! (no panic, no backtrace, the command's own exit code), and `version` names the compiler
//! that built it. No lab, no root.

use std::process::{Command, Stdio};

fn mgmt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"));
    // A backtrace on would make a panic louder, not different: keep it on to see one if any.
    c.env("RUST_BACKTRACE", "1").env_remove("MGMT_DRIVER_LOG");
    c
}

/// Run `args` with a stdout whose reader is already gone; the exit code and stderr.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = mgmt().args(args).stdout(writer).stderr(Stdio::piped()).output().expect("runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [
        &["completion", "bash"][..],
        &["version", "-o", "json"],
        &["version"],
        &["--help"],
        &["exec", "--help"],
        &["sites", "export", "k8s-job", "--help"],
    ] {
        let (code, stderr) = into_closed_pipe(args);
        assert_eq!(code, 0, "mgmt-driver {args:?}: exit {code}\n{stderr}");
        assert!(stderr.is_empty(), "mgmt-driver {args:?} said:\n{stderr}");
    }
}

#[test]
fn version_names_the_compiler_that_built_it() {
    let out = mgmt().args(["version", "-o", "json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rustc = doc["result"]["rustc"].as_str().unwrap_or_default();
    assert!(rustc.starts_with("rustc 1."), "{doc}");
    assert_eq!(doc["result"]["rustVersion"], rustc.split_whitespace().nth(1).unwrap_or_default(), "{doc}");
    let plain = mgmt().arg("version").output().unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).contains(&format!("built with {rustc}")));
}
