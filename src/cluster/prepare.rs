//! Everything a cluster hook needs, read and checked before anything connects: the request, the
//! instance's recorded state, the cluster params (from the request, the record or the
//! VnfInstance), the nodes (inventory or VnfInstance), the package paths and which nodes a heal
//! or scale is about. Bad input stops here with exit 2 and nothing touched.

use serde_json::Value;

use crate::cluster::hook::{Checked, Hook};
use crate::cluster::instance_hosts;
use crate::cluster::params::{ClusterParams, GroupKey, PARAM_KEY};
use crate::cluster::state::{self, InstanceState};
use crate::cluster::state_store;
use crate::cluster::topology::{self, NodeDefaults, Topology};
use crate::cnf::vnfd::Scaling;
use crate::error::excerpt;
use crate::error::{Error, Result};
use crate::inventory::{HostKeyCheck, Inventory, LoadOptions, PackageMode};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::{check_instance_id, Lock, Store};
use crate::lifecycle::Runner;
use crate::request::{Doc, GrantRequest, ScaleType, TerminateRequest, VimConnections, VnfInstance, VnfcResourceInfo};
use crate::vim::addresses::CloudAddresses;

// Callers name a hook, its inputs and its prepared run through this module.
pub use crate::cluster::inputs::Inputs;
pub use crate::cluster::op::{Op, Req};

fn need<'a, T>(p: &'a Option<T>, flag: &str, op: Op) -> Result<&'a T> {
    p.as_ref()
        .ok_or_else(|| Error::input("arguments", flag, format!("is required for {}", op.name().replace('_', "-"))))
}

/// A hook ready to run: validated inputs, its nodes, and the instance lock held until dropped.
pub struct Prepared {
    pub hook: Hook,
    pub req: Req,
    pub targets: Vec<String>,
    _lock: Lock,
}

/// Read and check everything an operation needs, before anything connects: the request, the
/// instance's recorded state, the params, the nodes, the package paths, the target nodes.
pub fn prepare(op: Op, a: &Inputs, store: Store, rt: Runner) -> Result<Prepared> {
    let (req, req_file) = load_request(op, a)?;
    let inst: Option<VnfInstance> = a.vnf_instance.as_ref().map(Doc::load).transpose()?;
    let id = instance_id(a, inst.as_ref())?;
    check_instance_id(&id)?;
    let lock = store.lock(&id, state::KIND)?;
    let mut state = recorded_state(op, a, &store, &id)?;
    let src = ParamSources { op, a, req: &req, req_file: &req_file, inst: inst.as_ref(), store: &store, id: &id };
    let (params, params_file, param_json) = cluster_params(&src, &state)?;
    if op == Op::InstantiateEnd || state.params.is_null() {
        state.params = param_json;
    }
    if op == Op::InstantiateEnd {
        state.request_inventory = a.request_inventory.clone();
    }
    let pkg = package(op, a)?;
    let given = ParamsIn { params: &params, file: &params_file };
    let (topo, from_cloud) = topology(op, a, inst.as_ref(), given, &store, &state, pkg.as_ref())?;
    if let Some(said) = from_cloud {
        rt.events.for_host("").emit(crate::event::EventKind::Status { subject: "vim".into(), status: said });
    }
    let vim_connections = match (&req, &inst) {
        (Req::Instantiate(r), _) => r.vim_connection_info.clone(),
        (_, Some(i)) => i.vim_connection_info.clone(),
        _ => VimConnections::default(),
    };
    let mut storage = crate::cluster::storage_locate::from_inputs(
        a,
        inst.as_ref(),
        &params,
        &req_file,
        pkg.as_ref(),
        &topo,
        &store,
        &id,
        op == Op::TerminateEnd,
    )?;
    open_instance_hosts(&store, &state, &topo, storage.as_ref())?;
    let has_package = pkg.is_some();
    let mut params = params;
    if let Some(st) = storage.as_mut() {
        params.warnings.append(&mut st.warnings);
    }
    let checked = Checked {
        params,
        topo,
        storage,
        pkg,
        req_file: req_file.clone(),
        tacker_compat: a.tacker_compat,
        vim_connections,
    };
    let mut hook = Hook::new(rt, store, id, state, checked);
    let targets = targets(op, &hook, &req, a, inst.as_ref())?;
    if let (Op::HealStart, Req::Heal(r)) = (op, &req) {
        // Saved by heal_start's first step; heal_end finds the nodes by it.
        let learned = if !r.whole_vnf() {
            crate::cluster::healing::learned(&r.vnfc_instance_id, &targets, &hook.topo)
        } else {
            // SOL003: the grant names the servers Tacker replaces, by their old ids.
            let (ids, nodes): (Vec<String>, Vec<String>) =
                grant_removed(op, &hook, a, inst.as_ref())?.into_iter().unzip();
            crate::cluster::healing::learned(&ids, &nodes, &hook.topo)
        };
        hook.with_state(|s| s.healing = learned);
    }
    apply_targets(op, &req, &targets, &mut hook);
    // Every file a node would get must resolve now, before any node is touched.
    if has_package {
        for n in hook.topo.all() {
            hook.script_uploads(n)?;
        }
        hook.registry_ca_uploads()?;
    }
    Ok(Prepared { hook, req, targets, _lock: lock })
}

