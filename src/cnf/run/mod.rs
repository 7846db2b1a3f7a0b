//! A CNF operation from start to end: `prepare` reads and checks the inputs (request or the
//! recorded one, params, package paths, where Helm runs) before anything connects; `run` opens
//! the Helm session on the first master that answers and calls the operation. Each operation
//! is a file here with its own checks and steps side by side; this file does what they share
//! and hands each one its inputs ([`Prepared`] carries them, one variant per operation).

pub mod heal;
pub mod history;
pub mod install;
pub mod instantiate;
pub mod list;
pub mod repo_add;
pub mod repo_list;
pub mod repo_remove;
pub mod repo_sync;
pub mod reset;
pub mod rollback;
pub mod scale;
pub mod services;
pub mod show;
pub mod status;
pub mod terminate;
#[cfg(test)]
pub(crate) mod testkit;
pub mod uninstall;
pub mod upgrade;
pub mod values;

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::cnf::cluster_env::{self, HelmEnv};
use crate::cnf::helm_cmd::InstallOpts;
use crate::cnf::helm_info::HelmInfo;
use crate::cnf::local_cluster;
use crate::cnf::masters::{find_helm_info, masters};
use crate::cnf::names;
use crate::cnf::ops::{CnfState, Ctx, Record};
use crate::cnf::params::CnfParams;
use crate::cnf::run::heal::HealTarget;
use crate::cnf::run::repo_sync::WantRepo;
use crate::cnf::session::Session;
use crate::cnf::values_file;
use crate::cnf::{check_arg, Inputs, Op};
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::{check_instance_id, Lock, Store};
use crate::lifecycle::{Runner, Target};
use crate::request::{Doc, ScaleRequest, VimConnections, VnfInstance};
use crate::transport::local::LocalConnector;

// The CNF document's kind, which callers name as `cnf::run::KIND`.
pub use crate::cnf::ops::KIND;

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
    pkg: Option<Package>,
    helm_info: HelmInfo,
    helm_info_json: Value,
    /// The masters, each with the credentials it may be logged in with (`masters::masters`).
    nodes: Vec<Target>,
    /// The cluster's Helm environment the commands run with (`cluster_env::choose`).
    env: HelmEnv,
    /// The operation, with its own inputs.
    op: Checked,
    /// `reset --uninstall`: the other CNFs recorded on the same cluster id, each locked.
    others: Vec<reset::OtherCnf>,
}

/// Each operation with its own inputs, checked: its arguments and what `prepare` read for it.
enum Checked {
    /// The request's flavourId (recorded for later scales).
    Instantiate {
        flavour: String,
    },
    Scale(ScaleRequest),
    Heal(HealTarget),
    Install(install::Install),
    Upgrade(upgrade::Upgrade),
    Uninstall {
        release: String,
    },
    Rollback {
        release: String,
        revision: Option<u32>,
    },
    Status {
        release: String,
    },
    History {
        release: String,
    },
    Values {
        release: String,
        all: bool,
    },
    /// `--namespace`, checked: that namespace's releases, else every namespace's.
    List {
        namespace: Option<String>,
    },
    Show {
        what: String,
        chart: String,
        repo: Option<String>,
        version: Option<String>,
    },
    RepoList,
    /// The repositories every master is to have, checked.
    RepoSync(BTreeMap<String, WantRepo>),
    RepoAdd {
        name: String,
        want: WantRepo,
    },
    RepoRemove {
        name: String,
    },
    Terminate,
    Services {
        release: Option<String>,
    },
    Reset {
        uninstall: bool,
    },
}

/// What a CNF operation produced.
pub struct Outcome {
    pub context: Value,
    pub result: Value,
    pub warnings: Vec<String>,
}

