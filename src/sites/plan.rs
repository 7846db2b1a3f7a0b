//! What one site's run needs, read and checked before anything connects: the rendered site's
//! files go through the very `prepare` functions the hooks and `cnf` commands use, so a plan
//! refuses exactly what the run would refuse. `sites plan` does this with the plan connector
//! and a read-only store (nothing connects, nothing is written); `sites apply` does it for every
//! selected site first, so a bad request on one site stops the whole run before any connection.
//!
//! The rendered-site contract (docs/fleet.md): `OUT/<site>/site.json`, `inventory.yaml`,
//! `cluster/<op>.json`, `cnf/<name>.json`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::prepare as cluster_prepare;
use crate::cnf;
use crate::error::{Error, Result};
use crate::fanout::ScriptJob;
use crate::inventory::{Host, Inventory, LoadOptions};
use crate::lifecycle::state::Store;
use crate::lifecycle::Runner;
use crate::request::Doc;
use crate::sites::render::RenderedSite;

/// One rendered site (the contract `sites render` writes: render.rs).
pub type SiteDir = RenderedSite;

pub use crate::sites::render::load_rendered;

/// The selected sites: `--only` names, every `--selector k=v` label, then `--index I` (the
/// I-th of that selection: a Job's pod). An unknown `--only` name, a selection that matches no
/// site, or an index past the end is bad input, so a typo never runs nothing quietly.
pub fn select(
    sites: Vec<SiteDir>,
    only: &[String],
    selector: &[(String, String)],
    index: Option<usize>,
) -> Result<Vec<SiteDir>> {
    for n in only {
        if !sites.iter().any(|s| &s.name == n) {
            return Err(Error::input("arguments", "--only", format!("no rendered site is named '{n}'")));
        }
    }
    let mut chosen: Vec<SiteDir> = sites
        .into_iter()
        .filter(|s| only.is_empty() || only.contains(&s.name))
        .filter(|s| selector.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .collect();
    if chosen.is_empty() {
        // Zero sites would "succeed" doing nothing: a mistyped label must say so.
        let (flag, what) = crate::sites::catalogue::selection_words(only, selector);
        return Err(Error::input("arguments", flag, format!("{what} matches no rendered site")));
    }
    if let Some(i) = index {
        if i >= chosen.len() {
            return Err(Error::input(
                "arguments",
                "--index",
                format!("{i} is past the last of the {} selected sites", chosen.len()),
            ));
        }
        chosen = vec![chosen.swap_remove(i)];
    }
    Ok(chosen)
}

/// `k=v` as `--selector` takes it.
pub fn parse_selector(s: &str) -> std::result::Result<(String, String), String> {
    // One pair per flag; the catalogue's parser checks the label as a catalogue's labels are.
    match crate::sites::catalogue::parse_selector(s).map_err(|e| e.to_string())?.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("'{s}' is not a label selector: use KEY=VALUE")),
    }
}

/// The operations a fleet run offers.
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Op {
    /// Cluster instantiate-end with `cluster/instantiate.json`.
    Instantiate,
    /// Cluster terminate-end (`cluster/terminate.json` when there is one).
    Terminate {
        /// Run `kubeadm reset -f` (and remove what install wrote) on every node first: for
        /// machines that are kept, or the cluster would keep running while the state forgets it.
        #[arg(long)]
        reset_nodes: bool,
    },
    /// Cluster scale-end SCALE_OUT with `cluster/scale-out.json`.
    ScaleOut,
    /// Cluster scale-start SCALE_IN with `cluster/scale-in.json`: drain and delete the workers
    /// named by `--node` (inventory names; default: from the request).
    ScaleIn {
        /// A worker to remove, by inventory name (repeatable).
        #[arg(long)]
        node: Vec<String>,
    },
    /// Every `cnf/*.json`: Helm CNF instantiate on the site's cluster.
    CnfInstantiate,
    /// Every `cnf/*.json`'s CNF: uninstall.
    CnfTerminate,
    /// Upload SCRIPT and run it with ARGS on every inventory host of the site.
    RunScript {
        /// The local script, uploaded to every inventory host of the site and run there.
        script: PathBuf,
        /// The script's arguments, each passed as one word.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

impl Op {
    /// What the status documents record and a re-run compares.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Instantiate => "instantiate",
            Op::Terminate { .. } => "terminate",
            Op::ScaleOut => "scale-out",
            Op::ScaleIn { .. } => "scale-in",
            Op::CnfInstantiate => "cnf-instantiate",
            Op::CnfTerminate => "cnf-terminate",
            Op::RunScript { .. } => "run-script",
        }
    }
}

/// The site's cluster instance id.
pub fn cluster_id(site: &str) -> String {
    format!("site-{site}")
}