/// The instance's recorded state. Only the hooks that may come first (instantiate-end, a
/// heal-end that rebuilds everything, terminate-end) and plans start without one.
fn recorded_state(op: Op, a: &Inputs, store: &Store, id: &str) -> Result<InstanceState> {
    let state = state_store::load(store, id)?;
    if state.is_none() && !matches!(op, Op::InstantiateEnd | Op::HealEnd | Op::TerminateEnd) && !a.dry_run {
        return Err(Error::input(
            store.doc_path(id, state::KIND).display().to_string(),
            "state",
            format!("no state for VNF instance {id}: instantiate-end never ran here (or --state-dir differs)"),
        ));
    }
    Ok(state.unwrap_or_else(|| InstanceState::new(id)))
}

/// The VNF package, opened; the hooks that upload scripts need one.
fn package(op: Op, a: &Inputs) -> Result<Option<Package>> {
    let pkg = a.package_dir.as_ref().map(|d| Package::open(d)).transpose()?;
    if pkg.is_none() && matches!(op, Op::InstantiateEnd | Op::HealEnd | Op::ScaleEnd) {
        need(&a.package_dir, "--package-dir", op)?;
    }
    Ok(pkg)
}

/// What the hook's targets change: the VMs the VNFM just rebuilt re-learn their host keys, and
/// only they (`rebuilt.rs`); the storage server is not in the topology, but a heal may rebuild
/// it too, and a heal that names it heals the storage.
fn apply_targets(op: Op, req: &Req, targets: &[String], hook: &mut Hook) {
    let server = hook.storage.as_ref().and_then(|s| s.server.as_ref()).map(|s| s.node.name().to_string());
    let all = hook.topo.all().map(|n| n.name()).chain(server.as_deref());
    let rebuilt = crate::cluster::rebuilt::rebuilt(op, req, targets, all);
    crate::cluster::rebuilt::apply(&mut hook.topo, &rebuilt);
    if let Some(s) = hook.storage.as_mut() {
        s.healed = matches!(op, Op::HealStart | Op::HealEnd) && s.is_target(targets);
        if let Some(server) = s.server.as_mut() {
            crate::cluster::rebuilt::apply_one(&mut server.node, &rebuilt);
        }
    }
}

fn load_request(op: Op, a: &Inputs) -> Result<(Req, String)> {
    let req_path = match op {
        Op::TerminateEnd => a.request.as_ref(),
        _ => Some(need(&a.request, "--request", op)?),
    };
    let req_file = req_path.map(Doc::name).unwrap_or_else(|| "(no request)".into());
    let req = match (op, req_path) {
        (Op::InstantiateEnd, Some(p)) => Req::Instantiate(p.load()?),
        (Op::HealStart | Op::HealEnd, Some(p)) => Req::Heal(p.load()?),
        (Op::ScaleStart | Op::ScaleEnd, Some(p)) => Req::Scale(p.load()?),
        (_, Some(p)) => Req::Terminate(p.load()?),
        (_, None) => Req::Terminate(TerminateRequest::default()),
    };
    Ok((req, req_file))
}

/// The instance id: the VnfInstance's, or the one given (they must agree when both are).
fn instance_id(a: &Inputs, inst: Option<&VnfInstance>) -> Result<String> {
    Ok(match (inst, &a.vnf_instance_id) {
        (Some(i), Some(id)) if &i.id != id => {
            return Err(Error::input(
                "--vnf-instance-id",
                excerpt(id),
                format!("differs from the VnfInstance's id {}", excerpt(&i.id)),
            ))
        }
        (Some(i), _) => i.id.clone(),
        (None, Some(id)) => id.clone(),
        (None, None) => {
            return Err(Error::input(
                "arguments",
                "--vnf-instance-id",
                "the VNF instance id is needed: pass --vnf-instance FILE or --vnf-instance-id ID",
            ))
        }
    })
}

/// Where the cluster params may come from.
struct ParamSources<'a> {
    op: Op,
    a: &'a Inputs,
    req: &'a Req,
    req_file: &'a str,
    inst: Option<&'a VnfInstance>,
    store: &'a Store,
    id: &'a str,
}

