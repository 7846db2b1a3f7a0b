//! `cnf status`: `helm status` of a release, its user-supplied values masked.

use serde_json::Value;

use crate::cnf::ops::Ctx;
use crate::cnf::params::secret_keys;
use crate::cnf::secret_values;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, release: &str) -> Result<Value> {
    let s = c.s;
    let mut v = s.json(s.helm.status(release, &c.params.namespace)?, "the release status").await?;
    // `helm status -o json` carries the release's user-supplied values as `config`.
    if let Some(cfg) = v.get_mut("config") {
        secret_values::mask(cfg, secret_keys(c.params, release));
    }
    Ok(v)
}
