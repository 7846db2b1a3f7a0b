//! Facts read with Helm on a master: its version, a release's status, manifest and values,
//! the repository lists, and Helm's JSON or text output for the commands that show it. What is
//! kept is checked (statuses are Helm's words, names are names, URLs http(s)); output that may
//! hold a release's secret values is read, never streamed (`Redact::All`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::cluster::node_cmd;
use crate::cnf::helm_cmd::Helm;
use crate::cnf::manifest::{self, Resource};
use crate::cnf::names;
use crate::cnf::services::{from_manifest, Service};
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::{Fact, Wait};
use crate::redact::Redact;

/// `(status, revision)` of a release that must exist (`helm status -o json`): the status one of
/// Helm's words (it is recorded and compared). The JSON carries the user-supplied values: not
/// streamed.
pub struct ReleaseStatus<'a> {
    pub helm: &'a Helm,
    pub release: &'a str,
    pub namespace: &'a str,
}

impl Fact for ReleaseStatus<'_> {
    type Value = (String, u64);

    fn what(&self) -> String {
        "the release status".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.helm.status(self.release, self.namespace)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> (String, u64) {
        (String::new(), 0)
    }

    fn parse(&self, out: &str) -> std::result::Result<(String, u64), String> {
        release_status(out).ok_or_else(|| "unreadable status JSON".to_string())
    }
}

/// `(status, revision)` from `helm status -o json`; a status that is not one of Helm's words
/// (lowercase letters and `-`) is not believed: it is recorded and compared.
pub fn release_status(json: &str) -> Option<(String, u64)> {
    let v: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    let status = v.pointer("/info/status")?.as_str()?;
    let word = !status.is_empty() && status.len() <= 32 && status.bytes().all(|c| c.is_ascii_lowercase() || c == b'-');
    word.then(|| Some((status.to_string(), v.get("version")?.as_u64()?))).flatten()
}

/// The resources of a release's manifest (`helm get manifest`): every document's kind, name
/// and namespace checked (`cnf/manifest.rs`); they are recorded and later put into kubectl
/// lines. The manifest holds rendered Secrets: not streamed. A plan goes on with `planned`
/// (what was recorded, or nothing).
pub struct ReleaseManifest<'a> {
    pub helm: &'a Helm,
    pub release: &'a str,
    pub namespace: &'a str,
    pub planned: Vec<Resource>,
}

impl Fact for ReleaseManifest<'_> {
    type Value = Vec<Resource>;

    fn what(&self) -> String {
        "the release manifest".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.helm.get_manifest(self.release, self.namespace)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Vec<Resource> {
        self.planned.clone()
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<Resource>, String> {
        manifest::parse(out, self.namespace)
    }
}

/// The Services in a release's manifest, every document checked as [`ReleaseManifest`]'s and
/// each Service's type and ports as `cnf/services.rs` reads them. Not streamed.
pub struct ReleaseServices<'a> {
    pub helm: &'a Helm,
    pub release: &'a str,
    pub namespace: &'a str,
}

impl Fact for ReleaseServices<'_> {
    type Value = Vec<Service>;

    fn what(&self) -> String {
        "the release manifest".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.helm.get_manifest(self.release, self.namespace)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Vec<Service> {
        Vec::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<Service>, String> {
        from_manifest(out, self.release, self.namespace)
    }
}

/// The replica count at `path` (`a.b.c`) in a release's values (`helm get values --all`): a
/// whole number from 0 to 2147483647 (a Kubernetes replica count), since a scale computes the
/// next one from it. The values hold secrets: not streamed. A plan assumes 1.
pub struct ReplicaCount<'a> {
    pub helm: &'a Helm,
    pub release: &'a str,
    pub namespace: &'a str,
    pub path: &'a str,
}

impl Fact for ReplicaCount<'_> {
    type Value = u64;

    fn what(&self) -> String {
        "the replica count".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.helm.get_values(self.release, self.namespace, true)?).with_redact(Redact::All))
    }

    fn placeholder(&self) -> u64 {
        1
    }

    fn parse(&self, out: &str) -> std::result::Result<u64, String> {
        let path = self.path;
        let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
        value_at(&v, path)
            .and_then(Value::as_u64)
            .filter(|n| *n <= i32::MAX as u64)
            .ok_or_else(|| format!("no replica count (0 to 2147483647) at '{path}' in the release's values"))
    }
}

/// `a.b.c` in a values document.
pub fn value_at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(v, |cur, k| cur.get(k))
}

