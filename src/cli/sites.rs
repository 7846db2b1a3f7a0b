//! `mgmt-driver sites plan|apply|status`: one operation on many rendered sites
//! (docs/fleet.md). Parses the arguments, picks the connector (SSH, or the plan connector for
//! `plan` and `--dry-run`), and prints the per-site table or one result document.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults, StateDir};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::console;
use crate::duration::parse_duration;
use crate::error::{exit, Error, Result};
use crate::lifecycle::plan::PlanConnector;
use crate::lifecycle::state::Store;
use crate::lifecycle::state_key::StateKey;
use crate::lifecycle::Timeouts;
use crate::render::Output;
use crate::sites::apply::{self, Applied, Bounded, Bounds, SiteResult};
use crate::sites::catalogue::Catalogue;
use crate::sites::inputs;
use crate::sites::plan::{self, parse_selector, Env, Op, SiteDir};
use crate::sites::render::render_all;
use crate::sites::rollout::{self, MaxFail};
use crate::sites::status::Statuses;

#[derive(Subcommand, Debug)]
pub enum SitesCmd {
    /// Render every selected site of the catalogue into OUT/<site>/ (to read and to diff).
    Render {
        /// The site catalogue (sites.yaml).
        #[arg(long, value_name = "FILE")]
        sites: PathBuf,
        /// Where the sites' folders go: OUT/<site>/ (other sites' folders are left as they are).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Only these sites (comma-separated, repeatable).
        #[arg(long, value_delimiter = ',', value_name = "SITE,...")]
        only: Vec<String>,
        /// Only sites with this label (KEY=VALUE, repeatable: all must match).
        #[arg(long, value_parser = parse_selector, value_name = "KEY=VALUE")]
        selector: Vec<(String, String)>,
    },
    /// Check every selected site's files through the hooks' own parsers; nothing connects.
    Plan {
        #[command(subcommand)]
        op: Op,
        #[command(flatten)]
        args: SitesArgs,
    },
    /// Run OP on every selected site at once (bounded), skipping sites already done.
    Apply {
        #[command(subcommand)]
        op: Op,
        #[command(flatten)]
        args: SitesArgs,
    },
    /// What OP would read from each selected site that differs from what its last successful
    /// OP read (a unified diff, secrets masked); nothing connects, nothing is written.
    Diff {
        #[command(subcommand)]
        op: Op,
        #[command(flatten)]
        args: SitesArgs,
    },
    /// Each site's last operation, status and time, from the state store.
    Status {
        #[command(flatten)]
        store: StateDir,
    },
    /// Print the selected sites' run for another engine (a Kubernetes Indexed Job).
    Export {
        #[command(subcommand)]
        cmd: crate::cli::sites_export::ExportCmd,
    },
}

