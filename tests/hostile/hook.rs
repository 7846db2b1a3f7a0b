//! Hostile VNFM hook documents (`mgmt-driver hook`, docs/hook-protocol.md): a wrong version or
//! operation, an instance id that is a path, options a VNFM's API user must not set (state,
//! host keys, kubeconfig, an inventory outside the package; every other one is in
//! `tenant_options.rs`), VNFC addresses and ids that are shell, grants and heal requests naming
//! VMs the instance does not have, bombs. Accepted cases prove the node password never shows
//! and Tacker v2's own keys pass through.

use serde_json::{json, Value};

use crate::case::{remove, set, Case};

pub(crate) const PW: &str = "pw-hostile-hook-9f2";

/// A VNFC of a Tacker v2 instance, its address on an external CP (as Tacker v2 keeps it).
fn vnfc(i: u32, vdu: &str, cp: &str, ip: &str) -> (Value, Value, Value) {
    (
        json!({"id": format!("res-{i}"), "vduId": vdu, "computeResource": {"resourceId": format!("vm-{i}")},
               "vnfcCpInfo": [{"id": format!("cp-{i}"), "cpdId": cp, "vnfExtCpId": format!("ext-{i}")}]}),
        json!({"id": format!("ext-{i}"), "cpdId": cp, "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
               "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}]}),
        json!({"id": format!("vnfc-{i}"), "vduId": vdu, "vnfcResourceInfoId": format!("res-{i}")}),
    )
}

/// A Tacker v2 instance of 1 master and 2 workers (the tenant tables use it too).
pub(crate) fn instance() -> Value {
    let parts = [
        vnfc(1, "masterNode", "masterNode_CP1", "192.0.2.11"),
        vnfc(2, "workerNode", "workerNode_CP2", "192.0.2.12"),
        vnfc(3, "workerNode", "workerNode_CP2", "192.0.2.13"),
    ];
    json!({"id": "6c1f4b4e-0d2a-4f86-9d6c-3b9a7e5a1c01",
           "vimConnectionInfo": {"vim1": {"vimId": "v", "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3"}},
           "instantiatedVnfInfo": {"flavourId": "simple",
               "vnfcResourceInfo": parts.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
               "extCpInfo": parts.iter().map(|p| p.1.clone()).collect::<Vec<_>>(),
               "vnfcInfo": parts.iter().map(|p| p.2.clone()).collect::<Vec<_>>()}})
}

fn params() -> Value {
    json!({"script_path": "Scripts/install_k8s_cluster.sh", "vim_name": "kvim",
           "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1", "username": "ubuntu",
                           "password": PW, "cluster_cp_name": "masterNode_CP1"},
           "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP2", "username": "ubuntu", "password": PW}})
}

/// An instantiate_end document; `{dir}` is the case's directory.
pub(crate) fn doc() -> Value {
    json!({"apiVersion": "mgmt-driver.hook/v1", "operation": "instantiate_end",
           "request": {"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": params(), "x": 1}},
           "vnf_instance": instance(), "grant_request": null, "grant_response": null,
           "tmp_csar_dir": "{dir}/pkg", "user_script_err_handling_data": {}})
}

fn scale_in() -> Value {
    let d = set(doc(), "/operation", json!("scale_start"));
    let d = set(d, "/request", json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}));
    // Tacker v2 repeats the params in a scale; here they are the instance's (as v1 keeps them).
    let kept = json!({"k8s_cluster_installation_param": params()});
    let d = set(d, "/vnf_instance/instantiatedVnfInfo/additionalParams", kept);
    set(
        d,
        "/grant_request",
        json!({"removeResources": [{"id": "r", "type": "COMPUTE", "resource": {"resourceId": "vm-3"}}]}),
    )
}

fn heal(ids: Value) -> Value {
    let d = set(doc(), "/operation", json!("heal_end"));
    set(d, "/request", json!({"vnfcInstanceId": ids, "additionalParams": {"k8s_cluster_installation_param": params()}}))
}

pub(crate) const ARGS: [&str; 5] = ["hook", "--input", "{dir}/in.json", "--state-dir", "{dir}/st"];

fn with_package(c: Case) -> Case {
    c.file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n").never(PW)
}

fn rejected(name: &str, d: &Value, field: &str) -> Case {
    with_package(Case::rejected(format!("hook_{name}"), &ARGS, field).file("in.json", d.to_string()))
}

fn accepted(name: &str, d: &Value, shown: &[&str]) -> Case {
    with_package(Case::accepted(format!("hook_{name}"), &ARGS, shown, &[PW]).file("in.json", d.to_string()))
}

