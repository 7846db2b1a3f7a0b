//! `mgmt-driver workload <op>`: Kubernetes workload operations (ONAP DCAE) with kubectl on a
//! cluster master. Parses the arguments, checks every input (the spec, names, `CONTAINER=IMAGE`
//! pairs, replica counts, intervals) before anything connects, and calls `workload::ops`.
// Until the family's printing goes through the renderer (issue 19): its orchestration is being
// moved to `workload/` (issue 19), and then its prints become `console` calls.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};

use crate::cli::common::{parse_duration, Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::Envelope;
use crate::error::{exit, Error, Result};
use crate::lifecycle::Timeouts;
use crate::render::Output;
use crate::workload::ops::{self, Ctx as OpCtx};
use crate::workload::spec::{self, Workload, MAX_REPLICAS};
use crate::workload::{masters, names, Kind, Op, Where};

#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// The cluster recorded by `instantiate-end` under this VNF instance id (its masters and
    /// their stored credentials, as `cnf` uses them).
    #[arg(long, alias = "cluster-instance", global = true)]
    pub vnf_instance_id: Option<String>,
    /// An inventory: credentials and host keys for the masters (matched by address), or, without
    /// --vnf-instance-id, the masters themselves (--master-group).
    #[arg(short, long, global = true)]
    pub inventory: Option<PathBuf>,
    /// The inventory group of masters (without --vnf-instance-id).
    #[arg(long, default_value = "master_instance", global = true)]
    pub master_group: String,
    #[command(flatten)]
    pub store: StateDir,
    #[command(flatten)]
    pub known: KnownHosts,
    /// The workload's namespace (default: the spec's, else `default`).
    #[arg(short, long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Deployment or StatefulSet (default: the spec's, else deployment).
    #[arg(long, value_enum, global = true)]
    pub kind: Option<Kind>,
    /// `wait`: give up after this long. DCAE's interval specs: `10` (seconds), `10s`, `5m`, `1h`;
    /// also `1m30s`, `500ms`, `1.5`.
    #[arg(long, default_value = "300", global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// `wait`: poll this often (same forms as --timeout).
    #[arg(long, default_value = "5", global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
}

/// Everything checked, nothing connected.
enum Checked {
    Deploy(Box<Workload>),
    Name(String),
    Scale(String, u32),
    SetImage(String, Vec<(String, String)>),
    Rollback(String, Option<u32>),
    Exec(String, Option<String>, Vec<String>),
}

fn name_arg(n: &str) -> Result<String> {
    names::workload(n).map_err(|m| Error::input("arguments", "NAME", m))?;
    Ok(n.to_string())
}

fn check(op: &Op, a: &WorkloadArgs) -> Result<(Checked, Kind, String)> {
    if let Some(ns) = &a.namespace {
        crate::cnf::names::namespace(ns).map_err(|m| Error::input("arguments", "--namespace", m))?;
    }
    if a.interval > a.timeout {
        return Err(Error::input("arguments", "--interval", "is longer than --timeout"));
    }
    let kind = a.kind.unwrap_or(Kind::Deployment);
    let ns = a.namespace.clone().unwrap_or_else(|| "default".into());
    let c = match op {
        Op::Deploy { spec: path } => {
            let w = spec::load(path, a.kind, a.namespace.as_deref())?;
            let (kind, ns) = (w.kind, w.namespace.clone());
            return Ok((Checked::Deploy(Box::new(w)), kind, ns));
        }
        Op::Undeploy { name } | Op::Available { name } | Op::Wait { name } => Checked::Name(name_arg(name)?),
        Op::Scale { name, replicas } => {
            if *replicas > MAX_REPLICAS {
                return Err(Error::input("arguments", "REPLICAS", format!("{replicas} is more than {MAX_REPLICAS}")));
            }
            Checked::Scale(name_arg(name)?, *replicas)
        }
        Op::SetImage { name, images } => {
            let mut pairs: Vec<(String, String)> = Vec::new();
            for i in images {
                let p = names::container_image(i).map_err(|m| Error::input("arguments", "CONTAINER=IMAGE", m))?;
                if pairs.iter().any(|(c, _)| *c == p.0) {
                    return Err(Error::input("arguments", "CONTAINER=IMAGE", format!("'{}' is given twice", p.0)));
                }
                pairs.push(p);
            }
            Checked::SetImage(name_arg(name)?, pairs)
        }
        Op::Rollback { name, to_revision } => {
            if *to_revision == Some(0) {
                return Err(Error::input(
                    "arguments",
                    "--to-revision",
                    "revisions start at 1 (leave it out for the previous one)",
                ));
            }
            Checked::Rollback(name_arg(name)?, *to_revision)
        }
        Op::Exec { name, container, command } => {
            if let Some(c) = container {
                names::container(c).map_err(|m| Error::input("arguments", "--container", m))?;
            }
            if command.iter().any(|w| w.contains('\0')) {
                return Err(Error::input("arguments", "CMD", "contains a NUL byte"));
            }
            Checked::Exec(name_arg(name)?, container.clone(), command.clone())
        }
    };
    Ok((c, kind, ns))
}

