//! Hostile state directories (issue 20): whoever can write the state directory but does not
//! hold the state key changes a recorded cluster document so that the next hook sends the
//! recorded node password elsewhere: an address changed, another instance's document (or one
//! of its sealed values) copied in, a password planted in clear, the MAC removed (a plain
//! document, as before sealing). A VNFM's hook (`mgmt-driver hook`, a SCALE_IN of vm-3) on such
//! a directory exits 2 naming the document and `/state_mac`, before anything is planned; the
//! same document untouched plans the drain.
//!
//! `state reseal`, the operator's upgrade of an earlier version's directory, is here too: its
//! plan lists what it would authenticate, and a changed authenticated document stops it.
//!
//! The documents are written by the real store, sealed under the test state key (the one every
//! run of the binary in these tests uses), and then changed as an attacker would.

use serde_json::{json, Value};

use crate::case::{recorded, set, Case};

const ID: &str = "6c1f4b4e-0d2a-4f86-9d6c-3b9a7e5a1c01";
const OTHER: &str = "0b7a3d2e-9c41-4e55-8f0a-2d6b1c9e7f10";
const PW: &str = "pw-hostile-state-3c1";
const OTHER_PW: &str = "pw-hostile-state-other";
const EVIL: &str = "203.0.113.66";

fn params(pw: &str) -> Value {
    json!({"script_path": "Scripts/install_k8s_cluster.sh", "vim_name": "kvim",
           "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1", "username": "ubuntu",
                           "password": pw, "cluster_cp_name": "masterNode_CP1"},
           "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP2", "username": "ubuntu", "password": pw}})
}

/// A cluster as instantiate_end records it: one master, two workers.
fn cluster_doc(id: &str, pw: &str) -> Value {
    let node = |role: &str, ip: &str, k8s: &str| json!({"role": role, "ssh_addr": ip, "nic_ip": ip, "k8s_name": k8s, "installed": true, "helm_installed": false});
    json!({"version": 1, "vnf_instance_id": id, "params": params(pw),
           "nodes": {"res-1": node("master", "192.0.2.11", "master11"), "res-2": node("worker", "192.0.2.12", "worker12"),
                     "res-3": node("worker", "192.0.2.13", "worker13")},
           "facts": {"server": "https://192.0.2.11:6443", "ca_pem": "PEM", "ca_hash": "ab", "cluster_ip": "192.0.2.11",
                     "main_master": "res-1"},
           "vim_connection_info": {"vim1": {"vimId": "v", "vimType": "kubernetes",
               "extra": {"helm_info": {"masternode_ip": ["192.0.2.11"], "masternode_username": "ubuntu"}}}},
           "bearer_token": "tok-hostile-state"})
}

/// `doc` as the store writes it for `id` (kind: the cluster's), under the test state key.
fn sealed(id: &str, doc: &Value) -> Value {
    serde_json::from_str(&recorded(id, "", doc)).expect("json")
}

/// A scale_start (SCALE_IN of vm-3) hook document for the recorded instance.
fn scale_in() -> Value {
    // The instance of the hook table (its id is ID), with the params kept as Tacker v1 keeps them.
    let inst = set(
        super::hook::instance(),
        "/instantiatedVnfInfo/additionalParams",
        json!({"k8s_cluster_installation_param": params(PW)}),
    );
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": "scale_start",
           "request": {"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1},
           "vnf_instance": inst,
           "grant_request": {"removeResources": [{"id": "r", "type": "COMPUTE", "resource": {"resourceId": "vm-3"}}]},
           "grant_response": null, "tmp_csar_dir": "{dir}/pkg", "user_script_err_handling_data": {}})
}

const ARGS: [&str; 5] = ["hook", "--input", "{dir}/in.json", "--state-dir", "{dir}/st"];

/// The state file the hook reads, as the message names it.
fn file() -> String {
    format!("st/{ID}.json")
}

fn with_state(c: Case, state: &Value) -> Case {
    c.file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
        .file("in.json", scale_in().to_string())
        .file(&file(), serde_json::to_string_pretty(state).expect("json"))
        .never(PW)
        .never(OTHER_PW)
}

/// `state` must be refused naming the file and `field` (a JSON pointer in it).
fn rejected(name: &str, state: &Value, field: &str) -> Case {
    with_state(Case::rejected(format!("tenant_state/{name}"), &ARGS, format!("{}: {field}", file())), state)
}

pub fn cases() -> Vec<Case> {
    let good = sealed(ID, &cluster_doc(ID, PW));
    let other = sealed(OTHER, &cluster_doc(OTHER, OTHER_PW));
    // What old versions planned from (exit 0, the drain run on the recorded master): a plain
    // document with a password the attacker chose.
    let mut downgraded = cluster_doc(ID, "pw-attacker");
    downgraded["vim_connection_info"]["vim1"]["extra"]["helm_info"]["masternode_ip"][0] = json!(EVIL);
    downgraded["nodes"]["res-1"]["ssh_addr"] = json!(EVIL);
    downgraded.as_object_mut().expect("object").remove("bearer_token");
    let pw_ptr = "/params/master_node/password";
    let reseal = ["state", "reseal", "--state-dir", "{dir}/st"];
    vec![
        // The operator's upgrade: a plan of `state reseal` lists an earlier version's document
        // (and the authenticated one as it is), and never blesses a changed one.
        Case::accepted(
            "tenant_state/reseal_plan_lists_an_earlier_document",
            &reseal,
            &["\"upgraded\":1", "old.json"],
            &[PW],
        )
        .file("st/old.json", r#"{"version": 1, "vnf_instance_id": "old", "nodes": {}}"#)
        .file(&file(), serde_json::to_string_pretty(&good).expect("json")),
        Case::rejected("tenant_state/reseal_refuses_a_changed_document", &reseal, format!("{}: /state_mac", file()))
            .file("st/old.json", r#"{"version": 1, "vnf_instance_id": "old", "nodes": {}}"#)
            .file(&file(), set(good.clone(), "/nodes/res-1/ssh_addr", json!(EVIL)).to_string())
            .never(PW),
        with_state(
            Case::accepted("tenant_state/untouched_plans_the_drain", &ARGS, &["kubectl drain worker13"], &[EVIL]),
            &good,
        ),
        rejected(
            "masternode_ip_changed",
            &set(good.clone(), "/vim_connection_info/vim1/extra/helm_info/masternode_ip/0", json!(EVIL)),
            "/state_mac",
        ),
        rejected("node_address_changed", &set(good.clone(), "/nodes/res-1/ssh_addr", json!(EVIL)), "/state_mac"),
        rejected("another_instance_s_document", &other, "/state_mac"),
        rejected(
            "another_instance_s_sealed_password",
            &set(good.clone(), pw_ptr, other.pointer(pw_ptr).expect("sealed").clone()),
            "/state_mac",
        ),
        rejected("password_planted_in_clear", &set(good.clone(), pw_ptr, json!("pw-planted-in-clear")), "/state_mac")
            .never("pw-planted-in-clear"),
        rejected("mac_removed_plain_document", &downgraded, "/state_mac: is missing"),
        rejected(
            "mac_stripped_sealed_document",
            &{
                let mut g = set(good.clone(), "/nodes/res-1/ssh_addr", json!(EVIL));
                g.as_object_mut().expect("object").remove("state_mac");
                g
            },
            "/state_mac: is missing",
        ),
    ]
}
