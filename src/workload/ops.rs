//! The workload operations as steps on one master (`lifecycle::Runner`): every kubectl line
//! comes from `kubectl.rs`, every value read back goes through `status.rs`. In a plan
//! (`--dry-run`) the same steps are recorded, with placeholders where a value would be read.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::facts::kubectl::{RunningPods, WorkloadStatus};
use crate::facts::Fact;
use crate::lifecycle::{Runner, Target};
use crate::transport::{Source, UploadFile};
use crate::workload::kind::Kind;
use crate::workload::spec::Workload;
use crate::workload::status::{Pod, Status};
use crate::workload::{kubectl, manifest};

/// One workload on one master.
pub struct Ctx<'a> {
    pub rt: &'a Runner,
    pub m: &'a Target,
    pub kind: Kind,
    pub ns: &'a str,
    pub name: &'a str,
}

/// How many bytes of a pod's output the result keeps (the whole output is streamed as events).
pub const TAIL_BYTES: usize = 2048;

impl Ctx<'_> {
    fn cmd(&self, script: String) -> crate::command::RemoteCommand {
        self.rt.root_cmd(self.m, script, self.rt.timeouts.command)
    }

    fn subject(&self) -> String {
        kubectl::object(self.kind, self.name)
    }

    /// The workload's status; None in a plan.
    pub async fn status(&self) -> Result<Option<Status>> {
        let fact = WorkloadStatus { kind: self.kind, ns: self.ns, name: self.name };
        match self.rt.read(self.m, &fact).await {
            // The hidden command's stderr is hidden too: ask again for the name only (no env
            // values in it), so the error says why (NotFound, Forbidden, unreachable API).
            Err(Error::Remote { .. }) => {
                let why = self.cmd(kubectl::get_name(self.kind, self.ns, self.name)?);
                self.rt.exec(self.m, why).await?;
                Err(Error::Unreadable {
                    node: self.m.host.name.clone(),
                    command: kubectl::get(self.kind, self.ns, self.name)?,
                    what: fact.what(),
                    message: "kubectl failed, then succeeded when asked again".into(),
                })
            }
            other => other,
        }
    }

    async fn run(&self, script: String) -> Result<Vec<String>> {
        let out = self.rt.exec(self.m, self.cmd(script)).await?;
        Ok(out.stdout_text().lines().map(|l| crate::error::printable(l).into_owned()).collect())
    }

    /// The status once the controller has seen the latest spec (a few seconds at most), so a
    /// revision read after a change is the new one.
    async fn settled(&self) -> Result<Option<Status>> {
        for _ in 0..20 {
            match self.status().await? {
                Some(s) if !s.observed => tokio::time::sleep(Duration::from_millis(500)).await,
                other => return Ok(other),
            }
        }
        self.status().await
    }
}

fn images(s: &Option<Status>) -> Value {
    s.as_ref()
        .map(|s| Value::Object(s.images.iter().map(|(k, v)| (k.clone(), json!(v))).collect()))
        .unwrap_or(Value::Null)
}

fn revision(s: &Option<Status>) -> Value {
    s.as_ref().and_then(|s| s.revision).map(Value::from).unwrap_or(Value::Null)
}

/// Upload the objects as one JSON List (0600, in the login user's `~/.mgmt-driver/workloads/`)
/// and `kubectl apply` it; the file is removed after the apply (it holds the env values).
pub async fn deploy(c: &Ctx<'_>, w: &Workload) -> Result<Value> {
    let file = format!(".mgmt-driver/workloads/{}.{}.json", w.namespace, w.name);
    let body = serde_json::to_vec(&manifest::list(w)).expect("serializes");
    c.rt.phase(&format!("deploy {} {}/{}", w.kind.api(), w.namespace, w.name), &[c.m], false);
    c.rt.upload(c.m, vec![UploadFile { source: Source::Bytes(body.into()), remote: file.clone(), mode: 0o600 }])
        .await?;
    let applied = c.run(kubectl::apply(&file)?).await?;
    let objects: Vec<String> = std::iter::once(kubectl::object(w.kind, &w.name))
        .chain(manifest::service_names(w).into_iter().map(|s| format!("service/{s}")))
        .collect();
    Ok(json!({"objects": objects, "applied": applied}))
}

