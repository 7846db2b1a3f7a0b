//! The inventory: which hosts exist, how to reach them, and which groups they belong to.
//!
//! Group names are the VNFD's `aspect_id` / `vdu_id` (e.g. `master_instance`), so a request's
//! `additionalParams` can name them directly; `cps` holds named connection points such as the HA
//! VIP. Every host field may be given under `defaults` and overridden per host. Unknown keys are
//! errors (a typo like `pasword_env` must not silently fall back to no password), and secrets are
//! loaded into [`Secret`] at once so they never reach a log.
//!
//! The user's OpenSSH client configuration (`~/.ssh/config`, or the file given in
//! [`LoadOptions::ssh_config`]) fills in what the inventory leaves unset; the private
//! `ssh_config` module below says exactly how.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::secret::Secret;

/// How a server's host key is checked against `known_hosts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyCheck {
    /// The key must already be in known_hosts.
    Strict,
    /// Unknown hosts are recorded on first contact (TOFU); a changed key is refused.
    AcceptNew,
    /// No check at all; only allowed with `--insecure-no-host-key-check`, warns per host.
    Off,
}

impl std::fmt::Display for HostKeyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostKeyCheck::Strict => "strict",
            HostKeyCheck::AcceptNew => "accept-new",
            HostKeyCheck::Off => "off",
        })
    }
}

/// Every per-host setting; used both for `defaults` and for each host entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSpec {
    name: Option<String>,
    ssh_ip: Option<String>,
    nic_ip: Option<String>,
    user: Option<String>,
    port: Option<u16>,
    password: Option<String>,
    password_env: Option<String>,
    password_file: Option<String>,
    identity_file: Option<String>,
    identity_passphrase_env: Option<String>,
    identity_passphrase_file: Option<String>,
    known_hosts: Option<String>,
    host_key_check: Option<HostKeyCheck>,
    jump: Option<Vec<String>>,
    become_password: Option<String>,
    become_password_env: Option<String>,
    become_password_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile {
    #[serde(default)]
    defaults: HostSpec,
    #[serde(default)]
    groups: indexmap_like::OrderedGroups,
    #[serde(default)]
    cps: BTreeMap<String, String>,
}

/// Credentials for one login. At least one of them is set, or the agent is used.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    pub password: Option<Secret>,
    pub identity_file: Option<PathBuf>,
    pub identity_passphrase: Option<Secret>,
    /// Use ssh-agent (`SSH_AUTH_SOCK`): set when no key and no password are configured.
    pub agent: bool,
}

/// One hop of a ProxyJump chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jump {
    pub user: String,
    pub addr: String,
    pub port: u16,
}

impl std::fmt::Display for Jump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.user, fmt_addr(&self.addr, self.port))
    }
}

/// A fully resolved host: nothing left to look up at connect time.
#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    pub addr: String,
    pub port: u16,
    pub nic_ip: Option<String>,
    pub user: String,
    pub auth: Auth,
    pub known_hosts: PathBuf,
    pub host_key_check: HostKeyCheck,
    pub jump: Vec<Jump>,
    pub become_password: Option<Secret>,
    pub groups: Vec<String>,
}

impl Host {
    /// A minimal host for unit tests: root, strict host keys against /dev/null, no jump.
    #[cfg(test)]
    pub fn for_test(name: &str, addr: &str) -> Host {
        Host {
            name: name.into(),
            addr: addr.into(),
            port: 22,
            nic_ip: None,
            user: "root".into(),
            auth: Auth::default(),
            known_hosts: "/dev/null".into(),
            host_key_check: HostKeyCheck::Strict,
            jump: vec![],
            become_password: None,
            groups: vec![],
        }
    }

    /// `addr:port`, with brackets for IPv6 literals.
    pub fn endpoint(&self) -> String {
        fmt_addr(&self.addr, self.port)
    }
}

pub fn fmt_addr(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Hosts in the order they first appear in the file.
    pub hosts: Vec<Host>,
    /// Group name → indexes into `hosts`, in file order.
    pub groups: Vec<(String, Vec<usize>)>,
    /// Named connection points (e.g. `vip_CP`).
    pub cps: BTreeMap<String, String>,
}

/// Options that come from the command line rather than the file.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// `--insecure-no-host-key-check`: permits `host_key_check: off`.
    pub allow_insecure: bool,
    /// Cluster hooks: a host without credentials gets the request's username and password
    /// (Tacker's way), so "no credential" is not an error here.
    pub credentials_from_request: bool,
    /// The OpenSSH client configuration consulted for every host (`--ssh-config FILE|none`).
    pub ssh_config: SshConfigSource,
}

/// Where the OpenSSH client configuration comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SshConfigSource {
    /// `$HOME/.ssh/config` when it exists; no file is fine.
    #[default]
    Default,
    /// This file, which must be readable.
    File(PathBuf),
    /// No client configuration at all (like `ssh -F none`).
    None,
}

impl SshConfigSource {
    /// The command-line form: `none`, or a file name.
    pub fn from_arg(arg: &str) -> SshConfigSource {
        if arg == "none" {
            SshConfigSource::None
        } else {
            SshConfigSource::File(PathBuf::from(arg))
        }
    }
}