#[derive(Args, Debug, Clone)]
pub struct SitesArgs {
    /// The site catalogue: render it first (into --out, or a private temporary directory).
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "rendered")]
    pub sites: Option<PathBuf>,
    /// With --sites: keep the rendered sites here (other sites' folders are left as they are).
    #[arg(long, global = true, value_name = "DIR", requires = "sites")]
    pub out: Option<PathBuf>,
    /// The rendered sites (`sites render --out DIR`): DIR/<site>/site.json, ...
    #[arg(long, global = true, value_name = "DIR")]
    pub rendered: Option<PathBuf>,
    /// The sites as a Job's pod has them: a folder of site bundles (`NNNNN.<site>.json`, the
    /// ConfigMap keys of `sites export k8s-job`), unpacked into a private temporary folder.
    #[arg(long, global = true, value_name = "DIR", conflicts_with_all = ["sites", "rendered"])]
    pub bundles: Option<PathBuf>,
    /// Only these sites (comma-separated, repeatable).
    #[arg(long, global = true, value_delimiter = ',', value_name = "SITE,...")]
    pub only: Vec<String>,
    /// Only sites with this label (KEY=VALUE, repeatable: all must match).
    #[arg(long, global = true, value_parser = parse_selector, value_name = "KEY=VALUE")]
    pub selector: Vec<(String, String)>,
    /// Only the I-th of the selected sites (counting from 0): one pod of an Indexed Job.
    #[arg(long, global = true, value_name = "I")]
    pub index: Option<usize>,
    #[command(flatten)]
    pub store: StateDir,
    /// How many sites run at the same time.
    #[arg(long, global = true, default_value = "16", value_name = "N")]
    pub max_sites: usize,
    /// How many SSH connects, commands and transfers are in flight across all sites.
    #[arg(long, global = true, default_value = "256", value_name = "N")]
    pub max_sessions: usize,
    /// Stop the rollout once more than N sites, or more than P% of the sites to run, have
    /// failed: no further site starts (Ansible's max_fail_percentage). --fail-fast is 0.
    #[arg(long, global = true, value_parser = rollout::parse_max_fail, value_name = "N|P%")]
    pub max_fail: Option<MaxFail>,
    /// Canary batches, e.g. 1,10%,100%: a batch starts once the one before it has finished and
    /// the rollout has not stopped; the last size repeats (Ansible's serial). Default: one batch.
    #[arg(long, global = true, value_parser = rollout::parse_batches, value_name = "SIZE,...")]
    pub batch: Option<rollout::Batches>,
    /// Also run the sites whose last run of this operation is done.
    #[arg(long, global = true)]
    pub force: bool,
    /// How long a cluster install script may run.
    #[arg(long, global = true, default_value = "2700", value_parser = parse_duration, value_name = "DURATION")]
    pub install_timeout: Duration,
    /// Each Helm operation's --timeout (CNF operations).
    #[arg(long, global = true, default_value = "300", value_parser = parse_duration, value_name = "DURATION")]
    pub helm_timeout: Duration,
}

impl SitesCmd {
    pub fn name(&self) -> String {
        match self {
            SitesCmd::Plan { op, .. } => format!("sites plan {}", op.name()),
            SitesCmd::Apply { op, .. } => format!("sites apply {}", op.name()),
            SitesCmd::Diff { op, .. } => format!("sites diff {}", op.name()),
            SitesCmd::Status { .. } => "sites status".into(),
            SitesCmd::Render { .. } => "sites render".into(),
            SitesCmd::Export { .. } => "sites export k8s-job".into(),
        }
    }
}

pub async fn run(cmd: SitesCmd, ctx: &Ctx) -> i32 {
    let name = cmd.name();
    let dry = ctx.run.dry_run || matches!(cmd, SitesCmd::Plan { .. } | SitesCmd::Diff { .. });
    let r = match cmd {
        SitesCmd::Export { cmd } => return crate::cli::sites_export::run(cmd, ctx),
        SitesCmd::Plan { op, args } => plan_or_apply(&op, &args, ctx, true).await,
        SitesCmd::Apply { op, args } => plan_or_apply(&op, &args, ctx, ctx.run.dry_run).await,
        SitesCmd::Diff { op, args } => diff(&op, &args, ctx),
        SitesCmd::Status { store } => status(store.state_dir, ctx),
        SitesCmd::Render { sites, out, only, selector } => render(&sites, &out, &only, &selector, ctx),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            console::error(&e);
            Envelope::new(name, dry).error(&e).print(ctx.output);
            e.exit_code()
        }
    }
}

/// The selected sites: rendered now from `--sites` (a template error stops here, before
/// anything connects), or read from `--rendered`. `--index` counts in the selection, and the
/// whole selection is rendered either way, so every Job pod sees the same indices.
fn sites(args: &SitesArgs, scratch: &mut Option<tempfile::TempDir>) -> Result<Vec<SiteDir>> {
    if let Some(b) = &args.bundles {
        let t = tempfile::Builder::new()
            .prefix("mgmt-driver-sites-")
            .tempdir()
            .map_err(|e| Error::input("--bundles", "(temporary directory)", e.to_string()))?;
        crate::sites::export::unpack_bundles(b, t.path())?;
        let all = plan::load_rendered(t.path());
        *scratch = Some(t);
        return plan::select(all?, &args.only, &args.selector, args.index);
    }
    let all = match (&args.sites, &args.rendered) {
        (Some(cat), _) => {
            let cat = Catalogue::load(cat)?;
            let out = match &args.out {
                Some(o) => o.clone(),
                None => {
                    let t = tempfile::Builder::new()
                        .prefix("mgmt-driver-sites-")
                        .tempdir()
                        .map_err(|e| Error::input("--out", "(temporary directory)", e.to_string()))?;
                    let p = t.path().to_path_buf();
                    *scratch = Some(t);
                    p
                }
            };
            let rendered = render_all(&cat, &out, &args.only, &args.selector)?;
            return plan::select(rendered, &[], &[], args.index);
        }
        (None, Some(dir)) => plan::load_rendered(dir)?,
        (None, None) => {
            return Err(Error::input(
                "arguments",
                "--sites",
                "give the catalogue (--sites FILE), --rendered DIR or --bundles DIR",
            ))
        }
    };
    plan::select(all, &args.only, &args.selector, args.index)
}

