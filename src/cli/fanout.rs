//! `exec`, `put`, `get`, `run-script`: build one job per host (pure; bad input fails for every
//! host at once, before anything connects), fan the jobs out on the runner, summarize.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults, StateDir};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::console;
use crate::duration::parse_duration;
use crate::env_vars;
use crate::error::{exit, Error, Result};
use crate::fanout::{exec_job, get_job, put_job, ScriptJob};
use crate::inventory::{Host, Inventory};
use crate::lifecycle::job::{CommandOpts, Job, JobOutput};
use crate::lifecycle::{Node, Timeouts};
use crate::render::Output;

/// Which hosts: inventory hosts, registered execution environments, or both.
#[derive(Args, Debug, Clone)]
pub struct Select {
    /// Inventory file (YAML): the hosts, their groups, logins and host key policy.
    #[arg(short, long, env = env_vars::INVENTORY, value_name = "FILE", required_unless_present = "ee")]
    pub inventory: Option<PathBuf>,
    /// Only hosts of this group (repeatable).
    #[arg(short, long, value_name = "GROUP", requires = "inventory")]
    pub group: Vec<String>,
    /// Only this host (repeatable).
    #[arg(long, value_name = "NAME", requires = "inventory")]
    pub host: Vec<String>,
    /// A registered execution environment, by name or id (repeatable; `ee register`). It is
    /// reached with the driver's key (or its stored credential) and the store's known_hosts.
    #[arg(long, value_name = "NAME|ID")]
    pub ee: Vec<String>,
    // With --ee: the store holding the EEs and the driver's key.
    #[command(flatten)]
    pub store: StateDir,
}

impl Select {
    /// The selected hosts, in order: the inventory's, then the EEs'. Bad input (an unknown
    /// group, host or EE, a name twice) fails here, before anything connects.
    pub fn hosts(&self, ctx: &Ctx) -> Result<Vec<Host>> {
        let mut hosts = match &self.inventory {
            Some(p) => Inventory::load(p, &ctx.inventory_opts())?.select(&self.group, &self.host)?,
            None => vec![],
        };
        if !self.ee.is_empty() {
            let store = ctx.store(&self.store.state_dir)?;
            hosts.extend(crate::ee::record::hosts(&store, &self.ee)?);
        }
        for (i, h) in hosts.iter().enumerate() {
            if hosts[..i].iter().any(|o| o.name == h.name) {
                return Err(Error::input("arguments", "--ee", format!("'{}' is selected twice", h.name)));
            }
        }
        Ok(hosts)
    }
}

#[derive(Args, Debug, Clone)]
pub struct RunOpts {
    /// Kill the command (its whole process group on the node) after this long: `30`, `10s`, `5m`,
    /// `2h`; `0` or `none` for no limit. Either way the command is stopped on the node when this
    /// run is interrupted (SIGINT, SIGTERM, killed) or its connection is lost.
    #[arg(short, long, value_parser = parse_limit, value_name = "DURATION|none", default_value = DEFAULT_TIMEOUT)]
    pub timeout: Limit,
    /// Run with sudo (password from the inventory's become_password*, fed on stdin).
    #[arg(short, long)]
    pub r#become: bool,
}

/// The default limit of `exec` and `run-script`: long enough for an upgrade or a backup, short
/// enough that a forgotten command does not hold a node (and a VNFM's job) for days.
pub const DEFAULT_TIMEOUT: &str = "1h";

/// A command's time limit; `None` is no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<Duration>);

/// `--timeout`: a duration as [`parse_duration`] reads it, or `0` / `none` for no limit.
fn parse_limit(s: &str) -> std::result::Result<Limit, String> {
    match s.trim() {
        "none" | "0" | "0s" => Ok(Limit(None)),
        t => parse_duration(t).map(|d| Limit(Some(d))),
    }
}

