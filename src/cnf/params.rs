//! The CNF side of `additionalParams` (Tacker's Kubernetes InfraDriver with Helm): `use_helm`,
//! `namespace`, `using_helm_install_param[]`, `helm_replica_values`, `vdu_mapping`. Checked
//! before anything connects, with Tacker's messages where Tacker had one, and a JSON path always.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum ChartSource {
    /// `helmchartfile_path`: a `<chart>-<version>.tgz` in the VNF package.
    Local {
        path: String,
        chart_dir: String,
    },
    /// `helmrepositoryname` / `helmchartname` at `exthelmrepo_url`, or an `oci://` reference.
    External {
        repo: String,
        chart: String,
        url: String,
    },
    Oci {
        reference: String,
    },
}

#[derive(Clone, Debug)]
pub struct Release {
    pub name: String,
    pub source: ChartSource,
    /// `helmparameter`: each one `--set`, passed as one quoted argument.
    pub set: Vec<String>,
    /// Our extension: a chart version for external charts.
    pub version: Option<String>,
    /// Our extension (OSM): values written to a 0600 file and passed with `-f`.
    pub values: Option<Value>,
    /// Our extension: repository credentials (the password goes to Helm on stdin from a 0600
    /// file) and a CA file from the package.
    pub repo_username: Option<String>,
    pub repo_password: Option<crate::secret::Secret>,
    pub repo_ca_file: Option<String>,
}

impl Release {
    /// A release known only by name (upgrade/rollback of a recorded release).
    pub fn named(name: &str) -> Release {
        Release {
            name: name.to_string(),
            source: ChartSource::Oci { reference: String::new() },
            set: vec![],
            version: None,
            values: None,
            repo_username: None,
            repo_password: None,
            repo_ca_file: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct VduMap {
    pub release: String,
    /// Our extension: the scaling aspect of this VDU (Tacker read it from the VNFD).
    pub aspect_id: Option<String>,
    /// Our extension: the VNFD's vdu_profile bounds (Tacker read them from the VNFD).
    pub min: Option<u32>,
    pub max: Option<u32>,
}

#[derive(Clone, Debug, Default)]
pub struct CnfParams {
    pub namespace: String,
    pub releases: Vec<Release>,
    pub replica_values: BTreeMap<String, String>,
    pub vdu_mapping: BTreeMap<String, VduMap>,
    /// Our extension: initial replicas per aspect (Tacker took them from the instantiation level).
    pub replicas: BTreeMap<String, u32>,
    pub warnings: Vec<String>,
}

/// Tacker's `_is_use_helm_flag`: a string is compared case-insensitively to "true".
pub fn flag(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        _ => false,
    }
}

/// Kubernetes names: DNS-1123 labels (releases ≤ 53, namespaces ≤ 63).
pub fn dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// `<chart>-<version>.tgz` → `<chart>` (Tacker: the name with its last `-…` part removed).
pub fn chart_dir_of(file: &str) -> Option<String> {
    let stem = file.rsplit('/').next()?.strip_suffix(".tgz")?;
    let (name, _version) = stem.rsplit_once('-')?;
    (!name.is_empty()).then(|| name.to_string())
}

fn err(file: &str, path: &str, msg: impl Into<String>) -> Error {
    Error::input(file, format!("additionalParams.{path}"), msg)
}

fn string(m: &Map<String, Value>, key: &str, file: &str, at: &str) -> Result<Option<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Err(err(file, &format!("{at}.{key}"), "must not be empty")),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(err(file, &format!("{at}.{key}"), "must be a string")),
    }
}

/// The keys of one `using_helm_install_param` item (others are reported and ignored).
const RELEASE_KEYS: [&str; 12] = [
    "exthelmchart",
    "helmreleasename",
    "helmparameter",
    "helmchartfile_path",
    "helmrepositoryname",
    "helmchartname",
    "exthelmrepo_url",
    "helmchartversion",
    "values",
    "exthelmrepo_username",
    "exthelmrepo_password",
    "exthelmrepo_ca_file",
];

