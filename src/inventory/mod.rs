//! The inventory: which hosts exist, how to reach them, and which groups they belong to.
//!
//! Group names are the VNFD's `aspect_id` / `vdu_id` (e.g. `master_instance`), so a request's
//! `additionalParams` can name them directly; `cps` holds named connection points such as the HA
//! VIP. Every host field may be given under `defaults` and overridden per host. Unknown keys are
//! errors (a typo like `pasword_env` must not silently fall back to no password), and secrets are
//! loaded into [`Secret`](crate::secret::Secret) at once so they never reach a log.
//!
//! The user's OpenSSH client configuration (`~/.ssh/config`, or the file given in
//! [`LoadOptions::ssh_config`]) fills in what the inventory leaves unset; the private
//! `ssh_config` module below says exactly how. An inventory a hook's request names from the VNF
//! package ([`LoadOptions::package`]) is a tenant's choice: `package.rs` lets it list nodes only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{excerpt, Error, Result};

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
        let mut raw = parse_shape(text, file)?;
        // A VNF package's inventory (a hook's request named it) lists nodes only.
        let opts = &package::restrict(&mut raw, opts, file)?;
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

    /// Whether `text` has an inventory's shape: it parses, its keys are known, its values have
    /// their types, its group and connection point names and addresses are well formed. Nothing
    /// is read, resolved or connected: `sites render` checks each rendered inventory with this.
    pub fn check_shape(text: &str, file: &str) -> Result<()> {
        parse_shape(text, file).map(drop)
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

mod checks;
mod model;
mod package;
pub mod placement;
mod resolve;
mod ssh_config;
#[cfg(test)]
mod tests;
pub mod yaml_limits;

/// An IP address or a host name (for addresses given outside an inventory: `ee register --host`).
pub use checks::validate_addr;
use resolve::*;

pub use checks::check_user;
use checks::{check_logins, check_name};
pub use model::{fmt_addr, Auth, Host, HostKeyCheck, Jump, LoadOptions, PackageMode, SshConfigSource};
use model::{HostSpec, InventoryFile};

/// The file as written, checked for shape only (see [`Inventory::check_shape`]).
fn parse_shape(text: &str, file: &str) -> Result<InventoryFile> {
    // Input bombs (aliases, deep nesting) are refused before the real deserialization.
    yaml_limits::check(text).map_err(|m| Error::input(file, "inventory", m))?;
    let raw: InventoryFile = yaml_serde::from_str(text).map_err(|e| Error::input(file, "inventory", e.to_string()))?;
    for (group, _) in &raw.groups.0 {
        check_name(group).map_err(|m| Error::input(file, format!("groups.{}", excerpt(group)), m))?;
    }
    for (name, addr) in &raw.cps {
        let at = format!("cps.{}", excerpt(name));
        check_name(name).map_err(|m| Error::input(file, &at, m))?;
        validate_addr(addr)
            .map_err(|_| Error::input(file, &at, format!("'{}' is not an IP address or host name", excerpt(addr))))?;
    }
    let d = &raw.defaults;
    for (key, set) in [("name", d.name.is_some()), ("ssh_ip", d.ssh_ip.is_some()), ("nic_ip", d.nic_ip.is_some())] {
        if set {
            return Err(Error::input(file, format!("defaults.{key}"), "is per host; it cannot be a default"));
        }
    }
    Ok(raw)
}
