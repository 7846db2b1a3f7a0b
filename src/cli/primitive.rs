//! `mgmt-driver primitive list|show|run|status`: the named actions of a directory or package
//! (`primitives.yaml`), run on registered EEs, inventory hosts or a recorded cluster's masters or
//! workers. Everything is checked before anything connects: a bad declaration is exit 2, bad
//! parameters are exit 3 with each one named; a run's failure exits with its kind's code.
// Until the family's printing goes through the renderer (issue 19): its orchestration is being
// moved to `primitive/` (issue 19), and then its prints become `console` calls.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults, StateDir};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::error::{exit, Error, Result};
use crate::inventory::{Host, Inventory};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::Timeouts;
use crate::primitive::run::{run_on, Prepared};
use crate::primitive::spec::{self, Primitive, RunsOn};
use crate::primitive::status::{ErrorKind, RunRecord, Status};
use crate::render::Output;

#[derive(Args, Debug, Clone)]
pub struct Source {
    /// A directory holding primitives.yaml and its scripts.
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "package")]
    pub dir: Option<PathBuf>,
    /// A VNF package directory: Scripts/primitives.yaml (or primitives.yaml at its root).
    #[arg(long, global = true, value_name = "DIR")]
    pub package: Option<PathBuf>,
    #[command(flatten)]
    pub store: StateDir,
}

#[derive(Subcommand, Debug)]
pub enum PrimitiveCmd {
    /// The declared primitives.
    List,
    /// One primitive: its parameters, timeout, where it runs.
    Show {
        /// The primitive's name.
        name: String,
    },
    /// Run a primitive with its parameters (`--param k=v`, checked before connecting).
    Run(RunArgs),
    /// A run's status record (every run's, without RUN_ID).
    Status {
        /// The run's id, as `primitive run` printed it.
        run_id: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The primitive's name (`primitive list`).
    pub name: String,
    /// A parameter, NAME=VALUE (repeatable).
    #[arg(long = "param", value_parser = spec::parse_param, value_name = "NAME=VALUE")]
    pub params: Vec<(String, String)>,
    /// A registered execution environment (repeatable).
    #[arg(long, value_name = "NAME|ID")]
    pub ee: Vec<String>,
    /// Inventory hosts to run on (with --group/--host), or the credentials of a recorded
    /// cluster's nodes (with --cluster-instance).
    #[arg(short, long)]
    pub inventory: Option<PathBuf>,
    /// Only the inventory hosts of this group (repeatable).
    #[arg(short, long, requires = "inventory")]
    pub group: Vec<String>,
    /// Only this inventory host (repeatable).
    #[arg(long, requires = "inventory")]
    pub host: Vec<String>,
    /// The VNF instance recorded by instantiate-end whose masters or workers the primitive
    /// runs on (`runs_on: masters|workers`). A Helm CNF instance is refused.
    #[arg(long, value_name = "VNF_INSTANCE_ID")]
    pub cluster_instance: Option<String>,
}

/// Where primitives.yaml is.
fn dir_of(s: &Source) -> Result<PathBuf> {
    match (&s.dir, &s.package) {
        (Some(d), _) => Ok(d.clone()),
        (None, Some(p)) => {
            let scripts = p.join("Scripts");
            Ok(if scripts.join(spec::FILE_NAME).is_file() { scripts } else { p.clone() })
        }
        (None, None) => Err(Error::input("arguments", "--dir", "where are the primitives? --dir DIR or --package DIR")),
    }
}

fn find<'a>(ps: &'a [Primitive], name: &str, dir: &Path) -> Result<&'a Primitive> {
    ps.iter().find(|p| p.name == name).ok_or_else(|| {
        let known: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        Error::input(
            dir.join(spec::FILE_NAME).display().to_string(),
            crate::error::excerpt(name),
            format!("no such primitive (declared: {})", known.join(", ")),
        )
    })
}

