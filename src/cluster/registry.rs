//! Private container registries (`k8s_cluster_installation_param.private_registry_connection_info[]`):
//! the request's entries checked, and the text of every file a node gets for them.
//!
//! Tacker's sample driver copied the CA to `/etc/docker/certs.d`, appended `hosts_string` to
//! `/etc/hosts` on every run, and ran `docker login` with the password in argv (`tacker`/`tacker`
//! when none was given). Kubernetes pulls through containerd, not Docker, so on each node:
//!
//! - `/etc/containerd/certs.d/<server>/hosts.toml` (containerd's per-registry host config, read
//!   when the CRI plugin's `config_path` is that directory): `https://` with the package's CA
//!   copied beside it as `ca.crt`, or, for type "0" only, `http://` with `skip_verify`;
//! - the `hosts_string` line in `/etc/hosts`, marked as ours and replaced on each run;
//! - the credentials in kubelet's docker config, `/var/lib/kubelet/config.json` (mode 0600):
//!   kubelet reads it for every image pull and hands the matching login to the CRI with the
//!   pull request. It is written from a 0600 file of the run directory that the node program
//!   deletes, never from argv. No credentials → anonymous (no default login).
//!
//! Everything is replaced as a whole on each run, so a registry removed from the params leaves
//! nothing behind on the nodes the run prepares: only directories whose `hosts.toml` carries our
//! marker line are removed, and the kubelet file is ours only while our marker file is beside it
//! (`src/remote/registry_apply.sh`).

use serde_json::{Map, Value};

use crate::error::{excerpt, Error, Result};
use crate::secret::Secret;
use crate::secret_ref::Policy;

/// The first line of every `hosts.toml` we write; the node program removes a `certs.d` directory
/// for a registry no longer in the params only when its `hosts.toml` starts with it (or with the
/// install script's own marker, `# managed by install_k8s_cluster.sh`).
pub const MARKER: &str = "# managed by mgmt-driver";

/// containerd's per-registry configuration directory (the CRI plugin's `config_path`).
pub const CERTS_D: &str = "/etc/containerd/certs.d";

/// The env-file name (in the run directory, mode 0600) of the kubelet credentials on their way
/// to the node: `env.*`, so `clean_env.sh` deletes it if the program never ran.
pub const AUTH_UPLOAD: &str = "env.registry-auth";

#[derive(Clone, Debug)]
pub struct Registry {
    pub https: bool,
    /// `host[:port]`, `[v6]:port`: also the `certs.d` directory name.
    pub server: String,
    /// A login: both or neither (checked). The password is a [`Secret`] (sealed in the state,
    /// masked under `{:?}`).
    pub login: Option<(String, Secret)>,
    pub certificate_path: Option<String>,
    pub hosts_string: Option<String>,
}

const KEY: &str = "private_registry_connection_info";
const KNOWN: [&str; 6] = ["connection_type", "server", "username", "password", "certificate_path", "hosts_string"];

/// Parse `private_registry_connection_info` (the value under `parent`, the params object's JSON
/// path, of `file`). `null`/absent: no registries.
pub fn parse(
    value: Option<&Value>,
    parent: &str,
    file: &str,
    refs: &Policy,
    warnings: &mut Vec<String>,
) -> Result<Vec<Registry>> {
    let at = format!("{parent}.{KEY}");
    let items = match value {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(Error::input(file, &at, "must be an array of objects")),
    };
    if items.len() > 64 {
        return Err(Error::input(file, &at, "more than 64 registries"));
    }
    let mut out: Vec<Registry> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("{at}[{i}]");
        let Value::Object(m) = item else { return Err(Error::input(file, &path, "must be an object")) };
        let r = entry(m, &path, file, refs)?;
        for k in m.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
            warnings.push(format!("{path}.{k}: unknown key, ignored"));
        }
        if out.iter().any(|o| o.server == r.server) {
            return Err(Error::input(file, format!("{path}.server"), format!("'{}' is listed twice", r.server)));
        }
        out.push(r);
    }
    Ok(out)
}

