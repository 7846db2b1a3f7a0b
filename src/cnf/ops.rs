//! The CNF operations over SSH. Each reads like its step list; every command comes from
//! `helm_cmd` (pure) and runs through the session's active master.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cnf::helm_cmd::{self as hc, InstallOpts};
use crate::cnf::manifest::{self, Resource};
use crate::cnf::names;
use crate::cnf::params::{ChartSource, CnfParams, Release};
use crate::cnf::session::{release_status, Session};
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::{all_ok, Node, Target};
use crate::quote::quote;
use crate::redact::Redact;
use crate::transport::{Source, UploadFile};

/// What the CNF state store keeps per VNF instance. `Debug` masks its secrets (repository
/// password, helm_info password, secret-named values).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct CnfState {
    pub vnf_instance_id: String,
    pub namespace: String,
    /// The request's additionalParams (later operations reuse them).
    pub params: Value,
    pub masters: Vec<String>,
    pub releases: BTreeMap<String, ReleaseState>,
    /// The instantiate request's flavourId: whose VNFD flavour a scale reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavour_id: Option<String>,
    /// The cluster id whose Helm environment holds the CNF's repositories (`cluster_env`);
    /// none in records of drivers before it (they use the legacy environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

crate::secret::impl_debug_masked!(CnfState);

/// `Debug` masks secret-named values.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReleaseState {
    pub chart: String,
    pub revision: u64,
    pub status: String,
    pub resources: Vec<Resource>,
    pub values: Value,
}

crate::secret::impl_debug_masked!(ReleaseState);

pub struct Ctx<'a> {
    pub s: &'a Session,
    pub params: &'a CnfParams,
    pub instance: &'a str,
    pub pkg: Option<&'a Package>,
    pub req_file: &'a str,
    pub opts: InstallOpts,
    pub timeout: Duration,
}

fn cmd_timeout(c: &Ctx) -> Duration {
    c.timeout + Duration::from_secs(30)
}

/// The chart argument of a release on the masters.
pub fn chart_ref(instance: &str, r: &Release) -> String {
    match &r.source {
        ChartSource::Local { chart_dir, .. } => format!("{}/{chart_dir}", names::chart_dir(instance)),
        ChartSource::External { repo, chart, .. } => format!("{}/{chart}", names::instance_repo(instance, repo)),
        ChartSource::Oci { reference } => reference.clone(),
    }
}

/// Charts and repositories onto **every** master (so any can take over), at once. A master
/// other than the active one that cannot be reached is reported, not fatal.
pub async fn distribute(c: &Ctx<'_>) -> Result<Vec<String>> {
    let s = c.s;
    let nodes = s.all();
    s.rt.phase("charts and repositories on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| async move {
            s.ensure_env(n).await?;
            for (i, r) in c.params.releases.iter().enumerate() {
                match &r.source {
                    ChartSource::Local { path, chart_dir } => put_chart(c, n, i, path, chart_dir).await?,
                    ChartSource::External { repo, url, .. } => add_repo(c, n, r, repo, url).await?,
                    ChartSource::Oci { .. } => {}
                }
            }
            Ok(())
        })
        .await;
    let mut unreachable = Vec::new();
    let mut active_failed = None;
    for (n, r) in res {
        if let Err(e) = r {
            if n.name() == s.master().name() {
                active_failed = Some(e);
            } else {
                unreachable.push(format!("{}: {e}", n.name()));
            }
        }
    }
    match active_failed {
        Some(e) => Err(e),
        None => Ok(unreachable),
    }
}

