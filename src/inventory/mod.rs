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

use crate::error::{excerpt, Error, Result};
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
    /// Never written in an inventory (not deserialized): set by a heal or scale-out hook on
    /// exactly the nodes the VNFM rebuilt at a known address (`cluster/rebuilt.rs`). The old
    /// entries of that host:port are replaced by the key it offers now, with an event; a
    /// `@revoked` key is still refused. Otherwise as accept-new.
    #[serde(skip)]
    Relearn,
}

impl std::fmt::Display for HostKeyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostKeyCheck::Strict => "strict",
            HostKeyCheck::AcceptNew => "accept-new",
            HostKeyCheck::Off => "off",
            HostKeyCheck::Relearn => "re-learn (rebuilt VM)",
        })
    }
}

/// Every per-host setting; used both for `defaults` and for each host entry. `Debug` masks the
/// inline passwords.
#[derive(Clone, Default, Deserialize)]
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

impl std::fmt::Debug for HostSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mask = |p: &Option<String>| p.as_ref().map(|_| crate::secret::MASK);
        f.debug_struct("HostSpec")
            .field("name", &self.name)
            .field("ssh_ip", &self.ssh_ip)
            .field("nic_ip", &self.nic_ip)
            .field("user", &self.user)
            .field("port", &self.port)
            .field("password", &mask(&self.password))
            .field("password_env", &self.password_env)
            .field("password_file", &self.password_file)
            .field("identity_file", &self.identity_file)
            .field("identity_passphrase_env", &self.identity_passphrase_env)
            .field("identity_passphrase_file", &self.identity_passphrase_file)
            .field("known_hosts", &self.known_hosts)
            .field("host_key_check", &self.host_key_check)
            .field("jump", &self.jump)
            .field("become_password", &mask(&self.become_password))
            .field("become_password_env", &self.become_password_env)
            .field("become_password_file", &self.become_password_file)
            .finish()
    }
}

impl HostSpec {
    /// A password or key set in the inventory itself (host entry or `defaults:`).
    fn has_credentials(&self) -> bool {
        self.password.is_some()
            || self.password_env.is_some()
            || self.password_file.is_some()
            || self.identity_file.is_some()
    }
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
    /// Where each host runs, for the workers' placement labels (`placement.rs`).
    #[serde(default)]
    placement: BTreeMap<String, placement::Placement>,
}

/// Credentials for one login. At least one of them is set, or the agent is used.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    pub password: Option<Secret>,
    pub identity_file: Option<PathBuf>,
    pub identity_passphrase: Option<Secret>,
    /// Use ssh-agent (`SSH_AUTH_SOCK`): set when no key and no password are configured.
    pub agent: bool,
    /// The driver's own keys (`mgmt-driver key`), OpenSSH private key text unsealed from the
    /// state store, tried first and in order (the new key, then the old one while a rotation is
    /// pending). Held in memory only: never written to disk in clear.
    pub driver_keys: Vec<Secret>,
}

/// One hop of a ProxyJump chain.
#[derive(Clone, Debug, Default)]
pub struct Jump {
    pub user: String,
    pub addr: String,
    pub port: u16,
    /// The hop's own credentials, never the target's password (see `resolve::jump_auth`).
    pub auth: Auth,
    /// A hop naming an inventory host checks its host key as that host does; `None`: as the
    /// target does.
    pub host_key: Option<(PathBuf, HostKeyCheck)>,
}

