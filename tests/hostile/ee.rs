//! Hostile inputs to the execution-environment and primitive commands: `ee register`'s name,
//! address, user, port, namespace and credentials; `--ee` selections; `primitives.yaml`
//! declarations (scripts outside the directory, unknown keys, bombs); and a hostile parameter
//! value, which is accepted but never reaches a command line.

use crate::case::{Case, NOWHERE};

fn register(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> =
        ["ee", "register", "e1", "--host", NOWHERE, "--user", "ops", "--password-file", "{dir}/pw"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(["--state-dir".into(), "{dir}/state".into()]);
    a
}

fn rejected_register(name: &str, args: Vec<String>, field: &str) -> Case {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Case::rejected(name, &args, field).file("pw", "pw-hostile-ee\n").never("pw-hostile-ee")
}

/// `register` with one argument replaced.
fn with(flag: &str, value: &str) -> Vec<String> {
    let mut a = register(&[]);
    if flag == "NAME" {
        a[2] = value.into();
    } else {
        match a.iter().position(|x| x == flag) {
            Some(i) => a[i + 1] = value.into(),
            None => a.extend([flag.to_string(), value.to_string()]),
        }
    }
    a
}

const PRIMS: &str = "primitives:\n  - name: echo\n    script: echo.sh\n    parameters:\n      - {name: msg, type: string, required: true}\n";

fn prim_case(name: &str, yaml: &str, field: &str) -> Case {
    Case::rejected(
        name,
        &[
            "primitive",
            "run",
            "echo",
            "--dir",
            "{dir}/p",
            "-i",
            "{dir}/inv.yaml",
            "--param",
            "msg=x",
            "--state-dir",
            "{dir}/state",
        ],
        field,
    )
    .file("p/primitives.yaml", yaml.to_string())
    .file("p/echo.sh", "#!/bin/sh\necho hi\n")
    .file("inv.yaml", crate::fanout::inventory())
}

pub fn cases() -> Vec<Case> {
    let mut v = vec![
        rejected_register("ee/name-command-substitution", with("NAME", "$(reboot)"), "NAME"),
        rejected_register("ee/name-newline", with("NAME", "e1\nforged"), "NAME"),
        rejected_register("ee/name-option", with("NAME", "-rf"), "NAME"),
        rejected_register("ee/host-with-shell", with("--host", "1.2.3.4;reboot"), "--host"),
        rejected_register("ee/host-option", with("--host", "-oProxyCommand=sh"), "--host"),
        rejected_register("ee/user-as-option", with("--user", "-oProxyCommand=sh"), "--user"),
        rejected_register("ee/user-with-at", with("--user", "root@evil"), "--user"),
        rejected_register("ee/port-zero", with("--port", "0"), "--port"),
        rejected_register("ee/port-overflow", with("--port", "70000"), "--port"),
        rejected_register("ee/namespace-shell", register(&["--namespace", ".ns.$(id)"]), "--namespace"),
        rejected_register("ee/namespace-newline", register(&["--namespace", ".ns.vnf\nforged"]), "--namespace"),
        rejected_register("ee/namespace-no-ns", register(&["--namespace", "..vnf"]), "--namespace"),
        rejected_register("ee/drop-password-without-install-key", register(&["--drop-password"]), "--install-key"),
        rejected_register("ee/two-credentials", register(&["--identity", "{dir}/pw"]), "--identity"),
        rejected_register("ee/password-file-missing", with("--password-file", "{dir}/nope"), "nope"),
        rejected_register("ee/host-key-check-off", register(&["--host-key-check", "off"]), "--host-key-check"),
        // No credential: the driver's key is the login, and there is none yet in this store.
        Case::rejected(
            "ee/no-credential-no-driver-key",
            &["ee", "register", "e1", "--host", NOWHERE, "--user", "ops", "--state-dir", "{dir}/state"],
            "mgmt-driver key",
        ),
        Case::rejected(
            "ee/password-env-unset",
            &["ee", "register", "e1", "--host", NOWHERE, "--user", "ops", "--password-env", "MGMT_EE_NOPE", "--state-dir", "{dir}/state"],
            "MGMT_EE_NOPE",
        ),
        Case::rejected("ee/exec-unknown-ee", &["exec", "--ee", "nosuch", "--state-dir", "{dir}/state", "--", "true"], "nosuch"),
        Case::rejected(
            "ee/exec-ee-newline",
            &["exec", "--ee", "a\nforged", "--state-dir", "{dir}/state", "--", "true"],
            "no such execution environment",
        ),
        Case::rejected("ee/show-unknown", &["ee", "show", "$(id)", "--state-dir", "{dir}/state"], "no such"),
        Case::rejected("ee/list-bad-namespace", &["ee", "list", "--namespace", "x", "--state-dir", "{dir}/state"], "--namespace"),
        Case::rejected(
            "ee/status-run-id-path",
            &["primitive", "status", "../../etc/passwd", "--state-dir", "{dir}/state"],
            "id",
        ),
        prim_case("primitive/script-dotdot", &PRIMS.replace("echo.sh", "../echo.sh"), "script"),
        prim_case("primitive/script-absolute", &PRIMS.replace("echo.sh", "/etc/shadow"), "script"),
        prim_case("primitive/script-missing", &PRIMS.replace("echo.sh", "nope.sh"), "nope.sh"),
        prim_case("primitive/key-misspelt", &format!("{PRIMS}    sudo: true\n"), "sudo"),
        prim_case("primitive/name-shell", &PRIMS.replace("name: echo", "name: 'echo;reboot'"), "name"),
        prim_case("primitive/param-name-shell", &PRIMS.replace("name: msg", "name: 'msg$(id)'"), "parameters[0].name"),
        prim_case("primitive/timeout-garbage", &format!("{PRIMS}    timeout: forever\n"), "timeout"),
        prim_case("primitive/runs-on-unknown", &format!("{PRIMS}    runs_on: everywhere\n"), "runs_on"),
        prim_case(
            "primitive/secret-results-control",
            &format!("{PRIMS}    secret_results: [\"otp\\u001b[2J\"]\n"),
            "secret_results[0]",
        ),
        prim_case("primitive/secret-results-empty", &format!("{PRIMS}    secret_results: ['']\n"), "secret_results[0]"),
        prim_case("primitive/secret-results-not-a-list", &format!("{PRIMS}    secret_results: otp\n"), "secret_results"),
        prim_case(
            "primitive/yaml-alias-bomb",
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\nprimitives: []\n",
            "primitives",
        ),
        Case::rejected(
            "primitive/unknown-primitive",
            &["primitive", "run", "nosuch", "--dir", "{dir}/p", "--state-dir", "{dir}/state"],
            "no such primitive",
        )
        .file("p/primitives.yaml", PRIMS.to_string())
        .file("p/echo.sh", "#!/bin/sh\n"),
        // Helm CNFs have no primitives (OSM's Helm connector refuses them too).
        Case::rejected(
            "primitive/helm-cnf-refused",
            &["primitive", "run", "echo", "--dir", "{dir}/p", "--cluster-instance", "cnf-1", "--param", "msg=x", "--state-dir", "{dir}/state"],
            "is a Helm CNF",
        )
        .file("p/primitives.yaml", PRIMS.to_string())
        .file("p/echo.sh", "#!/bin/sh\n")
        .file("state/cnf-1.cnf.json", crate::case::recorded("cnf-1", "cnf", &serde_json::json!({"releases": {}}))),
        Case::rejected(
            "primitive/masters-without-instance",
            &["primitive", "run", "echo", "--dir", "{dir}/p", "--param", "msg=x", "--state-dir", "{dir}/state"],
            "--cluster-instance",
        )
        .file("p/primitives.yaml", format!("{PRIMS}    runs_on: masters\n"))
        .file("p/echo.sh", "#!/bin/sh\n"),
        Case::rejected(
            "primitive/masters-of-unrecorded-instance",
            &["primitive", "run", "echo", "--dir", "{dir}/p", "--cluster-instance", "nope", "--param", "msg=x", "--state-dir", "{dir}/state"],
            "no cluster is recorded",
        )
        .file("p/primitives.yaml", format!("{PRIMS}    runs_on: masters\n"))
        .file("p/echo.sh", "#!/bin/sh\n"),
        Case::rejected(
            "primitive/instance-id-path",
            &["primitive", "run", "echo", "--dir", "{dir}/p", "--cluster-instance", "../x", "--param", "msg=x", "--state-dir", "{dir}/state"],
            "id",
        )
        .file("p/primitives.yaml", PRIMS.to_string())
        .file("p/echo.sh", "#!/bin/sh\n"),
    ];
    // A hostile value is legitimate: it travels in a 0600 file, never in a command line. The
    // run record shows it as data (JSON-escaped); no command shows its shell-quoted form, and the
    // env file's text is never printed.
    let hostile = "it's \"$(reboot)\" `id`\nforged: line";
    let msg = format!("msg={hostile}");
    // `runs_on: masters` of a recorded cluster: only the recorded masters, logged in to with the
    // inventory's credentials.
    let cluster = r#"{"version": 1, "vnf_instance_id": "c1", "nodes": {
        "m1": {"role": "master", "ssh_addr": "192.0.2.10", "nic_ip": "", "k8s_name": "", "installed": true, "helm_installed": true},
        "w1": {"role": "worker", "ssh_addr": "192.0.2.11", "nic_ip": "", "k8s_name": "", "installed": true, "helm_installed": false}}}"#;
    let inv = format!(
        "defaults: {{user: ubuntu, password: pw-hostile-ee, known_hosts: '{{dir}}/kh'}}\ngroups:\n  k:\n    - {{name: m1, ssh_ip: {NOWHERE}}}\n    - {{name: w1, ssh_ip: 192.0.2.11}}\n"
    );
    v.push(
        Case::accepted(
            "primitive/masters-of-a-recorded-cluster",
            &[
                "primitive",
                "run",
                "echo",
                "--dir",
                "{dir}/p",
                "--cluster-instance",
                "c1",
                "-i",
                "{dir}/inv.yaml",
                "--param",
                "msg=x",
                "--state-dir",
                "{dir}/state",
            ],
            &["\"target\":\"m1\""],
            &["\"target\":\"w1\"", "pw-hostile-ee"],
        )
        .file("p/primitives.yaml", format!("{PRIMS}    runs_on: masters\n"))
        .file("p/echo.sh", "#!/bin/sh\n")
        .file("state/c1.json", crate::case::recorded("c1", "", &serde_json::from_str(cluster).expect("json")))
        .file("inv.yaml", inv),
    );
    v.push(
        Case::accepted(
            "primitive/hostile-value-never-in-a-command",
            &[
                "primitive",
                "run",
                "echo",
                "--dir",
                "{dir}/p",
                "-i",
                "{dir}/inv.yaml",
                "--param",
                &msg,
                "--state-dir",
                "{dir}/state",
            ],
            &["primitive_run.sh", "params.env"],
            &["it'\\''s", "PARAM_MSG=", "\nforged: line"],
        )
        .file("p/primitives.yaml", PRIMS.to_string())
        .file("p/echo.sh", "#!/bin/sh\necho hi\n")
        .file("inv.yaml", crate::fanout::inventory()),
    );
    v
}
