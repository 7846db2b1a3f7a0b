//! `cnf upgrade`: a release to a new chart, version or values; prints the new revision. Its
//! check (the operator's words, none of which may reach Helm as an option or a local
//! directory) and its steps side by side.

use serde_json::{json, Value};

use crate::cnf::helm_cmd::{Chart, Values};
use crate::cnf::ops::{cmd_timeout, describe, Ctx, Record};
use crate::cnf::params::{ChartSource, Release};
use crate::cnf::{check_arg, names};
use crate::error::{Error, Result};
use crate::redact::Redact;

/// `--release`, `--chart`, `--version` and every `--set`, before anything connects.
pub fn check_args(
    release: &str,
    chart: Option<&str>,
    version: Option<&str>,
    set: &[String],
    instance: &str,
) -> Result<()> {
    check_arg("--release", names::release(release))?;
    if let Some(c) = chart {
        check_arg("--chart", names::chart_ref(c, false, instance))?;
    }
    if let Some(v) = version {
        check_arg("--version", names::version(v))?;
    }
    for x in set {
        check_arg("--set", names::set_item(x))?;
    }
    Ok(())
}

/// `helm upgrade` of `release` (to `chart`, else its recorded chart), then record it.
pub async fn run(
    c: &Ctx<'_>,
    rec: &mut Record<'_>,
    release: &str,
    chart: Option<String>,
    version: Option<&str>,
    set: &[String],
    reuse_values: bool,
) -> Result<Value> {
    let ns = c.params.namespace.as_str();
    let recorded = rec.st.releases.get(release).map(|r| r.chart.clone());
    // `REPO/CHART` naming one of this CNF's repositories means the instance's own copy of it.
    let chart = chart.map(|ch| match ch.split_once('/') {
        Some((repo, name))
            if c.params
                .releases
                .iter()
                .any(|r| matches!(&r.source, ChartSource::External { repo: x, .. } if x == repo)) =>
        {
            format!("{}/{name}", names::instance_repo(c.instance, repo))
        }
        _ => ch,
    });
    let chart = chart.or(recorded).ok_or_else(|| {
        Error::input("arguments", "--chart", format!("release {release} has no recorded chart; pass --chart"))
    })?;
    let target = Chart { release, chart: &chart, namespace: ns, version };
    let cmd = c.s.helm.upgrade(&target, &Values { set, ..Values::default() }, reuse_values, &c.opts)?;
    c.s.run_watched(cmd, cmd_timeout(c), release, ns, Redact::None).await?;
    let rel = c
        .params
        .releases
        .iter()
        .find(|r| r.name == release)
        .cloned()
        .unwrap_or(Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) });
    let rs = describe(c, &rel, &chart).await?;
    rec.release(release, &rs)?;
    Ok(json!({"release": release, "revision": rs.revision, "state": rs}))
}
