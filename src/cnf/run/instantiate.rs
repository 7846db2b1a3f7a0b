//! `cnf instantiate`: deploy the request's charts. Its checks (the request, the names recorded
//! by an earlier run, the secret values and local charts it needs, all before anything
//! connects) and its steps (record the request, put charts and repositories on every master,
//! install or upgrade each release, idempotently) side by side.

use serde_json::{json, Map, Value};

use crate::cnf::helm_apply;
use crate::cnf::helm_cmd::{self as hc, InstallOpts};
use crate::cnf::helm_prepare;
use crate::cnf::names;
use crate::cnf::ops::{chart_ref, cmd_timeout, CnfState, Ctx, Record, ReleaseState};
use crate::cnf::params::{aspect_release, ChartSource, CnfParams, Release, SecretFrom, SecretSet};
use crate::cnf::values_file::ValuesFile;
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::Node;
use crate::request::InstantiateRequest;
use crate::secret::Secret;
use crate::secret_ref::Policy;
use crate::transport::{Source, UploadFile};

/// The instantiate request.
pub fn read_request(a: &Inputs) -> Result<InstantiateRequest> {
    a.need_request("instantiate")?.load()
}

/// A re-run of instantiate for a request that names no release reuses the names recorded by
/// the first run (item by item, when the item's chart is the same), so that a record made by an
/// older driver, whose generated names were random, is still upgraded in place.
pub fn keep_recorded_names(ap: &mut Map<String, Value>, saved: Option<&CnfState>) {
    let Some(Value::Array(old)) = saved.and_then(|s| s.params.get("using_helm_install_param")) else { return };
    let Some(Value::Array(items)) = ap.get_mut("using_helm_install_param") else { return };
    let chart = |o: &Map<String, Value>| {
        ["helmchartname", "helmchartfile_path"].map(|k| o.get(k).cloned().unwrap_or(Value::Null))
    };
    for (item, was) in items.iter_mut().zip(old) {
        let (Some(o), Some(w)) = (item.as_object_mut(), was.as_object()) else { continue };
        if o.contains_key("helmreleasename") || chart(o) != chart(w) {
            continue;
        }
        if let Some(name) = w.get("helmreleasename").filter(|n| n.is_string()) {
            o.insert("helmreleasename".into(), name.clone());
        }
    }
}

/// What the package must give before anything connects: every secret helm value (a missing
/// variable or file stops the run here; an `@env:` the request's writer may not use too) and
/// every local chart.
pub fn check_package(params: &mut CnfParams, pkg: Option<&Package>, req_file: &str, refs: &Policy) -> Result<()> {
    check_refs(params, req_file, refs)?;
    read_secrets(params, pkg, req_file, refs)?;
    for (i, r) in params.releases.iter().enumerate() {
        if let ChartSource::Local { path, .. } = &r.source {
            let pkg = pkg.ok_or_else(|| Error::input("arguments", "--package-dir", "is required for local charts"))?;
            let field = format!("additionalParams.using_helm_install_param[{i}].helmchartfile_path");
            pkg.resolve(path, req_file, &field, false)?;
        }
    }
    Ok(())
}

/// Every `@env:` reference of the request's Helm values, checked against who wrote it
/// (`secret_ref.rs`: none in a VNFM's request; an allowed name for the operator's) without
/// reading anything. A `@file:` here is a file of the VNF package (the vendor's, checked by
/// `params.rs` and the package), never one of the controller: it is not a reference to confine.
pub fn check_refs(params: &CnfParams, req_file: &str, refs: &Policy) -> Result<()> {
    for (i, r) in params.releases.iter().enumerate() {
        for sv in &r.secret_set {
            if let SecretFrom::Env(name) = &sv.from {
                crate::secret_ref::check(crate::secret_ref::Written::Env(name), refs)
                    .map_err(|m| Error::input(req_file, secret_at(i, &sv.key), m))?;
            }
        }
    }
    Ok(())
}

fn secret_at(i: usize, key: &str) -> String {
    format!("additionalParams.using_helm_install_param[{i}].{key}")
}

/// Every secret helm value of the request, read into its [`SecretSet`].
fn read_secrets(params: &mut CnfParams, pkg: Option<&Package>, req_file: &str, refs: &Policy) -> Result<()> {
    for (i, r) in params.releases.iter_mut().enumerate() {
        for sv in &mut r.secret_set {
            let at = secret_at(i, &sv.key);
            sv.value = Some(read_secret(sv, pkg, req_file, &at, refs)?);
        }
    }
    Ok(())
}

/// A secret value from where it comes from; `pkg` resolves `@file:` paths; `at` names the
/// field in errors (the value is never in one).
fn read_secret(sv: &SecretSet, pkg: Option<&Package>, file: &str, at: &str, refs: &Policy) -> Result<Secret> {
    Ok(match &sv.from {
        SecretFrom::Literal(s) => s.clone(),
        SecretFrom::Env(name) => crate::secret_ref::resolve(&format!("@env:{name}"), refs, &|k| std::env::var(k).ok())
            .map_err(|m| Error::input(file, at, m))?,
        SecretFrom::File(path) => {
            let pkg = pkg.ok_or_else(|| Error::input("arguments", "--package-dir", format!("is required for {at}")))?;
            let p = pkg.resolve(path, file, at, false)?;
            let bytes = std::fs::read(&p).map_err(|e| Error::input(file, at, format!("{}: {e}", p.display())))?;
            Secret::new(String::from_utf8(bytes).map_err(|_| Error::input(file, at, "the file is not UTF-8"))?)
        }
    })
}