impl Inventory {
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Inventory> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(path.display().to_string(), "inventory", format!("cannot read: {e}")))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &path.display().to_string(), &base, &|k| std::env::var(k).ok(), opts)
    }

    /// Parse inventory text. `env` looks up environment variables (a parameter so tests need
    /// not mutate the process environment). Relative paths are resolved against `base`.
    pub fn parse(
        text: &str,
        file: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        opts: &LoadOptions,
    ) -> Result<Inventory> {
        let raw: InventoryFile =
            yaml_serde::from_str(text).map_err(|e| Error::input(file, "inventory", e.to_string()))?;
        let d = &raw.defaults;
        for (key, set) in [("name", d.name.is_some()), ("ssh_ip", d.ssh_ip.is_some()), ("nic_ip", d.nic_ip.is_some())] {
            if set {
                return Err(Error::input(file, format!("defaults.{key}"), "is per host; it cannot be a default"));
            }
        }
        let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or_else(dirs::home_dir);
        let ssh = ssh_config::Client::load(&opts.ssh_config, home.as_deref())?;
        let ctx = Ctx { file, base, env, opts, ssh: ssh.as_ref() };
        let mut inv = Inventory { cps: raw.cps, ..Default::default() };
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        // (merged spec, where it was first defined), in first-appearance order.
        let mut pending: Vec<(HostSpec, String)> = Vec::new();
        for (group, entries) in raw.groups.0 {
            let mut members = Vec::new();
            for (i, entry) in entries.into_iter().enumerate() {
                let at = format!("groups.{group}[{i}]");
                let name = entry.name.clone().ok_or_else(|| Error::input(file, format!("{at}.name"), "is required"))?;
                let merged = merge(&raw.defaults, &entry);
                let idx = if let Some(&idx) = by_name.get(&name) {
                    let prev = &pending[idx].0;
                    if prev.ssh_ip != merged.ssh_ip || prev.port != merged.port || prev.user != merged.user {
                        return Err(Error::input(
                            file,
                            at.to_string(),
                            format!("host '{name}' appears again with a different ssh_ip/port/user"),
                        ));
                    }
                    idx
                } else {
                    by_name.insert(name.clone(), pending.len());
                    pending.push((merged, at));
                    pending.len() - 1
                };
                if !members.contains(&idx) {
                    members.push(idx);
                }
            }
            inv.groups.push((group, members));
        }
        // What the inventory leaves unset comes from the ssh config, before jumps are resolved,
        // so a `jump:` naming an inventory host gets that host's address after its HostName.
        if let Some(ssh) = &ssh {
            for (spec, at) in &mut pending {
                ssh.fill(spec).map_err(|m| Error::input(file, format!("{at}.ssh_ip"), m))?;
            }
        }
        // Resolve after all names are known, so `jump:` may name another inventory host.
        let names: BTreeMap<String, HostSpec> =
            pending.iter().map(|(s, _)| (s.name.clone().unwrap_or_default(), s.clone())).collect();
        for (spec, at) in &pending {
            inv.hosts.push(ctx.resolve(spec, at, &names)?);
        }
        for (group, members) in &inv.groups {
            for &m in members {
                inv.hosts[m].groups.push(group.clone());
            }
        }
        Ok(inv)
    }

    /// Hosts selected by `--group`/`--host` (empty selectors mean every host), in file order.
    pub fn select(&self, groups: &[String], hosts: &[String]) -> Result<Vec<Host>> {
        for g in groups {
            if !self.groups.iter().any(|(name, _)| name == g) {
                let known: Vec<&str> = self.groups.iter().map(|(n, _)| n.as_str()).collect();
                return Err(Error::input(
                    "--group",
                    g.clone(),
                    format!("no such group (groups: {})", known.join(", ")),
                ));
            }
        }
        for h in hosts {
            if !self.hosts.iter().any(|x| &x.name == h) {
                return Err(Error::input("--host", h.clone(), "no such host in the inventory"));
            }
        }
        let picked: Vec<Host> = self
            .hosts
            .iter()
            .filter(|h| {
                (groups.is_empty() && hosts.is_empty())
                    || h.groups.iter().any(|g| groups.contains(g))
                    || hosts.contains(&h.name)
            })
            .cloned()
            .collect();
        if picked.is_empty() {
            return Err(Error::input("inventory", "groups", "selects no host"));
        }
        Ok(picked)
    }
}

fn merge(d: &HostSpec, h: &HostSpec) -> HostSpec {
    macro_rules! pick {
        ($($f:ident),*) => { HostSpec { $($f: h.$f.clone().or_else(|| d.$f.clone()),)* } };
    }
    let mut m = pick!(
        name,
        ssh_ip,
        nic_ip,
        user,
        port,
        password,
        password_env,
        password_file,
        identity_file,
        identity_passphrase_env,
        identity_passphrase_file,
        known_hosts,
        host_key_check,
        jump,
        become_password,
        become_password_env,
        become_password_file
    );
    // A host that sets its own credential source replaces the default one rather than being
    // merged with it: `password:` on a host must win over `defaults.password_env`.
    if h.password.is_some() || h.password_env.is_some() || h.password_file.is_some() {
        m.password = h.password.clone();
        m.password_env = h.password_env.clone();
        m.password_file = h.password_file.clone();
    }
    if h.become_password.is_some() || h.become_password_env.is_some() || h.become_password_file.is_some() {
        m.become_password = h.become_password.clone();
        m.become_password_env = h.become_password_env.clone();
        m.become_password_file = h.become_password_file.clone();
    }
    m
}

struct Ctx<'a> {
    file: &'a str,
    base: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
    opts: &'a LoadOptions,
    ssh: Option<&'a ssh_config::Client>,
}

