//! `additionalParams.k8s_cluster_installation_param`: every key Tacker's v1 and v2 sample drivers
//! accept, with their defaults and checks, validated before anything runs. Errors name the JSON
//! path and the file; unknown keys are kept as warnings (packages carry extras).

use serde_json::{Map, Value};

use crate::cluster::cidr::Cidr;
use crate::cluster::param_obj::{package_path, password, Obj};
use crate::error::{excerpt, Result};
use crate::secret::Secret;
use crate::secret_ref::Policy;

pub const PARAM_KEY: &str = "k8s_cluster_installation_param";
const ROOT: &str = "additionalParams.k8s_cluster_installation_param";

/// How the VNFD groups a role's VMs: Tacker v1 names a scaling aspect, v2 a VDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupKey {
    AspectId(String),
    VduId(String),
}

#[derive(Clone, Debug)]
pub struct RoleParams {
    pub group: Option<GroupKey>,
    pub ssh_cp_name: String,
    pub nic_cp_name: String,
    pub username: String,
    pub password: Secret,
}

#[derive(Clone, Debug)]
pub struct Proxy {
    pub http_proxy: Secret,
    pub https_proxy: Secret,
    pub no_proxy: Option<String>,
    pub k8s_node_cidr: Option<Cidr>,
}

pub use crate::cluster::registry::Registry;

/// `Debug` masks the passwords (they are [`Secret`]s) and the script environment values whose
/// name or value looks secret.
#[derive(Clone)]
pub struct ClusterParams {
    pub script_path: String,
    pub vim_name: String,
    pub master: RoleParams,
    pub worker: RoleParams,
    pub pod_cidr: Cidr,
    pub cluster_cidr: Cidr,
    pub cluster_cp_name: String,
    pub cluster_fip_name: Option<String>,
    pub proxy: Option<Proxy>,
    pub helm_script_path: Option<String>,
    pub registries: Vec<Registry>,
    /// Our extension: a package directory of artifacts (with `SHA256SUMS`) uploaded to the nodes
    /// and handed to the scripts as `K8S_OFFLINE_DIR`: air-gapped installs.
    pub offline_artifacts_path: Option<String>,
    /// Our extension: extra environment for the install scripts (`NAME: value`).
    pub script_environment: Vec<(String, String)>,
    /// `storage_server` and `pv_registration_params` (src/cluster/storage.rs).
    pub storage: Option<crate::cluster::storage::Storage>,
    /// Non-fatal findings (unknown keys, ignored half-proxy, host bits in a CIDR).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for ClusterParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<(&str, &str)> = self
            .script_environment
            .iter()
            .map(|(k, v)| {
                let secret = crate::secret::is_secret_name(k) || crate::secret::is_secret_string(v);
                (k.as_str(), if secret { crate::secret::MASK } else { v.as_str() })
            })
            .collect();
        f.debug_struct("ClusterParams")
            .field("script_path", &self.script_path)
            .field("vim_name", &self.vim_name)
            .field("master", &self.master)
            .field("worker", &self.worker)
            .field("pod_cidr", &self.pod_cidr)
            .field("cluster_cidr", &self.cluster_cidr)
            .field("cluster_cp_name", &self.cluster_cp_name)
            .field("cluster_fip_name", &self.cluster_fip_name)
            .field("proxy", &self.proxy)
            .field("helm_script_path", &self.helm_script_path)
            .field("registries", &self.registries)
            .field("offline_artifacts_path", &self.offline_artifacts_path)
            .field("script_environment", &env)
            .field("storage", &self.storage)
            .field("warnings", &self.warnings)
            .finish()
    }
}

fn role(o: &Obj, master: bool, warnings: &mut Vec<String>) -> Result<RoleParams> {
    let aspect = o.opt_name("aspect_id")?;
    let vdu = o.opt_name("vdu_id")?;
    let group = match (aspect, vdu) {
        (Some(_), Some(_)) => return Err(o.err("vdu_id", "give aspect_id (Tacker v1) or vdu_id (v2), not both")),
        (Some(a), None) => Some(GroupKey::AspectId(a)),
        (None, Some(v)) => Some(GroupKey::VduId(v)),
        (None, None) => None,
    };
    let ssh_cp_name = o.req_name("ssh_cp_name")?;
    let nic_cp_name = o.opt_name("nic_cp_name")?.unwrap_or_else(|| ssh_cp_name.clone());
    let username = o.req_str("username")?;
    crate::inventory::check_user(&username).map_err(|m| o.err("username", m))?;
    let password = password(o, &o.req_str("password")?, &|k| std::env::var(k).ok())?;
    let mut known = vec!["aspect_id", "vdu_id", "ssh_cp_name", "nic_cp_name", "username", "password"];
    if master {
        known.extend(["pod_cidr", "cluster_cidr", "cluster_cp_name", "cluster_fip_name"]);
    }
    o.unknown(&known, warnings);
    Ok(RoleParams { group, ssh_cp_name, nic_cp_name, username, password })
}

