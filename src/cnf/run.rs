//! A CNF operation from start to end: `prepare` reads and checks the inputs (request or the
//! recorded one, params, package paths, where Helm runs) before anything connects; `run` opens
//! the Helm session on the first master that answers and calls the operation.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::cnf::cluster_env::{self, HelmEnv};
use crate::cnf::heal::{self, HealTarget};
use crate::cnf::helm_cmd::{Chart, InstallOpts, Values};
use crate::cnf::helm_info::HelmInfo;
use crate::cnf::masters::{find_helm_info, masters};
use crate::cnf::names;
use crate::cnf::ops::{self, CnfState, Ctx};
use crate::cnf::params::{ChartSource, CnfParams, Release};
use crate::cnf::session::Session;
use crate::cnf::{Inputs, Op};
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::{check_instance_id, Lock, Store};
use crate::lifecycle::{Node, Runner};
use crate::request::{Doc, HealRequest, InstantiateRequest, ScaleRequest, ScaleType, VnfInstance};

/// The CNF document's kind in the store: `<id>.cnf.json`.
pub const KIND: &str = "cnf";

/// Everything checked, nothing connected yet.
pub struct Prepared {
    id: String,
    store: Store,
    _lock: Lock,
    saved: Option<CnfState>,
    req_file: String,
    /// The additionalParams in force (the request's for instantiate, else the recorded ones).
    ap: Map<String, Value>,
    params: CnfParams,
    scale: Option<ScaleRequest>,
    heal: Option<HealTarget>,
    pkg: Option<Package>,
    helm_info: HelmInfo,
    helm_info_json: Value,
    /// `repo-sync`'s repositories, checked.
    want_repos: BTreeMap<String, ops::WantRepo>,
    /// `--namespace`, checked.
    namespace_arg: Option<String>,
    /// The instantiate request's flavourId (recorded for later scales).
    flavour: Option<String>,
    /// The cluster's Helm environment the commands run with (`cluster_env::choose`).
    env: HelmEnv,
}

/// What a CNF operation produced.
pub struct Outcome {
    pub context: Value,
    pub result: Value,
    pub warnings: Vec<String>,
}

fn need_request<'a>(a: &'a Inputs, op: &str) -> Result<&'a Doc> {
    a.request.as_ref().ok_or_else(|| Error::input("arguments", "--request", format!("is required for {op}")))
}

pub fn prepare(op: &Op, a: &Inputs, store: Store) -> Result<Prepared> {
    let id = a.vnf_instance_id.clone().ok_or_else(|| Error::input("arguments", "--vnf-instance-id", "is required"))?;
    check_instance_id(&id)?;
    if let Some(cid) = &a.cluster_instance {
        check_instance_id(cid).map_err(|e| Error::input("arguments", "--cluster-instance", e.to_string()))?;
    }
    check_args(op, &id)?;
    let cluster_uuid = a
        .cluster_uuid
        .as_deref()
        .map(cluster_env::parse_cluster_uuid)
        .transpose()
        .map_err(|m| Error::input("arguments", "--cluster-uuid", m))?;
    let want_repos = match op {
        Op::RepoSync { repos } => repo_pairs(repos)?,
        _ => BTreeMap::new(),
    };
    let lock = store.lock(&id, KIND)?;
    let saved: Option<CnfState> = store.load_doc(&id, KIND)?;
    let env = cluster_env::choose(
        cluster_uuid.as_ref(),
        saved.as_ref().map(|s| s.cluster_id.as_deref()),
        a.cluster_instance.as_deref(),
        &id,
    )
    .map_err(|m| Error::input("arguments", "--cluster-uuid", m))?;
    let req_file = a.request.as_ref().map(Doc::name).unwrap_or_else(|| "(recorded request)".into());
    // The request (or the recorded one) gives the CNF params.
    let (mut scale, mut heal, mut req_vims, mut flavour) = (None, None, None, None);
    let mut scale_instance: Option<(VnfInstance, String)> = None;
    let ap = match op {
        Op::Instantiate => {
            let r: InstantiateRequest = need_request(a, "instantiate")?.load()?;
            req_vims = Some(r.vim_connection_info);
            flavour = Some(r.flavour_id);
            r.additional_params
        }
        Op::Scale => {
            let r: ScaleRequest = need_request(a, "scale")?.load()?;
            if let Some(d) = &a.vnf_instance {
                scale_instance = Some((d.load::<VnfInstance>()?, r.aspect_id.clone()));
            }
            scale = Some(r);
            saved_params(&saved)?
        }
        Op::Heal => {
            let h: HealRequest = need_request(a, "heal")?.load()?;
            let inst: Option<(VnfInstance, String)> =
                a.vnf_instance.as_ref().map(|d| Ok::<_, Error>((d.load()?, d.name()))).transpose()?;
            heal = Some(heal::targets(&h, inst.as_ref().map(|(i, n)| (i, n.as_str())), &req_file)?);
            saved_params(&saved)?
        }
        _ if saved.is_some() => saved_params(&saved)?,
        _ => Map::new(),
    };
    let mut ap = ap;
    if matches!(op, Op::Instantiate) {
        keep_recorded_names(&mut ap, saved.as_ref());
    }
    let mut params = if ap.is_empty() {
        CnfParams { namespace: "default".into(), ..Default::default() }
    } else {
        CnfParams::for_instance(&ap, &req_file, &id)?
    };
    // --namespace, else the request's (or recorded) namespace, else the cluster_uuid's.
    let ns_arg = a.namespace.clone().or_else(|| {
        let from_request = ap.get("namespace").is_some_and(|v| !v.is_null());
        cluster_uuid.as_ref().and_then(|c| c.namespace.clone()).filter(|_| !from_request)
    });
    if let Some(ns) = &ns_arg {
        let field = if a.namespace.is_some() { "--namespace" } else { "--cluster-uuid" };
        names::namespace(ns).map_err(|m| Error::input("arguments", field, m))?;
        params.namespace = ns.clone();
        if matches!(op, Op::Instantiate) {
            // Recorded with the request, so later operations find the releases there.
            ap.insert("namespace".into(), Value::String(ns.clone()));
        }
    }
    let pkg = a.package_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    if let (Op::Scale, Some(pkg)) = (op, &pkg) {
        let fl = saved.as_ref().and_then(|s| s.flavour_id.as_deref());
        params.scaling = read_vnfd(pkg, fl)?;
    }
    if let (Some((inst, aspect)), Some(r)) = (&scale_instance, &scale) {
        let vnfd_bound = params.scaling.aspects.get(aspect).is_some_and(|x| x.max_scale_level.is_some());
        if !vnfd_bound {
            let steps = r.number_of_steps as i64 * if r.kind == ScaleType::Out { 1 } else { -1 };
            ops::instance_level_bound(inst, aspect, steps).map_err(|m| {
                Error::input(
                    &req_file,
                    "numberOfSteps",
                    format!("The number of target replicas after scaling is out of range: {m}"),
                )
            })?;
        }
    }
    if matches!(op, Op::Instantiate) {
        // Secret helm values are read now: a missing variable or file stops the run here.
        for (i, r) in params.releases.iter_mut().enumerate() {
            for sv in &mut r.secret_set {
                let at = format!("additionalParams.using_helm_install_param[{i}].{}", sv.key);
                sv.resolve(pkg.as_ref(), &req_file, &at)?;
            }
        }
        // Every local chart must be in the package before anything connects.
        for (i, r) in params.releases.iter().enumerate() {
            if let ChartSource::Local { path, .. } = &r.source {
                let pkg = pkg
                    .as_ref()
                    .ok_or_else(|| Error::input("arguments", "--package-dir", "is required for local charts"))?;
                let field = format!("additionalParams.using_helm_install_param[{i}].helmchartfile_path");
                pkg.resolve(path, &req_file, &field, false)?;
            }
        }
    }
    let (helm_info, helm_info_json, _from) = find_helm_info(a, req_vims.as_ref(), &store, saved.as_ref())?;
    Ok(Prepared {
        id,
        store,
        _lock: lock,
        saved,
        req_file,
        ap,
        params,
        scale,
        heal,
        pkg,
        helm_info,
        helm_info_json,
        want_repos,
        namespace_arg: a.namespace.clone(),
        flavour,
        env,
    })
}