impl RunOpts {
    fn command_opts(&self) -> CommandOpts {
        CommandOpts { timeout: self.timeout.0, become_: self.r#become }
    }
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub run: RunOpts,
    /// The command, after `--`.
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PutArgs {
    #[command(flatten)]
    pub select: Select,
    /// The local file or directory to upload.
    pub src: PathBuf,
    /// Remote path; ending in `/` keeps the source's file name. Relative = login home.
    pub dest: String,
    /// File mode in octal (default: the local file's mode).
    #[arg(long, value_parser = parse_mode, value_name = "OCTAL")]
    pub mode: Option<u32>,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub select: Select,
    /// Remote file; relative = login home.
    pub remote: String,
    /// Local directory (created when missing).
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct RunScriptArgs {
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub run: RunOpts,
    /// The local script: uploaded to a private directory on each host and run there.
    pub script: PathBuf,
    /// The script's arguments, each passed as one word (quoted), whatever it contains.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

fn parse_mode(s: &str) -> std::result::Result<u32, String> {
    let m = u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|_| format!("'{s}' is not an octal mode"))?;
    if m > 0o7777 {
        Err(format!("'{s}' is out of range"))
    } else {
        Ok(m)
    }
}

pub async fn exec(a: ExecArgs, ctx: &Ctx) -> Result<i32> {
    let opts = a.run.command_opts();
    fan_out("exec", &a.select, ctx, |h| exec_job(&a.cmd, h, &opts)).await
}

pub async fn put(a: PutArgs, ctx: &Ctx) -> Result<i32> {
    let job = put_job(&a.src, &a.dest, a.mode)?;
    fan_out("put", &a.select, ctx, |_| Ok(job.clone())).await
}

pub async fn get(a: GetArgs, ctx: &Ctx) -> Result<i32> {
    fan_out("get", &a.select, ctx, |h| get_job(&a.remote, &a.dir, h)).await
}

pub async fn run_script(a: RunScriptArgs, ctx: &Ctx) -> Result<i32> {
    let opts = a.run.command_opts();
    let sj = ScriptJob::new(&a.script, &a.args).await?;
    fan_out("run-script", &a.select, ctx, |h| Ok(sj.job(h, &opts))).await
}

/// A host and its job, built together so running needs no lookup.
struct HostJob {
    host: Host,
    job: Job,
}

impl Node for HostJob {
    fn host(&self) -> &Host {
        &self.host
    }
}

/// Build every host's job first (bad input fails here, for all hosts at once), then run them.
async fn fan_out(op: &str, sel: &Select, ctx: &Ctx, job: impl Fn(&Host) -> Result<Job>) -> Result<i32> {
    let hosts = sel.hosts(ctx)?;
    let jobs: Vec<HostJob> =
        hosts.into_iter().map(|host| Ok(HostJob { job: job(&host)?, host })).collect::<Result<_>>()?;
    let (events, renderer) = ctx.renderer(Some(jobs.len()));
    let rt = ctx.runner(events, &Defaults::FAN_OUT, Timeouts::default(), true)?;
    let started = Instant::now();
    let refs: Vec<&HostJob> = jobs.iter().collect();
    let results = rt
        .each(&refs, |hj| {
            let rt = &rt;
            async move {
                let r = rt.run_job(hj, &hj.job).await;
                // One connection per host for its whole job; close it as soon as the job ends.
                rt.forget(hj).await;
                r
            }
        })
        .await;
    drop(rt);
    let warnings = renderer.await.unwrap_or_default();
    Ok(summarize(op, &results, ctx, started.elapsed(), warnings))
}

fn summarize(
    op: &str,
    results: &[(&HostJob, Result<JobOutput>)],
    ctx: &Ctx,
    elapsed: Duration,
    warnings: Vec<String>,
) -> i32 {
    let failed: Vec<(&str, &Error)> =
        results.iter().filter_map(|(h, r)| r.as_ref().err().map(|e| (h.host.name.as_str(), e))).collect();
    // A plan's hosts are planned, not done: nothing ran on them.
    let dry = ctx.run.dry_run;
    let (ok, planned) = if dry { (0, results.len() - failed.len()) } else { (results.len() - failed.len(), 0) };
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new(op, dry);
            env.ok = failed.is_empty();
            env.context = json!({"hosts": results.len()});
            env.result = json!({
                "okCount": ok,
                "failedCount": failed.len(),
                "plannedCount": planned,
                "ms": elapsed.as_millis() as u64,
                "hosts": results.iter().map(|(h, r)| host_result(&h.host, r, dry)).collect::<Vec<_>>(),
            });
            env.warnings = warnings;
            env.errors = failed.iter().map(|(_, e)| ErrorItem::from_error(e)).collect();
            env.print(ctx.output);
        }
        _ => {
            let names: Vec<&str> = failed.iter().map(|(n, _)| *n).collect();
            let list = if names.is_empty() { String::new() } else { format!(" ({})", names.join(", ")) };
            let (n, done, note) =
                if dry { (planned, "planned", " (dry run: nothing was run)") } else { (ok, "ok", "") };
            let secs = elapsed.as_secs_f64();
            console::err_line(&format!("summary: {n} {done}, {} failed{list} in {secs:.2}s{note}", failed.len()));
        }
    }
    if failed.is_empty() {
        exit::OK
    } else {
        exit::HOST_FAILED
    }
}

/// One host's line of the result: `planned` in a dry run (nothing ran: no exit code, no
/// output), else `ok` with what the last command said, or `failed` with why.
fn host_result(h: &Host, r: &Result<JobOutput>, dry_run: bool) -> Value {
    match r {
        Ok(_) if dry_run => json!({"host": h.name, "status": "planned"}),
        Ok(o) => json!({
            "host": h.name,
            "status": "ok",
            "ok": true,
            "exitCode": o.last.as_ref().and_then(|l| l.code),
            "stdout": o.last.as_ref().map(|l| l.stdout_text()),
            "uploaded": o.uploaded,
            "skipped": o.skipped,
        }),
        Err(e) => {
            json!({"host": h.name, "status": "failed", "ok": false, "errorKind": e.kind(), "error": e.to_string()})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        run: RunOpts,
    }

    #[test]
    fn exec_and_run_script_have_a_default_limit_that_can_be_lifted() {
        let t = |args: &[&str]| T::try_parse_from([&["t"], args].concat()).map(|t| t.run.timeout);
        assert_eq!(t(&[]).unwrap(), Limit(Some(Duration::from_secs(3600))));
        assert_eq!(t(&["--timeout", "5m"]).unwrap(), Limit(Some(Duration::from_secs(300))));
        assert_eq!(t(&["-t", "none"]).unwrap(), Limit(None));
        assert_eq!(t(&["--timeout", "0"]).unwrap(), Limit(None));
        assert!(t(&["--timeout", "-1"]).is_err());
        assert!(t(&["--timeout", "soon"]).is_err());
    }
}