fn cidr(o: &Obj, key: &str, default: &str, warnings: &mut Vec<String>) -> Result<Cidr> {
    let text = o.opt_str(key)?.unwrap_or_else(|| default.to_string());
    let c = Cidr::parse(&text).map_err(|m| o.err(key, m))?;
    if c.has_host_bits() {
        warnings.push(format!("{}.{key}: '{text}' has host bits set; passed on as written", o.path));
    }
    Ok(c)
}

impl ClusterParams {
    /// Validate `additionalParams` of a request read from `file`. `vnf_instance_id` gives the
    /// default VIM name; `refs` says who wrote it, so which secret references its passwords may
    /// use (`secret_ref.rs`: none in a VNFM's request).
    pub fn from_additional_params(
        ap: &Map<String, Value>,
        file: &str,
        vnf_instance_id: &str,
        refs: &Policy,
    ) -> Result<ClusterParams> {
        let top = Obj { map: ap, path: "additionalParams".into(), file, refs };
        let o = top.req_obj(PARAM_KEY)?;
        debug_assert_eq!(o.path, ROOT);
        let mut warnings = Vec::new();

        let script_path = package_path(&o, "script_path")?.ok_or_else(|| o.err("script_path", "is required"))?;
        let vim_name = o.opt_str("vim_name")?.unwrap_or_else(|| format!("kubernetes_vim_{vnf_instance_id}"));
        if vim_name.len() > 255 || vim_name.chars().any(char::is_control) {
            return Err(o.err("vim_name", "must be at most 255 characters, without control characters"));
        }
        let mo = o.req_obj("master_node")?;
        let master = role(&mo, true, &mut warnings)?;
        let worker = role(&o.req_obj("worker_node")?, false, &mut warnings)?;
        // Tacker v2 (vdu_id) defaults the pod network to 10.0.0.0/8, v1 to 192.168.0.0/16.
        let pod_default =
            if matches!(master.group, Some(GroupKey::VduId(_))) { "10.0.0.0/8" } else { "192.168.0.0/16" };
        let pod_cidr = cidr(&mo, "pod_cidr", pod_default, &mut warnings)?;
        let cluster_cidr = cidr(&mo, "cluster_cidr", "10.96.0.0/12", &mut warnings)?;
        let cluster_cp_name = mo.req_name("cluster_cp_name")?;
        let cluster_fip_name = mo.opt_name("cluster_fip_name")?;

        let proxy = proxy(&o, &mut warnings)?;
        let helm_script_path = package_path(&o, "helm_installation_script_path")?;
        let registries = crate::cluster::registry::parse(
            o.map.get("private_registry_connection_info"),
            &o.path,
            file,
            refs,
            &mut warnings,
        )?;
        let offline_artifacts_path = package_path(&o, "offline_artifacts_path")?;
        let script_environment = script_environment(&o)?;
        let storage = crate::cluster::storage::parse(&o, &mut warnings)?;
        o.unknown(
            &[
                "script_path",
                "vim_name",
                "master_node",
                "worker_node",
                "proxy",
                "helm_installation_script_path",
                "private_registry_connection_info",
                "offline_artifacts_path",
                "script_environment",
                "storage_server",
                "pv_registration_params",
            ],
            &mut warnings,
        );
        Ok(ClusterParams {
            script_path,
            vim_name,
            master,
            worker,
            pod_cidr,
            cluster_cidr,
            cluster_cp_name,
            cluster_fip_name,
            proxy,
            helm_script_path,
            registries,
            offline_artifacts_path,
            script_environment,
            storage,
            warnings,
        })
    }
}