/// Delete the workload, then the Services `deploy` made for it: those labelled with its name
/// and as ours (a Service of the same name made by someone else stays).
pub async fn undeploy(c: &Ctx<'_>) -> Result<Value> {
    c.rt.phase(&format!("undeploy {}", c.subject()), &[c.m], false);
    let deleted = c.run(kubectl::delete(c.kind, c.ns, c.name)?).await?;
    Ok(json!({"deleted": deleted}))
}

pub async fn available(c: &Ctx<'_>) -> Result<Value> {
    let s = c.status().await?;
    Ok(match s {
        Some(s) => json!({"available": s.is_available(), "status": s, "images": images(&Some(s.clone()))}),
        None => json!({"available": Value::Null, "planned": true}),
    })
}

pub async fn scale(c: &Ctx<'_>, replicas: u32) -> Result<Value> {
    let before = c.status().await?;
    c.run(kubectl::scale(c.kind, c.ns, c.name, replicas)?).await?;
    Ok(json!({"from": before.map(|s| s.desired), "to": replicas}))
}

/// Each named container must be one of the workload's (read back first): `kubectl set image`
/// would otherwise fail half-way or not at all.
pub async fn set_image(c: &Ctx<'_>, pairs: &[(String, String)]) -> Result<Value> {
    let before = c.status().await?;
    if let Some(s) = &before {
        let have: Vec<&str> = s.images.iter().map(|(n, _)| n.as_str()).collect();
        if let Some((missing, _)) = pairs.iter().find(|(n, _)| !have.contains(&n.as_str())) {
            return Err(Error::input(
                "arguments",
                "CONTAINER=IMAGE",
                format!("{} has no container '{missing}' (containers: {})", c.subject(), have.join(", ")),
            ));
        }
    }
    c.run(kubectl::set_image(c.kind, c.ns, c.name, pairs)?).await?;
    let after = c.settled().await?;
    Ok(json!({"revisionBefore": revision(&before), "revision": revision(&after), "images": images(&after)}))
}

pub async fn rollback(c: &Ctx<'_>, to: Option<u32>) -> Result<Value> {
    let before = c.status().await?;
    let out = c.run(kubectl::rollback(c.kind, c.ns, c.name, to)?).await?;
    let after = c.settled().await?;
    Ok(rolled_back(&before, &after, out))
}

/// What a rollback reports: the revisions, images and, as DCAE's rollback does, the replica
/// counts it settled at (`null` in a plan).
fn rolled_back(before: &Option<Status>, after: &Option<Status>, output: Vec<String>) -> Value {
    json!({"revisionBefore": revision(before), "revision": revision(after), "images": images(after),
           "replicas": after.as_ref().map(|s| s.desired), "readyReplicas": after.as_ref().map(|s| s.ready),
           "output": output})
}

/// The last `TAIL_BYTES` of `b`, on a character boundary, control characters escaped.
fn tail(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(b);
    let mut start = text.len().saturating_sub(TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].replace('\0', "\\0")
}