/// A chart from the package into the instance's chart directory on `n`, extracted there.
async fn put_chart(c: &Ctx<'_>, n: &Target, i: usize, path: &str, chart_dir: &str) -> Result<()> {
    let (s, t) = (c.s, c.s.rt.timeouts.command);
    let pkg = c.pkg.ok_or_else(|| Error::input("arguments", "--package-dir", "is required for local charts"))?;
    let field = format!("additionalParams.using_helm_install_param[{i}].helmchartfile_path");
    let local = pkg.file(path, c.req_file, &field)?;
    let name = path.rsplit('/').next().unwrap_or(path).to_string();
    s.rt.exec(n, s.rt.root_cmd(n, hc::prepare_chart_dir(c.instance, &n.host.user)?, t)).await?;
    let remote = format!("{}/{name}", names::chart_dir(c.instance));
    s.rt.upload(n, vec![UploadFile { source: local, remote, mode: 0o644 }]).await?;
    s.rt.exec(n, s.rt.root_cmd(n, hc::extract_chart(c.instance, &name, chart_dir)?, t)).await?;
    Ok(())
}

/// A chart repository of the instance on `n`, under the instance's own name for it
/// ([`names::instance_repo`]): another CNF's repository of the same name is never re-pointed.
async fn add_repo(c: &Ctx<'_>, n: &Target, r: &Release, repo: &str, url: &str) -> Result<()> {
    let ca_file = match &r.repo_ca_file {
        Some(ca) => {
            let pkg = c
                .pkg
                .ok_or_else(|| Error::input("arguments", "--package-dir", "is required for exthelmrepo_ca_file"))?;
            Some(pkg.file(ca, c.req_file, "exthelmrepo_ca_file")?)
        }
        None => None,
    };
    let creds = r.repo_username.as_deref().zip(r.repo_password.as_ref());
    let name = names::instance_repo(c.instance, repo);
    add_repo_as(c.s, n, c.instance, &name, url, creds, ca_file).await
}

