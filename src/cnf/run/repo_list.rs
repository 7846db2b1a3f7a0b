//! `cnf repo-list`: the active master's repositories, every name checked as it is read.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::cnf::ops::Ctx;
use crate::cnf::run::repo_sync::parse_repo_list;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>) -> Result<Value> {
    let s = c.s;
    let m = s.master();
    let cmd = s.rt.root_cmd(m, s.helm.repo_list(), s.rt.timeouts.command);
    let have = s.rt.fact(m, cmd, "the repository list", BTreeMap::new, parse_repo_list).await?;
    Ok(Value::Array(have.into_iter().map(|(name, url)| json!({"name": name, "url": url})).collect()))
}