/// A master's repositories (`helm repo list -o json`) as name → URL: every name a repository
/// name or a CNF instance's `<id>@<name>` (`instance_id_ok`: the state store's rule for an
/// instance id, which this pure layer cannot name), since names are compared and removed.
pub struct RepoList<'a> {
    pub helm: &'a Helm,
    pub instance_id_ok: fn(&str) -> bool,
}

impl Fact for RepoList<'_> {
    type Value = BTreeMap<String, String>;

    fn what(&self) -> String {
        "the repository list".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.helm.repo_list()))
    }

    fn placeholder(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<BTreeMap<String, String>, String> {
        parse_repo_list(out, self.instance_id_ok)
    }
}

/// The repositories of a master as `helm repo list -o json` prints them: every name checked
/// (a repository name, or an instance's `<id>@<name>`, the id as `instance_id_ok` says) before it
/// is compared or removed.
pub fn parse_repo_list(
    out: &str,
    instance_id_ok: fn(&str) -> bool,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let list = v.as_array().ok_or("not a JSON list")?;
    let mut have = BTreeMap::new();
    for r in list {
        let (Some(name), Some(url)) = (r.get("name").and_then(Value::as_str), r.get("url").and_then(Value::as_str))
        else {
            return Err("an entry without a name or url".into());
        };
        let ok = match name.split_once('@') {
            Some((inst, n)) => instance_id_ok(inst) && names::repo(n).is_ok(),
            None => names::repo(name).is_ok(),
        };
        if !ok {
            return Err(format!("'{}' is not a repository name", crate::error::excerpt(name)));
        }
        have.insert(name.to_string(), url.trim_end_matches('/').to_string());
    }
    Ok(have)
}

/// A surviving master's repositories to copy to a healed one (`helm_repo_list.sh`): the list is
/// refused as a whole when one entry's name or URL is not one `helm repo add` may get on
/// another node (`node_cmd::parse_repo_list`).
pub struct RepoListToCopy;

impl Fact for RepoListToCopy {
    type Value = Vec<(String, String)>;

    fn what(&self) -> String {
        "the Helm repository list".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::helm_repo_list()))
    }

    fn placeholder(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<(String, String)>, String> {
        node_cmd::parse_repo_list(out)
    }
}

/// Whether a surviving master's chart root was packed for a healed one (`pack_charts.sh` in
/// `run_dir`): exactly `packed` or `none`. Within the Helm bound; a plan assumes packed.
pub struct ChartsPacked<'a> {
    pub run_dir: &'a str,
}

impl Fact for ChartsPacked<'_> {
    type Value = bool;

    fn what(&self) -> String {
        "whether charts were packed".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::pack_charts(self.run_dir)?))
    }

    fn wait(&self) -> Wait {
        Wait::Helm
    }

    fn placeholder(&self) -> bool {
        true
    }

    fn parse(&self, out: &str) -> std::result::Result<bool, String> {
        node_cmd::parse_packed(out)
    }
}

/// What forgetting the cluster's Helm environment on a master did (`script`: the environment's
/// reset line, `cluster_env`): exactly `removed` or `absent`, as it is reported per master.
pub struct EnvReset {
    pub script: String,
}

impl Fact for EnvReset {
    type Value = String;

    fn what(&self) -> String {
        "the environment reset".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.script.clone()))
    }

    fn placeholder(&self) -> String {
        "planned".to_string()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        match out.trim() {
            w @ ("removed" | "absent") => Ok(w.to_string()),
            other => Err(format!("not removed/absent: {:?}", crate::error::excerpt(other))),
        }
    }
}

/// Helm's JSON output of `script` (release values, a status: `what` names it), parsed; the
/// caller checks its shape and masks the secret values before showing it. Not streamed. A plan
/// goes on with `null`.
pub struct Json {
    pub script: String,
    pub what: String,
}

impl Json {
    pub fn new(script: String, what: &str) -> Json {
        Json { script, what: what.into() }
    }
}

impl Fact for Json {
    type Value = Value;

    fn what(&self) -> String {
        self.what.clone()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.script.clone()).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Value {
        Value::Null
    }

    fn parse(&self, out: &str) -> std::result::Result<Value, String> {
        serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))
    }
}

/// The text `script` prints, as it is (a command whose output is the result, like `helm
/// history`), within `wait`; empty in a plan. Streamed as it runs.
pub struct Output {
    pub script: String,
    pub wait: Duration,
}

impl Fact for Output {
    type Value = String;