impl CnfParams {
    pub fn from_additional_params(ap: &Map<String, Value>, file: &str) -> Result<CnfParams> {
        if !flag(ap.get("use_helm")) {
            return Err(err(file, "use_helm", "is not true: this request does not deploy Helm charts"));
        }
        let mut warnings = Vec::new();
        let namespace = string(ap, "namespace", file, "")?.unwrap_or_else(|| "default".into());
        if !dns_label(&namespace, 63) {
            return Err(err(file, "namespace", format!("'{namespace}' is not a Kubernetes namespace name")));
        }
        let items = match ap.get("using_helm_install_param") {
            Some(Value::Array(a)) if !a.is_empty() => a,
            _ => {
                return Err(err(
                    file,
                    "using_helm_install_param",
                    "Parameter input values missing for the key 'using_helm_install_param'",
                ))
            }
        };
        let mut releases: Vec<Release> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("using_helm_install_param[{i}]");
            let Value::Object(m) = item else { return Err(err(file, &at, "must be an object")) };
            let r = release(m, &Item { file, at: &at }, &mut warnings)?;
            if releases.iter().any(|x| x.name == r.name) {
                return Err(err(file, &format!("{at}.helmreleasename"), format!("'{}' is used twice", r.name)));
            }
            releases.push(r);
        }
        let replica_values = replica_values(ap, file)?;
        let vdu_mapping = vdu_mapping(ap, file, &releases)?;
        let replicas = replicas(ap, file, &replica_values)?;
        Ok(CnfParams { namespace, releases, replica_values, vdu_mapping, replicas, warnings })
    }
}

/// Where an item sits, for error messages.
struct Item<'a> {
    file: &'a str,
    at: &'a str,
}

impl Item<'_> {
    fn err(&self, key: &str, msg: impl Into<String>) -> Error {
        err(self.file, &format!("{}.{key}", self.at), msg)
    }

    fn string(&self, m: &Map<String, Value>, key: &str) -> Result<Option<String>> {
        string(m, key, self.file, self.at)
    }

    /// A key Tacker requires, with Tacker's message.
    fn required(&self, m: &Map<String, Value>, key: &str) -> Result<String> {
        self.string(m, key)?.ok_or_else(|| self.err(key, format!("Parameter input values missing for the key '{key}'")))
    }
}

/// One `using_helm_install_param` item.
fn release(m: &Map<String, Value>, it: &Item, warnings: &mut Vec<String>) -> Result<Release> {
    if m.get("exthelmchart").is_none() {
        return Err(it.err("exthelmchart", "Parameter input values missing for the key 'exthelmchart'"));
    }
    let name = release_name(m, it, warnings)?;
    let source = if flag(m.get("exthelmchart")) { external_chart(m, it)? } else { local_chart(m, it)? };
    let set = helm_parameters(m, it)?;
    let version = it.string(m, "helmchartversion")?;
    let values = m.get("values").cloned().filter(|v| !v.is_null());
    if values.as_ref().is_some_and(|v| !v.is_object()) {
        return Err(it.err("values", "must be an object"));
    }
    let repo_username = it.string(m, "exthelmrepo_username")?;
    let repo_password = it.string(m, "exthelmrepo_password")?.map(crate::secret::Secret::new);
    if repo_username.is_some() != repo_password.is_some() {
        return Err(it.err("exthelmrepo_password", "exthelmrepo_username and exthelmrepo_password go together"));
    }
    let repo_ca_file = it.string(m, "exthelmrepo_ca_file")?;
    if repo_ca_file.as_ref().is_some_and(|p| p.starts_with('/') || p.split('/').any(|c| c == "..")) {
        return Err(it.err("exthelmrepo_ca_file", "must stay inside the VNF package"));
    }
    for k in m.keys().filter(|k| !RELEASE_KEYS.contains(&k.as_str())) {
        warnings.push(format!("additionalParams.{}.{k}: unknown key, ignored", it.at));
    }
    Ok(Release { name, source, set, version, values, repo_username, repo_password, repo_ca_file })
}

/// The request's name, or OSM's rule (chart name + 10 random digits) when it gives none
/// (Tacker required one).
fn release_name(m: &Map<String, Value>, it: &Item, warnings: &mut Vec<String>) -> Result<String> {
    let name = if m.get("helmreleasename").is_none() {
        let chart = it
            .string(m, "helmchartname")?
            .or_else(|| it.string(m, "helmchartfile_path").ok().flatten().and_then(|p| chart_dir_of(&p)))
            .unwrap_or_else(|| "release".into());
        warnings.push(format!("additionalParams.{}.helmreleasename: not given; generated by OSM's rule", it.at));
        crate::cnf::helm_cmd::generated_release_name(&chart, fastrand::u64(..))
    } else {
        it.required(m, "helmreleasename")?
    };
    if !dns_label(&name, 53) {
        return Err(it.err(
            "helmreleasename",
            format!("'{name}' is not a valid release name (lowercase letters, digits, '-', at most 53)"),
        ));
    }
    Ok(name)
}

