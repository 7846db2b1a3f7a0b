//! `cnf repo-sync --repo NAME=URL...`: make every master's repositories exactly these (OSM's
//! synchronize_repos). Its check (`wanted`: names and URLs, credentials split off, before
//! anything connects) and its steps side by side; a CNF's own `<instance>@<name>`
//! repositories are left to their CNF.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::cnf::names;
use crate::cnf::ops::add_repo_as;
use crate::cnf::session::Session;
use crate::error::{Error, Result};
use crate::facts::helm::RepoList;
use crate::lifecycle::{all_ok, Node};

/// `repo-sync --repo NAME=URL ...`: names checked like a request's, URLs http(s) with any
/// userinfo split off into credentials; a name given twice is refused.
pub fn wanted(repos: &[String]) -> Result<BTreeMap<String, WantRepo>> {
    let mut want = BTreeMap::new();
    for r in repos {
        let masked = crate::url_mask::mask_userinfo(r);
        let (n, u) = r
            .split_once('=')
            .ok_or_else(|| Error::input("arguments", "--repo", format!("'{masked}' is not NAME=URL")))?;
        names::repo(n).map_err(|m| Error::input("arguments", "--repo", m))?;
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return Err(Error::input("arguments", "--repo", format!("'{masked}': the URL must be http(s)://")));
        }
        let (url, creds) = names::url(u).map_err(|m| Error::input("arguments", "--repo", m))?;
        let creds = creds.map(|(user, pw)| (user, crate::secret::Secret::new(pw)));
        if want.insert(n.to_string(), WantRepo { url, creds }).is_some() {
            return Err(Error::input("arguments", "--repo", format!("'{n}' is given twice")));
        }
    }
    Ok(want)
}

/// One repository `repo-sync` wants: its name, its URL without userinfo, and the userinfo's
/// credentials (they go to Helm as `--username`/`--password-stdin`).
pub struct WantRepo {
    pub url: String,
    pub creds: Option<(String, crate::secret::Secret)>,
}

/// Whether `id` is an instance id as the state store takes one: the `<id>` of a CNF's own
/// `<id>@<name>` repositories is checked by that rule when a master's list is read.
pub fn instance_id_ok(id: &str) -> bool {
    crate::lifecycle::state::check_instance_id(id).is_ok()
}

/// Make the repository set of every master equal `want` (OSM's synchronize_repos): add missing,
/// re-add when the URL changed, remove extras (but `stable` and the CNF instances' own
/// `<id>@<name>` repositories, which their CNFs manage). Reports what changed per master.
pub async fn run(s: &Session, instance: &str, want: &BTreeMap<String, WantRepo>) -> Result<Value> {
    let nodes = s.all();
    s.rt.phase("repo sync on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| async move {
            let t = s.rt.timeouts.command;
            s.ensure_env(n).await?;
            let have = s.rt.read(n, &RepoList { helm: &s.helm, instance_id_ok }).await?;
            let (mut added, mut updated, mut removed) = (vec![], vec![], vec![]);
            for (name, w) in want {
                match have.get(name) {
                    Some(u) if u == w.url.trim_end_matches('/') && w.creds.is_none() => continue,
                    Some(_) => updated.push(name.clone()),
                    None => added.push(name.clone()),
                }
                let creds = w.creds.as_ref().map(|(u, p)| (u.as_str(), p));
                add_repo_as(s, n, instance, name, &w.url, creds, None).await?;
            }
            let extra = have.keys().filter(|k| !want.contains_key(*k) && k.as_str() != "stable");
            for name in extra.filter(|k| !names::is_instance_repo(k)) {
                s.rt.exec(n, s.rt.root_cmd(n, s.helm.repo_remove(name)?, t)).await?;
                removed.push(name.clone());
            }
            Ok(json!({"master": n.name(), "added": added, "updated": updated, "removed": removed}))
        })
        .await;
    Ok(Value::Array(all_ok(res)?))
}
