//! `cnf terminate`: uninstall the CNF's releases, remove its repositories and chart
//! directories on every master, and forget its record. It needs nothing beyond the record.

use serde_json::{json, Value};

use crate::cnf::helm_remove;
use crate::cnf::names;
use crate::cnf::ops::{cmd_timeout, cnf_releases, Ctx, Record};
use crate::cnf::params::ChartSource;
use crate::error::{Error, Result};
use crate::lifecycle::{all_ok, Node, Target};

/// Terminate the CNF's releases (the request's, else the recorded ones), then its record.
pub async fn run(c: &Ctx<'_>, rec: &Record<'_>) -> Result<Value> {
    let out = uninstall(c, &cnf_releases(c.params, &rec.st)).await?;
    rec.remove()?;
    Ok(json!({"releases": out}))
}

/// Uninstall every release (namespace aware, waiting), then on every master remove the
/// repositories of external charts and the instance's chart directory (terminate's steps, and
/// reset's with --uninstall). One exec on the master Helm runs on (`src/remote/helm_remove.sh`:
/// one Helm process per release, then its repositories and charts), then one on each other
/// master at once; a release that fails to go stops it before anything is removed.
pub async fn uninstall(c: &Ctx<'_>, releases: &[String]) -> Result<Value> {
    let s = c.s;
    let ns = &c.params.namespace;
    let m = s.master();
    let repos: Vec<String> = c
        .params
        .releases
        .iter()
        .filter_map(|r| match &r.source {
            ChartSource::External { repo, .. } => Some(names::instance_repo(c.instance, repo)),
            _ => None,
        })
        .collect();
    let chart_dir = names::chart_dir(c.instance);
    let prefix = s.helm.env.prefix();
    let pairs: Vec<(String, String)> = releases.iter().map(|r| (r.clone(), ns.clone())).collect();
    s.rt.phase("uninstall the releases, then their repositories and charts", &[m], false);
    let cmd = helm_remove::command(&prefix, Some(&chart_dir), &repos, &pairs)?;
    let wait = s.rt.timeouts.command + cmd_timeout(c) * releases.len().max(1) as u32;
    let mut gone = Vec::new();
    match s.program(m, cmd, wait).await? {
        // A plan shows the uninstall of every release.
        None => gone.extend(releases.iter().map(|r| json!({"release": r, "outcome": "uninstalled"}))),
        Some((out, shown)) => {
            let names: Vec<&str> = releases.iter().map(String::as_str).collect();
            let got = helm_remove::parse(&out, &names)
                .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), &shown, "the releases removed", msg))?;
            for (r, outcome) in got {
                match outcome {
                    Ok(o) => gone.push(json!({"release": r, "outcome": o})),
                    Err(f) => {
                        return Err(Error::Remote {
                            node: m.name().into(),
                            command: s.helm.uninstall(&r, ns, true)?,
                            status: format!("exit {}", f.code),
                            stderr_tail: format!("release {r}: {}", f.stderr_tail),
                        })
                    }
                }
            }
        }
    }
    let others: Vec<&Target> = s.all().into_iter().filter(|n| n.name() != m.name()).collect();
    s.rt.phase("remove repositories and charts on the other masters", &others, true);
    let res =
        s.rt.each(&others, |n| {
            let cmd = helm_remove::command(&prefix, Some(&chart_dir), &repos, &[]);
            async move { s.rt.exec(n, s.rt.root_cmd(n, cmd?, s.rt.timeouts.command)).await.map(|_| ()) }
        })
        .await;
    all_ok(res)?;
    Ok(Value::Array(gone))
}
