//! `cnf install CHART[:VERSION] [--release R] [--version V] [--values FILE]... [--set K=V]...`:
//! one chart without a Tacker request, as OSM's Helm connector installs a KDU. Its checks (the
//! chart reference, the version given once, the release name or OSM's generated one) and its
//! steps side by side. The release is recorded under the instance id, so the other verbs
//! (`status`, `upgrade`, `uninstall`, `reset --uninstall`) find it; a record made here has no
//! request ([`INSTALL_MARK`]).

use serde_json::{json, Value};

use crate::cnf::ops::{own_chart, Ctx, Record};
use crate::cnf::params::{name_digits, ChartSource, Release};
use crate::cnf::run::instantiate::apply_release;
use crate::cnf::values_file::ValuesFile;
use crate::cnf::{check_arg, names};
use crate::error::{Error, Result};

/// The key marking a record made by `cnf install` (its params hold no request): later
/// operations read its namespace only.
pub const INSTALL_MARK: &str = "__cnf_install";

/// `install`'s arguments, checked.
#[derive(Debug)]
pub struct Install {
    pub chart: String,
    pub version: Option<String>,
    pub release: String,
    pub set: Vec<String>,
    pub values: Vec<ValuesFile>,
    /// The release name was generated (OSM's rule), not given.
    pub generated: bool,
}

/// OSM's `CHART:VERSION` (`stable/openldap:1.2.3`, `oci://reg/c/nginx:1.0`) → (CHART, VERSION).
/// A URL's port is not a version: the colon must come after the URL's host and path began.
/// Pure.
pub fn split_version(s: &str) -> (&str, Option<&str>) {
    let Some((chart, v)) = s.rsplit_once(':') else { return (s, None) };
    let url_without_path = chart.split_once("://").is_some_and(|(_, rest)| !rest.contains('/'));
    if v.is_empty() || v.contains('/') || chart.is_empty() || url_without_path || !chart.contains(['/', '.']) {
        return (s, None);
    }
    (chart, Some(v))
}

/// CHART, `--version`, `--release` and `--set`, before anything connects. Without `--release`
/// the name is OSM's (the chart's name and 10 digits), the digits derived from the instance id
/// and the chart: a re-run finds (and upgrades) the release it installed.
pub fn check_args(
    chart: &str,
    version: Option<&str>,
    release: Option<&str>,
    set: &[String],
    instance: &str,
) -> Result<(String, Option<String>, String, bool)> {
    let (chart_only, in_chart) = split_version(chart);
    let version = match (in_chart, version) {
        (Some(_), Some(_)) => {
            return Err(Error::input("arguments", "--version", "the version is in CHART (CHART:VERSION) already"))
        }
        (a, b) => a.or(b).map(str::to_string),
    };
    check_arg("CHART", names::chart_ref(chart_only, false, instance))?;
    if chart_only.starts_with(names::CHART_ROOT) {
        return Err(Error::input("arguments", "CHART", "a CNF's chart directory is installed by `cnf instantiate`"));
    }
    if let Some(v) = &version {
        check_arg("--version", names::version(v))?;
    }
    for x in set {
        check_arg("--set", names::set_item(x))?;
    }
    let (release, generated) = match release {
        Some(r) => {
            check_arg("--release", names::release(r))?;
            (r.to_string(), false)
        }
        None => {
            let name = crate::cnf::helm_cmd::generated_release_name(chart_only, name_digits(instance, chart_only));
            (name, true)
        }
    };
    Ok((chart_only.to_string(), version, release, generated))
}

/// What the record of an install keeps besides its release: where Helm runs and which cluster.
pub struct Facts<'a> {
    pub helm_info: &'a Value,
    pub masters: &'a [String],
    pub cluster_id: Option<&'a str>,
}