pub async fn run(op: Op, a: WorkloadArgs, ctx: &Ctx) -> i32 {
    let env = Envelope::new(op.name(), ctx.run.dry_run);
    let (events, renderer) = ctx.renderer(None);
    let r: Result<(Value, Value, Option<Error>)> = async {
        let (checked, kind, ns) = check(&op, &a)?;
        let w = Where {
            cluster_instance: a.vnf_instance_id.clone(),
            inventory: a.inventory.clone(),
            master_group: a.master_group.clone(),
            inventory_opts: ctx.inventory_opts(),
            known_hosts: a.known.known_hosts.clone(),
        };
        let targets = masters::find(&w, &ctx.store(&a.store.state_dir)?)?;
        let defaults = Defaults { retry_for: Duration::from_secs(5), parallel: 16 };
        let rt = ctx.runner(events, &defaults, Timeouts::default(), false)?;
        let refs: Vec<&crate::lifecycle::Target> = targets.iter().collect();
        let m = rt.first_reachable(&refs).await?;
        let name = match &checked {
            Checked::Deploy(w) => w.name.clone(),
            Checked::Name(n)
            | Checked::Scale(n, _)
            | Checked::SetImage(n, _)
            | Checked::Rollback(n, _)
            | Checked::Exec(n, _, _) => n.clone(),
        };
        let c = OpCtx { rt: &rt, m, kind, ns: &ns, name: &name };
        let result = match &checked {
            Checked::Deploy(w) => ops::deploy(&c, w).await.map(|v| (v, None)),
            Checked::Name(_) => match &op {
                Op::Undeploy { .. } => ops::undeploy(&c).await,
                Op::Available { .. } => ops::available(&c).await,
                _ => ops::wait(&c, a.interval, a.timeout).await,
            }
            .map(|v| (v, None)),
            Checked::Scale(_, n) => ops::scale(&c, *n).await.map(|v| (v, None)),
            Checked::SetImage(_, pairs) => ops::set_image(&c, pairs).await.map(|v| (v, None)),
            Checked::Rollback(_, to) => ops::rollback(&c, *to).await.map(|v| (v, None)),
            Checked::Exec(_, container, command) => ops::exec(&c, container.as_deref(), command).await,
        };
        rt.close().await;
        let context = json!({"master": m.host.addr, "kind": kind.api(), "namespace": ns, "name": name});
        let (result, failure) = result?;
        Ok((context, result, failure))
    }
    .await;
    let _ = renderer.await;
    let (env, code) = match r {
        Ok((context, result, None)) => (Envelope { context, result, ..env }, exit::OK),
        Ok((context, result, Some(e))) => {
            eprintln!("error: {e}");
            let code = e.exit_code();
            (Envelope { context, result, ..env.error(&e) }, code)
        }
        Err(e) => {
            eprintln!("error: {e}");
            let code = e.exit_code();
            (env.error(&e), code)
        }
    };
    match ctx.output {
        Output::Json | Output::Yaml => env.print(ctx.output),
        _ => println!("{}", serde_json::to_string_pretty(&env).unwrap_or_default()),
    }
    code
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The result schema knows the workload documents: a per-pod exec result must carry each
    /// pod's exit code and output tails, and the context names master and workload.
    #[test]
    fn the_schema_checks_workload_documents() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/result.schema.json")).unwrap();
        let v = jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap();
        let pod =
            json!({"pod": "web-1", "node": "w1", "ok": true, "exitCode": 0, "stdoutTail": "web-1\n", "stderrTail": ""});
        let doc = |result: serde_json::Value, context: serde_json::Value| {
            json!({"apiVersion": "mgmt-driver/v1", "kind": "Result", "operation": "workload exec", "ok": true,
                   "dryRun": false, "context": context, "result": result, "warnings": [], "errors": []})
        };
        let ctx = json!({"master": "192.0.2.1", "kind": "Deployment", "namespace": "default", "name": "web"});
        assert!(v.is_valid(&doc(json!({"pods": [pod.clone()], "failedCount": 0}), ctx.clone())));
        let mut no_code = pod.clone();
        no_code.as_object_mut().unwrap().remove("exitCode");
        assert!(!v.is_valid(&doc(json!({"pods": [no_code], "failedCount": 0}), ctx.clone())));
        assert!(!v.is_valid(&doc(json!({"pods": [pod], "failedCount": 0}), json!({"master": "192.0.2.1"}))));
    }
}
