//! The node program that takes a CNF off a master in one exec (`src/remote/helm_remove.sh`):
//! its command line, and its records read back. Pure.
//!
//! Terminate used to be a round trip per Helm call (`helm status`, then `helm uninstall`, per
//! release) and per repository; now one Helm process per release, all in one exec on the master
//! Helm runs on, and one exec on each other master for its repositories and charts.

use crate::cnf::helm_apply::{records, Failure};
use crate::error::Result;
use crate::remote;

/// The program's command line, after the cluster's Helm environment (`prefix`): uninstall
/// `releases` (name, namespace) in order, then remove `repos` and `chart_dir` (None: keep).
pub fn command(
    prefix: &str,
    chart_dir: Option<&str>,
    repos: &[String],
    releases: &[(String, String)],
) -> Result<String> {
    let mut args = vec![chart_dir.unwrap_or_default().to_string(), repos.len().to_string()];
    args.extend(repos.iter().cloned());
    for (r, ns) in releases {
        args.extend([r.clone(), ns.clone()]);
    }
    Ok(format!("{prefix}{}", remote::HELM_REMOVE.command(&args)?))
}

/// What became of one release: `uninstalled`, `already absent`, or where the run stopped.
pub type Outcome = std::result::Result<&'static str, Failure>;

/// What became of each release the program reached, in order.
pub fn parse(out: &[u8], expect: &[&str]) -> std::result::Result<Vec<(String, Outcome)>, String> {
    let mut got = Vec::new();
    for r in records(out)? {
        if got.last().is_some_and(|(_, x): &(String, Outcome)| x.is_err()) {
            return Err("a record after the run stopped".into());
        }
        let want = *expect.get(got.len()).ok_or("more releases than it was given")?;
        if r.release != want {
            return Err(format!("a record for {} where {want} was next", crate::error::excerpt(r.release)));
        }
        let outcome = match (r.kind, r.word) {
            ("uninstalled", "-") => Ok("uninstalled"),
            ("absent", "-") => Ok("already absent"),
            ("fail", w) => {
                let code = w
                    .strip_prefix("uninstall:")
                    .and_then(|c| c.parse().ok())
                    .ok_or("a failure record without an exit status")?;
                Err(Failure {
                    step: "uninstall".into(),
                    code,
                    stderr_tail: String::from_utf8_lossy(r.body).into_owned(),
                })
            }
            (k, _) => return Err(format!("a record of kind {:?}", crate::error::excerpt(k))),
        };
        got.push((want.to_string(), outcome));
    }
    let stopped = got.last().is_some_and(|(_, x)| x.is_err());
    if !stopped && got.len() != expect.len() {
        return Err(format!("{} of {} releases reported", got.len(), expect.len()));
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_helm_process_per_release_then_repositories_and_charts_on_a_real_shell() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("bin")).unwrap();
        std::fs::create_dir_all(t.path().join("charts/c")).unwrap();
        std::fs::write(
            t.path().join("bin/helm"),
            "#!/bin/sh\necho \"$*\" >>\"$STATE/log\"\n\
             case \"$*\" in *' -- gone') echo 'Error: uninstall: Release not loaded: gone: release: not found' >&2; exit 1 ;;\n\
             *' -- bad') echo 'Error: timed out waiting' >&2; exit 1 ;; esac\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(t.path().join("bin/helm"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let charts = t.path().join("charts").display().to_string();
        let run = |rels: &[&str]| {
            let releases: Vec<(String, String)> = rels.iter().map(|r| (r.to_string(), "cnf".to_string())).collect();
            let cmd = command("", Some(&charts), &["i@r".into()], &releases).unwrap();
            let path = format!("{}:{}", t.path().join("bin").display(), std::env::var("PATH").unwrap());
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("PATH", path)
                .env("STATE", t.path())
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            parse(&o.stdout, rels).unwrap()
        };
        let got = run(&["a", "bad", "c"]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, Ok("uninstalled"));
        assert!(got[1].1.as_ref().unwrap_err().stderr_tail.contains("timed out"));
        assert!(t.path().join("charts/c").exists(), "a failed release stops the run before any removal");
        let got = run(&["a", "gone"]);
        assert_eq!((got[0].1.clone(), got[1].1.clone()), (Ok("uninstalled"), Ok("already absent")));
        let log = std::fs::read_to_string(t.path().join("log")).unwrap();
        assert!(log.ends_with("uninstall --namespace cnf --wait -- gone\nrepo remove -- i@r\n"), "{log}");
        assert!(!t.path().join("charts").exists());
        let e = parse(b"@@mgmt-driver uninstalled x - 0\n\n", &["a"]).unwrap_err();
        assert!(e.contains("where a was next"), "{e}");
        assert!(parse(b"", &["a"]).unwrap_err().contains("0 of 1"));
    }
}
