//! The CNF side of `additionalParams` (Tacker's Kubernetes InfraDriver with Helm): `use_helm`,
//! `namespace`, `using_helm_install_param[]`, `helm_replica_values`, `vdu_mapping`. Checked
//! before anything connects, with Tacker's messages where Tacker had one, and a JSON path always.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::cnf::names;
use crate::error::{Error, Result};
use crate::secret::{is_secret_name, Secret};

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

/// Where a secret helm value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretFrom {
    /// `helmsecretparameter: ["key=value"]`: the value as written (kept out of argv and output).
    Literal(Secret),
    /// `key=@env:NAME`: the driver process's environment variable NAME.
    Env(String),
    /// `key=@file:PATH`: a file of the VNF package (its whole content is the value).
    File(String),
}

/// A helm value that must never reach argv, a plan, an event or a result: it travels in a 0600
/// file on the master, passed with `--set-file KEY=FILE` and removed afterwards.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretSet {
    pub key: String,
    pub from: SecretFrom,
    /// Filled from `from` before anything connects (`run::instantiate::read_secrets`), for the
    /// operations that install or upgrade with the request's values.
    pub value: Option<Secret>,
}

#[derive(Clone, Debug)]
pub struct Release {
    pub name: String,
    pub source: ChartSource,
    /// `helmparameter`: each one `--set`, passed as one quoted argument.
    pub set: Vec<String>,
    /// `helmparameter` items taking their value from `@env:`/`@file:`, and `helmsecretparameter`.
    pub secret_set: Vec<SecretSet>,
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
            secret_set: vec![],
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
    /// Aspects, deltas and VDU bounds from the package's VNFD (filled by `run::scale::check`;
    /// empty without a package). `vdu_mapping`'s own keys override them.
    pub scaling: crate::cnf::vnfd::Scaling,
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
        Some(Value::String(s)) if s.contains(|c: char| c.is_control()) => {
            Err(err(file, &format!("{at}.{key}"), "must not hold control characters (newline, NUL, ...)"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(err(file, &format!("{at}.{key}"), "must be a string")),
    }
}

/// The keys of one `using_helm_install_param` item (others are reported and ignored).
const RELEASE_KEYS: [&str; 13] = [
    "exthelmchart",
    "helmreleasename",
    "helmparameter",
    "helmsecretparameter",
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
    /// Check a request's params without an instance (a hook's `check`, a site's render test):
    /// a release name generated here is only a stand-in; the operations use [`Self::for_instance`].
    pub fn from_additional_params(ap: &Map<String, Value>, file: &str) -> Result<CnfParams> {
        CnfParams::for_instance(ap, file, "")
    }

    /// The params of VNF instance `instance`: a release the request does not name gets a name
    /// derived from the instance id, the item's place and its chart, the same on every run.
    pub fn for_instance(ap: &Map<String, Value>, file: &str, instance: &str) -> Result<CnfParams> {
        if !flag(ap.get("use_helm")) {
            return Err(err(file, "use_helm", "is not true: this request does not deploy Helm charts"));
        }
        let mut warnings = Vec::new();
        let namespace = string(ap, "namespace", file, "")?.unwrap_or_else(|| "default".into());
        names::namespace(&namespace).map_err(|m| err(file, "namespace", m))?;
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
        // Releases whose names this driver made up: no vdu_mapping could name them.
        let mut generated = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("using_helm_install_param[{i}]");
            let Value::Object(m) = item else { return Err(err(file, &at, "must be an object")) };
            let seed = format!("{instance}/{i}");
            let r = release(m, &Item { file, at: &at }, &seed, &mut warnings)?;
            if m.get("helmreleasename").is_none() {
                generated.push(r.name.clone());
            }
            if releases.iter().any(|x| x.name == r.name) {
                return Err(err(file, &format!("{at}.helmreleasename"), format!("'{}' is used twice", r.name)));
            }
            releases.push(r);
        }
        let replica_values = replica_values(ap, file)?;
        let vdu_mapping = vdu_mapping(ap, file, &releases, &generated)?;
        let replicas = replicas(ap, file, &replica_values)?;
        Ok(CnfParams {
            namespace,
            releases,
            replica_values,
            vdu_mapping,
            replicas,
            scaling: Default::default(),
            warnings,
        })
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
fn release(m: &Map<String, Value>, it: &Item, seed: &str, warnings: &mut Vec<String>) -> Result<Release> {
    if m.get("exthelmchart").is_none() {
        return Err(it.err("exthelmchart", "Parameter input values missing for the key 'exthelmchart'"));
    }
    let name = release_name(m, it, seed, warnings)?;
    let source = if flag(m.get("exthelmchart")) { external_chart(m, it)? } else { local_chart(m, it)? };
    let (set, mut secret_set) = helm_parameters(m, it, "helmparameter", false)?;
    secret_set.extend(helm_parameters(m, it, "helmsecretparameter", true)?.1);
    let version = it.string(m, "helmchartversion")?;
    if let Some(v) = &version {
        names::version(v).map_err(|e| it.err("helmchartversion", e))?;
    }
    let values = m.get("values").cloned().filter(|v| !v.is_null());
    if values.as_ref().is_some_and(|v| !v.is_object()) {
        return Err(it.err("values", "must be an object"));
    }
    let mut repo_username = it.string(m, "exthelmrepo_username")?;
    let mut repo_password = it.string(m, "exthelmrepo_password")?.map(Secret::new);
    if repo_username.is_some() != repo_password.is_some() {
        return Err(it.err("exthelmrepo_password", "exthelmrepo_username and exthelmrepo_password go together"));
    }
    if let (ChartSource::External { url, .. }, Some((u, p))) = (&source, url_credentials(m)) {
        // Userinfo in the URL: it goes to Helm as --username/--password-stdin like the explicit
        // fields, and the URL is used (and shown, and recorded) without it.
        if repo_username.is_some() {
            return Err(it.err(
                "exthelmrepo_url",
                format!("'{url}' has credentials and so do exthelmrepo_username/password: keep one"),
            ));
        }
        (repo_username, repo_password) = (Some(u), Some(Secret::new(p)));
    }
    let repo_ca_file = it.string(m, "exthelmrepo_ca_file")?;
    if repo_ca_file.as_ref().is_some_and(|p| !package_path(p)) {
        return Err(it.err("exthelmrepo_ca_file", "must stay inside the VNF package"));
    }
    for k in m.keys().filter(|k| !RELEASE_KEYS.contains(&k.as_str())) {
        warnings.push(format!("additionalParams.{}.{}: unknown key, ignored", it.at, crate::error::excerpt(k)));
    }
    Ok(Release { name, source, set, secret_set, version, values, repo_username, repo_password, repo_ca_file })
}

/// The userinfo of an item's `exthelmrepo_url` (checked valid before), as (user, password).
fn url_credentials(m: &Map<String, Value>) -> Option<(String, String)> {
    names::url(m.get("exthelmrepo_url")?.as_str()?).ok()?.1
}

/// A relative path that stays inside the VNF package.
fn package_path(p: &str) -> bool {
    !p.starts_with('/') && !p.split('/').any(|c| c == "..") && !p.contains(['\\', '\0'])
}

/// The request's name, or OSM's rule (chart name + 10 digits) when it gives none (Tacker
/// required one). OSM's digits are random, so a re-run installed a second release; ours come
/// from `seed` (the instance id and the item's place) and the chart, so every run of the same
/// request for the same instance picks the same name, and two instances never share one.
fn release_name(m: &Map<String, Value>, it: &Item, seed: &str, warnings: &mut Vec<String>) -> Result<String> {
    let name = if m.get("helmreleasename").is_none() {
        let chart = it
            .string(m, "helmchartname")?
            .or_else(|| it.string(m, "helmchartfile_path").ok().flatten().and_then(|p| chart_dir_of(&p)))
            .unwrap_or_else(|| "release".into());
        let name = crate::cnf::helm_cmd::generated_release_name(&chart, name_digits(seed, &chart));
        warnings.push(format!(
            "additionalParams.{}.helmreleasename: not given; '{name}' derived from the VNF instance id and the chart",
            it.at
        ));
        name
    } else {
        it.required(m, "helmreleasename")?
    };
    names::release(&name).map_err(|e| it.err("helmreleasename", e))?;
    Ok(name)
}

/// The 10 digits of a generated release name: the first 8 bytes of SHA-256(seed, chart).
pub fn name_digits(seed: &str, chart: &str) -> u64 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("{seed}\0{chart}").as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

fn external_chart(m: &Map<String, Value>, it: &Item) -> Result<ChartSource> {
    let chart = it.required(m, "helmchartname")?;
    names::chart(&chart).map_err(|e| it.err("helmchartname", e))?;
    let url = it.required(m, "exthelmrepo_url")?;
    let (bare, creds) = names::url(&url).map_err(|e| it.err("exthelmrepo_url", e))?;
    if url.starts_with("oci://") {
        if creds.is_some() {
            return Err(it.err(
                "exthelmrepo_url",
                format!(
                    "'{}': credentials in an oci:// URL are not supported (log the masters in to the registry)",
                    crate::url_mask::mask_userinfo(&url)
                ),
            ));
        }
        return Ok(ChartSource::Oci { reference: format!("{}/{chart}", bare.trim_end_matches('/')) });
    }
    let repo = it.required(m, "helmrepositoryname")?;
    if url.starts_with("oci://") || !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(it.err("exthelmrepo_url", "is not an http(s):// or oci:// URL"));
    }
    names::repo(&repo).map_err(|e| it.err("helmrepositoryname", e))?;
    Ok(ChartSource::External { repo, chart, url: bare })
}

fn local_chart(m: &Map<String, Value>, it: &Item) -> Result<ChartSource> {
    let path = it.required(m, "helmchartfile_path")?;
    if !package_path(&path) {
        return Err(it.err(
            "helmchartfile_path",
            format!("'{}' must stay inside the VNF package", crate::error::excerpt(&path)),
        ));
    }
    let chart_dir = chart_dir_of(&path).ok_or_else(|| {
        it.err("helmchartfile_path", format!("'{}' is not named <chart>-<version>.tgz", crate::error::excerpt(&path)))
    })?;
    names::chart(&chart_dir).map_err(|e| it.err("helmchartfile_path", e))?;
    let file = path.rsplit('/').next().unwrap_or(&path);
    if file.starts_with(['-', '.']) {
        return Err(it.err("helmchartfile_path", format!("'{}' is not a chart file name", crate::error::excerpt(file))));
    }
    Ok(ChartSource::Local { path, chart_dir })
}

/// `helmparameter` (`secret` false) or `helmsecretparameter` (true): `key=value` strings. A
/// plain item becomes one literal `--set` argument; an item whose value is `@env:NAME` or
/// `@file:PATH`, an item whose key is secret-named ([`is_secret_name`]: `db.password`,
/// `tls.key`), and every `helmsecretparameter` item, becomes a [`SecretSet`]. A literal value
/// that starts with `@env:`/`@file:` is written with a doubled `@` (`key=@@env:x`).
fn helm_parameters(
    m: &Map<String, Value>,
    it: &Item,
    field: &str,
    secret: bool,
) -> Result<(Vec<String>, Vec<SecretSet>)> {
    let items = match m.get(field) {
        None | Some(Value::Null) => return Ok((vec![], vec![])),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(it.err(field, "must be an array of \"key=value\"")),
    };
    let (mut plain, mut secrets) = (Vec::new(), Vec::new());
    for (j, p) in items.iter().enumerate() {
        let at = format!("{field}[{j}]");
        let s = p.as_str().ok_or_else(|| it.err(&at, "must be a \"key=value\" string"))?;
        names::set_item(s).map_err(|e| it.err(&at, e))?;
        let (key, value) = s.split_once('=').expect("checked by set_item");
        let from = if let Some(name) = value.strip_prefix("@env:") {
            if !(name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
            {
                return Err(
                    it.err(&at, format!("'{}' is not an environment variable name", crate::error::excerpt(name)))
                );
            }
            Some(SecretFrom::Env(name.to_string()))
        } else if let Some(path) = value.strip_prefix("@file:") {
            if path.is_empty() || !package_path(path) {
                return Err(it.err(&at, "@file: must name a file inside the VNF package"));
            }
            Some(SecretFrom::File(path.to_string()))
        } else if secret || is_secret_name(key) {
            // A `helmparameter` item whose name says secret (`db.password=…`) is one too: it
            // would otherwise show in plans, `-v` events, errors and the master's process list.
            let literal = value.strip_prefix('@').filter(|v| v.starts_with("@env:") || v.starts_with("@file:"));
            Some(SecretFrom::Literal(Secret::new(literal.unwrap_or(value))))
        } else {
            None
        };
        match from {
            Some(from) => {
                // The key reaches Helm as `--set-file KEY=FILE`: Helm's own key syntax, without
                // the `,` that would start a second item.
                if !key.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.[]/".contains(&c)) {
                    return Err(it.err(
                        &at,
                        format!(
                            "'{}' is not a values key (letters, digits, '_', '-', '.', '[n]')",
                            crate::error::excerpt(key)
                        ),
                    ));
                }
                secrets.push(SecretSet { key: key.to_string(), from, value: None });
            }
            None => match value.strip_prefix('@').filter(|v| v.starts_with("@env:") || v.starts_with("@file:")) {
                Some(literal) => plain.push(format!("{key}={literal}")),
                None => plain.push(s.to_string()),
            },
        }
    }
    Ok((plain, secrets))
}

/// The release an aspect scales.
pub fn aspect_release<'p>(p: &'p CnfParams, aspect: &str) -> Option<&'p Release> {
    aspect_vdu(p, aspect).map(|(_, r)| r)
}

