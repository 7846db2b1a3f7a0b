//! Command-line interface: `exec`, `put`, `get`, `run-script`. Each builds a job per host (pure),
//! then either prints the plan (`--dry-run`) or fans it out over SSH.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use crate::cluster::cli::HookArgs;
use crate::engine::{run_jobs, FanOut, HostReport, JobFn, DEFAULT_PARALLEL};
use crate::error::{exit, Error, Result};
use crate::event::{EventKind, Events};
use crate::inventory::{Host, Inventory, LoadOptions};
use crate::render::{Output, Renderer};
use crate::ssh::{SshConnector, SshOptions};
use crate::step::{exec_job, get_job, put_job, CommandOpts, JobOutput, ScriptJob};

#[derive(Parser, Debug)]
#[command(name = "mgmt-driver", version, about = "Turn VMs into a Kubernetes cluster with Helm, over SSH")]
pub struct Cli {
    /// Output: progress bars on a terminal, plain lines, or JSON lines (one event per line).
    #[arg(short = 'o', long, value_enum, default_value = "auto", global = true)]
    pub output: Output,
    /// Also show connects, commands, exits and uploads.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a shell command on every selected host (words are joined, as ssh does).
    Exec {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        run: RunOpts,
        /// The command, after `--`.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Upload a file or a directory tree (atomic, skipped when the remote sha256 matches).
    Put {
        #[command(flatten)]
        target: Target,
        src: PathBuf,
        /// Remote path; ending in `/` keeps the source's file name. Relative = login home.
        dest: String,
        /// File mode in octal (default: the local file's mode).
        #[arg(long, value_parser = parse_mode)]
        mode: Option<u32>,
    },
    /// Download a file from every selected host into DIR/<host>/<file name>.
    Get {
        #[command(flatten)]
        target: Target,
        /// Remote file; relative = login home.
        remote: String,
        /// Local directory (created when missing).
        dir: PathBuf,
    },
    /// VNFM hook: turn the VMs into a Kubernetes cluster (with Helm) and record the VIM.
    InstantiateEnd(HookArgs),
    /// VNFM hook: take the healed VNFCs out of the cluster (SOL002), or forget it (SOL003).
    HealStart(HookArgs),
    /// VNFM hook: bring the healed VNFCs back (SOL002), or re-instantiate (SOL003).
    HealEnd(HookArgs),
    /// VNFM hook: SCALE_IN drains and deletes the removed workers (`--node`).
    ScaleStart(HookArgs),
    /// VNFM hook: SCALE_OUT joins the new workers.
    ScaleEnd(HookArgs),
    /// VNFM hook: remove the VIM record and the instance state (`--reset-nodes`: kubeadm reset).
    TerminateEnd(HookArgs),
    /// Helm CNF operations on the cluster's masters (install, scale, upgrade, rollback, ...).
    Cnf {
        #[command(subcommand)]
        op: crate::cnf::cli::CnfOp,
        #[command(flatten)]
        args: crate::cnf::cli::CnfArgs,
    },
    /// Upload a script to a private directory and run it with the given arguments (quoted).
    RunScript {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        run: RunOpts,
        script: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Inventory file (YAML).
    #[arg(short, long, env = "MGMT_DRIVER_INVENTORY")]
    pub inventory: PathBuf,
    /// Only hosts of this group (repeatable).
    #[arg(short, long)]
    pub group: Vec<String>,
    /// Only this host (repeatable).
    #[arg(long)]
    pub host: Vec<String>,
    /// How many hosts at once.
    #[arg(short, long, default_value_t = DEFAULT_PARALLEL)]
    pub parallel: usize,
    /// Start no new host after the first failure.
    #[arg(long)]
    pub fail_fast: bool,
    /// Print what would run where, in order, and connect to nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds per connection attempt (TCP + handshake + login).
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Keep retrying hosts that are not up yet (refused, unreachable) for this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub retry_for: f64,
    /// Key exchange algorithms, most preferred first.
    #[arg(long, value_delimiter = ',')]
    pub kex: Option<Vec<String>>,
    /// Allow `host_key_check: off` in the inventory (warns for every host).
    #[arg(long)]
    pub insecure_no_host_key_check: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunOpts {
    /// Kill the command (its whole process group on the node) after this many seconds.
    #[arg(short, long)]
    pub timeout: Option<f64>,
    /// Run with sudo (password from the inventory's become_password*, fed on stdin).
    #[arg(short, long)]
    pub r#become: bool,
}

fn parse_mode(s: &str) -> std::result::Result<u32, String> {
    let m = u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|_| format!("'{s}' is not an octal mode"))?;
    if m > 0o7777 {
        Err(format!("'{s}' is out of range"))
    } else {
        Ok(m)
    }
}

fn secs(field: &str, v: f64) -> Result<Duration> {
    if v.is_finite() && v > 0.0 && v < 1e7 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Error::input("arguments", field, "must be a positive number of seconds"))
    }
}