fn print(ctx: &Ctx, op: &str, ok: bool, result: Value, errors: Vec<ErrorItem>) {
    let mut env = Envelope::new(op, ctx.run.dry_run);
    env.ok = ok;
    env.result = result;
    env.errors = errors;
    env.print(ctx.output);
}

fn record_json(r: &RunRecord) -> Value {
    serde_json::to_value(crate::secret::masked(&serde_json::to_value(r).expect("serializes"))).expect("json")
}

pub async fn run(cmd: PrimitiveCmd, src: Source, ctx: &Ctx) -> Result<i32> {
    match cmd {
        PrimitiveCmd::Status { run_id } => {
            let store = ctx.store(&src.store.state_dir)?;
            let runs = match run_id {
                Some(id) => {
                    crate::lifecycle::state::check_instance_id(&id)?;
                    vec![RunRecord::load(&store, &id)?.ok_or_else(|| {
                        Error::input("arguments", "RUN_ID", format!("no run {id} in {}", store.dir().display()))
                    })?]
                }
                None => RunRecord::list(&store)?,
            };
            match ctx.output {
                Output::Json | Output::Yaml => print(
                    ctx,
                    "primitive status",
                    true,
                    json!({"runs": runs.iter().map(record_json).collect::<Vec<_>>()}),
                    vec![],
                ),
                _ => {
                    for r in &runs {
                        println!(
                            "{}\t{}\t{}\t{}\t{}{}",
                            r.run_id,
                            r.primitive,
                            r.target,
                            r.status.as_str(),
                            r.detailed_status,
                            r.error_kind.map(|k| format!("\t{}", k.as_str())).unwrap_or_default()
                        );
                    }
                }
            }
            Ok(exit::OK)
        }
        PrimitiveCmd::List => {
            let dir = dir_of(&src)?;
            let ps = spec::load(&dir)?;
            match ctx.output {
                Output::Json | Output::Yaml => print(ctx, "primitive list", true, json!({"primitives": ps}), vec![]),
                _ => {
                    for p in &ps {
                        println!("{}\t{}", p.name, p.description.as_deref().unwrap_or(""));
                    }
                }
            }
            Ok(exit::OK)
        }
        PrimitiveCmd::Show { name } => {
            let dir = dir_of(&src)?;
            let ps = spec::load(&dir)?;
            let p = find(&ps, &name, &dir)?;
            match ctx.output {
                Output::Json | Output::Yaml => print(ctx, "primitive show", true, json!(p), vec![]),
                _ => println!("{}", yaml_serde::to_string(p).expect("serializes")),
            }
            Ok(exit::OK)
        }
        PrimitiveCmd::Run(a) => run_cmd(a, src, ctx).await,
    }
}

/// The bad-arguments error: every bad parameter by name, one message.
fn bad_arguments(prim: &str, bad: &[(String, String)]) -> (String, Vec<ErrorItem>) {
    let list: Vec<String> = bad.iter().map(|(k, m)| format!("{k}: {m}")).collect();
    let msg = format!("bad arguments for primitive {prim}: {}", list.join("; "));
    let items = bad
        .iter()
        .map(|(k, m)| {
            ErrorItem::from_error(&Error::input(format!("primitive {prim}"), format!("--param {k}"), m.clone()))
        })
        .collect();
    (msg, items)
}