/// The operator's words for an operation (`--release`, `--chart`, `show CHART`, `--set`,
/// `--version`, `--repo`), checked before anything connects: none may reach Helm as an option
/// or a local directory.
fn check_args(op: &Op, instance: &str) -> Result<()> {
    let arg = |field: &str, r: std::result::Result<(), String>| r.map_err(|m| Error::input("arguments", field, m));
    match op {
        Op::Upgrade { release, chart, version, set, .. } => {
            arg("--release", names::release(release))?;
            if let Some(c) = chart {
                arg("--chart", names::chart_ref(c, false, instance))?;
            }
            if let Some(v) = version {
                arg("--version", names::version(v))?;
            }
            for x in set {
                arg("--set", names::set_item(x))?;
            }
        }
        Op::Rollback { release, .. }
        | Op::Status { release }
        | Op::History { release }
        | Op::Values { release, .. } => arg("--release", names::release(release))?,
        Op::Services { release: Some(release) } => arg("--release", names::release(release))?,
        Op::Show { what, chart, repo, version } => {
            if !["values", "readme", "chart", "all"].contains(&what.as_str()) {
                return Err(Error::input(
                    "arguments",
                    "WHAT",
                    format!("'{}': values, readme, chart or all", crate::error::excerpt(what)),
                ));
            }
            arg("CHART", names::chart_ref(chart, repo.is_some(), instance))?;
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
                arg("--version", names::version(v))?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn saved_params(saved: &Option<CnfState>) -> Result<Map<String, Value>> {
    match saved.as_ref().map(|s| &s.params) {
        Some(Value::Object(m)) => {
            let mut m = m.clone();
            m.remove("__helm_info");
            Ok(m)
        }
        _ => Err(Error::input(
            "state",
            "cnf",
            "no CNF instantiated under this --vnf-instance-id (run `cnf instantiate` first)",
        )),
    }
}

/// Run a prepared operation: open the Helm session, call the operation, record the outcome.
pub async fn run(op: &Op, a: &Inputs, p: Prepared, rt: Runner) -> Result<Outcome> {
    let nodes = masters(&p.helm_info, a, &p.store)?;
    // A reset uses Helm only to uninstall a recorded CNF's releases.
    let needs_env = match op {
        Op::Reset { uninstall } => *uninstall && p.saved.is_some(),
        _ => true,
    };
    let session = Session::open(rt, nodes, a.status_interval, p.env.clone(), needs_env).await?;
    let opts = InstallOpts {
        wait: a.wait,
        timeout_s: Some(a.timeout.as_secs().max(1)),
        atomic: a.atomic,
        create_namespace: false,
    };
    let ctx = Ctx {
        s: &session,
        params: &p.params,
        instance: &p.id,
        pkg: p.pkg.as_ref(),
        req_file: &p.req_file,
        opts,
        timeout: a.timeout,
    };
    let mut rec = Record {
        st: p.saved.clone().unwrap_or_else(|| CnfState { vnf_instance_id: p.id.clone(), ..Default::default() }),
        store: &p.store,
        id: &p.id,
    };
    let result = dispatch(op, &ctx, &p, &mut rec).await;
    session.rt.close().await;
    let context = json!({
        "vnfInstanceId": p.id,
        "master": session.master().host.addr,
        "helmMajor": session.helm.major,
        "clusterId": p.env.id(),
        "helmEnvironment": p.env.dir(),
    });
    Ok(Outcome { context, result: result?, warnings: p.params.warnings.clone() })
}

/// The CNF's record in the store, saved after every change.
struct Record<'a> {
    st: CnfState,
    store: &'a Store,
    id: &'a str,
}

impl Record<'_> {
    fn save(&mut self) -> Result<()> {
        self.store.save_doc(self.id, KIND, &self.st)
    }

    fn release(&mut self, name: &str, rs: &ops::ReleaseState) -> Result<()> {
        self.st.releases.insert(name.to_string(), rs.clone());
        self.save()
    }
}

async fn dispatch(op: &Op, c: &Ctx<'_>, p: &Prepared, rec: &mut Record<'_>) -> Result<Value> {
    let s = c.s;
    let h = &s.helm;
    let ns = c.params.namespace.as_str();
    Ok(match op {
        Op::Instantiate => instantiate(c, p, rec).await?,
        Op::Scale => scale(c, p.scale.as_ref().expect("scale request"), rec).await?,
        Op::Heal => match p.heal.as_ref().expect("heal request") {
            HealTarget::Pods(pods) => heal::pods(c, pods).await?,
            HealTarget::Whole => {
                let rels: Vec<(String, Vec<crate::cnf::manifest::Resource>)> = heal_releases(c.params, &rec.st);
                heal::whole(c, &rels).await?
            }
        },
        Op::Upgrade { release, chart, version, set, reuse_values } => {
            upgrade(c, rec, release, chart.clone(), version.as_deref(), set, *reuse_values).await?
        }
        Op::Rollback { release, revision } => {
            s.run(h.rollback(release, ns, *revision, &c.opts)?, c.timeout + Duration::from_secs(30)).await?;
            let chart = rec.st.releases.get(release).map(|r| r.chart.clone()).unwrap_or_default();
            let rel = Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) };
            let rs = ops::describe(c, &rel, &chart).await?;
            rec.release(release, &rs)?;
            json!({"release": release, "revision": rs.revision, "state": rs})
        }
        Op::Status { release } => {
            let mut v = s.json(h.status(release, ns)?, "the release status").await?;
            // `helm status -o json` carries the release's user-supplied values as `config`.
            if let Some(cfg) = v.get_mut("config") {
                crate::cnf::secret_values::mask(cfg, secret_keys(c.params, release));
            }
            v
        }
        Op::History { release } => s.json(h.history(release, ns)?, "the release history").await?,
        Op::Values { release, all } => {
            let mut v = s.json(h.get_values(release, ns, *all)?, "the release values").await?;
            crate::cnf::secret_values::mask(&mut v, secret_keys(c.params, release));
            v
        }
        Op::List => s.json(h.list(a_namespace(p))?, "the release list").await?,
        Op::Show { what, chart, repo, version } => {
            let cmd = h.show(what, chart, repo.as_deref(), version.as_deref())?;
            Value::String(s.text(cmd, s.rt.timeouts.command).await?)
        }
        Op::RepoList => {
            let m = s.master();
            let cmd = s.rt.root_cmd(m, h.repo_list(), s.rt.timeouts.command);
            let have = s.rt.fact(m, cmd, "the repository list", BTreeMap::new, ops::parse_repo_list).await?;
            Value::Array(have.into_iter().map(|(name, url)| json!({"name": name, "url": url})).collect())
        }
        Op::RepoSync { .. } => ops::repo_sync(s, &p.id, &p.want_repos).await?,
        Op::Terminate => {
            let releases: Vec<String> = if c.params.releases.is_empty() {
                rec.st.releases.keys().cloned().collect()
            } else {
                c.params.releases.iter().map(|r| r.name.clone()).collect()
            };
            let out = ops::terminate(c, &releases).await?;
            p.store.remove_doc(&p.id, KIND)?;
            json!({"releases": out})
        }
        Op::Services { release } => {
            let releases = match release {
                Some(r) => vec![r.clone()],
                None => cnf_releases(c.params, &rec.st),
            };
            let found = crate::cnf::services::services(c, &releases).await?;
            json!({"releases": releases, "services": found})
        }
        Op::Reset { uninstall } => reset(c, p, rec, *uninstall).await?,
    })
}

