//! Hostile inputs to `mgmt-driver workload`: the compact spec (names, DCAE port specs, probes and
//! their intervals, volumes, labels, images, unknown fields), the operator's words (NAME,
//! CONTAINER=IMAGE, replicas, revisions, the container) and the DCAE interval specs of
//! `--interval` / `--timeout`. Accepted cases prove a command's words reach kubectl quoted and an
//! env value never shows.

use crate::case::{Case, NOWHERE};

const MASTER_PW: &str = "pw-hostile-workload";

/// One master where nothing answers, in the default master group.
fn inventory() -> String {
    format!(
        "defaults:\n  user: root\n  password: {MASTER_PW}\n  known_hosts: '{{dir}}/kh'\ngroups:\n  master_instance:\n    - {{name: m1, ssh_ip: {NOWHERE}}}\n"
    )
}

const SPEC: &str = "name: web\nimage: registry.example/web:1.0\nports: ['8080/tcp', '5000/udp:30080']\n\
readiness: {http: '/healthz:8080', period: 10s}\nvolumes: [{name: cfg, empty_dir: {}, mount: /cfg}]\n";

/// `workload <op...>` on the inventory; `op` is put first, the shared flags after it.
fn args(op: &[&str], flags: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["workload".into(), op[0].into(), "-i".into(), "{dir}/inv.yaml".into()];
    a.extend(flags.iter().map(|s| s.to_string()));
    a.extend(op[1..].iter().map(|s| s.to_string()));
    a
}

fn rejected(name: &str, op: &[&str], flags: &[&str], field: &str) -> Case {
    let a = args(op, flags);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    Case::rejected(format!("workload/{name}"), &a, field).file("inv.yaml", inventory()).never(MASTER_PW)
}

/// `deploy` of SPEC with `from` replaced by `to`, refused naming `field`.
fn bad_spec(name: &str, from: &str, to: &str, field: &str) -> Case {
    assert!(SPEC.contains(from), "{from}");
    rejected(name, &["deploy", "{dir}/spec.yaml"], &[], field).file("spec.yaml", SPEC.replacen(from, to, 1))
}

pub fn cases() -> Vec<Case> {
    vec![
        // DCAE port specs.
        bad_spec("port-node-port-too-big", "'8080/tcp'", "'8080/tcp:99999'", "ports[0]"),
        bad_spec("port-not-a-number", "'8080/tcp'", "x", "ports[0]"),
        bad_spec("port-sctp-and-empty-node-port", "'5000/udp:30080'", "'8080/sctp:'", "ports[1]"),
        bad_spec("port-empty-node-port", "'5000/udp:30080'", "'5000/udp:'", "ports[1]"),
        bad_spec("port-node-port-below-range", "'5000/udp:30080'", "'5000/udp:22'", "ports[1]"),
        bad_spec("port-with-shell", "'8080/tcp'", "'8080; reboot'", "ports[0]"),
        bad_spec("port-twice", "'5000/udp:30080'", "'8080'", "ports[1]"),
        // Names.
        bad_spec("name-not-dns-1123", "name: web", "name: Web_1", "name"),
        bad_spec("name-an-option", "name: web", "name: --all", "name"),
        bad_spec("name-too-long", "name: web", &format!("name: {}", "w".repeat(53)), "name"),
        bad_spec("namespace-with-space", "name: web", "name: web\nnamespace: kube system", "namespace"),
        bad_spec("image-an-option", "image: registry.example/web:1.0", "image: --privileged", "image"),
        bad_spec("image-with-shell", "image: registry.example/web:1.0", "image: 'x;reboot'", "image"),
        bad_spec("unknown-field", "name: web", "name: web\nreplica: 3", "replica"),
        bad_spec("host-path-escapes", "empty_dir: {}", "host_path: /srv/../etc", "volumes[0].host_path"),
        bad_spec(
            "label-own-key",
            "name: web",
            "name: web\nlabels: {app.kubernetes.io/name: x}",
            "labels.app.kubernetes.io/name",
        ),
        // Interval specs in a probe.
        bad_spec("probe-interval-unit", "period: 10s", "period: 5x", "readiness.period"),
        bad_spec("probe-interval-fraction", "period: 10s", "period: 1.5", "readiness.period"),
        bad_spec("probe-http-no-port", "'/healthz:8080'", "'/healthz'", "readiness.http"),
        rejected("spec-missing", &["deploy", "{dir}/nope.yaml"], &[], "nope.yaml"),
        rejected("spec-kind-conflict", &["deploy", "{dir}/spec.yaml"], &["--kind", "statefulset"], "kind")
            .file("spec.yaml", format!("kind: Deployment\n{SPEC}")),
        // The operator's words.
        rejected("name-arg-option", &["available", "--", "--all"], &[], "NAME"),
        rejected("name-arg-path", &["undeploy", "../web"], &[], "NAME"),
        rejected("namespace-flag", &["available", "web"], &["-n", "a;b"], "--namespace"),
        rejected("set-image-no-equals", &["set-image", "web", "web"], &[], "CONTAINER=IMAGE"),
        rejected("set-image-option", &["set-image", "web", "web=--x"], &[], "CONTAINER=IMAGE"),
        rejected("set-image-twice", &["set-image", "web", "web=a:1", "web=b:2"], &[], "CONTAINER=IMAGE"),
        rejected("scale-too-many", &["scale", "web", "5000"], &[], "REPLICAS"),
        rejected("rollback-revision-zero", &["rollback", "web"], &["--to-revision", "0"], "--to-revision"),
        rejected("exec-container-shell", &["exec", "web", "--", "true"], &["-c", "web;id"], "--container"),
        // DCAE interval specs of --interval and --timeout.
        rejected("interval-unit", &["wait", "web"], &["--interval", "5x"], "--interval"),
        rejected("interval-zero", &["wait", "web"], &["--interval", "0"], "--interval"),
        rejected("interval-negative", &["wait", "web"], &["--interval=-1"], "--interval"),
        rejected("timeout-words", &["wait", "web"], &["--timeout", "ten"], "--timeout"),
        rejected(
            "interval-longer-than-timeout",
            &["wait", "web"],
            &["--interval", "1h", "--timeout", "10s"],
            "--interval",
        ),
        // Where kubectl runs.
        Case::rejected("workload/no-cluster", &["workload", "available", "web"], "--vnf-instance-id"),
        Case::rejected(
            "workload/cluster-id-path",
            &["workload", "available", "web", "--vnf-instance-id", "../x", "--state-dir", "{dir}/st"],
            "--vnf-instance-id",
        ),
        rejected("master-group-unknown", &["available", "web"], &["--master-group", "nope"], "--master-group"),
        // Accepted: the command's words reach kubectl quoted, each one word.
        {
            let a = args(&["exec", "web", "--", "sh", "-c", "echo $(id); rm -rf /"], &[]);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            Case::accepted("workload/exec-words-quoted", &a, &["-- sh -c 'echo $(id); rm -rf /'"], &[MASTER_PW])
                .file("inv.yaml", inventory())
        },
        // Accepted: an env value with shell in it travels in the uploaded manifest only.
        {
            let a = args(&["deploy", "{dir}/spec.yaml"], &[]);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            Case::accepted(
                "workload/env-value-never-shown",
                &a,
                &["kubectl apply -f .mgmt-driver/workloads/default.web.json"],
                &["touch /tmp/pwned", MASTER_PW],
            )
            .file("inv.yaml", inventory())
            .file("spec.yaml", format!("{SPEC}env: {{MODE: \"a'b; touch /tmp/pwned\"}}\n"))
        },
    ]
}
