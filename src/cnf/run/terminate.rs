//! `cnf terminate`: uninstall the CNF's releases, remove its repositories and chart
//! directories on every master, and forget its record. It needs nothing beyond the record.

use serde_json::{json, Value};

use crate::cnf::helm_cmd as hc;
use crate::cnf::names;
use crate::cnf::ops::{cmd_timeout, cnf_releases, Ctx, Record};
use crate::cnf::params::ChartSource;
use crate::error::Result;
use crate::lifecycle::all_ok;

/// Terminate the CNF's releases (the request's, else the recorded ones), then its record.
pub async fn run(c: &Ctx<'_>, rec: &Record<'_>) -> Result<Value> {
    let out = uninstall(c, &cnf_releases(c.params, &rec.st)).await?;
    rec.remove()?;
    Ok(json!({"releases": out}))
}

/// Uninstall every release (namespace aware, waiting), then on every master remove the
/// repositories of external charts and the instance's chart directory (terminate's steps, and
/// reset's with --uninstall).
pub async fn uninstall(c: &Ctx<'_>, releases: &[String]) -> Result<Value> {
    let s = c.s;
    let ns = &c.params.namespace;
    let mut gone = Vec::new();
    for r in releases {
        // A plan shows the uninstall of every release.
        if s.release(r, ns, Some(("deployed".into(), 0))).await?.is_none() {
            gone.push(json!({"release": r, "outcome": "already absent"}));
            continue;
        }
        s.run(s.helm.uninstall(r, ns, true)?, cmd_timeout(c)).await?;
        gone.push(json!({"release": r, "outcome": "uninstalled"}));
    }
    let nodes = s.all();
    s.rt.phase("remove repositories and charts on every master", &nodes, true);
    let repos: Vec<String> = c
        .params
        .releases
        .iter()
        .filter_map(|r| match &r.source {
            ChartSource::External { repo, .. } => Some(names::instance_repo(c.instance, repo)),
            _ => None,
        })
        .collect();
    let res =
        s.rt.each(&nodes, |n| {
            let repos = &repos;
            async move {
                let t = s.rt.timeouts.command;
                for repo in repos {
                    let rm = format!("{} || true", s.helm.repo_remove(repo)?);
                    s.rt.exec(n, s.rt.root_cmd(n, rm, t)).await?;
                }
                s.rt.exec(n, s.rt.root_cmd(n, hc::remove_chart_dir(c.instance)?, t)).await.map(|_| ())
            }
        })
        .await;
    all_ok(res)?;
    Ok(Value::Array(gone))
}