impl Ctx<'_> {
    fn err(&self, at: &str, field: &str, msg: impl Into<String>) -> Error {
        Error::input(self.file, format!("{at}.{field}"), msg)
    }

    fn path(&self, p: &str) -> PathBuf {
        let expanded = if let Some(rest) = p.strip_prefix("~/") {
            dirs::home_dir().unwrap_or_default().join(rest)
        } else {
            PathBuf::from(p)
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.base.join(expanded)
        }
    }

    /// One secret from exactly one of: inline value, environment variable, file.
    fn secret(
        &self,
        at: &str,
        prefix: &str,
        inline: &Option<String>,
        env: &Option<String>,
        file: &Option<String>,
    ) -> Result<Option<Secret>> {
        let given = [inline.is_some(), env.is_some(), file.is_some()].iter().filter(|b| **b).count();
        if given > 1 {
            return Err(self.err(at, prefix, format!("set only one of {prefix}, {prefix}_env, {prefix}_file")));
        }
        if let Some(v) = inline {
            return Ok(Some(Secret::new(v.clone())));
        }
        if let Some(var) = env {
            return match (self.env)(var) {
                Some(v) if !v.is_empty() => Ok(Some(Secret::new(v))),
                _ => Err(self.err(
                    at,
                    &format!("{prefix}_env"),
                    format!("environment variable {var} is not set or empty"),
                )),
            };
        }
        if let Some(f) = file {
            let path = self.path(f);
            let v = std::fs::read_to_string(&path)
                .map_err(|e| self.err(at, &format!("{prefix}_file"), format!("cannot read {}: {e}", path.display())))?;
            // One trailing line ending is file formatting, not part of the secret.
            let v = v.strip_suffix('\n').map(|x| x.strip_suffix('\r').unwrap_or(x)).unwrap_or(&v);
            return Ok(Some(Secret::new(v.to_string())));
        }
        Ok(None)
    }

    fn resolve(&self, s: &HostSpec, at: &str, names: &BTreeMap<String, HostSpec>) -> Result<Host> {
        let name = s.name.clone().unwrap_or_default();
        validate_name(&name).map_err(|m| self.err(at, "name", m))?;
        let addr = s.ssh_ip.clone().ok_or_else(|| self.err(at, "ssh_ip", "is required"))?;
        validate_addr(&addr).map_err(|m| self.err(at, "ssh_ip", m))?;
        if let Some(nic) = &s.nic_ip {
            validate_addr(nic).map_err(|m| self.err(at, "nic_ip", m))?;
        }
        let port = s.port.unwrap_or(22);
        if port == 0 {
            return Err(self.err(at, "port", "must be 1..65535"));
        }
        let user = s.user.clone().unwrap_or_else(|| "root".to_string());
        if user.is_empty() || user.contains(['@', ':', '\0', '\n']) {
            return Err(self.err(at, "user", "is not a valid user name"));
        }
        let password = self.secret(at, "password", &s.password, &s.password_env, &s.password_file)?;
        let identity_passphrase =
            self.secret(at, "identity_passphrase", &None, &s.identity_passphrase_env, &s.identity_passphrase_file)?;
        let identity_file = s.identity_file.as_deref().map(|p| self.path(p));
        if let Some(p) = &identity_file {
            if !p.is_file() {
                return Err(self.err(at, "identity_file", format!("{} does not exist", p.display())));
            }
        }
        if identity_passphrase.is_some() && identity_file.is_none() {
            return Err(self.err(at, "identity_passphrase_env", "is set but identity_file is not"));
        }
        let agent = password.is_none() && identity_file.is_none();
        if agent && !self.opts.credentials_from_request && (self.env)("SSH_AUTH_SOCK").is_none() {
            return Err(self.err(
                at,
                "password",
                "no credential: set password/password_env/password_file or identity_file, or run an ssh-agent (SSH_AUTH_SOCK)",
            ));
        }
        let host_key_check = s.host_key_check.unwrap_or(HostKeyCheck::AcceptNew);
        if host_key_check == HostKeyCheck::Off && !self.opts.allow_insecure {
            return Err(self.err(
                at,
                "host_key_check",
                "'off' requires --insecure-no-host-key-check on the command line",
            ));
        }
        let known_hosts = self.path(s.known_hosts.as_deref().unwrap_or("~/.ssh/known_hosts"));
        let become_password =
            self.secret(at, "become_password", &s.become_password, &s.become_password_env, &s.become_password_file)?;
        let mut jump = Vec::new();
        for (i, j) in s.jump.clone().unwrap_or_default().iter().enumerate() {
            jump.push(parse_jump(j, &user, names, self.ssh).map_err(|m| self.err(at, &format!("jump[{i}]"), m))?);
        }
        Ok(Host {
            name,
            addr,
            port,
            nic_ip: s.nic_ip.clone(),
            user,
            auth: Auth { password, identity_file, identity_passphrase, agent },
            known_hosts,
            host_key_check,
            jump,
            become_password,
            groups: Vec::new(),
        })
    }
}

fn validate_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err("must be 1..253 characters".into());
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return Err(format!("'{name}' may only contain letters, digits, '-', '_' and '.'"));
    }
    Ok(())
}

