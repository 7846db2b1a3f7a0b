//! A hook request's own options (`request.additionalParams.mgmt_driver`, written by the VNFM's
//! API user, a tenant) may not be the operator's (issue 20): each operator option set there is
//! refused naming `additionalParams.mgmt_driver.<key>`, a timeout over the operator's cap too,
//! and the same settings in the document's `options` (the shim's, the operator's) are accepted.
//! A request's inventory, a file of the VNF package, lists nodes only: each field that would
//! reach a file, the environment, a key or the host-key policy of the conductor is refused, and
//! one with nodes only logs in with the request's credentials.

use serde_json::{json, Value};

use super::hook::{doc, ARGS, PW};
use crate::case::{set, Case};

/// A file of the operator's that a package inventory must never get read.
const OPERATOR_SECRET: &str = "operator-secret-4b1";

fn case(c: Case, d: &Value) -> Case {
    c.file("in.json", d.to_string())
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
        .file("pkg/Scripts/install_helm.sh", "#!/bin/sh\nexit 0\n")
        .file("operator_pw", OPERATOR_SECRET)
        .file("id_operator", "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n-----END OPENSSH PRIVATE KEY-----\n")
        .never(OPERATOR_SECRET)
}

fn rejected(name: &str, d: &Value, field: &str) -> Case {
    case(Case::rejected(format!("tenant_{name}"), &ARGS, field), d).never(PW)
}

fn accepted(name: &str, d: &Value, shown: &[&str]) -> Case {
    case(Case::accepted(format!("tenant_{name}"), &ARGS, shown, &[]), d)
}

fn with_flags(mut c: Case, flags: &[&str]) -> Case {
    c.args.extend(flags.iter().map(|f| f.to_string()));
    c
}

/// With Helm, the VIM entry carries `helm_info`, where `tacker_compat` puts the login password.
fn with_helm(d: Value) -> Value {
    let p = "/request/additionalParams/k8s_cluster_installation_param/helm_installation_script_path";
    set(d, p, json!("Scripts/install_helm.sh"))
}

fn request_sets(key: &str, v: Value) -> Value {
    set(doc(), "/request/additionalParams/mgmt_driver", json!({ key: v }))
}

/// The hook document naming the package inventory `pkg/Files/inv.yaml`.
fn with_inventory() -> Value {
    request_sets("inventory", json!("Files/inv.yaml"))
}

/// The package inventory, `extra` added to the first master's entry.
fn inventory(extra: &str) -> String {
    format!(
        "groups:\n  masterNode:\n    - {{name: m1, ssh_ip: 192.0.2.31{extra}}}\n  workerNode:\n    - {{name: w1, ssh_ip: 192.0.2.32}}\n"
    )
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // Each operator option in the request: refused. The same in the document's options: accepted.
    let operator: [(&str, Value, Value, &[&str]); 8] = [
        ("tacker_compat", json!(true), json!(true), &["\"masternode_password\":\"pw-hostile"]),
        ("dry_run", json!(true), json!(true), &["\"dryRun\":true"]),
        ("cluster_instance", json!("another-tenants-cluster"), json!("c1"), &["kubernetes_kvim"]),
        ("reset_nodes", json!(true), json!(true), &["kubernetes_kvim"]),
        ("state_dir", json!("/etc"), json!("{dir}/st2"), &["kubernetes_kvim"]),
        ("known_hosts", json!("/dev/null"), json!("{dir}/kh"), &["kubernetes_kvim"]),
        ("kubeconfig_out", json!("/root/.kube/config"), json!("{dir}/kc.yaml"), &["/kc.yaml\""]),
        (
            "install_timeout",
            json!("3h"),
            json!("3h"),
            &["timeout -k 3 10800: clean_env.sh", "env.install bash ./install_k8s_cluster.sh"],
        ),
    ];
    for (key, in_request, in_options, shown) in operator {
        let field = format!("additionalParams.mgmt_driver.{key}");
        cases.push(rejected(&format!("request_{key}"), &with_helm(request_sets(key, in_request)), &field));
        let d = with_helm(set(doc(), "/options", json!({ key: in_options })));
        cases.push(accepted(&format!("options_{key}"), &d, shown));
    }
    cases.extend([
        rejected(
            "request_unknown_key",
            &request_sets("ssh_config", json!("/root/.ssh/config")),
            "mgmt_driver.ssh_config",
        ),
        rejected(
            "request_not_an_object",
            &set(doc(), "/request/additionalParams/mgmt_driver", json!(["dry_run"])),
            "mgmt_driver",
        ),
        rejected(
            "request_drain_timeout_over_ceiling",
            &request_sets("drain_timeout", json!(3600)),
            "mgmt_driver.drain_timeout",
        ),
        // The operator's own value is the cap: a flag here.
        with_flags(
            rejected(
                "request_timeout_over_operator",
                &request_sets("install_timeout", json!("20m")),
                "mgmt_driver.install_timeout",
            ),
            &["--install-timeout", "10m"],
        ),
        accepted(
            "request_timeout_under_cap",
            &request_sets("install_timeout", json!("20m")),
            &["timeout -k 3 1200: clean_env.sh", "env.install bash ./install_k8s_cluster.sh"],
        )
        .never(PW),
        // The package inventory: nodes only, the request's login.
        accepted("package_inventory_nodes_only", &with_inventory(), &["192.0.2.31", "192.0.2.32"])
            .file("pkg/Files/inv.yaml", inventory(", nic_ip: 192.0.2.31, port: 22"))
            .never(PW),
        rejected(
            "package_inventory_outside",
            &request_sets("inventory", json!("../operator_pw")),
            "mgmt_driver.inventory",
        ),
    ]);
    let forbidden = [
        ("user", "root"),
        ("password", "vendor-pw"),
        ("password_env", "HOME"),
        ("password_file", "{dir}/operator_pw"),
        ("identity_file", "{dir}/id_operator"),
        ("identity_passphrase_env", "HOME"),
        ("identity_passphrase_file", "{dir}/operator_pw"),
        ("known_hosts", "{dir}/operator_pw"),
        ("host_key_check", "accept-new"),
        ("jump", "['ops@192.0.2.99']"),
        ("become_password", "vendor-pw"),
        ("become_password_env", "HOME"),
        ("become_password_file", "{dir}/operator_pw"),
    ];
    for (key, value) in forbidden {
        let field = format!("groups.masterNode[0].{key}: is not allowed in an inventory of the VNF package");
        cases.push(
            rejected(&format!("package_inventory_{key}"), &with_inventory(), &field)
                .file("pkg/Files/inv.yaml", inventory(&format!(", {key}: {value}"))),
        );
    }
    cases.push(
        rejected("package_inventory_defaults", &with_inventory(), "defaults.password_file: is not allowed")
            .file("pkg/Files/inv.yaml", format!("defaults: {{password_file: {{dir}}/operator_pw}}\n{}", inventory(""))),
    );
    cases
}