/// The request's additionalParams as recorded for later operations: generated release names
/// filled in, repository URLs without userinfo (the credentials in their own fields, which the
/// store seals), and `helmsecretparameter` values masked (later operations need their keys
/// only: `--reuse-values` keeps the values in Helm).
fn recorded_params(ap: &Map<String, Value>, params: &CnfParams) -> Map<String, Value> {
    let mut ap = ap.clone();
    if let Some(Value::Array(items)) = ap.get_mut("using_helm_install_param") {
        for (item, r) in items.iter_mut().zip(&params.releases) {
            let Some(o) = item.as_object_mut() else { continue };
            o.insert("helmreleasename".into(), Value::String(r.name.clone()));
            if let ChartSource::External { url, .. } = &r.source {
                let had_userinfo = o.get("exthelmrepo_url").and_then(Value::as_str).is_some_and(|u| u != url);
                if had_userinfo {
                    o.insert("exthelmrepo_url".into(), Value::String(url.clone()));
                    if let (Some(u), Some(p)) = (&r.repo_username, &r.repo_password) {
                        o.insert("exthelmrepo_username".into(), Value::String(u.clone()));
                        o.insert("exthelmrepo_password".into(), Value::String(p.expose().to_string()));
                    }
                }
            }
            if let Some(Value::Array(secrets)) = o.get_mut("helmsecretparameter") {
                for x in secrets.iter_mut() {
                    if let Some((k, _)) = x.as_str().and_then(|s| s.split_once('=')) {
                        *x = Value::String(format!("{k}={}", crate::secret::MASK));
                    }
                }
            }
        }
    }
    ap
}

/// What instantiate records about the CNF besides its releases, all known before it connects.
pub struct Facts<'a> {
    /// The additionalParams in force.
    pub ap: &'a Map<String, Value>,
    /// Where Helm runs, as found (`__helm_info` in the record).
    pub helm_info: &'a Value,
    pub masters: &'a [String],
    /// The request's flavourId: whose VNFD flavour a later scale reads.
    pub flavour: &'a str,
    /// The cluster whose Helm environment holds the CNF's repositories.
    pub cluster_id: Option<&'a str>,
}

/// Record the request (with generated release names, so later operations find the same
/// releases): done before anything reaches a master, so a run that stops there is still known.
pub fn record_request(params: &CnfParams, f: &Facts<'_>, rec: &mut Record<'_>) -> Result<()> {
    let mut ap = recorded_params(f.ap, params);
    ap.insert("__helm_info".into(), f.helm_info.clone());
    rec.st.params = Value::Object(ap);
    rec.st.namespace = params.namespace.clone();
    rec.st.masters = f.masters.to_vec();
    rec.st.flavour_id = Some(f.flavour.to_string());
    rec.st.cluster_id = f.cluster_id.map(str::to_string);
    rec.save()
}

/// What [`distribute`] did: the active master's Helm major version, the releases it already
/// installed or upgraded there (None: left to [`run`]), and the other masters it did not reach.
pub struct Distributed {
    pub major: u32,
    applied: Option<Vec<helm_apply::Applied>>,
    pub skipped: Vec<String>,
}

/// Install or upgrade each release (unless [`distribute`] did already) and record it.
pub async fn run(c: &Ctx<'_>, d: Distributed, rec: &mut Record<'_>) -> Result<Value> {
    let s = c.s;
    rec.st.helm_major = Some(s.helm.major);
    s.rt.phase("install or upgrade the releases", &[s.master()], false);
    let all: Vec<(&Release, &[ValuesFile])> = c.params.releases.iter().map(|r| (r, &[][..])).collect();
    let mut made = Vec::new();
    let res = match d.applied {
        Some(applied) if applied.is_empty() && !c.params.releases.is_empty() => {
            // A plan (a master's answer always has a record per release it was given).
            plan_releases(c, &all).map(|p| plan_only(&all, &p, &mut made))
        }
        Some(applied) => plan_releases(c, &all).and_then(|p| finish(c, &all, &p, applied, &mut made)),
        None => apply_program(c, &all, &mut made, false).await,
    };
    let mut rels = Map::new();
    for (name, rs) in &made {
        rec.release(name, rs)?;
        rels.insert(name.clone(), serde_json::to_value(rs).expect("serializes"));
    }
    res?;
    Ok(json!({"releases": rels, "mastersNotReached": d.skipped}))
}

