//! Hostile inputs to the fan-out commands (`exec`, `put`, `get`, `run-script`) and to the flags
//! every command shares: durations, parallelism, selections, remote paths, connection options.

use crate::case::{Case, NOWHERE};

/// A valid inventory: one host where nothing answers, a password that must never show.
pub fn inventory() -> String {
    format!(
        "defaults:\n  user: ubuntu\n  password: pw-hostile-fanout\n  become_password: sudo-hostile-fanout\n  known_hosts: '{{dir}}/kh'\ngroups:\n  g:\n    - {{name: n1, ssh_ip: {NOWHERE}}}\n"
    )
}

/// `exec` on the valid inventory with extra flags before `--`.
fn exec(flags: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["exec".into(), "-i".into(), "{dir}/inv.yaml".into()];
    a.extend(flags.iter().map(|s| s.to_string()));
    a.extend(["--".into(), "true".into()]);
    a
}

fn rejected_exec(name: &str, flags: &[&str], field: &str) -> Case {
    let args = exec(flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Case::rejected(name, &args, field).file("inv.yaml", inventory())
}

/// An inventory with `host_line` as its one host (YAML flow mapping) and `defaults` lines.
fn inv_with(defaults: &str, host_line: &str) -> String {
    format!("defaults:\n  user: ubuntu\n  password: pw-hostile-fanout\n  known_hosts: '{{dir}}/kh'\n{defaults}groups:\n  g:\n    - {host_line}\n")
}

fn rejected_inv(name: &str, defaults: &str, host_line: &str, field: &str) -> Case {
    Case::rejected(name, &["exec", "-i", "{dir}/inv.yaml", "--", "true"], field)
        .file("inv.yaml", inv_with(defaults, host_line))
}

pub fn cases() -> Vec<Case> {
    let ok_host = format!("{{name: n1, ssh_ip: {NOWHERE}}}");
    let mut v = vec![
        // Durations: bounded, positive, finite.
        rejected_exec("fanout/timeout-huge", &["--timeout", "1e30"], "--timeout"),
        rejected_exec("fanout/timeout-negative", &["--timeout=-5"], "--timeout"),
        rejected_exec("fanout/timeout-nan", &["--timeout", "nan"], "--timeout"),
        rejected_exec("fanout/timeout-inf", &["--timeout", "inf"], "--timeout"),
        rejected_exec("fanout/timeout-unit-unknown", &["--timeout", "5parsecs"], "--timeout"),
        rejected_exec(
            "fanout/connect-timeout-u64-overflow",
            &["--connect-timeout", "99999999999999999999999"],
            "--connect-timeout",
        ),
        rejected_exec("fanout/retry-for-garbage", &["--retry-for", "soon"], "--retry-for"),
        // Parallelism.
        rejected_exec("fanout/parallel-zero", &["--parallel", "0"], "--parallel"),
        rejected_exec("fanout/parallel-negative", &["--parallel=-1"], "--parallel"),
        rejected_exec("fanout/parallel-overflow", &["--parallel", "99999999999999999999999"], "--parallel"),
        // Selections that match nothing are an error, not a silent no-op.
        rejected_exec("fanout/group-unknown", &["--group", "nosuch"], "nosuch"),
        rejected_exec("fanout/host-unknown", &["--host", "nosuch"], "nosuch"),
        rejected_exec("fanout/kex-unknown", &["--kex", "evil-kex@example.com"], "evil-kex@example.com"),
        rejected_exec("fanout/ssh-config-missing", &["--ssh-config", "{dir}/no-such-config"], "no-such-config"),
        // The inventory file itself.
        Case::rejected("fanout/inventory-missing", &["exec", "-i", "{dir}/nope.yaml", "--", "true"], "nope.yaml"),
        Case::rejected("fanout/inventory-is-a-directory", &["exec", "-i", "{dir}/sub", "--", "true"], "sub")
            .file("sub/x", "x"),
        Case::rejected("fanout/inventory-binary", &["exec", "-i", "{dir}/inv.yaml", "--", "true"], "inv.yaml")
            .file("inv.yaml", vec![0u8, 159, 146, 150, 255, 0, 1]),
        rejected_inv("fanout/inventory-key-misspelt", "  pasword_env: X\n", &ok_host, "pasword_env"),
        rejected_inv("fanout/ssh-ip-with-shell", "", "{name: n1, ssh_ip: '1.2.3.4; reboot'}", "ssh_ip"),
        rejected_inv("fanout/port-out-of-range", "", &format!("{{name: n1, ssh_ip: {NOWHERE}, port: 70000}}"), "port"),
        rejected_inv("fanout/port-zero", "", &format!("{{name: n1, ssh_ip: {NOWHERE}, port: 0}}"), "port"),
        rejected_inv("fanout/name-with-newline", "", &format!("{{name: \"n1\\nforged\", ssh_ip: {NOWHERE}}}"), "name"),
        rejected_inv(
            "fanout/user-as-option",
            "",
            &format!("{{name: n1, ssh_ip: {NOWHERE}, user: '-oProxyCommand=sh'}}"),
            "user",
        ),
        Case::rejected(
            "fanout/password-env-unset",
            &["exec", "-i", "{dir}/inv.yaml", "--", "true"],
            "MGMT_HOSTILE_UNSET",
        )
        .file("inv.yaml", inventory().replace("password: pw-hostile-fanout", "password_env: MGMT_HOSTILE_UNSET")),
        rejected_inv("fanout/identity-file-missing", "  identity_file: '{dir}/no-key'\n", &ok_host, "no-key"),
        // Remote and local paths.
        Case::rejected("fanout/put-dest-empty", &["put", "-i", "{dir}/inv.yaml", "{dir}/f", ""], "DEST")
            .file("inv.yaml", inventory())
            .file("f", "x"),
        Case::rejected("fanout/put-dest-newline", &["put", "-i", "{dir}/inv.yaml", "{dir}/f", "a\nb"], "DEST")
            .file("inv.yaml", inventory())
            .file("f", "x"),
        Case::rejected("fanout/put-src-missing", &["put", "-i", "{dir}/inv.yaml", "{dir}/nofile", "/tmp/x"], "nofile")
            .file("inv.yaml", inventory()),
        Case::rejected(
            "fanout/put-mode-not-octal",
            &["put", "-i", "{dir}/inv.yaml", "--mode", "999", "{dir}/f", "/tmp/x"],
            "--mode",
        )
        .file("inv.yaml", inventory())
        .file("f", "x"),
        Case::rejected("fanout/get-remote-newline", &["get", "-i", "{dir}/inv.yaml", "a\nb", "{dir}/out"], "REMOTE")
            .file("inv.yaml", inventory()),
        // A remote path starting with '-' would reach chmod/mv/rm/cat on the node as an option
        // (after `--`, clap hands it over as a value).
        Case::rejected("fanout/put-dest-as-option", &["put", "-i", "{dir}/inv.yaml", "--", "{dir}/f", "-rf"], "DEST")
            .file("inv.yaml", inventory())
            .file("f", "x"),
        Case::rejected(
            "fanout/put-dest-long-option",
            &["put", "-i", "{dir}/inv.yaml", "{dir}/f", "--", "--reference=/etc/shadow"],
            "DEST",
        )
        .file("inv.yaml", inventory())
        .file("f", "x"),
        Case::rejected(
            "fanout/put-dest-dir-as-option",
            &["put", "-i", "{dir}/inv.yaml", "--", "{dir}/f", "-R/"],
            "DEST",
        )
        .file("inv.yaml", inventory())
        .file("f", "x"),
        Case::rejected(
            "fanout/get-remote-as-option",
            &["get", "-i", "{dir}/inv.yaml", "--", "-n/x", "{dir}/out"],
            "REMOTE",
        )
        .file("inv.yaml", inventory()),
        Case::rejected("fanout/get-remote-directory", &["get", "-i", "{dir}/inv.yaml", "/etc/", "{dir}/out"], "/etc/")
            .file("inv.yaml", inventory()),
        Case::rejected(
            "fanout/run-script-missing",
            &["run-script", "-i", "{dir}/inv.yaml", "{dir}/nothere.sh"],
            "nothere.sh",
        )
        .file("inv.yaml", inventory()),
        Case::rejected("fanout/exec-without-command", &["exec", "-i", "{dir}/inv.yaml", "--"], "CMD")
            .file("inv.yaml", inventory()),
    ];
    // Accepted, but only in a harmless form.
    v.extend([
        Case::accepted(
            "fanout/run-script-args-stay-quoted",
            &["run-script", "-i", "{dir}/inv.yaml", "{dir}/s.sh", "$(reboot)", "; id #", "a'b"],
            &["'$(reboot)'", "'; id #'", "'a'\\\\''b'"],
            &["pw-hostile-fanout", "sudo-hostile-fanout"],
        )
        .file("inv.yaml", inventory())
        .file("s.sh", "echo \"$@\"\n"),
        Case::accepted(
            "fanout/put-dest-with-quotes-and-spaces",
            &["put", "-i", "{dir}/inv.yaml", "{dir}/f", "/tmp/a b'$(id)"],
            &["-> /tmp/a b'$(id) (mode"],
            &["pw-hostile-fanout"],
        )
        .file("inv.yaml", inventory())
        .file("f", "x"),
        Case::accepted(
            "fanout/put-dest-dash-inside-is-a-name",
            &["put", "-i", "{dir}/inv.yaml", "{dir}/f", "./-rf"],
            &["-> ./-rf (mode"],
            &["pw-hostile-fanout"],
        )
        .file("inv.yaml", inventory())
        .file("f", "x"),
        Case::accepted(
            "fanout/become-password-never-shown",
            &["exec", "-i", "{dir}/inv.yaml", "--become", "--", "id"],
            &["sudo -S"],
            &["pw-hostile-fanout", "sudo-hostile-fanout"],
        )
        .file("inv.yaml", inventory()),
        Case::accepted(
            "fanout/password-from-env-never-shown",
            &["exec", "-i", "{dir}/inv.yaml", "--", "id"],
            &["connect ubuntu@192.0.2.10"],
            &["env-secret-hostile"],
        )
        .file("inv.yaml", inventory().replace("password: pw-hostile-fanout", "password_env: MGMT_HOSTILE_PW"))
        .env("MGMT_HOSTILE_PW", "env-secret-hostile"),
    ]);
    v
}
