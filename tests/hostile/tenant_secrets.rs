//! Secret references (`@env:`, `@file:`) are the operator's tool (issue 20, docs/security.md
//! "Secret references"):
//! - in a VNFM's hook document (the request, the VnfInstance's kept additionalParams) every
//!   reference is refused, exit 2 naming the field, whatever it names: node, storage and
//!   registry passwords, a `helmparameter` item; an `@file:` to a file that exists and to one
//!   that does not give the same words (the message never tells which);
//! - in a request file the operator names on the command line they are confined: `@file:` only
//!   under `--secrets-dir` (symlinks resolved), `@env:` only for a `--secret-env` name or
//!   prefix, and nothing allowed is nothing honoured.

use serde_json::{json, Value};

use super::hook::instance;
use crate::case::{set, Case, INSTANTIATE_ARGS};

const PW: &str = "pw-hostile-tenant-secrets";
const ROOT: &str = "additionalParams.k8s_cluster_installation_param";

/// What a tenant's reference is told, the same for every reference of a kind.
const REFUSED_FILE: &str = "is a secret reference (@file:), and references are the operator's tool";
const REFUSED_ENV: &str = "is a secret reference (@env:), and references are the operator's tool";

fn params() -> Value {
    json!({"script_path": "Scripts/install_k8s_cluster.sh", "vim_name": "kvim",
           "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1", "username": "ubuntu",
                           "password": PW, "cluster_cp_name": "masterNode_CP1"},
           "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP2", "username": "ubuntu", "password": PW}})
}

/// The params with `v` at `at` (a pointer inside `k8s_cluster_installation_param`).
fn params_with(at: &str, v: &str) -> Value {
    let p = set(params(), "/private_registry_connection_info", json!([{"connection_type": "0", "server": "reg:5000"}]));
    let p = set(
        p,
        "/storage_server",
        json!({"ssh_cp_name": "masterNode_CP1", "username": "ubuntu", "password": PW,
               "cinder_volume_setup_params": [{"volume_resource_id": "vol", "mount_to": "/volume"}]}),
    );
    let p = if at.starts_with("/private_registry_connection_info") {
        set(p, "/private_registry_connection_info/0/username", json!("puller"))
    } else {
        p
    };
    set(p, at, json!(v))
}

/// An instantiate_end document whose request carries the params.
fn instantiate(p: Value) -> Value {
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": "instantiate_end",
           "request": {"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": p}},
           "vnf_instance": instance(), "grant_request": null, "grant_response": null,
           "tmp_csar_dir": "{dir}/pkg", "user_script_err_handling_data": {}})
}

/// A scale_start (SCALE_IN) whose params are the VnfInstance's kept ones (as Tacker v1 keeps
/// them): `vnf_instance.instantiatedVnfInfo.additionalParams`.
fn scale_in(p: Value) -> Value {
    let d = set(instantiate(params()), "/operation", json!("scale_start"));
    let d = set(d, "/request", json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    let d = set(d, "/vnf_instance/instantiatedVnfInfo/additionalParams", json!({"k8s_cluster_installation_param": p}));
    set(
        d,
        "/grant_request",
        json!({"removeResources": [{"id": "r", "type": "COMPUTE", "resource": {"resourceId": "vm-3"}}]}),
    )
}

/// A heal_end (SOL002) whose request repeats the params.
fn heal(p: Value) -> Value {
    let d = set(instantiate(params()), "/operation", json!("heal_end"));
    set(d, "/request", json!({"vnfcInstanceId": ["vnfc-3"], "additionalParams": {"k8s_cluster_installation_param": p}}))
}

/// A CNF instantiate (`_start`: the check; `_end`: the run) with item 0's helmparameter.
fn cnf(op: &str, helmparameter: Value) -> Value {
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": op,
           "request": {"flavourId": "simple", "additionalParams": {
               "use_helm": "True", "namespace": "cnf",
               "using_helm_install_param": [{"exthelmchart": "true", "helmreleasename": "vdu2",
                   "helmrepositoryname": "labrepo", "helmchartname": "nginxlab",
                   "exthelmrepo_url": "http://192.0.2.50/charts", "helmparameter": helmparameter}]}},
           "vnf_instance": {"id": "6c1f4b4e-0d2a-4f86-9d6c-3b9a7e5a1c02",
               "vimConnectionInfo": {"k8s": {"vimId": "v", "vimType": "kubernetes", "extra": {"helm_info": {
                   "masternode_ip": ["192.0.2.10"], "masternode_username": "ubuntu", "masternode_password": PW}}}}},
           "grant_request": null, "grant_response": null,
           "tmp_csar_dir": "{dir}/pkg", "user_script_err_handling_data": {}})
}

