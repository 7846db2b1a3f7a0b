//! Helm command lines, per major version (3 or 4), as the node's shell receives them. Pure.
//! Every value is one quoted argument: a `helmparameter` of `a=b; touch /tmp/pwned` reaches Helm
//! as the literal `--set 'a=b; touch /tmp/pwned'` (Tacker pasted it into the shell).
//! Positional words (release, chart, repository names) come after `--`, so that even a name that
//! slipped past `names` could never be read as an option: Helm 3 and 4 both stop reading
//! options there (checked with the real binaries: `helm show chart -- -x` reports a chart
//! named `-x`).

use crate::cnf::cluster_env::HelmEnv;

use crate::error::Result;
use crate::quote::{join, quote};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Helm {
    pub major: u32,
    /// The cluster's Helm environment every command runs with (`cluster_env`).
    pub env: HelmEnv,
}

/// What `helm version --short` printed → the major version: 3 or later (Helm 2 took other
/// command lines; a version we cannot read is not guessed).
pub fn parse_version(out: &str) -> Option<u32> {
    let v = out.lines().map(str::trim).find(|l| l.starts_with('v'))?;
    v[1..].split('.').next()?.parse().ok().filter(|m| (3..100).contains(m))
}

/// Which release, from which chart, where.
#[derive(Clone, Copy, Debug)]
pub struct Chart<'a> {
    pub release: &'a str,
    pub chart: &'a str,
    pub namespace: &'a str,
    pub version: Option<&'a str>,
}

/// The values of an install or upgrade: `--set` items, `--set-file KEY=FILE` items (secret
/// values, from 0600 files on the master) and values files.
#[derive(Clone, Copy, Debug, Default)]
pub struct Values<'a> {
    pub set: &'a [String],
    pub set_files: &'a [String],
    pub files: &'a [String],
}

/// Options of install/upgrade that differ between Helm 3 and 4.
#[derive(Clone, Debug, Default)]
pub struct InstallOpts {
    pub wait: bool,
    pub timeout_s: Option<u64>,
    /// Roll back (or uninstall) on failure: `--atomic` in Helm 3, `--rollback-on-failure` in 4.
    pub atomic: bool,
    pub create_namespace: bool,
}

impl Helm {
    /// Helm `major` with the legacy environment (Helm's default homes, admin.conf).
    #[cfg(test)]
    pub fn legacy(major: u32) -> Helm {
        Helm { major, env: HelmEnv::Legacy }
    }

    fn base(&self, words: &[String]) -> Result<String> {
        Ok(format!("{}helm {}", self.env.prefix(), join(words)?))
    }

    /// `helm WORDS -- POSITIONALS`: options first, then the names, never read as options.
    fn with_args(&self, mut words: Vec<String>, positionals: &[&str]) -> Result<String> {
        words.push("--".into());
        words.extend(positionals.iter().map(|p| p.to_string()));
        self.base(&words)
    }

    fn opts(&self, o: &InstallOpts, w: &mut Vec<String>) {
        if o.atomic {
            w.push(if self.major >= 4 { "--rollback-on-failure" } else { "--atomic" }.into());
        } else if o.wait {
            w.push("--wait".into());
        }
        if let Some(t) = o.timeout_s {
            w.push("--timeout".into());
            w.push(format!("{t}s"));
        }
        if o.create_namespace {
            w.push("--create-namespace".into());
        }
    }

    fn values(v: &Values, w: &mut Vec<String>) {
        for s in v.set {
            w.push("--set".into());
            w.push(s.clone());
        }
        for s in v.set_files {
            w.push("--set-file".into());
            w.push(s.clone());
        }
        for f in v.files {
            w.push("--values".into());
            w.push(f.clone());
        }
    }

    fn chart_words(verb: &str, c: &Chart) -> Vec<String> {
        let mut w: Vec<String> = vec![verb.into(), "--namespace".into(), c.namespace.into()];
        if let Some(v) = c.version {
            w.extend(["--version".into(), v.into()]);
        }
        w
    }

    /// `helm install -n NS [--version V] [--set ...] [--set-file ...] [-f ...] [opts] -- REL CHART`.
    pub fn install(&self, c: &Chart, v: &Values, o: &InstallOpts) -> Result<String> {
        let mut w = Self::chart_words("install", c);
        Self::values(v, &mut w);
        self.opts(o, &mut w);
        self.with_args(w, &[c.release, c.chart])
    }

    /// `helm upgrade -n NS [--reuse-values] ... -- REL CHART`.
    pub fn upgrade(&self, c: &Chart, v: &Values, reuse_values: bool, o: &InstallOpts) -> Result<String> {
        let mut w = Self::chart_words("upgrade", c);
        if reuse_values {
            w.push("--reuse-values".into());
        }
        Self::values(v, &mut w);
        self.opts(o, &mut w);
        self.with_args(w, &[c.release, c.chart])
    }