/// The CNF's releases: the request's (or recorded request's), else the recorded ones.
fn cnf_releases(params: &CnfParams, st: &CnfState) -> Vec<String> {
    if params.releases.is_empty() {
        st.releases.keys().cloned().collect()
    } else {
        params.releases.iter().map(|r| r.name.clone()).collect()
    }
}

/// `cnf reset [--uninstall]`: with --uninstall, terminate the CNF first (its releases,
/// repositories, charts and record); then remove the cluster's Helm environment from every
/// master. A master other than the active one that cannot be reached is reported, not fatal.
async fn reset(c: &Ctx<'_>, p: &Prepared, rec: &Record<'_>, uninstall: bool) -> Result<Value> {
    let s = c.s;
    let releases = if uninstall && p.saved.is_some() {
        let out = ops::terminate(c, &cnf_releases(c.params, &rec.st)).await?;
        p.store.remove_doc(&p.id, KIND)?;
        out
    } else {
        json!([])
    };
    let Some(cmd) = s.helm.env.reset() else {
        return Err(Error::input(
            "state",
            "cnf",
            "this CNF uses Helm's default environment (recorded by an older driver): there is no \
             cluster environment to reset; pass --cluster-uuid to name one",
        ));
    };
    let nodes = s.all();
    s.rt.phase("forget the cluster's Helm environment on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| {
            let cmd = cmd.clone();
            async move {
                let rc = s.rt.root_cmd(n, cmd, s.rt.timeouts.command);
                let parse = |o: &str| match o.trim() {
                    w @ ("removed" | "absent") => Ok(w.to_string()),
                    other => Err(format!("not removed/absent: {:?}", crate::error::excerpt(other))),
                };
                s.rt.fact(n, rc, "the environment reset", || "planned".to_string(), parse).await
            }
        })
        .await;
    let (mut masters, mut not_reached) = (Vec::new(), Vec::new());
    for (n, r) in res {
        match r {
            Ok(outcome) => masters.push(json!({"master": n.name(), "environment": outcome})),
            Err(e) if n.name() != s.master().name() => not_reached.push(format!("{}: {e}", n.name())),
            Err(e) => return Err(e),
        }
    }
    Ok(json!({
        "clusterId": s.helm.env.id(),
        "releases": releases,
        "masters": masters,
        "mastersNotReached": not_reached,
    }))
}

/// The releases a whole-CNF heal restarts, with the resources recorded for each (the plan's
/// stand-in for their manifests): the request's releases, else the recorded ones.
fn heal_releases(params: &CnfParams, st: &CnfState) -> Vec<(String, Vec<crate::cnf::manifest::Resource>)> {
    let names: Vec<String> = if params.releases.is_empty() {
        st.releases.keys().cloned().collect()
    } else {
        params.releases.iter().map(|r| r.name.clone()).collect()
    };
    names
        .into_iter()
        .map(|n| {
            let res = st.releases.get(&n).map(|r| r.resources.clone()).unwrap_or_default();
            (n, res)
        })
        .collect()
}

