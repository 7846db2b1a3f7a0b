//! `cnf repo-remove NAME`: one repository off every master's cluster environment (OSM's
//! repo_remove). Idempotent: a master without it reports `absent` (Helm itself fails on a name
//! it does not have). A CNF's own `<instance>@<name>` repositories are its own to remove
//! (terminate); the name check refuses them before anything connects.

use serde_json::{json, Value};

use crate::cnf::run::repo_sync::instance_id_ok;
use crate::cnf::session::Session;
use crate::error::Result;
use crate::facts::helm::RepoList;
use crate::lifecycle::{all_ok, Node};

pub async fn run(s: &Session, name: &str) -> Result<Value> {
    let nodes = s.all();
    s.rt.phase("remove the repository on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| async move {
            s.ensure_env(n).await?;
            let have = s.rt.read(n, &RepoList { helm: &s.helm, instance_id_ok }).await?;
            let outcome = if have.contains_key(name) {
                s.rt.exec(n, s.rt.root_cmd(n, s.helm.repo_remove(name)?, s.rt.timeouts.command)).await?;
                "removed"
            } else {
                "absent"
            };
            Ok(json!({"master": n.name(), "repository": name, "outcome": outcome}))
        })
        .await;
    Ok(Value::Array(all_ok(res)?))
}