/// Two jumps are the same hop when they reach the same `user@addr:port`.
impl PartialEq for Jump {
    fn eq(&self, o: &Jump) -> bool {
        (&self.user, &self.addr, self.port) == (&o.user, &o.addr, o.port)
    }
}
impl Eq for Jump {}

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
    /// Host name → where it runs (compute host, zone): checked label values of listed hosts.
    pub placement: BTreeMap<String, placement::Placement>,
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
        let text = crate::input_limit::read_capped(path, crate::input_limit::INVENTORY_MAX_BYTES, "inventory")?;
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
        // Input bombs (aliases, deep nesting) are refused before the real deserialization.
        yaml_limits::check(text).map_err(|m| Error::input(file, "inventory", m))?;
        let raw: InventoryFile =
            yaml_serde::from_str(text).map_err(|e| Error::input(file, "inventory", e.to_string()))?;
        for (group, _) in &raw.groups.0 {
            check_name(group).map_err(|m| Error::input(file, format!("groups.{}", excerpt(group)), m))?;
        }
        for (name, addr) in &raw.cps {
            let at = format!("cps.{}", excerpt(name));
            check_name(name).map_err(|m| Error::input(file, &at, m))?;
            validate_addr(addr).map_err(|_| {
                Error::input(file, &at, format!("'{}' is not an IP address or host name", excerpt(addr)))
            })?;
        }
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
                // Hook mode: a host the inventory gives no credential logs in with the
                // request's user and password (Tacker's contract), so an operator's
                // `Host *` User/IdentityFile must not replace them.
                let request_login = opts.credentials_from_request && !spec.has_credentials();
                let (user, identity) = (spec.user.clone(), spec.identity_file.clone());
                ssh.fill(spec).map_err(|m| Error::input(file, format!("{at}.ssh_ip"), m))?;
                if request_login {
                    (spec.user, spec.identity_file) = (user, identity);
                }
            }
        }
        // Resolve after all names are known, so `jump:` may name another inventory host.
        let names: BTreeMap<String, HostSpec> =
            pending.iter().map(|(s, _)| (s.name.clone().unwrap_or_default(), s.clone())).collect();
        for (spec, at) in &pending {
            let host = ctx.resolve(spec, at, &names)?;
            check_logins(&host).map_err(|(field, m)| Error::input(file, format!("{at}.{field}"), m))?;
            inv.hosts.push(host);
        }
        for (group, members) in &inv.groups {
            for &m in members {
                inv.hosts[m].groups.push(group.clone());
            }
        }
        for (name, p) in raw.placement {
            let at = format!("placement.{}", excerpt(&name));
            if !inv.hosts.iter().any(|h| h.name == name) {
                return Err(Error::input(file, at, "names no host of the inventory"));
            }
            p.check().map_err(|(field, m)| Error::input(file, format!("{at}.{field}"), m))?;
            inv.placement.insert(name, p);
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

pub mod placement;
mod resolve;
mod ssh_config;
#[cfg(test)]
mod tests;
pub mod yaml_limits;

/// An IP address or a host name (for addresses given outside an inventory: `ee register --host`).
pub use resolve::validate_addr;
use resolve::*;

/// A POSIX portable login name (`[A-Za-z_][A-Za-z0-9._-]*`, at most 32 characters, as
/// `useradd` accepts): never empty, never an option (`-oProxyCommand=…`), no `@`, `:`,
/// whitespace or control characters. OpenSSH would pass a leading `-` to its own argv; we refuse
/// such names wherever they come from (inventory, `defaults:`, ssh config, a `jump:` hop).
pub fn check_user(user: &str) -> std::result::Result<(), String> {
    let mut b = user.bytes();
    let first_ok = b.next().is_some_and(|c| c.is_ascii_alphabetic() || c == b'_');
    let rest_ok = b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if first_ok && rest_ok && user.len() <= 32 {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a login name: letters, digits, '.', '_', '-', starting with a letter or '_', at most 32",
            excerpt(user)
        ))
    }
}

/// Every login of a resolved host: its user and each jump hop's.
fn check_logins(h: &Host) -> std::result::Result<(), (String, String)> {
    check_user(&h.user).map_err(|m| ("user".to_string(), m))?;
    for (i, j) in h.jump.iter().enumerate() {
        check_user(&j.user).map_err(|m| (format!("jump[{i}]"), m))?;
    }
    Ok(())
}

/// A group or connection-point name: letters, digits, `_`, `-`, `.` (VNFD ids are such).
fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!("'{}': names are 1..253 letters, digits, '_', '-', '.'", excerpt(name)))
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
