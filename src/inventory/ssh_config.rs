//! The user's OpenSSH client configuration, as `ssh` reads it, filling in what the inventory
//! leaves unset. Parsing and `Host` pattern matching are the `ssh2-config` crate's.
//!
//! - A `Host` block applies to an inventory host when its patterns match the host's `ssh_ip`
//!   or its `name`; as in OpenSSH, the first value found top-down wins, so `Host *` defaults go
//!   last.
//! - `HostName` replaces `ssh_ip` when the block matched the `ssh_ip` itself (an alias such as
//!   `edge1`), or the name when `ssh_ip` is not set; `%h` in it is the alias.
//! - `User`, `Port`, `IdentityFile` (the first file that exists), `ProxyJump` (a comma-separated
//!   chain; `none` means no jump) and `UserKnownHostsFile` (the first file; `none` means
//!   `/dev/null`) fill the matching inventory fields only where neither the host entry nor
//!   `defaults:` sets them: the inventory always wins. A jump hop that is not an inventory host
//!   is itself looked up (HostName, User, Port, and IdentityFile: its key, since such a hop is
//!   never sent a password; see `resolve::jump_auth`).
//! - `~` expands to `$HOME`; relative `Include` files are taken from `~/.ssh`, as `ssh` does.
//! - `Match` blocks are skipped: their options apply to no host (their conditions, such as
//!   `exec`, are not evaluated). An `Include` inside a `Host` block applies the included file's
//!   own `Host` blocks unconditionally.
//! - Other options (ciphers, ProxyCommand, StrictHostKeyChecking, ...) are read and ignored.

use std::path::{Path, PathBuf};

use ssh2_config::{DefaultAlgorithms, HostParams, ParseRule, SshConfig};

use super::checks::validate_addr;
use super::model::{HostSpec, SshConfigSource};
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
        let h =
            self.config.get_hosts().iter().filter(|h| h.intersects(alias)).find_map(|h| h.params.host_name.clone())?;
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