/// What every site's preparation shares.
pub struct Env<'a> {
    pub state_dir: &'a Path,
    /// Opens the instance store (read-only for a plan).
    pub store: &'a dyn Fn() -> Result<Store>,
    /// The operator's state key (`--state-key`).
    pub key: &'a dyn Fn() -> crate::lifecycle::state_key::StateKey,
    pub inventory_opts: LoadOptions,
    pub dry_run: bool,
    pub helm_timeout: Duration,
    /// What the operator's flags allow secret references to reach; each site adds the
    /// references its catalogue declared (`RenderedSite::secret_policy`).
    pub secrets: crate::secret_ref::Allowed,
}

/// A site ready to run: what was checked, holding its instance locks until dropped.
pub enum Work {
    /// A cluster hook; the flag is `--reset-nodes` (terminate only).
    Cluster(cluster_prepare::Op, Box<cluster_prepare::Prepared>, bool),
    Cnf(Vec<CnfWork>),
    Script {
        job: ScriptJob,
        hosts: Vec<Host>,
        rt: Box<Runner>,
    },
}

pub struct CnfWork {
    pub id: String,
    pub op: cnf::Op,
    pub inputs: cnf::Inputs,
    pub prepared: cnf::run::Prepared,
}

impl Work {
    /// One line for the plan's summary.
    pub fn describe(&self) -> String {
        match self {
            Work::Cluster(op, p, false) => format!("{} ({})", op.name(), p.hook.instance_id()),
            Work::Cluster(op, p, true) => format!("{} ({}), nodes reset", op.name(), p.hook.instance_id()),
            Work::Cnf(c) => {
                let ids: Vec<&str> = c.iter().map(|w| w.id.as_str()).collect();
                format!("{} CNF(s): {}", c.len(), ids.join(", "))
            }
            Work::Script { hosts, .. } => format!("run-script on {} hosts", hosts.len()),
        }
    }
}

/// Prefix an input error with its site and show its file relative to the rendered root, so
/// `site par1: par1/cluster/instantiate.json: additionalParams...` says where to look.
pub fn in_site(site: &SiteDir, e: Error) -> Error {
    let root = site.dir.parent().unwrap_or(Path::new(""));
    let rel =
        |s: &str| Path::new(s).strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_else(|_| s.to_string());
    let tag = format!("site {}: ", site.name);
    match e {
        Error::Input { location, field, message } if location.starts_with(&tag) => {
            Error::Input { location, field, message }
        }
        Error::Input { location, field, message } => {
            Error::Input { location: format!("site {}: {}", site.name, rel(&location)), field, message }
        }
        other => other,
    }
}

/// Read and check one site for `op` through the hooks' own preparation. `rt` is the site's
/// runner (its connector decides whether anything will connect).
pub async fn prepare_site(site: &SiteDir, op: &Op, env: &Env<'_>, rt: Runner) -> Result<Work> {
    prepare_inner(site, op, env, rt).await.map_err(|e| in_site(site, e))
}

async fn prepare_inner(site: &SiteDir, op: &Op, env: &Env<'_>, rt: Runner) -> Result<Work> {
    let inventory = site.dir.join("inventory.yaml");
    match op {
        Op::Instantiate => cluster(site, env, cluster_prepare::Op::InstantiateEnd, "instantiate.json", &[], rt),
        Op::Terminate { reset_nodes } => {
            match cluster(site, env, cluster_prepare::Op::TerminateEnd, "terminate.json", &[], rt)? {
                Work::Cluster(op, p, _) => Ok(Work::Cluster(op, p, *reset_nodes)),
                other => Ok(other),
            }
        }
        Op::ScaleOut => cluster(site, env, cluster_prepare::Op::ScaleEnd, "scale-out.json", &[], rt),
        Op::ScaleIn { node } => cluster(site, env, cluster_prepare::Op::ScaleStart, "scale-in.json", node, rt),
        Op::CnfInstantiate | Op::CnfTerminate => {
            let dir = site.dir.join("cnf");
            let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect(),
                Err(e) => return Err(Error::input(dir.display().to_string(), "cnf", format!("no CNF requests: {e}"))),
            };
            files.sort();
            if files.is_empty() {
                return Err(Error::input(dir.display().to_string(), "cnf", "no CNF request (*.json) here"));
            }
            let mut works = Vec::new();
            for f in files {
                let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let id = format!("site-{}-cnf-{stem}", site.name);
                let cop = if *op == Op::CnfInstantiate { cnf::Op::Instantiate } else { cnf::Op::Terminate };
                let inputs = cnf::Inputs {
                    request: matches!(cop, cnf::Op::Instantiate).then(|| Doc::File(f.clone())),
                    package_dir: site.package.clone(),
                    cluster_instance: Some(cluster_id(&site.name)),
                    inventory: Some(inventory.clone()),
                    timeout: env.helm_timeout,
                    secret_refs: site.secret_policy(&env.secrets),
                    ..cnf::Inputs::new(Some(id.clone()), env.inventory_opts.clone())
                };
                let prepared = cnf::run::prepare(&cop, &inputs, (env.store)()?)?;
                works.push(CnfWork { id, op: cop, inputs, prepared });
            }
            Ok(Work::Cnf(works))
        }
        Op::RunScript { script, args } => {
            let inv = Inventory::load(&inventory, &env.inventory_opts)?;
            let job = ScriptJob::new(script, args).await?;
            Ok(Work::Script { job, hosts: inv.hosts, rt: Box::new(rt) })
        }
    }
}

