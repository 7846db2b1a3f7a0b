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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::cnf::run::testkit::{run_op, Fixture, M1, M2};
    use crate::cnf::Op;

    #[tokio::test]
    async fn one_repository_is_added_on_every_master_and_removed_again_idempotently() {
        let f = Fixture::new();
        let add = Op::RepoAdd { repo: "stable=http://bob:pw-in-url-3@192.0.2.7/charts".into() };
        let o = run_op(&f, add, "ops", None).await.unwrap();
        assert_eq!(o.result[1]["url"], "http://192.0.2.7/charts", "{}", o.result);
        for m in [M1, M2] {
            let execs = f.fake.execs(m).join("\n");
            assert!(execs.contains("--username bob --password-stdin -- stable http://192.0.2.7/charts <"), "{execs}");
            assert!(!execs.contains("pw-in-url-3") && !execs.contains("helm repo remove"), "{execs}");
        }
        f.fake.reply(None, "helm_repo_list.sh", r#"[{"name":"stable","url":"http://192.0.2.7/charts"}]"#);
        let o = run_op(&f, Op::RepoRemove { name: "stable".into() }, "ops", None).await.unwrap();
        assert_eq!(o.result[0], json!({"master": M1, "repository": "stable", "outcome": "removed"}));
        assert!(f.fake.execs(M2).join("\n").contains("helm repo remove -- stable"));
        f.fake.reply(None, "helm_repo_list.sh", "[]");
        let o = run_op(&f, Op::RepoRemove { name: "stable".into() }, "ops", None).await.unwrap();
        assert_eq!(o.result[1]["outcome"], "absent", "{}", o.result);
        for bad in [Op::RepoRemove { name: "cnf1@labrepo".into() }, Op::RepoAdd { repo: "x=file:///etc".into() }] {
            assert!(run_op(&f, bad, "ops", None).await.is_err());
        }
    }
}