fn external_chart(m: &Map<String, Value>, it: &Item) -> Result<ChartSource> {
    let chart = it.required(m, "helmchartname")?;
    let url = it.required(m, "exthelmrepo_url")?;
    if url.starts_with("oci://") {
        return Ok(ChartSource::Oci { reference: format!("{}/{chart}", url.trim_end_matches('/')) });
    }
    let repo = it.required(m, "helmrepositoryname")?;
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(char::is_whitespace) {
        return Err(it.err("exthelmrepo_url", format!("'{url}' is not an http(s):// or oci:// URL")));
    }
    if !repo.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)) {
        return Err(it.err("helmrepositoryname", format!("'{repo}' is not a repository name")));
    }
    Ok(ChartSource::External { repo, chart, url })
}

fn local_chart(m: &Map<String, Value>, it: &Item) -> Result<ChartSource> {
    let path = it.required(m, "helmchartfile_path")?;
    if path.starts_with('/') || path.split('/').any(|c| c == "..") {
        return Err(it.err("helmchartfile_path", format!("'{path}' must stay inside the VNF package")));
    }
    let chart_dir = chart_dir_of(&path)
        .ok_or_else(|| it.err("helmchartfile_path", format!("'{path}' is not named <chart>-<version>.tgz")))?;
    Ok(ChartSource::Local { path, chart_dir })
}

/// `helmparameter`: `key=value` strings, each later one literal `--set` argument.
fn helm_parameters(m: &Map<String, Value>, it: &Item) -> Result<Vec<String>> {
    match m.get("helmparameter") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, p)| match p.as_str() {
                Some(s) if s.contains('=') && !s.starts_with('=') && !s.contains('\0') => Ok(s.to_string()),
                _ => Err(it.err(&format!("helmparameter[{j}]"), "must be a \"key=value\" string")),
            })
            .collect(),
        Some(_) => Err(it.err("helmparameter", "must be an array of \"key=value\"")),
    }
}

/// `helm_replica_values`: aspect → the values path holding its replica count.
fn replica_values(ap: &Map<String, Value>, file: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = ap.get("helm_replica_values") {
        for (k, v) in m {
            let p = v
                .as_str()
                .filter(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c)));
            let p = p.ok_or_else(|| {
                err(file, &format!("helm_replica_values.{k}"), "must be a values path like \"replicaCount\"")
            })?;
            out.insert(k.clone(), p.to_string());
        }
    }
    Ok(out)
}

/// `vdu_mapping`: VDU → its release (and our extensions: aspect, bounds). When present, every
/// release must be mapped.
fn vdu_mapping(ap: &Map<String, Value>, file: &str, releases: &[Release]) -> Result<BTreeMap<String, VduMap>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = ap.get("vdu_mapping") {
        for (vdu, v) in m {
            let at = format!("vdu_mapping.{vdu}");
            let it = Item { file, at: &at };
            let Value::Object(o) = v else { return Err(err(file, &at, "must be an object")) };
            let release = it.string(o, "helmreleasename")?.ok_or_else(|| it.err("helmreleasename", "is required"))?;
            if !releases.iter().any(|r| r.name == release) {
                return Err(
                    it.err("helmreleasename", format!("'{release}' is not a release of using_helm_install_param"))
                );
            }
            // Tacker's `kind` and `name` are checked for type; nothing here needs their values.
            it.string(o, "kind")?;
            it.string(o, "name")?;
            let num = |k: &str| o.get(k).and_then(Value::as_u64).map(|n| n as u32);
            let aspect_id = it.string(o, "aspect_id")?;
            let (min, max) = (num("min_number_of_instances"), num("max_number_of_instances"));
            out.insert(vdu.clone(), VduMap { release, aspect_id, min, max });
        }
    }
    for r in releases {
        if !out.is_empty() && !out.values().any(|v| v.release == r.name) {
            return Err(err(file, "vdu_mapping", format!("helmreleasename '{}' is missing in vdu_mapping", r.name)));
        }
    }
    Ok(out)
}

