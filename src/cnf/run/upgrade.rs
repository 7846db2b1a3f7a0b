//! `cnf upgrade`: a release to a new chart, version or values; prints the new revision. Its
//! check (the operator's words, none of which may reach Helm as an option or a local
//! directory) and its steps side by side.

use serde_json::{json, Value};

use crate::cnf::helm_cmd::{Chart, Values};
use crate::cnf::ops::{cmd_timeout, made_release, own_chart, remove_files, upload_values, Ctx, Record};
use crate::cnf::params::{ChartSource, Release};
use crate::cnf::values_file::ValuesFile;
use crate::cnf::{check_arg, names};
use crate::error::{Error, Result};
use crate::redact::Redact;

/// `--release`, `--chart`, `--version` and every `--set`, before anything connects.
pub fn check_args(
    release: &str,
    chart: Option<&str>,
    version: Option<&str>,
    set: &[String],
    instance: &str,
) -> Result<()> {
    check_arg("--release", names::release(release))?;
    if let Some(c) = chart {
        check_arg("--chart", names::chart_ref(c, false, instance))?;
    }
    if let Some(v) = version {
        check_arg("--version", names::version(v))?;
    }
    for x in set {
        check_arg("--set", names::set_item(x))?;
    }
    Ok(())
}

/// `upgrade`'s arguments, checked.
pub struct Upgrade {
    pub release: String,
    pub chart: Option<String>,
    pub version: Option<String>,
    pub set: Vec<String>,
    pub reuse_values: bool,
    /// The operator's `--values` files, read.
    pub values: Vec<ValuesFile>,
}

/// `helm upgrade` of the release (to its chart, else its recorded chart), then record it.
pub async fn run(c: &Ctx<'_>, rec: &mut Record<'_>, a: &Upgrade) -> Result<Value> {
    let Upgrade { release, chart, version, set, reuse_values, values } = a;
    let (release, version, reuse_values) = (release.as_str(), version.as_deref(), *reuse_values);
    let chart = chart.clone();
    let ns = c.params.namespace.as_str();
    let recorded = rec.st.releases.get(release).map(|r| r.chart.clone());
    let chart = chart.map(|ch| own_chart(c, &ch));
    let chart = chart.or(recorded).ok_or_else(|| {
        Error::input("arguments", "--chart", format!("release {release} has no recorded chart; pass --chart"))
    })?;
    let target = Chart { release, chart: &chart, namespace: ns, version };
    let files = upload_values(c, release, values).await?;
    let vals = Values { set, files: &files, ..Values::default() };
    // `-o json`: the release comes back from this one Helm call (no status, manifest or values
    // read after it). It holds the values: read, never streamed.
    let cmd = c.s.helm.upgrade_json(&target, &vals, reuse_values, &c.opts)?;
    let shown = cmd.clone();
    let res = c.s.run_watched(cmd, cmd_timeout(c), release, ns, Redact::All).await;
    remove_files(c, &files).await?;
    let out = res?;
    let rel = c
        .params
        .releases
        .iter()
        .find(|r| r.name == release)
        .cloned()
        .unwrap_or(Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) });
    let mut rs = made_release(c, &rel, &chart, &shown, &out)?;
    if !values.is_empty() {
        // The operator's files may hold secrets under any secret-looking key.
        rs.values = crate::secret::masked(&rs.values);
    }
    rec.release(release, &rs)?;
    Ok(json!({"release": release, "revision": rs.revision, "state": rs}))
}

#[cfg(test)]
mod tests {
    use crate::cnf::run::testkit::{release_json, run_op, Fixture, M1};
    use crate::cnf::Op;

    #[tokio::test]
    async fn an_upgrade_takes_the_operators_values_files_in_order_and_removes_them() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let (a, b) = (f.dir.path().join("a.yaml"), f.dir.path().join("b.json"));
        std::fs::write(&a, "replicaCount: 2\napi:\n  token: tok-in-file-5\n").unwrap();
        std::fs::write(&b, r#"{"replicaCount": 3}"#).unwrap();
        let config = serde_json::json!({"replicaCount": 3, "api": {"token": "tok-in-file-5"}});
        f.fake.reply(None, "; helm upgrade --namespace cnf ", &release_json("vdu2", "cnf", 3, config));
        let op = Op::Upgrade {
            release: "vdu2".into(),
            chart: Some("labrepo/nginxlab".into()),
            version: None,
            set: vec![],
            reuse_values: true,
            values: vec![a, b],
        };
        let o = run_op(&f, op, "cnf1", None).await.unwrap();
        let execs = f.fake.execs(M1).join("\n");
        assert!(
            execs.contains(
                "upgrade --namespace cnf --reuse-values --values .mgmt-driver/run/cnf1/values-vdu2-0.yaml \
                 --values .mgmt-driver/run/cnf1/values-vdu2-1.yaml --timeout 300s -o json -- vdu2 cnf1@labrepo/nginxlab"
            ),
            "{execs}"
        );
        assert!(execs.contains("rm -f -- .mgmt-driver/run/cnf1/values-vdu2-1.yaml"), "{execs}");
        assert!(!execs.contains("tok-in-file-5") && !o.result.to_string().contains("tok-in-file-5"), "{}", o.result);
        assert_eq!(o.result["revision"], 3, "from the upgrade's own JSON: {}", o.result);
        let reads = f.fake.execs(M1).iter().filter(|e| e.contains("helm get ") || e.contains("helm status ")).count();
        assert_eq!(reads, 0, "nothing read after the upgrade");
        let missing = Op::Upgrade {
            release: "vdu2".into(),
            chart: None,
            version: None,
            set: vec![],
            reuse_values: false,
            values: vec![f.dir.path().join("nope.yaml")],
        };
        let n = f.fake.calls().len();
        let e = run_op(&f, missing, "cnf1", None).await.err().expect("refused").to_string();
        assert!(e.contains("--values") && e.contains("nope.yaml"), "{e}");
        assert_eq!(f.fake.calls().len(), n, "refused before anything connects");
    }
}