/// An address is an IP literal or a DNS name; nothing else may reach a socket or a shell.
fn validate_addr(addr: &str) -> std::result::Result<(), String> {
    if addr.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let ok = !addr.is_empty()
        && addr.len() <= 253
        && addr.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
        && !addr.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!("'{addr}' is not an IP address or host name"))
    }
}

/// `[user@]host[:port]`, where host may name another inventory host or a `Host` of the ssh
/// config, whose HostName/User/Port fill in what the hop does not say.
fn parse_jump(
    s: &str,
    default_user: &str,
    names: &BTreeMap<String, HostSpec>,
    ssh: Option<&ssh_config::Client>,
) -> std::result::Result<Jump, String> {
    let (user, rest) = match s.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, s),
    };
    let (host, port) = split_host_port(rest).map_err(|m| format!("'{s}': {m}"))?;
    if let Some(spec) = names.get(&host) {
        let addr = spec.ssh_ip.clone().ok_or_else(|| format!("'{host}' has no ssh_ip"))?;
        return Ok(Jump {
            user: user.or_else(|| spec.user.clone()).unwrap_or_else(|| default_user.to_string()),
            addr,
            port: port.or(spec.port).unwrap_or(22),
        });
    }
    let (addr, user, port) = match ssh {
        Some(c) => {
            let p = c.params(&[&host]);
            (c.host_name(&host).unwrap_or(host), user.or(p.user), port.or(p.port))
        }
        None => (host, user, port),
    };
    validate_addr(&addr)?;
    Ok(Jump { user: user.unwrap_or_else(|| default_user.to_string()), addr, port: port.unwrap_or(22) })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 literal has no port.
fn split_host_port(rest: &str) -> std::result::Result<(String, Option<u16>), String> {
    let port = |p: &str| p.parse::<u16>().map_err(|_| "bad port".to_string());
    if let Some(inner) = rest.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or("unclosed '['")?;
        let p = match after.strip_prefix(':') {
            Some(p) => Some(port(p)?),
            None => None,
        };
        return Ok((h.to_string(), p));
    }
    match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((h.to_string(), Some(port(p)?))),
        _ => Ok((rest.to_string(), None)),
    }
}

/// The user's OpenSSH client configuration, as `ssh` reads it, filling in what the inventory
/// leaves unset. Parsing and `Host` pattern matching are the `ssh2-config` crate's.
///
/// - A `Host` block applies to an inventory host when its patterns match the host's `ssh_ip`
///   or its `name`; as in OpenSSH, the first value found top-down wins, so `Host *` defaults go
///   last.
/// - `HostName` replaces `ssh_ip` when the block matched the `ssh_ip` itself (an alias such as
///   `edge1`), or the name when `ssh_ip` is not set; `%h` in it is the alias.
/// - `User`, `Port`, `IdentityFile` (the first file that exists), `ProxyJump` (a comma-separated
///   chain; `none` means no jump) and `UserKnownHostsFile` (the first file; `none` means
///   `/dev/null`) fill the matching inventory fields only where neither the host entry nor
///   `defaults:` sets them: the inventory always wins. A jump hop that is not an inventory host
///   is itself looked up (HostName, User, Port).
/// - `~` expands to `$HOME`; relative `Include` files are taken from `~/.ssh`, as `ssh` does.
/// - `Match` blocks are skipped: their options apply to no host (their conditions, such as
///   `exec`, are not evaluated). An `Include` inside a `Host` block applies the included file's
///   own `Host` blocks unconditionally.
/// - Other options (ciphers, ProxyCommand, StrictHostKeyChecking, ...) are read and ignored.
mod ssh_config {
    use std::path::{Path, PathBuf};

    use ssh2_config::{DefaultAlgorithms, HostParams, ParseRule, SshConfig};

    use super::{validate_addr, HostSpec, SshConfigSource};
    use crate::error::{Error, Result};

    /// Stands in for a `Match` line: a `Host` block no name can match.
    const NEVER: &str = "Host !*";
    /// `Include` loops or absurd depth; OpenSSH stops at 16 too.
    const MAX_INCLUDE_DEPTH: usize = 16;

    pub struct Client {
        file: String,
        home: Option<PathBuf>,
        config: SshConfig,
    }

    impl Client {
        /// Read the configuration `src` names; `Ok(None)` when there is none to read.
        pub fn load(src: &SshConfigSource, home: Option<&Path>) -> Result<Option<Client>> {
            let path = match src {
                SshConfigSource::None => return Ok(None),
                SshConfigSource::File(p) => p.clone(),
                SshConfigSource::Default => match home.map(|h| h.join(".ssh").join("config")) {
                    Some(p) if p.exists() => p,
                    _ => return Ok(None),
                },
            };
            let file = path.display().to_string();
            let err = |m: String| Error::input(file.clone(), "ssh config", m);
            let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read: {e}")))?;
            let mut flat = String::new();
            flatten(&text, home, 0, &mut flat).map_err(err)?;
            let mut config = SshConfig::default();
            if let Some(h) = home {
                config = config.home_dir(h);
            }
            let rules = ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS;
            let config = config.parse(&mut flat.as_bytes(), rules).map_err(|e| err(e.to_string()))?;
            Ok(Some(Client { file, home: home.map(Path::to_path_buf), config }))
        }

        /// Options of every block matching any of `names`, first value wins.
        pub fn params(&self, names: &[&str]) -> HostParams {
            let mut p = HostParams::new(&DefaultAlgorithms::empty());
            for h in self.config.get_hosts() {
                if names.iter().any(|n| h.intersects(n)) {
                    p.overwrite_if_none(&h.params);
                }
            }
            p
        }

