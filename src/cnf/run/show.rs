//! `cnf show values|readme|chart|all CHART [--repo URL] [--version V]`: a chart's files as
//! Helm shows them. Its check (what to show, the chart reference, a repository URL without
//! credentials) and its step side by side.

use serde_json::Value;

use crate::cnf::ops::{own_chart, Ctx};
use crate::cnf::{check_arg, names};
use crate::error::{Error, Result};

/// WHAT, CHART, `--repo` and `--version`, before anything connects: CHART is REPO/CHART or a
/// URL, or a bare chart name with `--repo` (an http(s) URL without credentials: a private
/// repository is added with repo-sync).
pub fn check_args(what: &str, chart: &str, repo: Option<&str>, version: Option<&str>, instance: &str) -> Result<()> {
    if !["values", "readme", "chart", "all"].contains(&what) {
        return Err(Error::input(
            "arguments",
            "WHAT",
            format!("'{}': values, readme, chart or all", crate::error::excerpt(what)),
        ));
    }
    check_arg("CHART", names::chart_ref(chart, repo.is_some(), instance))?;
    if let Some(r) = repo {
        let (_, creds) = names::url(r).map_err(|m| Error::input("arguments", "--repo", m))?;
        if creds.is_some() || r.starts_with("oci://") {
            return Err(Error::input(
                "arguments",
                "--repo",
                format!(
                    "'{}': an http(s):// URL without credentials (add a private repository with repo-sync)",
                    crate::url_mask::mask_userinfo(r)
                ),
            ));
        }
    }
    if let Some(v) = version {
        check_arg("--version", names::version(v))?;
    }
    Ok(())
}

pub async fn run(c: &Ctx<'_>, what: &str, chart: &str, repo: Option<&str>, version: Option<&str>) -> Result<Value> {
    let s = c.s;
    // A repository of the CNF named as its request did (`labrepo/nginx`) is the instance's copy.
    let chart = if repo.is_none() { own_chart(c, chart) } else { chart.to_string() };
    let cmd = s.helm.show(what, &chart, repo, version)?;
    Ok(Value::String(s.text(cmd, s.rt.timeouts.command).await?))
}

#[cfg(test)]
mod tests {
    use crate::cnf::run::testkit::{run_op, Fixture, M1};
    use crate::cnf::Op;

    #[tokio::test]
    async fn show_finds_a_cnfs_repository_by_the_name_its_request_gave() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let show = |chart: &str| Op::Show { what: "values".into(), chart: chart.into(), repo: None, version: None };
        run_op(&f, show("labrepo/nginxlab"), "cnf1", None).await.unwrap();
        let execs = f.fake.execs(M1).join("\n");
        assert!(execs.contains("helm show values -- cnf1@labrepo/nginxlab"), "{execs}");
        // A repository the CNF does not have is the masters' own (added with repo-add).
        run_op(&f, show("stable/nginx"), "cnf1", None).await.unwrap();
        assert!(f.fake.execs(M1).join("\n").contains("helm show values -- stable/nginx"));
    }
}