/// The hosts a run goes to, from the command line and the declaration.
fn targets(a: &RunArgs, prim: &Primitive, ctx: &Ctx, store: &Store) -> Result<Vec<Host>> {
    if let Some(id) = &a.cluster_instance {
        crate::lifecycle::state::check_instance_id(id)?;
        if store.load_doc::<Value>(id, "cnf")?.is_some() && store.load_doc::<Value>(id, "")?.is_none() {
            return Err(Error::input(
                "--cluster-instance",
                id.clone(),
                "is a Helm CNF: Helm CNFs have no primitives (as in OSM's Helm connector); use the cnf operations",
            ));
        }
    }
    let mut hosts: Vec<Host> = Vec::new();
    match (&prim.runs_on, &a.cluster_instance) {
        (RunsOn::Masters | RunsOn::Workers, None) => {
            return Err(Error::input(
                "arguments",
                "--cluster-instance",
                format!(
                    "primitive {} runs on a cluster's {}: name the VNF instance",
                    prim.name,
                    runs_on_word(&prim.runs_on)
                ),
            ))
        }
        (RunsOn::Masters | RunsOn::Workers, Some(id)) => {
            let role = if prim.runs_on == RunsOn::Masters { "master" } else { "worker" };
            let doc: Value = store.load_doc(id, "")?.ok_or_else(|| {
                Error::input("--cluster-instance", id.clone(), "no cluster is recorded under this id (instantiate-end)")
            })?;
            let names: Vec<String> = doc["nodes"]
                .as_object()
                .map(|m| m.iter().filter(|(_, n)| n["role"] == role).map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            let inv = a.inventory.as_ref().ok_or_else(|| {
                Error::input(
                    "arguments",
                    "--inventory",
                    "the cluster's nodes are logged in to with the inventory's credentials",
                )
            })?;
            let inv = Inventory::load(inv, &ctx.inventory_opts())?;
            for n in &names {
                let h = inv.hosts.iter().find(|h| &h.name == n).ok_or_else(|| {
                    Error::input("--inventory", n.clone(), format!("the recorded {role} is not in the inventory"))
                })?;
                hosts.push(h.clone());
            }
            if hosts.is_empty() {
                return Err(Error::input(
                    "--cluster-instance",
                    id.clone(),
                    format!("the recorded cluster has no {role}"),
                ));
            }
        }
        (RunsOn::Ee(declared), _) => {
            if a.inventory.is_some() {
                return Err(Error::input(
                    "arguments",
                    "--inventory",
                    format!("primitive {} runs on EEs (--ee)", prim.name),
                ));
            }
            let names: Vec<String> = match (a.ee.is_empty(), declared) {
                (false, _) => a.ee.clone(),
                (true, Some(n)) => vec![n.clone()],
                (true, None) => {
                    return Err(Error::input(
                        "arguments",
                        "--ee",
                        format!("primitive {} runs on an EE: name it", prim.name),
                    ))
                }
            };
            hosts = crate::cli::ee::ee_hosts(store, &names)?;
        }
        (RunsOn::Any, _) => {
            if let Some(p) = &a.inventory {
                hosts = Inventory::load(p, &ctx.inventory_opts())?.select(&a.group, &a.host)?;
            }
            hosts.extend(crate::cli::ee::ee_hosts(store, &a.ee)?);
            if hosts.is_empty() {
                return Err(Error::input("arguments", "--ee", "no target: --ee NAME, or --inventory"));
            }
        }
    }
    Ok(hosts)
}

fn runs_on_word(r: &RunsOn) -> &'static str {
    match r {
        RunsOn::Masters => "masters",
        RunsOn::Workers => "workers",
        RunsOn::Ee(_) => "EEs",
        RunsOn::Any => "hosts",
    }
}