/// `helm repo add NAME URL` and `helm repo update NAME` on `n`. Credentials: the password in a
/// 0600 file of the run dir fed to `--password-stdin` and deleted; the CA file kept 0600 (Helm
/// reads it on every pull).
async fn add_repo_as(
    s: &Session,
    n: &Target,
    instance: &str,
    name: &str,
    url: &str,
    creds: Option<(&str, &crate::secret::Secret)>,
    ca: Option<Source>,
) -> Result<()> {
    let t = s.rt.timeouts.command;
    let run = format!(".mgmt-driver/run/{instance}");
    let mut files = Vec::new();
    let pw_file = creds.map(|_| format!("{run}/repo-{name}.pw"));
    if let (Some(f), Some((_, pw))) = (&pw_file, creds) {
        let bytes = Source::Bytes(pw.expose().as_bytes().to_vec().into());
        files.push(UploadFile { source: bytes, remote: f.clone(), mode: 0o600 });
    }
    let ca_file = match ca {
        Some(local) => {
            let remote = format!("{run}/repo-{name}-ca.crt");
            files.push(UploadFile { source: local, remote: remote.clone(), mode: 0o600 });
            Some(remote)
        }
        None => None,
    };
    if !files.is_empty() {
        s.rt.upload(n, files).await?;
    }
    let add = s.helm.repo_add(name, url, creds.map(|c| c.0), pw_file.as_deref(), ca_file.as_deref())?;
    let res = s.rt.exec(n, s.rt.root_cmd(n, add, t)).await;
    if let Some(f) = &pw_file {
        s.rt.exec(n, s.rt.root_cmd(n, format!("rm -f {}", quote(f)?), t)).await?;
    }
    res?;
    s.rt.exec(n, s.rt.root_cmd(n, s.helm.repo_update(name)?, t)).await?;
    Ok(())
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

/// Without a VNFD bound for the aspect, the VNF instance's own: `instantiatedVnfInfo.scaleStatus`
/// (the aspect's level now) and `maxScaleLevels` (its highest), as SOL003 carries them. A scale
/// that leaves 0..=max is refused naming the aspect and the bound; an instance without them
/// bounds nothing.
pub fn instance_level_bound(
    inst: &crate::request::VnfInstance,
    aspect: &str,
    steps: i64,
) -> std::result::Result<(), String> {
    let Some(info) = inst.instantiated_vnf_info.as_ref() else { return Ok(()) };
    let level_in = |key: &str| {
        info.rest.get(key)?.as_array()?.iter().find(|s| s["aspectId"] == aspect)?.get("scaleLevel")?.as_i64()
    };
    let (Some(now), Some(max)) = (level_in("scaleStatus"), level_in("maxScaleLevels")) else { return Ok(()) };
    let to = now + steps;
    if !(0..=max).contains(&to) {
        return Err(format!(
            "aspect '{aspect}' would go from scale level {now} to {to}, outside 0 to {max} \
             (the VNF instance's scaleStatus and maxScaleLevels)"
        ));
    }
    Ok(())
}

/// Where a scale of `steps` (negative: in) from `current` replicas lands, within what bounds:
/// `vdu_mapping`'s min/max (our extension) over the VNFD's vdu_profile; each step's size from
/// the aspect's deltas for the VDU (1 without a VNFD); the VNFD's `max_scale_level` bounds the
/// level above the VDU's initial delta. An out-of-bounds target is bad input (exit 2) naming
/// the aspect and the bound, with Tacker's words first.
pub fn scale_target(
    p: &CnfParams,
    aspect: &str,
    vdu: Option<&str>,
    current: u64,
    steps: i64,
) -> std::result::Result<u64, String> {
    let a = p.scaling.aspects.get(aspect);
    let prof = vdu.and_then(|v| p.scaling.vdus.get(v));
    let ext = vdu.and_then(|v| p.vdu_mapping.get(v));
    let step = |level: u32| vdu.and_then(|v| a?.step_delta(v, level)).unwrap_or(1) as i64;
    let initial = prof.and_then(|x| x.initial).map(i64::from);
    // The aspect's level now: the steps from the initial delta to `current` (0 when unknown).
    let mut level = 0u32;
    if let Some(init) = initial {
        let mut n = init;
        while n < current as i64 && level < 10_000 {
            n += step(level).max(1);
            level += 1;
        }
    }
    let mut target = current as i64;
    for _ in 0..steps.unsigned_abs().min(100_000) {
        if steps > 0 {
            target += step(level);
            level += 1;
        } else {
            level = level.saturating_sub(1);
            target -= step(level);
        }
    }
    let out = |why: String| format!("The number of target replicas after scaling [{target}] is out of range: {why}");
    let vdu_name = vdu.map(|v| format!(" ({v})")).unwrap_or_default();
    let min = ext.and_then(|v| v.min).or(prof.and_then(|x| x.min)).map(i64::from).unwrap_or(0);
    let max = ext.and_then(|v| v.max).or(prof.and_then(|x| x.max)).map(i64::from).unwrap_or(i32::MAX.into());
    if target < min || target > max {
        let from = if ext.is_some_and(|v| v.min.is_some() || v.max.is_some()) { "vdu_mapping" } else { "vdu_profile" };
        return Err(out(format!("aspect '{aspect}'{vdu_name} allows {min} to {max} instances ({from})")));
    }
    if let (Some(max_level), Some(init), Some(_)) = (a.and_then(|a| a.max_scale_level), initial, vdu) {
        let top = (0..max_level).fold(init, |n, l| n + step(l));
        if target > top {
            return Err(out(format!(
                "aspect '{aspect}'{vdu_name} is at most max_scale_level {max_level} ({top} instances)"
            )));
        }
    }
    Ok(target as u64)
}

/// Install or upgrade one release, idempotently: `helm status` first; absent → install;
/// deployed/failed → upgrade; stuck `pending-*` (an interrupted run) → recover, then upgrade.
pub async fn apply_release(c: &Ctx<'_>, r: &Release) -> Result<ReleaseState> {
    let s = c.s;
    let ns = &c.params.namespace;
    let m = s.master();
    let chart = chart_ref(c.instance, r);
    let version = match &r.source {
        ChartSource::Local { .. } => None,
        _ => r.version.as_deref(),
    };
    let current = s.release(&r.name, ns, None).await?;
    let run = format!(".mgmt-driver/run/{}", c.instance);
    let (mut files, mut set_files, mut uploads) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(v) = &r.values {
        let f = format!("{run}/values-{}.json", r.name);
        uploads.push(UploadFile {
            source: Source::Bytes(v.to_string().into_bytes().into()),
            remote: f.clone(),
            mode: 0o600,
        });
        files.push(f);
    }
    // Secret values: each in its own 0600 file, `--set-file KEY=FILE`; argv holds the path only.
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
        files.push(f);
    }
    if !uploads.is_empty() {
        s.rt.upload(m, uploads).await?;
    }
    let set = release_sets(c, r);
    let mut opts = c.opts.clone();
    if ns != "default" {
        opts.create_namespace = true;
    }
    let target = hc::Chart { release: &r.name, chart: &chart, namespace: ns, version };
    let values_files: Vec<String> = files.iter().filter(|f| f.ends_with(".json")).cloned().collect();
    let vals = hc::Values { set: &set, set_files: &set_files, files: &values_files };
    let cmd = match current.as_ref().map(|(st, _)| st.as_str()) {
        None => s.helm.install(&target, &vals, &opts)?,
        Some(stuck @ ("pending-install" | "pending-upgrade" | "pending-rollback")) => {
            recover(c, r, stuck, current.as_ref().map(|x| x.1).unwrap_or(0)).await?;
            if stuck == "pending-install" {
                s.helm.install(&target, &vals, &opts)?
            } else {
                s.helm.upgrade(&target, &vals, false, &opts)?
            }
        }
        Some(_) => s.helm.upgrade(&target, &vals, false, &opts)?,
    };
    let redact = if r.secret_set.is_empty() { Redact::None } else { Redact::All };
    let res = s.run_watched(cmd, cmd_timeout(c), &r.name, ns, redact).await;
    let res = res.map_err(|e| crate::cnf::secret_values::mask_error(e, &r.secret_set));
    for f in &files {
        let _ = s.run(format!("rm -f {}", quote(f)?), s.rt.timeouts.command).await;
    }
    res?;
    describe(c, r, &chart).await
}