        /// The `HostName` for `alias`, if a block matching it sets one.
        pub fn host_name(&self, alias: &str) -> Option<String> {
            let h = self
                .config
                .get_hosts()
                .iter()
                .filter(|h| h.intersects(alias))
                .find_map(|h| h.params.host_name.clone())?;
            Some(h.replace("%%", "\0").replace("%h", alias).replace('\0', "%"))
        }

        /// Fill the fields of `s` the inventory left unset.
        pub(super) fn fill(&self, s: &mut HostSpec) -> std::result::Result<(), String> {
            let name = s.name.clone().unwrap_or_default();
            let alias = s.ssh_ip.clone().unwrap_or_else(|| name.clone());
            let p = self.params(&[&alias, &name]);
            if let Some(h) = self.host_name(&alias) {
                validate_addr(&h).map_err(|m| format!("HostName for '{alias}' in {}: {m}", self.file))?;
                s.ssh_ip = Some(h);
            }
            if s.user.is_none() {
                s.user = p.user.clone();
            }
            if s.port.is_none() {
                s.port = p.port;
            }
            if s.identity_file.is_none() {
                s.identity_file = p
                    .identity_file
                    .iter()
                    .flatten()
                    .map(|f| absolute(f.clone()))
                    .find(|f| f.is_file())
                    .map(|f| f.display().to_string());
            }
            if s.known_hosts.is_none() {
                let file = p.unsupported_fields.get("userknownhostsfile").and_then(|v| v.first());
                s.known_hosts = file.map(|f| match f.as_str() {
                    "none" => "/dev/null".to_string(),
                    f => absolute(self.expand_home(f)).display().to_string(),
                });
            }
            if s.jump.is_none() {
                if let Some(chain) = &p.proxy_jump {
                    let hops = chain.iter().map(|h| h.trim()).filter(|h| !h.is_empty());
                    s.jump = Some(if chain.len() == 1 && chain[0].trim() == "none" {
                        Vec::new()
                    } else {
                        hops.map(|h| h.strip_prefix("ssh://").unwrap_or(h).to_string()).collect()
                    });
                }
            }
            Ok(())
        }

        fn expand_home(&self, p: &str) -> PathBuf {
            match (p.strip_prefix('~'), &self.home) {
                (Some(""), Some(h)) => h.clone(),
                (Some(rest), Some(h)) if rest.starts_with('/') => h.join(&rest[1..]),
                _ => PathBuf::from(p),
            }
        }
    }

    /// Relative paths in the ssh config are relative to where the command runs, not to the
    /// inventory file.
    fn absolute(p: PathBuf) -> PathBuf {
        std::path::absolute(&p).unwrap_or(p)
    }

