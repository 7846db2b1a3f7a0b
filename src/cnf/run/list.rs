//! `cnf list`: the releases of `--namespace NS`, or of every namespace without it.

use serde_json::Value;

use crate::cnf::ops::Ctx;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, namespace: Option<&str>) -> Result<Value> {
    let s = c.s;
    s.json(s.helm.list(namespace)?, "the release list").await
}