/// The VDU (when known) and release an aspect scales: the vdu_mapping entry whose `aspect_id`
/// (our extension) names it; else a VDU the VNFD's VduScalingAspectDeltas give the aspect that
/// vdu_mapping maps to a release (Tacker's way); else the only release.
pub fn aspect_vdu<'p>(p: &'p CnfParams, aspect: &str) -> Option<(Option<&'p str>, &'p Release)> {
    let by_ext = p.vdu_mapping.iter().find(|(_, v)| v.aspect_id.as_deref() == Some(aspect));
    let by_vnfd = || {
        let a = p.scaling.aspects.get(aspect)?;
        a.vdus().find_map(|vdu| p.vdu_mapping.get_key_value(vdu))
    };
    match by_ext.or_else(by_vnfd) {
        Some((vdu, v)) => p.releases.iter().find(|r| r.name == v.release).map(|r| (Some(vdu.as_str()), r)),
        None if p.releases.len() == 1 => p.releases.first().map(|r| (None, r)),
        None => None,
    }
}

/// The secret keys the recorded request gives `release` (masked in what Helm reports back).
pub fn secret_keys<'p>(p: &'p CnfParams, release: &str) -> &'p [SecretSet] {
    p.releases.iter().find(|r| r.name == release).map(|r| r.secret_set.as_slice()).unwrap_or(&[])
}

