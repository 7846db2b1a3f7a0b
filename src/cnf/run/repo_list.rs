//! `cnf repo-list`: the active master's repositories, every name checked as it is read.

use serde_json::{json, Value};

use crate::cnf::ops::Ctx;
use crate::cnf::run::repo_sync::instance_id_ok;
use crate::error::Result;
use crate::facts::helm::RepoList;

pub async fn run(c: &Ctx<'_>) -> Result<Value> {
    let s = c.s;
    let m = s.master();
    let have = s.rt.read(m, &RepoList { helm: &s.helm, instance_id_ok }).await?;
    Ok(Value::Array(have.into_iter().map(|(name, url)| json!({"name": name, "url": url})).collect()))
}
