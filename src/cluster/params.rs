//! `additionalParams.k8s_cluster_installation_param`: every key Tacker's v1 and v2 sample drivers
//! accept, with their defaults and checks, validated before anything runs. Errors name the JSON
//! path and the file; unknown keys are kept as warnings (packages carry extras).

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::{Map, Value};

use crate::error::excerpt;
use crate::error::{Error, Result};
use crate::secret::Secret;

pub const PARAM_KEY: &str = "k8s_cluster_installation_param";
const ROOT: &str = "additionalParams.k8s_cluster_installation_param";

/// An IPv4/IPv6 network as written (`192.168.3.0/16` is kept as written, like kubeadm does).
/// Parsing and arithmetic are [`ipnet`]'s; `text` is what the request said and what the
/// scripts get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub text: String,
    pub net: IpNet,
}

impl Cidr {
    pub fn parse(s: &str) -> std::result::Result<Cidr, String> {
        match s.parse::<IpNet>() {
            Ok(net) => Ok(Cidr { text: s.to_string(), net }),
            Err(_) => Err(Self::why_not(s)),
        }
    }

    /// `ipnet` says only "invalid IP address syntax"; name the part that is wrong.
    fn why_not(s: &str) -> String {
        let Some((a, _)) = s.split_once('/') else { return format!("'{s}' is not a CIDR (address/prefix)") };
        match a.parse::<IpAddr>() {
            Err(_) => format!("'{s}': '{a}' is not an IP address"),
            Ok(ip) => format!("'{s}': prefix must be 0..{}", if ip.is_ipv4() { 32 } else { 128 }),
        }
    }

    /// True when bits beyond the prefix are set (Python's strict `ip_network` would refuse it;
    /// Tacker's own guide uses `192.168.3.0/16`, so we accept it with a warning).
    pub fn has_host_bits(&self) -> bool {
        self.net.addr() != self.net.network()
    }

    /// The network itself, host bits cleared: `192.168.3.0/16` → `192.168.0.0/16`.
    pub fn network(&self) -> IpNet {
        self.net.trunc()
    }
}

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

/// A JSON object being validated, with its path for messages (shared with `storage.rs`). This
/// file's shared items are `pub(crate)`, not `pub(super)`: `super` would name `cluster/mod.rs`,
/// which runs the hooks, from a pure file (docs/architecture.md).
pub(crate) struct Obj<'a> {
    pub(crate) map: &'a Map<String, Value>,
    pub(crate) path: String,
    pub(crate) file: &'a str,
}