fn render(cat: &Path, out: &Path, only: &[String], selector: &[(String, String)], ctx: &Ctx) -> Result<i32> {
    let c = Catalogue::load(cat)?;
    let rendered = render_all(&c, out, only, selector)?;
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new("sites render", false);
            env.context = json!({"catalogue": cat, "out": out});
            env.result =
                json!({"sites": rendered.iter().map(|s| json!({"site": s.name, "dir": s.dir})).collect::<Vec<_>>()});
            env.print(ctx.output);
        }
        _ => {
            for s in &rendered {
                console::out_line(&s.dir.display().to_string());
            }
            console::err_line(&format!("sites render: {} sites in {}", rendered.len(), out.display()));
        }
    }
    Ok(exit::OK)
}

async fn plan_or_apply(op: &Op, args: &SitesArgs, ctx: &Ctx, dry: bool) -> Result<i32> {
    for (flag, v) in [("--max-sites", args.max_sites), ("--max-sessions", args.max_sessions)] {
        if v == 0 {
            return Err(Error::input("arguments", flag, "must be at least 1"));
        }
    }
    let mut scratch = None;
    let selected = sites(args, &mut scratch)?;
    let state_dir = args.store.state_dir.clone().unwrap_or_else(Store::default_dir);
    let key = || ctx.state_key.clone().map(StateKey::at).unwrap_or_else(StateKey::default_location);
    let store = || -> Result<Store> {
        if dry {
            Ok(Store::read_only_with_key(&state_dir, key()))
        } else {
            Store::open_with_key(&state_dir, key())
        }
    };
    let env = Env {
        state_dir: &state_dir,
        store: &store,
        key: &key,
        inventory_opts: ctx.inventory_opts(),
        dry_run: dry,
        helm_timeout: args.helm_timeout,
        secrets: ctx.secret_allowed(),
    };
    let timeouts = Timeouts { install: args.install_timeout, helm: args.helm_timeout, ..Default::default() };
    let name = format!("sites {} {}", if dry { "plan" } else { "apply" }, op.name());
    let rendered = args.rendered.clone().or(args.out.clone()).or(args.bundles.clone());
    let context =
        json!({"catalogue": args.sites, "rendered": rendered, "stateDir": state_dir, "selected": selected.len()});
    let started = Instant::now();
    if dry {
        return Ok(plan(op, &selected, &env, ctx, timeouts, &name, context).await);
    }
    let defaults = Defaults::SITES;
    // The SSH options are checked once; every site's runner shares this one connector.
    let connector: Arc<dyn crate::transport::Connector> =
        Arc::new(Bounded::new(ctx.connector(&defaults)?, args.max_sessions));
    let max_fail = rollout_rule(args.max_fail, ctx.run.fail_fast)?;
    let bounds = Bounds {
        max_sites: args.max_sites,
        parallel: ctx.run.parallel.unwrap_or(defaults.parallel).max(1),
        max_fail,
        batches: args.batch.clone().unwrap_or_default(),
        force: args.force,
        timeouts,
    };
    let retry_for = ctx.conn.retry_for.unwrap_or(defaults.retry_for);
    console::err_line(&rollout_line(&name, selected.len(), &bounds, retry_for));
    let (events, renderer) = ctx.renderer(None);
    let applied = apply::apply(&selected, op, &env, connector, &events, &bounds).await;
    drop(events);
    let warnings = renderer.await.unwrap_or_default();
    match applied? {
        Applied::Refused(errs) => Ok(refused(&name, context, &errs, ctx, false, warnings)),
        Applied::Ran(results) => Ok(report(&name, context, &results, ctx, started.elapsed(), warnings)),
    }
}

