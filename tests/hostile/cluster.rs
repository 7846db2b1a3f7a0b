//! Hostile inputs to the cluster hooks (instantiate-end, heal-*, scale-*, terminate-end): the
//! request body and its `k8s_cluster_installation_param`, the VnfInstance, the instance id, the
//! package paths and the request file itself. Every case starts from Tacker's own v1 sample
//! body (tests/data/tacker) and changes one thing.

use serde_json::{json, Value};

use crate::case::{remove, set, Case};

const P: &str = "/additionalParams/k8s_cluster_installation_param";
const PW: &str = "pw-hostile-cluster";

/// Tacker's v1 simple instantiate body, with a password that must never show.
fn base() -> Value {
    let text = include_str!("../data/tacker/v1/k8s-cluster/simple_kubernetes_param_file.json");
    let v: Value = serde_json::from_str(text).expect("Tacker sample");
    let v = set(v, &format!("{P}/master_node/password"), json!(PW));
    set(v, &format!("{P}/worker_node/password"), json!(PW))
}

/// One master and one worker nowhere, in the sample's groups; a VIP for HA cases.
const INV: &str = "defaults: {known_hosts: '{dir}/kh'}\ngroups:\n  master_instance:\n    - {name: m1, ssh_ip: 192.0.2.11}\n  worker_instance:\n    - {name: w1, ssh_ip: 192.0.2.21}\n";

/// `op` with the request `req` (none for terminate without a body) and extra flags.
fn hook(name: &str, op: &str, req: Option<&Value>, extra: &[&str], expect: Expect) -> Case {
    let mut args = vec![op, "-i", "{dir}/inv.yaml", "--package-dir", "{dir}/pkg", "--state-dir", "{dir}/state"];
    if req.is_some() {
        args.extend(["--request", "{dir}/req.json"]);
    }
    if !extra.iter().any(|a| a.starts_with("--vnf-instance")) {
        args.extend(["--vnf-instance-id", "i1"]);
    }
    args.extend(extra);
    let c = match expect {
        Expect::Rejected(field) => Case::rejected(format!("cluster/{name}"), &args, field),
        Expect::Accepted(shown) => {
            Case::accepted(format!("cluster/{name}"), &args, shown, &[PW, "password1", "password2"])
        }
    };
    let c = c
        .never(PW)
        .never("password1")
        .never("password2")
        .file("inv.yaml", INV)
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\n")
        .file("pkg/Scripts/install_helm.sh", "#!/bin/sh\n")
        .file("pkg/Files/ca.crt", "x");
    match req {
        Some(r) => c.file("req.json", serde_json::to_string_pretty(r).expect("json")),
        None => c,
    }
}

enum Expect<'a> {
    Rejected(&'a str),
    Accepted(&'a [&'a str]),
}

/// instantiate-end with `ptr` (under the install param) set to `v`, refused naming `field`.
fn param(name: &str, ptr: &str, v: Value, field: &str) -> Case {
    hook(name, "instantiate-end", Some(&set(base(), &format!("{P}{ptr}"), v)), &[], Expect::Rejected(field))
}

/// instantiate-end with a raw request file.
fn raw_request(name: &str, body: impl Into<Vec<u8>>, field: &str) -> Case {
    hook(name, "instantiate-end", None, &["--request", "{dir}/req.json"], Expect::Rejected(field))
        .file("req.json", body)
}