/// Our extension `replicas`: initial replicas per aspect.
fn replicas(ap: &Map<String, Value>, file: &str, paths: &BTreeMap<String, String>) -> Result<BTreeMap<String, u32>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = ap.get("replicas") {
        for (k, v) in m {
            let n = v.as_u64().ok_or_else(|| err(file, &format!("replicas.{k}"), "must be a number"))?;
            if !paths.contains_key(k) {
                return Err(err(
                    file,
                    &format!("replicas.{k}"),
                    format!("Replica value for aspectId '{k}' is missing"),
                ));
            }
            out.insert(k.clone(), n as u32);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Result<CnfParams> {
        CnfParams::from_additional_params(v.as_object().unwrap(), "req.json")
    }

    #[test]
    fn tacker_samples_shape() {
        let c = p(json!({"use_helm": "True", "using_helm_install_param": [
            {"exthelmchart": "false", "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz", "helmreleasename": "vdu1", "helmparameter": ["service.port=8081"]},
            {"exthelmchart": true, "helmreleasename": "vdu2", "helmrepositoryname": "bitnami", "helmchartname": "apache", "exthelmrepo_url": "https://charts.bitnami.com/bitnami"}],
            "helm_replica_values": {"vdu1_aspect": "replicaCount", "vdu2_aspect": "replicaCount"},
            "vdu_mapping": {"VDU1": {"kind": "Deployment", "name": "vdu1-localhelm", "helmreleasename": "vdu1"},
                            "VDU2": {"kind": "Deployment", "name": "vdu2-apache", "helmreleasename": "vdu2"}}}))
        .unwrap();
        assert_eq!(c.namespace, "default");
        assert_eq!(
            c.releases[0].source,
            ChartSource::Local { path: "Files/kubernetes/localhelm-0.1.0.tgz".into(), chart_dir: "localhelm".into() }
        );
        assert!(matches!(c.releases[1].source, ChartSource::External { .. }));
        assert_eq!(c.vdu_mapping["VDU2"].release, "vdu2");
    }

    #[test]
    fn tackers_messages_and_paths() {
        let e = p(json!({"use_helm": true})).unwrap_err().to_string();
        assert!(e.contains("Parameter input values missing for the key 'using_helm_install_param'"), "{e}");
        let e = p(json!({"use_helm": true, "using_helm_install_param": [{"exthelmchart": true, "helmreleasename": "r", "helmchartname": "c", "exthelmrepo_url": "http://x"}]})).unwrap_err().to_string();
        assert!(e.contains("using_helm_install_param[0].helmrepositoryname: Parameter input values missing for the key 'helmrepositoryname'"), "{e}");
        let e = p(json!({"use_helm": true, "using_helm_install_param": [{"exthelmchart": false, "helmreleasename": "r", "helmchartfile_path": "../x-1.tgz"}]})).unwrap_err().to_string();
        assert!(e.contains("must stay inside the VNF package"), "{e}");
        let e = p(json!({"use_helm": true, "using_helm_install_param": [{"exthelmchart": false, "helmreleasename": "r", "helmchartfile_path": "a-1.tgz"}],
                         "helm_replica_values": {"x": "replicaCount"}, "replicas": {"y": 2}})).unwrap_err().to_string();
        assert!(e.contains("Replica value for aspectId 'y' is missing"), "{e}");
        let e = p(json!({"use_helm": true, "using_helm_install_param": [{"exthelmchart": false, "helmreleasename": "r", "helmchartfile_path": "a-1.tgz"}],
                         "vdu_mapping": {"V": {"helmreleasename": "other"}}})).unwrap_err().to_string();
        assert!(e.contains("vdu_mapping.V.helmreleasename"), "{e}");
        assert!(p(json!({"use_helm": "TRUE", "namespace": "Bad_NS", "using_helm_install_param": [{"exthelmchart": false, "helmreleasename": "r", "helmchartfile_path": "a-1.tgz"}]})).is_err());
    }

    #[test]
    fn flags_and_names() {
        assert!(flag(Some(&json!("tRuE"))) && flag(Some(&json!(true))) && !flag(Some(&json!("yes"))) && !flag(None));
        assert_eq!(chart_dir_of("Files/kubernetes/localhelm-0.1.0.tgz").as_deref(), Some("localhelm"));
        assert_eq!(chart_dir_of("my-chart-1.2.3.tgz").as_deref(), Some("my-chart"));
        assert_eq!(chart_dir_of("chart.tgz"), None);
        assert!(dns_label("vdu1", 53) && !dns_label("a;b", 53) && !dns_label("-a", 53));
    }
}
