//! Where Helm runs: `helm_info` from the first place that has it, the operator's flags first (a
//! vimConnectionInfo file, a cluster recorded by `instantiate-end`), then the request, then the
//! CNF's own record; and one target per master address, with credentials from the inventory
//! (matched by address) or from helm_info / the recorded cluster.
//!
//! A request cannot steer stored credentials: when an operator's flag names the cluster, a
//! request naming other masters is refused (naming both), and a credential kept in the state
//! store (`masternode_credential_ref`) is only ever sent to the master addresses and the user
//! recorded with it.

use serde_json::Value;

use crate::cnf::helm_info::{self, HelmInfo};
use crate::cnf::ops::CnfState;
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::inventory::{Auth, Host, HostKeyCheck, Inventory, LoadOptions};
use crate::lifecycle::state::Store;
use crate::lifecycle::{Role, Target};
use crate::request::VimConnections;
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
    let from_request = req_vims.and_then(|vc| from_conns(vc, "request vimConnectionInfo")).transpose()?;
    let operator = operator_helm_info(a, store, &from_conns)?;
    match (operator, from_request) {
        (Some((op, _, at)), Some((req, _, _))) if !same_masters(&op, &req) => {
            return Err(Error::input(
                "request vimConnectionInfo",
                "extra.helm_info",
                format!(
                    "names masters {:?} (user {}), but {at} names {:?} (user {}): the operator's flag wins; \
                     remove the request's helm_info or make them agree",
                    req.masternode_ip, req.username, op.masternode_ip, op.username
                ),
            ));
        }
        (Some(found), _) | (None, Some(found)) => return Ok(found),
        (None, None) => {}
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

type Found = (HelmInfo, Value, String);

/// The same masters (as a set) and the same user.
fn same_masters(a: &HelmInfo, b: &HelmInfo) -> bool {
    let set = |h: &HelmInfo| h.masternode_ip.iter().cloned().collect::<std::collections::BTreeSet<_>>();
    set(a) == set(b) && a.username == b.username
}

/// helm_info from the operator's flags: `--vim-connection-info FILE`, else `--cluster-instance`.
fn operator_helm_info(
    a: &Inputs,
    store: &Store,
    from_conns: &dyn Fn(&VimConnections, &str) -> Option<Result<Found>>,
) -> Result<Option<Found>> {
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
        return from_conns(&vc, &p.display().to_string())
            .unwrap_or_else(|| {
                Err(Error::input(
                    p.display().to_string(),
                    "extra.helm_info",
                    "helm_info is missing in vim_connection_info.extra.",
                ))
            })
            .map(Some);
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
        return from_conns(&vc, &format!("--cluster-instance {cid}"))
            .unwrap_or_else(|| Err(Error::input("--cluster-instance", cid.clone(), missing)))
            .map(Some);
    }
    Ok(None)
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
            Some(cid) => stored_credential(store, cid, h)?,
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

/// The master password recorded with cluster `cid`, for `h`'s masters only: a stored credential
/// goes to the addresses and the user it was recorded with, never elsewhere, whoever names it.
fn stored_credential(store: &Store, cid: &str, h: &HelmInfo) -> Result<Option<Secret>> {
    let field = "extra.helm_info.masternode_credential_ref";
    let Some(st) = recorded_cluster(store, cid)? else {
        return Err(Error::input(field, format!("mgmt-driver-state:{cid}"), "no cluster is recorded under this id"));
    };
    let recorded = st.pointer("/vim_connection_info/extra/helm_info");
    let ips: Vec<&str> = recorded
        .and_then(|r| r.get("masternode_ip"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let user = recorded.and_then(|r| r.get("masternode_username")).and_then(Value::as_str);
    let foreign: Vec<&String> = h.masternode_ip.iter().filter(|ip| !ips.contains(&ip.as_str())).collect();
    if !foreign.is_empty() || user != Some(h.username.as_str()) {
        return Err(Error::input(
            field,
            format!("mgmt-driver-state:{cid}"),
            format!(
                "the credential recorded for cluster {cid} belongs to {}@{ips:?}; it is not sent to {}@{:?}",
                user.unwrap_or("?"),
                h.username,
                h.masternode_ip
            ),
        ));
    }
    // The password the masters really log in with, recorded since; older records have only
    // the request's.
    let login = st.get("master_login_password").and_then(Value::as_str);
    Ok(login.or_else(|| st.pointer("/params/master_node/password").and_then(Value::as_str)).map(Secret::new))
}

/// A cluster recorded by `instantiate-end` under `id`, read as the stored document (the cluster
/// hooks own its format; Helm needs only its vimConnectionInfo and its master credential).
fn recorded_cluster(store: &Store, id: &str) -> Result<Option<Value>> {
    store.load_doc(id, "")
}

#[cfg(test)]
mod tests {
    //! A request must not be able to steer stored credentials (issue 9's high finding).

    use serde_json::json;

    use super::*;

    const PW: &str = "s3cret-of-c1";

    /// A store holding cluster `c1` as `instantiate-end` records it: masters .11 and .12 as
    /// root, the master password in its params.
    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let doc = json!({"version": 1, "vnf_instance_id": "c1", "params": {"master_node": {"password": PW}},
            "vim_connection_info": {"vimType": "kubernetes", "extra": {"helm_info": {
                "masternode_ip": ["192.0.2.11", "192.0.2.12"], "masternode_username": "root",
                "masternode_credential_ref": "mgmt-driver-state:c1"}}}});
        st.save_doc("c1", "", &doc).unwrap();
        (d, st)
    }

    fn request_vims(ips: &[&str], user: &str) -> VimConnections {
        serde_json::from_value(json!([{"vimType": "kubernetes", "extra": {"helm_info": {
            "masternode_ip": ips, "masternode_username": user,
            "masternode_credential_ref": "mgmt-driver-state:c1"}}}]))
        .unwrap()
    }

    fn passwords(t: &[Target]) -> Vec<Option<String>> {
        t.iter().map(|t| t.host.auth.password.as_ref().map(|p| p.expose().to_string())).collect()
    }

    #[test]
    fn a_stored_credential_goes_only_to_the_masters_and_user_recorded_with_it() {
        let (_d, st) = store();
        let a = Inputs::default();
        // The recorded masters, named by the request: the credential is used.
        let (h, _, _) = find_helm_info(&a, Some(&request_vims(&["192.0.2.12"], "root")), &st, None).unwrap();
        assert_eq!(passwords(&masters(&h, &a, &st).unwrap()), vec![Some(PW.to_string())]);
        // Another address, or another user: refused, naming both sides, before anything connects.
        for (ips, user) in [(vec!["192.0.2.11", "203.0.113.66"], "root"), (vec!["192.0.2.11"], "admin")] {
            let (h, _, _) = find_helm_info(&a, Some(&request_vims(&ips, user)), &st, None).unwrap();
            let e = masters(&h, &a, &st).expect_err("refused");
            let text = e.to_string();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(text.contains("masternode_credential_ref") && text.contains("192.0.2.12"), "{text}");
            assert!(text.contains(&format!("{user}@")) && !text.contains(PW), "{text}");
        }
    }

    #[test]
    fn the_recorded_login_password_beats_the_requests() {
        let (_d, st) = store();
        let mut doc: Value = st.load_doc("c1", "").unwrap().unwrap();
        doc["master_login_password"] = json!("the-inventory-password");
        st.save_doc("c1", "", &doc).unwrap();
        let a = Inputs::default();
        let (h, _, _) = find_helm_info(&a, Some(&request_vims(&["192.0.2.11"], "root")), &st, None).unwrap();
        assert_eq!(passwords(&masters(&h, &a, &st).unwrap()), vec![Some("the-inventory-password".to_string())]);
    }

    #[test]
    fn the_operators_cluster_flag_beats_the_request_and_a_mismatch_names_both() {
        let (_d, st) = store();
        let a = Inputs { cluster_instance: Some("c1".into()), ..Default::default() };
        let hostile = request_vims(&["203.0.113.66"], "root");
        let e = find_helm_info(&a, Some(&hostile), &st, None).expect_err("refused").to_string();
        assert!(e.contains("203.0.113.66") && e.contains("192.0.2.11") && e.contains("--cluster-instance c1"), "{e}");
        // The same masters in another order: the operator's record is used.
        let agreeing = request_vims(&["192.0.2.12", "192.0.2.11"], "root");
        let (h, _, from) = find_helm_info(&a, Some(&agreeing), &st, None).unwrap();
        assert_eq!((h.masternode_ip.len(), from.as_str()), (2, "--cluster-instance c1"));
        // Without the flag the request's own helm_info is what there is.
        let (h, _, from) = find_helm_info(&Inputs::default(), Some(&hostile), &st, None).unwrap();
        assert_eq!((h.masternode_ip[0].as_str(), from.as_str()), ("203.0.113.66", "request vimConnectionInfo"));
    }
}