/// `proxy`: used only when both URLs are given (as Tacker); one alone is a warning.
fn proxy(o: &Obj, warnings: &mut Vec<String>) -> Result<Option<Proxy>> {
    let Some(p) = o.opt_obj("proxy")? else { return Ok(None) };
    p.unknown(&["http_proxy", "https_proxy", "no_proxy", "k8s_node_cidr"], warnings);
    let k8s_node_cidr = match p.opt_str("k8s_node_cidr")? {
        Some(c) => Some(Cidr::parse(&c).map_err(|m| p.err("k8s_node_cidr", m))?),
        None => None,
    };
    let no_proxy = p.opt_str("no_proxy")?;
    if no_proxy.as_ref().is_some_and(|np| !np.bytes().all(|c| c.is_ascii_alphanumeric() || b".,:/*_-[]%".contains(&c)))
    {
        return Err(p.err(
            "no_proxy",
            "must be a comma-separated list of hosts, domains, addresses and CIDRs (letters, digits, . , : / * _ - [ ] %)",
        ));
    }
    for k in ["http_proxy", "https_proxy"] {
        if let Some(u) = p.opt_str(k)? {
            // A secret (it may hold a password): the message never shows it.
            let ok = (u.starts_with("http://") || u.starts_with("https://"))
                && !u.bytes().any(|c| c.is_ascii_whitespace() || c.is_ascii_control() || b"'\"\\`$".contains(&c));
            if !ok {
                return Err(p.err(k, "must be an http:// or https:// URL without spaces, quotes, backslashes, '`' or '$' (value not shown)"));
            }
        }
    }
    Ok(match (p.opt_str("http_proxy")?, p.opt_str("https_proxy")?) {
        (Some(h), Some(s)) => {
            Some(Proxy { http_proxy: Secret::new(h), https_proxy: Secret::new(s), no_proxy, k8s_node_cidr })
        }
        (None, None) => None,
        _ => {
            warnings.push(format!("{}: ignored: both http_proxy and https_proxy are needed (as in Tacker)", p.path));
            None
        }
    })
}

/// Names a request may not set through `script_environment`: they change what a shell, the
/// dynamic loader or a tool the scripts run (as root) executes or trusts, or they are the
/// install scripts' pins (download URLs, checksums, images) and the values the driver sets
/// itself. A package that needs other pins ships its own scripts.
const DENIED_ENV: [&str; 37] = [
    "PATH",
    "IFS",
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS1",
    "PS2",
    "PS4",
    "PROMPT_COMMAND",
    "CDPATH",
    "GLOBIGNORE",
    "HOME",
    "SHELL",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "APT_CONFIG",
    "DEBIAN_FRONTEND",
    "KUBECONFIG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "CURL_HOME",
    "WGETRC",
    "PAUSE_IMAGE",
    "K8S_OFFLINE_DIR",
    "K8S_JOIN_TOKEN",
    "K8S_CERT_KEY",
    "HTTP_PRIVATE_REGISTRIES",
    "EDITOR",
];

/// Prefixes of denied names: loader and interpreter hooks, sudo/ssh/git/systemd/apt/dpkg
/// settings, proxies (set through `proxy`, checked there).
const DENIED_ENV_PREFIXES: [&str; 19] = [
    "LD_",
    "DYLD_",
    "BASH_",
    "MALLOC_",
    "GLIBC_",
    "PYTHON",
    "PERL",
    "RUBY",
    "NODE_",
    "GIT_",
    "SUDO_",
    "SSH_",
    "SYSTEMD_",
    "DPKG_",
    "XDG_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
];

/// Why `name` may not be set by a request, if it may not.
fn denied_env(name: &str) -> Option<&'static str> {
    if DENIED_ENV.contains(&name) || DENIED_ENV_PREFIXES.iter().any(|p| name.starts_with(p)) || name == "FTP_PROXY" {
        return Some("changes what the install scripts (run as root) execute or trust");
    }
    // The scripts' pins: every download URL, checksum and key fingerprint (K8S_KEY_URL,
    // CALICO_SHA256, K8S_KEY_FINGERPRINT, HELM_SHA256_AMD64, HELM_BASE_URL, ...).
    if name.ends_with("_URL") || name.contains("SHA256") || name.contains("_SHA") || name.contains("FINGERPRINT") {
        return Some("is a pin of the install scripts (a download URL or checksum); pins come with the package's scripts, not from a request");
    }
    None
}

/// Most variables and the longest value a request may set.
const MAX_ENV_VARS: usize = 64;
const MAX_ENV_VALUE: usize = 4096;