/// Record the CNF (when new), then install the release (upgrade it in place when it exists,
/// recovering a pending one, as instantiate does) and record it.
pub async fn run(c: &Ctx<'_>, a: &Install, f: &Facts<'_>, rec: &mut Record<'_>) -> Result<Value> {
    let ns = &c.params.namespace;
    if !rec.st.params.is_object() {
        rec.st.params = json!({INSTALL_MARK: true, "namespace": ns, "__helm_info": f.helm_info});
        rec.st.namespace = ns.clone();
        rec.st.masters = f.masters.to_vec();
        rec.st.cluster_id = f.cluster_id.map(str::to_string);
        rec.save()?;
    }
    let chart = own_chart(c, &a.chart);
    let r = Release {
        source: ChartSource::Oci { reference: chart },
        set: a.set.clone(),
        version: a.version.clone(),
        ..Release::named(&a.release)
    };
    c.s.rt.phase("install the release", &[c.s.master()], false);
    let mut rs = apply_release(c, &r, &a.values).await?;
    if !a.values.is_empty() {
        // The operator's files may hold secrets under any secret-looking key.
        rs.values = crate::secret::masked(&rs.values);
    }
    rec.release(&a.release, &rs)?;
    Ok(json!({"release": a.release, "generatedName": a.generated, "namespace": ns, "revision": rs.revision,
              "state": rs}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnf::run::testkit::{applied, run_inputs_events, run_op, status, Fixture, M1};
    use crate::cnf::{Inputs, Op};

    #[test]
    fn osm_chart_version_splits_but_a_urls_port_does_not() {
        assert_eq!(split_version("stable/openldap:1.2.3"), ("stable/openldap", Some("1.2.3")));
        assert_eq!(split_version("oci://reg:5000/c/nginx:1.0"), ("oci://reg:5000/c/nginx", Some("1.0")));
        assert_eq!(split_version("oci://reg:5000/c/nginx"), ("oci://reg:5000/c/nginx", None));
        assert_eq!(split_version("http://h:8080"), ("http://h:8080", None));
        assert_eq!(split_version("labrepo/nginx"), ("labrepo/nginx", None));
        let e = check_args("r/c:1.0", Some("2.0"), None, &[], "i").unwrap_err().to_string();
        assert!(e.contains("--version"), "{e}");
        let (chart, v, rel, generated) = check_args("r/c:1.0", None, None, &[], "i").unwrap();
        assert_eq!((chart.as_str(), v.as_deref(), generated), ("r/c", Some("1.0"), true));
        assert_eq!(rel, check_args("r/c", None, None, &[], "i").unwrap().2, "the same name every run");
        assert_ne!(rel, check_args("r/c", None, None, &[], "j").unwrap().2, "another instance, another name");
        for bad in ["--repo=x/c", "./c", "/var/tacker/helm/i/c", "r/c:1.0;id"] {
            assert!(check_args(bad, None, Some("r1"), &[], "i").is_err(), "{bad} accepted");
        }
        assert!(check_args("r/c", None, Some("-r"), &[], "i").unwrap_err().to_string().contains("--release"));
    }

    #[tokio::test]
    async fn install_without_a_request_records_the_release_and_its_values_file_stays_off_argv() {
        let f = Fixture::new();
        let values = f.dir.path().join("my values.yaml");
        std::fs::write(&values, "image:\n  tag: \"1.2\"\ndb:\n  password: hunter2-values\n").unwrap();
        f.fake.reply(None, "status --namespace edge -o json -- web", &status("deployed", 1));
        let config = json!({"image": {"tag": "1.2"}, "db": {"password": "hunter2-values"}});
        f.reply_applied("web", "edge", &applied("web", "edge", "absent/0", "install", 1, config));
        let op = Op::Install {
            chart: "stable/nginx:1.2.0".into(),
            release: Some("web".into()),
            version: None,
            values: vec![values],
            set: vec!["a=b; id".into()],
        };
        let inputs = Inputs { cluster_uuid: Some("edge:east".into()), ..f.inputs_for("osm-1") };
        let (o, events) = run_inputs_events(&f, op, inputs).await;
        let o = o.unwrap();
        let execs = f.fake.execs(M1).join("\n");
        assert!(
            execs.contains(
                "helm_apply.sh web edge 16 --namespace edge --version 1.2.0 --set 'a=b; id' \
                 --values .mgmt-driver/run/osm-1/values-web-0.yaml --timeout 300s --create-namespace -o json \
                 -- web stable/nginx 1 .mgmt-driver/run/osm-1/values-web-0.yaml"
            ),
            "{execs}"
        );
        assert!(execs.contains("/var/lib/mgmt-driver/helm/east"), "the cluster's environment: {execs}");
        for place in [&execs, &events, &o.result.to_string()] {
            assert!(!place.contains("hunter2-values"), "the values file's secret leaked: {place}");
        }
        assert_eq!(o.result["state"]["values"]["image"]["tag"], "1.2");
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/osm-1.cnf.json")).unwrap()).unwrap();
        assert_eq!((rec["cluster_id"].as_str(), rec["namespace"].as_str()), (Some("east"), Some("edge")), "{rec}");
        assert_eq!(rec["releases"]["web"]["chart"], "stable/nginx", "{rec}");
        // A later operation without any flag finds the release where it is.
        let o = run_op(&f, Op::Status { release: "web".into() }, "osm-1", None).await.unwrap();
        assert!(o.result.is_object(), "{}", o.result);
        // Single-release uninstall forgets an install's record with its last release.
        f.fake.reply(None, "helm_remove.sh '' 0 web edge", "@@mgmt-driver uninstalled web - 0\n\n");
        let o = run_op(&f, Op::Uninstall { release: "web".into() }, "osm-1", None).await.unwrap();
        assert_eq!(o.result["outcome"], "uninstalled", "{}", o.result);
        assert!(f.fake.execs(M1).join("\n").contains("helm_remove.sh '' 0 web edge"));
        assert!(!f.dir.path().join("state/osm-1.cnf.json").exists());
    }
}
