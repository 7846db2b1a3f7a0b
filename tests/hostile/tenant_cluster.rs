//! Hostile CNF requests that reach for another tenant's cluster (issue 20): a VNFM's API user
//! repeats a recorded cluster's `helm_info` with its credential reference in the form before
//! tokens, with a guessed token, with a reference that is not ours, or beside a password of its
//! own; or gives no credential at all, hoping for the conductor's ssh-agent. Each is refused
//! naming the field, before anything connects, and never shows the victim's password or token.
//! Accepted cases prove the owner's own reference works (and stays masked) and that the
//! operator keeps what it had: naming a cluster recorded before tokens, and the ssh-agent on
//! its own command line.
//!
//! The victim's cluster is a state document written into the case's store, as
//! `instantiate-end` records one: sealed and authenticated by the store under the case's key
//! (`case::recorded`).

use serde_json::{json, Value};

use crate::case::{set, Case, NOWHERE};

/// The victim's master password and token: never in any output.
const VICTIM_PW: &str = "pw-victim-tenant-a-77";
const TOKEN: &str = "5b3f0c9e1d2a48766e5f4a3b2c1d0e9f8a7b6c5d4e3f20110f1e2d3c4b5a6978";
/// The victim's master: nothing answers there, so a case that connected would fail.
const VICTIM_MASTER: &str = "192.0.2.21";
const FIELD: &str = "extra.helm_info.masternode_credential_ref";

/// Cluster `id` as `instantiate-end` records it: its master, its password, and (with `token`)
/// the token that binds its reference; without, a record written before tokens.
fn cluster(id: &str, token: Option<&str>) -> String {
    let reference = match token {
        Some(t) => format!("mgmt-driver-state:{id}:{t}"),
        None => format!("mgmt-driver-state:{id}"),
    };
    let mut doc = json!({"version": 1, "vnf_instance_id": id,
        "params": {"master_node": {"username": "root", "password": VICTIM_PW}},
        "vim_connection_info": {"id": "c", "vimId": "v", "vimType": "kubernetes", "extra": {"vim_name": "kvim",
            "helm_info": {"masternode_ip": [VICTIM_MASTER], "masternode_username": "root",
                          "masternode_credential_ref": reference}}}});
    if let Some(t) = token {
        doc["credential_ref_token"] = json!(t);
    }
    crate::case::recorded(id, "", &doc)
}

/// helm_info naming the victim's master, with `extra` keys (a reference, a password).
fn helm_info(extra: Value) -> Value {
    let mut h = json!({"masternode_ip": [VICTIM_MASTER], "masternode_username": "root"});
    for (k, v) in extra.as_object().expect("an object") {
        h[k] = v.clone();
    }
    h
}

/// A CNF instantiate request (one chart from a repository) whose vimConnectionInfo carries `hi`.
fn request(hi: Value) -> Value {
    json!({"flavourId": "simple", "additionalParams": {"use_helm": "True", "namespace": "cnf",
        "using_helm_install_param": [{"exthelmchart": "true", "helmreleasename": "vdu2",
            "helmrepositoryname": "labrepo", "helmchartname": "nginxlab",
            "exthelmrepo_url": "http://192.0.2.50/charts", "helmchartversion": "0.1.0"}]},
        "vimConnectionInfo": {"k8s": {"vimId": "v", "vimType": "kubernetes", "extra": {"helm_info": hi}}}})
}

/// Tenant B's instantiate_end hook document, as its VNFM sends it.
fn doc(hi: Value) -> Value {
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": "instantiate_end", "request": request(hi),
           "vnf_instance": {"id": "tenant-b-cnf"}, "grant_request": null, "grant_response": null,
           "tmp_csar_dir": "{dir}/pkg", "user_script_err_handling_data": {}})
}

const HOOK: [&str; 5] = ["hook", "--input", "{dir}/in.json", "--state-dir", "{dir}/st"];

/// The operator's `cnf instantiate --request`, without naming a cluster.
const CLI: [&str; 8] = [
    "cnf",
    "instantiate",
    "--vnf-instance-id",
    "tenant-b-cnf",
    "--state-dir",
    "{dir}/st",
    "--request",
    "{dir}/req.json",
];

