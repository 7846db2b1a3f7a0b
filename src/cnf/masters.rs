//! Where Helm runs: `helm_info` from the first place that has it (a vimConnectionInfo file, the
//! request, a cluster recorded by `instantiate-end`, or the CNF's own record), and one target
//! per master address, with credentials from the inventory (matched by address) or from
//! helm_info / the recorded cluster.

use serde_json::Value;

use crate::cnf::helm_info::{self, HelmInfo};
use crate::cnf::ops::CnfState;
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::inventory::{Auth, Host, HostKeyCheck, Inventory, LoadOptions};
use crate::lifecycle::request::VimConnections;
use crate::lifecycle::state::Store;
use crate::lifecycle::{Role, Target};
use crate::secret::Secret;

/// helm_info from the first place that has it.
pub fn find_helm_info(
    a: &Inputs,
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
        let st = recorded_cluster(store, cid)?
            .ok_or_else(|| Error::input("--cluster-instance", cid.clone(), "no cluster recorded under this id"))?;
        let conn = st.get("vim_connection_info").filter(|v| !v.is_null()).cloned().ok_or_else(|| {
            Error::input("--cluster-instance", cid.clone(), "the cluster has no vimConnectionInfo yet")
        })?;
        let vc =
            VimConnections::List(vec![serde_json::from_value(conn)
                .map_err(|e| Error::input("state", "vim_connection_info", e.to_string()))?]);
        let missing = "helm_info is missing in vim_connection_info.extra. \
                       (was the cluster installed with helm_installation_script_path?)";
        return from_conns(&vc, &format!("cluster {cid}"))
            .unwrap_or_else(|| Err(Error::input("--cluster-instance", cid.clone(), missing)));
    }
    if let Some(Ok(h)) = saved.map(|s| helm_info::parse(&s.params["__helm_info"], "state")) {
        return Ok((h, saved.expect("some").params["__helm_info"].clone(), "state".into()));
    }
    Err(Error::input(
        "arguments",
        "--vim-connection-info",
        "where Helm runs is unknown: pass --vim-connection-info, --cluster-instance, \
         or a request whose vimConnectionInfo has extra.helm_info",
    ))
}

/// One Host per master address: from the inventory when it lists the address, else with
/// helm_info's (or the recorded cluster's) credentials.
pub fn masters(h: &HelmInfo, a: &Inputs, store: &Store) -> Result<Vec<Target>> {
    let inv = a
        .inventory
        .as_ref()
        .map(|p| Inventory::load(p, &LoadOptions { credentials_from_request: true, ..a.inventory_opts.clone() }))
        .transpose()?;
    let cred_pw: Option<Secret> = match (&h.password, &h.credential_ref) {
        (Some(p), _) => Some(Secret::new(p.clone())),
        (None, Some(r)) => match r.strip_prefix("mgmt-driver-state:") {
            Some(cid) => recorded_cluster(store, cid)?
                .and_then(|s| s.pointer("/params/master_node/password").and_then(Value::as_str).map(Secret::new)),
            None => None,
        },
        _ => None,
    };
    let known_hosts = a.known_hosts.clone().unwrap_or_else(|| store.dir().join("known_hosts"));
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
        out.push(Target::new(host, Role::Master));
    }
    Ok(out)
}

/// A cluster recorded by `instantiate-end` under `id`, read as the stored document (the cluster
/// hooks own its format; Helm needs only its vimConnectionInfo and its master credential).
fn recorded_cluster(store: &Store, id: &str) -> Result<Option<Value>> {
    store.load_doc(id, "")
}
