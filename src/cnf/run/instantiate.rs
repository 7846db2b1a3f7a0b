//! `cnf instantiate`: deploy the request's charts. Its checks (the request, the names recorded
//! by an earlier run, the secret values and local charts it needs, all before anything
//! connects) and its steps (record the request, put charts and repositories on every master,
//! install or upgrade each release, idempotently) side by side.

use serde_json::{json, Map, Value};

use crate::cnf::helm_cmd::{self as hc, InstallOpts};
use crate::cnf::names;
use crate::cnf::ops::{
    add_repo_as, chart_ref, cmd_timeout, describe, upload_values, CnfState, Ctx, Record, ReleaseState,
};
use crate::cnf::params::{aspect_release, ChartSource, CnfParams, Release, SecretFrom, SecretSet};
use crate::cnf::values_file::ValuesFile;
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::{Node, Target};
use crate::quote::quote;
use crate::redact::Redact;
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
/// releases), put charts and repositories on every master, then install or upgrade each release.
pub async fn run(c: &Ctx<'_>, f: &Facts<'_>, rec: &mut Record<'_>) -> Result<Value> {
    let s = c.s;
    let mut ap = recorded_params(f.ap, c.params);
    ap.insert("__helm_info".into(), f.helm_info.clone());
    rec.st.params = Value::Object(ap);
    rec.st.namespace = c.params.namespace.clone();
    rec.st.masters = f.masters.to_vec();
    rec.st.flavour_id = Some(f.flavour.to_string());
    rec.st.cluster_id = f.cluster_id.map(str::to_string);
    rec.save()?;
    let skipped = distribute(c).await?;
    s.rt.phase("install or upgrade the releases", &[s.master()], false);
    let mut rels = Map::new();
    for r in &c.params.releases {
        let rs = apply_release(c, r, &[]).await?;
        rec.release(&r.name, &rs)?;
        rels.insert(r.name.clone(), serde_json::to_value(&rs).expect("serializes"));
    }
    Ok(json!({"releases": rels, "mastersNotReached": skipped}))
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

/// Install or upgrade one release, idempotently: `helm status` first; absent → install;
/// deployed/failed → upgrade; stuck `pending-*` (an interrupted run) → recover, then upgrade.
/// `extra`: the operator's values files (`cnf install --values`), after the release's own.
pub async fn apply_release(c: &Ctx<'_>, r: &Release, extra: &[ValuesFile]) -> Result<ReleaseState> {
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
    let mut values_files: Vec<String> = files.iter().filter(|f| f.ends_with(".json")).cloned().collect();
    let operator_files = upload_values(c, &r.name, extra).await?;
    values_files.extend(operator_files.iter().cloned());
    files.extend(operator_files);
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
    // Chart NOTES may print a secret value, or one from the operator's files.
    let redact = if r.secret_set.is_empty() && extra.is_empty() { Redact::None } else { Redact::All };
    let res = s.run_watched(cmd, cmd_timeout(c), &r.name, ns, redact).await;
    let res = res.map_err(|e| crate::cnf::secret_values::mask_error(e, &r.secret_set));
    for f in &files {
        let _ = s.run(format!("rm -f -- {}", quote(f)?), s.rt.timeouts.command).await;
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

#[cfg(test)]
mod tests {
    //! The decision logic of instantiate on the scripted fake transport: Helm pending-state
    //! recovery, master failover, repositories and secrets, through the real `prepare` and `run`.

    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::*;
    use crate::cnf::run::run;
    use crate::cnf::run::testkit::{run_op, run_op_events, status, Fixture, M1, M2};
    use crate::cnf::Op;
    use crate::event::Events;
    use crate::lifecycle::{FanOut, Runner, Timeouts};

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
        assert!(execs.contains("rm -f -- .mgmt-driver/run/cnf1/set-vdu2-0"), "{execs}");
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
