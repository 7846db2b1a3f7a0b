//! `cnf repo-add NAME=URL`: one repository on every master, in the cluster's Helm environment
//! (OSM's repo_add); the masters' other repositories are left alone (`repo-sync` makes the set
//! exact). Checked like `repo-sync`'s (`repo_sync::wanted`) before anything connects.

use serde_json::{json, Value};

use crate::cnf::ops::add_repo_as;
use crate::cnf::run::repo_sync::WantRepo;
use crate::cnf::session::Session;
use crate::error::Result;
use crate::lifecycle::{all_ok, Node};

/// Add (or re-point: `--force-update`) `name` on every master; its URL is shown without
/// userinfo, whose credentials reach Helm on stdin.
pub async fn run(s: &Session, instance: &str, name: &str, want: &WantRepo) -> Result<Value> {
    let nodes = s.all();
    s.rt.phase("add the repository on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| async move {
            s.ensure_env(n).await?;
            let creds = want.creds.as_ref().map(|(u, p)| (u.as_str(), p));
            add_repo_as(s, n, instance, name, &want.url, creds, None).await?;
            Ok(json!({"master": n.name(), "repository": name, "url": want.url}))
        })
        .await;
    Ok(Value::Array(all_ok(res)?))
}