/// `--fail-fast` is `--max-fail 0`; both at once would say two things.
fn rollout_rule(max_fail: Option<MaxFail>, fail_fast: bool) -> Result<Option<MaxFail>> {
    match (max_fail, fail_fast) {
        (Some(m), true) => Err(Error::input(
            "arguments",
            "--fail-fast",
            format!("--fail-fast is --max-fail 0; give one of it and --max-fail {m}"),
        )),
        (m, false) => Ok(m),
        (None, true) => Ok(Some(MaxFail::FAIL_FAST)),
    }
}

/// What the rollout will do, said before it starts: how the sites are batched, when it stops,
/// and how long an unreachable node is retried (a site's first failure shows after that).
fn rollout_line(name: &str, sites: usize, b: &Bounds, retry_for: Duration) -> String {
    let batches: Vec<String> = rollout::plan(&b.batches, sites).iter().map(|r| r.len().to_string()).collect();
    let stop = match b.max_fail {
        None => "no stop rule (every site runs)".to_string(),
        Some(m) if m == MaxFail::FAIL_FAST => "stops at the first failed site".to_string(),
        Some(m) => format!("stops past {m} failed sites"),
    };
    format!(
        "{name}: {sites} sites (before skipping done ones) in batches of {}; {stop}; an unreachable node is retried for {}s (--retry-for)",
        if batches.is_empty() { "0".into() } else { batches.join(",") },
        retry_for.as_secs()
    )
}

/// Every site through its preparation, then its operation, with the plan connector and a
/// read-only store: the plan events show each site's steps, in order, and nothing connects.
async fn plan(
    op: &Op,
    sites: &[SiteDir],
    env: &Env<'_>,
    ctx: &Ctx,
    timeouts: Timeouts,
    name: &str,
    context: Value,
) -> i32 {
    let (events, renderer) = ctx.renderer(None);
    let connector: Arc<dyn crate::transport::Connector> = Arc::new(PlanConnector::new());
    let bounds = Bounds { max_sites: 1, parallel: 1, max_fail: None, batches: vec![], force: true, timeouts };
    let mut errs = Vec::new();
    let mut lines = Vec::new();
    for s in sites {
        let (ev, fwd) = apply::site_events(&events, &s.name);
        let rt = apply::runner(&connector, &ev, &bounds);
        let r = match plan::prepare_site(s, op, env, rt).await {
            Ok(w) => {
                let line = w.describe();
                apply::run_work(w, &connector, &ev, &bounds).await.map(|_| line)
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(line) => lines.push(json!({"site": s.name, "plan": line})),
            // A plan that cannot go on is the plan's finding for this site (nothing ran).
            Err(e @ Error::Input { .. }) => errs.push(plan::in_site(s, e)),
            Err(e) => errs.push(Error::input(format!("site {}", s.name), "plan", e.to_string())),
        }
        drop(ev);
        let _ = fwd.await;
    }
    drop(events);
    let warnings = renderer.await.unwrap_or_default();
    if !errs.is_empty() {
        return refused(name, context, &errs, ctx, true, warnings);
    }
    let mut env = Envelope::new(name, true);
    env.context = context;
    env.warnings = warnings;
    match ctx.output {
        Output::Json | Output::Yaml => {
            env.result = json!({"sites": lines});
            env.print(ctx.output);
        }
        _ => {
            for l in &lines {
                console::out_line(&format!(
                    "{}: {}",
                    l["site"].as_str().unwrap_or(""),
                    l["plan"].as_str().unwrap_or("")
                ));
            }
            console::err_line(&format!("{name}: {} sites ok (plan: nothing connected, nothing written)", lines.len()));
        }
    }
    exit::OK
}

/// Input errors on some sites: nothing ran anywhere.
fn refused(name: &str, context: Value, errs: &[Error], ctx: &Ctx, dry: bool, warnings: Vec<String>) -> i32 {
    for e in errs {
        console::error(e);
    }
    console::err_line(&format!("{name}: {} site(s) refused; nothing was run on any site", errs.len()));
    let mut env = Envelope::new(name, dry);
    env.context = context;
    env.warnings = warnings;
    env.ok = false;
    env.errors = errs.iter().map(ErrorItem::from_error).collect();
    env.print(ctx.output);
    exit::BAD_INPUT
}

fn report(
    name: &str,
    context: Value,
    results: &[SiteResult],
    ctx: &Ctx,
    elapsed: Duration,
    warnings: Vec<String>,
) -> i32 {
    let count = |s: &str| results.iter().filter(|r| r.status == s).count();
    let failed = count("failed");
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new(name, false);
            env.context = context;
            env.warnings = warnings;
            env.result = json!({
                "sites": results,
                "doneCount": count("done"),
                "failedCount": failed,
                "skippedCount": count("skipped"),
                "notStartedCount": count("not-started"),
                "ms": elapsed.as_millis() as u64,
            });
            env.ok = failed == 0;
            for r in results.iter().filter(|r| r.status == "failed") {
                let message = format!("site {}: {}", r.site, r.error.clone().unwrap_or_default());
                env.errors.push(ErrorItem {
                    kind: r.error_kind.unwrap_or("remote"),
                    message,
                    node: Some(r.site.clone()),
                });
            }
            env.print(ctx.output);
        }
        _ => console::out(&table(results)),
    }
    console::err_line(&format!(
        "{name}: {} done, {failed} failed, {} skipped (done before), {} not started in {:.1}s",
        count("done"),
        count("skipped"),
        count("not-started"),
        elapsed.as_secs_f64()
    ));
    if failed == 0 {
        exit::OK
    } else {
        exit::HOST_FAILED
    }
}