impl RunOpts {
    fn command_opts(&self) -> Result<CommandOpts> {
        Ok(CommandOpts { timeout: self.timeout.map(|t| secs("--timeout", t)).transpose()?, become_: self.r#become })
    }
}

/// Parse arguments, run, and return the process exit code.
pub async fn main(cli: Cli) -> i32 {
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

async fn run(cli: Cli) -> Result<i32> {
    use crate::cluster::cli::{run as hook, Op};
    let (target, jobs): (Target, JobFn) = match cli.command {
        Command::InstantiateEnd(a) => return Ok(hook(Op::InstantiateEnd, a, cli.output, cli.verbose).await),
        Command::HealStart(a) => return Ok(hook(Op::HealStart, a, cli.output, cli.verbose).await),
        Command::HealEnd(a) => return Ok(hook(Op::HealEnd, a, cli.output, cli.verbose).await),
        Command::ScaleStart(a) => return Ok(hook(Op::ScaleStart, a, cli.output, cli.verbose).await),
        Command::ScaleEnd(a) => return Ok(hook(Op::ScaleEnd, a, cli.output, cli.verbose).await),
        Command::TerminateEnd(a) => return Ok(hook(Op::TerminateEnd, a, cli.output, cli.verbose).await),
        Command::Cnf { op, args } => return Ok(crate::cnf::cli::run(op, args, cli.output, cli.verbose).await),
        Command::Exec { target, run, cmd } => {
            let opts = run.command_opts()?;
            (target, Arc::new(move |h: &Host| exec_job(&cmd, h, &opts)))
        }
        Command::Put { target, src, dest, mode } => {
            let job = put_job(&src, &dest, mode)?;
            (target, Arc::new(move |_: &Host| Ok(job.clone())))
        }
        Command::Get { target, remote, dir } => (target, Arc::new(move |h: &Host| get_job(&remote, &dir, h))),
        Command::RunScript { target, run, script, args } => {
            let opts = run.command_opts()?;
            let sj = ScriptJob::new(&script, &args).await?;
            (target, Arc::new(move |h: &Host| Ok(sj.job(h, &opts))))
        }
    };
    let inv = Inventory::load(
        &target.inventory,
        &LoadOptions { allow_insecure: target.insecure_no_host_key_check, ..Default::default() },
    )?;
    let hosts = inv.select(&target.group, &target.host)?;
    // Build every job before touching any node: bad input fails here, for all hosts at once.
    for h in &hosts {
        jobs(h)?;
    }
    let mut ssh = SshOptions {
        connect_timeout: secs("--connect-timeout", target.connect_timeout)?,
        retry_for: secs("--retry-for", target.retry_for)?,
        ..Default::default()
    };
    if let Some(k) = &target.kex {
        ssh.kex = k.clone();
    }
    let connector = Arc::new(SshConnector::new(ssh)?);
    if target.parallel == 0 {
        return Err(Error::input("arguments", "--parallel", "must be at least 1"));
    }

    let (events, rx) = Events::channel();
    let renderer = tokio::spawn(Renderer::new(cli.output, cli.verbose, hosts.len()).run(rx));
    let started = Instant::now();
    if target.dry_run {
        for h in &hosts {
            let ev = events.for_host(&h.name);
            let via = if h.jump.is_empty() {
                String::new()
            } else {
                format!(" via {}", h.jump.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(" -> "))
            };
            ev.emit(EventKind::Plan {
                step: 0,
                action: format!("connect {}@{}{via} (host key: {})", h.user, h.endpoint(), h.host_key_check),
            });
            jobs(h)?.plan(&ev)?;
        }
        drop(events);
        let _ = renderer.await;
        return Ok(exit::OK);
    }
    let opts = FanOut { parallel: target.parallel, fail_fast: target.fail_fast };
    let reports = run_jobs(&hosts, jobs, connector, &opts, &events).await;
    drop(events);
    let _ = renderer.await;
    Ok(summarize(&reports, cli.output, started.elapsed()))
}

fn summarize(reports: &[HostReport<JobOutput>], output: Output, elapsed: Duration) -> i32 {
    let failed: Vec<&HostReport<JobOutput>> = reports.iter().filter(|r| r.result.is_err()).collect();
    let ok = reports.len() - failed.len();
    if output == Output::Json {
        let v = serde_json::json!({
            "event": "summary",
            "ok": ok,
            "failed": failed.len(),
            "failed_hosts": failed.iter().map(|r| serde_json::json!({
                "host": r.node,
                "kind": r.result.as_ref().err().map(|e| e.kind()),
                "error": r.result.as_ref().err().map(|e| e.to_string()),
            })).collect::<Vec<_>>(),
            "ms": elapsed.as_millis() as u64,
        });
        println!("{v}");
    } else {
        let names: Vec<&str> = failed.iter().map(|r| r.node.as_str()).collect();
        let list = if names.is_empty() { String::new() } else { format!(" ({})", names.join(", ")) };
        eprintln!("summary: {ok} ok, {} failed{list} in {:.2}s", failed.len(), elapsed.as_secs_f64());
    }
    if failed.is_empty() {
        exit::OK
    } else {
        exit::HOST_FAILED
    }
}