    /// The words of `helm install` and `helm upgrade` after the verb, with `-o json` (Helm then
    /// prints the release: status, revision, manifest, values), for `src/remote/helm_apply.sh`,
    /// which picks the verb on the master: `--namespace NS ... -o json -- REL CHART`.
    pub fn release_words(&self, c: &Chart, v: &Values, o: &InstallOpts) -> Vec<String> {
        let mut w = Self::chart_words("", c);
        w.remove(0);
        Self::values(v, &mut w);
        self.opts(o, &mut w);
        w.extend(["-o".into(), "json".into(), "--".into(), c.release.into(), c.chart.into()]);
        w
    }

    /// `helm upgrade ... -o json -- REL CHART`: the release printed as JSON (its status, revision,
    /// manifest and values), so nothing is read after it. The JSON holds the values: read, never
    /// streamed.
    pub fn upgrade_json(&self, c: &Chart, v: &Values, reuse_values: bool, o: &InstallOpts) -> Result<String> {
        let mut w = Self::chart_words("upgrade", c);
        if reuse_values {
            w.push("--reuse-values".into());
        }
        Self::values(v, &mut w);
        self.opts(o, &mut w);
        w.extend(["-o".into(), "json".into()]);
        self.with_args(w, &[c.release, c.chart])
    }

    pub fn rollback(&self, rel: &str, ns: &str, revision: Option<u32>, o: &InstallOpts) -> Result<String> {
        let mut w: Vec<String> = vec!["rollback".into(), "--namespace".into(), ns.into()];
        if o.wait {
            w.push("--wait".into());
        }
        if let Some(t) = o.timeout_s {
            w.extend(["--timeout".into(), format!("{t}s")]);
        }
        let rev = revision.map(|r| r.to_string());
        let mut pos = vec![rel];
        pos.extend(rev.as_deref());
        self.with_args(w, &pos)
    }

    pub fn uninstall(&self, rel: &str, ns: &str, wait: bool) -> Result<String> {
        let mut w: Vec<String> = vec!["uninstall".into(), "--namespace".into(), ns.into()];
        if wait {
            w.push("--wait".into());
        }
        self.with_args(w, &[rel])
    }

    /// Status as JSON; a missing release is `Error: release: not found` (exit 1).
    pub fn status(&self, rel: &str, ns: &str) -> Result<String> {
        self.with_args(vec!["status".into(), "--namespace".into(), ns.into(), "-o".into(), "json".into()], &[rel])
    }

    pub fn get_manifest(&self, rel: &str, ns: &str) -> Result<String> {
        self.with_args(vec!["get".into(), "manifest".into(), "--namespace".into(), ns.into()], &[rel])
    }

    pub fn get_values(&self, rel: &str, ns: &str, all: bool) -> Result<String> {
        let mut w: Vec<String> =
            vec!["get".into(), "values".into(), "--namespace".into(), ns.into(), "-o".into(), "json".into()];
        if all {
            w.push("--all".into());
        }
        self.with_args(w, &[rel])
    }

    /// Every release in any state: Helm 3 needs `--all`; Helm 4 lists all by default and has no
    /// `--all` any more.
    pub fn list(&self, ns: Option<&str>) -> Result<String> {
        let mut w: Vec<String> = vec!["list".into()];
        if self.major < 4 {
            w.push("--all".into());
        }
        w.extend(["-o".into(), "json".into()]);
        match ns {
            Some(n) => w.extend(["--namespace".into(), n.into()]),
            None => w.push("--all-namespaces".into()),
        }
        self.base(&w)
    }

    pub fn history(&self, rel: &str, ns: &str) -> Result<String> {
        self.with_args(vec!["history".into(), "--namespace".into(), ns.into(), "-o".into(), "json".into()], &[rel])
    }

    /// `helm show values|readme|chart|all [--repo URL] [--version V] -- CHART`.
    pub fn show(&self, what: &str, chart: &str, repo: Option<&str>, version: Option<&str>) -> Result<String> {
        let mut w: Vec<String> = vec!["show".into(), what.into()];
        if let Some(r) = repo {
            w.extend(["--repo".into(), r.into()]);
        }
        if let Some(v) = version {
            w.extend(["--version".into(), v.into()]);
        }
        self.with_args(w, &[chart])
    }

    /// `helm repo add` (forcing an update of an existing name: a changed URL is re-added);
    /// credentials come from a 0600 file (`--password-stdin` reads it), never from argv.
    pub fn repo_add(
        &self,
        name: &str,
        url: &str,
        user: Option<&str>,
        password_file: Option<&str>,
        ca_file: Option<&str>,
    ) -> Result<String> {
        let mut w: Vec<String> = vec!["repo".into(), "add".into(), "--force-update".into()];
        if let Some(u) = user {
            w.extend(["--username".into(), u.into(), "--password-stdin".into()]);
        }
        if let Some(c) = ca_file {
            w.extend(["--ca-file".into(), c.into()]);
        }
        let cmd = self.with_args(w, &[name, url])?;
        Ok(match password_file {
            Some(f) => format!("{cmd} < {}", quote(f)?),
            None => cmd,
        })
    }

    pub fn repo_update(&self, name: &str) -> Result<String> {
        self.with_args(vec!["repo".into(), "update".into()], &[name])
    }

