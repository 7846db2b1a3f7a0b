//! One workload command from inputs to result: `prepare` checks every input (the spec, names,
//! `CONTAINER=IMAGE` pairs, replica counts, intervals) and finds the candidate masters before
//! anything connects, so bad input is exit 2 with nothing contacted; `run` takes the first
//! master that answers and runs the operation's steps (`ops.rs`) there.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::lifecycle::state::Store;
use crate::lifecycle::{Runner, Target};
use crate::workload::kind::Kind;
use crate::workload::masters::{self, Where};
use crate::workload::names;
use crate::workload::op::Op;
use crate::workload::ops::{self, Ctx};
use crate::workload::spec::{self, Workload, MAX_REPLICAS};

/// What the caller hands over besides the operation.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Where kubectl runs.
    pub masters: Where,
    /// The workload's namespace (default: the spec's, else `default`).
    pub namespace: Option<String>,
    /// Deployment or StatefulSet (default: the spec's, else deployment).
    pub kind: Option<Kind>,
    /// `wait`: give up after this long.
    pub timeout: Duration,
    /// `wait`: poll this often.
    pub interval: Duration,
}

/// The operation with its arguments checked.
pub enum Checked {
    Deploy(Box<Workload>),
    Undeploy(String),
    Available(String),
    Wait(String),
    Scale(String, u32),
    SetImage(String, Vec<(String, String)>),
    Rollback(String, Option<u32>),
    Exec(String, Option<String>, Vec<String>),
}

impl Checked {
    /// The workload's name.
    fn name(&self) -> &str {
        match self {
            Checked::Deploy(w) => &w.name,
            Checked::Undeploy(n)
            | Checked::Available(n)
            | Checked::Wait(n)
            | Checked::Scale(n, _)
            | Checked::SetImage(n, _)
            | Checked::Rollback(n, _)
            | Checked::Exec(n, _, _) => n,
        }
    }
}

/// Everything checked and the masters found; nothing connected.
pub struct Prepared {
    pub checked: Checked,
    pub kind: Kind,
    pub namespace: String,
    /// The candidate masters, in order.
    pub masters: Vec<Target>,
    pub timeout: Duration,
    pub interval: Duration,
}

/// What a run answers: the context (master, kind, namespace, name), the operation's result,
/// and the failure of an operation that still has a result (`exec` with a failed pod).
pub struct Outcome {
    pub context: Value,
    pub result: Value,
    pub failure: Option<Error>,
}

fn name_arg(n: &str) -> Result<String> {
    names::workload(n).map_err(|m| Error::input("arguments", "NAME", m))?;
    Ok(n.to_string())
}

/// The arguments, checked; with the workload's kind and namespace.
fn check(op: &Op, a: &Inputs) -> Result<(Checked, Kind, String)> {
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
        Op::Undeploy { name } => Checked::Undeploy(name_arg(name)?),
        Op::Available { name } => Checked::Available(name_arg(name)?),
        Op::Wait { name } => Checked::Wait(name_arg(name)?),
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

/// Check the inputs, then find the masters. `store` is opened only once the arguments are
/// good, so a bad command line creates no state directory.
pub fn prepare(op: &Op, a: &Inputs, store: impl FnOnce() -> Result<Store>) -> Result<Prepared> {
    let (checked, kind, namespace) = check(op, a)?;
    let masters = masters::find(&a.masters, &store()?)?;
    Ok(Prepared { checked, kind, namespace, masters, timeout: a.timeout, interval: a.interval })
}

/// Run the operation on the first master that answers.
pub async fn run(p: &Prepared, rt: Runner) -> Result<Outcome> {
    let refs: Vec<&Target> = p.masters.iter().collect();
    let m = rt.first_reachable(&refs).await?;
    let name = p.checked.name();
    let c = Ctx { rt: &rt, m, kind: p.kind, ns: &p.namespace, name };
    let result = match &p.checked {
        Checked::Deploy(w) => ops::deploy(&c, w).await.map(|v| (v, None)),
        Checked::Undeploy(_) => ops::undeploy(&c).await.map(|v| (v, None)),
        Checked::Available(_) => ops::available(&c).await.map(|v| (v, None)),
        Checked::Wait(_) => ops::wait(&c, p.interval, p.timeout).await.map(|v| (v, None)),
        Checked::Scale(_, n) => ops::scale(&c, *n).await.map(|v| (v, None)),
        Checked::SetImage(_, pairs) => ops::set_image(&c, pairs).await.map(|v| (v, None)),
        Checked::Rollback(_, to) => ops::rollback(&c, *to).await.map(|v| (v, None)),
        Checked::Exec(_, container, command) => ops::exec(&c, container.as_deref(), command).await,
    };
    rt.close().await;
    let context = json!({"master": m.host.addr, "kind": p.kind.api(), "namespace": p.namespace, "name": name});
    let (result, failure) = result?;
    Ok(Outcome { context, result, failure })
}