fn entry(m: &Map<String, Value>, path: &str, file: &str, refs: &Policy) -> Result<Registry> {
    let err = |key: &str, msg: String| Error::input(file, format!("{path}.{key}"), msg);
    let opt = |key: &str| -> Result<Option<String>> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(err(key, "must not be empty".into())),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(key, "must be a string".into())),
        }
    };
    let https = match m.get("connection_type") {
        Some(Value::String(s)) if s == "0" => false,
        Some(Value::String(s)) if s == "1" => true,
        Some(Value::Number(n)) if n.as_u64() == Some(0) => false,
        Some(Value::Number(n)) if n.as_u64() == Some(1) => true,
        None | Some(Value::Null) => {
            return Err(err("connection_type", "is required (\"0\" = HTTP, \"1\" = HTTPS)".into()))
        }
        Some(v) => {
            let shown = match v {
                Value::String(s) => format!("'{}'", excerpt(s)),
                other => excerpt(&other.to_string()),
            };
            return Err(err("connection_type", format!("must be \"0\" (HTTP) or \"1\" (HTTPS), got {shown}")));
        }
    };
    let server = opt("server")?.ok_or_else(|| err("server", "is required (host[:port])".into()))?;
    check_server(&server).map_err(|e| err("server", e))?;
    let username = opt("username")?;
    if let Some(u) = &username {
        check_username(u).map_err(|e| err("username", e))?;
    }
    // The value is never shown, not even in an error.
    let password = match m.get("password") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => return Err(err("password", "must not be empty".into())),
        Some(Value::String(s)) => Some(crate::cluster::param_obj::password_at(file, path, s, refs)?),
        Some(_) => return Err(err("password", "must be a string (value not shown)".into())),
    };
    if let Some(p) = &password {
        if p.expose().len() > 4096 || p.expose().chars().any(|c| c == '\0') {
            return Err(err("password", "must be at most 4096 bytes, without NUL (value not shown)".into()));
        }
    }
    let login = match (username, password) {
        (Some(u), Some(p)) => Some((u, p)),
        (None, None) => None,
        (Some(_), None) => return Err(err("password", "is required with username (no default login)".into())),
        (None, Some(_)) => return Err(err("username", "is required with password".into())),
    };
    let certificate_path = opt("certificate_path")?;
    if let Some(c) = &certificate_path {
        check_package_path(c).map_err(|e| err("certificate_path", e))?;
        if !https {
            return Err(err("certificate_path", "is for HTTPS registries (connection_type \"1\") only".into()));
        }
    }
    let hosts_string = opt("hosts_string")?;
    if let Some(h) = &hosts_string {
        hosts_entry(h).map_err(|e| err("hosts_string", e))?;
    }
    Ok(Registry { https, server, login, certificate_path, hosts_string })
}

/// A registry `server`: `host[:port]`, `[v6]:port` or `v4:port`; never `.`, `..`, a path, an
/// option or a URL (it names a directory under /etc/containerd/certs.d on every node).
pub fn check_server(s: &str) -> std::result::Result<(), String> {
    let bad = || format!("'{}' is not host[:port]", excerpt(s));
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        h.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
        (None, if after.is_empty() { None } else { Some(after.strip_prefix(':').ok_or_else(bad)?) })
    } else {
        match s.split_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(s), None),
        }
    };
    if let Some(p) = port {
        if !p.bytes().all(|c| c.is_ascii_digit()) || !matches!(p.parse::<u32>(), Ok(1..=65535)) {
            return Err(bad());
        }
    }
    if let Some(h) = host {
        let labels_ok = h.len() <= 253
            && h.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            });
        if !labels_ok {
            return Err(bad());
        }
    }
    Ok(())
}

