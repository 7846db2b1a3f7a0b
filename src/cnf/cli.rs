//! `mgmt-driver cnf <op>`: Helm CNF operations on a cluster's masters over SSH. Inputs are read
//! and checked first (request, params, package, where Helm runs); only then does anything connect.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cluster::package::Package;
use crate::cluster::request::{self, HealRequest, InstantiateRequest, ScaleRequest, ScaleType, VimConnections};
use crate::cluster::runner::{Runner, Timeouts};
use crate::cluster::state::{check_instance_id, InstanceState, Store};
use crate::cluster::topology::ClusterNode;
use crate::cnf::helm_cmd::InstallOpts;
use crate::cnf::helm_info::{self, HelmInfo};
use crate::cnf::ops::{self, CnfState, Ctx};
use crate::cnf::params::CnfParams;
use crate::cnf::session::{master_node, Session};
use crate::error::{exit, Error, Result};
use crate::event::Events;
use crate::inventory::{Auth, Host, HostKeyCheck, Inventory, LoadOptions};
use crate::render::{Output, Renderer};
use crate::secret::Secret;
use crate::ssh::{SshConnector, SshOptions};

#[derive(Subcommand, Debug)]
pub enum CnfOp {
    /// Deploy the request's charts (install, or upgrade when the release exists).
    Instantiate,
    /// Scale an aspect: helm upgrade --reuse-values --set <helm_replica_values path>=<n>.
    Scale,
    /// Re-create the pods named by the request's vnfcInstanceId (Helm has no heal).
    Heal,
    /// Upgrade a release (new chart, version or values); prints the new revision.
    Upgrade {
        #[arg(long)]
        release: String,
        /// Chart reference (default: the release's recorded chart).
        #[arg(long)]
        chart: Option<String>,
        #[arg(long)]
        version: Option<String>,
        /// key=value, repeatable; each stays one literal argument.
        #[arg(long)]
        set: Vec<String>,
        #[arg(long)]
        reuse_values: bool,
    },
    /// Roll a release back (to REVISION, or the previous one).
    Rollback {
        #[arg(long)]
        release: String,
        #[arg(long)]
        revision: Option<u32>,
    },
    Status {
        #[arg(long)]
        release: String,
    },
    History {
        #[arg(long)]
        release: String,
    },
    Values {
        #[arg(long)]
        release: String,
        #[arg(long)]
        all: bool,
    },
    List,
    /// helm show values|readme|chart CHART [--repo URL] [--version V].
    Show {
        what: String,
        chart: String,
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        version: Option<String>,
    },
    RepoList,
    /// Make every master's repositories exactly NAME=URL... (add, re-add on URL change, remove extras).
    RepoSync {
        #[arg(long = "repo")]
        repos: Vec<String>,
    },
    /// Uninstall the releases, remove repositories and chart directories on every master.
    Terminate,
}

#[derive(Args, Debug, Clone)]
pub struct CnfArgs {
    /// The VNF instance (CNF) id: names the chart directory and the state document.
    #[arg(long, global = true)]
    pub vnf_instance_id: Option<String>,
    /// The operation's request (instantiate, scale, heal).
    #[arg(long, global = true)]
    pub request: Option<PathBuf>,
    #[arg(long, global = true)]
    pub package_dir: Option<PathBuf>,
    /// vimConnectionInfo (list, map or one entry) holding extra.helm_info.
    #[arg(long, global = true)]
    pub vim_connection_info: Option<PathBuf>,
    /// Use the cluster recorded by `instantiate-end` for this VNF instance id.
    #[arg(long, global = true)]
    pub cluster_instance: Option<String>,
    /// Credentials and host keys for the masters (matched by address).
    #[arg(short, long, global = true)]
    pub inventory: Option<PathBuf>,
    #[arg(long, env = "MGMT_DRIVER_STATE_DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    #[arg(long, global = true)]
    pub known_hosts: Option<PathBuf>,
    #[arg(long, global = true)]
    pub dry_run: bool,
    /// helm --wait.
    #[arg(long, global = true)]
    pub wait: bool,
    /// Roll back on failure (Helm 3 --atomic, Helm 4 --rollback-on-failure).
    #[arg(long, global = true)]
    pub atomic: bool,
    /// Seconds for each Helm operation (--timeout) and our deadline around it.
    #[arg(long, default_value_t = 300, global = true)]
    pub timeout: u64,
    /// Poll `helm status` every S seconds while a long Helm command runs.
    #[arg(long, default_value_t = 5.0, global = true)]
    pub status_interval: f64,
    #[arg(long, default_value_t = 10.0, global = true)]
    pub connect_timeout: f64,
    /// How many masters at once in the every-master steps (charts, repositories).
    #[arg(long, default_value_t = 16, global = true)]
    pub parallel: usize,
    /// How long to retry a master that refuses connections before trying the next.
    #[arg(long, default_value_t = 5.0, global = true)]
    pub retry_for: f64,
}