/// site | status | seconds | error: the error's first line, and, for a failed command, the
/// last line of what it said on stderr (the first line is the command; the reason is there).
/// The events and `-o json` have the rest.
fn table(results: &[SiteResult]) -> String {
    let w = results.iter().map(|r| r.site.len()).max().unwrap_or(4).max(4);
    let mut out = format!("{:<w$}  {:<11}  {:>8}  ERROR\n", "SITE", "STATUS", "SECONDS");
    for r in results {
        let e = one_line(r.error.as_deref().unwrap_or(""));
        out.push_str(&format!("{:<w$}  {:<11}  {:>8.1}  {e}\n", r.site, r.status, r.seconds));
    }
    out
}

fn one_line(error: &str) -> String {
    let first = error.lines().next().unwrap_or("");
    let said = error
        .split_once("\n  stderr (last lines):\n")
        .and_then(|(_, tail)| tail.lines().rev().map(str::trim).find(|l| !l.is_empty()));
    match said {
        Some(l) => format!("{first} (stderr: {l})"),
        None => first.to_string(),
    }
}

/// Each selected site's inputs for `op` against what its last successful `op` read
/// (`sites/diff.rs`); read-only.
fn diff(op: &Op, args: &SitesArgs, ctx: &Ctx) -> Result<i32> {
    let mut scratch = None;
    let selected = sites(args, &mut scratch)?;
    let state_dir = args.store.state_dir.clone().unwrap_or_else(Store::default_dir);
    let key = ctx.state_key.clone().map(StateKey::at).unwrap_or_else(StateKey::default_location);
    let st = Statuses::read_only_with_key(&state_dir, key);
    let mut rows = Vec::new();
    for s in &selected {
        let files = inputs::of(op, &crate::sites::export::read_site_files(&s.dir, &s.name)?.files);
        let applied = st.load_applied(&s.name, op.name()).map_err(|e| plan::in_site(s, e))?;
        let state = match &applied {
            None => "new",
            Some(a) if a.digest == inputs::digest(&files) => "unchanged",
            Some(_) => "changed",
        };
        let text = crate::sites::diff::unified(&s.name, applied.as_ref().map(|a| &a.files), &files);
        rows.push((s.name.clone(), state, text));
    }
    let count = |w: &str| rows.iter().filter(|r| r.1 == w).count();
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new(format!("sites diff {}", op.name()), true);
            env.context = json!({"stateDir": state_dir, "selected": selected.len()});
            let sites: Vec<Value> =
                rows.iter().map(|(n, state, text)| json!({"site": n, "inputs": state, "diff": text})).collect();
            env.result = json!({"sites": sites});
            env.print(ctx.output);
        }
        _ => {
            for (n, state, text) in &rows {
                if *state == "new" {
                    console::out_line(&format!("# {n}: no successful {} recorded: every input is new", op.name()));
                }
                console::out(text);
            }
        }
    }
    console::err_line(&format!(
        "sites diff {}: {} changed, {} new (never done), {} unchanged",
        op.name(),
        count("changed"),
        count("new"),
        count("unchanged")
    ));
    Ok(exit::OK)
}