/// `helm_replica_values`: aspect → the values path holding its replica count.
fn replica_values(ap: &Map<String, Value>, file: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = ap.get("helm_replica_values") {
        for (k, v) in m {
            let p = v.as_str().filter(|p| {
                p.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && p.len() <= 253
                    && p.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
            });
            let p = p.ok_or_else(|| {
                err(file, &format!("helm_replica_values.{k}"), "must be a values path like \"replicaCount\"")
            })?;
            out.insert(k.clone(), p.to_string());
        }
    }
    Ok(out)
}

/// `vdu_mapping`: VDU → its release (and our extensions: aspect, bounds). When present, every
/// release the request names must be mapped; one whose name is `generated` (OSM's rule: the
/// request gave none) cannot be, and sits beside the mapping unmapped (it is not scaled by an
/// aspect of the mapping).
fn vdu_mapping(
    ap: &Map<String, Value>,
    file: &str,
    releases: &[Release],
    generated: &[String],
) -> Result<BTreeMap<String, VduMap>> {
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
            let num = |k: &str| replica_count(o.get(k), file, &format!("{at}.{k}"));
            let aspect_id = it.string(o, "aspect_id")?;
            let (min, max) = (num("min_number_of_instances")?, num("max_number_of_instances")?);
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    return Err(
                        it.err("max_number_of_instances", format!("{hi} is below min_number_of_instances {lo}"))
                    );
                }
            }
            out.insert(vdu.clone(), VduMap { release, aspect_id, min, max });
        }
    }
    for r in releases.iter().filter(|r| !generated.contains(&r.name)) {
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
            let n = replica_count(Some(v), file, &format!("replicas.{k}"))?
                .ok_or_else(|| err(file, &format!("replicas.{k}"), "must be a number"))?;
            if !paths.contains_key(k) {
                return Err(err(
                    file,
                    &format!("replicas.{k}"),
                    format!("Replica value for aspectId '{k}' is missing"),
                ));
            }
            out.insert(k.clone(), n);
        }
    }
    Ok(out)
}