/// Everything each master needs, on **every** master at once (so any can take over), each in
/// one upload (when it has files to get: local charts, repository credentials, and on the active
/// master the releases' values files) and ONE exec (`src/remote/helm_prepare.sh`): Helm's
/// version, the cluster's Helm environment, the charts extracted, the repositories added and
/// updated, and on the active master the releases themselves when their command lines do not
/// wait for Helm's version (no `--atomic`, or the major version the last run recorded). A master
/// other than the active one that cannot be reached is reported, not fatal.
pub async fn distribute(c: &Ctx<'_>, recorded_major: Option<u32>) -> Result<Distributed> {
    let s = c.s;
    let nodes = s.all();
    s.rt.phase("Helm, charts and repositories on every master", &nodes, true);
    // The releases' command lines, for the Helm the last run found when `--atomic` depends on it.
    let major = if c.opts.atomic { recorded_major } else { Some(s.helm.major) };
    let all: Vec<(&Release, &[ValuesFile])> = c.params.releases.iter().map(|r| (r, &[][..])).collect();
    let planned = plan_releases(c, &all)?;
    let items = match major {
        Some(m) => plan_items(c, &all, m)?,
        None => Vec::new(),
    };
    let expect: Vec<(&str, &str)> = all.iter().map(|(r, _)| (r.name.as_str(), c.params.namespace.as_str())).collect();
    let active = s.master().name().to_string();
    let (planned, items, expect, active) = (&planned, &items, &expect, active.as_str());
    let res =
        s.rt.each(&nodes, |n| async move {
            let on_active = n.name() == active;
            let (mut uploads, charts, repos) = master_files(c)?;
            if on_active {
                uploads.extend(planned.uploads.iter().cloned());
            }
            s.rt.upload(n, uploads).await?;
            let releases: &[helm_apply::Item] = if on_active { items } else { &[] };
            let plan = helm_prepare::Plan {
                env: &s.helm.env,
                make_env: true,
                chart_dir: &names::chart_dir(c.instance),
                owner: &n.host.user,
                charts: &charts,
                repos: &repos,
                releases,
                major: if c.opts.atomic { major } else { None },
            };
            let wait = s.rt.timeouts.command + cmd_timeout(c) * 2 * releases.len() as u32;
            let Some((out, shown)) = s.program(n, helm_prepare::command(&plan)?, wait).await? else {
                // A plan: the releases are planned in this exec when they are in it.
                return Ok(helm_prepare::Prepared { major: 3, applied: (!releases.is_empty()).then(Vec::new) });
            };
            helm_prepare::parse(&out, if releases.is_empty() { &[] } else { expect })
                .map_err(|m| crate::lifecycle::fact::unreadable(n.name(), &shown, "the prepared master", m))
        })
        .await;
    let mut skipped = Vec::new();
    let mut mine = None;
    for (n, r) in res {
        match r {
            Ok(p) if n.name() == s.master().name() => mine = Some(Ok(p)),
            Ok(_) => {}
            Err(e) if n.name() == s.master().name() => mine = Some(Err(e)),
            Err(e) => skipped.push(format!("{}: {e}", n.name())),
        }
    }
    let p = mine.expect("the active master is one of them")?;
    // With another Helm than the lines were for, the program said `later` (applied: None), and
    // [`run`] applies the releases with the right ones.
    Ok(Distributed { major: p.major, applied: p.applied, skipped })
}

/// What `n` gets uploaded for the charts and repositories, and their arguments: each local chart
/// into the run directory (the program moves it into the chart directory, made there first), each
/// repository's password (a 0600 file the program feeds to Helm and removes) and CA file.
type MasterFiles = (Vec<UploadFile>, Vec<helm_prepare::LocalChart>, Vec<helm_prepare::Repo>);

fn master_files(c: &Ctx<'_>) -> Result<MasterFiles> {
    let run = format!(".mgmt-driver/run/{}", c.instance);
    let (mut uploads, mut charts, mut repos) = (Vec::new(), Vec::new(), Vec::new());
    let mut sent: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (i, r) in c.params.releases.iter().enumerate() {
        match &r.source {
            ChartSource::Local { path, chart_dir } => {
                let pkg =
                    c.pkg.ok_or_else(|| Error::input("arguments", "--package-dir", "is required for local charts"))?;
                let field = format!("additionalParams.using_helm_install_param[{i}].helmchartfile_path");
                let local = pkg.file(path, c.req_file, &field)?;
                let archive = path.rsplit('/').next().unwrap_or(path).to_string();
                let uploaded = format!("{run}/chart-{archive}");
                // Releases may share a chart (Tacker's sample deploys one chart twice): it goes
                // up and is extracted once. Two different files of one name would overwrite
                // each other's copy on the master: refused, naming the second.
                match sent.get(&uploaded) {
                    Some(first) if first == path => continue,
                    Some(first) => {
                        return Err(Error::input(
                            c.req_file,
                            field,
                            format!(
                                "'{path}' has the file name of '{first}', another release's chart; rename one of them"
                            ),
                        ))
                    }
                    None => {
                        sent.insert(uploaded.clone(), path.clone());
                    }
                }
                uploads.push(UploadFile { source: local, remote: uploaded.clone(), mode: 0o644 });
                charts.push(helm_prepare::LocalChart { uploaded, archive, chart: chart_dir.clone() });
            }
            ChartSource::External { repo, url, .. } => {
                let name = names::instance_repo(c.instance, repo);
                let creds = r.repo_username.as_deref().zip(r.repo_password.as_ref());
                let password_file = creds.map(|(_, pw)| {
                    let f = format!("{run}/repo-{name}.pw");
                    let bytes = Source::Bytes(pw.expose().as_bytes().to_vec().into());
                    uploads.push(UploadFile { source: bytes, remote: f.clone(), mode: 0o600 });
                    f
                });
                let ca_file = match &r.repo_ca_file {
                    Some(ca) => {
                        let pkg = c.pkg.ok_or_else(|| {
                            Error::input("arguments", "--package-dir", "is required for exthelmrepo_ca_file")
                        })?;
                        let remote = format!("{run}/repo-{name}-ca.crt");
                        uploads.push(UploadFile {
                            source: pkg.file(ca, c.req_file, "exthelmrepo_ca_file")?,
                            remote: remote.clone(),
                            mode: 0o600,
                        });
                        Some(remote)
                    }
                    None => None,
                };
                repos.push(helm_prepare::Repo {
                    name,
                    url: url.clone(),
                    user: creds.map(|(u, _)| u.to_string()),
                    password_file,
                    ca_file,
                });
            }
            ChartSource::Oci { .. } => {}
        }
    }
    Ok((uploads, charts, repos))
}

