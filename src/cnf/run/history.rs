//! `cnf history`: `helm history` of a release.

use serde_json::Value;

use crate::cnf::ops::Ctx;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, release: &str) -> Result<Value> {
    let s = c.s;
    s.json(s.helm.history(release, &c.params.namespace)?, "the release history").await
}
