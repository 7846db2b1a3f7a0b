//! `cnf values`: `helm get values` of a release (`--all`: with the chart's defaults), the
//! request's secret values masked.

use serde_json::Value;

use crate::cnf::ops::Ctx;
use crate::cnf::params::secret_keys;
use crate::cnf::secret_values;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, release: &str, all: bool) -> Result<Value> {
    let s = c.s;
    let mut v = s.json(s.helm.get_values(release, &c.params.namespace, all)?, "the release values").await?;
    secret_values::mask(&mut v, secret_keys(c.params, release));
    Ok(v)
}