/// A cluster hook on the site: its request from `cluster/<file>`, its nodes from the rendered
/// inventory, its instance id `site-<name>`.
fn cluster(
    site: &SiteDir,
    env: &Env<'_>,
    cop: cluster_prepare::Op,
    file: &str,
    node: &[String],
    rt: Runner,
) -> Result<Work> {
    let req = site.dir.join("cluster").join(file);
    // Terminate may go without a request (as terminate-end); every other op needs its own.
    if cop != cluster_prepare::Op::TerminateEnd && !req.is_file() {
        return Err(Error::input(
            req.display().to_string(),
            "file",
            "is missing: the templates render no such request",
        ));
    }
    let request = req.is_file().then(|| Doc::File(req.clone()));
    let inputs = cluster_prepare::Inputs::new(request, env.inventory_opts.clone(), env.dry_run)
        .inventory(Some(site.dir.join("inventory.yaml")))
        .package_dir(site.package.clone())
        .vnf_instance_id(Some(cluster_id(&site.name)))
        .node(node.to_vec())
        .secret_refs(site.secret_policy(&env.secrets));
    let p = cluster_prepare::prepare(cop, &inputs, (env.store)()?, rt)?;
    Ok(Work::Cluster(cop, Box::new(p), false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn site(root: &Path, name: &str, index: usize, labels: &str) -> SiteDir {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let labels: BTreeMap<String, String> =
            labels.split(';').filter(|l| !l.is_empty()).map(|l| parse_selector(l).unwrap()).collect();
        let j = serde_json::json!({"name": name, "index": index, "labels": labels, "package": null});
        std::fs::write(dir.join("site.json"), j.to_string()).unwrap();
        SiteDir { name: name.into(), index, labels, dir, package: None, secret_refs: vec![] }
    }

    #[test]
    fn rendered_sites_load_in_index_order_and_select_by_name_label_and_index() {
        let d = tempfile::tempdir().unwrap();
        let b = site(d.path(), "ber2", 1, "region=eu;tier=small");
        let a = site(d.path(), "par1", 0, "region=eu;tier=big");
        let n = site(d.path(), "nyc1", 2, "region=us");
        std::fs::create_dir(d.path().join("notes")).unwrap();
        let all = load_rendered(d.path()).unwrap();
        assert_eq!(all, vec![a.clone(), b.clone(), n.clone()]);
        let eu = vec![("region".to_string(), "eu".to_string())];
        assert_eq!(select(all.clone(), &[], &eu, None).unwrap(), vec![a.clone(), b.clone()]);
        assert_eq!(select(all.clone(), &[], &eu, Some(1)).unwrap(), vec![b.clone()]);
        assert_eq!(select(all.clone(), &["nyc1".into()], &[], None).unwrap(), vec![n]);
        let e = select(all.clone(), &[], &eu, Some(2)).unwrap_err().to_string();
        assert!(e.contains("--index") && e.contains("2 selected"), "{e}");
        assert!(select(all.clone(), &["lon9".into()], &[], None).unwrap_err().to_string().contains("lon9"));
        let e = select(all, &["nyc1".into()], &eu, None).unwrap_err().to_string();
        assert_eq!(e, "arguments: --only/--selector: nyc1 with region=eu matches no rendered site");
        assert!(parse_selector("region").is_err() && parse_selector("=x").is_err());
    }

    #[test]
    fn input_errors_name_the_site_and_the_file_under_the_rendered_root() {
        let d = tempfile::tempdir().unwrap();
        let s = site(d.path(), "par1", 0, "");
        let f = s.dir.join("cluster/instantiate.json");
        let e = in_site(&s, Error::input(f.display().to_string(), "additionalParams.x", "bad"));
        assert_eq!(e.to_string(), "site par1: par1/cluster/instantiate.json: additionalParams.x: bad");
        assert_eq!(in_site(&s, e).to_string(), "site par1: par1/cluster/instantiate.json: additionalParams.x: bad");
    }
}
