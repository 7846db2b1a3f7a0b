//! Where kubectl runs: the masters of the cluster `instantiate-end` recorded under an id, found
//! and credentialed exactly as the Helm CNF operations find theirs (`cnf::masters`: the stored
//! credential only ever goes to the masters recorded with it), or the hosts of an inventory's
//! master group. The first master that answers is used (`Runner::first_reachable`), as for Helm.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, LoadOptions};
use crate::lifecycle::state::{check_instance_id, Store};
use crate::lifecycle::{Role, Target};

/// Where kubectl runs: the cluster recorded by `instantiate-end` under an id, or an inventory's
/// master group.
#[derive(Clone, Debug, Default)]
pub struct Where {
    pub cluster_instance: Option<String>,
    pub inventory: Option<PathBuf>,
    pub master_group: String,
    pub inventory_opts: LoadOptions,
    pub known_hosts: Option<PathBuf>,
}

/// The candidate masters, in order; checked before anything connects.
pub fn find(w: &Where, store: &Store) -> Result<Vec<Target>> {
    match (&w.cluster_instance, &w.inventory) {
        (Some(id), _) => {
            check_instance_id(id).map_err(|e| Error::input("arguments", "--vnf-instance-id", e.to_string()))?;
            let inputs = crate::cnf::Inputs {
                cluster_instance: Some(id.clone()),
                inventory: w.inventory.clone(),
                known_hosts: w.known_hosts.clone(),
                ..crate::cnf::Inputs::new(None, w.inventory_opts.clone())
            };
            let found = crate::cnf::masters::find_helm_info(&inputs, None, store, None)?;
            crate::cnf::masters::masters(&found, &inputs, store)
        }
        (None, Some(p)) => {
            let inv = Inventory::load(p, &w.inventory_opts)?;
            let hosts = inv.select(std::slice::from_ref(&w.master_group), &[]).map_err(|e| match e {
                Error::Input { message, .. } => Error::input(p.display().to_string(), "--master-group", message),
                other => other,
            })?;
            if hosts.is_empty() {
                return Err(Error::input(p.display().to_string(), "--master-group", "the group has no hosts"));
            }
            Ok(hosts.into_iter().map(|h| Target::new(h, Role::Master)).collect())
        }
        (None, None) => Err(Error::input(
            "arguments",
            "--vnf-instance-id",
            "where kubectl runs is unknown: pass --vnf-instance-id (a cluster recorded by instantiate-end) \
             or --inventory with a master group",
        )),
    }
}
