//! A `primitive` command's inputs, checked before anything connects: where `primitives.yaml`
//! is, the primitive by name, its parameters (all bad ones named at once, before anything is
//! opened or read), its script (opened inside the primitives' directory), and the hosts it runs
//! on (registered EEs, inventory hosts, or a recorded cluster's masters or workers).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::inventory::{Host, Inventory, LoadOptions};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::primitive::run::Prepared;
use crate::primitive::spec::{self, Primitive, RunsOn};

/// Where primitives.yaml is: `--dir`, or a package's `Scripts/` (else the package's root).
pub fn locate(dir: Option<&Path>, package: Option<&Path>) -> Result<PathBuf> {
    match (dir, package) {
        (Some(d), _) => Ok(d.to_path_buf()),
        (None, Some(p)) => {
            let scripts = p.join("Scripts");
            Ok(if scripts.join(spec::FILE_NAME).is_file() { scripts } else { p.to_path_buf() })
        }
        (None, None) => Err(Error::input("arguments", "--dir", "where are the primitives? --dir DIR or --package DIR")),
    }
}

/// The declared primitives, with the directory they were read from.
pub fn declared(dir: Option<&Path>, package: Option<&Path>) -> Result<(PathBuf, Vec<Primitive>)> {
    let dir = locate(dir, package)?;
    let ps = spec::load(&dir)?;
    Ok((dir, ps))
}

/// One primitive by name; an unknown one is bad input listing the declared ones.
pub fn find<'a>(ps: &'a [Primitive], name: &str, dir: &Path) -> Result<&'a Primitive> {
    ps.iter().find(|p| p.name == name).ok_or_else(|| {
        let known: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        Error::input(
            dir.join(spec::FILE_NAME).display().to_string(),
            crate::error::excerpt(name),
            format!("no such primitive (declared: {})", known.join(", ")),
        )
    })
}

/// What `primitive run` is given (the command line's arguments).
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub name: String,
    /// `--param NAME=VALUE`, in order.
    pub params: Vec<(String, String)>,
    /// Registered execution environments (names or ids).
    pub ee: Vec<String>,
    /// Inventory hosts to run on (with `group`/`host`), or the credentials of a recorded
    /// cluster's nodes (with `cluster_instance`).
    pub inventory: Option<PathBuf>,
    pub group: Vec<String>,
    pub host: Vec<String>,
    /// The VNF instance recorded by instantiate-end whose masters or workers it runs on.
    pub cluster_instance: Option<String>,
}

/// Why a run was refused before anything connected.
pub enum Refused {
    /// Bad input (exit 2).
    Input(Error),
    /// Bad parameters, every one by name (OSM's bad-arguments kind); nothing was opened.
    BadArguments { primitive: String, bad: Vec<(String, String)> },
}

impl From<Error> for Refused {
    fn from(e: Error) -> Refused {
        Refused::Input(e)
    }
}

/// A run ready to go: the primitive with its parameter files and script, the checked
/// parameters (for the records), its hosts, and the store its records go to.
pub struct Ready {
    pub primitive: Prepared,
    pub params: Map<String, Value>,
    pub hosts: Vec<Host>,
    pub store: Store,
}

/// Check everything a run needs. The parameters come first (nothing is opened, read or
/// connected for a run with bad arguments); `store` is opened once the script is found.
pub fn prepare(
    dir: Option<&Path>,
    package: Option<&Path>,
    r: &Request,
    inventory_opts: &LoadOptions,
    store: impl FnOnce() -> Result<Store>,
) -> std::result::Result<Ready, Refused> {
    let (dir, ps) = declared(dir, package)?;
    let prim = find(&ps, &r.name, &dir)?.clone();
    let params = spec::check_params(&prim, &r.params)
        .map_err(|bad| Refused::BadArguments { primitive: prim.name.clone(), bad })?;
    let package = Package::open(&dir)?;
    let script = package.file(&prim.script, &dir.join(spec::FILE_NAME).display().to_string(), "script")?;
    let store = store()?;
    let hosts = targets(r, &prim, inventory_opts, &store)?;
    let primitive = Prepared::new(prim, script, params.clone())?;
    Ok(Ready { primitive, params, hosts, store })
}

