//! `mgmt-driver primitive list|show|run|status`: the named actions of a directory or package
//! (`primitives.yaml`), run on registered EEs, inventory hosts or a recorded cluster's masters or
//! workers. Parses the arguments, calls `primitive::prepare` (everything is checked before
//! anything connects: a bad declaration is exit 2, bad parameters are exit 3 with each one
//! named) and `primitive::run`, and prints the runs; a run's failure exits with its kind's code.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults, StateDir};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::console;
use crate::error::{exit, Error, Result};
use crate::lifecycle::Timeouts;
use crate::primitive;
use crate::primitive::prepare::{Ready, Refused, Request};
use crate::primitive::spec;
use crate::primitive::status::{ErrorKind, RunRecord};
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

impl RunArgs {
    fn request(&self) -> Request {
        Request {
            name: self.name.clone(),
            params: self.params.clone(),
            ee: self.ee.clone(),
            inventory: self.inventory.clone(),
            group: self.group.clone(),
            host: self.host.clone(),
            cluster_instance: self.cluster_instance.clone(),
        }
    }
}

fn print(ctx: &Ctx, op: &str, ok: bool, result: Value, errors: Vec<ErrorItem>) {
    let mut env = Envelope::new(op, ctx.run.dry_run);
    env.ok = ok;
    env.result = result;
    env.errors = errors;
    env.print(ctx.output);
}

fn record_json(r: &RunRecord) -> Value {
    r.shown()
}

pub async fn run(cmd: PrimitiveCmd, src: Source, ctx: &Ctx) -> Result<i32> {
    match cmd {
        PrimitiveCmd::Status { run_id } => {
            let store = ctx.store(&src.store.state_dir)?;
            let runs = primitive::status::runs(&store, run_id.as_deref(), &crate::lifecycle::owner::ProcFs)?;
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
                        console::out_line(&format!(
                            "{}\t{}\t{}\t{}\t{}{}",
                            r.run_id,
                            r.primitive,
                            r.target,
                            r.status.as_str(),
                            r.detailed_status,
                            r.error_kind.map(|k| format!("\t{}", k.as_str())).unwrap_or_default()
                        ));
                    }
                }
            }
            Ok(exit::OK)
        }
        PrimitiveCmd::List => {
            let (_, ps) = primitive::prepare::declared(src.dir.as_deref(), src.package.as_deref())?;
            match ctx.output {
                Output::Json | Output::Yaml => print(ctx, "primitive list", true, json!({"primitives": ps}), vec![]),
                _ => {
                    for p in &ps {
                        console::out_line(&format!("{}\t{}", p.name, p.description.as_deref().unwrap_or("")));
                    }
                }
            }
            Ok(exit::OK)
        }
        PrimitiveCmd::Show { name } => {
            let (dir, ps) = primitive::prepare::declared(src.dir.as_deref(), src.package.as_deref())?;
            let p = primitive::prepare::find(&ps, &name, &dir)?;
            match ctx.output {
                Output::Json | Output::Yaml => print(ctx, "primitive show", true, json!(p), vec![]),
                _ => console::out_line(&yaml_serde::to_string(p).expect("serializes")),
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

async fn run_cmd(a: RunArgs, src: Source, ctx: &Ctx) -> Result<i32> {
    let (dir, package) = (src.dir.as_deref(), src.package.as_deref());
    let ready = primitive::prepare::prepare(dir, package, &a.request(), &ctx.inventory_opts(), || {
        ctx.store(&src.store.state_dir)
    });
    let Ready { primitive: prep, params, hosts, store } = match ready {
        Ok(r) => r,
        Err(Refused::Input(e)) => return Err(e),
        Err(Refused::BadArguments { primitive: name, bad }) => {
            let (msg, items) = bad_arguments(&name, &bad);
            console::error(&msg);
            if matches!(ctx.output, Output::Json | Output::Yaml) {
                let mut env = Envelope::new("primitive run", ctx.run.dry_run);
                env.ok = false;
                env.result = json!({"primitive": name, "errorKind": ErrorKind::BadArguments.as_str(),
                    "badArguments": bad.iter().map(|(k, m)| json!({"name": k, "error": m})).collect::<Vec<_>>()});
                env.errors = items;
                env.print(ctx.output);
            }
            return Ok(ErrorKind::BadArguments.exit_code());
        }
    };
    let defaults = Defaults::EE;
    let (events, renderer) = ctx.renderer(Some(hosts.len()));
    let rt = ctx.runner(events, &defaults, Timeouts::default(), true)?;
    let ran = primitive::run::run(&prep, &params, hosts, &store, rt).await;
    let warnings = renderer.await.unwrap_or_default();
    let ran = ran?;
    let errors: Vec<ErrorItem> = ran.errors.iter().map(ErrorItem::from_error).collect();
    let (code, runs) = (ran.code, ran.runs);
    let prim = &prep.primitive;
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new("primitive run", ctx.run.dry_run);
            env.ok = code == exit::OK;
            env.result = json!({"primitive": prim.name, "runs": runs.iter().map(record_json).collect::<Vec<_>>()});
            env.errors = errors;
            env.warnings = warnings;
            env.print(ctx.output);
        }
        _ => {
            for r in &runs {
                if let Some(out) = &r.stdout_tail {
                    console::out(out);
                }
                console::err_line(&format!(
                    "{}: run {} {}{}",
                    r.target,
                    r.run_id,
                    r.status.as_str(),
                    r.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                ));
                if let Some(v) = r.shown_result() {
                    console::out_line(&v.to_string());
                }
            }
        }
    }
    Ok(code)
}