/// The cluster params: from the request (instantiate; v2 scale/heal repeat them), else what
/// instantiate recorded, else the VnfInstance's instantiatedVnfInfo.additionalParams. Returns
/// them checked, the file they came from, and the raw `k8s_cluster_installation_param`.
fn cluster_params(src: &ParamSources, state: &InstanceState) -> Result<(ClusterParams, String, Value)> {
    let ParamSources { op, a, req, req_file, inst, store, id } = *src;
    let id = id.to_string();
    let req_file = req_file.to_string();
    let mut ap = req.additional_params().clone();
    let mut params_file = req_file.clone();
    if !ap.contains_key(PARAM_KEY) {
        let stored = (!state.params.is_null()).then(|| state.params.clone());
        let from_inst = inst
            .and_then(|i| i.instantiated_vnf_info.as_ref())
            .and_then(|i| i.additional_params.get(PARAM_KEY).cloned());
        match stored
            .map(|v| (v, store.doc_path(&id, state::KIND).display().to_string()))
            .or(from_inst.map(|v| (v, a.vnf_instance.as_ref().map(Doc::name).unwrap_or_default())))
        {
            Some((v, f)) => {
                ap.insert(PARAM_KEY.into(), v);
                params_file = f;
            }
            None if op == Op::TerminateEnd => {}
            None => {
                return Err(Error::input(
                    &req_file,
                    format!("additionalParams.{PARAM_KEY}"),
                    "is required (and no earlier instantiate recorded it)",
                ))
            }
        }
    }
    // Tacker v1 scale/heal may override the node credentials (it checked the worker username
    // twice and never the password; both are read here).
    for (role, key) in [
        ("master_node", "master_node_username"),
        ("master_node", "master_node_password"),
        ("worker_node", "worker_node_username"),
        ("worker_node", "worker_node_password"),
    ] {
        if let Some(v) = req.additional_params().get(key).filter(|_| op != Op::InstantiateEnd) {
            let field = key.rsplit('_').next().expect("has parts");
            if let Some(o) = ap.get_mut(PARAM_KEY).and_then(|p| p.get_mut(role)).and_then(Value::as_object_mut) {
                o.insert(field.into(), v.clone());
            }
        }
    }
    if op == Op::TerminateEnd && !ap.contains_key(PARAM_KEY) {
        // Nothing recorded and nothing given: terminate has nothing to do but say so.
        return Err(Error::input(
            store.doc_path(&id, state::KIND).display().to_string(),
            "state",
            format!("no state for VNF instance {id}; nothing to terminate"),
        ));
    }
    let params = ClusterParams::from_additional_params(&ap, &params_file, &id, &a.secret_refs)?;
    Ok((params, params_file, ap.get(PARAM_KEY).cloned().unwrap_or(Value::Null)))
}

/// The instance's own known_hosts ([`instance_hosts`]), before anything connects: created for
/// the nodes (and storage server) that use it, seeded for an instance recorded before it existed.
fn open_instance_hosts(
    store: &Store,
    state: &InstanceState,
    topo: &Topology,
    storage: Option<&crate::cluster::storage_setup::StorageSetup>,
) -> Result<()> {
    let own = instance_hosts::path(store, &state.vnf_instance_id);
    let hosts = topo.all().map(|n| &n.host).chain(storage.and_then(|s| s.server.as_ref()).map(|s| &s.node.host));
    let nodes: Vec<(&str, u16)> = hosts.filter(|h| h.known_hosts == own).map(|h| (h.addr.as_str(), h.port)).collect();
    if nodes.is_empty() {
        return Ok(());
    }
    instance_hosts::open(store, state, &nodes)
}

/// The request's cluster params and the file they were read from (for messages).
struct ParamsIn<'a> {
    params: &'a ClusterParams,
    file: &'a str,
}

/// The nodes: from the inventory (groups named after aspects/VDUs), else the VnfInstance,
/// with what the instance lacks asked of its VIM (`vim/`); and then which addresses came from
/// the VIM, said in an event.
fn topology(
    op: Op,
    a: &Inputs,
    inst: Option<&VnfInstance>,
    p: ParamsIn<'_>,
    store: &Store,
    state: &InstanceState,
    pkg: Option<&Package>,
) -> Result<(Topology, Option<String>)> {
    let mut from_cloud = None;
    let t = nodes(op, a, inst, p, store, state, pkg, &mut from_cloud)?;
    Ok((t, from_cloud))
}

/// The addresses the instance lacks, from its VIM: none asked when it carries them all, or
/// has no OpenStack VIM (the topology then says what is missing).
fn cloud_addresses(
    a: &Inputs,
    i: &VnfInstance,
    params: &ClusterParams,
    file: &str,
    vnfd: &Scaling,
) -> Result<Option<CloudAddresses>> {
    let Some(want) = topology::cloud_want(i, params, file, vnfd)? else { return Ok(None) };
    let Some(access) = crate::vim::lookup::access(&a.vim, &i.vim_connection_info, i, file)? else { return Ok(None) };
    crate::vim::lookup::addresses(&a.vim, &access, &want, file).map(Some)
}