const INV: &str = "defaults: {known_hosts: '{dir}/kh'}\ngroups:\n  masterNode:\n    - {name: m1, ssh_ip: 192.0.2.11}\n  workerNode:\n    - {name: w1, ssh_ip: 192.0.2.21}\n";

const HOOK: [&str; 5] = ["hook", "--input", "{dir}/in.json", "--state-dir", "{dir}/st"];

/// A hook document refused, the message holding `want`; every case also offers the references
/// all the power the operator could give (`--secrets-dir /`, `--secret-env '*'`): a VNFM's
/// request still gets none.
fn tenant(name: &str, d: &Value, want: &str) -> Case {
    Case::rejected(format!("tenant_secrets/{name}"), &HOOK, want)
        .file("in.json", d.to_string())
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
        .arg(&["--secrets-dir", "/", "--secret-env", "*"])
        .env("MGMT_HOSTILE_TENANT_PW", "pw-from-the-controllers-env")
        .never(PW)
        .never("pw-from-the-controllers-env")
}

/// `instantiate-end` with the request file the operator names, `v` at `at` in the params.
fn operator(name: &str, at: &str, v: &str, want: &str) -> Case {
    let body = json!({"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param":
        set(params(), at, json!(v))}});
    Case::rejected(format!("tenant_secrets/{name}"), &INSTANTIATE_ARGS, want)
        .file("req.json", body.to_string())
        .file("inv.yaml", INV)
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
        .file("secrets/pw", "pw-in-the-secrets-dir\n")
        .file("elsewhere/pw", "pw-outside-the-secrets-dir\n")
        .env("MGMT_HOSTILE_TENANT_PW", "pw-from-the-controllers-env")
        .never("pw-in-the-secrets-dir")
        .never("pw-outside-the-secrets-dir")
        .never("pw-from-the-controllers-env")
}