/// Values for one release: `helmparameter` as `--set`, the replica count of its aspect, and an
/// optional values file (uploaded 0600, removed afterwards).
fn release_sets(c: &Ctx, r: &Release) -> Vec<String> {
    let mut set = r.set.clone();
    for (aspect, n) in &c.params.replicas {
        if aspect_release(c.params, aspect).is_some_and(|x| x.name == r.name) {
            set.push(format!("{}={n}", c.params.replica_values[aspect]));
        }
    }
    set
}

/// Install or upgrade one release, idempotently ([`apply_all`] with one release).
/// `extra`: the operator's values files (`cnf install --values`), after the release's own.
pub async fn apply_release(c: &Ctx<'_>, r: &Release, extra: &[ValuesFile]) -> Result<ReleaseState> {
    let (mut done, failed) = apply_all(c, &[(r, extra)]).await;
    match (failed, done.pop()) {
        (Some(e), _) => Err(e),
        (None, Some((_, rs))) => Ok(rs),
        (None, None) => Err(Error::input("state", "release", "the node program reported no release (a bug)")),
    }
}

/// One release's values files on the master: the request's `values` (a JSON file) and each
/// secret value (its own 0600 file, `--set-file KEY=FILE`: argv holds the path only), then the
/// operator's files; returns the uploads, the `--set-file` items and the `--values` files.
fn release_files(c: &Ctx, r: &Release, extra: &[ValuesFile]) -> Result<(Vec<UploadFile>, Vec<String>, Vec<String>)> {
    let run = format!(".mgmt-driver/run/{}", c.instance);
    let (mut uploads, mut set_files, mut values_files) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(v) = &r.values {
        let f = format!("{run}/values-{}.json", r.name);
        uploads.push(UploadFile {
            source: Source::Bytes(v.to_string().into_bytes().into()),
            remote: f.clone(),
            mode: 0o600,
        });
        values_files.push(f);
    }
    for (j, sv) in r.secret_set.iter().enumerate() {
        let value = sv.value.as_ref().ok_or_else(|| {
            Error::input(c.req_file, format!("{}: secret value", sv.key), "was not read before the run (a bug)")
        })?;
        let f = format!("{run}/set-{}-{j}", r.name);
        uploads.push(UploadFile {
            source: Source::Bytes(value.expose().as_bytes().to_vec().into()),
            remote: f.clone(),
            mode: 0o600,
        });
        set_files.push(format!("{}={f}", sv.key));
    }
    for (i, f) in extra.iter().enumerate() {
        let remote = format!("{run}/values-{}-{i}.yaml", r.name);
        uploads.push(UploadFile { source: Source::Bytes(f.bytes.clone().into()), remote: remote.clone(), mode: 0o600 });
        values_files.push(remote);
    }
    Ok((uploads, set_files, values_files))
}

/// Install or upgrade `releases` in order, idempotently, in one round trip to the master (plus
/// one upload when a release has values files): `src/remote/helm_apply.sh` runs `helm status`,
/// then `helm install` (absent), or `helm upgrade` (deployed, failed, ...), recovering a release
/// stuck `pending-*` by an interrupted run first (uninstall a pending install, roll back a
/// pending upgrade or rollback), and reads each release back from its `-o json`. Returns the
/// releases made, in order, and the error that stopped the run (the releases after it untouched).
pub async fn apply_all(
    c: &Ctx<'_>,
    releases: &[(&Release, &[ValuesFile])],
) -> (Vec<(String, ReleaseState)>, Option<Error>) {
    let mut made = Vec::new();
    match apply_program(c, releases, &mut made, true).await {
        Ok(()) => (made, None),
        Err(e) => (made, Some(e)),
    }
}

/// The releases' values files (to upload to the active master) and, per release, its chart
/// argument and its install and upgrade commands as an error shows them.
struct Planned {
    uploads: Vec<UploadFile>,
    shown: Vec<(String, (String, String))>,
}

fn plan_releases(c: &Ctx<'_>, releases: &[(&Release, &[ValuesFile])]) -> Result<Planned> {
    let s = c.s;
    let ns = &c.params.namespace;
    let opts = release_opts(c);
    let (mut uploads, mut shown) = (Vec::new(), Vec::new());
    for (r, extra) in releases {
        let chart = chart_ref(c.instance, r);
        let (up, set_files, files) = release_files(c, r, extra)?;
        let set = release_sets(c, r);
        let target = hc::Chart { release: &r.name, chart: &chart, namespace: ns, version: release_version(r) };
        let vals = hc::Values { set: &set, set_files: &set_files, files: &files };
        let cmds = (s.helm.install(&target, &vals, &opts)?, s.helm.upgrade(&target, &vals, false, &opts)?);
        uploads.extend(up);
        shown.push((chart, cmds));
    }
    Ok(Planned { uploads, shown })
}

