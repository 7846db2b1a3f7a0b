//! Hostile inputs to `mgmt-driver cnf`: the request's additionalParams (names that Helm would
//! take as options or local directories, URLs, versions, `--set` items, secret values, replica
//! counts, namespaces, package paths), helm_info, and the operator's words (`--release`,
//! `--chart`, `show CHART`, `repo-sync NAME=URL`, `--revision`, ids). Accepted cases prove a
//! secret (repository password, URL userinfo, secret helm value, master password) never shows.

use serde_json::{json, Value};

use crate::case::{remove, set, Case, NOWHERE};

/// Secrets that must never be printed.
const MASTER_PW: &str = "pw-master-hostile-cnf";
const REPO_PW: &str = "repo-pw-hostile-cnf";
const HELM_SECRET: &str = "helm-secret-hostile-cnf";

/// vimConnectionInfo with one master where nothing answers.
fn vci() -> Value {
    json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "extra": {"helm_info": {
        "masternode_ip": [NOWHERE], "masternode_username": "ubuntu", "masternode_password": MASTER_PW}}}])
}

/// A valid instantiate request: one chart from a repository; item 0 is the one cases edit.
fn req() -> Value {
    json!({"flavourId": "simple", "additionalParams": {
        "use_helm": "True", "namespace": "cnf",
        "using_helm_install_param": [{"exthelmchart": "true", "helmreleasename": "vdu2",
            "helmrepositoryname": "labrepo", "helmchartname": "nginxlab",
            "exthelmrepo_url": "http://192.0.2.50/charts", "helmchartversion": "0.1.0"}],
        "helm_replica_values": {"vdu2_aspect": "replicaCount"},
        "vdu_mapping": {"VDU2": {"kind": "Deployment", "name": "vdu2-nginxlab", "helmreleasename": "vdu2",
            "aspect_id": "vdu2_aspect", "min_number_of_instances": 1, "max_number_of_instances": 3}}}})
}

/// A request whose item 0 is a local chart from the package.
fn local_req(path: &str) -> Value {
    set(
        req(),
        "/additionalParams/using_helm_install_param/0",
        json!({"exthelmchart": "false", "helmreleasename": "vdu2", "helmchartfile_path": path}),
    )
}

const ITEM: &str = "/additionalParams/using_helm_install_param/0";

/// A VnfInstance whose VNFC `vnfc-0` is the pod `pod` (Tacker's vnfcInfo → vnfcResourceInfo).
fn heal_instance(pod: &str) -> Value {
    json!({"id": "i1", "instantiatedVnfInfo": {"flavourId": "simple",
        "vnfcResourceInfo": [{"id": "res-0", "vduId": "VDU2", "computeResource": {"resourceId": pod}}],
        "vnfcInfo": [{"id": "vnfc-0", "vduId": "VDU2", "vnfcResourceInfoId": "res-0"}]}})
}

