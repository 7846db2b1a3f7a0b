//! Turning the file's host specs into [`Host`]s: defaults merged under each host, secrets
//! loaded, addresses and names checked, jumps parsed, the OpenSSH client configuration applied.

use super::*;

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
pub(super) fn validate_addr(addr: &str) -> std::result::Result<(), String> {
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