#[allow(clippy::too_many_arguments)]
fn nodes(
    op: Op,
    a: &Inputs,
    inst: Option<&VnfInstance>,
    p: ParamsIn<'_>,
    store: &Store,
    state: &InstanceState,
    pkg: Option<&Package>,
    from_cloud: &mut Option<String>,
) -> Result<Topology> {
    let (params, params_file) = (p.params, p.file);
    let inv_opts = LoadOptions { credentials_from_request: true, ..a.inventory_opts.clone() };
    if let (None, Some(rel)) = (&a.inventory, &state.request_inventory) {
        return recorded_inventory(a, rel, params, params_file, store, state, pkg);
    }
    Ok(match (&a.inventory, inst) {
        (Some(p), _) => {
            let inv = Inventory::load(p, &inv_opts)?;
            topology::from_inventory(&inv, params, &p.display().to_string(), params_file)?
        }
        (None, Some(i)) => {
            let d = NodeDefaults {
                known_hosts: a
                    .known_hosts
                    .clone()
                    .unwrap_or_else(|| instance_hosts::path(store, &state.vnf_instance_id)),
                host_key_check: HostKeyCheck::AcceptNew,
            };
            let listed = i.instantiated_vnf_info.as_ref().is_some_and(|v| !v.vnfc_resource_info.is_empty());
            if !listed && !state.nodes.is_empty() {
                // Tacker v1's terminate_end: the instance no longer lists its VMs.
                return topology::from_state(
                    state,
                    params,
                    &store.doc_path(&state.vnf_instance_id, state::KIND).display().to_string(),
                    &d,
                );
            }
            let vnfd = aspect_vdus(params, i, pkg)?;
            let file = a.vnf_instance.as_ref().map(Doc::name).unwrap_or_default();
            let cloud = cloud_addresses(a, i, params, &file, &vnfd)?.unwrap_or_default();
            let t = topology::from_vnf_instance_and_cloud(i, params, &file, &d, &vnfd, &cloud)?;
            if !cloud.is_empty() {
                *from_cloud = Some(format!("addresses from the VIM: {}", cloud.describe()));
            }
            if op != Op::ScaleStart {
                return Ok(t);
            }
            // A scale-out's rollback names the workers scale_end joined; the instance it comes
            // with is the one before the scale.
            let file = store.doc_path(&state.vnf_instance_id, state::KIND).display().to_string();
            topology::with_recorded_workers(t, state, &a.node, params, &file, &d)?
        }
        (None, None) => {
            return Err(Error::input(
                "arguments",
                "--inventory",
                "nodes come from --inventory or from --vnf-instance (vnfcResourceInfo)",
            ))
        }
    })
}

/// The nodes of the inventory the instantiate request named (recorded in the state), for a
/// later hook whose request names none: the same file of this hook's package, read as a
/// request's inventory is (package mode: nodes only, the hook's known_hosts).
fn recorded_inventory(
    a: &Inputs,
    rel: &str,
    params: &ClusterParams,
    params_file: &str,
    store: &Store,
    state: &InstanceState,
    pkg: Option<&Package>,
) -> Result<Topology> {
    let state_file = store.doc_path(&state.vnf_instance_id, state::KIND).display().to_string();
    let field = "request_inventory";
    let Some(pkg) = pkg else {
        // A hook without the package (a CLI terminate-end): the nodes instantiate recorded.
        if !state.nodes.is_empty() {
            let d = NodeDefaults {
                known_hosts: a.known_hosts.clone().unwrap_or_else(|| store.dir().join("known_hosts")),
                host_key_check: HostKeyCheck::AcceptNew,
            };
            return topology::from_state(state, params, &state_file, &d);
        }
        return Err(Error::input(&state_file, field, "names a file of the VNF package, and there is no package"));
    };
    let path = pkg.resolve(rel, &state_file, field, false)?;
    let known_hosts = a.known_hosts.clone().unwrap_or_else(|| store.dir().join("known_hosts"));
    let opts = LoadOptions {
        credentials_from_request: true,
        package: Some(PackageMode { known_hosts }),
        ..a.inventory_opts.clone()
    };
    let inv = Inventory::load(&path, &opts)?;
    topology::from_inventory(&inv, params, &path.display().to_string(), params_file)
}