/// An earlier run died while Helm held the release in a pending state. A pending install is
/// uninstalled (nothing was deployed); a pending upgrade or rollback is rolled back to the
/// last deployed revision. If that fails the error says exactly what to run.
async fn recover(c: &Ctx<'_>, r: &Release, stuck: &str, revision: u64) -> Result<()> {
    let s = c.s;
    let ns = &c.params.namespace;
    let fix = if stuck == "pending-install" {
        s.helm.uninstall(&r.name, ns, false)?
    } else {
        s.helm.rollback(&r.name, ns, None, &InstallOpts::default())?
    };
    s.rt.ev(s.master()).emit(crate::event::EventKind::Warning {
        message: format!(
            "release {} is stuck in {stuck} (revision {revision}) from an interrupted run; recovering",
            r.name
        ),
    });
    s.run(fix.clone(), cmd_timeout(c)).await.map_err(|e| Error::Remote {
        node: s.master().name().into(),
        command: fix.clone(),
        status: "recovery failed".into(),
        stderr_tail: format!(
            "release {} is stuck in {stuck}; fix it on a master with:\n  {}\nthen run this operation again.\n{e}",
            r.name,
            fix.trim_start_matches(&s.helm.env.prefix())
        ),
    })?;
    Ok(())
}

/// Status, manifest → resources, and all values of a release, as recorded.
pub async fn describe(c: &Ctx<'_>, r: &Release, chart: &str) -> Result<ReleaseState> {
    let s = c.s;
    let ns = &c.params.namespace;
    let t = s.rt.timeouts.command;
    let m = s.master();
    // Read, not streamed: status JSON carries the user-supplied values, manifests the
    // rendered Secrets. What is kept is parsed and masked.
    let status = s.rt.root_cmd(m, s.helm.status(&r.name, ns)?, t).with_redact(Redact::All);
    let (status, revision) =
        s.rt.fact(
            m,
            status,
            "the release status",
            || (String::new(), 0),
            |o| release_status(o).ok_or_else(|| "unreadable status JSON".to_string()),
        )
        .await?;
    let man = s.rt.root_cmd(m, s.helm.get_manifest(&r.name, ns)?, t).with_redact(Redact::All);
    let resources = s.rt.fact(m, man, "the release manifest", Vec::new, |o| manifest::parse(o, ns)).await?;
    let mut values = s.json(s.helm.get_values(&r.name, ns, true)?, "the release values").await?;
    if !(values.is_object() || values.is_null()) {
        return Err(crate::lifecycle::fact::unreadable(
            m.name(),
            "helm get values",
            "the release values",
            "not a JSON object",
        ));
    }
    crate::cnf::secret_values::mask(&mut values, &r.secret_set);
    s.rt.ev(m).emit(crate::event::EventKind::Status {
        subject: format!("release {}", r.name),
        status: format!("{status} (revision {revision})"),
    });
    Ok(ReleaseState { chart: chart.into(), revision, status, resources, values })
}