const KIND: &str = "cnf";

fn secs(field: &str, v: f64) -> Result<Duration> {
    if v.is_finite() && v > 0.0 && v < 1e7 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Error::input("arguments", field, "must be a positive number of seconds"))
    }
}

/// helm_info from the first place that has it.
fn find_helm_info(
    a: &CnfArgs,
    req_vims: Option<&VimConnections>,
    store: &Store,
    saved: Option<&CnfState>,
) -> Result<(HelmInfo, Value, String)> {
    let from_conns = |vc: &VimConnections, at: &str| -> Option<Result<(HelmInfo, Value, String)>> {
        vc.iter().find_map(|c| {
            let extra = c.extra.as_ref()?;
            let hi = extra.get("helm_info").or_else(|| extra.get("helmInfo"))?;
            Some(helm_info::parse(hi, at).map(|h| (h, hi.clone(), at.to_string())))
        })
    };
    if let Some(p) = &a.vim_connection_info {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Error::input(p.display().to_string(), "vimConnectionInfo", e.to_string()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::input(p.display().to_string(), "vimConnectionInfo", e.to_string()))?;
        let vc: VimConnections = match v {
            Value::Object(ref m) if m.contains_key("vimType") => {
                VimConnections::List(vec![serde_json::from_value(v.clone())
                    .map_err(|e| Error::input(p.display().to_string(), "vimConnectionInfo", e.to_string()))?])
            }
            other => serde_json::from_value(other)
                .map_err(|e| Error::input(p.display().to_string(), "vimConnectionInfo", e.to_string()))?,
        };
        return from_conns(&vc, &p.display().to_string()).unwrap_or_else(|| {
            Err(Error::input(
                p.display().to_string(),
                "extra.helm_info",
                "helm_info is missing in vim_connection_info.extra.",
            ))
        });
    }
    if let Some(r) = req_vims.and_then(|vc| from_conns(vc, "request vimConnectionInfo")) {
        return r;
    }
    if let Some(cid) = &a.cluster_instance {
        let st: InstanceState = store
            .load(cid)?
            .ok_or_else(|| Error::input("--cluster-instance", cid.clone(), "no cluster recorded under this id"))?;
        let conn = st.vim_connection_info.ok_or_else(|| {
            Error::input("--cluster-instance", cid.clone(), "the cluster has no vimConnectionInfo yet")
        })?;
        let vc =
            VimConnections::List(vec![serde_json::from_value(conn)
                .map_err(|e| Error::input("state", "vim_connection_info", e.to_string()))?]);
        return from_conns(&vc, &format!("cluster {cid}")).unwrap_or_else(|| Err(Error::input("--cluster-instance", cid.clone(), "helm_info is missing in vim_connection_info.extra. (was the cluster installed with helm_installation_script_path?)")));
    }
    if let Some(Ok(h)) = saved.map(|s| helm_info::parse(&s.params["__helm_info"], "state")) {
        return Ok((h, saved.expect("some").params["__helm_info"].clone(), "state".into()));
    }
    Err(Error::input("arguments", "--vim-connection-info", "where Helm runs is unknown: pass --vim-connection-info, --cluster-instance, or a request whose vimConnectionInfo has extra.helm_info"))
}