/// The hosts a run goes to, from the command line and the declaration.
fn targets(a: &Request, prim: &Primitive, inventory_opts: &LoadOptions, store: &Store) -> Result<Vec<Host>> {
    if let Some(id) = &a.cluster_instance {
        crate::lifecycle::state::check_instance_id(id)?;
        if store.load_doc::<Value>(id, "cnf")?.is_some() && store.load_doc::<Value>(id, "")?.is_none() {
            return Err(Error::input(
                "--cluster-instance",
                id.clone(),
                "is a Helm CNF: Helm CNFs have no primitives (as in OSM's Helm connector); use the cnf operations",
            ));
        }
    }
    let mut hosts: Vec<Host> = Vec::new();
    match (&prim.runs_on, &a.cluster_instance) {
        (RunsOn::Masters | RunsOn::Workers, None) => {
            return Err(Error::input(
                "arguments",
                "--cluster-instance",
                format!(
                    "primitive {} runs on a cluster's {}: name the VNF instance",
                    prim.name,
                    runs_on_word(&prim.runs_on)
                ),
            ))
        }
        (RunsOn::Masters | RunsOn::Workers, Some(id)) => {
            let role = if prim.runs_on == RunsOn::Masters { "master" } else { "worker" };
            let doc: Value = store.load_doc(id, "")?.ok_or_else(|| {
                Error::input("--cluster-instance", id.clone(), "no cluster is recorded under this id (instantiate-end)")
            })?;
            let names: Vec<String> = doc["nodes"]
                .as_object()
                .map(|m| m.iter().filter(|(_, n)| n["role"] == role).map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            let inv = a.inventory.as_ref().ok_or_else(|| {
                Error::input(
                    "arguments",
                    "--inventory",
                    "the cluster's nodes are logged in to with the inventory's credentials",
                )
            })?;
            let inv = Inventory::load(inv, inventory_opts)?;
            for n in &names {
                let h = inv.hosts.iter().find(|h| &h.name == n).ok_or_else(|| {
                    Error::input("--inventory", n.clone(), format!("the recorded {role} is not in the inventory"))
                })?;
                hosts.push(h.clone());
            }
            if hosts.is_empty() {
                return Err(Error::input(
                    "--cluster-instance",
                    id.clone(),
                    format!("the recorded cluster has no {role}"),
                ));
            }
        }
        (RunsOn::Ee(declared), _) => {
            if a.inventory.is_some() {
                return Err(Error::input(
                    "arguments",
                    "--inventory",
                    format!("primitive {} runs on EEs (--ee)", prim.name),
                ));
            }
            let names: Vec<String> = match (a.ee.is_empty(), declared) {
                (false, _) => a.ee.clone(),
                (true, Some(n)) => vec![n.clone()],
                (true, None) => {
                    return Err(Error::input(
                        "arguments",
                        "--ee",
                        format!("primitive {} runs on an EE: name it", prim.name),
                    ))
                }
            };
            hosts = crate::ee::record::hosts(store, &names)?;
        }
        (RunsOn::Any, _) => {
            if let Some(p) = &a.inventory {
                hosts = Inventory::load(p, inventory_opts)?.select(&a.group, &a.host)?;
            }
            hosts.extend(crate::ee::record::hosts(store, &a.ee)?);
            if hosts.is_empty() {
                return Err(Error::input("arguments", "--ee", "no target: --ee NAME, or --inventory"));
            }
        }
    }
    Ok(hosts)
}

fn runs_on_word(r: &RunsOn) -> &'static str {
    match r {
        RunsOn::Masters => "masters",
        RunsOn::Workers => "workers",
        RunsOn::Ee(_) => "EEs",
        RunsOn::Any => "hosts",
    }
}