/// `a.b.c` in a values document.
pub fn value_at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(v, |cur, k| cur.get(k))
}

/// Scale: current replicas from `helm get values --all` at the aspect's path, target = current
/// ± steps, bounded by the VDU's min/max, then `helm upgrade --reuse-values --set path=n`.
pub async fn scale(c: &Ctx<'_>, aspect: &str, delta: i64) -> Result<(u64, u64, ReleaseState)> {
    let p = c.params;
    let path = p.replica_values.get(aspect).ok_or_else(|| {
        Error::input(c.req_file, "aspectId", format!("Replica value for aspectId '{aspect}' is missing"))
    })?;
    let (vdu, r) = aspect_vdu(p, aspect).ok_or_else(|| {
        Error::input(
            c.req_file,
            "aspectId",
            format!(
                "no release scales aspect '{aspect}' (the VNFD's VduScalingAspectDeltas name no VDU of vdu_mapping; \
                 pass --package-dir, or add aspect_id to a vdu_mapping entry)"
            ),
        )
    })?;
    let s = c.s;
    let m = s.master();
    let vals = s.rt.root_cmd(m, s.helm.get_values(&r.name, &p.namespace, true)?, s.rt.timeouts.command);
    let vals = vals.with_redact(Redact::All);
    let current = s.rt.fact(
        m,
        vals,
        "the replica count",
        || 1,
        |o| {
            let v: Value = serde_json::from_str(o.trim()).map_err(|e| format!("not JSON: {e}"))?;
            value_at(&v, path)
                .and_then(Value::as_u64)
                .filter(|n| *n <= i32::MAX as u64)
                .ok_or_else(|| format!("no replica count (0 to 2147483647) at '{path}' in the release's values"))
        },
    );
    let current = current.await?;
    let target =
        scale_target(p, aspect, vdu, current, delta).map_err(|m| Error::input(c.req_file, "numberOfSteps", m))?;
    let chart = chart_ref(c.instance, r);
    let set = [format!("{path}={target}")];
    // The release's own chart version: without it Helm takes the repository's newest, and a
    // scale would upgrade the chart.
    let version = match &r.source {
        ChartSource::Local { .. } => None,
        _ => r.version.as_deref(),
    };
    let cmd = s.helm.upgrade(
        &hc::Chart { release: &r.name, chart: &chart, namespace: &p.namespace, version },
        &hc::Values { set: &set, ..hc::Values::default() },
        true,
        &c.opts,
    )?;
    s.run_watched(cmd, cmd_timeout(c), &r.name, &p.namespace, Redact::None).await?;
    Ok((current, target as u64, describe(c, r, &chart).await?))
}

