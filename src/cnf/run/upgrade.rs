//! `cnf upgrade`: a release to a new chart, version or values; prints the new revision. Its
//! check (the operator's words, none of which may reach Helm as an option or a local
//! directory) and its steps side by side.

use serde_json::{json, Value};

use crate::cnf::helm_cmd::{Chart, Values};
use crate::cnf::ops::{cmd_timeout, describe, own_chart, remove_files, upload_values, Ctx, Record};
use crate::cnf::params::{ChartSource, Release};
use crate::cnf::values_file::ValuesFile;
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
    values: &[ValuesFile],
) -> Result<Value> {
    let ns = c.params.namespace.as_str();
    let recorded = rec.st.releases.get(release).map(|r| r.chart.clone());
    let chart = chart.map(|ch| own_chart(c, &ch));
    let chart = chart.or(recorded).ok_or_else(|| {
        Error::input("arguments", "--chart", format!("release {release} has no recorded chart; pass --chart"))
    })?;
    let target = Chart { release, chart: &chart, namespace: ns, version };
    let files = upload_values(c, release, values).await?;
    let vals = Values { set, files: &files, ..Values::default() };
    let cmd = c.s.helm.upgrade(&target, &vals, reuse_values, &c.opts)?;
    // A values file may hold passwords, which chart NOTES may print: Helm's output is hidden then.
    let redact = if files.is_empty() { Redact::None } else { Redact::All };
    let res = c.s.run_watched(cmd, cmd_timeout(c), release, ns, redact).await;
    remove_files(c, &files).await?;
    res?;
    let rel = c
        .params
        .releases
        .iter()
        .find(|r| r.name == release)
        .cloned()
        .unwrap_or(Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) });
    let mut rs = describe(c, &rel, &chart).await?;
    if !values.is_empty() {
        // The operator's files may hold secrets under any secret-looking key.
        rs.values = crate::secret::masked(&rs.values);
    }
    rec.release(release, &rs)?;
    Ok(json!({"release": release, "revision": rs.revision, "state": rs}))
}