/// One Host per master address: from the inventory when it lists the address, else with
/// helm_info's (or the recorded cluster's) credentials.
fn masters(h: &HelmInfo, a: &CnfArgs, store: &Store, state_dir: &std::path::Path) -> Result<Vec<ClusterNode>> {
    let inv = a
        .inventory
        .as_ref()
        .map(|p| Inventory::load(p, &LoadOptions { credentials_from_request: true, ..Default::default() }))
        .transpose()?;
    let cred_pw: Option<Secret> = match (&h.password, &h.credential_ref) {
        (Some(p), _) => Some(Secret::new(p.clone())),
        (None, Some(r)) => match r.strip_prefix("mgmt-driver-state:") {
            Some(cid) => store
                .load(cid)?
                .and_then(|s| s.params.pointer("/master_node/password").and_then(Value::as_str).map(Secret::new)),
            None => None,
        },
        _ => None,
    };
    let known_hosts = a.known_hosts.clone().unwrap_or_else(|| state_dir.join("known_hosts"));
    let mut out = Vec::new();
    for ip in &h.masternode_ip {
        let host = match inv.as_ref().and_then(|i| i.hosts.iter().find(|x| &x.addr == ip)) {
            Some(x) if !(x.auth.agent && x.auth.password.is_none() && x.auth.identity_file.is_none()) => x.clone(),
            found => Host {
                name: found.map(|x| x.name.clone()).unwrap_or_else(|| format!("master-{ip}")),
                addr: ip.clone(),
                port: found.map(|x| x.port).unwrap_or(22),
                nic_ip: None,
                user: h.username.clone(),
                auth: match &cred_pw {
                    Some(p) => Auth { password: Some(p.clone()), ..Auth::default() },
                    None => Auth { agent: true, ..Auth::default() },
                },
                known_hosts: found.map(|x| x.known_hosts.clone()).unwrap_or_else(|| known_hosts.clone()),
                host_key_check: found.map(|x| x.host_key_check).unwrap_or(HostKeyCheck::AcceptNew),
                jump: found.map(|x| x.jump.clone()).unwrap_or_default(),
                become_password: (h.username != "root").then(|| cred_pw.clone()).flatten(),
                groups: vec![],
            },
        };
        out.push(master_node(host));
    }
    Ok(out)
}