/// The program's items for `releases`, their command lines for Helm `major`.
fn plan_items(c: &Ctx<'_>, releases: &[(&Release, &[ValuesFile])], major: u32) -> Result<Vec<helm_apply::Item>> {
    let ns = &c.params.namespace;
    let helm = hc::Helm { major, env: c.s.helm.env.clone() };
    let opts = release_opts(c);
    let mut items = Vec::new();
    for (r, extra) in releases {
        let chart = chart_ref(c.instance, r);
        let (up, set_files, files) = release_files(c, r, extra)?;
        let set = release_sets(c, r);
        let target = hc::Chart { release: &r.name, chart: &chart, namespace: ns, version: release_version(r) };
        let vals = hc::Values { set: &set, set_files: &set_files, files: &files };
        let words = helm.release_words(&target, &vals, &opts);
        let files: Vec<String> = up.iter().map(|u| u.remote.clone()).collect();
        items.push(helm_apply::Item { release: r.name.clone(), namespace: ns.clone(), words, files });
    }
    Ok(items)
}

fn release_opts(c: &Ctx<'_>) -> InstallOpts {
    let mut opts = c.opts.clone();
    if c.params.namespace != "default" {
        opts.create_namespace = true;
    }
    opts
}

/// A release's chart version: a local chart is the package's, whatever the request says.
fn release_version(r: &Release) -> Option<&str> {
    match &r.source {
        ChartSource::Local { .. } => None,
        _ => r.version.as_deref(),
    }
}

/// `helm_apply.sh` for `releases` on the active master (`upload`: its values files first).
async fn apply_program(
    c: &Ctx<'_>,
    releases: &[(&Release, &[ValuesFile])],
    made: &mut Vec<(String, ReleaseState)>,
    upload: bool,
) -> Result<()> {
    let s = c.s;
    let ns = &c.params.namespace;
    let m = s.master();
    let planned = plan_releases(c, releases)?;
    if upload {
        s.rt.upload(m, planned.uploads.clone()).await?;
    }
    let items = plan_items(c, releases, s.helm.major)?;
    let cmd = helm_apply::command(&s.helm.env.prefix(), &items)?;
    let names: Vec<String> = releases.iter().map(|(r, _)| r.name.clone()).collect();
    let wait = cmd_timeout(c) * 2 * releases.len().max(1) as u32;
    let Some((out, shown)) = s.run_apply(cmd, wait, &names, ns).await? else {
        plan_only(releases, &planned, made);
        return Ok(());
    };
    let expect: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), ns.as_str())).collect();
    let applied = helm_apply::parse(&out, &expect)
        .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), &shown, "the releases Helm made", msg))?;
    finish(c, releases, &planned, applied, made)
}

/// In a plan, every release as it would be recorded, nothing read back.
fn plan_only(releases: &[(&Release, &[ValuesFile])], planned: &Planned, made: &mut Vec<(String, ReleaseState)>) {
    for ((r, _), (chart, _)) in releases.iter().zip(&planned.shown) {
        made.push((r.name.clone(), ReleaseState { chart: chart.clone(), ..Default::default() }));
    }
}

/// The releases the program made, checked and masked, into `made`; the error it stopped at.
fn finish(
    c: &Ctx<'_>,
    releases: &[(&Release, &[ValuesFile])],
    planned: &Planned,
    applied: Vec<helm_apply::Applied>,
    made: &mut Vec<(String, ReleaseState)>,
) -> Result<()> {
    let s = c.s;
    let m = s.master();
    for (a, ((r, extra), (chart, shown))) in applied.into_iter().zip(releases.iter().zip(&planned.shown)) {
        if let (Some(stuck), Some((_, revision))) = (&a.recovered, &a.before) {
            s.rt.ev(m).emit(crate::event::EventKind::Warning {
                message: format!(
                    "release {} is stuck in {stuck} (revision {revision}) from an interrupted run; recovered",
                    r.name
                ),
            });
        }
        match a.result {
            Ok(x) => {
                let mut values = x.values;
                crate::cnf::secret_values::mask(&mut values, &r.secret_set);
                if !extra.is_empty() {
                    // The operator's files may hold secrets under any secret-looking key.
                    values = crate::secret::masked(&values);
                }
                s.rt.ev(m).emit(crate::event::EventKind::Status {
                    subject: format!("release {}", r.name),
                    status: format!("{} (revision {})", x.status, x.revision),
                });
                let rs = ReleaseState {
                    chart: chart.clone(),
                    revision: x.revision,
                    status: x.status,
                    resources: x.resources,
                    values,
                };
                made.push((r.name.clone(), rs));
            }
            Err(f) => return Err(failure(c, r, &a.before, f, shown)),
        }
    }
    if made.len() < releases.len() {
        return Err(crate::lifecycle::fact::unreadable(
            m.name(),
            "helm_apply.sh",
            "the releases Helm made",
            format!("{} of {} releases reported", made.len(), releases.len()),
        ));
    }
    Ok(())
}