/// The package VNFD's scaling data, when a role names a scaling aspect (Tacker v1) and there is
/// a package: the aspect's VDUs are the `vduId`s the instance records. Of the flavour the
/// instance was instantiated with.
fn aspect_vdus(params: &ClusterParams, inst: &VnfInstance, pkg: Option<&Package>) -> Result<Scaling> {
    let by_aspect = [&params.master, &params.worker].iter().any(|r| matches!(r.group, Some(GroupKey::AspectId(_))));
    let Some(pkg) = pkg.filter(|_| by_aspect) else { return Ok(Scaling::default()) };
    let flavour = inst.instantiated_vnf_info.as_ref().and_then(|v| v.rest.get("flavourId")).and_then(Value::as_str);
    crate::cnf::vnfd_read::read_scaling(pkg, flavour)
}

/// Which nodes a heal or scale is about, as the topology's node names: `--node`, else the
/// request's VNFC ids (SOL002 heal, through `vnfcInfo`), else the grant's `removeResources`
/// (SCALE_IN, Tacker v2 heal), else, for SCALE_OUT, the workers not in the cluster yet.
fn targets(op: Op, h: &Hook, req: &Req, a: &Inputs, inst: Option<&VnfInstance>) -> Result<Vec<String>> {
    for n in &a.node {
        if h.topo.find(n).is_none() && !h.storage.as_ref().is_some_and(|s| s.is_target(std::slice::from_ref(n))) {
            return Err(Error::input("--node", excerpt(n), "no such node among the cluster's masters and workers"));
        }
    }
    if !a.node.is_empty() {
        return Ok(a.node.clone());
    }
    let removed = || grant_removed(op, h, a, inst).map(|v| v.into_iter().map(|(_, n)| n).collect::<Vec<_>>());
    match (op, req) {
        (Op::HealStart | Op::HealEnd, Req::Heal(r)) if !r.whole_vnf() => r
            .vnfc_instance_id
            .iter()
            .map(|id| {
                if h.topo.find(id).is_some() {
                    return Ok(id.clone());
                }
                if let Some(n) = h.storage.as_ref().and_then(|s| s.heal_target(inst, id)) {
                    return Ok(n);
                }
                let v = inst.and_then(|i| i.vnfc_resource_for(id));
                let healed = || {
                    let rec = h.with_state(|s| s.healing.get(id).cloned()).filter(|_| op == Op::HealEnd)?;
                    crate::cluster::healing::now(&rec, &h.topo).map(|n| n.name().to_string())
                };
                v.and_then(|v| node_of(h, inst, v)).or_else(healed).ok_or_else(|| {
                    let msg = format!(
                        "'{}' names no inventory host and no vnfcInfo/vnfcResourceInfo of the VNF instance with a known address",
                        excerpt(id)
                    );
                    Error::input(h.req_file(), "vnfcInstanceId", msg)
                })
            })
            .collect(),
        (Op::HealStart | Op::HealEnd, Req::Heal(r)) if r.additional_params.get("all").is_none() => removed(),
        (Op::ScaleEnd, Req::Scale(r)) if r.kind == ScaleType::Out => {
            Ok(h.topo.workers.iter().filter(|w| !h.installed(w)).map(|w| w.name().to_string()).collect())
        }
        (Op::ScaleStart, Req::Scale(r)) if r.kind == ScaleType::In => {
            let nodes = removed()?;
            if nodes.is_empty() {
                return Err(Error::input(
                    "arguments",
                    "--node",
                    format!(
                        "SCALE_IN of {} step(s): name the workers to remove with --node, or give the grant request \
                         (its removeResources name them)",
                        r.number_of_steps
                    ),
                ));
            }
            Ok(nodes)
        }
        _ => Ok(vec![]),
    }
}

/// The nodes a grant's `removeResources` name (COMPUTE), each with the resource id it was named
/// by. At `heal_end` Tacker has replaced the servers: the instance lists new server ids (same
/// ports and addresses), so an old id that names no VNFC is the node heal_start recorded under
/// it, found at its address (`healing.rs`); one heal_start did not record is no node now.
fn grant_removed(op: Op, h: &Hook, a: &Inputs, inst: Option<&VnfInstance>) -> Result<Vec<(String, String)>> {
    let Some(g) = &a.grant_request else { return Ok(vec![]) };
    let grant: GrantRequest = g.load()?;
    grant
        .remove_resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == "COMPUTE")
        .map(|(i, r)| {
            let rid = r.resource.as_ref().and_then(|x| x.resource_id.as_deref()).unwrap_or(&r.id);
            let v = inst.and_then(|inst| inst.vnfc_by_resource(rid));
            let healed = || {
                let rec = h.with_state(|s| s.healing.get(rid).cloned()).filter(|_| op == Op::HealEnd)?;
                crate::cluster::healing::now(&rec, &h.topo).map(|n| n.name().to_string())
            };
            let node = v.and_then(|v| node_of(h, inst, v)).or_else(healed).ok_or_else(|| {
                let msg = format!("'{}' names no VNFC of the VNF instance that is a node of the cluster", excerpt(rid));
                Error::input(g.name(), format!("removeResources[{i}].resource.resourceId"), msg)
            })?;
            Ok((rid.to_string(), node))
        })
        .collect()
}

