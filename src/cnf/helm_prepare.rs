//! The node program that readies a master for a CNF in one exec (`src/remote/helm_prepare.sh`):
//! Helm's version, the cluster's Helm environment, the instance's local charts, its
//! repositories, and on the master Helm runs on the releases too (`helm_apply`) when their
//! command lines are known before Helm's version is: its command line and its output read back.
//! Pure.
//!
//! Why one program: at the edge each round trip costs more than anything the master does, and
//! these steps used to be one round trip each (version, environment, chart directory, extract,
//! repository add, update), per master.

use crate::cnf::cluster_env::HelmEnv;
use crate::cnf::helm_apply::{self, Applied, Item};
use crate::cnf::helm_cmd::parse_version;
use crate::error::Result;
use crate::kube::kubeconfig::ADMIN_CONF;
use crate::remote;

/// A local chart: the archive as uploaded into the run directory, its file name in the chart
/// directory, and the directory it extracts to.
#[derive(Clone, Debug)]
pub struct LocalChart {
    pub uploaded: String,
    pub archive: String,
    pub chart: String,
}

/// A repository of the instance; `user` and `password_file` (a 0600 file uploaded beside the
/// run) together or not at all; `ca_file` kept on the master.
#[derive(Clone, Debug)]
pub struct Repo {
    pub name: String,
    pub url: String,
    pub user: Option<String>,
    pub password_file: Option<String>,
    pub ca_file: Option<String>,
}

/// What one master is to do.
pub struct Plan<'a> {
    /// The cluster's Helm environment, which the commands run with; made on the master when
    /// `make_env` (a reset that uninstalls nothing must not make what it is about to remove).
    pub env: &'a HelmEnv,
    pub make_env: bool,
    pub chart_dir: &'a str,
    pub owner: &'a str,
    pub charts: &'a [LocalChart],
    pub repos: &'a [Repo],
    /// The releases (on the master Helm runs on), and the Helm major version their command lines
    /// are for (None: any).
    pub releases: &'a [Item],
    pub major: Option<u32>,
}

/// The program's command line, after the environment's exports.
pub fn command(p: &Plan) -> Result<String> {
    let (dir, src) = match p.env {
        _ if !p.make_env => (String::new(), String::new()),
        HelmEnv::Legacy => (String::new(), String::new()),
        HelmEnv::Cluster(_) => (p.env.dir().unwrap_or_default(), ADMIN_CONF.to_string()),
        HelmEnv::Local { dir, .. } => (dir.clone(), String::new()),
    };
    let mut args: Vec<String> = vec![
        p.major.map(|m| m.to_string()).unwrap_or_default(),
        dir,
        src,
        p.chart_dir.to_string(),
        p.owner.to_string(),
        p.charts.len().to_string(),
    ];
    for c in p.charts {
        args.extend([c.uploaded.clone(), c.archive.clone(), c.chart.clone()]);
    }
    args.push(p.repos.len().to_string());
    for r in p.repos {
        let opt = |o: &Option<String>| o.clone().unwrap_or_default();
        args.extend([r.name.clone(), r.url.clone(), opt(&r.user), opt(&r.password_file), opt(&r.ca_file)]);
    }
    args.extend(helm_apply::args(p.releases));
    Ok(format!("{}{}", p.env.prefix(), remote::HELM_PREPARE.command(&args)?))
}

/// What a master said: its Helm major version, and the releases it applied (None: it applied
/// none, left to the driver).
#[derive(Debug)]
pub struct Prepared {
    pub major: u32,
    pub applied: Option<Vec<Applied>>,
}