/// The error of the step the node program stopped at, naming the release, the exact command and
/// Helm's stderr (secret values masked); a failed recovery says what to run to fix it.
fn failure(
    c: &Ctx<'_>,
    r: &Release,
    before: &Option<(String, u64)>,
    f: helm_apply::Failure,
    shown: &(String, String),
) -> Error {
    let s = c.s;
    let ns = &c.params.namespace;
    let node = s.master().name().to_string();
    let status = format!("exit {}", f.code);
    let e = match f.step.as_str() {
        "recover" => {
            let stuck = before.as_ref().map(|b| b.0.as_str()).unwrap_or("a pending state");
            let fix = if stuck == "pending-install" {
                s.helm.uninstall(&r.name, ns, false)
            } else {
                s.helm.rollback(&r.name, ns, None, &InstallOpts::default())
            };
            let fix = fix.unwrap_or_default();
            Error::Remote {
                node,
                command: fix.clone(),
                status: "recovery failed".into(),
                stderr_tail: format!(
                    "release {} is stuck in {stuck}; fix it on a master with:\n  {}\nthen run this operation again.\n{}",
                    r.name,
                    fix.trim_start_matches(&s.helm.env.prefix()),
                    f.stderr_tail
                ),
            }
        }
        "status" => Error::Remote {
            node,
            command: s.helm.status(&r.name, ns).unwrap_or_default(),
            status,
            stderr_tail: f.stderr_tail,
        },
        verb => Error::Remote {
            node,
            command: if verb == "install" { shown.0.clone() } else { shown.1.clone() },
            status,
            stderr_tail: format!("release {}: {}", r.name, f.stderr_tail),
        },
    };
    crate::cnf::secret_values::mask_error(e, &r.secret_set)
}

#[cfg(test)]
mod tests {
    //! The decision logic of instantiate on the scripted fake transport: Helm pending-state
    //! recovery, master failover, repositories and secrets, through the real `prepare` and `run`.

    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::*;
    use crate::cnf::run::run;
    use crate::cnf::run::testkit::{applied, record, run_op, run_op_events, Fixture, M1, M2};
    use crate::cnf::Op;
    use crate::event::Events;
    use crate::lifecycle::{FanOut, Runner, Timeouts};

    /// The release comes back from the one Helm call that made it (`-o json`): no status, manifest
    /// or values read after it, and everything in the prepare program's one exec on the active
    /// master (`helm_apply.rs` has the program's decisions on a real shell).
    #[tokio::test]
    async fn the_release_comes_back_from_the_one_helm_call_that_made_it() {
        let f = Fixture::new();
        let first = applied("vdu2", "cnf", "absent/0", "install", 1, json!({"replicaCount": 3}));
        f.reply_applied("vdu2", "cnf", &first);
        let o = f.instantiate().await.unwrap();
        let r = &o.result["releases"]["vdu2"];
        assert_eq!((r["status"].as_str(), r["revision"].as_u64()), (Some("deployed"), Some(1)), "{r}");
        assert_eq!(r["values"], json!({"replicaCount": 3}));
        assert_eq!(r["resources"][0]["kind"], "Service");
        assert_eq!(o.context["master"], "192.0.2.11");
        let execs = f.fake.execs(M1);
        assert_eq!(execs.len(), 1, "{execs:?}");
        assert!(execs[0].starts_with("helm_prepare.sh "), "{execs:?}");
        assert!(
            execs[0].contains(" vdu2 cnf 10 --namespace cnf --timeout 300s --create-namespace -o json -- vdu2 cnf1@labrepo/nginxlab 0"),
            "{execs:?}"
        );
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/cnf1.cnf.json")).unwrap()).unwrap();
        assert_eq!((rec["releases"]["vdu2"]["revision"].as_u64(), rec["helm_major"].as_u64()), (Some(1), Some(3)));
        // A re-run upgrades (the program decides; here it says so).
        f.reply_applied("vdu2", "cnf", &applied("vdu2", "cnf", "deployed/1", "upgrade", 2, json!({})));
        let o = f.instantiate().await.unwrap();
        assert_eq!(o.result["releases"]["vdu2"]["revision"], 2);
    }

    #[tokio::test]
    async fn a_recovered_release_is_a_warning_naming_its_state() {
        let f = Fixture::new();
        let out = record("status", "vdu2", "pending-install/1", "")
            + &record("recovered", "vdu2", "pending-install", "")
            + &applied("vdu2", "cnf", "pending-install/1", "install", 2, json!({}))
                .split_once('\n')
                .map(|x| x.1.split_once('\n').unwrap().1.to_string())
                .unwrap();
        f.reply_applied("vdu2", "cnf", &out);
        let (o, events) =
            run_op_events(&f, Op::Instantiate, "cnf1", Some(request_with_repo("http://192.0.2.50/charts"))).await;
        o.unwrap();
        assert!(
            events.contains("release vdu2 is stuck in pending-install (revision 1) from an interrupted run; recovered"),
            "{events}"
        );
    }

    #[tokio::test]
    async fn a_failed_recovery_says_exactly_what_to_run_and_installs_nothing() {
        let f = Fixture::new();
        let out = record("status", "vdu2", "pending-install/1", "")
            + &record("fail", "vdu2", "recover:1", "Error: cluster unreachable");
        f.reply_applied("vdu2", "cnf", &out);
        let e = f.instantiate().await.err().expect("recovery failed").to_string();
        assert!(e.contains("stuck in pending-install") && e.contains("fix it on a master with:"), "{e}");
        assert!(e.contains("helm uninstall --namespace cnf -- vdu2") && e.contains("cluster unreachable"), "{e}");
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/cnf1.cnf.json")).unwrap()).unwrap();
        assert!(rec["releases"].as_object().unwrap().is_empty(), "{rec}");
    }

