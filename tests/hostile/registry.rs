//! Hostile inputs to `private_registry_connection_info` (src/cluster/registry.rs): each case is
//! Tacker's v1 sample instantiate body with one registry list, planned with `--dry-run`. A bad
//! entry is refused naming its JSON path; a good one with a login is planned without the
//! password, or its base64 form, anywhere in the output.

use serde_json::{json, Value};

use crate::case::{set, Case};

const P: &str = "/additionalParams/k8s_cluster_installation_param";
const REG_PW: &str = "Reg-pw-hostile-9";
/// base64("puller:Reg-pw-hostile-9"): what kubelet's config.json holds.
const REG_AUTH: &str = "cHVsbGVyOlJlZy1wdy1ob3N0aWxlLTk=";

const INV: &str = "defaults: {known_hosts: '{dir}/kh'}\ngroups:\n  master_instance:\n    - {name: m1, ssh_ip: 192.0.2.11}\n  worker_instance:\n    - {name: w1, ssh_ip: 192.0.2.21}\n";

fn body(registries: Value) -> Value {
    let text = include_str!("../data/tacker/v1/k8s-cluster/simple_kubernetes_param_file.json");
    let v: Value = serde_json::from_str(text).expect("Tacker sample");
    set(v, &format!("{P}/private_registry_connection_info"), registries)
}

fn case(registries: Value, c: impl FnOnce(&[&str]) -> Case) -> Case {
    let args = crate::case::INSTANTIATE_ARGS;
    c(&args)
        .never(REG_PW)
        .never(REG_AUTH)
        .file("inv.yaml", INV)
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\n")
        .file("pkg/Files/ca.crt", "x")
        .file("req.json", serde_json::to_string_pretty(&body(registries)).expect("json"))
}

fn rejected(name: &str, registries: Value, field: &str) -> Case {
    let full = format!("private_registry_connection_info{field}");
    case(registries, |a| Case::rejected(format!("registry/{name}"), a, full))
}

fn one(extra: Value) -> Value {
    let mut r = json!({"connection_type": "1", "server": "reg.example:5000"});
    r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!([r])
}

pub fn cases() -> Vec<Case> {
    vec![
        rejected("type-2", one(json!({"connection_type": "2"})), "[0].connection_type"),
        rejected("type-int-2", one(json!({"connection_type": 2})), "[0].connection_type"),
        rejected("type-missing", json!([{"server": "reg"}]), "[0].connection_type: is required"),
        rejected("server-missing", json!([{"connection_type": "1"}]), "[0].server: is required"),
        rejected("server-empty", one(json!({"server": ""})), "[0].server"),
        rejected("cert-dot-dot", one(json!({"certificate_path": "Files/../../etc/shadow"})), "[0].certificate_path"),
        rejected("cert-absolute", one(json!({"certificate_path": "/etc/ssl/ca.crt"})), "[0].certificate_path"),
        rejected("cert-not-in-package", one(json!({"certificate_path": "Files/none.crt"})), "[0].certificate_path"),
        rejected(
            "cert-for-http",
            one(json!({"connection_type": "0", "certificate_path": "Files/ca.crt"})),
            "[0].certificate_path",
        ),
        rejected("hosts-name-first", one(json!({"hosts_string": "reg.example 10.0.0.9"})), "[0].hosts_string"),
        rejected("hosts-newline", one(json!({"hosts_string": "10.0.0.9 reg\n10.0.0.1 evil"})), "[0].hosts_string"),
        rejected("hosts-shell", one(json!({"hosts_string": "10.0.0.9 $(reboot)"})), "[0].hosts_string"),
        rejected(
            "user-without-password",
            one(json!({"username": "puller"})),
            "[0].password: is required with username",
        ),
        rejected("password-without-user", one(json!({"password": REG_PW})), "[0].username: is required with password"),
        rejected("user-with-colon", one(json!({"username": "a:b", "password": REG_PW})), "[0].username"),
        rejected("password-not-string", one(json!({"username": "u", "password": 12345})), "[0].password"),
        rejected(
            "password-env-unset",
            one(json!({"username": "u", "password": "@env:MGMT_HOSTILE_UNSET_REG_PW"})),
            "[0].password: refers to environment variable MGMT_HOSTILE_UNSET_REG_PW",
        )
        // The operator allows the variable (a request file on the command line: issue 20).
        .env("MGMT_DRIVER_SECRET_ENV", "MGMT_HOSTILE_*"),
        rejected(
            "same-server-twice",
            json!([{"connection_type": "0", "server": "r"}, {"connection_type": "1", "server": "r"}]),
            "[1].server",
        ),
        case(
            json!([
                {"connection_type": "1", "server": "reg.example:5000", "username": "puller", "password": REG_PW,
                 "certificate_path": "Files/ca.crt", "hosts_string": "10.0.0.9 reg.example"},
                {"connection_type": 0, "server": "10.0.0.8:5000"}
            ]),
            |a| {
                Case::accepted(
                    "registry/https-login-accepted",
                    a,
                    &["registry_apply.sh", "env.registry-auth", "-C reg.example:5000 -s 10.0.0.8:5000"],
                    &[REG_PW, REG_AUTH],
                )
            },
        ),
        case(json!([{"connection_type": "1", "server": "reg.example"}]), |a| {
            Case::accepted(
                "registry/anonymous-accepted",
                a,
                &["registry_apply.sh", "-s reg.example"],
                &["env.registry-auth"],
            )
        }),
    ]
}
