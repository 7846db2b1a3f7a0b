//! `mgmt-driver workload <op>`: Kubernetes workload operations (ONAP DCAE) with kubectl on a
//! cluster master. Parses the arguments, hands them to `workload::run` (which checks every input
//! before anything connects), and prints the result.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::common::{Ctx, Defaults, KnownHosts, StateDir};
use crate::cli::envelope::Envelope;
use crate::console;
use crate::duration::parse_duration;
use crate::error::{exit, Result};
use crate::lifecycle::Timeouts;
use crate::render::Output;
use crate::workload;
use crate::workload::kind::Kind;
use crate::workload::masters::Where;
use crate::workload::op::Op;
use crate::workload::run::{Inputs, Outcome};
use clap::Args;

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

impl WorkloadArgs {
    fn inputs(&self, ctx: &Ctx) -> Inputs {
        Inputs {
            masters: Where {
                cluster_instance: self.vnf_instance_id.clone(),
                inventory: self.inventory.clone(),
                master_group: self.master_group.clone(),
                inventory_opts: ctx.inventory_opts(),
                known_hosts: self.known.known_hosts.clone(),
            },
            namespace: self.namespace.clone(),
            kind: self.kind,
            timeout: self.timeout,
            interval: self.interval,
        }
    }
}

pub async fn run(op: Op, a: WorkloadArgs, ctx: &Ctx) -> i32 {
    let env = Envelope::new(op.name(), ctx.run.dry_run);
    let (events, renderer) = ctx.renderer(None);
    let inputs = a.inputs(ctx);
    let r: Result<Outcome> = async {
        let prepared = workload::run::prepare(&op, &inputs, || ctx.store(&a.store.state_dir))?;
        let defaults = Defaults::MASTERS;
        let rt = ctx.runner(events, &defaults, Timeouts::default(), false)?;
        workload::run::run(&prepared, rt).await
    }
    .await;
    let env = Envelope { warnings: renderer.await.unwrap_or_default(), ..env };
    let (env, code) = match r {
        Ok(Outcome { context, result, failure: None }) => (Envelope { context, result, ..env }, exit::OK),
        Ok(Outcome { context, result, failure: Some(e) }) => {
            console::error(&e);
            let code = e.exit_code();
            (Envelope { context, result, ..env.error(&e) }, code)
        }
        Err(e) => {
            console::error(&e);
            let code = e.exit_code();
            (env.error(&e), code)
        }
    };
    match ctx.output {
        Output::Json | Output::Yaml => env.print(ctx.output),
        _ => console::out_line(&serde_json::to_string_pretty(&env).unwrap_or_default()),
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