impl<'a> Obj<'a> {
    pub(crate) fn err(&self, key: &str, msg: impl Into<String>) -> Error {
        Error::input(self.file, format!("{}.{key}", self.path), msg)
    }

    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<String>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(self.err(key, "must not be empty")),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(key, format!("must be a string, got {}", kind(other)))),
        }
    }

    pub(crate) fn req_str(&self, key: &str) -> Result<String> {
        self.opt_str(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    /// A VNFD identifier (aspect, VDU, connection point): `[A-Za-z0-9_.-]`, 1..255.
    pub(crate) fn opt_name(&self, key: &str) -> Result<Option<String>> {
        let Some(v) = self.opt_str(key)? else { return Ok(None) };
        let ok = v.len() <= 255 && v.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
        if !ok {
            return Err(
                self.err(key, format!("'{}' is not a VNFD identifier (letters, digits, '_', '-', '.')", excerpt(&v)))
            );
        }
        Ok(Some(v))
    }

    pub(crate) fn req_name(&self, key: &str) -> Result<String> {
        self.opt_name(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    pub(crate) fn opt_obj(&self, key: &str) -> Result<Option<Obj<'a>>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(Obj { map: m, path: format!("{}.{key}", self.path), file: self.file })),
            Some(other) => Err(self.err(key, format!("must be an object, got {}", kind(other)))),
        }
    }

    pub(crate) fn req_obj(&self, key: &str) -> Result<Obj<'a>> {
        self.opt_obj(key)?.ok_or_else(|| self.err(key, "is required"))
    }

    pub(crate) fn unknown(&self, known: &[&str], warnings: &mut Vec<String>) {
        for k in self.map.keys().filter(|k| !known.contains(&k.as_str())) {
            warnings.push(format!("{}.{k}: unknown key, ignored", self.path));
        }
    }
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A relative path inside the VNF package, checked for shape here (existence is checked
/// against `--package-dir` by [`super::package`]).
pub(crate) fn package_path(o: &Obj, key: &str) -> Result<Option<String>> {
    let Some(p) = o.opt_str(key)? else { return Ok(None) };
    if p.starts_with('/') {
        return Err(o.err(key, format!("'{}' must be relative to the VNF package, not absolute", excerpt(&p))));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(o.err(key, format!("'{}' must stay inside the VNF package ('..' is not allowed)", excerpt(&p))));
    }
    if p.len() > 4096 || p.chars().any(|c| c.is_control() || c == '\\') {
        return Err(o.err(key, format!("'{}': a package path has no control characters or backslashes", excerpt(&p))));
    }
    Ok(Some(p))
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

/// A node password, or a reference to one: `@env:NAME` (the driver's environment) or
/// `@file:/abs/path` (the whole file, one trailing newline dropped: a mounted Kubernetes Secret,
/// a file written by `echo`). Rendered per-site requests hold references, never the value. A
/// literal password starting with `@env:`/`@file:` is written with a doubled `@`. A reference
/// that does not resolve is bad input naming the field; no message ever shows the value.
pub(crate) fn password(o: &Obj, text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret> {
    if let Some(name) = text.strip_prefix("@env:") {
        let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(o.err("password", format!("'@env:{}' does not name an environment variable", excerpt(name))));
        }
        return match env(name) {
            Some(v) if !v.is_empty() => Ok(Secret::new(v)),
            _ => Err(o.err("password", format!("refers to environment variable {name}, which is unset or empty"))),
        };
    }
    if let Some(path) = text.strip_prefix("@file:") {
        let p = std::path::Path::new(path);
        if !p.is_absolute() {
            return Err(o.err("password", format!("'@file:{}' must be an absolute path", excerpt(path))));
        }
        let mut v = std::fs::read(p)
            .map_err(|e| o.err("password", format!("refers to {}, which cannot be read: {e}", excerpt(path))))?;
        if v.len() > 4096 {
            return Err(o.err("password", format!("refers to {}, which is over 4096 bytes", excerpt(path))));
        }
        if v.ends_with(b"\n") {
            v.pop();
            if v.ends_with(b"\r") {
                v.pop();
            }
        }
        let v = String::from_utf8(v)
            .map_err(|_| o.err("password", format!("refers to {}, which is not UTF-8 text", excerpt(path))))?;
        if v.is_empty() {
            return Err(o.err("password", format!("refers to {}, which is empty", excerpt(path))));
        }
        return Ok(Secret::new(v));
    }
    let literal = match text.strip_prefix('@') {
        Some(rest) if rest.starts_with("@env:") || rest.starts_with("@file:") => rest,
        _ => text,
    };
    Ok(Secret::new(literal.to_string()))
}

/// A registry password ([`super::registry`]): a literal or a reference, as a node password;
/// `parent` is the JSON path of the object holding it.
pub(crate) fn password_at(file: &str, parent: &str, text: &str) -> Result<Secret> {
    let empty = Map::new();
    let o = Obj { map: &empty, path: parent.to_string(), file };
    password(&o, text, &|k| std::env::var(k).ok())
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
    /// default VIM name.
    pub fn from_additional_params(ap: &Map<String, Value>, file: &str, vnf_instance_id: &str) -> Result<ClusterParams> {
        let top = Obj { map: ap, path: "additionalParams".into(), file };
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
        ClusterParams::from_additional_params(&params(extra), "req.json", "id1").unwrap_err().to_string()
    }

    #[test]
    fn node_passwords_may_be_references_resolved_at_parse_time_and_never_shown() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "fr0m-file\n").unwrap();
        let map: Map<String, Value> = serde_json::from_str(r#"{"password": "x"}"#).unwrap();
        let o = Obj {
            map: &map,
            path: "additionalParams.k8s_cluster_installation_param.master_node".into(),
            file: "par1/cluster/instantiate.json",
        };
        let env = |k: &str| (k == "EDGE_PW").then(|| "fr0m-env".to_string());
        let got = |t: &str| password(&o, t, &env).map(|s| s.expose().to_string());
        assert_eq!(got("@env:EDGE_PW").unwrap(), "fr0m-env");
        assert_eq!(got(&format!("@file:{}", f.display())).unwrap(), "fr0m-file");
        assert_eq!(got("plain").unwrap(), "plain");
        assert_eq!(got("@@env:EDGE_PW").unwrap(), "@env:EDGE_PW", "a doubled @ is a literal");
        let e = got("@env:NOT_SET_HERE").unwrap_err().to_string();
        assert_eq!(
            e,
            "par1/cluster/instantiate.json: additionalParams.k8s_cluster_installation_param.master_node.password: \
             refers to environment variable NOT_SET_HERE, which is unset or empty"
        );
        for bad in ["@env:", "@env:A-B", "@file:relative/pw", "@file:/nonexistent/pw"] {
            let e = got(bad).unwrap_err().to_string();
            assert!(e.contains("master_node.password") && !e.contains("fr0m"), "{bad}: {e}");
        }
        std::fs::write(&f, "").unwrap();
        assert!(got(&format!("@file:{}", f.display())).unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn defaults_follow_tacker() {
        let p = ClusterParams::from_additional_params(&params(""), "req.json", "id1").unwrap();
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
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1").unwrap_err().to_string();
        assert_eq!(e, "req.json: additionalParams.k8s_cluster_installation_param.master_node.password: is required");
        let e = ClusterParams::from_additional_params(&Map::new(), "req.json", "id1").unwrap_err().to_string();
        assert_eq!(e, "req.json: additionalParams.k8s_cluster_installation_param: is required");
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["master_node"]["pod_cidr"] = "10.0.0.0/33".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1").unwrap_err().to_string();
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
        let p = ClusterParams::from_additional_params(&params(r#", "extra_thing": 1"#), "f", "i").unwrap();
        assert_eq!(
            p.warnings,
            vec!["additionalParams.k8s_cluster_installation_param.extra_thing: unknown key, ignored"]
        );
    }

    #[test]
    fn half_a_proxy_is_ignored_with_a_warning_and_registries_are_checked() {
        let p =
            ClusterParams::from_additional_params(&params(r#", "proxy": {"http_proxy": "http://p:3128"}"#), "f", "i")
                .unwrap();
        assert!(p.proxy.is_none() && p.warnings[0].contains("both http_proxy and https_proxy"));
        let p = ClusterParams::from_additional_params(
            &params(r#", "private_registry_connection_info": [{"connection_type": 0, "server": "reg:5000", "hosts_string": "10.0.0.9 reg"}]"#),
            "f",
            "i",
        )
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
            let p = ClusterParams::from_additional_params(&params(&env(k, "1")), "f", "i").unwrap();
            assert_eq!(p.script_environment, vec![(k.to_string(), "1".to_string())]);
        }
    }

    #[test]
    fn usernames_are_login_names_and_identifiers_are_checked() {
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["master_node"]["username"] = "-oProxyCommand=sh".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1").unwrap_err().to_string();
        assert!(e.contains("master_node.username: '-oProxyCommand=sh' is not a login name"), "{e}");
        let mut ap = params("");
        ap["k8s_cluster_installation_param"]["worker_node"]["aspect_id"] = "a\nb".into();
        let e = ClusterParams::from_additional_params(&ap, "req.json", "id1").unwrap_err().to_string();
        assert!(e.contains("worker_node.aspect_id: 'a\\nb' is not a VNFD identifier"), "{e}");
        let e = err(r#", "proxy": {"http_proxy": "http://p:1 $(id)", "https_proxy": "http://p:1"}"#);
        assert!(e.contains("proxy.http_proxy: must be an http:// or https:// URL") && !e.contains("$(id)"), "{e}");
        let e = err(r#", "proxy": {"http_proxy": "http://p:1", "https_proxy": "http://p:1", "no_proxy": "a;b"}"#);
        assert!(e.contains("proxy.no_proxy"), "{e}");
    }

    #[test]
    fn cidr_parsing() {
        let c = Cidr::parse("192.168.3.0/16").unwrap();
        assert!(c.has_host_bits());
        assert!(c.net.contains(&"192.168.200.1".parse::<IpAddr>().unwrap()));
        assert!(!Cidr::parse("10.96.0.0/12").unwrap().has_host_bits());
        assert!(Cidr::parse("fd00::/8").is_ok());
        for bad in ["10.0.0.0", "10.0.0.0/x", "300.0.0.0/8", "10.0.0.0/33"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidr_host_bits_v4_and_v6() {
        // (text, has host bits, network)
        for (text, host_bits, network) in [
            ("10.96.0.0/12", false, "10.96.0.0/12"),
            ("192.168.3.0/16", true, "192.168.0.0/16"),
            ("10.0.0.1/32", false, "10.0.0.1/32"),
            ("0.0.0.0/0", false, "0.0.0.0/0"),
            ("fd00:10::/64", false, "fd00:10::/64"),
            ("fd00:10::35/64", true, "fd00:10::/64"),
            ("fd00:10:0:0:1::/48", true, "fd00:10::/48"),
            ("::1/128", false, "::1/128"),
        ] {
            let c = Cidr::parse(text).unwrap();
            assert_eq!(c.text, text, "kept as written");
            assert_eq!(c.has_host_bits(), host_bits, "{text}");
            assert_eq!(c.network().to_string(), network, "{text}");
        }
        assert!(Cidr::parse("fd00::/64").unwrap().net.contains(&"fd00::ffff".parse::<IpAddr>().unwrap()));
        assert!(!Cidr::parse("fd00::/64").unwrap().net.contains(&"10.0.0.1".parse::<IpAddr>().unwrap()));
    }

    #[test]
    fn cidr_garbage_names_what_is_wrong() {
        for (bad, msg) in [
            ("", "'' is not a CIDR (address/prefix)"),
            ("fd00::", "'fd00::' is not a CIDR (address/prefix)"),
            ("fd00::/129", "'fd00::/129': prefix must be 0..128"),
            ("fd00::/-1", "'fd00::/-1': prefix must be 0..128"),
            ("10.0.0.0/33", "'10.0.0.0/33': prefix must be 0..32"),
            ("10.0.0.0/ 8", "'10.0.0.0/ 8': prefix must be 0..32"),
            ("gg::/64", "'gg::/64': 'gg::' is not an IP address"),
            ("10.0.0/8", "'10.0.0/8': '10.0.0' is not an IP address"),
            ("10.0.0.0/8; reboot", "'10.0.0.0/8; reboot': prefix must be 0..32"),
        ] {
            assert_eq!(Cidr::parse(bad).unwrap_err(), msg, "{bad}");
        }
    }

    #[test]
    fn host_bits_warn_for_ipv4_and_ipv6_and_pass_on_as_written() {
        let mut ap = params("");
        let m = &mut ap["k8s_cluster_installation_param"]["master_node"];
        m["pod_cidr"] = "192.168.3.0/16".into();
        m["cluster_cidr"] = "fd00:96::1/108".into();
        let p = ClusterParams::from_additional_params(&ap, "req.json", "id1").unwrap();
        assert_eq!((p.pod_cidr.text.as_str(), p.cluster_cidr.text.as_str()), ("192.168.3.0/16", "fd00:96::1/108"));
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("pod_cidr: '192.168.3.0/16' has host bits set"), "{:?}", p.warnings);
        assert!(p.warnings[1].contains("cluster_cidr: 'fd00:96::1/108' has host bits set"), "{:?}", p.warnings);
    }
}