/// Kubernetes replica counts are int32: a whole number from 0 to 2147483647 (a JSON number, or
/// a string of digits as Tacker's requests sometimes hold). Nothing wraps or rounds.
fn replica_count(v: Option<&Value>, file: &str, at: &str) -> Result<Option<u32>> {
    const MAX: u64 = i32::MAX as u64;
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 10 && s.bytes().all(|c| c.is_ascii_digit()) => {
            s.parse().ok()
        }
        Some(_) => None,
    };
    match n {
        Some(n) if n <= MAX => Ok(Some(n as u32)),
        _ => Err(err(file, at, format!("must be a whole number from 0 to {MAX}"))),
    }
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
        assert!(names::release("vdu1").is_ok() && names::release("a;b").is_err() && names::release("-a").is_err());
    }

    fn one(item: Value, extra: Value) -> Result<CnfParams> {
        let mut ap = json!({"use_helm": true, "using_helm_install_param": [item]});
        for (k, v) in extra.as_object().unwrap() {
            ap[k] = v.clone();
        }
        p(ap)
    }

    fn ext() -> Value {
        json!({"exthelmchart": true, "helmreleasename": "r", "helmrepositoryname": "repo", "helmchartname": "c",
               "exthelmrepo_url": "https://bob:pw%21@h/c"})
    }

    #[test]
    fn url_userinfo_becomes_the_repository_credentials() {
        let c = one(ext(), json!({})).unwrap();
        let r = &c.releases[0];
        assert_eq!(
            r.source,
            ChartSource::External { repo: "repo".into(), chart: "c".into(), url: "https://h/c".into() }
        );
        assert_eq!(
            (r.repo_username.as_deref(), r.repo_password.as_ref().map(|p| p.expose())),
            (Some("bob"), Some("pw!"))
        );
    }

    #[test]
    fn secret_values_come_from_literals_env_or_files_and_a_doubled_at_is_literal() {
        let mut item = ext();
        item["helmparameter"] = json!(["a=@env:TOKEN", "b=@file:Files/k", "c=@@env:x", "d=plain"]);
        item["helmsecretparameter"] = json!(["e.f=s3cret"]);
        let r = one(item, json!({})).unwrap().releases.remove(0);
        assert_eq!(r.set, vec!["c=@env:x".to_string(), "d=plain".to_string()]);
        let from: Vec<(&str, &SecretFrom)> = r.secret_set.iter().map(|s| (s.key.as_str(), &s.from)).collect();
        assert_eq!(
            from,
            vec![
                ("a", &SecretFrom::Env("TOKEN".into())),
                ("b", &SecretFrom::File("Files/k".into())),
                ("e.f", &SecretFrom::Literal(Secret::new("s3cret")))
            ]
        );
        assert!(!format!("{r:?}").contains("s3cret"));
    }

    #[test]
    fn replica_counts_are_int32_and_never_wrap() {
        let rv = json!({"helm_replica_values": {"a": "replicaCount"}});
        for (n, ok) in [
            (json!(0), true),
            (json!("3"), true),
            (json!(2147483647u64), true),
            (json!(2147483648u64), false),
            (json!(4294967297u64), false),
            (json!(-1), false),
            (json!(1.5), false),
            (json!("1e3"), false),
        ] {
            let mut extra = rv.clone();
            extra["replicas"] = json!({"a": n.clone()});
            let r = one(ext(), extra);
            assert_eq!(r.is_ok(), ok, "{n}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("additionalParams.replicas.a"), "{e}");
            }
        }
    }

    #[test]
    fn a_generated_release_name_is_the_same_on_every_run_and_differs_between_instances() {
        let mut item = ext();
        item.as_object_mut().unwrap().remove("helmreleasename");
        let ap = json!({"use_helm": true, "using_helm_install_param": [item.clone(), item]});
        let name = |inst: &str| {
            let c = CnfParams::for_instance(ap.as_object().unwrap(), "r.json", inst).unwrap();
            c.releases.iter().map(|r| r.name.clone()).collect::<Vec<_>>()
        };
        let a = name("inst-a");
        assert_eq!(a, name("inst-a"));
        assert_ne!(a, name("inst-b"));
        assert_ne!(a[0], a[1], "two items of one chart get two names");
        assert!(a[0].starts_with("c-") && a[0].len() == "c-".len() + 10, "{a:?}");
        assert!(names::release(&a[0]).is_ok());
    }

    #[test]
    fn a_release_with_a_generated_name_sits_beside_a_vdu_mapping() {
        let c = p(json!({"use_helm": true, "using_helm_install_param": [
            {"exthelmchart": "false", "helmreleasename": "vdu1", "helmchartfile_path": "Files/c1-1.0.tgz"},
            {"exthelmchart": "true", "helmrepositoryname": "r", "helmchartname": "extra",
             "exthelmrepo_url": "http://192.0.2.50/c"}],
            "vdu_mapping": {"VDU1": {"helmreleasename": "vdu1"}}}))
        .unwrap();
        assert_eq!(c.releases.len(), 2);
        assert!(c.releases[1].name.starts_with("extra-"), "{:?}", c.releases[1].name);
        // A release the request names must still be mapped.
        let e = p(json!({"use_helm": true, "using_helm_install_param": [
            {"exthelmchart": "false", "helmreleasename": "vdu1", "helmchartfile_path": "Files/c1-1.0.tgz"},
            {"exthelmchart": "false", "helmreleasename": "vdu2", "helmchartfile_path": "Files/c2-1.0.tgz"}],
            "vdu_mapping": {"VDU1": {"helmreleasename": "vdu1"}}}))
        .unwrap_err()
        .to_string();
        assert!(e.contains("'vdu2' is missing in vdu_mapping"), "{e}");
    }
}