    #[tokio::test]
    async fn a_failed_install_names_the_release_and_the_command_and_masks_secrets() {
        let f = Fixture::new();
        let out = record("status", "vdu2", "absent/0", "")
            + &record("fail", "vdu2", "install:1", "Error: INSTALLATION FAILED: boom");
        f.reply_applied("vdu2", "cnf", &out);
        let e = f.instantiate().await.err().expect("failed").to_string();
        assert!(e.contains("release vdu2: Error: INSTALLATION FAILED: boom"), "{e}");
        assert!(
            e.contains("helm install --namespace cnf --timeout 300s --create-namespace -- vdu2 cnf1@labrepo/nginxlab"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn helm_runs_on_the_first_master_that_answers() {
        let f = Fixture::new();
        f.fake.down(M1);
        let o = f.instantiate().await.unwrap();
        assert_eq!(o.context["master"], "192.0.2.12");
        assert!(f.fake.execs(M2).iter().any(|e| e.contains(" vdu2 cnf 10 ")), "{:?}", f.fake.execs(M2));
        assert!(f.fake.execs(M1).is_empty());
        let not_reached: Vec<Value> = o.result["mastersNotReached"].as_array().unwrap().clone();
        assert!(not_reached.len() == 1 && not_reached[0].as_str().unwrap().starts_with(M1), "{not_reached:?}");
    }

    /// `--atomic` is the one flag Helm 3 and 4 spell differently: the first run reads the version
    /// before it builds the releases' lines (a second exec); a re-run builds them for the version
    /// the first recorded, in the one exec, and the program leaves them to the driver when the
    /// master's Helm is another.
    #[tokio::test]
    async fn helm_4_gets_rollback_on_failure_instead_of_atomic() {
        let f = Fixture::new();
        f.fake.reply(None, "helm_prepare.sh", "helm-version: v4.1.4+g1\n");
        let inputs = Inputs { atomic: true, ..f.inputs() };
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let o = run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        assert_eq!(o.context["helmMajor"], 4);
        let execs = f.fake.execs(M1);
        assert!(!execs[0].contains("--namespace cnf"), "no release lines before the version is known: {execs:?}");
        let up = execs.iter().find(|e| e.starts_with("helm_apply.sh")).unwrap();
        assert!(up.contains("--rollback-on-failure") && !up.contains("--atomic"), "{up}");
        // The re-run: lines for Helm 4 (as recorded), with the version, in one exec.
        let n = f.fake.execs(M1).len();
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        f.reply_applied("vdu2", "cnf", &applied("vdu2", "cnf", "deployed/1", "upgrade", 2, json!({})));
        f.fake.reply(
            None,
            "'' vdu2 cnf ",
            &format!("helm-version: v4.1.4+g1\n{}", applied("vdu2", "cnf", "deployed/1", "upgrade", 2, json!({}))),
        );
        run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        let execs = &f.fake.execs(M1)[n..];
        assert_eq!(execs.len(), 1, "{execs:?}");
        assert!(execs[0].starts_with("helm_prepare.sh 4 ") && execs[0].contains("--rollback-on-failure"), "{execs:?}");
    }

    fn request_with_repo(url: &str) -> Value {
        json!({"flavourId": "simple", "additionalParams": {"use_helm": "true", "namespace": "cnf", "using_helm_install_param": [{
            "exthelmchart": "true", "helmreleasename": "vdu2", "helmrepositoryname": "labrepo",
            "helmchartname": "nginxlab", "exthelmrepo_url": url}]}})
    }

    #[tokio::test]
    async fn two_cnfs_with_one_repository_name_each_keep_their_own() {
        let f = Fixture::new();
        run_op(&f, Op::Instantiate, "cnf1", Some(request_with_repo("http://192.0.2.50/a"))).await.unwrap();
        run_op(&f, Op::Instantiate, "cnf2", Some(request_with_repo("http://192.0.2.66/evil"))).await.unwrap();
        let execs = f.fake.execs(M1);
        let adds: Vec<&String> = execs.iter().filter(|e| e.starts_with("helm_prepare.sh ")).collect();
        assert!(adds[0].contains(" 1 cnf1@labrepo http://192.0.2.50/a '' '' '' vdu2 "), "{adds:?}");
        assert!(adds[1].contains(" 1 cnf2@labrepo http://192.0.2.66/evil '' '' '' vdu2 "), "{adds:?}");
        assert!(adds[1].contains("-- vdu2 cnf2@labrepo/nginxlab"), "{adds:?}");
        // Terminating the second CNF removes its repository only.
        f.reply_removed("cnf2", &["vdu2"]);
        run_op(&f, Op::Terminate, "cnf2", None).await.unwrap();
        let removes: Vec<String> = f.fake.all_execs().into_iter().filter(|e| e.contains("helm_remove.sh")).collect();
        assert!(removes.iter().all(|e| e.contains(" 1 cnf2@labrepo") && !e.contains("cnf1@")), "{removes:?}");
        assert_eq!(removes.len(), 2, "one exec per master: {removes:?}");
        // repo-sync (an operator's whole-master command) leaves instance repositories alone.
        f.fake.reply(
            None,
            "helm_repo_list.sh",
            r#"[{"name":"cnf1@labrepo","url":"http://192.0.2.50/a"},{"name":"old","url":"http://h"}]"#,
        );
        let o = run_op(&f, Op::RepoSync { repos: vec!["new=http://192.0.2.7/c".into()] }, "ops", None).await.unwrap();
        assert_eq!(o.result[0]["removed"], json!(["old"]), "{}", o.result);
    }

    #[tokio::test]
    async fn secret_helm_values_and_url_credentials_never_reach_argv_results_or_state() {
        let f = Fixture::new();
        std::env::set_var("CNFIN_FAKE_TOKEN", "tok-from-env-77");
        let config = json!({"db": {"password": "hunter2-literal"}, "api": {"token": "tok-from-env-77"}, "copy": "x-hunter2-literal"});
        f.reply_applied("vdu2", "cnf", &applied("vdu2", "cnf", "absent/0", "install", 1, config));
        let mut req = request_with_repo("http://bob:repo-pw-99@192.0.2.50/charts");
        req["additionalParams"]["using_helm_install_param"][0]["helmsecretparameter"] =
            json!(["db.password=hunter2-literal"]);
        req["additionalParams"]["using_helm_install_param"][0]["helmparameter"] =
            json!(["api.token=@env:CNFIN_FAKE_TOKEN", "plain=@@env:literal"]);
        let (o, events) = run_op_events(&f, Op::Instantiate, "cnf1", Some(req)).await;
        let o = o.unwrap();
        let execs = f.fake.execs(M1).join("\n");
        for secret in ["hunter2-literal", "tok-from-env-77", "repo-pw-99"] {
            assert!(!execs.contains(secret), "{secret} in argv:\n{execs}");
            assert!(!events.contains(secret), "{secret} in the events:\n{events}");
            assert!(!o.result.to_string().contains(secret), "{secret} in the result: {}", o.result);
        }
        // The record keeps the secret helm values masked (and, their keys looking secret, the
        // store seals even the masked `db.password=********`); the repository password is a
        // credential field of the record, sealed by the store.
        let state: String = std::fs::read_dir(f.dir.path().join("state"))
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
            .collect();
        assert!(state.contains("\"sealed\"") && state.contains("http://192.0.2.50/charts"), "{state}");
        for secret in ["hunter2-literal", "tok-from-env-77", "bob:repo-pw-99@"] {
            assert!(!state.contains(secret), "{secret} in the record: {state}");
        }
        assert!(
            execs.contains(
                " 1 cnf1@labrepo http://192.0.2.50/charts bob .mgmt-driver/run/cnf1/repo-cnf1@labrepo.pw '' "
            ),
            "{execs}"
        );
        assert!(execs.contains("--set-file db.password=.mgmt-driver/run/cnf1/set-vdu2-1"), "{execs}");
        assert!(execs.contains("--set-file api.token=.mgmt-driver/run/cnf1/set-vdu2-0"), "{execs}");
        assert!(execs.contains("--set plain=@env:literal"), "{execs}");
        assert!(execs.contains(" 2 .mgmt-driver/run/cnf1/set-vdu2-0 .mgmt-driver/run/cnf1/set-vdu2-1"), "{execs}");
        assert_eq!(o.result["releases"]["vdu2"]["values"]["db"]["password"], crate::secret::MASK);
        assert_eq!(o.result["releases"]["vdu2"]["values"]["copy"], crate::secret::MASK);
        // A missing variable stops the run before anything connects, naming the field.
        std::env::remove_var("CNFIN_FAKE_TOKEN");
        let mut req = request_with_repo("http://192.0.2.50/charts");
        req["additionalParams"]["using_helm_install_param"][0]["helmparameter"] =
            json!(["api.token=@env:CNFIN_FAKE_TOKEN_UNSET"]);
        let n = f.fake.calls().len();
        let e = run_op(&f, Op::Instantiate, "cnf3", Some(req)).await.err().expect("refused").to_string();
        assert!(e.contains("CNFIN_FAKE_TOKEN_UNSET") && e.contains("api.token"), "{e}");
        assert_eq!(f.fake.calls().len(), n);
    }

    #[test]
    fn a_tenants_helm_values_get_no_env_reference_and_the_operators_only_allowed_ones() {
        let ap = json!({"use_helm": "true", "using_helm_install_param": [{"helmchartname": "c", "exthelmchart": "true",
            "helmrepositoryname": "r", "exthelmrepo_url": "http://192.0.2.50/c",
            "helmparameter": ["api.token=@env:HOME", "k=@@env:HOME"]}]});
        let mut p = CnfParams::from_additional_params(ap.as_object().unwrap(), "req.json").unwrap();
        let e = check_package(&mut p, None, "req.json", &Policy::Tenant).unwrap_err().to_string();
        assert!(e.contains("using_helm_install_param[0].api.token") && e.contains("operator's tool"), "{e}");
        let only = Policy::Operator(crate::secret_ref::Allowed { env: vec!["EDGE_*".into()], ..Default::default() });
        let e = check_package(&mut p, None, "req.json", &only).unwrap_err().to_string();
        assert!(e.contains("did not allow") && !e.contains(&std::env::var("HOME").unwrap_or_default()), "{e}");
    }

    #[test]
    fn a_rerun_keeps_the_release_names_recorded_by_the_first_run() {
        let old = CnfState {
            params: json!({"using_helm_install_param": [{"helmchartname": "c", "helmreleasename": "c-0123456789"},
                                                         {"helmchartname": "d", "helmreleasename": "d-1"}]}),
            ..Default::default()
        };
        let mut ap = json!({"using_helm_install_param": [{"helmchartname": "c"}, {"helmchartname": "other"}]});
        keep_recorded_names(ap.as_object_mut().unwrap(), Some(&old));
        assert_eq!(ap["using_helm_install_param"][0]["helmreleasename"], "c-0123456789");
        assert!(ap["using_helm_install_param"][1].get("helmreleasename").is_none(), "another chart: a new name");
    }
}