async fn run_cmd(a: RunArgs, src: Source, ctx: &Ctx) -> Result<i32> {
    let dir = dir_of(&src)?;
    let ps = spec::load(&dir)?;
    let prim = find(&ps, &a.name, &dir)?.clone();
    // Parameters first: nothing is opened, read or connected for a run with bad arguments.
    let params = match spec::check_params(&prim, &a.params) {
        Ok(p) => p,
        Err(bad) => {
            let (msg, items) = bad_arguments(&prim.name, &bad);
            eprintln!("error: {msg}");
            if matches!(ctx.output, Output::Json | Output::Yaml) {
                let mut env = Envelope::new("primitive run", ctx.run.dry_run);
                env.ok = false;
                env.result = json!({"primitive": prim.name, "errorKind": ErrorKind::BadArguments.as_str(),
                    "badArguments": bad.iter().map(|(k, m)| json!({"name": k, "error": m})).collect::<Vec<_>>()});
                env.errors = items;
                env.print(ctx.output);
            }
            return Ok(ErrorKind::BadArguments.exit_code());
        }
    };
    let package = Package::open(&dir)?;
    let script = package.file(&prim.script, &dir.join(spec::FILE_NAME).display().to_string(), "script")?;
    let store = ctx.store(&src.store.state_dir)?;
    let hosts = targets(&a, &prim, ctx, &store)?;
    let prep = Prepared::new(prim.clone(), script, params.clone())?;
    let defaults = Defaults { retry_for: Duration::from_secs(10), parallel: 64 };
    let (events, renderer) = ctx.renderer(Some(hosts.len()));
    let rt = ctx.runner(events, &defaults, Timeouts::default(), true)?;
    // Every run is recorded (pending) before the first connection.
    let mut records: Vec<RunRecord> = Vec::new();
    for h in &hosts {
        let mut r = RunRecord::new(&crate::ee::record::new_id(), &prim.name, &h.name, params.clone());
        r.set(Status::Pending, "waiting for the target", &store, &rt.ev(h))?;
        records.push(r);
    }
    // Dropped unfinished (a signal drops this future): every run not yet ended is marked so.
    let mut unfinished = Unfinished { store: &store, run_ids: records.iter().map(|r| r.run_id.clone()).collect() };
    let pairs: Vec<(Host, std::sync::Mutex<RunRecord>)> =
        hosts.into_iter().zip(records).map(|(h, r)| (h, std::sync::Mutex::new(r))).collect();
    let nodes: Vec<&Host> = pairs.iter().map(|(h, _)| h).collect();
    let (rt_ref, store_ref, prep_ref, pairs_ref) = (&rt, &store, &prep, &pairs);
    let results = rt
        .each(&nodes, |h| async move {
            let slot = &pairs_ref.iter().find(|(x, _)| x.name == h.name).expect("a target").1;
            let mut rec = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let r = run_on(rt_ref, store_ref, prep_ref, h, &mut rec).await;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = rec;
            r
        })
        .await;
    unfinished.run_ids.clear();
    drop(rt);
    let _ = renderer.await;
    let mut code = exit::OK;
    let mut errors = Vec::new();
    let mut runs = Vec::new();
    for ((_, r), (_, slot)) in results.iter().zip(&pairs) {
        let rec = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Err(e) = r {
            if code == exit::OK {
                code = rec.error_kind.unwrap_or(ErrorKind::of(e)).exit_code();
            }
            errors.push(ErrorItem::from_error(e));
        }
        runs.push(rec);
    }
    match ctx.output {
        Output::Json | Output::Yaml => print(
            ctx,
            "primitive run",
            code == exit::OK,
            json!({"primitive": prim.name, "runs": runs.iter().map(record_json).collect::<Vec<_>>()}),
            errors,
        ),
        _ => {
            for r in &runs {
                if let Some(out) = &r.stdout_tail {
                    print!("{out}");
                }
                eprintln!(
                    "{}: run {} {}{}",
                    r.target,
                    r.run_id,
                    r.status.as_str(),
                    r.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                );
                if let Some(v) = &r.result {
                    println!("{v}");
                }
            }
        }
    }
    Ok(code)
}

/// The runs of a `primitive run` that has not come back yet. When the command is stopped
/// (SIGINT/SIGTERM: `main.rs` drops the operation), the runs still pending or running are
/// recorded as failed and interrupted, so `primitive status` never shows a run that is gone as
/// running. Cleared once every run has its own outcome.
struct Unfinished<'a> {
    store: &'a crate::lifecycle::state::Store,
    run_ids: Vec<String>,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        for id in &self.run_ids {
            if let Ok(Some(mut r)) = RunRecord::load(self.store, id) {
                if matches!(r.status, Status::Pending | Status::Running) {
                    if let Err(e) = r.interrupted(self.store) {
                        tracing::warn!(run = %id, error = %e, "could not record the interrupted run");
                    }
                }
            }
        }
    }
}