pub fn cases() -> Vec<Case> {
    let field = |p: &str| format!("{ROOT}.{p}: ");
    let mut v = Vec::new();
    // Each password of the cluster params, in each place a hook reads them from.
    let spots = [
        ("master", "/master_node/password", "master_node.password"),
        ("worker", "/worker_node/password", "worker_node.password"),
        ("registry", "/private_registry_connection_info/0/password", "private_registry_connection_info[0].password"),
        ("storage", "/storage_server/password", "storage_server.password"),
    ];
    for (who, at, path) in spots {
        for (doc, build) in
            [("instantiate", instantiate as fn(Value) -> Value), ("scale_in_kept", scale_in), ("heal", heal)]
        {
            v.push(tenant(
                &format!("{doc}_{who}_env"),
                &build(params_with(at, "@env:MGMT_HOSTILE_TENANT_PW")),
                &format!("{}{REFUSED_ENV}", field(path)),
            ));
            v.push(tenant(
                &format!("{doc}_{who}_file"),
                &build(params_with(at, "@file:/etc/hostname")),
                &format!("{}{REFUSED_FILE}", field(path)),
            ));
        }
    }
    // An existing controller file and a missing one: the same words (the expected text is the
    // whole message after the field, and names no path).
    v.push(tenant(
        "file_missing_same_words",
        &instantiate(params_with("/master_node/password", "@file:/nonexistent/mgmt-driver/pw")),
        &format!("{}{REFUSED_FILE}", field("master_node.password")),
    ));
    v.push(tenant(
        "file_directory_same_words",
        &instantiate(params_with("/master_node/password", "@file:/etc")),
        &format!("{}{REFUSED_FILE}", field("master_node.password")),
    ));
    // Tacker v1's scale/heal override of the node password in the request.
    v.push(tenant(
        "scale_in_password_override",
        &set(scale_in(params()), "/request/additionalParams", json!({"worker_node_password": "@env:HOME"})),
        &format!("{}{REFUSED_ENV}", field("worker_node.password")),
    ));
    // A Helm value from the controller's environment: at the check and at the run.
    for op in ["instantiate_start", "instantiate_end"] {
        v.push(tenant(
            &format!("cnf_{op}_helmparameter_env"),
            &cnf(op, json!(["k=@env:HOME"])),
            &format!("additionalParams.using_helm_install_param[0].k: {REFUSED_ENV}"),
        ));
    }
    // The request file the operator names: references confined.
    let unusable = "' is not a readable regular file under an allowed secrets directory";
    v.extend([
        operator("cli_nothing_allowed", "/master_node/password", "@env:MGMT_HOSTILE_TENANT_PW", "--secrets-dir DIR"),
        operator("cli_nothing_allowed_file", "/master_node/password", "@file:{dir}/secrets/pw", "--secret-env"),
        operator("cli_env_not_allowed", "/master_node/password", "@env:MGMT_HOSTILE_TENANT_PW", "did not allow")
            .arg(&["--secret-env", "EDGE_*"]),
        operator("cli_env_allowed_but_unset", "/master_node/password", "@env:MGMT_HOSTILE_UNSET", "unset or empty")
            .arg(&["--secret-env", "MGMT_HOSTILE_*"]),
        operator("cli_file_outside_dir", "/master_node/password", "@file:{dir}/elsewhere/pw", unusable)
            .arg(&["--secrets-dir", "{dir}/secrets"]),
        operator("cli_file_missing_in_dir", "/master_node/password", "@file:{dir}/secrets/nope", unusable)
            .arg(&["--secrets-dir", "{dir}/secrets"]),
        operator("cli_file_is_the_dir", "/worker_node/password", "@file:{dir}/secrets", unusable)
            .arg(&["--secrets-dir", "{dir}/secrets"]),
        operator("cli_file_system_file", "/worker_node/password", "@file:/etc/hostname", unusable)
            .arg(&["--secrets-dir", "{dir}/secrets"]),
        operator("cli_file_symlink_leading_out", "/master_node/password", "@file:{dir}/secrets/link", unusable)
            .arg(&["--secrets-dir", "{dir}/secrets"])
            .link("secrets/link", "{dir}/elsewhere/pw"),
        operator(
            "cli_file_dotdot_leading_out",
            "/master_node/password",
            "@file:{dir}/secrets/../elsewhere/pw",
            unusable,
        )
        .arg(&["--secrets-dir", "{dir}/secrets"]),
        operator("cli_file_dirs_from_the_environment", "/master_node/password", "@file:{dir}/secrets/pw", unusable)
            .env("MGMT_DRIVER_SECRETS_DIR", "/nonexistent-a:/nonexistent-b"),
        operator("cli_bad_secret_env_rule", "/master_node/password", "plain", "--secret-env")
            .arg(&["--secret-env", "A-B"]),
    ]);
    // Allowed: a file in the secrets directory, also through a link that stays inside it (a
    // Kubernetes Secret volume's files are links into its `..data`), and an allowed variable.
    let accepted = |name: &str, v: &str| {
        let body = json!({"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param":
            set(set(params(), "/master_node/password", json!(v)), "/worker_node/password", json!("@env:MGMT_HOSTILE_TENANT_PW"))}});
        Case::accepted(format!("tenant_secrets/{name}"), &INSTANTIATE_ARGS, &["install_k8s_cluster.sh -m"], &[])
            .file("req.json", body.to_string())
            .file("inv.yaml", INV)
            .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
            .file("secrets/..data/pw", "pw-in-the-secrets-dir\n")
            .link("secrets/pw", "..data/pw")
            .env("MGMT_HOSTILE_TENANT_PW", "pw-from-the-controllers-env")
            .arg(&["--secrets-dir", "{dir}/secrets", "--secret-env", "MGMT_HOSTILE_TENANT_PW"])
            .never("pw-in-the-secrets-dir")
            .never("pw-from-the-controllers-env")
    };
    v.push(accepted("cli_file_in_dir_through_an_inner_link", "@file:{dir}/secrets/pw"));
    v.push(accepted("cli_file_in_dir", "@file:{dir}/secrets/..data/pw"));
    v
}