/// A registry login name: it is joined to the password with `:` in the docker config's `auth`,
/// so it has no `:`, and it has no control characters or spaces.
fn check_username(u: &str) -> std::result::Result<(), String> {
    if u.len() > 255 || u.chars().any(|c| c == ':' || c.is_control() || c.is_whitespace()) {
        return Err(format!("'{}': a registry login name has no ':', spaces or control characters", excerpt(u)));
    }
    Ok(())
}

/// A path inside the VNF package (existence and symlinks are checked against `--package-dir` by
/// `lifecycle/package.rs` when the upload is prepared).
fn check_package_path(p: &str) -> std::result::Result<(), String> {
    if p.starts_with('/') {
        return Err(format!("'{}' must be relative to the VNF package, not absolute", excerpt(p)));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(format!("'{}' must stay inside the VNF package ('..' is not allowed)", excerpt(p)));
    }
    if p.len() > 4096 || p.chars().any(|c| c.is_control() || c == '\\') {
        return Err(format!("'{}': a package path has no control characters or backslashes", excerpt(p)));
    }
    Ok(())
}

/// `hosts_string`: `IP NAME...` (one `/etc/hosts` line). Returns the address and the names
/// joined by single spaces.
pub fn hosts_entry(h: &str) -> std::result::Result<(String, String), String> {
    let bad = || format!("'{}' is not \"IP NAME...\"", excerpt(h));
    if h.len() > 4096 || h.chars().any(|c| c.is_control() && c != '\t') {
        return Err(bad());
    }
    let mut f = h.split_whitespace();
    let ip = f.next().filter(|ip| ip.parse::<std::net::IpAddr>().is_ok()).ok_or_else(bad)?;
    let names: Vec<&str> = f.collect();
    let name_ok = |n: &&str| {
        n.len() <= 253 && !n.starts_with(['-', '.']) && n.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
    };
    if names.is_empty() || names.len() > 16 || !names.iter().all(name_ok) {
        return Err(bad());
    }
    Ok((ip.to_string(), names.join(" ")))
}

impl Registry {
    /// `https://server` or, for type "0", `http://server`.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.https { "https" } else { "http" }, self.server)
    }

    /// Where this registry's files go on a node.
    pub fn dir(&self) -> String {
        format!("{CERTS_D}/{}", self.server)
    }

    /// containerd's `hosts.toml` for this registry. Values are TOML basic strings of checked
    /// text (a server has no quote or backslash).
    pub fn hosts_toml(&self) -> String {
        let url = self.url();
        let mut s = format!(
            "{MARKER}: private_registry_connection_info, {}\nserver = \"{url}\"\n\n[host.\"{url}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            if self.https { "HTTPS" } else { "plain HTTP" }
        );
        if self.https && self.certificate_path.is_some() {
            s.push_str(&format!("  ca = \"{}/ca.crt\"\n", self.dir()));
        }
        if !self.https {
            // Plain HTTP: containerd never uses TLS for an http:// host; skip_verify is for a
            // registry that answers HTTPS on the same port anyway (as Docker's insecure-registries).
            s.push_str("  skip_verify = true\n");
        }
        s
    }
}

/// kubelet's docker config: `{"auths":{"<server>":{"auth":"<base64 user:password>"}}}` for every
/// registry with a login; `None` when none has one (anonymous pulls; the node program then
/// removes a file of ours that a previous run left).
pub fn kubelet_auth(regs: &[Registry]) -> Option<Secret> {
    let mut auths = Map::new();
    for r in regs {
        if let Some((u, p)) = &r.login {
            let token = data_encoding::BASE64.encode(format!("{u}:{}", p.expose()).as_bytes());
            auths.insert(r.server.clone(), serde_json::json!({ "auth": token }));
        }
    }
    if auths.is_empty() {
        return None;
    }
    Some(Secret::new(serde_json::json!({ "auths": auths }).to_string() + "\n"))
}

/// The upload name of registry `i`'s `hosts.toml` in the run directory.
pub fn hosts_toml_upload(i: usize) -> String {
    format!("registry-{i}.hosts.toml")
}