/// The program's output: the version line, then nothing, `later`, or the releases' records
/// (checked as `helm_apply::parse` checks them, for `expect`).
pub fn parse(out: &[u8], expect: &[(&str, &str)]) -> std::result::Result<Prepared, String> {
    let nl = out.iter().position(|&b| b == b'\n').ok_or("no Helm version line")?;
    let line = std::str::from_utf8(&out[..nl]).map_err(|_| "a Helm version line that is not UTF-8")?;
    let v = line.strip_prefix("helm-version: ").ok_or("no Helm version line")?;
    let major = parse_version(v).ok_or_else(|| format!("no Helm 3 or later in {:?}", crate::error::excerpt(v)))?;
    let rest = &out[nl + 1..];
    let applied = if rest.is_empty() || rest == b"@@mgmt-driver later - - 0\n\n" {
        None
    } else {
        Some(helm_apply::parse(rest, expect)?)
    };
    Ok(Prepared { major, applied })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_then_nothing_later_or_the_releases() {
        let p = parse(b"helm-version: v4.1.4+g05fa379\n", &[]).unwrap();
        assert_eq!((p.major, p.applied.is_none()), (4, true));
        let p = parse(b"helm-version: v3.17.3+g1\n@@mgmt-driver later - - 0\n\n", &[("a", "n")]).unwrap();
        assert_eq!((p.major, p.applied.is_none()), (3, true));
        let rec = "@@mgmt-driver status a absent/0 0\n\n@@mgmt-driver fail a install:1 1\nx\n";
        let p = parse(format!("helm-version: v3.17.3\n{rec}").as_bytes(), &[("a", "n")]).unwrap();
        assert_eq!(p.applied.unwrap().len(), 1);
        for bad in ["", "v3.1\n", "helm-version: v2.17.0\n", "helm-version: v3.1\ngarbage\n"] {
            assert!(parse(bad.as_bytes(), &[("a", "n")]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_value_is_an_argument_and_the_label_shows_them() {
        let env = HelmEnv::cluster("east").unwrap();
        let repos = [Repo {
            name: "i@r".into(),
            url: "http://h/c".into(),
            user: Some("u".into()),
            password_file: Some(".mgmt-driver/run/i/repo-i@r.pw".into()),
            ca_file: None,
        }];
        let plan = Plan {
            env: &env,
            make_env: true,
            chart_dir: "/var/tacker/helm/i",
            owner: "root",
            charts: &[],
            repos: &repos,
            releases: &[],
            major: None,
        };
        let cmd = command(&plan).unwrap();
        assert!(cmd.starts_with(&env.prefix()), "Helm runs in the cluster's environment: {cmd}");
        assert!(helm_apply::command(&env.prefix(), &[]).unwrap().starts_with(&env.prefix()));
        assert_eq!(
            remote::label(&cmd),
            Some(
                "helm_prepare.sh '' /var/lib/mgmt-driver/helm/east /etc/kubernetes/admin.conf /var/tacker/helm/i \
                 root 0 1 i@r http://h/c u .mgmt-driver/run/i/repo-i@r.pw ''"
            )
        );
    }

    /// The program on a real `sh` with a stand-in `helm` (`version` prints `$MAJOR`'s, `repo
    /// add` logs its stdin, everything logs its arguments): one exec makes the environment,
    /// extracts the chart, adds the repository with the password from its file (then gone), and
    /// applies the releases only for the Helm their command lines are for.
    #[test]
    fn one_exec_prepares_a_master_and_applies_only_for_its_helm() {
        let t = tempfile::tempdir().unwrap();
        let p = |x: &str| t.path().join(x).display().to_string();
        std::fs::create_dir_all(t.path().join("bin")).unwrap();
        std::fs::write(
            t.path().join("bin/helm"),
            "#!/bin/sh\necho \"$*\" >>\"$STATE/log\"\ncase $1 in\nversion) echo \"v$MAJOR.1.0+g1\" ;;\n\
             repo) if [ \"$2\" = add ]; then sed 's/^/stdin: /' >>\"$STATE/log\"; fi ;;\n\
             status) echo 'Error: release: not found' >&2; exit 1 ;;\n\
             install) echo '{\"name\":\"a\",\"namespace\":\"cnf\",\"info\":{\"status\":\"deployed\"},\"version\":1}' ;;\nesac\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(t.path().join("bin/helm"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(t.path().join("src/c/templates")).unwrap();
        std::fs::write(t.path().join("src/c/Chart.yaml"), "name: c\n").unwrap();
        let tar = std::process::Command::new("tar")
            .args(["-czf", &p("up-c-1.0.tgz"), "-C", &p("src"), "c"])
            .status()
            .unwrap();
        assert!(tar.success());
        let me = String::from_utf8(std::process::Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        let env = HelmEnv::Local { id: "e".into(), dir: p("env"), kubeconfig: p("kc") };
        let charts = [LocalChart { uploaded: p("up-c-1.0.tgz"), archive: "c-1.0.tgz".into(), chart: "c".into() }];
        std::fs::write(t.path().join("pw"), "s3cret\n").unwrap();
        let repos = [Repo {
            name: "i@r".into(),
            url: "http://h/c".into(),
            user: Some("u".into()),
            password_file: Some(p("pw")),
            ca_file: None,
        }];
        let words: Vec<String> =
            ["--namespace", "cnf", "-o", "json", "--", "a", "i@r/c"].iter().map(|w| w.to_string()).collect();
        let items = [Item { release: "a".into(), namespace: "cnf".into(), words, files: vec![] }];
        let run = |major: &str, want: Option<u32>| {
            let plan = Plan {
                env: &env,
                make_env: true,
                chart_dir: &p("charts"),
                owner: me.trim(),
                charts: &charts,
                repos: &repos,
                releases: &items,
                major: want,
            };
            let path = format!("{}:{}", t.path().join("bin").display(), std::env::var("PATH").unwrap());
            std::process::Command::new("sh")
                .arg("-c")
                .arg(command(&plan).unwrap())
                .env("PATH", path)
                .env("STATE", t.path())
                .env("MAJOR", major)
                .output()
                .unwrap()
        };
        let o = run("4", Some(3));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = parse(&o.stdout, &[("a", "cnf")]).unwrap();
        assert_eq!((got.major, got.applied.is_none()), (4, true), "lines for Helm 3 wait for the driver");
        assert!(t.path().join("env/cache").is_dir() && t.path().join("charts/c/Chart.yaml").is_file());
        assert!(!t.path().join("pw").exists() && !t.path().join("up-c-1.0.tgz").exists());
        let log = std::fs::read_to_string(t.path().join("log")).unwrap();
        assert!(
            log.contains("repo add --force-update --username u --password-stdin -- i@r http://h/c\nstdin: s3cret"),
            "{log}"
        );
        assert!(log.contains("repo update -- i@r") && !log.contains("install"), "{log}");
        // Without a bound (no --atomic), or for the Helm found, the releases are applied too.
        std::fs::write(t.path().join("pw"), "s3cret\n").unwrap();
        assert!(tar_again(&p("up-c-1.0.tgz"), &p("src")));
        let o = run("3", Some(3));
        let got = parse(&o.stdout, &[("a", "cnf")]).unwrap();
        assert_eq!(got.applied.unwrap()[0].result.as_ref().unwrap().verb, "install");
        // A missing Helm is exit 127, before anything.
        let o = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command(&Plan { major: None, ..plan_none(&env) }).unwrap())
            .env("PATH", "/nonexistent")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(127));
    }

    fn tar_again(to: &str, from: &str) -> bool {
        std::process::Command::new("tar").args(["-czf", to, "-C", from, "c"]).status().unwrap().success()
    }

    fn plan_none(env: &HelmEnv) -> Plan<'_> {
        Plan { env, make_env: false, chart_dir: "", owner: "", charts: &[], repos: &[], releases: &[], major: None }
    }
}
