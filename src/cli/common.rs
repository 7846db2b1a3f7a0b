//! What every subcommand shares, declared once: connection flags, fan-out and dry-run flags,
//! `--state-dir` and `--known-hosts`, each family's defaults for them, the one duration parser,
//! and the one set-up that turns them into a connector (SSH, or the plan connector for
//! `--dry-run`), a runner, a store and a renderer. Subcommands only parse their own arguments and
//! call an operation.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio::task::JoinHandle;

use crate::env_vars;
use crate::error::{Error, Result};
use crate::event::Events;
use crate::inventory::{LoadOptions, SshConfigSource};
use crate::lifecycle::plan::PlanConnector;
use crate::lifecycle::runner::DEFAULT_PARALLEL;
use crate::lifecycle::state::Store;
use crate::lifecycle::state_key::StateKey;
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::render::{Output, Renderer};
use crate::secret_ref::{Allowed, Policy};
use crate::ssh::{SshConnector, SshOptions};
use crate::transport::Connector;

/// How to reach nodes. Global: every command takes them, the hooks included.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct ConnArgs {
    /// Per connection attempt (TCP + handshake + login): `10`, `10s`, `500ms`, `1m`.
    #[arg(long, global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub connect_timeout: Option<Duration>,
    /// Keep retrying nodes that are not up yet (refused, unreachable) this long (default: 60s for
    /// exec/put/get/run-script, 300s for the hooks, 30s for sites apply, 5s per master for cnf and
    /// workload, 10s for key, ee and primitive).
    #[arg(long, global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub retry_for: Option<Duration>,
    /// A file transfer step, an SSH channel open or an upload's probe reply that makes no
    /// progress this long fails, naming node and path (default: 120s).
    #[arg(long, global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub stall_timeout: Option<Duration>,
    /// Key exchange algorithms, most preferred first (comma-separated), e.g.
    /// `curve25519-sha256,diffie-hellman-group14-sha256`.
    #[arg(long, global = true, value_delimiter = ',', value_name = "ALG,...")]
    pub kex: Option<Vec<String>>,
    /// Allow `host_key_check: off` in the inventory (warns for every host).
    #[arg(long, global = true)]
    pub insecure_no_host_key_check: bool,
    /// OpenSSH client config whose HostName, User, Port, IdentityFile, ProxyJump and
    /// UserKnownHostsFile fill what the inventory leaves unset (default: ~/.ssh/config if it
    /// exists; `none` reads no file, like `ssh -F none`).
    #[arg(long, global = true, env = env_vars::SSH_CONFIG, value_name = "FILE|none")]
    pub ssh_config: Option<String>,
}

/// How many nodes at once, and whether to run at all.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct RunArgs {
    /// How many nodes at once (default: 256 for exec/put/get/run-script, 64 for the hooks, sites,
    /// key, ee and primitive, 16 masters for cnf and workload).
    #[arg(short, long, global = true, value_name = "N")]
    pub parallel: Option<usize>,
    /// Start no new node after the first failure.
    #[arg(long, global = true)]
    pub fail_fast: bool,
    /// Print what would run where, in order, and connect to nothing; nothing is written.
    #[arg(long, global = true)]
    pub dry_run: bool,
}

/// What the operator's secret references may reach (`secret_ref.rs`). Global: the request files
/// of the hook and `cnf` commands and the `sites` renders take references; a VNFM's request
/// (`hook`) never does, whatever is given here.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct SecretArgs {
    /// `@file:` references in request files named on the command line may read files under DIR
    /// only (symlinks resolved; repeatable; the variable takes DIR:DIR). None given: no `@file:`.
    #[arg(long = "secrets-dir", global = true, env = env_vars::SECRETS_DIR, value_delimiter = ':', value_name = "DIR")]
    pub secrets_dir: Vec<PathBuf>,
    /// `@env:` references in request files named on the command line may read this variable, or
    /// those starting with PREFIX (repeatable; the variable takes NAME,PREFIX*). None given: no
    /// `@env:` (a site catalogue's declared secrets need neither flag).
    #[arg(
        long = "secret-env",
        global = true,
        env = env_vars::SECRET_ENV,
        value_delimiter = ',',
        value_parser = parse_env_rule,
        value_name = "NAME|PREFIX*"
    )]
    pub secret_env: Vec<String>,
}