pub fn prepare(op: &Op, a: &Inputs, store: Store) -> Result<Prepared> {
    let id = a.vnf_instance_id.clone().ok_or_else(|| Error::input("arguments", "--vnf-instance-id", "is required"))?;
    check_instance_id(&id)?;
    if let Some(cid) = &a.cluster_instance {
        check_instance_id(cid).map_err(|e| Error::input("arguments", "--cluster-instance", e.to_string()))?;
    }
    check_args(op, &id)?;
    // A cluster known only by its kubeconfig: checked (and refused with masters) first.
    let kubeconfig = a.kubeconfig.as_deref().map(|k| local_cluster::check(op, a, k)).transpose()?;
    let cluster_uuid = a
        .cluster_uuid
        .as_deref()
        .map(cluster_env::parse_cluster_uuid)
        .transpose()
        .map_err(|m| Error::input("arguments", "--cluster-uuid", m))?;
    let want_repos = match op {
        Op::RepoSync { repos } => repo_sync::wanted(repos)?,
        Op::RepoAdd { repo } => repo_sync::wanted(std::slice::from_ref(repo))?,
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
    let env = match &kubeconfig {
        Some(k) => local_cluster::env(env.id().unwrap_or(&id), store.dir(), k)?,
        None => env,
    };
    let req_file = a.request.as_ref().map(Doc::name).unwrap_or_else(|| "(recorded request)".into());
    // The operation's own inputs; its request (or the recorded one) gives the CNF params.
    let Read { op, mut ap, vims, scale_instance } = read(op, a, &saved, &req_file, want_repos)?;
    let instantiate = matches!(op, Checked::Instantiate { .. });
    if instantiate {
        instantiate::keep_recorded_names(&mut ap, saved.as_ref());
    }
    let mut params = params_of(&ap, &req_file, &id)?;
    // --namespace, else the request's (or recorded) namespace, else the cluster_uuid's.
    let ns_arg = a.namespace.clone().or_else(|| {
        let from_request = ap.get("namespace").is_some_and(|v| !v.is_null());
        cluster_uuid.as_ref().and_then(|c| c.namespace.clone()).filter(|_| !from_request)
    });
    if let Some(ns) = &ns_arg {
        let field = if a.namespace.is_some() { "--namespace" } else { "--cluster-uuid" };
        names::namespace(ns).map_err(|m| Error::input("arguments", field, m))?;
        params.namespace = ns.clone();
        if instantiate {
            // Recorded with the request, so later operations find the releases there.
            ap.insert("namespace".into(), Value::String(ns.clone()));
        }
    }
    let pkg = a.package_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    match &op {
        Checked::Scale(r) => {
            let flavour = saved.as_ref().and_then(|s| s.flavour_id.as_deref());
            scale::check(&mut params, r, scale_instance.as_ref(), pkg.as_ref(), flavour, &req_file)?;
        }
        Checked::Instantiate { .. } => {
            instantiate::check_package(&mut params, pkg.as_ref(), &req_file, &a.secret_refs)?
        }
        _ => {}
    }
    let (nodes, helm_info, helm_info_json) = if kubeconfig.is_some() {
        // No master: Helm runs on the controller (`local_cluster`).
        let none = HelmInfo { masternode_ip: vec![], username: String::new(), password: None, credential_ref: None };
        (vec![local_cluster::target()], none, Value::Null)
    } else {
        let found = find_helm_info(a, vims.as_ref(), &store, saved.as_ref())?;
        // Which credentials each master gets, decided (and a request's reference checked) before
        // anything connects.
        let nodes = masters(&found, a, &store)?;
        (nodes, found.info, found.json)
    };
    let others = match (&op, env.id()) {
        (Checked::Reset { uninstall: true }, Some(cluster)) => reset::others_on_cluster(&store, &id, cluster)?,
        _ => Vec::new(),
    };
    Ok(Prepared {
        id,
        store,
        _lock: lock,
        saved,
        req_file,
        ap,
        params,
        pkg,
        helm_info,
        helm_info_json,
        nodes,
        env,
        op,
        others,
    })
}

/// The operator's words for an operation (`--release`, `--chart`, `show CHART`, `--set`,
/// `--version`, `--repo`), checked before anything connects: none may reach Helm as an option
/// or a local directory. A release name alone is checked here, anything more by its operation.
impl Prepared {
    /// The controller's transport when the cluster is known only by its kubeconfig (its Helm
    /// environment made there), else None: Helm runs on the masters over SSH.
    pub fn local_connector(&self, helm_bin: Option<&std::path::Path>) -> Result<Option<LocalConnector>> {
        match self.env {
            HelmEnv::Local { .. } => local_cluster::connector(&self.env, helm_bin).map(Some),
            _ => Ok(None),
        }
    }
}

fn check_args(op: &Op, instance: &str) -> Result<()> {
    match op {
        Op::Upgrade { release, chart, version, set, .. } => {
            upgrade::check_args(release, chart.as_deref(), version.as_deref(), set, instance)
        }
        Op::RepoRemove { name } => check_arg("NAME", names::repo(name)),
        Op::Rollback { release, .. }
        | Op::Uninstall { release }
        | Op::Status { release }
        | Op::History { release }
        | Op::Values { release, .. }
        | Op::Services { release: Some(release) } => check_arg("--release", names::release(release)),
        Op::Show { what, chart, repo, version } => {
            show::check_args(what, chart, repo.as_deref(), version.as_deref(), instance)
        }
        _ => Ok(()),
    }
}

/// What `prepare` reads for an operation: its own inputs, the additionalParams in force (the
/// request's for instantiate, else the recorded ones), and what only its checks need.
struct Read {
    op: Checked,
    ap: Map<String, Value>,
    /// The instantiate request's vimConnectionInfo (it may say where Helm runs).
    vims: Option<VimConnections>,
    /// `--vnf-instance` for a scale (its scale levels may bound the aspect).
    scale_instance: Option<VnfInstance>,
}

fn read(
    op: &Op,
    a: &Inputs,
    saved: &Option<CnfState>,
    req_file: &str,
    want_repos: BTreeMap<String, WantRepo>,
) -> Result<Read> {
    // An operation without a request of its own works on the recorded one, if any.
    let plain = |op: Checked| -> Result<Read> {
        let ap = if saved.is_some() { saved_params(saved)? } else { Map::new() };
        Ok(Read { op, ap, vims: None, scale_instance: None })
    };
    match op {
        Op::Instantiate => {
            let r = instantiate::read_request(a)?;
            let op = Checked::Instantiate { flavour: r.flavour_id };
            Ok(Read { op, ap: r.additional_params, vims: Some(r.vim_connection_info), scale_instance: None })
        }
        Op::Scale => {
            let (r, inst) = scale::read_request(a)?;
            Ok(Read { op: Checked::Scale(r), ap: saved_params(saved)?, vims: None, scale_instance: inst })
        }
        Op::Heal => {
            let t = heal::read_request(a, req_file)?;
            Ok(Read { op: Checked::Heal(t), ap: saved_params(saved)?, vims: None, scale_instance: None })
        }
        Op::Install { chart, release, version, values, set } => {
            let id = a.vnf_instance_id.as_deref().unwrap_or_default();
            let (chart, version, release, generated) =
                install::check_args(chart, version.as_deref(), release.as_deref(), set, id)?;
            let values = values_file::read_all(values)?;
            // A record of this instance (an earlier install, or instantiate) is kept and added to.
            let ap = if saved.is_some() { saved_params(saved)? } else { Map::new() };
            let op =
                Checked::Install(install::Install { chart, version, release, set: set.clone(), values, generated });
            Ok(Read { op, ap, vims: None, scale_instance: None })
        }
        Op::Upgrade { release, chart, version, set, reuse_values, values } => {
            plain(Checked::Upgrade(upgrade::Upgrade {
                release: release.clone(),
                chart: chart.clone(),
                version: version.clone(),
                set: set.clone(),
                reuse_values: *reuse_values,
                values: values_file::read_all(values)?,
            }))
        }
        Op::Uninstall { release } => plain(Checked::Uninstall { release: release.clone() }),
        Op::Rollback { release, revision } => {
            plain(Checked::Rollback { release: release.clone(), revision: *revision })
        }
        Op::Status { release } => plain(Checked::Status { release: release.clone() }),
        Op::History { release } => plain(Checked::History { release: release.clone() }),
        Op::Values { release, all } => plain(Checked::Values { release: release.clone(), all: *all }),
        Op::List => plain(Checked::List { namespace: a.namespace.clone() }),
        Op::Show { what, chart, repo, version } => plain(Checked::Show {
            what: what.clone(),
            chart: chart.clone(),
            repo: repo.clone(),
            version: version.clone(),
        }),
        Op::RepoList => plain(Checked::RepoList),
        Op::RepoSync { .. } => plain(Checked::RepoSync(want_repos)),
        Op::RepoAdd { .. } => {
            let (name, want) = want_repos.into_iter().next().expect("wanted() returned the one repository");
            plain(Checked::RepoAdd { name, want })
        }
        Op::RepoRemove { name } => plain(Checked::RepoRemove { name: name.clone() }),
        Op::Terminate => plain(Checked::Terminate),
        Op::Services { release } => plain(Checked::Services { release: release.clone() }),
        Op::Reset { uninstall } => plain(Checked::Reset { uninstall: *uninstall }),
    }
}

/// The CNF params of additionalParams `ap` (a request's, or a record's) for instance `id`.
/// None: an operator's verb without a request, or a record `cnf install` made (its namespace
/// only).
fn params_of(ap: &Map<String, Value>, file: &str, id: &str) -> Result<CnfParams> {
    if ap.is_empty() || ap.contains_key(install::INSTALL_MARK) {
        let namespace = ap.get("namespace").and_then(Value::as_str).unwrap_or("default").to_string();
        Ok(CnfParams { namespace, ..Default::default() })
    } else {
        CnfParams::for_instance(ap, file, id)
    }
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
/// `_op` is the operation `p` was prepared for; `p` carries it, with its inputs.
pub async fn run(_op: &Op, a: &Inputs, p: Prepared, rt: Runner) -> Result<Outcome> {
    let nodes = p.nodes.clone();
    // A reset uses Helm only to uninstall recorded CNFs' releases.
    let needs_env = match p.op {
        Checked::Reset { uninstall } => uninstall && (p.saved.is_some() || !p.others.is_empty()),
        _ => true,
    };
    let opts = InstallOpts {
        wait: a.wait,
        timeout_s: Some(a.timeout.as_secs().max(1)),
        atomic: a.atomic,
        create_namespace: false,
    };
    let mut rec = Record {
        st: p.saved.clone().unwrap_or_else(|| CnfState { vnf_instance_id: p.id.clone(), ..Default::default() }),
        store: &p.store,
        id: &p.id,
    };
    // Instantiate reads Helm's version with everything else it does on each master (one round
    // trip per master, `instantiate::distribute`); every other operation when the session opens.
    let (session, pre) = match &p.op {
        Checked::Instantiate { flavour } => {
            let mut session = Session::reach(rt, nodes, a.status_interval, p.env.clone()).await?;
            let facts = instantiate_facts(&p, flavour);
            let recorded_major = p.saved.as_ref().and_then(|s| s.helm_major);
            let d = match instantiate::record_request(&p.params, &facts, &mut rec) {
                Ok(()) => instantiate::distribute(&ctx(&session, &p, a, &opts), recorded_major).await,
                Err(e) => Err(e),
            };
            match d {
                Ok(d) => {
                    session.set_major(d.major);
                    (session, Some(d))
                }
                Err(e) => {
                    session.rt.close().await;
                    return Err(e);
                }
            }
        }
        _ => (Session::open(rt, nodes, a.status_interval, p.env.clone(), needs_env).await?, None),
    };
    let ctx = ctx(&session, &p, a, &opts);
    let result = dispatch(&ctx, &p, &mut rec, pre).await;
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

/// The context an operation runs in.
fn ctx<'a>(s: &'a Session, p: &'a Prepared, a: &Inputs, opts: &InstallOpts) -> Ctx<'a> {
    Ctx {
        s,
        params: &p.params,
        instance: &p.id,
        pkg: p.pkg.as_ref(),
        req_file: &p.req_file,
        opts: opts.clone(),
        timeout: a.timeout,
    }
}

/// What instantiate records about the CNF besides its releases.
fn instantiate_facts<'a>(p: &'a Prepared, flavour: &'a str) -> instantiate::Facts<'a> {
    instantiate::Facts {
        ap: &p.ap,
        helm_info: &p.helm_info_json,
        masters: &p.helm_info.masternode_ip,
        flavour,
        cluster_id: p.env.id(),
    }
}

/// Each operation, with its own inputs and the shared ones it needs.
async fn dispatch(
    c: &Ctx<'_>,
    p: &Prepared,
    rec: &mut Record<'_>,
    pre: Option<instantiate::Distributed>,
) -> Result<Value> {
    match &p.op {
        Checked::Instantiate { .. } => {
            let d = pre.expect("run() distributes before an instantiate");
            instantiate::run(c, d, rec).await
        }
        Checked::Scale(r) => scale::run(c, r, rec).await,
        Checked::Heal(t) => heal::run(c, t, rec).await,
        Checked::Install(args) => {
            let facts = install::Facts {
                helm_info: &p.helm_info_json,
                masters: &p.helm_info.masternode_ip,
                cluster_id: p.env.id(),
            };
            install::run(c, args, &facts, rec).await
        }
        Checked::Upgrade(args) => upgrade::run(c, rec, args).await,
        Checked::Uninstall { release } => uninstall::run(c, rec, release).await,
        Checked::Rollback { release, revision } => rollback::run(c, rec, release, *revision).await,
        Checked::Status { release } => status::run(c, release).await,
        Checked::History { release } => history::run(c, release).await,
        Checked::Values { release, all } => values::run(c, release, *all).await,
        Checked::List { namespace } => list::run(c, namespace.as_deref()).await,
        Checked::Show { what, chart, repo, version } => {
            show::run(c, what, chart, repo.as_deref(), version.as_deref()).await
        }
        Checked::RepoList => repo_list::run(c).await,
        Checked::RepoSync(want) => repo_sync::run(c.s, &p.id, want).await,
        Checked::RepoAdd { name, want } => repo_add::run(c.s, &p.id, name, want).await,
        Checked::RepoRemove { name } => repo_remove::run(c.s, name).await,
        Checked::Terminate => terminate::run(c, rec).await,
        Checked::Services { release } => services::run(c, release.as_deref(), rec).await,
        // Only a recorded CNF has releases to uninstall.
        Checked::Reset { uninstall } => {
            let others = p
                .others
                .iter()
                .map(|o| Ok((o, params_of(&saved_params(&Some(o.st.clone()))?, "state", &o.id)?)))
                .collect::<Result<Vec<_>>>()?;
            reset::run(c, rec, *uninstall && p.saved.is_some(), &others).await
        }
    }
}

#[cfg(test)]
mod tests {
    //! `prepare` and `run` across operations: the namespace and the cluster's Helm environment.

    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::cnf::run::testkit::{applied, run_op, Fixture, M1, M2};
    use crate::event::Events;
    use crate::lifecycle::state::Store;
    use crate::lifecycle::{FanOut, Timeouts};

    #[tokio::test]
    async fn namespace_overrides_the_requests_and_is_recorded_and_checked() {
        let f = Fixture::new();
        f.reply_applied("vdu2", "other", &applied("vdu2", "other", "deployed/1", "upgrade", 2, json!({})));
        let inputs = Inputs { namespace: Some("other".into()), ..f.inputs() };
        let p = f.prepare(&inputs).unwrap();
        let rt = Runner::new(Arc::new(f.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        run(&Op::Instantiate, &inputs, p, rt).await.unwrap();
        let execs = f.fake.execs(M1);
        assert!(execs.iter().any(|e| e.contains(" vdu2 other 10 --namespace other ")), "{execs:?}");
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("state/cnf1.cnf.json")).unwrap()).unwrap();
        assert_eq!(rec["params"]["namespace"], "other", "{rec}");
        let bad = Inputs { namespace: Some("Bad_NS".into()), ..f.inputs() };
        let e = f.prepare(&bad).err().unwrap().to_string();
        assert!(e.contains("--namespace"), "{e}");
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
            // The one program each master runs makes the environment (and runs Helm in it: the
            // driver exports it before the program, `helm_prepare::command`'s test).
            assert!(
                execs
                    .iter()
                    .any(|e| e
                        .starts_with("helm_prepare.sh '' /var/lib/mgmt-driver/helm/east /etc/kubernetes/admin.conf ")),
                "{m}: {execs:?}"
            );
            for c in helm_cmds(&execs) {
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

    #[tokio::test]
    async fn with_a_kubeconfig_helm_runs_on_the_controller_with_it_by_path_and_no_master() {
        let f = Fixture::new();
        let kc = f.dir.path().join("kc.yaml");
        std::fs::write(&kc, "current-context: admin@k\nusers:\n- name: a\n  user:\n    token: sekrit-token\n").unwrap();
        let inputs = Inputs {
            vnf_instance_id: Some("cnf9".into()),
            kubeconfig: Some(kc.clone()),
            cluster_uuid: Some("edge:east".into()),
            ..Inputs::new(Some("cnf9".into()), Default::default())
        };
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        let op = Op::Install {
            chart: "labrepo/nginxlab".into(),
            release: Some("web".into()),
            version: None,
            values: vec![],
            set: vec![],
        };
        let p = prepare(&op, &inputs, store).unwrap();
        let home = f.dir.path().join("state/helm/east");
        assert_eq!(
            p.env,
            HelmEnv::Local { id: "east".into(), dir: home.display().to_string(), kubeconfig: kc.display().to_string() }
        );
        assert_eq!(p.nodes.iter().map(|n| n.host.name.as_str()).collect::<Vec<_>>(), [local_cluster::NODE]);
        let prefix = p.env.prefix();
        f.reply_applied("web", "edge", &applied("web", "edge", "deployed/1", "upgrade", 2, json!({})));
        let (events, mut rx) = Events::channel();
        let rt = Runner::new(Arc::new(f.fake.clone()), events, FanOut::default(), Timeouts::default());
        let o = run(&op, &inputs, p, rt).await.unwrap();
        assert_eq!(o.context["helmEnvironment"], home.display().to_string());
        let execs = f.fake.execs(local_cluster::NODE);
        // The private homes are made (no kubeconfig copied: the operator's is used where it is),
        // and Helm runs with both (`helm_prepare::command` puts the exports first).
        assert!(execs.iter().any(|e| e == &format!("helm_prepare.sh '' {} '' '' '' 0 0", home.display())), "{execs:?}");
        assert!(execs.iter().any(|e| e.starts_with("helm_apply.sh web edge ")), "{execs:?}");
        let pre = format!("export KUBECONFIG={} HELM_CACHE_HOME={}/cache", kc.display(), home.display());
        assert!(prefix.starts_with(&pre), "{prefix}");
        for m in [M1, M2] {
            assert!(f.fake.execs(m).is_empty(), "no master is reached: {m}");
        }
        let mut seen = format!("{execs:?}{}", o.result);
        while let Some(e) = rx.recv().await {
            seen.push_str(&format!("{e:?}"));
        }
        assert!(!seen.contains("sekrit"), "{seen}");
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
}
