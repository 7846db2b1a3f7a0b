//! Turning the file's host specs into [`Host`]s: defaults merged under each host, secrets
//! loaded, addresses and names checked, jumps parsed, the OpenSSH client configuration applied.

use super::checks::validate_addr;
use super::model::*;
use super::ssh_config;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::secret::Secret;

pub(super) fn merge(d: &HostSpec, h: &HostSpec) -> HostSpec {
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

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) base: &'a Path,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) opts: &'a LoadOptions,
    pub(super) ssh: Option<&'a ssh_config::Client>,
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

    /// Where and how one merged host spec checks host keys.
    fn host_key(&self, s: &HostSpec, at: &str) -> Result<(PathBuf, HostKeyCheck)> {
        let host_key_check = s.host_key_check.unwrap_or(HostKeyCheck::AcceptNew);
        if host_key_check == HostKeyCheck::Off && !self.opts.allow_insecure {
            return Err(self.err(
                at,
                "host_key_check",
                "'off' requires --insecure-no-host-key-check on the command line",
            ));
        }
        let known_hosts = match (s.known_hosts.as_deref(), &self.opts.default_known_hosts) {
            (Some(p), _) => self.path(p),
            (None, Some(d)) => d.clone(),
            (None, None) => self.path("~/.ssh/known_hosts"),
        };
        Ok((known_hosts, host_key_check))
    }

    /// The login credentials of one merged host spec (`at` names it in errors).
    fn auth(&self, s: &HostSpec, at: &str) -> Result<Auth> {
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
        Ok(Auth { password, identity_file, identity_passphrase, agent, driver_keys: vec![] })
    }

    pub(super) fn resolve(&self, s: &HostSpec, at: &str, names: &BTreeMap<String, HostSpec>) -> Result<Host> {
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
        let auth = self.auth(s, at)?;
        let (known_hosts, host_key_check) = self.host_key(s, at)?;
        let become_password =
            self.secret(at, "become_password", &s.become_password, &s.become_password_env, &s.become_password_file)?;
        let mut jump = Vec::new();
        for (i, j) in s.jump.clone().unwrap_or_default().iter().enumerate() {
            let field = format!("jump[{i}]");
            let (mut hop, via) = parse_jump(j, &user, names, self.ssh).map_err(|m| self.err(at, &field, m))?;
            let named = match &via {
                HopVia::Inventory(name) => {
                    let at = format!("{at}.{field} ({name})");
                    hop.host_key = Some(self.host_key(&names[name], &at)?);
                    Some(self.auth(&names[name], &at)?)
                }
                HopVia::Address { .. } => None,
            };
            let config_key = match via {
                HopVia::Address { config_key } => config_key,
                HopVia::Inventory(_) => None,
            };
            hop.auth = jump_auth(named, config_key, &auth, (self.env)("SSH_AUTH_SOCK").is_some());
            jump.push(hop);
        }
        Ok(Host {
            name,
            addr,
            port,
            nic_ip: s.nic_ip.clone(),
            user,
            auth,
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

/// Where a jump hop came from, which decides its credentials (see [`jump_auth`]).
enum HopVia {
    /// It names this inventory host.
    Inventory(String),
    /// An address (or an ssh config alias), with the first existing `IdentityFile` the ssh
    /// config gives for it.
    Address { config_key: Option<PathBuf> },
}

/// `[user@]host[:port]`, where host may name another inventory host or a `Host` of the ssh
/// config, whose HostName/User/Port fill in what the hop does not say.
fn parse_jump(
    s: &str,
    default_user: &str,
    names: &BTreeMap<String, HostSpec>,
    ssh: Option<&ssh_config::Client>,
) -> std::result::Result<(Jump, HopVia), String> {
    let (user, rest) = match s.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, s),
    };
    let (host, port) = split_host_port(rest).map_err(|m| format!("'{s}': {m}"))?;
    if let Some(spec) = names.get(&host) {
        let addr = spec.ssh_ip.clone().ok_or_else(|| format!("'{host}' has no ssh_ip"))?;
        let jump = Jump {
            user: user.or_else(|| spec.user.clone()).unwrap_or_else(|| default_user.to_string()),
            addr,
            port: port.or(spec.port).unwrap_or(22),
            ..Jump::default()
        };
        return Ok((jump, HopVia::Inventory(host)));
    }
    let (addr, user, port, config_key) = match ssh {
        Some(c) => {
            let p = c.params(&[&host]);
            let key = p
                .identity_file
                .iter()
                .flatten()
                .map(|f| std::path::absolute(f).unwrap_or(f.clone()))
                .find(|f| f.is_file());
            (c.host_name(&host).unwrap_or(host), user.or(p.user), port.or(p.port), key)
        }
        None => (host, user, port, None),
    };
    validate_addr(&addr)?;
    let jump = Jump {
        user: user.unwrap_or_else(|| default_user.to_string()),
        addr,
        port: port.unwrap_or(22),
        ..Jump::default()
    };
    Ok((jump, HopVia::Address { config_key }))
}

/// The credentials a jump hop logs in with. A bastion is another machine, often another
/// owner's: it must never be offered the target's password.
/// - A hop naming an inventory host uses that host's own credentials (`named`).
/// - Any other hop uses keys only: the ssh config's `IdentityFile` for it, else the target's
///   key file (public-key login proves possession without handing the key or its passphrase
///   to the server), and ssh-agent when one runs. No password, ever.
pub(super) fn jump_auth(named: Option<Auth>, config_key: Option<PathBuf>, target: &Auth, agent_running: bool) -> Auth {
    if let Some(a) = named {
        return a;
    }
    let (identity_file, identity_passphrase) = match config_key {
        Some(k) if Some(&k) != target.identity_file.as_ref() => (Some(k), None),
        _ => (target.identity_file.clone(), target.identity_passphrase.clone()),
    };
    Auth { password: None, identity_file, identity_passphrase, agent: agent_running, driver_keys: vec![] }
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

#[cfg(test)]
mod jump_tests {
    use super::*;
    use crate::inventory::Inventory;

    fn pw(s: &str) -> Option<Secret> {
        Some(Secret::new(s.to_string()))
    }

    #[test]
    fn a_jump_never_gets_the_target_password() {
        let target = Auth { password: pw("target-pw"), ..Auth::default() };
        let a = jump_auth(None, None, &target, false);
        assert!(a.password.is_none() && a.identity_file.is_none() && !a.agent, "{a:?}");
        assert!(jump_auth(None, None, &target, true).agent);
        // The target's key (and its passphrase, used locally only) may open the hop.
        let keyed = Auth {
            password: pw("target-pw"),
            identity_file: Some("/k/id".into()),
            identity_passphrase: pw("pp"),
            agent: false,
            driver_keys: vec![],
        };
        let a = jump_auth(None, None, &keyed, false);
        assert!(a.password.is_none());
        assert_eq!(a.identity_file.as_deref(), Some(Path::new("/k/id")));
        assert_eq!(a.identity_passphrase.as_ref().map(|s| s.expose()), Some("pp"));
        // The ssh config's own key for the hop wins; the target's passphrase is not for it.
        let a = jump_auth(None, Some("/k/bastion".into()), &keyed, false);
        assert_eq!(a.identity_file.as_deref(), Some(Path::new("/k/bastion")));
        assert!(a.identity_passphrase.is_none() && a.password.is_none());
        // A hop naming an inventory host logs in as that host does, password included.
        let own = Auth { password: pw("bastion-pw"), ..Auth::default() };
        let a = jump_auth(Some(own), None, &keyed, true);
        assert_eq!(a.password.as_ref().map(|s| s.expose()), Some("bastion-pw"));
        assert!(a.identity_file.is_none() && !a.agent);
    }

    #[test]
    fn inventory_jumps_carry_the_right_credentials() {
        let env = |k: &str| match k {
            "BASTION_PW" => Some("bastion-pw".to_string()),
            _ => None,
        };
        let text = "defaults: {user: ops, password: target-pw}\ngroups:\n  b:\n    - {name: bast, ssh_ip: 198.18.0.11, password_env: BASTION_PW, known_hosts: bastion_kh, host_key_check: strict}\n  h:\n    - {name: n1, ssh_ip: 198.19.0.11, jump: [bast]}\n    - {name: n2, ssh_ip: 198.19.0.12, jump: ['me@198.18.0.99']}\n";
        let opts = LoadOptions { ssh_config: SshConfigSource::None, ..Default::default() };
        let inv = Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts).unwrap();
        let n1 = &inv.hosts[1].jump[0];
        assert_eq!(n1.auth.password.as_ref().map(|s| s.expose()), Some("bastion-pw"));
        assert_eq!(n1.host_key, Some((PathBuf::from("/base/bastion_kh"), HostKeyCheck::Strict)));
        assert!(inv.hosts[2].jump[0].host_key.is_none());
        let n2 = &inv.hosts[2].jump[0];
        assert_eq!(n2.user, "me");
        assert!(n2.auth.password.is_none() && n2.auth.identity_file.is_none() && !n2.auth.agent, "{:?}", n2.auth);
        assert_eq!(inv.hosts[2].auth.password.as_ref().map(|s| s.expose()), Some("target-pw"));
    }
}