/// The scaling data of the package's VNFD (TOSCA-Metadata/TOSCA.meta's Entry-Definitions and
/// its imports), of `flavour` when given; none when the package has no TOSCA.meta. A VNFD that
/// does not parse is bad input naming its file.
fn read_vnfd(pkg: &Package, flavour: Option<&str>) -> Result<crate::cnf::vnfd::Scaling> {
    const META: &str = "TOSCA-Metadata/TOSCA.meta";
    let read = |rel: &str| pkg.resolve(rel, META, rel, false).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let Some(meta) = read(META) else { return Ok(Default::default()) };
    let entry = crate::cnf::vnfd::entry_definitions(&meta)
        .ok_or_else(|| Error::input(META, "Entry-Definitions", "is missing"))?;
    let docs = crate::cnf::vnfd::load(&entry, &read).map_err(|m| Error::input(META, "Entry-Definitions", m))?;
    Ok(crate::cnf::vnfd::scaling(&docs, flavour))
}

/// `cnf list --namespace NS` lists that namespace; without it, every namespace.
fn a_namespace(p: &Prepared) -> Option<&str> {
    p.namespace_arg.as_deref()
}

/// A re-run of instantiate for a request that names no release reuses the names recorded by
/// the first run (item by item, when the item's chart is the same), so that a record made by an
/// older driver, whose generated names were random, is still upgraded in place.
fn keep_recorded_names(ap: &mut Map<String, Value>, saved: Option<&CnfState>) {
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

/// The secret keys the recorded request gives `release` (masked in what Helm reports back).
fn secret_keys<'p>(p: &'p CnfParams, release: &str) -> &'p [crate::cnf::params::SecretSet] {
    p.releases.iter().find(|r| r.name == release).map(|r| r.secret_set.as_slice()).unwrap_or(&[])
}

/// `repo-sync --repo NAME=URL ...`: names checked like a request's, URLs http(s) with any
/// userinfo split off into credentials; a name given twice is refused.
fn repo_pairs(repos: &[String]) -> Result<BTreeMap<String, ops::WantRepo>> {
    let mut want = BTreeMap::new();
    for r in repos {
        let masked = crate::url_mask::mask_userinfo(r);
        let (n, u) = r
            .split_once('=')
            .ok_or_else(|| Error::input("arguments", "--repo", format!("'{masked}' is not NAME=URL")))?;
        names::repo(n).map_err(|m| Error::input("arguments", "--repo", m))?;
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return Err(Error::input("arguments", "--repo", format!("'{masked}': the URL must be http(s)://")));
        }
        let (url, creds) = names::url(u).map_err(|m| Error::input("arguments", "--repo", m))?;
        let creds = creds.map(|(user, pw)| (user, crate::secret::Secret::new(pw)));
        if want.insert(n.to_string(), ops::WantRepo { url, creds }).is_some() {
            return Err(Error::input("arguments", "--repo", format!("'{n}' is given twice")));
        }
    }
    Ok(want)
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

/// Record the request (with generated release names, so later operations find the same
/// releases), put charts and repositories on every master, then install or upgrade each release.
async fn instantiate(c: &Ctx<'_>, p: &Prepared, rec: &mut Record<'_>) -> Result<Value> {
    let s = c.s;
    let mut ap = recorded_params(&p.ap, c.params);
    ap.insert("__helm_info".into(), p.helm_info_json.clone());
    rec.st.params = Value::Object(ap);
    rec.st.namespace = c.params.namespace.clone();
    rec.st.masters = p.helm_info.masternode_ip.clone();
    rec.st.flavour_id = p.flavour.clone();
    rec.st.cluster_id = p.env.id().map(str::to_string);
    rec.save()?;
    let skipped = ops::distribute(c).await?;
    s.rt.phase("install or upgrade the releases", &[s.master()], false);
    let mut rels = Map::new();
    for r in &c.params.releases {
        let rs = ops::apply_release(c, r).await?;
        rec.release(&r.name, &rs)?;
        rels.insert(r.name.clone(), serde_json::to_value(&rs).expect("serializes"));
    }
    Ok(json!({"releases": rels, "mastersNotReached": skipped}))
}

async fn scale(c: &Ctx<'_>, r: &ScaleRequest, rec: &mut Record<'_>) -> Result<Value> {
    let steps = r.number_of_steps as i64;
    let delta = if r.kind == ScaleType::Out { steps } else { -steps };
    let (from, to, rs) = ops::scale(c, &r.aspect_id, delta).await?;
    if let Some(rel) = ops::aspect_release(c.params, &r.aspect_id) {
        rec.release(&rel.name, &rs)?;
    }
    Ok(json!({"aspectId": r.aspect_id, "from": from, "to": to, "release": rs}))
}

async fn upgrade(
    c: &Ctx<'_>,
    rec: &mut Record<'_>,
    release: &str,
    chart: Option<String>,
    version: Option<&str>,
    set: &[String],
    reuse_values: bool,
) -> Result<Value> {
    let ns = c.params.namespace.as_str();
    let recorded = rec.st.releases.get(release).map(|r| r.chart.clone());
    // `REPO/CHART` naming one of this CNF's repositories means the instance's own copy of it.
    let chart = chart.map(|ch| match ch.split_once('/') {
        Some((repo, name))
            if c.params
                .releases
                .iter()
                .any(|r| matches!(&r.source, ChartSource::External { repo: x, .. } if x == repo)) =>
        {
            format!("{}/{name}", names::instance_repo(c.instance, repo))
        }
        _ => ch,
    });
    let chart = chart.or(recorded).ok_or_else(|| {
        Error::input("arguments", "--chart", format!("release {release} has no recorded chart; pass --chart"))
    })?;
    let target = Chart { release, chart: &chart, namespace: ns, version };
    let cmd = c.s.helm.upgrade(&target, &Values { set, ..Values::default() }, reuse_values, &c.opts)?;
    c.s.run_watched(cmd, c.timeout + Duration::from_secs(30), release, ns, crate::redact::Redact::None).await?;
    let rel = c
        .params
        .releases
        .iter()
        .find(|r| r.name == release)
        .cloned()
        .unwrap_or(Release { source: ChartSource::Oci { reference: chart.clone() }, ..Release::named(release) });
    let rs = ops::describe(c, &rel, &chart).await?;
    rec.release(release, &rs)?;
    Ok(json!({"release": release, "revision": rs.revision, "state": rs}))
}