/// The upload name of registry `i`'s CA in the run directory (from the package).
pub fn ca_upload(i: usize) -> String {
    format!("registry-ca-{i}.crt")
}

/// The node program (`src/remote/registry_apply.sh`) that puts the uploaded files in place and
/// removes what earlier runs wrote for registries no longer listed.
pub fn apply_cmd(run_dir: &str, regs: &[Registry], with_auth: bool) -> Result<String> {
    let mut args = vec![run_dir.to_string(), if with_auth { AUTH_UPLOAD.to_string() } else { "-".to_string() }];
    for r in regs {
        if let Some(h) = &r.hosts_string {
            let (ip, names) = hosts_entry(h).map_err(|m| Error::input("request", "hosts_string", m))?;
            args.extend(["-e".to_string(), format!("{ip} {names}")]);
        }
    }
    for r in regs {
        check_server(&r.server).map_err(|m| Error::input("request", "server", m))?;
        args.extend([if r.certificate_path.is_some() { "-C" } else { "-s" }.to_string(), r.server.clone()]);
    }
    crate::remote::REGISTRY_APPLY.command(&args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const P: &str = "additionalParams.k8s_cluster_installation_param";

    fn parse(v: Option<&Value>, p: &str, f: &str) -> Result<Vec<Registry>> {
        super::parse(v, p, f, &Policy::Tenant, &mut Vec::new())
    }

    fn parse_one(v: Value) -> Result<Vec<Registry>> {
        parse(Some(&json!([v])), P, "req.json")
    }

    #[test]
    fn unknown_keys_warn() {
        let mut w = Vec::new();
        super::parse(
            Some(&json!([{"connection_type": "0", "server": "r", "insecure": true}])),
            P,
            "f",
            &Policy::Tenant,
            &mut w,
        )
        .unwrap();
        assert_eq!(w, vec![format!("{P}.private_registry_connection_info[0].insecure: unknown key, ignored")]);
    }

    fn err(v: Value) -> String {
        parse_one(v).unwrap_err().to_string()
    }

    #[test]
    fn types_as_string_or_int_logins_optional_and_masked() {
        let r = parse(
            Some(&json!([
                {"connection_type": "1", "server": "reg.example:5000", "username": "puller", "password": "S3cret-pw",
                 "certificate_path": "Files/ca.crt", "hosts_string": "10.0.0.9  reg.example"},
                {"connection_type": 0, "server": "10.0.0.8:5000"}
            ])),
            P,
            "req.json",
        )
        .unwrap();
        assert!(r[0].https && !r[1].https);
        assert_eq!(r[0].login.as_ref().unwrap().0, "puller");
        assert!(r[1].login.is_none(), "no default login");
        assert!(!format!("{r:?}").contains("S3cret-pw"));
        assert_eq!(
            hosts_entry(r[0].hosts_string.as_deref().unwrap()).unwrap(),
            ("10.0.0.9".into(), "reg.example".into())
        );
        assert!(parse(None, P, "f").unwrap().is_empty() && parse(Some(&Value::Null), P, "f").unwrap().is_empty());
    }

    #[test]
    fn bad_entries_name_the_json_path() {
        let at = "req.json: additionalParams.k8s_cluster_installation_param.private_registry_connection_info[0]";
        for (v, want) in [
            (
                json!({"connection_type": "2", "server": "r"}),
                ".connection_type: must be \"0\" (HTTP) or \"1\" (HTTPS), got '2'",
            ),
            (json!({"connection_type": 2, "server": "r"}), ".connection_type: must be"),
            (json!({"server": "r"}), ".connection_type: is required"),
            (json!({"connection_type": "0"}), ".server: is required"),
            (json!({"connection_type": "0", "server": "r; rm -rf /"}), ".server: 'r; rm -rf /' is not host[:port]"),
            (
                json!({"connection_type": "1", "server": "r", "certificate_path": "../ca.crt"}),
                ".certificate_path: '../ca.crt' must stay inside",
            ),
            (
                json!({"connection_type": "1", "server": "r", "certificate_path": "/etc/ca.crt"}),
                ".certificate_path: '/etc/ca.crt' must be relative",
            ),
            (
                json!({"connection_type": "0", "server": "r", "certificate_path": "ca.crt"}),
                ".certificate_path: is for HTTPS",
            ),
            (
                json!({"connection_type": "0", "server": "r", "hosts_string": "reg 10.0.0.1"}),
                ".hosts_string: 'reg 10.0.0.1' is not",
            ),
            (json!({"connection_type": "0", "server": "r", "hosts_string": "10.0.0.1"}), ".hosts_string:"),
            (json!({"connection_type": "0", "server": "r", "hosts_string": "10.0.0.1 a\nb"}), ".hosts_string:"),
            (json!({"connection_type": "0", "server": "r", "username": "u"}), ".password: is required with username"),
            (
                json!({"connection_type": "0", "server": "r", "password": "Pw-9"}),
                ".username: is required with password",
            ),
            (json!({"connection_type": "0", "server": "r", "username": "a:b", "password": "x"}), ".username: 'a:b'"),
            (
                json!({"connection_type": "0", "server": "r", "username": "u", "password": 7}),
                ".password: must be a string",
            ),
        ] {
            let e = err(v.clone());
            assert!(e.starts_with(at) && e.contains(want), "{v}: {e}");
            assert!(!e.contains("Pw-9"), "{e}");
        }
        let e = parse(
            Some(&json!([{"connection_type": "0", "server": "r"}, {"connection_type": "1", "server": "r"}])),
            P,
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("[1].server: 'r' is listed twice"), "{e}");
        let e = parse(Some(&json!({"server": "r"})), P, "f").unwrap_err().to_string();
        assert!(e.contains("private_registry_connection_info: must be an array"), "{e}");
    }

    #[test]
    fn registry_servers_are_host_and_port_only() {
        for ok in ["reg", "reg.example.com:5000", "10.0.0.9:5000", "[fd00::1]:5000", "[fd00::1]", "r-1.x"] {
            assert_eq!(check_server(ok), Ok(()), "{ok}");
        }
        for bad in [
            ".",
            "..",
            "../x",
            "a/b",
            "/etc",
            "-reg",
            "reg:0",
            "reg:99999",
            "reg:-1",
            "reg:5000/x",
            "",
            "a..b",
            "[zz]:1",
            "[::1]x",
            "http://reg",
            "reg:",
            "a b",
            "reg.",
            "ｒｅｇ",
        ] {
            assert!(check_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_toml_is_https_with_the_ca_or_plain_http_with_skip_verify() {
        let regs = parse(
            Some(&json!([
                {"connection_type": "1", "server": "reg.example:5000", "certificate_path": "Files/ca.crt"},
                {"connection_type": "0", "server": "10.0.0.8:5000"},
                {"connection_type": "1", "server": "public.example"}
            ])),
            P,
            "f",
        )
        .unwrap();
        assert_eq!(
            regs[0].hosts_toml(),
            "# managed by mgmt-driver: private_registry_connection_info, HTTPS\nserver = \"https://reg.example:5000\"\n\n\
             [host.\"https://reg.example:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n  \
             ca = \"/etc/containerd/certs.d/reg.example:5000/ca.crt\"\n"
        );
        let http = regs[1].hosts_toml();
        assert!(http.starts_with(MARKER), "{http}");
        assert!(http.contains("server = \"http://10.0.0.8:5000\"") && http.contains("skip_verify = true"), "{http}");
        assert!(!http.contains("ca ="), "{http}");
        let public = regs[2].hosts_toml();
        assert!(!public.contains("skip_verify") && !public.contains("ca ="), "{public}");
    }

    #[test]
    fn kubelet_auth_lists_exactly_the_registries_with_a_login() {
        let regs = parse(
            Some(&json!([
                {"connection_type": "1", "server": "a:5000", "username": "u", "password": "p:w@x"},
                {"connection_type": "0", "server": "b"}
            ])),
            P,
            "f",
        )
        .unwrap();
        let doc: Value = serde_json::from_str(kubelet_auth(&regs).unwrap().expose()).unwrap();
        assert_eq!(doc, json!({"auths": {"a:5000": {"auth": "dTpwOndAeA=="}}}), "base64 of u:p:w@x");
        assert!(kubelet_auth(&regs[1..]).is_none());
    }

    #[test]
    fn the_node_command_carries_servers_and_hosts_lines_never_a_password() {
        let regs = parse(
            Some(&json!([
                {"connection_type": "1", "server": "a:5000", "username": "u", "password": "Pw-in-argv?",
                 "certificate_path": "ca.crt", "hosts_string": "10.0.0.9 a a.example"},
                {"connection_type": "0", "server": "b"}
            ])),
            P,
            "f",
        )
        .unwrap();
        let c = apply_cmd("run/x", &regs, true).unwrap();
        let label = crate::remote::label(&c).unwrap();
        assert_eq!(label, "registry_apply.sh run/x env.registry-auth -e '10.0.0.9 a a.example' -C a:5000 -s b");
        assert!(!c.contains("Pw-in-argv?"));
        let c = apply_cmd("run/x", &[], false).unwrap();
        assert_eq!(crate::remote::label(&c).unwrap(), "registry_apply.sh run/x -");
    }

    /// The node program on a scratch root: files in place with their modes, re-runs idempotent,
    /// a registry removed from the list (and the credentials) removed from the node, a foreign
    /// certs.d directory and a kubelet config that was there before kept.
    #[test]
    fn the_node_program_installs_replaces_and_removes_only_its_own_files() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let run = root.join("run");
        for sub in ["run", "etc/containerd/certs.d/foreign.example", "var/lib/kubelet"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("etc/hosts"), "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\n").unwrap();
        std::fs::write(root.join("etc/containerd/certs.d/foreign.example/hosts.toml"), "server = \"https://x\"\n")
            .unwrap();
        std::fs::write(root.join("var/lib/kubelet/config.json"), "{\"auths\":{}}\n").unwrap();
        let cfg = "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"\"\n";
        std::fs::write(root.join("etc/containerd/config.toml"), cfg).unwrap();
        let regs = parse(
            Some(&json!([
                {"connection_type": "1", "server": "a.example:5000", "username": "u", "password": "Pw-1",
                 "certificate_path": "ca.crt", "hosts_string": "10.0.0.9 a.example"},
                {"connection_type": "0", "server": "10.0.0.8:5000", "hosts_string": "10.0.0.8 b.example"}
            ])),
            P,
            "f",
        )
        .unwrap();
        let run_prog = |regs: &[Registry]| {
            for (i, r) in regs.iter().enumerate() {
                std::fs::write(run.join(hosts_toml_upload(i)), r.hosts_toml()).unwrap();
                std::fs::write(run.join(ca_upload(i)), "CA PEM\n").unwrap();
            }
            let auth = kubelet_auth(regs);
            if let Some(a) = &auth {
                std::fs::write(run.join(AUTH_UPLOAD), a.expose()).unwrap();
            }
            let r = root.display().to_string();
            let c = apply_cmd(&run.display().to_string(), regs, auth.is_some())
                .unwrap()
                .replace("/etc/", &format!("{r}/etc/"))
                .replace("/var/lib/kubelet", &format!("{r}/var/lib/kubelet"));
            let o = std::process::Command::new("sh").arg("-c").arg(&c).env("PATH", "/usr/bin:/bin").output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{out}");
            assert!(!out.contains("Pw-1"), "{out}");
            assert!(!run.join(AUTH_UPLOAD).exists(), "the credentials upload is consumed");
            out
        };
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
        let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
        for _ in 0..2 {
            run_prog(&regs);
        }
        assert_eq!(read("etc/containerd/certs.d/a.example:5000/hosts.toml"), regs[0].hosts_toml());
        assert_eq!(read("etc/containerd/certs.d/a.example:5000/ca.crt"), "CA PEM\n");
        assert_eq!(mode("etc/containerd/certs.d/a.example:5000/hosts.toml"), 0o644);
        assert!(read("etc/containerd/certs.d/10.0.0.8:5000/hosts.toml").contains("skip_verify = true"));
        assert_eq!(
            read("etc/hosts"),
            "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\n10.0.0.9 a.example # mgmt-driver registry\n\
             10.0.0.8 b.example # mgmt-driver registry\n"
        );
        let auth: Value = serde_json::from_str(&read("var/lib/kubelet/config.json")).unwrap();
        assert_eq!(auth, json!({"auths": {"a.example:5000": {"auth": "dTpQdy0x"}}}));
        assert_eq!(mode("var/lib/kubelet/config.json"), 0o600);
        assert_eq!(read("var/lib/kubelet/config.json.pre-mgmt-driver"), "{\"auths\":{}}\n", "kept once");
        let cfg = read("etc/containerd/config.toml");
        assert!(cfg.contains(&format!("config_path = \"{}/etc/containerd/certs.d\"", root.display())), "{cfg}");

        // hosts_update.sh (the nodes' own lines) leaves the registry lines alone, even at a
        // node's address.
        let hosts =
            crate::cluster::node_cmd::hosts_update(&[("10.0.0.9".into(), "master9".into())], &["10.0.0.8".into()])
                .unwrap()
                .replace("/etc/", &format!("{}/etc/", root.display()));
        let o = std::process::Command::new("sh").arg("-c").arg(&hosts).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            read("etc/hosts"),
            "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\n10.0.0.9 a.example # mgmt-driver registry\n\
             10.0.0.8 b.example # mgmt-driver registry\n10.0.0.9 master9 # mgmt-driver\n"
        );
        run_prog(&regs);

        // The HTTPS registry (and with it the only login) leaves the params.
        let out = run_prog(&regs[1..]);
        assert!(out.contains("registry a.example:5000: removed"), "{out}");
        assert!(!root.join("etc/containerd/certs.d/a.example:5000").exists());
        assert!(root.join("etc/containerd/certs.d/foreign.example/hosts.toml").exists(), "not ours: kept");
        assert_eq!(
            read("etc/hosts"),
            "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\n10.0.0.9 master9 # mgmt-driver\n10.0.0.8 b.example # mgmt-driver registry\n"
        );
        assert_eq!(read("var/lib/kubelet/config.json"), "{\"auths\":{}}\n", "the earlier file is back");
        assert!(!root.join("var/lib/kubelet/config.json.mgmt-driver").exists());
        // None left at all (terminate: the run directory may be gone).
        std::fs::remove_dir_all(&run).unwrap();
        let r = root.display().to_string();
        let c = apply_cmd(&run.display().to_string(), &[], false)
            .unwrap()
            .replace("/etc/", &format!("{r}/etc/"))
            .replace("/var/lib/kubelet", &format!("{r}/var/lib/kubelet"));
        let o = std::process::Command::new("sh").arg("-c").arg(&c).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!root.join("etc/containerd/certs.d/10.0.0.8:5000").exists());
        assert_eq!(
            read("etc/hosts"),
            "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\n10.0.0.9 master9 # mgmt-driver\n"
        );
    }

    #[test]
    fn the_node_program_refuses_values_that_could_leave_certs_d() {
        for args in [
            vec!["r", "-", "-s", ".."],
            vec!["r", "-", "-s", "../etc"],
            vec!["r", "-", "-s", "a/b"],
            vec!["r", "-", "-C", "-rf"],
            vec!["r", "x/../../y", "-s", "a"],
            vec!["r", "-", "-e", "10.0.0.1 a\nb"],
            vec!["r", "-", "-e", "10.0.0.1 $(id)"],
        ] {
            let c = crate::remote::REGISTRY_APPLY.command(&args).unwrap();
            let o = std::process::Command::new("sh").arg("-c").arg(&c).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
