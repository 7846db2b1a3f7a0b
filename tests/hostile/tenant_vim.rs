//! Hostile VIM entries (issue 22): a VNFM's API user writes `vimConnectionInfo`, and with an
//! instance whose addresses stock Tacker did not record (dynamic ones), the hook would ask that
//! VIM's Keystone. The tenant must not make the controller connect where it chooses: no
//! operator allow-list, an endpoint not on it (the cloud's metadata service, a URL with
//! userinfo, one the environment variable does not list), a VNFC naming a Kubernetes entry,
//! a VM id that would add filters to Neutron's URL. Each is refused naming the field, before
//! anything is sent, and never shows the VIM password.

use serde_json::{json, Value};

use super::hook::{doc, ARGS, PW};
use crate::case::{remove, set, Case};

const VIM_PW: &str = "vim-pw-tenant-3c9e";
const FIELD: &str = "vimConnectionInfo.vim1.interfaceInfo.endpoint";
const ALLOWED: &str = "http://127.0.0.1:9/identity/v3";

/// The hook document with no recorded address (Tacker's `isDynamic`: no extCpInfo address)
/// and an OpenStack entry at `endpoint`.
fn dynamic(endpoint: &str) -> Value {
    let d = remove(doc(), "/vnf_instance/instantiatedVnfInfo/extCpInfo");
    set(
        d,
        "/vnf_instance/vimConnectionInfo",
        json!({"vim1": {"vimId": "v", "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3", "interfaceInfo": {"endpoint": endpoint},
            "accessInfo": {"username": "nfv", "password": VIM_PW, "region": "RegionOne", "project": "nfv",
                           "projectDomain": "Default", "userDomain": "Default"}}}),
    )
}

fn rejected(name: &str, d: &Value, field: &str) -> Case {
    Case::rejected(format!("tenant/vim_{name}"), &ARGS, field)
        .file("in.json", d.to_string())
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\nexit 0\n")
        .never(PW)
        .never(VIM_PW)
}

pub fn cases() -> Vec<Case> {
    let k8s_named = set(
        set(dynamic(ALLOWED), "/vnf_instance/vimConnectionInfo/k8s", json!({"vimType": "ETSINFV.HELM.V_3"})),
        "/vnf_instance/instantiatedVnfInfo/vnfcResourceInfo/0/computeResource/vimConnectionId",
        json!("k8s"),
    );
    let injected_vm = set(
        dynamic(ALLOWED),
        "/vnf_instance/instantiatedVnfInfo/vnfcResourceInfo/0/computeResource/resourceId",
        json!("vm-1&device_id=vm-of-another-tenant"),
    );
    vec![
        rejected("no_operator_allow_list", &dynamic(ALLOWED), FIELD),
        rejected("metadata_service", &dynamic("http://169.254.169.254/openstack"), FIELD)
            .arg(&["--vim-auth-url", ALLOWED]),
        rejected("userinfo_after_an_allowed_prefix", &dynamic(&format!("{ALLOWED}@169.254.169.254")), FIELD)
            .arg(&["--vim-auth-url", ALLOWED]),
        rejected("not_in_the_variables_list", &dynamic("http://192.0.2.99/identity/v3"), FIELD)
            .env("MGMT_DRIVER_VIM_AUTH_URLS", &format!("{ALLOWED},https://keystone.example/v3")),
        rejected("a_vnfc_names_a_kubernetes_entry", &k8s_named, "vimConnectionInfo.k8s.vimType")
            .arg(&["--vim-auth-url", ALLOWED]),
        rejected("vm_id_adds_a_filter", &injected_vm, "computeResource.resourceId").arg(&["--vim-auth-url", ALLOWED]),
    ]
}