/// A case over a store holding victim-a (with a token) and victim-old (recorded before tokens).
fn with_clusters(c: Case) -> Case {
    c.file("st/victim-a.json", cluster("victim-a", Some(TOKEN)))
        .file("st/victim-old.json", cluster("victim-old", None))
        .file("pkg/Definitions/x.yaml", "x: 1\n")
        .never(VICTIM_PW)
        .never(TOKEN)
}

fn hook_rejected(name: &str, hi: Value, field: &str) -> Case {
    with_clusters(Case::rejected(format!("tenant/{name}"), &HOOK, field).file("in.json", doc(hi).to_string()))
}

pub fn cases() -> Vec<Case> {
    let old_ref = json!({"masternode_credential_ref": "mgmt-driver-state:victim-a"});
    let guessed = json!({"masternode_credential_ref": format!("mgmt-driver-state:victim-a:{}", "0".repeat(64))});
    let own = json!({"masternode_credential_ref": format!("mgmt-driver-state:victim-a:{TOKEN}")});
    vec![
        // (i) The victim's helm_info repeated with the reference an older driver wrote.
        hook_rejected("hook_old_ref", helm_info(old_ref.clone()), FIELD),
        hook_rejected(
            "hook_old_ref_of_a_cluster_without_token",
            helm_info(json!({
            "masternode_credential_ref": "mgmt-driver-state:victim-old"})),
            FIELD,
        ),
        // (ii) A guessed token; an unknown cluster gives the same words (unit-tested).
        hook_rejected("hook_wrong_token", helm_info(guessed.clone()), FIELD),
        hook_rejected(
            "hook_unknown_cluster",
            helm_info(json!({"masternode_credential_ref": format!("mgmt-driver-state:victim-z:{TOKEN}")})),
            FIELD,
        ),
        hook_rejected(
            "hook_token_path",
            helm_info(json!({"masternode_credential_ref": "mgmt-driver-state:../st/victim-a:x"})),
            FIELD,
        ),
        hook_rejected("hook_ref_not_ours", helm_info(json!({"masternode_credential_ref": "vault:victim-a"})), FIELD),
        // A password of its own does not make a wrong reference right.
        hook_rejected(
            "hook_wrong_token_beside_a_password",
            helm_info(set(guessed, "/masternode_password", json!("mine"))),
            FIELD,
        ),
        // No credential at all: the conductor's ssh-agent is not offered to a tenant's address.
        hook_rejected(
            "hook_no_credential_no_agent",
            json!({"masternode_ip": [NOWHERE], "masternode_username": "ubuntu"}),
            "extra.helm_info.masternode_password",
        ),
        // The operator's command line with a forwarded body: the reference is checked all the same.
        with_clusters(
            Case::rejected("tenant/cli_request_old_ref", &CLI, FIELD)
                .file("req.json", request(helm_info(old_ref)).to_string()),
        ),
        // (iii) The owner's own reference, from its instantiate response: used, and masked.
        with_clusters(
            Case::accepted("tenant/hook_own_ref", &HOOK, &[VICTIM_MASTER], &[])
                .file("in.json", doc(helm_info(own)).to_string()),
        ),
        // The operator keeps the agent on its own command line...
        with_clusters(Case::accepted("tenant/cli_no_credential_keeps_the_agent", &CLI, &[NOWHERE], &[]).file(
            "req.json",
            request(json!({"masternode_ip": [NOWHERE], "masternode_username": "ubuntu"})).to_string(),
        )),
        // ...and names a cluster recorded before tokens, on the command line or in the options.
        with_clusters(Case::accepted(
            "tenant/cli_operator_names_a_cluster_without_token",
            &[
                "cnf",
                "status",
                "--release",
                "vdu2",
                "--vnf-instance-id",
                "cnf-x",
                "--state-dir",
                "{dir}/st",
                "--cluster-instance",
                "victim-old",
            ],
            &[VICTIM_MASTER],
            &[],
        )),
        with_clusters(
            Case::accepted("tenant/hook_options_name_a_cluster_without_token", &HOOK, &[VICTIM_MASTER], &[]).file(
                "in.json",
                set(doc(helm_info(json!({}))), "/options", json!({"cluster_instance": "victim-old"})).to_string(),
            ),
        ),
    ]
}
