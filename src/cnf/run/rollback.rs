//! `cnf rollback`: a release back to `--revision`, or to the previous one, then recorded. Its
//! only input, the release name, is checked with the other operations' (`run::check_args`).

use serde_json::{json, Value};

use crate::cnf::ops::{cmd_timeout, describe, Ctx, Record};
use crate::cnf::params::{ChartSource, Release};
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, rec: &mut Record<'_>, release: &str, revision: Option<u32>) -> Result<Value> {
    let s = c.s;
    s.run(s.helm.rollback(release, &c.params.namespace, revision, &c.opts)?, cmd_timeout(c)).await?;
    let chart = rec.st.releases.get(release).map(|r| r.chart.clone()).unwrap_or_default();
    let rel = Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) };
    let rs = describe(c, &rel, &chart).await?;
    rec.release(release, &rs)?;
    Ok(json!({"release": release, "revision": rs.revision, "state": rs}))
}