/// Terminate: uninstall every release (namespace aware, waiting), then on every master remove
/// the repositories of external charts and the instance's chart directory.
pub async fn terminate(c: &Ctx<'_>, releases: &[String]) -> Result<Value> {
    let s = c.s;
    let ns = &c.params.namespace;
    let mut gone = Vec::new();
    for r in releases {
        // A plan shows the uninstall of every release.
        if s.release(r, ns, Some(("deployed".into(), 0))).await?.is_none() {
            gone.push(json!({"release": r, "outcome": "already absent"}));
            continue;
        }
        s.run(s.helm.uninstall(r, ns, true)?, cmd_timeout(c)).await?;
        gone.push(json!({"release": r, "outcome": "uninstalled"}));
    }
    let nodes = s.all();
    s.rt.phase("remove repositories and charts on every master", &nodes, true);
    let repos: Vec<String> = c
        .params
        .releases
        .iter()
        .filter_map(|r| match &r.source {
            ChartSource::External { repo, .. } => Some(names::instance_repo(c.instance, repo)),
            _ => None,
        })
        .collect();
    let res =
        s.rt.each(&nodes, |n| {
            let repos = &repos;
            async move {
                let t = s.rt.timeouts.command;
                for repo in repos {
                    let rm = format!("{} || true", s.helm.repo_remove(repo)?);
                    s.rt.exec(n, s.rt.root_cmd(n, rm, t)).await?;
                }
                s.rt.exec(n, s.rt.root_cmd(n, hc::remove_chart_dir(c.instance)?, t)).await.map(|_| ())
            }
        })
        .await;
    all_ok(res)?;
    Ok(Value::Array(gone))
}

/// One repository `repo-sync` wants: its name, its URL without userinfo, and the userinfo's
/// credentials (they go to Helm as `--username`/`--password-stdin`).
pub struct WantRepo {
    pub url: String,
    pub creds: Option<(String, crate::secret::Secret)>,
}

/// The repositories of a master as `helm repo list -o json` prints them: every name checked
/// (a repository name, or an instance's `<id>@<name>`) before it is compared or removed.
pub fn parse_repo_list(out: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let list = v.as_array().ok_or("not a JSON list")?;
    let mut have = BTreeMap::new();
    for r in list {
        let (Some(name), Some(url)) = (r.get("name").and_then(Value::as_str), r.get("url").and_then(Value::as_str))
        else {
            return Err("an entry without a name or url".into());
        };
        let ok = match name.split_once('@') {
            Some((inst, n)) => crate::lifecycle::state::check_instance_id(inst).is_ok() && names::repo(n).is_ok(),
            None => names::repo(name).is_ok(),
        };
        if !ok {
            return Err(format!("'{}' is not a repository name", crate::error::excerpt(name)));
        }
        have.insert(name.to_string(), url.trim_end_matches('/').to_string());
    }
    Ok(have)
}