#[cfg(test)]
mod tests {
    //! The decision logic of CNF operations on the scripted fake transport: Helm pending-state
    //! recovery and master failover, through the real `prepare` and `run`.

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{json, Value};

    use super::*;
    use crate::event::Events;
    use crate::lifecycle::{FanOut, Timeouts};
    use crate::transport::fake::FakeConnector;

    const M1: &str = "master-192.0.2.11";
    const M2: &str = "master-192.0.2.12";

    struct Fixture {
        dir: tempfile::TempDir,
        fake: FakeConnector,
    }

    fn status(s: &str, rev: u64) -> String {
        json!({"name": "vdu2", "info": {"status": s}, "version": rev, "namespace": "cnf"}).to_string()
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let vci = json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "extra": {"helm_info": {
                "masternode_ip": ["192.0.2.11", "192.0.2.12"], "masternode_username": "root", "masternode_password": "pw"}}}]);
            std::fs::write(dir.path().join("vci.json"), vci.to_string()).unwrap();
            let req = json!({"flavourId": "simple", "additionalParams": {"use_helm": "true", "namespace": "cnf", "using_helm_install_param": [{
                "exthelmchart": "true", "helmreleasename": "vdu2", "helmrepositoryname": "labrepo",
                "helmchartname": "nginxlab", "exthelmrepo_url": "http://192.0.2.50/charts"}]}});
            std::fs::write(dir.path().join("req.json"), req.to_string()).unwrap();
            let fake = FakeConnector::new();
            fake.reply(None, "helm version --short", "v3.17.3+g2a7b0d1\n")
                .reply(None, "status --namespace cnf -o json -- vdu2", &status("deployed", 2))
                .reply(
                    None,
                    "get manifest --namespace cnf -- vdu2",
                    "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: vdu2\n",
                )
                .reply(None, "get values --namespace cnf -o json --all -- vdu2", r#"{"replicaCount": 1}"#);
            Fixture { dir, fake }
        }

        fn inputs(&self) -> Inputs {
            Inputs {
                vnf_instance_id: Some("cnf1".into()),
                request: Some(self.dir.path().join("req.json").into()),
                vim_connection_info: Some(self.dir.path().join("vci.json")),
                timeout: Duration::from_secs(300),
                status_interval: Duration::from_secs(60),
                ..Default::default()
            }
        }

        async fn instantiate(&self) -> Result<Outcome> {
            let p = self.prepare(&self.inputs());
            let p = p?;
            let rt =
                Runner::new(Arc::new(self.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
            run(&Op::Instantiate, &self.inputs(), p, rt).await
        }

        /// `prepare`, waiting out a lock that a child process of another test still shares from
        /// fork until its exec (see cluster/testkit.rs); a real run is one operation per process.
        fn prepare(&self, inputs: &Inputs) -> Result<Prepared> {
            for _ in 0..100 {
                let store = Store::open(&self.dir.path().join("state")).unwrap();
                match prepare(&Op::Instantiate, inputs, store) {
                    Err(Error::Input { field, .. }) if field == "lock" => std::thread::sleep(Duration::from_millis(10)),
                    other => return other,
                }
            }
            panic!("the instance lock stayed held")
        }

        /// The Helm verbs run on `node`, in order (`install`, `upgrade`, ...).
        fn helm_verbs(&self, node: &str) -> Vec<String> {
            self.fake
                .execs(node)
                .iter()
                .filter_map(|e| e.split("helm ").nth(1).and_then(|r| r.split(' ').next()).map(str::to_string))
                .filter(|v| ["install", "upgrade", "uninstall", "rollback"].contains(&v.as_str()))
                .collect()
        }
    }

    #[tokio::test]
    async fn an_absent_release_is_installed_and_a_present_one_upgraded() {
        let f = Fixture::new();
        f.fake.reply_times(None, "status --namespace cnf -o json -- vdu2", r#"{"absent":true}"#, 1);
        let o = f.instantiate().await.unwrap();
        assert_eq!(f.helm_verbs(M1), vec!["install"]);
        assert_eq!(o.result["releases"]["vdu2"]["status"], "deployed");
        assert_eq!(o.context["master"], "192.0.2.11");
        let o = f.instantiate().await.unwrap();
        assert_eq!(f.helm_verbs(M1), vec!["install", "upgrade"]);
        assert_eq!(o.result["releases"]["vdu2"]["revision"], 2);
    }

    #[tokio::test]
    async fn a_release_stuck_in_pending_install_is_uninstalled_then_installed() {
        let f = Fixture::new();
        f.fake.reply_times(None, "status --namespace cnf -o json -- vdu2", &status("pending-install", 1), 1);
        f.instantiate().await.unwrap();
        assert_eq!(f.helm_verbs(M1), vec!["uninstall", "install"]);
    }

    #[tokio::test]
    async fn a_release_stuck_in_pending_upgrade_is_rolled_back_then_upgraded() {
        for stuck in ["pending-upgrade", "pending-rollback"] {
            let f = Fixture::new();
            f.fake.reply_times(None, "status --namespace cnf -o json -- vdu2", &status(stuck, 3), 1);
            f.instantiate().await.unwrap();
            assert_eq!(f.helm_verbs(M1), vec!["rollback", "upgrade"], "{stuck}");
        }
    }

    #[tokio::test]
    async fn a_failed_recovery_says_exactly_what_to_run_and_installs_nothing() {
        let f = Fixture::new();
        f.fake.reply_times(None, "status --namespace cnf -o json -- vdu2", &status("pending-install", 1), 1);
        f.fake.fail(None, "helm uninstall --namespace cnf -- vdu2", 1, "Error: cluster unreachable");
        let e = f.instantiate().await.err().expect("recovery failed").to_string();
        assert!(e.contains("stuck in pending-install") && e.contains("fix it on a master with:"), "{e}");
        assert!(e.contains("helm uninstall --namespace cnf -- vdu2") && e.contains("cluster unreachable"), "{e}");
        assert_eq!(f.helm_verbs(M1), vec!["uninstall"]);
    }

    #[tokio::test]
    async fn helm_runs_on_the_first_master_that_answers() {
        let f = Fixture::new();
        f.fake.down(M1);
        let o = f.instantiate().await.unwrap();
        assert_eq!(o.context["master"], "192.0.2.12");
        assert_eq!(f.helm_verbs(M2), vec!["upgrade"]);
        assert!(f.helm_verbs(M1).is_empty());
        let not_reached: Vec<Value> = o.result["mastersNotReached"].as_array().unwrap().clone();
        assert!(not_reached.len() == 1 && not_reached[0].as_str().unwrap().starts_with(M1), "{not_reached:?}");
    }

    #[tokio::test]
    async fn helm_4_gets_rollback_on_failure_instead_of_atomic() {
        let f = Fixture::new();
        f.fake.reply(None, "helm version --short", "v4.1.4+g1\n");
        let inputs = Inputs { atomic: true, ..f.inputs() };
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let o = run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        assert_eq!(o.context["helmMajor"], 4);
        let up = f.fake.execs(M1).into_iter().find(|e| e.contains("helm upgrade")).unwrap();
        assert!(up.contains("--rollback-on-failure") && !up.contains("--atomic"), "{up}");
    }

    /// Run `op` for `id` with request `req` (written to the fixture's dir) on the fake.
    async fn run_op(f: &Fixture, op: Op, id: &str, req: Option<Value>) -> Result<Outcome> {
        run_op_events(f, op, id, req).await.0
    }

    /// [`run_op`], and every event it emitted, as JSON lines.
    async fn run_op_events(f: &Fixture, op: Op, id: &str, req: Option<Value>) -> (Result<Outcome>, String) {
        let (events, mut rx) = Events::channel();
        let r = run_op_with(f, op, id, req, events).await;
        let mut lines = String::new();
        while let Ok(e) = rx.try_recv() {
            lines.push_str(&serde_json::to_string(&e).unwrap());
            lines.push('\n');
        }
        (r, lines)
    }

    async fn run_op_with(f: &Fixture, op: Op, id: &str, req: Option<Value>, events: Events) -> Result<Outcome> {
        let request = req.map(|r| {
            let p = f.dir.path().join(format!("req-{id}.json"));
            std::fs::write(&p, r.to_string()).unwrap();
            p.into()
        });
        let inputs = Inputs { vnf_instance_id: Some(id.into()), request, ..f.inputs() };
        let mut p = None;
        for _ in 0..100 {
            let store = Store::open(&f.dir.path().join("state")).unwrap();
            match prepare(&op, &inputs, store) {
                Err(Error::Input { field, .. }) if field == "lock" => std::thread::sleep(Duration::from_millis(10)),
                other => {
                    p = Some(other?);
                    break;
                }
            }
        }
        let rt = Runner::new(Arc::new(f.fake.clone()), events, FanOut::default(), Timeouts::default());
        run(&op, &inputs, p.expect("the instance lock stayed held"), rt).await
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
        let adds: Vec<&String> = execs.iter().filter(|e| e.contains("helm repo add")).collect();
        assert!(adds[0].contains("-- cnf1@labrepo http://192.0.2.50/a"), "{adds:?}");
        assert!(adds[1].contains("-- cnf2@labrepo http://192.0.2.66/evil"), "{adds:?}");
        assert!(
            execs.iter().any(|e| e.contains("helm upgrade") && e.contains("-- vdu2 cnf2@labrepo/nginxlab")),
            "{execs:?}"
        );
        // Terminating the second CNF removes its repository only.
        run_op(&f, Op::Terminate, "cnf2", None).await.unwrap();
        let removes: Vec<String> = f.fake.execs(M1).into_iter().filter(|e| e.contains("helm repo remove")).collect();
        assert!(removes.iter().all(|e| e.contains("-- cnf2@labrepo") && !e.contains("cnf1@")), "{removes:?}");
        assert!(!removes.is_empty());
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
        f.fake.reply(None, "get values --namespace cnf -o json --all -- vdu2",
            r#"{"replicaCount": 1, "db": {"password": "hunter2-literal"}, "api": {"token": "tok-from-env-77"}, "copy": "x-hunter2-literal"}"#);
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
            execs.contains("--username bob --password-stdin -- cnf1@labrepo http://192.0.2.50/charts <"),
            "{execs}"
        );
        assert!(execs.contains("--set-file db.password=.mgmt-driver/run/cnf1/set-vdu2-1"), "{execs}");
        assert!(execs.contains("--set-file api.token=.mgmt-driver/run/cnf1/set-vdu2-0"), "{execs}");
        assert!(execs.contains("--set plain=@env:literal"), "{execs}");
        assert!(execs.contains("rm -f .mgmt-driver/run/cnf1/set-vdu2-0"), "{execs}");
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

    /// The fake's answers for a whole-CNF heal of vdu2: a Deployment in its manifest, its
    /// selector and its pods.
    fn whole_heal_replies(f: &Fixture) {
        f.fake
            .reply(
                None,
                "get manifest --namespace cnf -- vdu2",
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vdu2-nginxlab\n",
            )
            .reply(None, "kubectl get deployment/vdu2-nginxlab", r#"{"spec": {"selector": {"matchLabels": {"app": "vdu2"}}}}"#)
            .reply(
                None,
                "kubectl get pods --namespace cnf -l app=vdu2",
                r#"{"items": [{"metadata": {"name": "vdu2-nginxlab-6b9c-x1", "uid": "0af1"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}]}"#,
            );
    }

    #[tokio::test]
    async fn a_whole_cnf_heal_restarts_every_workload_and_waits_for_its_rollout() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        whole_heal_replies(&f);
        let o = run_op(&f, Op::Heal, "cnf1", Some(json!({}))).await.unwrap();
        let execs = f.fake.execs(M1);
        let pos = |needle: &str| execs.iter().position(|e| e.contains(needle));
        let restart = pos("kubectl rollout restart deployment/vdu2-nginxlab --namespace cnf").expect("restarted");
        let status = pos("kubectl rollout status deployment/vdu2-nginxlab --namespace cnf --timeout=").expect("waited");
        assert!(restart < status, "{execs:?}");
        let w = &o.result["workloads"][0];
        assert_eq!((w["release"].as_str(), w["kind"].as_str()), (Some("vdu2"), Some("Deployment")), "{}", o.result);
        assert_eq!(w["pods"][0]["ready"], true);
    }

    #[tokio::test]
    async fn a_pod_that_is_not_ready_again_fails_the_heal_by_name() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        whole_heal_replies(&f);
        f.fake.fail(None, "kubectl rollout status", 1, "error: timed out waiting for the condition");
        f.fake.reply(
            None,
            "kubectl get pods --namespace cnf -l app=vdu2",
            r#"{"items": [{"metadata": {"name": "vdu2-nginxlab-6b9c-x2", "uid": "0af2"}, "status": {"phase": "Pending"}}]}"#,
        );
        let e = run_op(&f, Op::Heal, "cnf1", Some(json!({"additionalParams": {"all": true}}))).await.err().unwrap();
        let e = e.to_string();
        assert!(
            e.contains("release vdu2") && e.contains("vdu2-nginxlab-6b9c-x2 (Pending)") && e.contains("timed out"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_sol002_heal_deletes_the_pod_its_vnfc_id_names_in_the_instance() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let inst = json!({"id": "cnf1", "instantiatedVnfInfo": {
            "vnfcResourceInfo": [{"id": "r1", "vduId": "VDU2", "computeResource": {"resourceId": "vdu2-nginxlab-6b9c-x1"}}],
            "vnfcInfo": [{"id": "vnfc-9", "vduId": "VDU2", "vnfcResourceInfoId": "r1"}]}});
        let path = f.dir.path().join("inst.json");
        std::fs::write(&path, inst.to_string()).unwrap();
        let req = f.dir.path().join("heal.json");
        std::fs::write(&req, json!({"vnfcInstanceId": ["vnfc-9"]}).to_string()).unwrap();
        let inputs =
            Inputs { request: Some(req.clone().into()), vnf_instance: Some(path.clone().into()), ..f.inputs() };
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        let p = prepare(&Op::Heal, &inputs, store).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let o = run(&Op::Heal, &inputs, p, rt).await.unwrap();
        assert_eq!(o.result[0]["pod"], "vdu2-nginxlab-6b9c-x1");
        assert!(f
            .fake
            .execs(M1)
            .iter()
            .any(|e| e.contains("kubectl delete pod vdu2-nginxlab-6b9c-x1 --namespace cnf")));
        // An id the instance does not hold: bad input naming the field, nothing run.
        std::fs::write(&req, json!({"vnfcInstanceId": ["vdu2-nginxlab-6b9c-x1"]}).to_string()).unwrap();
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        let e = prepare(&Op::Heal, &inputs, store).err().unwrap();
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        assert!(e.to_string().contains("vnfcInstanceId[0]"), "{e}");
    }

    #[tokio::test]
    async fn namespace_overrides_the_requests_and_is_recorded_and_checked() {
        let f = Fixture::new();
        f.fake.reply(None, "status --namespace other -o json -- vdu2", &status("deployed", 1)).reply(
            None,
            "get values --namespace other -o json --all -- vdu2",
            "{}",
        );
        let inputs = Inputs { namespace: Some("other".into()), ..f.inputs() };
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        let execs = f.fake.execs(M1);
        assert!(execs.iter().any(|e| e.contains("helm upgrade") && e.contains("--namespace other")), "{execs:?}");
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/cnf1.cnf.json")).unwrap()).unwrap();
        assert_eq!(rec["params"]["namespace"], "other", "{rec}");
        let bad = Inputs { namespace: Some("Bad_NS".into()), ..f.inputs() };
        let e = f.prepare(&bad).err().unwrap().to_string();
        assert!(e.contains("--namespace"), "{e}");
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

    /// The commands that run Helm itself (not its version probe).
    fn helm_cmds(execs: &[String]) -> Vec<&String> {
        execs.iter().filter(|e| e.contains("helm ") && !e.contains("helm version")).collect()
    }

    #[tokio::test]
    async fn every_helm_command_runs_in_the_clusters_own_environment_recorded_with_the_cnf() {
        let f = Fixture::new();
        let inputs = Inputs { cluster_uuid: Some("east".into()), ..f.inputs() };
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        let o = run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        assert_eq!(o.context["clusterId"], "east");
        assert_eq!(o.context["helmEnvironment"], "/var/lib/mgmt-driver/helm/east");
        let env = HelmEnv::cluster("east").unwrap();
        for m in [M1, M2] {
            let execs = f.fake.execs(m);
            assert!(
                execs
                    .iter()
                    .any(|e| e.contains("helm_env.sh /var/lib/mgmt-driver/helm/east /etc/kubernetes/admin.conf")),
                "{m}: {execs:?}"
            );
            let helm = helm_cmds(&execs);
            assert!(!helm.is_empty(), "{m}: {execs:?}");
            for c in helm {
                assert!(c.contains(&format!("{}helm ", env.prefix())), "{c}");
            }
        }
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/cnf1.cnf.json")).unwrap()).unwrap();
        assert_eq!(rec["cluster_id"], "east", "{rec}");
        // Later operations use the recorded cluster without the flag...
        let n = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Status { release: "vdu2".into() }, "cnf1", None).await.unwrap();
        assert!(o.result.is_object());
        assert!(f.fake.execs(M1)[n..].iter().any(|e| e.contains(&format!("{}helm status", env.prefix()))));
        // ...and refuse another one before connecting.
        let n = f.fake.calls().len();
        let west = Inputs { cluster_uuid: Some("west".into()), ..f.inputs() };
        let e = f.prepare(&west).err().expect("refused");
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        assert!(e.to_string().contains("--cluster-uuid") && e.to_string().contains("'east'"), "{e}");
        assert_eq!(f.fake.calls().len(), n);
    }

    #[test]
    fn a_cluster_uuids_namespace_is_the_default_namespace() {
        let f = Fixture::new();
        let no_ns = f.dir.path().join("no-ns.json");
        let mut req: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("req.json")).unwrap()).unwrap();
        req["additionalParams"].as_object_mut().unwrap().remove("namespace");
        std::fs::write(&no_ns, req.to_string()).unwrap();
        let with = |req: &std::path::Path, ns: Option<&str>| Inputs {
            request: Some(req.to_path_buf().into()),
            cluster_uuid: Some("edge:east".into()),
            namespace: ns.map(str::to_string),
            ..f.inputs()
        };
        let p = f.prepare(&with(&no_ns, None)).unwrap();
        assert_eq!((p.params.namespace.as_str(), p.env.id()), ("edge", Some("east")));
        assert_eq!(p.ap["namespace"], "edge", "recorded for later operations");
        drop(p);
        let p = f.prepare(&with(&f.dir.path().join("req.json"), None)).unwrap();
        assert_eq!(p.params.namespace, "cnf", "the request's namespace wins");
        drop(p);
        let p = f.prepare(&with(&no_ns, Some("other"))).unwrap();
        assert_eq!(p.params.namespace, "other", "--namespace wins");
        drop(p);
        for bad in ["Bad_NS:east", "edge:../x", "edge:"] {
            let i = Inputs { cluster_uuid: Some(bad.into()), ..f.inputs() };
            let e = f.prepare(&i).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.to_string().contains("--cluster-uuid"), "{e}");
        }
    }

    #[tokio::test]
    async fn services_come_from_the_manifest_with_what_the_cluster_allocated() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        f.fake.reply(
            None,
            "kubectl get service vdu2 --namespace cnf -o json",
            &json!({"kind": "Service", "metadata": {"name": "vdu2", "namespace": "cnf"},
                "spec": {"type": "NodePort", "clusterIP": "10.96.14.3", "ports": [{"port": 80, "nodePort": 30080}]}})
            .to_string(),
        );
        let o = run_op(&f, Op::Services { release: None }, "cnf1", None).await.unwrap();
        let svc = &o.result["services"][0];
        assert_eq!(o.result["releases"], json!(["vdu2"]));
        assert_eq!((svc["name"].as_str(), svc["type"].as_str()), (Some("vdu2"), Some("NodePort")), "{}", o.result);
        assert_eq!(svc["clusterIP"], "10.96.14.3");
        assert_eq!(svc["ports"][0]["nodePort"], 30080);
        let get = f.fake.execs(M1).into_iter().find(|e| e.contains("kubectl get service")).unwrap();
        assert!(get.contains("export KUBECONFIG=/var/lib/mgmt-driver/helm/cnf1/kubeconfig "), "{get}");
        // An address that is not one is refused, naming the service.
        f.fake.reply(
            None,
            "kubectl get service vdu2",
            r#"{"kind": "Service", "metadata": {"name": "vdu2"}, "spec": {"clusterIP": "10.0.0.1 && id"}}"#,
        );
        let e = run_op(&f, Op::Services { release: Some("vdu2".into()) }, "cnf1", None).await.err().unwrap();
        assert!(e.to_string().contains("spec.clusterIP"), "{e}");
        let bad = run_op(&f, Op::Services { release: Some("-x".into()) }, "cnf1", None).await.err().unwrap();
        assert_eq!(bad.exit_code(), crate::error::exit::BAD_INPUT);
    }

    #[tokio::test]
    async fn reset_uninstalls_when_asked_removes_the_environment_everywhere_and_is_idempotent() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        f.fake.reply(None, "helm_env_reset.sh /var/lib/mgmt-driver/helm/cnf1", "removed\n");
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        assert_eq!(o.result["releases"][0]["outcome"], "uninstalled", "{}", o.result);
        assert_eq!(
            o.result["masters"],
            json!([{"master": M1, "environment": "removed"}, {"master": M2, "environment": "removed"}])
        );
        let execs = f.fake.execs(M1);
        let pos = |needle: &str| execs.iter().position(|e| e.contains(needle)).unwrap_or_else(|| panic!("{needle}"));
        assert!(pos("helm uninstall") < pos("helm_env_reset.sh"), "{execs:?}");
        assert!(!f.dir.path().join("state/cnf1.cnf.json").exists(), "the record is gone with the releases");
        // Again: nothing to uninstall, nothing to remove (and nothing made to be removed).
        f.fake.reply(None, "helm_env_reset.sh", "absent\n");
        let n = f.fake.execs(M1).len();
        let o = run_op(&f, Op::Reset { uninstall: true }, "cnf1", None).await.unwrap();
        assert_eq!(o.result["releases"], json!([]));
        assert_eq!(o.result["masters"][0]["environment"], "absent");
        let again = &f.fake.execs(M1)[n..];
        assert!(!again.iter().any(|e| e.contains("helm uninstall") || e.contains("helm_env.sh")), "{again:?}");
        // Without --uninstall the releases and the record stay.
        f.instantiate().await.unwrap();
        let n = f.fake.execs(M1).len();
        run_op(&f, Op::Reset { uninstall: false }, "cnf1", None).await.unwrap();
        assert!(!f.fake.execs(M1)[n..].iter().any(|e| e.contains("helm uninstall")));
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists());
    }

    #[tokio::test]
    async fn a_dry_run_reset_plans_every_step_and_changes_nothing() {
        let f = Fixture::new();
        f.instantiate().await.unwrap();
        let (events, mut rx) = Events::channel();
        let inputs = Inputs { request: None, ..f.inputs() };
        let op = Op::Reset { uninstall: true };
        let p = prepare(&op, &inputs, Store::read_only(&f.dir.path().join("state"))).unwrap();
        let plan = Arc::new(crate::lifecycle::plan::PlanConnector::new());
        let rt = Runner::new(plan, events, FanOut::default(), Timeouts::default());
        let o = run(&op, &inputs, p, rt).await.unwrap();
        let mut lines = String::new();
        while let Ok(e) = rx.try_recv() {
            lines.push_str(&serde_json::to_string(&e).unwrap());
            lines.push('\n');
        }
        for step in [
            "helm uninstall --namespace cnf --wait -- vdu2",
            "helm repo remove -- cnf1@labrepo",
            "rm -rf /var/tacker/helm/cnf1",
            "helm_env_reset.sh /var/lib/mgmt-driver/helm/cnf1",
        ] {
            assert!(lines.contains(step), "{step} not planned:\n{lines}");
        }
        assert_eq!(o.result["masters"][1]["environment"], "planned", "{}", o.result);
        assert!(f.dir.path().join("state/cnf1.cnf.json").exists(), "a plan removed the record");
    }
}