/// The VIMs a hook may ask for node addresses the VNF instance lacks (`src/vim/`). The request's
/// `vimConnectionInfo` is a tenant's: its Keystone endpoint is used only when listed here.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Global options")]
pub struct VimArgs {
    /// A Keystone v3 endpoint (as the VIM entry's `interfaceInfo.endpoint` names it) the hooks
    /// may authenticate to, with the entry's own credentials, to read the VNFCs' ports from
    /// Neutron (repeatable; the variable takes URL,URL). None given: the VIM is never asked.
    #[arg(long = "vim-auth-url", global = true, env = env_vars::VIM_AUTH_URLS, value_delimiter = ',', value_name = "URL")]
    pub vim_auth_url: Vec<String>,
    /// A PEM bundle of CAs to trust for the VIM's HTTPS endpoints, besides the system's.
    #[arg(long = "vim-cacert", global = true, value_name = "FILE")]
    pub vim_cacert: Option<PathBuf>,
}

fn parse_env_rule(s: &str) -> std::result::Result<String, String> {
    crate::secret_ref::check_env_rule(s).map(|()| s.to_string())
}

/// `--state-dir`: the state store. One declaration, flattened into every command that opens it.
#[derive(Args, Debug, Clone, Default)]
pub struct StateDir {
    /// The state store: instance state, the sites' status, EE records, the driver's key,
    /// primitive runs (default: ~/.local/state/mgmt-driver).
    #[arg(long, global = true, env = env_vars::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// `--known-hosts`: for the commands whose nodes may come from a VNF instance or the store
/// rather than an inventory (which names its own known_hosts).
#[derive(Args, Debug, Clone, Default)]
pub struct KnownHosts {
    /// The known_hosts file for nodes not taken from an inventory (a VnfInstance's, a recorded
    /// cluster's): new keys are recorded there on first contact (accept-new). Default, in the
    /// state directory: a cluster's own <instance id>.known_hosts (removed with the
    /// instance), known_hosts for a CNF's masters.
    #[arg(long, global = true, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
}

/// The parts of the command line every subcommand's set-up needs.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub output: Output,
    pub verbose: bool,
    pub conn: ConnArgs,
    pub run: RunArgs,
    /// `--state-key`: the file of the key that seals the state store's secrets.
    pub state_key: Option<PathBuf>,
    /// `--secrets-dir`, `--secret-env`.
    pub secrets: SecretArgs,
    /// `--vim-auth-url`, `--vim-cacert`.
    pub vim: VimArgs,
}

/// A command family's own defaults for `--retry-for` and `--parallel` (their help texts list
/// these; a unit test keeps them in step).
#[derive(Clone, Copy, Debug)]
pub struct Defaults {
    pub retry_for: Duration,
    pub parallel: usize,
}

impl Defaults {
    /// `exec`, `put`, `get`, `run-script`: many independent hosts, some of them still booting.
    pub const FAN_OUT: Defaults = Defaults { retry_for: Duration::from_secs(60), parallel: DEFAULT_PARALLEL };
    /// The cluster hooks and the sites they run on: fresh VMs take minutes to answer.
    pub const HOOKS: Defaults = Defaults { retry_for: Duration::from_secs(300), parallel: 64 };
    /// `sites apply`: machines that exist already; a site whose node does not answer fails
    /// within this window instead of holding a rollout (and its stop rule) for the hooks' 300s.
    pub const SITES: Defaults = Defaults { retry_for: Duration::from_secs(30), parallel: 64 };
    /// `cnf` and `workload`: masters, tried one after another until one answers; a master that
    /// is down is skipped quickly.
    pub const MASTERS: Defaults = Defaults { retry_for: Duration::from_secs(5), parallel: 16 };
    /// `key`, `ee`, `primitive`: registered machines answer quickly or are down; retry briefly,
    /// not like a booting VM.
    pub const EE: Defaults = Defaults { retry_for: Duration::from_secs(10), parallel: 64 };
}

use crate::duration::parse_duration;

impl Ctx {
    pub fn inventory_opts(&self) -> LoadOptions {
        let ssh_config = self.conn.ssh_config.as_deref().map(SshConfigSource::from_arg).unwrap_or_default();
        LoadOptions { allow_insecure: self.conn.insecure_no_host_key_check, ssh_config, ..Default::default() }
    }