/// The cluster node a VNFC is: the node named after it (nodes from the VnfInstance), else the
/// node with one of its addresses (nodes from an inventory).
fn node_of(h: &Hook, inst: Option<&VnfInstance>, v: &VnfcResourceInfo) -> Option<String> {
    if h.topo.find(&v.id).is_some() {
        return Some(v.id.clone());
    }
    let inst = inst?;
    let addrs: Vec<String> = v.vnfc_cp_info.iter().filter_map(|c| inst.address_of(v, &c.cpd_id)).collect();
    h.topo.all().find(|n| addrs.iter().any(|a| *a == n.nic_ip || *a == n.host.addr)).map(|n| n.name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::testkit::Fixture;

    /// Tacker v1 names the package inventory in instantiate's body only; its heal and scale
    /// bodies carry no params. The later hook reads the same file, in package mode.
    #[tokio::test]
    async fn a_later_hook_reads_the_inventory_the_instantiate_request_named() {
        let f = Fixture::new(1, 1);
        std::fs::create_dir_all(f.path("pkg/Files")).unwrap();
        let inv = std::fs::read_to_string(f.path("inv.yaml")).unwrap();
        // A package inventory lists nodes only.
        std::fs::write(f.path("pkg/Files/inv.yaml"), inv.replace("defaults:\n  known_hosts: /dev/null\n", "")).unwrap();
        let package_mode = Some(PackageMode { known_hosts: f.path("state/known_hosts") });
        let p = f
            .prepare_with(Op::InstantiateEnd, Fixture::instantiate_body(), &[], |i| {
                i.inventory = Some(f.path("pkg/Files/inv.yaml"));
                i.request_inventory = Some("Files/inv.yaml".into());
                i.inventory_opts.package = package_mode.clone();
            })
            .unwrap();
        let o = crate::cluster::run(Op::InstantiateEnd, &p, false).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        drop(p);
        assert_eq!(f.state()["request_inventory"], "Files/inv.yaml");
        // The heal: no inventory, and an instance whose VNFCs carry no address.
        let inst = serde_json::json!({"id": "vnf1", "instantiatedVnfInfo": {"vnfcResourceInfo": [
            {"id": "vnfc-w1", "vduId": "worker"}]}});
        let heal = serde_json::json!({"vnfcInstanceId": ["w1"]});
        let p = f
            .prepare_with(Op::HealStart, heal, &[], |i| {
                i.inventory = None;
                i.vnf_instance = Some(Doc::Inline { name: "inst".into(), value: inst });
            })
            .unwrap();
        let names: Vec<&str> = p.hook.topo.all().map(|n| n.name()).collect();
        assert_eq!(names, ["m1", "w1"]);
        assert_eq!(p.targets, ["w1"]);
        drop(p);
        // An operator's inventory is not recorded: it comes with every hook.
        let p = f.prepare(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).unwrap();
        let o = crate::cluster::run(Op::InstantiateEnd, &p, false).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        drop(p);
        assert!(f.state().get("request_inventory").is_none(), "{}", f.state());
    }

    /// What stock Tacker v2 records for dynamic addresses: the VNFCs and their VMs, each CP
    /// `isDynamic` with no address, the VIM entry; no metadata addresses.
    fn stock_instance() -> serde_json::Value {
        let dynamic = serde_json::json!([{"layerProtocol": "IP_OVER_ETHERNET",
            "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "isDynamic": true}]}}]);
        let vnfc = |id: &str, vdu: &str, cp: &str| {
            serde_json::json!({"id": id, "vduId": vdu,
            "computeResource": {"resourceId": format!("vm-{id}"), "vimConnectionId": "vim1"},
            "vnfcCpInfo": [{"id": format!("{id}-cp"), "cpdId": cp, "cpProtocolInfo": dynamic}]})
        };
        serde_json::json!({"id": "vnf1",
            "vimConnectionInfo": {"vim1": {"vimId": "v", "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
                "interfaceInfo": {"endpoint": "http://ks/identity/v3"},
                "accessInfo": {"username": "nfv", "password": "s3cret-pw", "region": "RegionOne",
                               "project": "nfv", "projectDomain": "Default", "userDomain": "Default"}}},
            "instantiatedVnfInfo": {"vnfcResourceInfo": [vnfc("m1", "master", "m_CP"), vnfc("m2", "master", "m_CP"),
                vnfc("m3", "master", "m_CP"), vnfc("w1", "worker", "w_CP")]}})
    }

    fn ha_body() -> serde_json::Value {
        serde_json::json!({"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": {
            "script_path": "Scripts/install_k8s_cluster.sh",
            "master_node": {"vdu_id": "master", "ssh_cp_name": "m_CP", "cluster_cp_name": "vip_CP",
                            "cluster_fip_name": "vip_FIP", "username": "ubuntu", "password": "pw"},
            "worker_node": {"vdu_id": "worker", "ssh_cp_name": "w_CP", "username": "ubuntu", "password": "pw"}}}})
    }

    /// The ports of the stock instance's VMs: the masters allow the VIP.
    fn cloud_ports() -> Vec<u8> {
        use serde_json::json;
        let port = |id: &str, ip: &str, pairs: &[&str]| {
            json!({"id": format!("port-{id}"), "device_id": format!("vm-{id}"),
            "name": "", "network_id": "n", "fixed_ips": [{"ip_address": ip}],
            "allowed_address_pairs": pairs.iter().map(|a| json!({"ip_address": a})).collect::<Vec<_>>()})
        };
        let vip = ["10.0.0.100"];
        json!({"ports": [port("m1", "10.0.0.11", &vip), port("m2", "10.0.0.12", &vip), port("m3", "10.0.0.13", &vip),
            port("w1", "10.0.0.21", &[])]})
        .to_string()
        .into_bytes()
    }

    fn cloud() -> std::sync::Arc<crate::vim::fake::Fake> {
        use serde_json::json;
        std::sync::Arc::new(
            crate::vim::fake::Fake::default()
                .answer(
                    "http://ks/identity/v3/auth/tokens",
                    201,
                    Some("gAAAAABtoken-0123456789abcdef"),
                    json!({"token": {"catalog": [{"type": "network", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": "http://neutron:9696"}]}]}})
                    .to_string(),
                )
                .answer("http://neutron:9696/v2.0/ports?", 200, None, cloud_ports())
                .answer(
                    "http://neutron:9696/v2.0/floatingips",
                    200,
                    None,
                    json!({"floatingips": [{"port_id": "port-m1", "floating_ip_address": "192.0.2.11"}]}).to_string(),
                ),
        )
    }

    fn with_vim(
        f: &Fixture,
        inst: serde_json::Value,
        allowed: &[&str],
        http: &std::sync::Arc<crate::vim::fake::Fake>,
    ) -> Result<Prepared> {
        f.prepare_with(Op::InstantiateEnd, ha_body(), &[], |i| {
            i.inventory = None;
            i.vnf_instance_id = None;
            i.vnf_instance = Some(Doc::Inline { name: "vnf_instance".into(), value: inst.clone() });
            i.vim = crate::vim::Vim {
                allowed_auth_urls: allowed.iter().map(|s| s.to_string()).collect(),
                http: Some(http.clone()),
            };
        })
    }

    /// Issue 22: three masters, a worker and the VIP, none of them with an address in what
    /// stock Tacker records, found through the VIM entry's Keystone and Neutron.
    #[test]
    fn a_stock_tacker_instance_gets_its_nodes_and_vip_from_the_vim() {
        let f = Fixture::new(1, 1);
        let http = cloud();
        let p = with_vim(&f, stock_instance(), &["http://ks/identity/v3"], &http).unwrap();
        let t = &p.hook.topo;
        assert_eq!(t.master_ips(), "10.0.0.11,10.0.0.12,10.0.0.13");
        assert_eq!(t.masters[0].host.addr, "192.0.2.11", "a floating IP is where to log in");
        assert_eq!(t.workers[0].nic_ip, "10.0.0.21");
        assert_eq!(t.cluster_ip, "10.0.0.100", "the address every master's port allows");
        assert_eq!(t.cluster_fip, None, "no floating IP for a VIP without its own port");
        assert_eq!(http.requests().len(), 3, "a token, one ports call, one floating IPs call");
    }

    /// Precedence: an inventory, then the instance's addresses, then the cloud's.
    #[test]
    fn the_inventory_and_the_instances_addresses_come_before_the_vim() {
        let f = Fixture::new(1, 1);
        let http = cloud();
        let p = f.prepare_with(Op::InstantiateEnd, Fixture::instantiate_body(), &[], |i| {
            i.vnf_instance = Some(Doc::Inline { name: "vnf_instance".into(), value: stock_instance() });
            i.vim =
                crate::vim::Vim { allowed_auth_urls: vec!["http://ks/identity/v3".into()], http: Some(http.clone()) };
        });
        assert!(p.is_ok(), "{:?}", p.err());
        assert!(http.requests().is_empty(), "an inventory gives the nodes: the VIM is not asked");
        drop(p);
        let mut inst = stock_instance();
        inst["instantiatedVnfInfo"]["vnfcResourceInfo"][3]["vnfcCpInfo"][0]["cpProtocolInfo"][0]["ipOverEthernet"]
            ["ipAddresses"][0]["addresses"] = serde_json::json!(["10.9.9.21"]);
        let p = with_vim(&f, inst, &["http://ks/identity/v3"], &http).unwrap();
        assert_eq!(p.hook.topo.workers[0].nic_ip, "10.9.9.21", "the instance's own address wins");
        assert_eq!(p.hook.topo.masters[1].nic_ip, "10.0.0.12", "and the cloud fills in the rest");
        drop(p);
        let mut all = stock_instance();
        for (i, ip) in ["10.8.0.11", "10.8.0.12", "10.8.0.13", "10.8.0.21"].iter().enumerate() {
            all["instantiatedVnfInfo"]["vnfcResourceInfo"][i]["vnfcCpInfo"][0]["cpProtocolInfo"][0]["ipOverEthernet"]
                ["ipAddresses"][0]["addresses"] = serde_json::json!([ip]);
        }
        all["metadata"] = serde_json::json!({"mgmt_driver_addresses": {"m1": {"vip_CP": "10.8.0.100"}}});
        let before = http.requests().len();
        let p = with_vim(&f, all, &["http://ks/identity/v3"], &http).unwrap();
        assert_eq!(p.hook.topo.cluster_ip, "10.8.0.100");
        assert_eq!(http.requests().len(), before, "nothing missing: the VIM is not asked");
    }

    /// The tenant's endpoint is used only when the operator allowed it; without an OpenStack
    /// VIM entry the missing address is said as before.
    #[test]
    fn a_vim_the_operator_did_not_allow_is_never_asked() {
        let f = Fixture::new(1, 1);
        let http = cloud();
        let e = with_vim(&f, stock_instance(), &[], &http).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(m.contains("vimConnectionInfo.vim1.interfaceInfo.endpoint") && m.contains("--vim-auth-url"), "{m}");
        let e = with_vim(&f, stock_instance(), &["http://other/v3"], &http).err().unwrap().to_string();
        assert!(e.contains("is not a Keystone endpoint the operator allowed") && !e.contains("s3cret-pw"), "{e}");
        assert!(http.requests().is_empty());
        let mut no_vim = stock_instance();
        no_vim["vimConnectionInfo"] = serde_json::json!({});
        let e = with_vim(&f, no_vim, &["http://ks/identity/v3"], &http).err().unwrap().to_string();
        assert!(e.contains("no address for master_node.ssh_cp_name 'm_CP'"), "{e}");
    }

    /// A worker added by scale-out: Tacker records it with no address; scale_end finds it in
    /// the cloud and joins it (a plan: no state needed).
    #[test]
    fn a_scaled_out_worker_gets_its_address_from_the_vim() {
        let f = Fixture::new(1, 1);
        let http = cloud();
        let mut inst = stock_instance();
        let w2 = serde_json::json!({"id": "w2", "vduId": "worker", "computeResource": {"resourceId": "vm-w2"},
            "vnfcCpInfo": [{"id": "w2-cp", "cpdId": "w_CP"}]});
        inst["instantiatedVnfInfo"]["vnfcResourceInfo"].as_array_mut().unwrap().push(w2);
        let scale = serde_json::json!({"type": "SCALE_OUT", "aspectId": "worker", "numberOfSteps": 1,
            "additionalParams": ha_body()["additionalParams"].clone()});
        let port = serde_json::json!({"id": "port-w2", "device_id": "vm-w2", "name": "", "network_id": "n",
            "fixed_ips": [{"ip_address": "10.0.0.22"}]});
        let http = std::sync::Arc::new(
            std::sync::Arc::try_unwrap(http)
                .ok()
                .unwrap()
                .answer("http://neutron:9696/v2.0/ports?device_id=vm-m1&device_id=vm-m2&device_id=vm-m3&device_id=vm-w1&device_id=vm-w2",
                    200, None, {
                        let mut all: serde_json::Value = serde_json::from_slice(&cloud_ports()).unwrap();
                        all["ports"].as_array_mut().unwrap().push(port);
                        all.to_string()
                    }),
        );
        let p = f
            .prepare_with(Op::ScaleEnd, scale, &[], |i| {
                i.inventory = None;
                i.vnf_instance_id = None;
                i.dry_run = true;
                i.vnf_instance = Some(Doc::Inline { name: "vnf_instance".into(), value: inst.clone() });
                i.vim = crate::vim::Vim {
                    allowed_auth_urls: vec!["http://ks/identity/v3".into()],
                    http: Some(http.clone()),
                };
            })
            .unwrap();
        // No state in a plan: every worker counts as new; the one of interest is among them.
        assert!(p.targets.iter().any(|t| t == "w2"), "{:?}", p.targets);
        assert_eq!(p.hook.topo.find("w2").unwrap().nic_ip, "10.0.0.22");
    }
}