/// Our extension `script_environment`: extra variables for the install scripts' env file.
/// Names are upper-case `[A-Z][A-Z0-9_]*` and not [`denied_env`] (the documented tunables,
/// e.g. `K8S_ALLOW_ANY_OS`, `K8S_PKG_VERSION`, `CNI_WAIT_SECONDS`, pass); values are strings
/// without NUL, at most 4 KiB.
fn script_environment(o: &Obj) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(env) = o.opt_obj("script_environment")? {
        if env.map.len() > MAX_ENV_VARS {
            return Err(o.err("script_environment", format!("more than {MAX_ENV_VARS} variables")));
        }
        for (k, v) in env.map {
            let shown = excerpt(k);
            let ok = k.len() <= 128
                && k.starts_with(|c: char| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !ok {
                return Err(env.err(&shown, "environment names are upper case [A-Z][A-Z0-9_]*, at most 128"));
            }
            if let Some(why) = denied_env(k) {
                return Err(env.err(k, format!("may not be set by a request: {why}")));
            }
            let Some(v) = v.as_str() else { return Err(env.err(k, "must be a string")) };
            if v.contains('\0') || v.len() > MAX_ENV_VALUE {
                return Err(env.err(k, format!("must be at most {MAX_ENV_VALUE} bytes, without NUL")));
            }
            out.push((k.clone(), v.to_string()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(extra: &str) -> Map<String, Value> {
        let text = format!(
            r#"{{"k8s_cluster_installation_param": {{
                "script_path": "Scripts/install_k8s_cluster.sh",
                "master_node": {{"aspect_id": "master_instance", "ssh_cp_name": "m_CP", "username": "ubuntu",
                                 "password": "pw", "cluster_cp_name": "vip_CP"}},
                "worker_node": {{"aspect_id": "worker_instance", "ssh_cp_name": "w_CP", "username": "ubuntu", "password": "pw"}}
                {extra} }} }}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    fn err(extra: &str) -> String {
        ClusterParams::from_additional_params(&params(extra), "req.json", "id1", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_follow_tacker() {
        let p =
            ClusterParams::from_additional_params(&params(""), "req.json", "id1", &crate::secret_ref::Policy::Tenant)
                .unwrap();
        assert_eq!(p.vim_name, "kubernetes_vim_id1");
        assert_eq!(p.pod_cidr.text, "192.168.0.0/16");
        assert_eq!(p.cluster_cidr.text, "10.96.0.0/12");
        assert_eq!(p.master.nic_cp_name, "m_CP");
        assert!(p.proxy.is_none() && p.warnings.is_empty());
    }

    #[test]
    fn errors_name_the_json_path_and_file() {
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["master_node"].as_object_mut().unwrap().remove("password");
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "req.json: additionalParams.k8s_cluster_installation_param.master_node.password: is required");
        let e =
            ClusterParams::from_additional_params(&Map::new(), "req.json", "id1", &crate::secret_ref::Policy::Tenant)
                .unwrap_err()
                .to_string();
        assert_eq!(e, "req.json: additionalParams.k8s_cluster_installation_param: is required");
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["master_node"]["pod_cidr"] = "10.0.0.0/33".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string();
        assert!(e.contains("master_node.pod_cidr: '10.0.0.0/33': prefix must be 0..32"), "{e}");
    }

    #[test]
    fn package_paths_must_stay_inside() {
        assert!(err(r#", "helm_installation_script_path": "../x.sh""#)
            .contains("helm_installation_script_path: '../x.sh' must stay inside"));
        assert!(err(r#", "offline_artifacts_path": "/etc""#).contains("must be relative"));
    }

    #[test]
    fn storage_is_checked_not_ignored_and_unknown_keys_warn() {
        assert!(err(r#", "storage_server": {"ssh_cp_name": "s"}"#).contains("storage_server.username: is required"));
        let p = ClusterParams::from_additional_params(
            &params(r#", "extra_thing": 1"#),
            "f",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        assert_eq!(
            p.warnings,
            vec!["additionalParams.k8s_cluster_installation_param.extra_thing: unknown key, ignored"]
        );
    }

    #[test]
    fn half_a_proxy_is_ignored_with_a_warning_and_registries_are_checked() {
        let p = ClusterParams::from_additional_params(
            &params(r#", "proxy": {"http_proxy": "http://p:3128"}"#),
            "f",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        assert!(p.proxy.is_none() && p.warnings[0].contains("both http_proxy and https_proxy"));
        let p = ClusterParams::from_additional_params(
            &params(r#", "private_registry_connection_info": [{"connection_type": 0, "server": "reg:5000", "hosts_string": "10.0.0.9 reg"}]"#),
            "f",
            "i", &crate::secret_ref::Policy::Tenant,)
        .unwrap();
        assert!(!p.registries[0].https);
        let e = err(r#", "private_registry_connection_info": [{"connection_type": "2", "server": "r"}]"#);
        assert!(e.contains("private_registry_connection_info[0].connection_type"), "{e}");
        let e = err(r#", "private_registry_connection_info": [{"connection_type": "0", "server": "r; rm -rf /"}]"#);
        assert!(e.contains("[0].server"), "{e}");
    }

    #[test]
    fn script_environment_refuses_what_runs_code_as_root_and_the_pins() {
        let env = |k: &str, v: &str| format!(r#", "script_environment": {{"{k}": "{v}"}}"#);
        // One of each rule here; tests/hostile/cluster.rs runs every denied name through the binary.
        for k in [
            "BASH_ENV",
            "LD_PRELOAD",
            "PATH",
            "K8S_KEYRING_SHA256",
            "K8S_KEY_FINGERPRINT",
            "CALICO_URL",
            "PAUSE_IMAGE",
            "K8S_JOIN_TOKEN",
            "GIT_SSH_COMMAND",
        ] {
            let e = err(&env(k, "x"));
            assert!(e.contains(&format!("script_environment.{k}: may not be set by a request")), "{k}: {e}");
        }
        for k in ["lower", "_X", "1X", "A-B", "A\\nB"] {
            let e = err(&env(k, "x"));
            assert!(e.contains("environment names are upper case"), "{k}: {e}");
        }
        assert!(err(&env("X", "a\\u0000b")).contains("without NUL"));
        for k in
            ["K8S_ALLOW_ANY_OS", "K8S_PKG_VERSION", "K8S_MINOR", "CALICO_VERSION", "CNI_WAIT_SECONDS", "MY_TUNABLE"]
        {
            let p = ClusterParams::from_additional_params(
                &params(&env(k, "1")),
                "f",
                "i",
                &crate::secret_ref::Policy::Tenant,
            )
            .unwrap();
            assert_eq!(p.script_environment, vec![(k.to_string(), "1".to_string())]);
        }
    }

    #[test]
    fn usernames_are_login_names_and_identifiers_are_checked() {
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["master_node"]["username"] = "-oProxyCommand=sh".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string();
        assert!(e.contains("master_node.username: '-oProxyCommand=sh' is not a login name"), "{e}");
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["worker_node"]["aspect_id"] = "a\nb".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1", &crate::secret_ref::Policy::Tenant)
            .unwrap_err()
            .to_string();
        assert!(e.contains("worker_node.aspect_id: 'a\\nb' is not a VNFD identifier"), "{e}");
        let e = err(r#", "proxy": {"http_proxy": "http://p:1 $(id)", "https_proxy": "http://p:1"}"#);
        assert!(e.contains("proxy.http_proxy: must be an http:// or https:// URL") && !e.contains("$(id)"), "{e}");
        let e = err(r#", "proxy": {"http_proxy": "http://p:1", "https_proxy": "http://p:1", "no_proxy": "a;b"}"#);
        assert!(e.contains("proxy.no_proxy"), "{e}");
    }

    #[test]
    fn host_bits_warn_for_ipv4_and_ipv6_and_pass_on_as_written() {
        let mut ap = params("");
        let m = &mut ap["k8s_cluster_installation_param"]["master_node"];
        m["pod_cidr"] = "192.168.3.0/16".into();
        m["cluster_cidr"] = "fd00:96::1/108".into();
        let p =
            ClusterParams::from_additional_params(&ap, "req.json", "id1", &crate::secret_ref::Policy::Tenant).unwrap();
        assert_eq!((p.pod_cidr.text.as_str(), p.cluster_cidr.text.as_str()), ("192.168.3.0/16", "fd00:96::1/108"));
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("pod_cidr: '192.168.3.0/16' has host bits set"), "{:?}", p.warnings);
        assert!(p.warnings[1].contains("cluster_cidr: 'fd00:96::1/108' has host bits set"), "{:?}", p.warnings);
    }
}