    /// The config with every `Include` inlined and every `Match` block turned into a block that
    /// matches nothing, so `ssh2-config` (which knows neither `Match` nor our skipping rule) sees
    /// one plain file. After an inlined file the enclosing block is reopened, so lines after the
    /// `Include` keep applying where they did.
    fn flatten(text: &str, home: Option<&Path>, depth: usize, out: &mut String) -> std::result::Result<(), String> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(format!("Include nested more than {MAX_INCLUDE_DEPTH} deep (a loop?)"));
        }
        let mut block: Option<String> = None;
        let mut in_match = false;
        for line in text.lines() {
            let t = line.trim_start();
            let (keyword, args) = t.split_at(t.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(t.len()));
            match keyword.to_ascii_lowercase().as_str() {
                "match" => {
                    block = Some(NEVER.to_string());
                    in_match = true;
                    out.push_str(NEVER);
                }
                "host" => {
                    block = Some(line.to_string());
                    in_match = false;
                    out.push_str(line);
                }
                "include" if in_match => {}
                "include" => {
                    let args = args.trim_start().trim_start_matches('=');
                    for arg in args.split_whitespace().map(|a| a.trim_matches('"')) {
                        for f in include_files(arg, home)? {
                            let t = std::fs::read_to_string(&f)
                                .map_err(|e| format!("Include {}: cannot read: {e}", f.display()))?;
                            flatten(&t, home, depth + 1, out)?;
                        }
                    }
                    out.push_str(block.as_deref().unwrap_or("Host *"));
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        Ok(())
    }

    /// The files an `Include` argument names: `~` is `$HOME`, relative is under `~/.ssh`, glob
    /// patterns in the file order `ssh` uses (sorted); no match is not an error.
    fn include_files(arg: &str, home: Option<&Path>) -> std::result::Result<Vec<PathBuf>, String> {
        let home_pat = || home.map(|h| glob::Pattern::escape(&h.display().to_string()));
        let pattern = if arg.starts_with('/') {
            arg.to_string()
        } else if let Some(rest) = arg.strip_prefix("~/") {
            format!("{}/{rest}", home_pat().ok_or_else(|| format!("Include {arg}: no home directory"))?)
        } else {
            format!("{}/.ssh/{arg}", home_pat().ok_or_else(|| format!("Include {arg}: no home directory"))?)
        };
        let found = glob::glob(&pattern).map_err(|e| format!("Include {arg}: {e}"))?;
        let mut files: Vec<PathBuf> = found.filter_map(|r| r.ok()).filter(|p| p.is_file()).collect();
        files.sort();
        Ok(files)
    }
}

/// Groups in file order. YAML mappings are unordered to serde's `BTreeMap`, but an operator
/// expects hosts in the order written, so we keep the order by hand.
mod indexmap_like {
    use super::HostSpec;
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

    #[derive(Debug, Default)]
    pub struct OrderedGroups(pub Vec<(String, Vec<HostSpec>)>);

    impl<'de> Deserialize<'de> for OrderedGroups {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = OrderedGroups;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a mapping of group name to a list of hosts")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<OrderedGroups, A::Error> {
                    let mut out: Vec<(String, Vec<HostSpec>)> = Vec::new();
                    while let Some((k, v)) = m.next_entry::<String, Vec<HostSpec>>()? {
                        if out.iter().any(|(n, _)| n == &k) {
                            return Err(serde::de::Error::custom(format!("group '{k}' is defined twice")));
                        }
                        out.push((k, v));
                    }
                    Ok(OrderedGroups(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "NODE_PW" => Some("s3cret'pw".into()),
            "SUDO_PW" => Some("sudo-pw".into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<Inventory> {
        // Hermetic: the developer's own ~/.ssh/config must not change these results.
        let opts = LoadOptions { ssh_config: SshConfigSource::None, ..Default::default() };
        Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts)
    }

    const SAMPLE: &str = r#"
defaults:
  user: ubuntu
  port: 22
  password_env: NODE_PW
  known_hosts: ./known_hosts
  host_key_check: accept-new
  jump: [ops@bastion:2222]
  become_password_env: SUDO_PW
groups:
  master_instance:
    - {name: master1, ssh_ip: 198.18.0.10, nic_ip: 10.0.0.10}
  worker_instance:
    - {name: worker1, ssh_ip: 198.18.0.20, port: 2200, user: admin, jump: []}
    - {name: master1, ssh_ip: 198.18.0.10}
cps:
  vip_CP: 198.18.0.100
"#;

    #[test]
    fn sample_resolves_defaults_overrides_and_groups() {
        let inv = parse(SAMPLE).unwrap();
        assert_eq!(inv.hosts.len(), 2);
        let m = &inv.hosts[0];
        assert_eq!(
            (m.name.as_str(), m.addr.as_str(), m.port, m.user.as_str()),
            ("master1", "198.18.0.10", 22, "ubuntu")
        );
        assert_eq!(m.nic_ip.as_deref(), Some("10.0.0.10"));
        assert_eq!(m.auth.password.as_ref().unwrap().expose(), "s3cret'pw");
        assert!(!m.auth.agent);
        assert_eq!(m.known_hosts, PathBuf::from("/base/./known_hosts"));
        assert_eq!(m.jump, vec![Jump { user: "ops".into(), addr: "bastion".into(), port: 2222 }]);
        assert_eq!(m.become_password.as_ref().unwrap().expose(), "sudo-pw");
        assert_eq!(m.groups, vec!["master_instance", "worker_instance"]);
        let w = &inv.hosts[1];
        assert_eq!((w.port, w.user.as_str()), (2200, "admin"));
        assert!(w.jump.is_empty());
        assert_eq!(inv.cps["vip_CP"], "198.18.0.100");
        assert_eq!(inv.groups[1].1, vec![1, 0]);
    }

    #[test]
    fn unknown_key_names_the_key_and_file() {
        let err = parse("defaults:\n  pasword_env: X\ngroups: {}\n").unwrap_err().to_string();
        assert!(err.starts_with("inv.yaml"), "{err}");
        assert!(err.contains("pasword_env"), "{err}");
    }

    #[test]
    fn missing_env_var_names_field_and_variable_but_no_value() {
        let text = "groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1, password_env: NOPE}\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains("groups.g[0].password_env"), "{err}");
        assert!(err.contains("NOPE"), "{err}");
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let inv = parse(SAMPLE).unwrap();
        let dump = format!("{inv:?}");
        assert!(!dump.contains("s3cret") && !dump.contains("sudo-pw"), "{dump}");
    }

    #[test]
    fn host_key_off_needs_the_cli_flag() {
        let text = "defaults: {password: x, host_key_check: off}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains("host_key_check") && err.contains("--insecure-no-host-key-check"), "{err}");
        let ok = Inventory::parse(
            text,
            "f",
            Path::new("/"),
            &env,
            &LoadOptions { allow_insecure: true, ..Default::default() },
        )
        .unwrap();
        assert_eq!(ok.hosts[0].host_key_check, HostKeyCheck::Off);
    }

    #[test]
    fn hostile_addresses_and_names_are_refused() {
        for (field, bad) in
            [("ssh_ip", "10.0.0.1;reboot"), ("ssh_ip", "$(id)"), ("name", "a b"), ("nic_ip", "-oProxyCommand=x")]
        {
            let host = match field {
                "ssh_ip" => format!("{{name: a, ssh_ip: '{bad}'}}"),
                "name" => format!("{{name: '{bad}', ssh_ip: 10.0.0.1}}"),
                _ => format!("{{name: a, ssh_ip: 10.0.0.1, nic_ip: '{bad}'}}"),
            };
            let text = format!("defaults: {{password: x}}\ngroups:\n  g:\n    - {host}\n");
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(&format!("groups.g[0].{field}")), "{bad}: {err}");
        }
    }

    #[test]
    fn jump_may_name_an_inventory_host() {
        let text = "defaults: {password: x}\ngroups:\n  b:\n    - {name: bastion, ssh_ip: 198.18.0.11, user: ops}\n  h:\n    - {name: n, ssh_ip: 198.19.0.11, jump: [bastion]}\n";
        let inv = parse(text).unwrap();
        assert_eq!(inv.hosts[1].jump, vec![Jump { user: "ops".into(), addr: "198.18.0.11".into(), port: 22 }]);
    }

    #[test]
    fn select_by_group_and_host() {
        let inv = parse(SAMPLE).unwrap();
        let names = |v: Vec<Host>| v.into_iter().map(|h| h.name).collect::<Vec<_>>();
        assert_eq!(names(inv.select(&["worker_instance".into()], &[]).unwrap()), vec!["master1", "worker1"]);
        assert_eq!(names(inv.select(&[], &["worker1".into()]).unwrap()), vec!["worker1"]);
        assert!(inv.select(&["nope".into()], &[]).unwrap_err().to_string().contains("nope"));
    }

    #[test]
    fn no_credential_without_agent_is_an_error() {
        let err = parse("groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n").unwrap_err().to_string();
        assert!(err.contains("no credential"), "{err}");
    }

    /// A fake `$HOME` holding `.ssh/config` (and any other files), and an inventory parsed with it.
    struct SshHome {
        dir: tempfile::TempDir,
    }

    impl SshHome {
        fn new(config: &str) -> SshHome {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join(".ssh")).unwrap();
            std::fs::write(dir.path().join(".ssh/config"), config).unwrap();
            SshHome { dir }
        }

        fn home(&self) -> &Path {
            self.dir.path()
        }

        fn touch(&self, rel: &str) -> PathBuf {
            let p = self.home().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
            p
        }

        fn parse_with(&self, text: &str, src: SshConfigSource) -> Result<Inventory> {
            let home = self.home().display().to_string();
            let env = move |k: &str| if k == "HOME" { Some(home.clone()) } else { env(k) };
            let opts = LoadOptions { ssh_config: src, ..Default::default() };
            Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts)
        }

        /// With the default source: `$HOME/.ssh/config`.
        fn parse(&self, text: &str) -> Result<Inventory> {
            self.parse_with(text, SshConfigSource::Default)
        }
    }

    #[test]
    fn ssh_config_alias_resolves_through_hostname() {
        let h = SshHome::new("Host edge1\n    HostName 10.0.0.5\n");
        let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e1, ssh_ip: edge1}\n").unwrap();
        assert_eq!(inv.hosts[0].addr, "10.0.0.5");
        assert_eq!(inv.hosts[0].name, "e1");
        // `%h` is the alias; a host without ssh_ip is looked up by its name.
        let h = SshHome::new("Host n1\n  HostName %h.lab.example\n");
        let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: n1}\n").unwrap();
        assert_eq!(inv.hosts[0].addr, "n1.lab.example");
        // Without a HostName the missing ssh_ip is still an error.
        let err = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: other}\n").unwrap_err().to_string();
        assert!(err.contains("groups.g[0].ssh_ip: is required"), "{err}");
    }

    #[test]
    fn ssh_config_fills_user_port_identity_and_known_hosts() {
        let h = SshHome::new(
            "Host 10.0.0.7\n  User admin\n  Port 2222\n  IdentityFile ~/.ssh/missing_key\n  IdentityFile ~/.ssh/id_test\n  UserKnownHostsFile ~/lab_known_hosts\n",
        );
        let key = h.touch(".ssh/id_test");
        let inv = h.parse("groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n").unwrap();
        let a = &inv.hosts[0];
        assert_eq!((a.user.as_str(), a.port), ("admin", 2222));
        // The first IdentityFile that exists, `~` being $HOME; a key means no agent is needed.
        assert_eq!(a.auth.identity_file.as_deref(), Some(key.as_path()));
        assert!(!a.auth.agent);
        assert_eq!(a.known_hosts, h.home().join("lab_known_hosts"));
    }

    #[test]
    fn the_inventory_wins_over_ssh_config() {
        let h = SshHome::new(
            "Host 10.0.0.7 a\n  User admin\n  Port 2222\n  IdentityFile ~/.ssh/id_test\n  ProxyJump hop\n  UserKnownHostsFile /cfg/kh\n",
        );
        h.touch(".ssh/id_test");
        let inv_key = h.touch("inv_key");
        let text = format!(
            "defaults: {{identity_file: {}, known_hosts: /inv/kh, jump: []}}\ngroups:\n  g:\n    - {{name: a, ssh_ip: 10.0.0.7, user: ubuntu, port: 22}}\n",
            inv_key.display()
        );
        let a = h.parse(&text).unwrap().hosts.remove(0);
        assert_eq!((a.user.as_str(), a.port), ("ubuntu", 22));
        assert_eq!(a.auth.identity_file.as_deref(), Some(inv_key.as_path()));
        assert_eq!(a.known_hosts, PathBuf::from("/inv/kh"));
        assert!(a.jump.is_empty());
        // `defaults:` is the inventory too: it wins over a host-specific block.
        let a = h
            .parse("defaults: {user: ops, password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n")
            .unwrap()
            .hosts
            .remove(0);
        assert_eq!((a.user.as_str(), a.port), ("ops", 2222));
    }

    #[test]
    fn ssh_config_proxyjump_chain_maps_onto_jumps() {
        let h = SshHome::new(
            "Host 198.19.*\n  ProxyJump ops@198.18.0.1:2200,hop2,bastion,ssh://[fd00::1]:22\n\
             Host hop2\n  HostName 10.9.9.9\n  User j2\n  Port 2022\n\
             Host nojump\n  HostName 198.19.0.99\n  ProxyJump none\n",
        );
        let text = "defaults: {password: x, user: me}\ngroups:\n  b:\n    - {name: bastion, ssh_ip: 198.18.0.11, user: ops}\n  h:\n    - {name: n, ssh_ip: 198.19.0.11}\n    - {name: m, ssh_ip: nojump}\n";
        let inv = h.parse(text).unwrap();
        let j = |user: &str, addr: &str, port| Jump { user: user.into(), addr: addr.into(), port };
        assert_eq!(
            inv.hosts[1].jump,
            vec![
                j("ops", "198.18.0.1", 2200),
                j("j2", "10.9.9.9", 2022),
                // Names an inventory host: that host's address and user, as `jump:` does.
                j("ops", "198.18.0.11", 22),
                j("me", "fd00::1", 22),
            ]
        );
        // `ProxyJump none` wins over the later wildcard block (first value wins).
        assert_eq!(inv.hosts[2].addr, "198.19.0.99");
        assert!(inv.hosts[2].jump.is_empty());
        assert!(inv.hosts[0].jump.is_empty());
    }

    #[test]
    fn ssh_config_host_star_defaults_come_last_and_names_match_too() {
        let h = SshHome::new(
            "Host special\n  User sp\n\
             Host 10.0.0.*\n  Port 2200\n\
             Host *\n  User fallback\n  Port 2222\n",
        );
        let text = "defaults: {password: x}\ngroups:\n  g:\n    - {name: special, ssh_ip: 10.0.0.1}\n    - {name: plain, ssh_ip: 10.1.0.1}\n";
        let inv = h.parse(text).unwrap();
        assert_eq!((inv.hosts[0].user.as_str(), inv.hosts[0].port), ("sp", 2200));
        assert_eq!((inv.hosts[1].user.as_str(), inv.hosts[1].port), ("fallback", 2222));
    }

    #[test]
    fn ssh_config_match_blocks_are_skipped() {
        let h = SshHome::new(
            "Match all\n  User from-match\n\
             Host edge1\n  HostName 10.0.0.5\n\
             Match host edge1 exec \"false\"\n  Port 2999\n  Include nothing-here\n\
             Host *\n  Port 2200\n",
        );
        let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n").unwrap();
        let e = &inv.hosts[0];
        assert_eq!((e.addr.as_str(), e.user.as_str(), e.port), ("10.0.0.5", "root", 2200));
    }

    #[test]
    fn ssh_config_include_is_inlined_and_the_enclosing_block_continues() {
        let h = SshHome::new("Include config.d/*.conf\nUser top\nHost edge1\n  Include ~/extra\n  Port 2022\n");
        std::fs::create_dir_all(h.home().join(".ssh/config.d")).unwrap();
        std::fs::write(h.home().join(".ssh/config.d/10-edge.conf"), "Host edge1\n  HostName 10.0.0.5\n").unwrap();
        std::fs::write(h.home().join("extra"), "IdentityFile ~/k\nHost unrelated\n  Port 1\n").unwrap();
        let key = h.touch("k");
        let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n").unwrap();
        let e = &inv.hosts[0];
        assert_eq!((e.addr.as_str(), e.user.as_str(), e.port), ("10.0.0.5", "top", 2022));
        assert_eq!(e.auth.identity_file.as_deref(), Some(key.as_path()));
    }

    #[test]
    fn ssh_config_sources_none_missing_and_unreadable() {
        let text = "defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n";
        let h = SshHome::new("Host edge1\n  HostName 10.0.0.5\n");
        assert_eq!(h.parse_with(text, SshConfigSource::None).unwrap().hosts[0].addr, "edge1");
        // An explicit file replaces the default one.
        let other = h.home().join("other_config");
        std::fs::write(&other, "Host edge1\n  HostName 10.0.0.6\n").unwrap();
        assert_eq!(h.parse_with(text, SshConfigSource::File(other)).unwrap().hosts[0].addr, "10.0.0.6");
        // No default file is fine.
        std::fs::remove_file(h.home().join(".ssh/config")).unwrap();
        assert_eq!(h.parse(text).unwrap().hosts[0].addr, "edge1");
        // An explicit file that cannot be read is an error naming it.
        for bad in [h.home().join("nope"), h.home().join(".ssh")] {
            let err = h.parse_with(text, SshConfigSource::File(bad.clone())).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{}: ssh config: cannot read", bad.display())), "{err}");
        }
        // So is one ssh would refuse, and a HostName that is not an address.
        std::fs::write(h.home().join("bad"), "Host x\n  Port many\n").unwrap();
        let err = h.parse_with(text, SshConfigSource::File(h.home().join("bad"))).unwrap_err().to_string();
        assert!(err.contains("bad: ssh config:"), "{err}");
        std::fs::write(h.home().join("bad"), "Host edge1\n  HostName 'x;reboot'\n").unwrap();
        let err = h.parse_with(text, SshConfigSource::File(h.home().join("bad"))).unwrap_err().to_string();
        assert!(err.contains("groups.g[0].ssh_ip: HostName for 'edge1'"), "{err}");
        assert_eq!(SshConfigSource::from_arg("none"), SshConfigSource::None);
        assert_eq!(SshConfigSource::from_arg("f"), SshConfigSource::File("f".into()));
    }
}
