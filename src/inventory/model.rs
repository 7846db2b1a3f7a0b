//! The inventory's types: what the file says (`HostSpec`, in the file's own shape) and what a
//! resolved host is (`Host`: address, login, credentials, host-key policy, jump hops), with the
//! command-line options that shape loading. Kept apart from the loading (`mod.rs`) and the
//! resolving (`resolve.rs`) so both can use them without importing each other.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

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
pub(super) struct HostSpec {
    pub(super) name: Option<String>,
    pub(super) ssh_ip: Option<String>,
    pub(super) nic_ip: Option<String>,
    pub(super) user: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) password: Option<String>,
    pub(super) password_env: Option<String>,
    pub(super) password_file: Option<String>,
    pub(super) identity_file: Option<String>,
    pub(super) identity_passphrase_env: Option<String>,
    pub(super) identity_passphrase_file: Option<String>,
    pub(super) known_hosts: Option<String>,
    pub(super) host_key_check: Option<HostKeyCheck>,
    pub(super) jump: Option<Vec<String>>,
    pub(super) become_password: Option<String>,
    pub(super) become_password_env: Option<String>,
    pub(super) become_password_file: Option<String>,
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
    pub(super) fn has_credentials(&self) -> bool {
        self.password.is_some()
            || self.password_env.is_some()
            || self.password_file.is_some()
            || self.identity_file.is_some()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InventoryFile {
    #[serde(default)]
    pub(super) defaults: HostSpec,
    #[serde(default)]
    pub(super) groups: indexmap_like::OrderedGroups,
    #[serde(default)]
    pub(super) cps: BTreeMap<String, String>,
    /// Where each host runs, for the workers' placement labels (`placement.rs`).
    #[serde(default)]
    pub(super) placement: BTreeMap<String, super::placement::Placement>,
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
        Host::bare(name, addr, 22)
    }

    /// A host with no credentials: root, strict host keys against /dev/null, no jump (the
    /// controller itself as `cnf --kubeconfig`'s only node, and unit tests).
    pub fn bare(name: &str, addr: &str, port: u16) -> Host {
        Host {
            name: name.into(),
            addr: addr.into(),
            port,
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
    /// `Some`: the inventory is a file of a VNF package that a hook's request named (a tenant's
    /// choice, a vendor's file), not the operator's: it may list nodes only (`package.rs`).
    pub package: Option<PackageMode>,
    /// Where a host's key is learned when neither the inventory nor the OpenSSH configuration
    /// names a known_hosts: `None` is OpenSSH's `~/.ssh/known_hosts`. A VNFM hook sets its own
    /// (`options.known_hosts`, else the instance's file, `cluster::instance_hosts`): the
    /// conductor user's file is shared by everything it ever reached, and never pruned.
    pub default_known_hosts: Option<PathBuf>,
}

/// How a package inventory's nodes are reached: everything but the addresses is the operator's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageMode {
    /// The operator's known_hosts for the hook's nodes (`--known-hosts`, else the state
    /// directory's), where every node's key is learned on first contact (accept-new).
    pub known_hosts: PathBuf,
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
