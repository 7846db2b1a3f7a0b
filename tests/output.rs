//! The binary's manners at its edge, offline: a reader that goes away ends the output quietly
//! (no panic, no backtrace, the command's own exit code), and a dry run's hosts are planned,
//! not succeeded (docs/result.schema.json). No lab, no root.

use std::process::{Command, Stdio};

use crate::support::harness::Suite;

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

fn a_dry_run_s_hosts_are_planned_not_succeeded() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv.yaml");
    let hosts = "groups:\n  g:\n    - {name: n1, ssh_ip: 192.0.2.1}\n    - {name: n2, ssh_ip: 192.0.2.2}\n";
    let kh = dir.path().join("kh");
    std::fs::write(&inv, format!("defaults:\n  user: u\n  password: p\n  known_hosts: {}\n{hosts}", kh.display()))
        .unwrap();
    let out = mgmt()
        .args(["exec", "--dry-run", "-o", "json", "-i", inv.to_str().unwrap(), "--", "uptime"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["result"];
    assert_eq!((r["okCount"].as_u64(), r["plannedCount"].as_u64()), (Some(0), Some(2)), "{doc}");
    for h in r["hosts"].as_array().unwrap() {
        assert_eq!(h["status"], "planned", "{h}");
        assert!(h.get("ok").is_none() && h.get("exitCode").is_none(), "a planned host has no outcome: {h}");
    }
    let plain = mgmt()
        .args(["exec", "--dry-run", "-o", "plain", "-i", inv.to_str().unwrap(), "--", "uptime"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(stderr.contains("summary: 2 planned, 0 failed") && stderr.contains("dry run"), "{stderr}");
}

fn version_names_the_compiler_that_built_it() {
    let out = mgmt().args(["version", "-o", "json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rustc = doc["result"]["rustc"].as_str().unwrap_or_default();
    assert!(rustc.starts_with("rustc 1."), "{doc}");
    assert_eq!(doc["result"]["rustVersion"], rustc.split_whitespace().nth(1).unwrap_or_default(), "{doc}");
    let plain = mgmt().arg("version").output().unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).contains(&format!("built with {rustc}")));
}

pub fn suite() -> Suite {
    Suite::new(file!()).without_root(&[
        ("a_closed_pipe_ends_the_output_quietly", || {
            a_closed_pipe_ends_the_output_quietly();
            Ok(())
        }),
        ("a_dry_run_s_hosts_are_planned_not_succeeded", || {
            a_dry_run_s_hosts_are_planned_not_succeeded();
            Ok(())
        }),
        ("version_names_the_compiler_that_built_it", || {
            version_names_the_compiler_that_built_it();
            Ok(())
        }),
    ])
}