/// Run `command` in every running pod (a few at a time), one result per pod. A pod whose
/// command fails fails the operation, naming the pod; the others' results are still returned.
pub async fn exec(c: &Ctx<'_>, container: Option<&str>, command: &[String]) -> Result<(Value, Option<Error>)> {
    use futures::stream::{self, StreamExt};
    let s = c.status().await?;
    // In a plan the selector is the one `deploy` sets, and the pods are a placeholder.
    let selector =
        s.as_ref().map(Status::selector_text).unwrap_or_else(|| format!("{}={}", manifest::NAME_LABEL, c.name));
    let pods: Vec<Pod> = c.rt.read(c.m, &RunningPods { ns: c.ns, selector: &selector }).await?;
    if let (Some(s), Some(want)) = (&s, container) {
        if !s.images.iter().any(|(n, _)| n == want) {
            let have: Vec<&str> = s.images.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::input(
                "arguments",
                "--container",
                format!("{} has no container '{want}' (containers: {})", c.subject(), have.join(", ")),
            ));
        }
    }
    if pods.is_empty() {
        return Err(Error::input("state", c.subject(), "has no running pod to run the command in"));
    }
    c.rt.phase(&format!("exec in {} pod(s) of {}", pods.len(), c.subject()), &[c.m], false);
    let results: Vec<Result<(Pod, crate::transport::ExecOutput, String)>> = stream::iter(pods)
        .map(|p| async move {
            let script = kubectl::exec(c.ns, &p.name, container, command)?;
            let cmd = c.cmd(script).with_capture(64 << 10);
            let shown = cmd.display().to_string();
            let out = c.rt.exec_status(c.m, cmd).await?;
            Ok((p, out, shown))
        })
        .buffered(8)
        .collect()
        .await;
    let mut rows = Vec::new();
    let mut first_failure = None;
    for r in results {
        let (p, out, shown) = r?;
        let ok = out.success();
        if !ok && first_failure.is_none() {
            first_failure = Some(Error::Remote {
                node: c.m.host.name.clone(),
                command: shown,
                status: format!("{} in pod {}", out.status_text(), p.name),
                stderr_tail: out.stderr_tail.clone(),
            });
        }
        c.rt.ev(c.m).emit(EventKind::Status { subject: format!("pod {}", p.name), status: out.status_text() });
        rows.push(json!({"pod": p.name, "node": p.node, "ok": ok, "exitCode": out.code,
                         "stdoutTail": tail(&out.stdout), "stderrTail": out.stderr_tail}));
    }
    let failed = rows.iter().filter(|r| r["ok"] == false).count();
    Ok((json!({"pods": rows, "failedCount": failed}), first_failure))
}

/// Poll the status every `interval` until available, at most `timeout`; each poll is reported
/// as a status event.
pub async fn wait(c: &Ctx<'_>, interval: Duration, timeout: Duration) -> Result<Value> {
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        polls += 1;
        let Some(s) = c.status().await? else {
            return Ok(json!({"available": Value::Null, "planned": true}));
        };
        c.rt.ev(c.m).emit(EventKind::Status { subject: c.subject(), status: s.summary() });
        if s.is_available() {
            return Ok(
                json!({"available": true, "polls": polls, "seconds": start.elapsed().as_secs_f64(), "status": s}),
            );
        }
        if start.elapsed() + interval > timeout {
            return Err(Error::Remote {
                node: c.m.host.name.clone(),
                command: kubectl::get(c.kind, c.ns, c.name)?,
                status: format!("{} not available after {}s", c.subject(), start.elapsed().as_secs()),
                stderr_tail: format!("{} ({polls} polls every {}s)", s.summary(), interval.as_secs_f64()),
            });
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollback_reports_the_replica_count_it_settled_at() {
        let st = |rev: u64, ready: u64| Status {
            desired: 3,
            updated: 3,
            ready,
            available: ready,
            observed: true,
            revision: Some(rev),
            images: vec![("web".into(), "web:1".into())],
            selector: Default::default(),
        };
        let v = rolled_back(&Some(st(2, 3)), &Some(st(3, 3)), vec!["rolled back".into()]);
        assert_eq!((v["replicas"].as_u64(), v["readyReplicas"].as_u64()), (Some(3), Some(3)), "{v}");
        assert_eq!((v["revisionBefore"].as_u64(), v["revision"].as_u64()), (Some(2), Some(3)));
        assert!(rolled_back(&None, &None, vec![])["replicas"].is_null(), "a plan knows no count");
    }
}