pub async fn run(op: CnfOp, a: CnfArgs, output: Output, verbose: bool) -> i32 {
    let (events, rx) = Events::channel();
    let renderer = tokio::spawn(Renderer::for_hooks(output, verbose).run(rx));
    let r = go(&op, &a, events).await;
    let _ = renderer.await;
    match r {
        Ok(doc) => {
            if output == Output::Json {
                println!("{doc}");
            } else {
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            if output == Output::Json {
                println!("{}", json!({"ok": false, "error": e.to_string(), "errorKind": e.kind()}));
            }
            e.exit_code()
        }
    }
}

async fn go(op: &CnfOp, a: &CnfArgs, events: Events) -> Result<Value> {
    let id = a.vnf_instance_id.clone().ok_or_else(|| Error::input("arguments", "--vnf-instance-id", "is required"))?;
    check_instance_id(&id)?;
    let state_dir = a.state_dir.clone().unwrap_or_else(Store::default_dir);
    let store = Store::open(&state_dir)?;
    let _lock = if a.dry_run { None } else { Some(store.lock_kind(&id, KIND)?) };
    let saved: Option<CnfState> = store.load_doc(&id, KIND)?;
    let req_file = a.request.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(recorded request)".into());

    // The request (or the recorded one) gives the CNF params.
    let (ap, req_vims, scale, heal) = match op {
        CnfOp::Instantiate => {
            let p = a
                .request
                .as_ref()
                .ok_or_else(|| Error::input("arguments", "--request", "is required for instantiate"))?;
            let r: InstantiateRequest = request::load(p)?;
            (r.additional_params, Some(r.vim_connection_info), None, None)
        }
        CnfOp::Scale => {
            let p =
                a.request.as_ref().ok_or_else(|| Error::input("arguments", "--request", "is required for scale"))?;
            let r: ScaleRequest = request::load(p)?;
            (saved_params(&saved)?, None, Some(r), None)
        }
        CnfOp::Heal => {
            let p = a.request.as_ref().ok_or_else(|| Error::input("arguments", "--request", "is required for heal"))?;
            let r: HealRequest = request::load(p)?;
            (saved_params(&saved)?, None, None, Some(r))
        }
        _ => match &saved {
            Some(_) => (saved_params(&saved)?, None, None, None),
            None => (serde_json::Map::new(), None, None, None),
        },
    };
    let params = if ap.is_empty() { None } else { Some(CnfParams::from_additional_params(&ap, &req_file)?) };
    let pkg = a.package_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    if let (CnfOp::Instantiate, Some(p)) = (op, &params) {
        // Every local chart must be in the package before anything connects.
        for (i, r) in p.releases.iter().enumerate() {
            if let crate::cnf::params::ChartSource::Local { path, .. } = &r.source {
                let pkg = pkg
                    .as_ref()
                    .ok_or_else(|| Error::input("arguments", "--package-dir", "is required for local charts"))?;
                pkg.resolve(
                    path,
                    &req_file,
                    &format!("additionalParams.using_helm_install_param[{i}].helmchartfile_path"),
                    false,
                )?;
            }
        }
    }
    let (hi, hi_json, _from) = find_helm_info(a, req_vims.as_ref(), &store, saved.as_ref())?;
    let nodes = masters(&hi, a, &store, &state_dir)?;

    let ssh = SshOptions {
        connect_timeout: secs("--connect-timeout", a.connect_timeout)?,
        retry_for: secs("--retry-for", a.retry_for)?,
        ..Default::default()
    };
    let rt = Runner::new(Arc::new(SshConnector::new(ssh)?), events, a.dry_run, a.parallel.max(1), Timeouts::default());
    let session = Session::open(rt, nodes, secs("--status-interval", a.status_interval)?).await?;
    let opts = InstallOpts { wait: a.wait, timeout_s: Some(a.timeout), atomic: a.atomic, create_namespace: false };
    let empty = CnfParams {
        namespace: "default".into(),
        releases: vec![],
        replica_values: Default::default(),
        vdu_mapping: Default::default(),
        replicas: Default::default(),
        warnings: vec![],
    };
    let p = params.as_ref().unwrap_or(&empty);
    let ctx = Ctx {
        s: &session,
        params: p,
        instance: &id,
        pkg: pkg.as_ref(),
        req_file: &req_file,
        opts,
        timeout: Duration::from_secs(a.timeout),
    };
    let master = session.master().host.addr.clone();
    let mut st = saved.clone().unwrap_or_else(|| CnfState { vnf_instance_id: id.clone(), ..Default::default() });
    let save = |st: &mut CnfState| -> Result<()> {
        if a.dry_run {
            Ok(())
        } else {
            store.save_doc(&id, KIND, st)
        }
    };
    let t = session.rt.timeouts.command;
    let h = session.helm;
    let ns = p.namespace.clone();
    let result = match op {
        CnfOp::Instantiate => {
            let mut ap_saved = ap.clone();
            ap_saved.insert("__helm_info".into(), hi_json.clone());
            // Generated release names are recorded, so later operations find the same releases.
            if let Some(Value::Array(items)) = ap_saved.get_mut("using_helm_install_param") {
                for (item, r) in items.iter_mut().zip(&p.releases) {
                    if let Some(o) = item.as_object_mut() {
                        o.insert("helmreleasename".into(), Value::String(r.name.clone()));
                    }
                }
            }
            st.params = Value::Object(ap_saved);
            st.namespace = ns.clone();
            st.masters = hi.masternode_ip.clone();
            save(&mut st)?;
            let skipped = ops::distribute(&ctx).await?;
            session.rt.phase("install or upgrade the releases", &[session.master()], false);
            let mut rels = serde_json::Map::new();
            for r in &p.releases {
                let rs = ops::apply_release(&ctx, r).await?;
                st.releases.insert(r.name.clone(), rs.clone());
                save(&mut st)?;
                rels.insert(r.name.clone(), serde_json::to_value(&rs).expect("serializes"));
            }
            json!({"releases": rels, "mastersNotReached": skipped})
        }
        CnfOp::Scale => {
            let r = scale.expect("scale request");
            let steps = r.number_of_steps as i64;
            let delta = if r.kind == ScaleType::Out { steps } else { -steps };
            let (from, to, rs) = ops::scale(&ctx, &r.aspect_id, delta).await?;
            if let Some(rel) = ops::aspect_release(p, &r.aspect_id) {
                st.releases.insert(rel.name.clone(), rs.clone());
                save(&mut st)?;
            }
            json!({"aspectId": r.aspect_id, "from": from, "to": to, "release": rs})
        }
        CnfOp::Heal => {
            let r = heal.expect("heal request");
            ops::heal(&ctx, &r.vnfc_instance_id).await?
        }
        CnfOp::Upgrade { release, chart, version, set, reuse_values } => {
            let recorded = st.releases.get(release).map(|r| r.chart.clone());
            let chart = chart.clone().or(recorded).ok_or_else(|| {
                Error::input("arguments", "--chart", format!("release {release} has no recorded chart; pass --chart"))
            })?;
            let target =
                crate::cnf::helm_cmd::Chart { release, chart: &chart, namespace: &ns, version: version.as_deref() };
            let cmd =
                h.upgrade(&target, &crate::cnf::helm_cmd::Values { set, files: &[] }, *reuse_values, &ctx.opts)?;
            session.run_watched(cmd, ctx.timeout + Duration::from_secs(30), release, &ns).await?;
            let rel = p.releases.iter().find(|r| &r.name == release).cloned().unwrap_or(crate::cnf::params::Release {
                name: release.clone(),
                source: crate::cnf::params::ChartSource::Oci { reference: chart.clone() },
                ..crate::cnf::params::Release::named(release)
            });
            let rs = ops::describe(&ctx, &rel, &chart).await?;
            st.releases.insert(release.clone(), rs.clone());
            save(&mut st)?;
            json!({"release": release, "revision": rs.revision, "state": rs})
        }
        CnfOp::Rollback { release, revision } => {
            session.run(h.rollback(release, &ns, *revision, &ctx.opts)?, ctx.timeout + Duration::from_secs(30)).await?;
            let chart = st.releases.get(release).map(|r| r.chart.clone()).unwrap_or_default();
            let rel = crate::cnf::params::Release {
                source: crate::cnf::params::ChartSource::Oci { reference: chart.clone() },
                ..crate::cnf::params::Release::named(release)
            };
            let rs = ops::describe(&ctx, &rel, &chart).await?;
            st.releases.insert(release.clone(), rs.clone());
            save(&mut st)?;
            json!({"release": release, "revision": rs.revision, "state": rs})
        }
        CnfOp::Status { release } => json_out(&session, h.status(release, &ns)?).await?,
        CnfOp::History { release } => json_out(&session, h.history(release, &ns)?).await?,
        CnfOp::Values { release, all } => json_out(&session, h.get_values(release, &ns, *all)?).await?,
        CnfOp::List => json_out(&session, h.list(None)?).await?,
        CnfOp::Show { what, chart, repo, version } => {
            if !["values", "readme", "chart", "all"].contains(&what.as_str()) {
                return Err(Error::input("arguments", "WHAT", "values, readme, chart or all"));
            }
            Value::String(session.text(h.show(what, chart, repo.as_deref(), version.as_deref())?, t).await?)
        }
        CnfOp::RepoList => json_out(&session, h.repo_list()).await?,
        CnfOp::RepoSync { repos } => {
            let mut want = BTreeMap::new();
            for r in repos {
                let (n, u) = r
                    .split_once('=')
                    .ok_or_else(|| Error::input("arguments", "--repo", format!("'{r}' is not NAME=URL")))?;
                want.insert(n.to_string(), u.to_string());
            }
            ops::repo_sync(&session, &want).await?
        }
        CnfOp::Terminate => {
            let releases: Vec<String> = if p.releases.is_empty() {
                st.releases.keys().cloned().collect()
            } else {
                p.releases.iter().map(|r| r.name.clone()).collect()
            };
            let out = ops::terminate(&ctx, &releases).await?;
            if !a.dry_run {
                store.remove_doc(&id, KIND)?;
            }
            json!({"releases": out})
        }
    };
    session.rt.close().await;
    Ok(
        json!({"ok": true, "vnfInstanceId": id, "master": master, "helmMajor": h.major, "dryRun": a.dry_run, "result": result, "warnings": p.warnings}),
    )
}

fn saved_params(saved: &Option<CnfState>) -> Result<serde_json::Map<String, Value>> {
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

/// Run a Helm command that prints JSON; unreadable output names the master and the command.
async fn json_out(s: &Session, cmd: String) -> Result<Value> {
    let text = s.text(cmd.clone(), s.rt.timeouts.command).await?;
    if s.rt.dry {
        return Ok(Value::Null);
    }
    serde_json::from_str(text.trim()).map_err(|e| Error::Remote {
        node: s.master().name().into(),
        command: cmd,
        status: "exit code 0".into(),
        stderr_tail: format!("output is not JSON: {e}"),
    })
}