pub fn cases() -> Vec<Case> {
    let meta_addr = |ip: &str| {
        let d = remove(doc(), "/vnf_instance/instantiatedVnfInfo/extCpInfo/0");
        set(d, "/vnf_instance/metadata", json!({"mgmt_driver_addresses": {"vm-1": {"masterNode_CP1": ip}}}))
    };
    vec![
        rejected("api_version", &set(doc(), "/apiVersion", json!("mgmt-driver.hook/v2")), "apiVersion"),
        rejected("operation_unknown", &set(doc(), "/operation", json!("instantiate_now")), "operation"),
        rejected("operation_shell", &set(doc(), "/operation", json!("$(reboot)_end")), "operation"),
        rejected("no_instance_id", &remove(doc(), "/vnf_instance/id"), "vnf_instance.id"),
        rejected("instance_id_path", &set(doc(), "/vnf_instance/id", json!("../../etc/cron.d/x")), "vnf_instance.id"),
        rejected("request_not_object", &set(doc(), "/request", json!("rm -rf /")), "request"),
        rejected("vnfm_unknown", &set(doc(), "/vnfm", json!("osm")), "vnfm"),
        rejected("option_typo", &set(doc(), "/options", json!({"inventroy": "x"})), "inventroy"),
        rejected(
            "params_state_dir",
            &set(doc(), "/request/additionalParams/mgmt_driver", json!({"state_dir": "/etc"})),
            "additionalParams.mgmt_driver.state_dir",
        ),
        rejected(
            "params_kubeconfig_out",
            &set(doc(), "/request/additionalParams/mgmt_driver", json!({"kubeconfig_out": "/root/.kube/config"})),
            "additionalParams.mgmt_driver.kubeconfig_out",
        ),
        rejected(
            "params_inventory_outside_package",
            &set(doc(), "/request/additionalParams/mgmt_driver", json!({"inventory": "../../../etc/shadow"})),
            "additionalParams.mgmt_driver.inventory",
        ),
        rejected(
            "params_inventory_absolute",
            &set(doc(), "/request/additionalParams/mgmt_driver", json!({"inventory": "/etc/passwd"})),
            "additionalParams.mgmt_driver.inventory",
        ),
        rejected(
            "neither_cluster_nor_cnf",
            &set(doc(), "/request/additionalParams", json!({"foo": 1})),
            "additionalParams",
        ),
        rejected(
            "vnfc_address_shell",
            &set(
                doc(),
                "/vnf_instance/instantiatedVnfInfo/extCpInfo/0/cpProtocolInfo/0/ipOverEthernet/ipAddresses/0/addresses/0",
                json!("192.0.2.11;reboot"),
            ),
            "masterNode_CP1",
        ),
        rejected("metadata_address_shell", &meta_addr("$(reboot)"), "not an IP address"),
        rejected(
            "vnfc_id_shell",
            &set(doc(), "/vnf_instance/instantiatedVnfInfo/vnfcResourceInfo/1/id", json!("w;reboot")),
            "a VNFC id is letters",
        ),
        rejected(
            "grant_unknown_vm",
            &set(scale_in(), "/grant_request/removeResources/0/resource/resourceId", json!("vm-404")),
            "removeResources[0].resource.resourceId",
        ),
        rejected("scale_in_no_grant", &set(scale_in(), "/grant_request", Value::Null), "--node"),
        rejected("heal_unknown_vnfc", &heal(json!(["vnfc-404"])), "vnfcInstanceId"),
        rejected("install_timeout_bad", &set(doc(), "/options", json!({"install_timeout": "forever"})), "install_timeout"),
        with_package(Case::rejected("hook_deep_nesting", &ARGS, "nested deeper").file(
            "in.json",
            doc().to_string().replacen("\"x\":1", &format!("\"x\":{}{}", "[".repeat(200), "]".repeat(200)), 1),
        )),
        with_package(
            Case::rejected("hook_not_json", &ARGS, "(document)").file("in.json", "operation=instantiate_end\n"),
        ),
        with_package(
            Case::rejected("hook_huge", &ARGS, "larger than 16 MiB")
                .file("in.json", format!("{{\"x\": \"{}\"}}", "a".repeat(17 << 20))),
        ),
        accepted("instantiate_v2_instance", &doc(), &["kubernetes_kvim", "ETSINFV.KUBERNETES.V_1", "\"endpoint\":\"https://192.0.2.11:6443\""]),
        accepted(
            "kubeconfig_out_planned",
            &set(doc(), "/options", json!({"kubeconfig_out": "{dir}/kc.yaml"})),
            &["\"kubeconfig\":\"", "/kc.yaml\""],
        ),
        rejected(
            "kubeconfig_out_no_directory",
            &set(doc(), "/options", json!({"kubeconfig_out": "{dir}/missing/kc.yaml"})),
            "kubeconfig",
        ),
        accepted("instantiate_metadata_address", &meta_addr("192.0.2.21"), &["192.0.2.21"]),
        accepted("scale_in_from_grant", &scale_in(), &["\"removed\":[\"res-3\"]"]),
        accepted(
            "heal_through_vnfc_info",
            &set(heal(json!(["vnfc-2"])), "/operation", json!("heal_start")),
            &["\"removed\":[\"res-2\"]"],
        ),
        accepted(
            "scale_rollback_takes_out_what_scale_end_joined",
            &set(
                set(scale_in(), "/operation", json!("scale_rollback_start")),
                "/user_script_err_handling_data",
                json!({"mgmt_driver": {"operation": "scale_end", "finished": false, "joined": ["res-3"], "removed": []}}),
            ),
            &["\"removed\":[\"res-3\"]", "drain"],
        ),
        accepted(
            "scale_rollback_nothing_joined",
            &set(scale_in(), "/operation", json!("scale_rollback_start")),
            &["the scale-out joined no worker"],
        ),
        accepted(
            "instantiate_rollback_unrecorded",
            &set(doc(), "/operation", json!("instantiate_rollback_start")),
            &["no cluster was recorded; nothing to forget"],
        ),
        accepted(
            "modify_information_nothing_to_do",
            &set(doc(), "/operation", json!("modify_information_end")),
            &["nothing to do for this operation"],
        ),
        accepted(
            "terminate_unrecorded_nothing_to_do",
            &set(remove(doc(), "/request/additionalParams"), "/operation", json!("terminate_end")),
            &["nothing is recorded for VNF instance"],
        ),
        accepted(
            "password_with_shell",
            &set(doc(), "/request/additionalParams/k8s_cluster_installation_param/master_node/password", json!(format!("{PW}';reboot;'"))),
            &["instantiate_end"],
        ),
    ]
}