fn status(state_dir: Option<PathBuf>, ctx: &Ctx) -> Result<i32> {
    let dir = state_dir.unwrap_or_else(Store::default_dir);
    let st = Statuses::read_only(&dir);
    let mut names: Vec<String> = match std::fs::read_dir(dir.join("sites")) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_string))
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => vec![],
        Err(e) => return Err(Error::input("--state-dir", dir.display().to_string(), e.to_string())),
    };
    names.sort();
    let mut rows = Vec::new();
    for n in &names {
        if let Some(s) = st.load(n)? {
            rows.push((n.clone(), s));
        }
    }
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new("sites status", false);
            env.context = json!({"stateDir": dir});
            let sites: Vec<Value> = rows
                .iter()
                .map(|(n, s)| {
                    let mut v = serde_json::to_value(s).expect("status serializes");
                    v["site"] = n.clone().into();
                    v
                })
                .collect();
            env.result = json!({"sites": sites});
            env.print(ctx.output);
        }
        _ => {
            let w = names.iter().map(String::len).max().unwrap_or(4).max(4);
            let mut out =
                format!("{:<w$}  {:<16}  {:<8}  {:<20}  {:>8}  ERROR\n", "SITE", "OP", "STATUS", "STARTED", "SECONDS");
            for (n, s) in &rows {
                let secs = s.seconds.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
                let e = s.error.as_deref().unwrap_or("").lines().next().unwrap_or("");
                out.push_str(&format!(
                    "{n:<w$}  {:<16}  {:<8}  {:<20}  {secs:>8}  {e}\n",
                    s.op,
                    s.status.name(),
                    s.started.as_deref().unwrap_or("-")
                ));
            }
            console::out(&out);
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--batch` and `--max-fail` as an operator types them reach the rollout (a list-valued
    /// flag once panicked in clap's derive when the command line was read).
    #[test]
    fn the_rollout_flags_parse_from_a_command_line() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "mgmt-driver",
            "sites",
            "apply",
            "instantiate",
            "--rendered",
            "out",
            "--batch",
            "1,10%,100%",
            "--max-fail",
            "0",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let text = format!("{cli:?}");
        assert!(text.contains("batch: Some([Count(1), Percent(10), Percent(100)])"), "{text}");
    }

    #[test]
    fn the_table_has_one_line_per_site_and_the_error_s_first_line() {
        let r = |site: &str, status, error: Option<&str>| SiteResult {
            site: site.into(),
            status,
            seconds: 1.25,
            error: error.map(str::to_string),
            error_kind: None,
        };
        let t = table(&[r("par1", "done", None), r("ber2", "failed", Some("ber2-m1: cannot connect\n  more"))]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[2].starts_with("ber2  failed") && lines[2].ends_with("ber2-m1: cannot connect"), "{t}");
        assert!(!t.contains("more"));
        // A failed command: its first line is the command, the reason is the stderr's last line.
        let e = "m1: command failed with exit code 1: helm status -- app\n  stderr (last lines):\n    Error: status not implemented\n";
        let t = table(&[r("par1", "failed", Some(e))]);
        assert!(
            t.lines().nth(1).unwrap().ends_with("helm status -- app (stderr: Error: status not implemented)"),
            "{t}"
        );
    }
}