/// Make the repository set of every master equal `want` (OSM's synchronize_repos): add missing,
/// re-add when the URL changed, remove extras (but `stable` and the CNF instances' own
/// `<id>@<name>` repositories, which their CNFs manage). Reports what changed per master.
pub async fn repo_sync(s: &Session, instance: &str, want: &BTreeMap<String, WantRepo>) -> Result<Value> {
    let nodes = s.all();
    s.rt.phase("repo sync on every master", &nodes, true);
    let res =
        s.rt.each(&nodes, |n| async move {
            let t = s.rt.timeouts.command;
            s.ensure_env(n).await?;
            let list = s.rt.root_cmd(n, s.helm.repo_list(), t);
            let have = s.rt.fact(n, list, "the repository list", BTreeMap::new, parse_repo_list).await?;
            let (mut added, mut updated, mut removed) = (vec![], vec![], vec![]);
            for (name, w) in want {
                match have.get(name) {
                    Some(u) if u == w.url.trim_end_matches('/') && w.creds.is_none() => continue,
                    Some(_) => updated.push(name.clone()),
                    None => added.push(name.clone()),
                }
                let creds = w.creds.as_ref().map(|(u, p)| (u.as_str(), p));
                add_repo_as(s, n, instance, name, &w.url, creds, None).await?;
            }
            let extra = have.keys().filter(|k| !want.contains_key(*k) && k.as_str() != "stable");
            for name in extra.filter(|k| !names::is_instance_repo(k)) {
                s.rt.exec(n, s.rt.root_cmd(n, s.helm.repo_remove(name)?, t)).await?;
                removed.push(name.clone());
            }
            Ok(json!({"master": n.name(), "added": added, "updated": updated, "removed": removed}))
        })
        .await;
    Ok(Value::Array(all_ok(res)?))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn values_paths() {
        let v = json!({"a": {"b": {"c": 3}}, "replicaCount": 2});
        assert_eq!(value_at(&v, "a.b.c"), Some(&json!(3)));
        assert_eq!(value_at(&v, "replicaCount"), Some(&json!(2)));
        assert_eq!(value_at(&v, "a.x"), None);
    }

    #[test]
    fn tackers_sample_manifest_parses() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/tacker/v1/cnf-helm/helm_get_manifest_output.yaml"
        ))
        .unwrap();
        let r = manifest::parse(&text, "default").unwrap();
        assert!(r.iter().any(|x| x.kind == "Deployment"), "{r:?}");
    }

    /// Tacker's two-release body (no extension keys) and a VNFD of its shape.
    fn tacker_two_releases() -> CnfParams {
        let ap = json!({"use_helm": "true", "namespace": "default", "using_helm_install_param": [
            {"exthelmchart": "false", "helmreleasename": "vdu1", "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz"},
            {"exthelmchart": "true", "helmreleasename": "vdu2", "helmrepositoryname": "bitnami", "helmchartname": "apache",
             "exthelmrepo_url": "https://charts.bitnami.com/bitnami"}],
            "helm_replica_values": {"vdu1_aspect": "replicaCount", "vdu2_aspect": "replicaCount"},
            "vdu_mapping": {"VDU1": {"kind": "Deployment", "name": "vdu1-localhelm", "helmreleasename": "vdu1"},
                            "VDU2": {"kind": "Deployment", "name": "vdu2-apache", "helmreleasename": "vdu2"}}});
        let mut p = CnfParams::from_additional_params(ap.as_object().unwrap(), "req.json").unwrap();
        let vnfd = r#"
topology_template:
  node_templates:
    VDU1: {type: tosca.nodes.nfv.Vdu.Compute, properties: {vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}}}
    VDU2: {type: tosca.nodes.nfv.Vdu.Compute, properties: {vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 5}}}
  policies:
    - a: {type: tosca.policies.nfv.ScalingAspects, properties: {aspects: {
          vdu1_aspect: {max_scale_level: 2, step_deltas: [delta_1]}, vdu2_aspect: {max_scale_level: 2, step_deltas: [delta_1]}}}}
    - b: {type: tosca.policies.nfv.VduScalingAspectDeltas, properties: {aspect: vdu1_aspect, deltas: {delta_1: {number_of_instances: 1}}}, targets: [VDU1]}
    - c: {type: tosca.policies.nfv.VduScalingAspectDeltas, properties: {aspect: vdu2_aspect, deltas: {delta_1: {number_of_instances: 2}}}, targets: [VDU2]}
    - d: {type: tosca.policies.nfv.VduInitialDelta, properties: {initial_delta: {number_of_instances: 1}}, targets: [VDU1]}
    - e: {type: tosca.policies.nfv.VduInitialDelta, properties: {initial_delta: {number_of_instances: 1}}, targets: [VDU2]}