    fn what(&self) -> String {
        "the output".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.script.clone()))
    }

    fn wait(&self) -> Wait {
        Wait::For(self.wait)
    }

    fn placeholder(&self) -> String {
        String::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        Ok(out.to_string())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cnf::cluster_env::HelmEnv;
    use crate::facts::testkit::{planned, read, unreadable, value};

    fn helm() -> Helm {
        Helm { major: 3, env: HelmEnv::cluster("east").unwrap() }
    }

    fn instance_id_ok(id: &str) -> bool {
        crate::lifecycle::state::check_instance_id(id).is_ok()
    }

    /// The parser with the state store's rule, as the operations read it.
    fn parse_repo_list(out: &str) -> std::result::Result<BTreeMap<String, String>, String> {
        super::parse_repo_list(out, instance_id_ok)
    }

    #[test]
    fn a_masters_repository_list_is_checked_before_use() {
        let ok = parse_repo_list(r#"[{"name":"labrepo","url":"http://h/"},{"name":"cnf1@labrepo","url":"http://g"}]"#);
        assert_eq!(ok.unwrap().get("labrepo").map(String::as_str), Some("http://h"));
        for bad in [
            r#"[{"name":"--insecure-skip-tls-verify","url":"http://h"}]"#,
            r#"[{"name":"..","url":"http://h"}]"#,
            r#"[{"name":"x@-y","url":"http://h"}]"#,
            r#"[{"url":"http://h"}]"#,
            r#"{"name":"x"}"#,
            "Error: no repositories",
        ] {
            assert!(parse_repo_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn status_json() {
        let j = r#"{"name":"vdu1","info":{"status":"pending-install","description":"Initial install underway"},"version":1,"namespace":"default"}"#;
        assert_eq!(release_status(j), Some(("pending-install".into(), 1)));
        assert_eq!(release_status("Error: release: not found"), None);
        assert_eq!(release_status(r#"{"info":{"status":"deployed; rm -rf /"},"version":1}"#), None);
        assert_eq!(release_status(r#"{"info":{"status":"deployed"},"version":-1}"#), None);
    }

    #[test]
    fn values_paths() {
        let v = json!({"a": {"b": {"c": 3}}, "replicaCount": 2});
        assert_eq!(value_at(&v, "a.b.c"), Some(&json!(3)));
        assert_eq!(value_at(&v, "replicaCount"), Some(&json!(2)));
        assert_eq!(value_at(&v, "a.x"), None);
    }

    #[tokio::test]
    async fn a_release_status_that_must_be_there() {
        let h = helm();
        let f = ReleaseStatus { helm: &h, release: "vdu1", namespace: "cnf" };
        let (sent, got) = read(&f, r#"{"info":{"status":"deployed"},"version":3}"#).await;
        assert!(sent.contains("helm status --namespace cnf -o json -- vdu1"), "{sent}");
        assert_eq!(got.unwrap(), ("deployed".into(), 3));
        assert_eq!(
            unreadable(&f, r#"{"info":{"status":"deployed; rm -rf /"},"version":1}"#).await,
            "unreadable status JSON"
        );
        assert_eq!(planned(&f).await, (String::new(), 0));
        assert_eq!(f.command().unwrap().redact, Redact::All);
    }

    #[tokio::test]
    async fn a_release_manifest_checked() {
        let h = helm();
        let recorded = vec![Resource {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: "web".into(),
            namespace: "cnf".into(),
        }];
        let f = ReleaseManifest { helm: &h, release: "vdu1", namespace: "cnf", planned: recorded.clone() };
        let (sent, got) = read(&f, "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n").await;
        assert!(sent.ends_with("helm get manifest --namespace cnf -- vdu1"), "{sent}");
        assert_eq!(got.unwrap(), recorded);
        unreadable(&f, "apiVersion: v1\nkind: Service\nmetadata:\n  name: \"web; reboot\"\n").await;
        assert_eq!(planned(&f).await, recorded);
        assert_eq!(f.command().unwrap().redact, Redact::All);
    }

    #[tokio::test]
    async fn a_releases_services() {
        let h = helm();
        let f = ReleaseServices { helm: &h, release: "vdu1", namespace: "cnf" };
        let m = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n";
        let (sent, got) = read(&f, m).await;
        assert!(sent.ends_with("helm get manifest --namespace cnf -- vdu1"), "{sent}");
        let got = got.unwrap();
        assert_eq!((got[0].name.as_str(), got[0].kind.as_str(), got[0].release.as_str()), ("web", "ClusterIP", "vdu1"));
        unreadable(&f, "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: Weird\n").await;
        assert!(planned(&f).await.is_empty());
    }

    #[tokio::test]
    async fn a_replica_count_in_range() {
        let h = helm();
        let f = ReplicaCount { helm: &h, release: "vdu1", namespace: "cnf", path: "a.replicaCount" };
        let (sent, got) = read(&f, r#"{"a":{"replicaCount":2}}"#).await;
        assert!(sent.ends_with("helm get values --namespace cnf -o json --all -- vdu1"), "{sent}");
        assert_eq!(got.unwrap(), 2);
        for bad in [r#"{"a":{"replicaCount":2147483648}}"#, r#"{"a":{"replicaCount":-1}}"#, r#"{"replicaCount":2}"#] {
            assert!(
                unreadable(&f, bad).await.contains("no replica count (0 to 2147483647) at 'a.replicaCount'"),
                "{bad}"
            );
        }
        assert!(unreadable(&f, "nope").await.starts_with("not JSON"));
        assert_eq!(planned(&f).await, 1);
    }

    #[tokio::test]
    async fn a_masters_repositories_by_name() {
        let h = helm();
        let f = RepoList { helm: &h, instance_id_ok };
        let (sent, got) =
            read(&f, r#"[{"name":"labrepo","url":"http://h/"},{"name":"cnf1@labrepo","url":"http://g"}]"#).await;
        assert!(sent.starts_with("helm_repo_list.sh"), "{sent}");
        assert_eq!(got.unwrap().get("cnf1@labrepo").map(String::as_str), Some("http://g"));
        assert!(unreadable(&f, r#"[{"name":".x@labrepo","url":"http://h"}]"#).await.contains("not a repository name"));
        assert!(planned(&f).await.is_empty());
    }

    #[tokio::test]
    async fn repositories_to_copy_refused_as_a_whole() {
        let f = RepoListToCopy;
        let (sent, got) = read(&f, r#"[{"name":"stable","url":"https://charts.example/"}]"#).await;
        assert!(sent.starts_with("helm_repo_list.sh"), "{sent}");
        assert_eq!(got.unwrap(), vec![("stable".into(), "https://charts.example/".into())]);
        unreadable(&f, r#"[{"name":"ok","url":"https://x"},{"name":"--bad","url":"https://x"}]"#).await;
        assert!(planned(&f).await.is_empty());
    }

    #[tokio::test]
    async fn charts_packed_or_none() {
        let f = ChartsPacked { run_dir: "/var/tmp/run" };
        let (sent, got) = read(&f, "packed\n").await;
        assert!(sent.starts_with("pack_charts.sh"), "{sent}");
        assert!(got.unwrap());
        assert!(!value(&f, "none").await);
        assert!(unreadable(&f, "packed\nand more").await.contains("neither"));
        assert!(planned(&f).await);
        assert_eq!(f.wait(), Wait::Helm);
    }

    #[tokio::test]
    async fn an_environment_removed_or_absent() {
        let f = EnvReset { script: "reset east".into() };
        let (sent, got) = read(&f, "removed\n").await;
        assert_eq!((sent.as_str(), got.unwrap().as_str()), ("reset east", "removed"));
        assert_eq!(value(&f, "absent").await, "absent");
        assert!(unreadable(&f, "\u{1b}[2J").await.starts_with("not removed/absent"));
        assert_eq!(planned(&f).await, "planned");
    }

    #[tokio::test]
    async fn helm_json_or_null_in_a_plan() {
        let f = Json::new("helm get values vdu1 -o json".into(), "the release values");
        let (sent, got) = read(&f, "{\"a\": 1}\n").await;
        assert_eq!(sent, "helm get values vdu1 -o json");
        assert_eq!(got.unwrap(), json!({"a": 1}));
        assert!(unreadable(&f, "Error: nope").await.starts_with("not JSON"));
        assert!(planned(&f).await.is_null());
        assert_eq!((f.what(), f.command().unwrap().redact), ("the release values".into(), Redact::All));
    }

    #[tokio::test]
    async fn helm_output_as_printed() {
        let f = Output { script: "helm history vdu1".into(), wait: Duration::from_secs(7) };
        let (sent, got) = read(&f, "REVISION\n1\n").await;
        assert_eq!((sent.as_str(), got.unwrap().as_str()), ("helm history vdu1", "REVISION\n1\n"));
        assert_eq!(planned(&f).await, "");
        assert_eq!(f.wait(), Wait::For(Duration::from_secs(7)));
    }
}