    pub fn repo_remove(&self, name: &str) -> Result<String> {
        self.with_args(vec!["repo".into(), "remove".into()], &[name])
    }

    /// `helm repo list -o json`; with no repositories Helm fails with `Error: no repositories to
    /// show`, which is printed here as `[]`.
    /// The repositories of the environment as JSON, `[]` when there are none: the same node program the cluster
    /// hooks use (`src/remote/helm_repo_list.sh`).
    pub fn repo_list(&self) -> String {
        let dir = self.env.dir();
        crate::remote::HELM_REPO_LIST.command(dir.as_slice()).expect("a program text has no NUL byte")
    }
}

/// OSM's release-name rule: from the chart name, lowercase alphanumerics and `-`, at most 35
/// characters, starting with a letter, plus `-` and a 10-digit suffix.
pub fn generated_release_name(chart: &str, suffix: u64) -> String {
    let base = chart.rsplit('/').next().unwrap_or(chart);
    let mut s: String =
        base.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        s.insert(0, 'a');
    }
    s.truncate(35);
    format!("{}-{:010}", s.trim_end_matches('-'), suffix % 10_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn helm_3_and_4_differ_only_where_they_must() {
        let o = InstallOpts { atomic: true, timeout_s: Some(120), create_namespace: true, wait: true };
        let c = Chart { release: "r", chart: "c", namespace: "ns", version: None };
        let h3 = Helm::legacy(3).install(&c, &Values::default(), &o).unwrap();
        let h4 = Helm::legacy(4).install(&c, &Values::default(), &o).unwrap();
        assert!(h3.ends_with("helm install --namespace ns --atomic --timeout 120s --create-namespace -- r c"), "{h3}");
        assert!(
            h4.ends_with("helm install --namespace ns --rollback-on-failure --timeout 120s --create-namespace -- r c"),
            "{h4}"
        );
        assert!(Helm::legacy(3).list(None).unwrap().ends_with("helm list --all -o json --all-namespaces"));
        assert!(Helm::legacy(4).list(None).unwrap().ends_with("helm list -o json --all-namespaces"));
        assert_eq!(parse_version("v3.17.3+ge4da497\n"), Some(3));
        assert_eq!(parse_version("v4.0.1+g1234"), Some(4));
        assert_eq!(parse_version("v2.17.0+g1"), None);
        assert_eq!(parse_version("v99999999999.0"), None);
    }

    #[test]
    fn a_hostile_parameter_stays_one_literal_argument() {
        let set = ["a=b; touch /tmp/pwned".to_string(), "x=$(id)".to_string()];
        let chart = Chart { release: "r", chart: "c", namespace: "default", version: None };
        let c = Helm::legacy(3)
            .install(&chart, &Values { set: &set, ..Values::default() }, &InstallOpts::default())
            .unwrap();
        // Run it through a real shell with `helm` replaced by printf: the words must arrive intact.
        let script = c.replace("export KUBECONFIG=/etc/kubernetes/admin.conf; helm", "printf '[%s]'");
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "[install][--namespace][default][--set][a=b; touch /tmp/pwned][--set][x=$(id)][--][r][c]"
        );
    }

    #[test]
    fn release_names_follow_osm() {
        assert_eq!(generated_release_name("bitnami/Apache_Server", 42), "apache-server-0000000042");
        assert_eq!(generated_release_name("9lives", 1), "a9lives-0000000001");
        let long = generated_release_name(&"x".repeat(60), 7);
        assert!(long.len() <= 46 && crate::cnf::names::dns_label(&long, 53), "{long}");
    }

    #[test]
    fn repo_credentials_never_reach_argv() {
        let c = Helm::legacy(3)
            .repo_add("r", "https://h/c", Some("u"), Some(".mgmt-driver/run/i/repo-r.pw"), None)
            .unwrap();
        assert!(c.ends_with("--username u --password-stdin -- r https://h/c < .mgmt-driver/run/i/repo-r.pw"), "{c}");
    }

    #[test]
    fn names_come_after_a_double_dash_in_every_command() {
        let h = Helm::legacy(4);
        let c = Chart { release: "-r", chart: "--repo=x", namespace: "n", version: None };
        let o = InstallOpts::default();
        for cmd in [
            h.install(&c, &Values::default(), &o).unwrap(),
            h.upgrade(&c, &Values::default(), true, &o).unwrap(),
            h.rollback("-r", "n", Some(2), &o).unwrap(),
            h.uninstall("-r", "n", true).unwrap(),
            h.status("-r", "n").unwrap(),
            h.get_manifest("-r", "n").unwrap(),
            h.get_values("-r", "n", true).unwrap(),
            h.history("-r", "n").unwrap(),
            h.show("chart", "-r", Some("http://h"), Some("1")).unwrap(),
            h.repo_add("-r", "http://h", None, None, None).unwrap(),
            h.repo_update("-r").unwrap(),
            h.repo_remove("-r").unwrap(),
        ] {
            let (opts, names) = cmd.split_once(" -- ").unwrap_or_else(|| panic!("no -- in {cmd}"));
            assert!(!opts.contains("-r ") && names.starts_with("-r"), "{cmd}");
        }
    }
}