"#;
        let read = |f: &str| (f == "d.yaml").then(|| vnfd.to_string());
        p.scaling = crate::cnf::vnfd::scaling(&crate::cnf::vnfd::load("d.yaml", &read).unwrap(), None);
        p
    }

    #[test]
    fn an_unmodified_tacker_body_scales_by_the_vnfd() {
        let p = tacker_two_releases();
        let (vdu, r) = aspect_vdu(&p, "vdu2_aspect").unwrap();
        assert_eq!((vdu, r.name.as_str()), (Some("VDU2"), "vdu2"));
        assert_eq!(aspect_vdu(&p, "vdu1_aspect").unwrap().1.name, "vdu1");
        assert!(aspect_vdu(&p, "nope").is_none(), "two releases and no mapping: no guess");
        // VDU1: +1 per step, 1..3; VDU2: +2 per step, max_scale_level 2 → at most 5.
        assert_eq!(scale_target(&p, "vdu1_aspect", Some("VDU1"), 1, 2), Ok(3));
        assert_eq!(scale_target(&p, "vdu2_aspect", Some("VDU2"), 1, 1), Ok(3));
        assert_eq!(scale_target(&p, "vdu2_aspect", Some("VDU2"), 3, -1), Ok(1));
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 3, 1).unwrap_err();
        assert!(e.starts_with("The number of target replicas after scaling [4] is out of range"), "{e}");
        assert!(e.contains("aspect 'vdu1_aspect' (VDU1) allows 1 to 3 instances (vdu_profile)"), "{e}");
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 1, -1).unwrap_err();
        assert!(e.contains("[0]") && e.contains("allows 1 to 3"), "{e}");
    }

    #[test]
    fn max_scale_level_bounds_below_the_profile_and_extension_keys_override() {
        let mut p = tacker_two_releases();
        p.scaling.vdus.get_mut("VDU2").unwrap().max = Some(99);
        let e = scale_target(&p, "vdu2_aspect", Some("VDU2"), 5, 1).unwrap_err();
        assert!(e.contains("aspect 'vdu2_aspect' (VDU2) is at most max_scale_level 2 (5 instances)"), "{e}");
        // vdu_mapping's own bounds win over the VNFD's.
        p.vdu_mapping.get_mut("VDU1").unwrap().max = Some(2);
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 2, 1).unwrap_err();
        assert!(e.contains("allows 1 to 2 instances (vdu_mapping)"), "{e}");
        // No VNFD: steps of one, no bound but int32.
        let mut bare = tacker_two_releases();
        bare.scaling = Default::default();
        assert_eq!(scale_target(&bare, "vdu1_aspect", None, 4, 3), Ok(7));
    }

    #[test]
    fn without_a_vnfd_the_instances_scale_levels_bound_the_aspect() {
        let inst: crate::request::VnfInstance = crate::request::parse(
            r#"{"id": "i", "instantiatedVnfInfo": {"flavourId": "s",
                "scaleStatus": [{"aspectId": "vdu1_aspect", "scaleLevel": 1}],
                "maxScaleLevels": [{"aspectId": "vdu1_aspect", "scaleLevel": 2}]}}"#,
            "inst.json",
        )
        .unwrap();
        assert!(instance_level_bound(&inst, "vdu1_aspect", 1).is_ok());
        assert!(instance_level_bound(&inst, "vdu1_aspect", -1).is_ok());
        let e = instance_level_bound(&inst, "vdu1_aspect", 2).unwrap_err();
        assert!(e.contains("aspect 'vdu1_aspect' would go from scale level 1 to 3, outside 0 to 2"), "{e}");
        assert!(instance_level_bound(&inst, "vdu1_aspect", -2).is_err());
        assert!(instance_level_bound(&inst, "other_aspect", 9).is_ok(), "no levels for it: no bound");
    }
}