/// A VnfInstance whose one master VNFC has `id` and the addresses given (no inventory).
fn vnf_instance(id: &str, ssh: &str, vip: &str) -> String {
    let cp = |cpd: &str, ip: &str| {
        json!({"cpdId": cpd, "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
        "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}]})
    };
    json!({"id": "i1", "instantiatedVnfInfo": {"vnfcResourceInfo": [
        {"id": id, "vduId": "master_instance", "vnfcCpInfo": [cp("masterNode_CP1", ssh), cp("vip_CP", vip)]}]}})
    .to_string()
}

fn from_instance(name: &str, id: &str, ssh: &str, vip: &str, field: &str) -> Case {
    let req = set(base(), &format!("{P}/master_node/cluster_cp_name"), json!("vip_CP"));
    let args = [
        "instantiate-end",
        "--package-dir",
        "{dir}/pkg",
        "--state-dir",
        "{dir}/state",
        "--request",
        "{dir}/req.json",
        "--vnf-instance",
        "{dir}/inst.json",
    ];
    Case::rejected(format!("cluster/{name}"), &args, field)
        .file("req.json", serde_json::to_string(&req).expect("json"))
        .file("inst.json", vnf_instance(id, ssh, vip))
        .never(PW)
        .file("pkg/Scripts/install_k8s_cluster.sh", "#!/bin/sh\n")
}

pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // script_environment: nothing that runs code as root on every node, no pins.
    for k in [
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PATH",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "HOME",
        "TMPDIR",
        "GCONV_PATH",
        "APT_CONFIG",
        "GIT_SSH_COMMAND",
        "PYTHONPATH",
        "PERL5OPT",
        "SUDO_ASKPASS",
        "HTTPS_PROXY",
        "K8S_KEYRING_SHA256",
        "K8S_KEY_URL",
        "CALICO_URL",
        "CALICO_SHA256",
        "HELM_BASE_URL",
        "HELM_SHA256_AMD64",
        "HELM_SHA256_ARM64",
        "PAUSE_IMAGE",
        "K8S_JOIN_TOKEN",
        "K8S_CERT_KEY",
        "K8S_OFFLINE_DIR",
        "HTTP_PRIVATE_REGISTRIES",
        "KUBECONFIG",
    ] {
        v.push(param(
            &format!("script-env-{}", k.to_lowercase().replace('_', "-")),
            &format!("/script_environment/{k}"),
            json!("x"),
            &format!("script_environment.{k}: may not be set"),
        ));
    }
    for (name, k) in [("lower-case", "http_proxy"), ("dash", "A-B"), ("newline", "A\nB"), ("leading-digit", "1A")] {
        v.push(param(
            &format!("script-env-name-{name}"),
            &format!("/script_environment/{k}"),
            json!("x"),
            "upper case",
        ));
    }
    v.extend([
        param("script-env-value-number", "/script_environment/X", json!(1), "script_environment.X: must be a string"),
        param("script-env-value-nul", "/script_environment/X", json!("a\0b"), "without NUL"),
        param("script-env-value-huge", "/script_environment/X", json!("x".repeat(5000)), "at most 4096"),
        param("script-env-not-an-object", "/script_environment", json!("BASH_ENV=/tmp/x"), "script_environment"),
    ]);
    // Registries: a server names a directory on every node.
    for (name, server) in [
        ("dot-dot", ".."),
        ("dot", "."),
        ("parent-path", "../../etc"),
        ("absolute", "/etc"),
        ("path", "reg/x"),
        ("option", "-reg"),
        ("port-zero", "reg:0"),
        ("port-too-big", "reg:99999"),
        ("url", "http://reg"),
        ("shell", "reg; id"),
        ("fullwidth", "ｒｅｇ"),
    ] {
        v.push(param(
            &format!("registry-server-{name}"),
            "/private_registry_connection_info",
            json!([{"connection_type": "0", "server": server}]),
            "private_registry_connection_info[0].server",
        ));
    }
    let reg = |extra: Value| {
        let mut r = json!({"connection_type": "0", "server": "reg:5000"});
        r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!([r])
    };
    v.extend([
        param(
            "registry-type-2",
            "/private_registry_connection_info",
            reg(json!({"connection_type": "2"})),
            "connection_type",
        ),
        param(
            "registry-type-bool",
            "/private_registry_connection_info",
            reg(json!({"connection_type": true})),
            "connection_type",
        ),
        param(
            "registry-hosts-not-ip",
            "/private_registry_connection_info",
            reg(json!({"hosts_string": "x y"})),
            "hosts_string",
        ),
        param(
            "registry-hosts-option",
            "/private_registry_connection_info",
            reg(json!({"hosts_string": "10.0.0.1 -evil"})),
            "hosts_string",
        ),
        param(
            "password-env-reference-unset",
            "/master_node/password",
            json!("@env:MGMT_HOSTILE_UNSET_PW"),
            "master_node.password: refers to environment variable MGMT_HOSTILE_UNSET_PW, which is unset",
        )
        // The operator allows these variables (a request file on the command line: issue 20).
        .env("MGMT_DRIVER_SECRET_ENV", "MGMT_HOSTILE_*"),
        param(
            "password-file-reference-relative",
            "/worker_node/password",
            json!("@file:pw.txt"),
            "worker_node.password: '@file:pw.txt' must be an absolute path",
        ),
        param("registry-password", "/private_registry_connection_info", reg(json!({"password": "p"})), "[0].username"),
        param(
            "registry-cert-escapes",
            "/private_registry_connection_info",
            reg(json!({"certificate_path": "../ca.crt"})),
            "certificate_path",
        ),
        param("registry-not-a-list", "/private_registry_connection_info", json!({"server": "r"}), "must be an array"),
    ]);
    // Node logins.
    for (name, user) in [
        ("option", "-oProxyCommand=sh"),
        ("semicolon", "root;id"),
        ("space", "a b"),
        ("newline", "ro\not"),
        ("empty", " "),
    ] {
        v.push(param(&format!("master-username-{name}"), "/master_node/username", json!(user), "master_node.username"));
    }
    v.extend([
        param("worker-username-substitution", "/worker_node/username", json!("$(id)"), "worker_node.username"),
        param("password-a-number", "/master_node/password", json!(5), "master_node.password"),
        param("aspect-newline", "/master_node/aspect_id", json!("a\nb"), "master_node.aspect_id"),
        param("aspect-path", "/worker_node/aspect_id", json!("../x"), "worker_node.aspect_id"),
        param("aspect-unknown-group", "/worker_node/aspect_id", json!("no_such"), "worker_node.aspect_id"),
        param("aspect-and-vdu", "/master_node/vdu_id", json!("m"), "master_node.vdu_id"),
        param("ssh-cp-substitution", "/master_node/ssh_cp_name", json!("$(id)"), "master_node.ssh_cp_name"),
        param("cluster-cp-semicolon", "/master_node/cluster_cp_name", json!("x;y"), "master_node.cluster_cp_name"),
        param("pod-cidr-prefix", "/master_node/pod_cidr", json!("10.0.0.0/33"), "master_node.pod_cidr"),
        param("pod-cidr-shell", "/master_node/pod_cidr", json!("10.0.0.0/8; reboot"), "master_node.pod_cidr"),
        param("cluster-cidr-v6-prefix", "/master_node/cluster_cidr", json!("fd00::/129"), "master_node.cluster_cidr"),
        param("proxy-url-shell", "/proxy/http_proxy", json!("http://u:proxy-pw@p:1 $(id)"), "proxy.http_proxy")
            .never("proxy-pw"),
        param("proxy-url-scheme", "/proxy/https_proxy", json!("ftp://p"), "proxy.https_proxy"),
        param("no-proxy-semicolon", "/proxy/no_proxy", json!("a;b"), "proxy.no_proxy"),
        param("k8s-node-cidr-bad", "/proxy/k8s_node_cidr", json!("x"), "proxy.k8s_node_cidr"),
        param("vim-name-newline", "/vim_name", json!("a\nforged"), "vim_name"),
        // Package paths.
        param("script-path-parent", "/script_path", json!("../../etc/passwd"), "script_path"),
        param("script-path-absolute", "/script_path", json!("/etc/passwd"), "script_path"),
        param("script-path-newline", "/script_path", json!("Scripts/\nx.sh"), "script_path"),
        param("script-path-missing", "/script_path", json!("Scripts/nope.sh"), "script_path"),
        param(
            "helm-script-parent",
            "/helm_installation_script_path",
            json!("Scripts/../../x"),
            "helm_installation_script_path",
        ),
        param("offline-root", "/offline_artifacts_path", json!("/"), "offline_artifacts_path"),
        // Unsupported and structural.
        param("storage-server", "/storage_server", json!({"ssh_cp_name": "s"}), "storage_server.username: is required"),
        param("pv-registration", "/pv_registration_params", json!([{}]), "pv_registration_params"),
        param("master-node-a-string", "/master_node", json!("m"), "master_node: must be an object"),
        hook(
            "params-missing",
            "instantiate-end",
            Some(&remove(base(), P)),
            &[],
            Expect::Rejected("k8s_cluster_installation_param: is required"),
        ),
        hook(
            "additional-params-a-list",
            "instantiate-end",
            Some(&set(base(), "/additionalParams", json!([1]))),
            &[],
            Expect::Rejected("additionalParams"),
        ),
        hook(
            "flavour-a-number",
            "instantiate-end",
            Some(&set(base(), "/flavourId", json!(3))),
            &[],
            Expect::Rejected("flavourId"),
        ),
        // The request file itself.
        raw_request("request-not-json", "not json", "req.json"),
        raw_request("request-trailing-garbage", format!("{} x", base()), "req.json"),
        raw_request("request-latin1", vec![b'{', b'"', 0xe9, b'"', b'}'], "not UTF-8"),
        raw_request(
            "request-deep-nesting",
            format!(
                "{{\"flavourId\": \"s\", \"additionalParams\": {{\"x\": {}{}}}}}",
                "[".repeat(100_000),
                "]".repeat(100_000)
            ),
            "nested deeper than 128",
        ),
        raw_request("request-17-mib", format!("{}{}", base(), " ".repeat(17 << 20)), "larger than 16 MiB"),
        hook(
            "request-missing",
            "instantiate-end",
            None,
            &["--request", "{dir}/nope.json"],
            Expect::Rejected("nope.json"),
        ),
        // The instance id names a state file.
        hook(
            "instance-id-parent",
            "instantiate-end",
            Some(&base()),
            &["--vnf-instance-id", "../x"],
            Expect::Rejected("../x"),
        ),
        hook(
            "instance-id-slash",
            "instantiate-end",
            Some(&base()),
            &["--vnf-instance-id", "a/b"],
            Expect::Rejected("a/b"),
        ),
        hook(
            "instance-id-dot",
            "instantiate-end",
            Some(&base()),
            &["--vnf-instance-id", ".hidden"],
            Expect::Rejected(".hidden"),
        ),
        hook(
            "instance-id-newline",
            "instantiate-end",
            Some(&base()),
            &["--vnf-instance-id", "a\nb"],
            Expect::Rejected("instance id"),
        ),
        // Addresses from a VnfInstance reach root commands: IPs only.
        from_instance("vnfc-address-shell", "vnfc-1", "10.0.0.5; reboot", "10.0.0.9", "is not an IP address"),
        from_instance("vnfc-address-option", "vnfc-1", "-oProxyCommand=sh", "10.0.0.9", "is not an IP address"),
        from_instance("vnfc-vip-hostname", "vnfc-1", "10.0.0.5", "vip.example.com", "cluster_cp_name"),
        from_instance("vnfc-vip-newline", "vnfc-1", "10.0.0.5", "10.0.0.9\nx", "cluster_cp_name"),
        from_instance("vnfc-id-space", "vnfc 1", "10.0.0.5", "10.0.0.9", "vnfcResourceInfo[id=vnfc 1].id"),
        // Heal and scale bodies.
        hook(
            "heal-unknown-vnfc",
            "heal-start",
            Some(&set(json!({"vnfcInstanceId": ["../../x"]}), "/additionalParams", base()["additionalParams"].clone())),
            &[],
            Expect::Rejected("vnfcInstanceId"),
        ),
        hook(
            "heal-vnfc-newline-forges-no-line",
            "heal-start",
            Some(&set(
                json!({"vnfcInstanceId": ["x\nerror: forged"]}),
                "/additionalParams",
                base()["additionalParams"].clone(),
            )),
            &[],
            Expect::Rejected("vnfcInstanceId"),
        )
        .never("\nerror: forged"),
        hook(
            "heal-node-newline-forges-no-line",
            "heal-end",
            Some(&set(json!({}), "/additionalParams", base()["additionalParams"].clone())),
            &["--node", "x\nerror: forged"],
            Expect::Rejected("--node"),
        )
        .never("\nerror: forged"),
        hook(
            "heal-vnfc-a-number",
            "heal-start",
            Some(&set(json!({"vnfcInstanceId": 5}), "/additionalParams", base()["additionalParams"].clone())),
            &[],
            Expect::Rejected("vnfcInstanceId"),
        ),
        hook(
            "heal-node-unknown",
            "heal-end",
            Some(&set(json!({}), "/additionalParams", base()["additionalParams"].clone())),
            &["--node=-x"],
            Expect::Rejected("--node"),
        ),
        hook(
            "scale-type-unknown",
            "scale-start",
            Some(&json!({"type": "SCALE_SIDEWAYS", "aspectId": "worker_instance"})),
            &[],
            Expect::Rejected("type"),
        ),
        hook(
            "scale-steps-negative",
            "scale-end",
            Some(&json!({"type": "SCALE_OUT", "aspectId": "w", "numberOfSteps": "-1"})),
            &[],
            Expect::Rejected("numberOfSteps"),
        ),
        hook(
            "scale-steps-huge",
            "scale-end",
            Some(&json!({"type": "SCALE_OUT", "aspectId": "w", "numberOfSteps": 1e20})),
            &[],
            Expect::Rejected("numberOfSteps"),
        ),
        hook(
            "scale-override-username-option",
            "scale-end",
            Some(&json!({"type": "SCALE_OUT", "aspectId": "w", "additionalParams": {
                "master_node_username": "-oProxyCommand=sh",
                "k8s_cluster_installation_param": base()["additionalParams"]["k8s_cluster_installation_param"]}})),
            &[],
            Expect::Rejected("master_node.username"),
        ),
        hook(
            "terminate-timeout-negative",
            "terminate-end",
            Some(&json!({"gracefulTerminationTimeout": -1})),
            &[],
            Expect::Rejected("gracefulTerminationTimeout"),
        ),
    ]);
    // Accepted, harmlessly: passwords and proxy credentials never show.
    v.extend([
        hook(
            "sample-body-plans",
            "instantiate-end",
            Some(&base()),
            &[],
            Expect::Accepted(&["install_k8s_cluster.sh -m"]),
        ),
        hook(
            "tunable-env-accepted",
            "instantiate-end",
            Some(&set(
                base(),
                &format!("{P}/script_environment"),
                json!({"K8S_ALLOW_ANY_OS": "1", "CNI_WAIT_SECONDS": "a'b $(id)"}),
            )),
            &[],
            Expect::Accepted(&["install_k8s_cluster.sh -m"]),
        ),
        hook(
            "registry-v6-accepted",
            "instantiate-end",
            Some(&set(
                base(),
                &format!("{P}/private_registry_connection_info"),
                json!([{"connection_type": "1", "server": "[fd00::1]:5000"}]),
            )),
            &[],
            Expect::Accepted(&["install_k8s_cluster.sh -m"]),
        ),
        hook(
            "password-with-shell-never-shown",
            "instantiate-end",
            Some(&set(base(), &format!("{P}/master_node/password"), json!(format!("{PW}'$(reboot)")))),
            &[],
            Expect::Accepted(&["install_k8s_cluster.sh -m"]),
        ),
        // A node password given as a reference (what rendered per-site requests hold): the
        // value comes from the environment or a file, is used, and never shows.
        hook(
            "password-from-env-reference-never-shown",
            "instantiate-end",
            Some(&set(
                set(base(), &format!("{P}/master_node/password"), json!("@env:MGMT_HOSTILE_NODE_PW")),
                &format!("{P}/worker_node/password"),
                json!("@file:{dir}/node-pw"),
            )),
            &[],
            Expect::Accepted(&["install_k8s_cluster.sh -m"]),
        )
        .env("MGMT_HOSTILE_NODE_PW", "pw-ref-env-hostile")
        // The operator allows them: the variable by prefix, the file by its directory.
        .env("MGMT_DRIVER_SECRET_ENV", "MGMT_HOSTILE_*")
        .arg(&["--secrets-dir", "{dir}"])
        .file("node-pw", "pw-ref-file-hostile\n")
        .never("pw-ref-env-hostile")
        .never("pw-ref-file-hostile"),
        hook(
            "login-name-with-dot-and-dash",
            "instantiate-end",
            Some(&set(base(), &format!("{P}/master_node/username"), json!("svc.deploy-1"))),
            &[],
            Expect::Accepted(&["svc.deploy-1@192.0.2.11"]),
        ),
    ]);
    v
}