/// The common arguments of a CNF case: instance, state, where Helm runs.
fn cnf(op: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["cnf".into()];
    a.extend(op.iter().map(|s| s.to_string()));
    a.extend(
        ["--vnf-instance-id", "i1", "--state-dir", "{dir}/st", "--vim-connection-info", "{dir}/vci.json"]
            .map(String::from),
    );
    a
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `cnf instantiate` with `request`, refused naming `field`.
fn inst(name: &str, request: Value, field: &str) -> Case {
    let a = cnf(&["instantiate", "--request", "{dir}/req.json", "--package-dir", "{dir}/pkg"]);
    Case::rejected(format!("cnf/{name}"), &strs(&a), field)
        .file("vci.json", vci().to_string())
        .file("req.json", request.to_string())
        .file("pkg/Files/kubernetes/localhelm-0.1.0.tgz", "not really a chart")
}

/// `cnf instantiate` with item 0's `key` set to `v`.
fn item(name: &str, key: &str, v: Value, field: &str) -> Case {
    inst(name, set(req(), &format!("{ITEM}/{key}"), v), field)
}

/// `cnf instantiate` with `additionalParams.<key>` set to `v`.
fn ap(name: &str, key: &str, v: Value, field: &str) -> Case {
    inst(name, set(req(), &format!("/additionalParams/{key}"), v), field)
}

/// `cnf instantiate` with helm_info's `key` set to `v`.
fn helm_info(name: &str, key: &str, v: Value, field: &str) -> Case {
    let a = cnf(&["instantiate", "--request", "{dir}/req.json"]);
    Case::rejected(format!("cnf/{name}"), &strs(&a), field)
        .file("vci.json", set(vci(), &format!("/0/extra/helm_info/{key}"), v).to_string())
        .file("req.json", req().to_string())
}

/// `cnf OP...` (the operator's words), refused naming `field`.
fn op(name: &str, words: &[&str], field: &str) -> Case {
    Case::rejected(format!("cnf/{name}"), &strs(&cnf(words)), field).file("vci.json", vci().to_string())
}

/// `cnf instantiate` with `request`, accepted: `shown` in the plan, `never` anywhere.
fn accepted_inst(name: &str, request: Value, shown: &[&str], never: &[&str]) -> Case {
    let a = cnf(&["instantiate", "--request", "{dir}/req.json", "--package-dir", "{dir}/pkg"]);
    let mut never = never.to_vec();
    never.push(MASTER_PW);
    Case::accepted(format!("cnf/{name}"), &strs(&a), shown, &never)
        .file("vci.json", vci().to_string())
        .file("req.json", request.to_string())
        .file("pkg/Files/kubernetes/localhelm-0.1.0.tgz", "not really a chart")
}

fn accepted_op(name: &str, words: &[&str], shown: &[&str], never: &[&str]) -> Case {
    let mut never = never.to_vec();
    never.push(MASTER_PW);
    Case::accepted(format!("cnf/{name}"), &strs(&cnf(words)), shown, &never).file("vci.json", vci().to_string())
}

pub fn cases() -> Vec<Case> {
    let long = "r".repeat(54);
    let mut v = vec![
        // Release names: Helm's DNS-1123 rules; never an option or a path.
        item("release-leading-dash", "helmreleasename", json!("-x"), "helmreleasename"),
        item("release-is-an-option", "helmreleasename", json!("--dry-run"), "helmreleasename"),
        item("release-dot", "helmreleasename", json!("."), "helmreleasename"),
        item("release-dotdot", "helmreleasename", json!(".."), "helmreleasename"),
        item("release-uppercase", "helmreleasename", json!("VDU2"), "helmreleasename"),
        item("release-too-long", "helmreleasename", json!(long), "helmreleasename"),
        item("release-with-shell", "helmreleasename", json!("a;id"), "helmreleasename"),
        item("release-with-newline", "helmreleasename", json!("a\nb"), "helmreleasename"),
        item("release-not-a-string", "helmreleasename", json!(5), "helmreleasename"),
        item("release-empty", "helmreleasename", json!(""), "helmreleasename"),
        // Repository names: shared words on a master; never an option, a path or an instance name.
        item("repo-is-an-option", "helmrepositoryname", json!("--insecure-skip-tls-verify"), "helmrepositoryname"),
        item("repo-leading-dash", "helmrepositoryname", json!("-r"), "helmrepositoryname"),
        item("repo-dot", "helmrepositoryname", json!("."), "helmrepositoryname"),
        item("repo-dotdot", "helmrepositoryname", json!(".."), "helmrepositoryname"),
        item("repo-with-slash", "helmrepositoryname", json!("a/b"), "helmrepositoryname"),
        item("repo-forges-another-instance", "helmrepositoryname", json!("i2@labrepo"), "helmrepositoryname"),
        item("repo-path-traversal", "helmrepositoryname", json!("../../etc"), "helmrepositoryname"),
        // Chart names.
        item("chart-leading-dash", "helmchartname", json!("-x"), "helmchartname"),
        item("chart-dotdot", "helmchartname", json!(".."), "helmchartname"),
        item("chart-with-slash", "helmchartname", json!("a/b"), "helmchartname"),
        item("chart-relative-path", "helmchartname", json!("./x"), "helmchartname"),
        // Repository URLs.
        item("url-file-scheme", "exthelmrepo_url", json!("file:///etc/passwd"), "exthelmrepo_url"),
        item("url-ftp", "exthelmrepo_url", json!("ftp://192.0.2.50/c"), "exthelmrepo_url"),
        item("url-with-space", "exthelmrepo_url", json!("http://h/ x"), "exthelmrepo_url"),
        item("url-is-an-option", "exthelmrepo_url", json!("--insecure-skip-tls-verify"), "exthelmrepo_url"),
        item("url-with-quotes", "exthelmrepo_url", json!("http://h/'$(id)'"), "exthelmrepo_url"),
        item("url-no-host", "exthelmrepo_url", json!("http:///x"), "exthelmrepo_url"),
        item(
            "url-oci-with-credentials",
            "exthelmrepo_url",
            json!(format!("oci://u:{REPO_PW}@reg/c")),
            "exthelmrepo_url",
        ),
        inst(
            "url-credentials-twice",
            set(
                set(
                    set(req(), &format!("{ITEM}/exthelmrepo_url"), json!(format!("http://u:{REPO_PW}@h/c"))),
                    &format!("{ITEM}/exthelmrepo_username"),
                    json!("u"),
                ),
                &format!("{ITEM}/exthelmrepo_password"),
                json!("p"),
            ),
            "exthelmrepo_url",
        ),
        item("repo-user-without-password", "exthelmrepo_username", json!("u"), "exthelmrepo_password"),
        item("repo-ca-outside-package", "exthelmrepo_ca_file", json!("../../etc/ssl/ca.crt"), "exthelmrepo_ca_file"),
        // Versions.
        item("version-is-an-option", "helmchartversion", json!("--devel"), "helmchartversion"),
        item("version-with-shell", "helmchartversion", json!("1;id"), "helmchartversion"),
        item("version-newline", "helmchartversion", json!("1.0\n--devel"), "helmchartversion"),
        // helmparameter / helmsecretparameter.
        item("param-no-key", "helmparameter", json!(["=x"]), "helmparameter[0]"),
        item("param-no-equals", "helmparameter", json!(["nokey"]), "helmparameter[0]"),
        item("param-is-an-option", "helmparameter", json!(["--post-renderer=/bin/sh"]), "helmparameter[0]"),
        item("param-newline", "helmparameter", json!(["a=b\nc"]), "helmparameter[0]"),
        item("param-not-a-list", "helmparameter", json!("a=b"), "helmparameter"),
        item("param-not-a-string", "helmparameter", json!([5]), "helmparameter[0]"),
        item("param-env-bad-name", "helmparameter", json!(["k=@env:1BAD"]), "helmparameter[0]"),
        // The operator allows the variable (a request file on the command line: issue 20).
        item("param-env-unset", "helmparameter", json!(["db.pw=@env:CNF_HOSTILE_UNSET"]), "CNF_HOSTILE_UNSET")
            .env("MGMT_DRIVER_SECRET_ENV", "CNF_HOSTILE_*"),
        item("param-file-outside-package", "helmparameter", json!(["k=@file:../../etc/shadow"]), "helmparameter[0]"),
        item("param-file-absolute", "helmparameter", json!(["k=@file:/etc/shadow"]), "helmparameter[0]"),
        item("param-file-missing", "helmparameter", json!(["k=@file:Files/nope"]), "using_helm_install_param[0].k"),
        item("param-secret-key-with-comma", "helmparameter", json!(["k,x=@env:HOME"]), "helmparameter[0]"),
        item("secret-param-not-a-list", "helmsecretparameter", json!("a=b"), "helmsecretparameter"),
        item("secret-param-no-equals", "helmsecretparameter", json!(["x"]), "helmsecretparameter[0]"),
        item("values-not-an-object", "values", json!(["a"]), "values"),
        // Local charts: package paths.
        inst("chart-path-traversal", local_req("../../etc/x-1.0.tgz"), "helmchartfile_path"),
        inst("chart-path-absolute", local_req("/etc/x-1.0.tgz"), "helmchartfile_path"),
        inst("chart-path-dash-name", local_req("Files/-x-1.0.tgz"), "helmchartfile_path"),
        inst("chart-path-dotdot-name", local_req("Files/..-1.0.tgz"), "helmchartfile_path"),
        inst("chart-path-no-version", local_req("Files/chart.tgz"), "helmchartfile_path"),
        inst("chart-path-backslash", local_req("Files\\..\\x-1.0.tgz"), "helmchartfile_path"),
        inst("chart-path-not-in-package", local_req("Files/kubernetes/other-1.0.tgz"), "helmchartfile_path"),
        // Namespaces, flags, shape.
        ap("namespace-is-an-option", "namespace", json!("-n"), "namespace"),
        ap("namespace-with-space", "namespace", json!("kube system"), "namespace"),
        ap("namespace-uppercase", "namespace", json!("Default"), "namespace"),
        ap("namespace-dotdot", "namespace", json!(".."), "namespace"),
        ap("use-helm-false", "use_helm", json!("false"), "use_helm"),
        ap("install-params-empty", "using_helm_install_param", json!([]), "using_helm_install_param"),
        ap("install-params-not-a-list", "using_helm_install_param", json!({}), "using_helm_install_param"),
        ap("install-param-not-an-object", "using_helm_install_param", json!(["x"]), "using_helm_install_param[0]"),
        inst(
            "release-twice",
            {
                let one = req()["additionalParams"]["using_helm_install_param"][0].clone();
                set(req(), "/additionalParams/using_helm_install_param", json!([one.clone(), one]))
            },
            "helmreleasename",
        ),
        // Replica counts: Kubernetes int32, nothing wraps.
        ap("replicas-negative", "replicas", json!({"vdu2_aspect": -1}), "replicas.vdu2_aspect"),
        ap("replicas-float", "replicas", json!({"vdu2_aspect": 1.5}), "replicas.vdu2_aspect"),
        ap("replicas-wraps-u32", "replicas", json!({"vdu2_aspect": 4294967297u64}), "replicas.vdu2_aspect"),
        ap("replicas-above-int32", "replicas", json!({"vdu2_aspect": 2147483648u64}), "replicas.vdu2_aspect"),
        ap("replicas-huge", "replicas", json!({"vdu2_aspect": 1e300}), "replicas.vdu2_aspect"),
        ap("replicas-word", "replicas", json!({"vdu2_aspect": "many"}), "replicas.vdu2_aspect"),
        ap("replicas-exponent-string", "replicas", json!({"vdu2_aspect": "1e3"}), "replicas.vdu2_aspect"),
        ap("replicas-unknown-aspect", "replicas", json!({"other": 1}), "replicas.other"),
        inst(
            "vdu-min-negative",
            set(req(), "/additionalParams/vdu_mapping/VDU2/min_number_of_instances", json!(-1)),
            "min_number_of_instances",
        ),
        inst(
            "vdu-max-wraps",
            set(req(), "/additionalParams/vdu_mapping/VDU2/max_number_of_instances", json!(4294967296u64)),
            "max_number_of_instances",
        ),
        inst(
            "vdu-min-above-max",
            set(req(), "/additionalParams/vdu_mapping/VDU2/min_number_of_instances", json!(5)),
            "max_number_of_instances",
        ),
        inst(
            "vdu-unknown-release",
            set(req(), "/additionalParams/vdu_mapping/VDU2/helmreleasename", json!("other")),
            "vdu_mapping.VDU2.helmreleasename",
        ),
        ap("replica-path-is-an-option", "helm_replica_values", json!({"vdu2_aspect": "-x"}), "helm_replica_values"),
        ap("replica-path-with-comma", "helm_replica_values", json!({"vdu2_aspect": "a,b=1"}), "helm_replica_values"),
        // helm_info: where Helm runs and as whom.
        helm_info("master-user-is-an-option", "masternode_username", json!("-oProxyCommand=sh"), "masternode_username"),
        helm_info("master-user-with-shell", "masternode_username", json!("root;id"), "masternode_username"),
        helm_info("master-user-with-space", "masternode_username", json!("md user"), "masternode_username"),
        helm_info("master-ip-is-an-option", "masternode_ip", json!(["-oProxyCommand=sh"]), "masternode_ip"),
        helm_info("master-ip-with-shell", "masternode_ip", json!(["1.2.3.4;id"]), "masternode_ip"),
        helm_info("master-ip-none", "masternode_ip", json!([]), "masternode_ip"),
        // The operator's words.
        op("status-release-option", &["status", "--release=-x"], "--release"),
        op("status-release-dotdot", &["status", "--release", ".."], "--release"),
        op("values-release-uppercase", &["values", "--release", "VDU1"], "--release"),
        op("history-release-slash", &["history", "--release", "a/b"], "--release"),
        op("rollback-release-option", &["rollback", "--release=--all"], "--release"),
        op("rollback-revision-negative", &["rollback", "--release", "vdu1", "--revision=-1"], "--revision"),
        op("rollback-revision-overflow", &["rollback", "--release", "vdu1", "--revision", "99999999999"], "--revision"),
        op("upgrade-chart-dotdot", &["upgrade", "--release", "vdu1", "--chart", ".."], "--chart"),
        op("upgrade-chart-relative", &["upgrade", "--release", "vdu1", "--chart", "./evil"], "--chart"),
        op("upgrade-chart-absolute", &["upgrade", "--release", "vdu1", "--chart", "/etc"], "--chart"),
        op("upgrade-chart-option", &["upgrade", "--release", "vdu1", "--chart=--repo=http://h"], "--chart"),
        op(
            "upgrade-chart-escapes-chart-root",
            &["upgrade", "--release", "vdu1", "--chart", "/var/tacker/helm/../../etc"],
            "--chart",
        ),
        op(
            "upgrade-chart-url-credentials",
            &["upgrade", "--release", "vdu1", "--chart", "https://u:p@h/c-1.tgz"],
            "--chart",
        ),
        op(
            "upgrade-chart-of-another-cnf",
            &["upgrade", "--release", "vdu1", "--chart", "i2@labrepo/nginxlab"],
            "--chart",
        ),
        op(
            "upgrade-chart-dir-of-another-cnf",
            &["upgrade", "--release", "vdu1", "--chart", "/var/tacker/helm/i2/localhelm"],
            "--chart",
        ),
        op("upgrade-version-option", &["upgrade", "--release", "vdu1", "--version=--devel"], "--version"),
        op("upgrade-set-option", &["upgrade", "--release", "vdu1", "--set=--post-renderer=x"], "--set"),
        op("upgrade-set-no-equals", &["upgrade", "--release", "vdu1", "--set", "noequals"], "--set"),
        op("show-what-unknown", &["show", "evil", "nginxlab", "--repo", "http://h"], "WHAT"),
        Case::rejected(
            "cnf/show-chart-option",
            &[
                "cnf",
                "show",
                "chart",
                "--repo",
                "http://h",
                "--vnf-instance-id",
                "i1",
                "--state-dir",
                "{dir}/st",
                "--vim-connection-info",
                "{dir}/vci.json",
                "--",
                "-x",
            ],
            "CHART: '-x'",
        )
        .file("vci.json", vci().to_string()),
        op("show-chart-dotdot", &["show", "chart", "..", "--repo", "http://h"], "CHART"),
        op("show-bare-chart-without-repo", &["show", "chart", "nginx"], "CHART"),
        op("show-repo-file-url", &["show", "chart", "nginx", "--repo", "file:///etc"], "--repo"),
        op("show-repo-with-credentials", &["show", "chart", "nginx", "--repo", "https://u:p@h/c"], "--repo"),
        op("show-version-shell", &["show", "chart", "nginx", "--repo", "http://h", "--version", "1;id"], "--version"),
        op("repo-sync-name-option", &["repo-sync", "--repo=-x=http://h"], "--repo"),
        op("repo-sync-name-dotdot", &["repo-sync", "--repo", "..=http://h"], "--repo"),
        op("repo-sync-instance-name", &["repo-sync", "--repo", "i2@labrepo=http://h"], "--repo"),
        op("repo-sync-file-url", &["repo-sync", "--repo", "a=file:///etc"], "--repo"),
        op("repo-sync-no-equals", &["repo-sync", "--repo", "noequals"], "--repo"),
        op("repo-sync-twice", &["repo-sync", "--repo", "a=http://h", "--repo", "a=http://g"], "--repo"),
        Case::rejected(
            "cnf/instance-id-traversal",
            &[
                "cnf",
                "status",
                "--release",
                "vdu1",
                "--vnf-instance-id",
                "../x",
                "--state-dir",
                "{dir}/st",
                "--vim-connection-info",
                "{dir}/vci.json",
            ],
            "VNF instance id",
        )
        .file("vci.json", vci().to_string()),
        Case::rejected(
            "cnf/cluster-instance-traversal",
            &[
                "cnf",
                "status",
                "--release",
                "vdu1",
                "--vnf-instance-id",
                "i1",
                "--state-dir",
                "{dir}/st",
                "--cluster-instance",
                "../../etc/passwd",
            ],
            "VNF instance id",
        ),
        op("timeout-huge", &["status", "--release", "vdu1", "--timeout", "1e30"], "--timeout"),
        op("timeout-nan", &["status", "--release", "vdu1", "--timeout", "nan"], "--timeout"),
        op("status-interval-zero", &["status", "--release", "vdu1", "--status-interval", "0"], "--status-interval"),
        op("instantiate-without-request", &["instantiate"], "--request"),
        Case::rejected(
            "cnf/helm-info-repr-user-is-an-option",
            &strs(&cnf(&["status", "--release", "vdu1"])),
            "masternode_username",
        )
        .file(
            "vci.json",
            json!([{"vimType": "kubernetes", "extra": {"helmInfo":
                format!("{{'masternode_ip': ['{NOWHERE}'], 'masternode_username': '-oProxyCommand=sh', 'masternode_password': 'x'}}")}}])
            .to_string(),
        ),
        Case::rejected(
            "cnf/request-not-json",
            &strs(&cnf(&["instantiate", "--request", "{dir}/req.json"])),
            "req.json",
        )
        .file("vci.json", vci().to_string())
        .file("req.json", "{\"additionalParams\": [unclosed"),
        // Scale and heal requests (the CNF's record is needed after the request is read).
        Case::rejected(
            "cnf/heal-pod-is-an-option",
            &strs(&cnf(&["heal", "--request", "{dir}/heal.json"])),
            "vnfcInstanceId[0]",
        )
        .file("vci.json", vci().to_string())
        .file("heal.json", json!({"vnfcInstanceId": ["--all"]}).to_string()),
        // A SOL002 heal names VNFCs of the VnfInstance: an id it does not hold, or a resource id
        // that is no pod name, is refused before anything connects.
        Case::rejected(
            "cnf/heal-vnfc-not-in-the-instance",
            &strs(&cnf(&["heal", "--request", "{dir}/heal.json", "--vnf-instance", "{dir}/inst.json"])),
            "vnfcInstanceId[1]",
        )
        .file("vci.json", vci().to_string())
        .file("inst.json", heal_instance("vdu2-nginxlab-6d4f-abcde").to_string())
        .file("heal.json", json!({"vnfcInstanceId": ["vnfc-0", "vdu2-nginxlab-6d4f-abcde"]}).to_string()),
        Case::rejected(
            "cnf/heal-vnfc-resource-is-an-option",
            &strs(&cnf(&["heal", "--request", "{dir}/heal.json", "--vnf-instance", "{dir}/inst.json"])),
            "computeResource.resourceId",
        )
        .file("vci.json", vci().to_string())
        .file("inst.json", heal_instance("--all-namespaces").to_string())
        .file("heal.json", json!({"vnfcInstanceId": ["vnfc-0"]}).to_string()),
        op("namespace-arg-is-an-option", &["status", "--release", "vdu1", "--namespace=-A"], "--namespace"),
        op("namespace-arg-with-a-command", &["list", "--namespace", "cnf;id"], "--namespace"),
        op("namespace-arg-uppercase", &["values", "--release", "vdu1", "--namespace", "Bad_NS"], "--namespace"),
        Case::rejected(
            "cnf/scale-steps-negative",
            &strs(&cnf(&["scale", "--request", "{dir}/scale.json"])),
            "numberOfSteps",
        )
        .file("vci.json", vci().to_string())
        .file("scale.json", json!({"type": "SCALE_OUT", "aspectId": "vdu2_aspect", "numberOfSteps": -1}).to_string()),
    ];
    // Accepted, but only in a harmless form.
    v.extend([
        accepted_inst(
            "hostile-parameter-stays-one-argument",
            set(req(), &format!("{ITEM}/helmparameter"), json!(["a=b; touch /tmp/pwned", "x=$(id)"])),
            &["--set 'a=b; touch /tmp/pwned' --set 'x=$(id)'"],
            &["--set a=b; touch"],
        ),
        accepted_inst(
            "names-come-after-double-dash",
            req(),
            &["helm_prepare.sh ", " i1@labrepo http://192.0.2.50/charts ", "-- vdu2 i1@labrepo/nginxlab"],
            &["-- labrepo "],
        ),
        // Two releases of one local chart (Tacker's sample does this): sent and extracted once;
        // twice, the second move found the file gone and the whole instantiate failed.
        accepted_inst(
            "one-local-chart-for-two-releases",
            {
                let mut r = local_req("Files/kubernetes/localhelm-0.1.0.tgz");
                let items = r["additionalParams"]["using_helm_install_param"].as_array_mut().expect("an array");
                items.push(json!({"exthelmchart": "false", "helmreleasename": "vdu3",
                                  "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz"}));
                r["additionalParams"]["vdu_mapping"]["VDU3"] =
                    json!({"kind": "Deployment", "name": "vdu3-localhelm", "helmreleasename": "vdu3"});
                r
            },
            &[" 1 .mgmt-driver/run/i1/chart-localhelm-0.1.0.tgz localhelm-0.1.0.tgz localhelm 0 ", "-- vdu3 "],
            &[" 2 .mgmt-driver/run/i1/chart-localhelm"],
        ),
        accepted_inst(
            "url-userinfo-becomes-password-stdin",
            set(req(), &format!("{ITEM}/exthelmrepo_url"), json!(format!("http://bob:{REPO_PW}@192.0.2.50/charts"))),
            &["i1@labrepo http://192.0.2.50/charts bob .mgmt-driver/run/i1/repo-i1@labrepo.pw "],
            &[REPO_PW, "bob:"],
        ),
        accepted_inst(
            "repo-password-never-shown",
            set(
                set(req(), &format!("{ITEM}/exthelmrepo_username"), json!("bob")),
                &format!("{ITEM}/exthelmrepo_password"),
                json!(REPO_PW),
            ),
            &["bob .mgmt-driver/run/i1/repo-i1@labrepo.pw ", "repo-i1@labrepo.pw (mode 0600"],
            &[REPO_PW],
        ),
        accepted_inst(
            "secret-parameter-travels-in-a-file",
            set(req(), &format!("{ITEM}/helmsecretparameter"), json!([format!("db.password={HELM_SECRET}")])),
            &["--set-file db.password=.mgmt-driver/run/i1/set-vdu2-0", "set-vdu2-0 (mode 0600"],
            &[HELM_SECRET],
        ),
        accepted_inst(
            "secret-named-parameter-travels-in-a-file",
            set(
                req(),
                &format!("{ITEM}/helmparameter"),
                json!([format!("db.password={HELM_SECRET}"), "replicaCount=2"]),
            ),
            &["--set-file db.password=.mgmt-driver/run/i1/set-vdu2-0", "--set replicaCount=2"],
            &[HELM_SECRET, "--set db.password"],
        ),
        accepted_inst(
            "parameter-from-env-travels-in-a-file",
            set(req(), &format!("{ITEM}/helmparameter"), json!(["api.token=@env:CNF_HOSTILE_TOKEN"])),
            &["--set-file api.token=.mgmt-driver/run/i1/set-vdu2-0"],
            &[HELM_SECRET, "CNF_HOSTILE_TOKEN="],
        )
        .env("CNF_HOSTILE_TOKEN", HELM_SECRET)
        .env("MGMT_DRIVER_SECRET_ENV", "CNF_HOSTILE_*"),
        accepted_inst(
            "parameter-from-package-file-travels-in-a-file",
            set(req(), &format!("{ITEM}/helmparameter"), json!(["tls.key=@file:Files/secret.key"])),
            &["--set-file tls.key=.mgmt-driver/run/i1/set-vdu2-0"],
            &[HELM_SECRET],
        )
        .file("pkg/Files/secret.key", HELM_SECRET),
        accepted_inst(
            "doubled-at-is-a-literal",
            set(req(), &format!("{ITEM}/helmparameter"), json!(["plain=@@env:HOME"])),
            &["--set plain=@env:HOME"],
            &["--set-file"],
        ),
        accepted_inst(
            "values-travel-in-a-file",
            set(req(), &format!("{ITEM}/values"), json!({"x": "$(id)", "pw": HELM_SECRET})),
            &["--values .mgmt-driver/run/i1/values-vdu2.json"],
            &[HELM_SECRET, "$(id)"],
        ),
        accepted_inst(
            "replicas-as-digits",
            set(req(), "/additionalParams/replicas", json!({"vdu2_aspect": "3"})),
            &["--set replicaCount=3"],
            &[],
        ),
        accepted_inst(
            "release-with-dots",
            set(
                set(req(), &format!("{ITEM}/helmreleasename"), json!("vdu.two")),
                "/additionalParams/vdu_mapping/VDU2/helmreleasename",
                json!("vdu.two"),
            ),
            &["-- vdu.two i1@labrepo/nginxlab"],
            &[],
        ),
        accepted_inst(
            "local-chart-stays-in-the-instance-dir",
            local_req("Files/kubernetes/localhelm-0.1.0.tgz"),
            &["-- vdu2 /var/tacker/helm/i1/localhelm"],
            &[],
        ),
        accepted_inst(
            "unknown-key-named-escaped",
            set(req(), &format!("{ITEM}/evil\nkey"), json!(1)),
            &["evil\\\\nkey: unknown key, ignored"],
            &[],
        ),
        accepted_op(
            "upgrade-set-stays-one-argument",
            &["upgrade", "--release", "vdu2", "--chart", "labrepo/nginxlab", "--set", "a=$(id)"],
            &["--set 'a=$(id)'", "-- vdu2 labrepo/nginxlab"],
            &[],
        ),
        accepted_op(
            "show-chart-after-double-dash",
            &["show", "chart", "nginx", "--repo", "https://charts.example/c", "--version", ">=1.0 <2"],
            &["--version '>=1.0 <2' -- nginx"],
            &[],
        ),
        accepted_op(
            "repo-sync-userinfo-becomes-password-stdin",
            &["repo-sync", "--repo", &format!("priv=https://bob:{REPO_PW}@charts.example/c")],
            &["helm_repo_list.sh"],
            &[REPO_PW],
        ),
        accepted_op("status-release-after-double-dash", &["status", "--release", "vdu1"], &["-- vdu1"], &[]),
        // OSM's cluster_uuid (namespace:cluster_id): a DNS label and a safe name, or refused.
        op("cluster-uuid-empty", &["list", "--cluster-uuid", ""], "--cluster-uuid"),
        op("cluster-uuid-dotdot", &["list", "--cluster-uuid", "cnf:.."], "--cluster-uuid"),
        op("cluster-uuid-path", &["list", "--cluster-uuid", "cnf:../../etc"], "--cluster-uuid"),
        op("cluster-uuid-slash", &["list", "--cluster-uuid", "a/b"], "--cluster-uuid"),
        op("cluster-uuid-option", &["list", "--cluster-uuid=-rf"], "--cluster-uuid"),
        op("cluster-uuid-shell", &["list", "--cluster-uuid", "c;id"], "--cluster-uuid"),
        op("cluster-uuid-newline", &["list", "--cluster-uuid", "c\nid"], "--cluster-uuid"),
        op("cluster-uuid-two-colons", &["list", "--cluster-uuid", "a:b:c"], "--cluster-uuid"),
        op("cluster-uuid-namespace-upper", &["list", "--cluster-uuid", "CNF:east"], "--cluster-uuid"),
        op("cluster-uuid-namespace-empty", &["list", "--cluster-uuid", ":east"], "--cluster-uuid"),
        op("cluster-uuid-id-empty", &["list", "--cluster-uuid", "cnf:"], "--cluster-uuid"),
        op("cluster-uuid-too-long", &["list", "--cluster-uuid", &"c".repeat(129)], "--cluster-uuid"),
        op("services-release-option", &["services", "--release=-x"], "--release"),
        op("services-release-shell", &["services", "--release", "a;id"], "--release"),
        accepted_op(
            "cluster-uuid-selects-the-environment",
            &["status", "--release", "vdu1", "--cluster-uuid", "edge:east-1"],
            &[
                "helm_prepare.sh '' /var/lib/mgmt-driver/helm/east-1 ",
                "HELM_CONFIG_HOME=/var/lib/mgmt-driver/helm/east-1/config",
            ],
            &[],
        ),
        accepted_op(
            "reset-plans-the-environment-removal",
            &["reset", "--uninstall", "--cluster-uuid", "east-1"],
            &["helm_env_reset.sh /var/lib/mgmt-driver/helm/east-1"],
            &[],
        ),
    ]);
    // A request without the item's repository fields keeps working as an OCI chart.
    v.push(accepted_inst(
        "oci-chart",
        remove(
            set(req(), &format!("{ITEM}/exthelmrepo_url"), json!("oci://registry.example/charts")),
            &format!("{ITEM}/helmrepositoryname"),
        ),
        &["-- vdu2 oci://registry.example/charts/nginxlab"],
        &[],
    ));
    v
}