    /// The VIM settings for the hooks: no allow-list, no client (the VIM is never asked).
    pub fn vim(&self) -> Result<crate::vim::Vim> {
        let allowed: Vec<String> =
            self.vim.vim_auth_url.iter().filter(|u| !u.trim().is_empty()).map(|u| u.trim().to_string()).collect();
        if allowed.is_empty() {
            return Ok(crate::vim::Vim::default());
        }
        for u in &allowed {
            if !crate::vim::access::is_http_url(u) {
                return Err(Error::input(
                    "arguments",
                    "--vim-auth-url",
                    format!("'{}' is not an http(s) URL", crate::error::excerpt(u)),
                ));
            }
        }
        let client = crate::vim::client::Client::new(self.vim.vim_cacert.as_deref())?;
        Ok(crate::vim::Vim { allowed_auth_urls: allowed, http: Some(std::sync::Arc::new(client)) })
    }

    /// What the operator allows secret references to reach (`--secrets-dir`, `--secret-env`).
    pub fn secret_allowed(&self) -> Allowed {
        Allowed { dirs: self.secrets.secrets_dir.clone(), env: self.secrets.secret_env.clone(), declared: vec![] }
    }

    /// The policy for a request file the operator named on the command line: the operator's
    /// words (which may be a tenant's body forwarded), so references confined to what is allowed.
    pub fn secret_refs(&self) -> Policy {
        Policy::Operator(self.secret_allowed())
    }

    fn parallel(&self, d: &Defaults) -> Result<usize> {
        match self.run.parallel {
            Some(0) => Err(Error::input("arguments", "--parallel", "must be at least 1")),
            Some(n) => Ok(n),
            None => Ok(d.parallel),
        }
    }

    /// SSH, or the plan connector under `--dry-run` (which connects to nothing). The SSH options
    /// are checked either way, so a plan refuses what the real run would refuse.
    pub fn connector(&self, d: &Defaults) -> Result<Arc<dyn Connector>> {
        let mut ssh = SshOptions { retry_for: self.conn.retry_for.unwrap_or(d.retry_for), ..Default::default() };
        if let Some(t) = self.conn.connect_timeout {
            ssh.connect_timeout = t.max(Duration::from_millis(100));
        }
        if let Some(t) = self.conn.stall_timeout {
            ssh.stall = t.max(Duration::from_millis(100));
        }
        if let Some(k) = &self.conn.kex {
            ssh.kex = k.clone();
        }
        let ssh = SshConnector::new(ssh)?;
        if self.run.dry_run {
            return Ok(Arc::new(PlanConnector::new()));
        }
        Ok(Arc::new(ssh))
    }

    /// The runner every operation uses. A plan runs one node at a time, so it reads in order.
    pub fn runner(&self, events: Events, d: &Defaults, timeouts: Timeouts, report_each: bool) -> Result<Runner> {
        let parallel = self.parallel(d)?;
        let parallel = if self.run.dry_run { 1 } else { parallel };
        let fan_out = FanOut { parallel, fail_fast: self.run.fail_fast, report_each };
        Ok(Runner::new(self.connector(d)?, events, fan_out, timeouts))
    }

    /// The state store; read-only in a plan (which never creates the key file either).
    pub fn store(&self, dir: &Option<PathBuf>) -> Result<Store> {
        let dir = dir.clone().unwrap_or_else(Store::default_dir);
        let key = self.state_key.clone().map(StateKey::at).unwrap_or_else(StateKey::default_location);
        if self.run.dry_run {
            Ok(Store::read_only_with_key(&dir, key))
        } else {
            Store::open_with_key(&dir, key)
        }
    }

    /// Start rendering events. Lifecycle operations keep stdout for the result document. The
    /// task ends when every `Events` is dropped and returns the warnings shown, which the result
    /// document lists: hand the run's own warnings to `Events::warn` before that.
    pub fn renderer(&self, hosts: Option<usize>) -> (Events, JoinHandle<Vec<String>>) {
        let (events, rx) = Events::channel();
        let r = match hosts {
            Some(n) => Renderer::new(self.output, self.verbose, n),
            None => Renderer::for_hooks(self.output, self.verbose),
        };
        (events, r.plan(self.run.dry_run).spawn(rx))
    }
}
