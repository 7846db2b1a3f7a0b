//! Where Helm runs: `helm_info` from the first place that has it, the operator's flags first (a
//! vimConnectionInfo file, a cluster recorded by `instantiate-end`), then the request, then the
//! CNF's own record; and one target per master address, with credentials from the inventory
//! (matched by address) or from helm_info / the recorded cluster.
//!
//! A request cannot steer stored credentials, nor the conductor's own (issue 20: a tenant
//! reaches only its own clusters). When an operator's flag names the cluster, a request naming
//! other masters is refused (naming both). A credential kept in the state store
//! (`masternode_credential_ref`) is used for a request only when the reference carries the
//! token that binds it to the recorded cluster (`cluster/credential_ref.rs`): its owner's VIM
//! entry has it, a guess does not; an unknown cluster and a wrong token are refused with the
//! same words, so a refusal does not tell whether a cluster exists. A stored credential is only
//! ever sent to the master addresses and the user recorded with it. And a request written by a
//! VNFM's API user ([`Author::Tenant`]) never gets the conductor's ssh-agent for addresses it
//! chose. [`masters`] is the one place these are decided, before anything connects.

use serde_json::Value;

use crate::cluster::credential_ref;
use crate::cnf::helm_info::{self, HelmInfo};
use crate::cnf::ops::CnfState;
use crate::cnf::{Author, Inputs};
use crate::error::{Error, Result};
use crate::inventory::{Auth, Host, HostKeyCheck, Inventory, LoadOptions};
use crate::lifecycle::state::{check_instance_id, Store};
use crate::lifecycle::{Role, Target};
use crate::request::VimConnections;
use crate::secret::Secret;

/// Who chose where Helm runs: what a credential reference in it may open depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChosenBy {
    /// The operator's flag or option (`--vim-connection-info`, `--cluster-instance`,
    /// `options.cluster_instance`): the operator named the cluster.
    Operator,
    /// The operation's request (its vimConnectionInfo), whoever runs it.
    Request,
    /// The CNF's own record: what its instantiate found, and checked, then.
    Record,
}

/// helm_info as found: parsed, as given (recorded with the CNF), where (for messages) and who
/// chose it.
#[derive(Clone, Debug)]
pub struct Found {
    pub info: HelmInfo,
    pub json: Value,
    pub at: String,
    pub chosen_by: ChosenBy,
}

/// helm_info from the first place that has it.
pub fn find_helm_info(
    a: &Inputs,
    req_vims: Option<&VimConnections>,
    store: &Store,
    saved: Option<&CnfState>,
) -> Result<Found> {
    let req_at = match &a.request {
        Some(d) => format!("{} vimConnectionInfo", d.name()),
        None => "request vimConnectionInfo".to_string(),
    };
    let from_request = req_vims.and_then(|vc| from_conns(vc, &req_at, ChosenBy::Request)).transpose()?;
    let operator = operator_helm_info(a, store)?;
    match (operator, from_request) {
        (Some(op), Some(req)) if !same_masters(&op.info, &req.info) => {
            return Err(Error::input(
                &req.at,
                "extra.helm_info",
                format!(
                    "names masters {:?} (user {}), but {} names {:?} (user {}): the operator's flag wins; \
                     remove the request's helm_info or make them agree",
                    req.info.masternode_ip, req.info.username, op.at, op.info.masternode_ip, op.info.username
                ),
            ));
        }
        (Some(found), _) | (None, Some(found)) => return Ok(found),
        (None, None) => {}
    }
    if let Some(s) = saved {
        let json = s.params["__helm_info"].clone();
        if let Ok(info) = helm_info::parse(&json, "state") {
            return Ok(Found { info, json, at: "state".into(), chosen_by: ChosenBy::Record });
        }
    }
    Err(Error::input(
        "arguments",
        "--vim-connection-info",
        "where Helm runs is unknown: pass --vim-connection-info, --cluster-instance, \
         or a request whose vimConnectionInfo has extra.helm_info",
    ))
}

/// helm_info of the first entry of `vc` that has one.
fn from_conns(vc: &VimConnections, at: &str, chosen_by: ChosenBy) -> Option<Result<Found>> {
    vc.iter().find_map(|c| {
        let extra = c.extra.as_ref()?;
        let hi = extra.get("helm_info").or_else(|| extra.get("helmInfo"))?;
        Some(helm_info::parse(hi, at).map(|info| Found { info, json: hi.clone(), at: at.to_string(), chosen_by }))
    })
}

/// The same masters (as a set) and the same user.
fn same_masters(a: &HelmInfo, b: &HelmInfo) -> bool {
    let set = |h: &HelmInfo| h.masternode_ip.iter().cloned().collect::<std::collections::BTreeSet<_>>();
    set(a) == set(b) && a.username == b.username
}

/// helm_info from the operator's flags: `--vim-connection-info FILE`, else `--cluster-instance`.
fn operator_helm_info(a: &Inputs, store: &Store) -> Result<Option<Found>> {
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
        return from_conns(&vc, &p.display().to_string(), ChosenBy::Operator)
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
        return from_conns(&vc, &format!("--cluster-instance {cid}"), ChosenBy::Operator)
            .unwrap_or_else(|| Err(Error::input("--cluster-instance", cid.clone(), missing)))
            .map(Some);
    }
    Ok(None)
}

/// One Host per master address: from the inventory when it lists the address, else with
/// helm_info's (or the recorded cluster's) credentials. The one place that decides which
/// credentials a CNF operation may use: a request's credential reference must be bound to its
/// cluster ([`stored_credential`]), and an address no credential covers gets the conductor's
/// ssh-agent only when the operator chose it or runs the command ([`Author::Operator`]).
pub fn masters(f: &Found, a: &Inputs, store: &Store) -> Result<Vec<Target>> {
    let h = &f.info;
    let inv = a
        .inventory
        .as_ref()
        .map(|p| Inventory::load(p, &LoadOptions { credentials_from_request: true, ..a.inventory_opts.clone() }))
        .transpose()?;
    // A reference is checked even beside a password: a request never names a cluster it may not use.
    let stored = match &h.credential_ref {
        Some(r) => stored_credential(store, r, f)?,
        None => None,
    };
    let cred_pw: Option<Secret> = h.password.clone().map(Secret::new).or(stored);
    let agent_allowed = a.author == Author::Operator || f.chosen_by == ChosenBy::Operator;
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
                    None if agent_allowed => Auth { agent: true, ..Auth::default() },
                    None => {
                        return Err(Error::input(
                            &f.at,
                            "extra.helm_info.masternode_password",
                            format!(
                                "master {ip}: helm_info gives no masternode_password and no \
                                 masternode_credential_ref, and no inventory of the operator gives this \
                                 address a credential; a VNFM's request is never logged in with the \
                                 conductor's ssh-agent"
                            ),
                        ))
                    }
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

/// The field every refusal of a credential reference names.
const REF_FIELD: &str = "extra.helm_info.masternode_credential_ref";

/// The master password recorded with the cluster `reference` names, for `f`'s masters only.
/// A request's reference must carry the cluster's token (see [`bound_cluster`]); the operator's
/// flags and the CNF's own record name the cluster themselves. Whoever names it, a stored
/// credential goes to the addresses and the user it was recorded with, never elsewhere.
fn stored_credential(store: &Store, reference: &str, f: &Found) -> Result<Option<Secret>> {
    let refused = |why: &str| Error::input(&f.at, REF_FIELD, why.to_string());
    let Some(r) = credential_ref::parse(reference) else {
        return Err(refused(
            "is not a reference mgmt-driver wrote (mgmt-driver-state:<cluster id>:<token>, from the \
             cluster's instantiate response)",
        ));
    };
    let st = match f.chosen_by {
        ChosenBy::Request => bound_cluster(store, r).map_err(&refused)?,
        ChosenBy::Operator | ChosenBy::Record => recorded_cluster(store, r.cluster)?
            .ok_or_else(|| refused(&format!("no cluster is recorded under '{}'", crate::error::excerpt(r.cluster))))?,
    };
    let h = &f.info;
    let recorded = st.pointer("/vim_connection_info/extra/helm_info");
    let ips: Vec<&str> = recorded
        .and_then(|r| r.get("masternode_ip"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let user = recorded.and_then(|r| r.get("masternode_username")).and_then(Value::as_str);
    let foreign: Vec<&String> = h.masternode_ip.iter().filter(|ip| !ips.contains(&ip.as_str())).collect();
    if !foreign.is_empty() || user != Some(h.username.as_str()) {
        return Err(refused(&format!(
            "the credential recorded for cluster {} belongs to {}@{ips:?}; it is not sent to {}@{:?}",
            r.cluster,
            user.unwrap_or("?"),
            h.username,
            h.masternode_ip
        )));
    }
    // The password the masters really log in with, recorded since; older records have only
    // the request's.
    let login = st.get("master_login_password").and_then(Value::as_str);
    Ok(login.or_else(|| st.pointer("/params/master_node/password").and_then(Value::as_str)).map(Secret::new))
}

/// The recorded cluster a request's reference `r` opens: only with the token recorded with it.
/// Every way to fail but the form before tokens (which says nothing about any cluster) gives
/// the same words, and nothing else about the store: whether the cluster exists stays unsaid.
fn bound_cluster(store: &Store, r: credential_ref::Ref) -> std::result::Result<Value, &'static str> {
    const NOT_OURS: &str = "does not name a cluster this request may use (the reference is unknown, \
                            or its token is wrong): use the masternode_credential_ref the cluster's own \
                            instantiate response returned";
    let Some(token) = r.token else {
        return Err("has no token (the form written before tokens): a request's reference must \
                    carry the token its cluster's record holds; the cluster's next instantiate_end or \
                    heal_end returns one, or the operator names the cluster (--cluster-instance, \
                    options.cluster_instance)");
    };
    if check_instance_id(r.cluster).is_err() {
        return Err(NOT_OURS);
    }
    // A record that cannot be read is refused with the same words as an absent one.
    let st = recorded_cluster(store, r.cluster).ok().flatten().ok_or(NOT_OURS)?;
    let recorded = st.get("credential_ref_token").and_then(Value::as_str).unwrap_or_default();
    if credential_ref::token_matches(token, recorded) {
        Ok(st)
    } else {
        Err(NOT_OURS)
    }
}

/// A cluster recorded by `instantiate-end` under `id`, read as the stored document (the cluster
/// hooks own its format; Helm needs only its vimConnectionInfo and its master credential).
fn recorded_cluster(store: &Store, id: &str) -> Result<Option<Value>> {
    store.load_doc(id, "")
}

#[cfg(test)]
mod tests {
    //! A request must not be able to steer stored credentials (issue 9's high finding), nor use
    //! another tenant's cluster or the conductor's ssh-agent (issue 20).

    use serde_json::json;

    use super::*;

    const PW: &str = "s3cret-of-c1";
    const TOKEN: &str = "7d2c1b0a99887766554433221100ffeeddccbbaa99887766554433221100ffee";

    /// A store holding cluster `c1` as `instantiate-end` records it: masters .11 and .12 as
    /// root, the master password in its params, the credential reference bound by [`TOKEN`].
    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let doc = json!({"version": 1, "vnf_instance_id": "c1", "params": {"master_node": {"password": PW}},
            "credential_ref_token": TOKEN,
            "vim_connection_info": {"vimType": "kubernetes", "extra": {"helm_info": {
                "masternode_ip": ["192.0.2.11", "192.0.2.12"], "masternode_username": "root",
                "masternode_credential_ref": format!("mgmt-driver-state:c1:{TOKEN}")}}}});
        st.save_doc("c1", "", &doc).unwrap();
        (d, st)
    }

    fn good_ref() -> String {
        format!("mgmt-driver-state:c1:{TOKEN}")
    }

    fn request_vims_with(ips: &[&str], user: &str, reference: Option<&str>) -> VimConnections {
        let mut hi = json!({"masternode_ip": ips, "masternode_username": user});
        if let Some(r) = reference {
            hi["masternode_credential_ref"] = json!(r);
        }
        serde_json::from_value(json!([{"vimType": "kubernetes", "extra": {"helm_info": hi}}])).unwrap()
    }

    fn request_vims(ips: &[&str], user: &str) -> VimConnections {
        request_vims_with(ips, user, Some(&good_ref()))
    }

    fn passwords(t: &[Target]) -> Vec<Option<String>> {
        t.iter().map(|t| t.host.auth.password.as_ref().map(|p| p.expose().to_string())).collect()
    }

    /// `masters` for a request's vimConnectionInfo `vc` run with inputs `a`.
    fn targets(a: &Inputs, vc: &VimConnections, st: &Store) -> Result<Vec<Target>> {
        masters(&find_helm_info(a, Some(vc), st, None)?, a, st)
    }

    #[test]
    fn a_stored_credential_goes_only_to_the_masters_and_user_recorded_with_it() {
        let (_d, st) = store();
        let a = Inputs::default();
        // The recorded masters, named by the request with the cluster's reference: used.
        assert_eq!(
            passwords(&targets(&a, &request_vims(&["192.0.2.12"], "root"), &st).unwrap()),
            vec![Some(PW.into())]
        );
        // Another address, or another user: refused, naming both sides, before anything connects.
        for (ips, user) in [(vec!["192.0.2.11", "203.0.113.66"], "root"), (vec!["192.0.2.11"], "admin")] {
            let e = targets(&a, &request_vims(&ips, user), &st).expect_err("refused");
            let text = e.to_string();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(text.contains("masternode_credential_ref") && text.contains("192.0.2.12"), "{text}");
            assert!(text.contains(&format!("{user}@")) && !text.contains(PW), "{text}");
        }
    }

    #[test]
    fn a_requests_reference_opens_the_cluster_only_with_its_token() {
        let (_d, st) = store();
        let ips = ["192.0.2.11", "192.0.2.12"];
        for author in [Author::Tenant, Author::Operator] {
            let a = Inputs { author, ..Default::default() };
            let wrong = format!("mgmt-driver-state:c1:{}", "0".repeat(64));
            let unknown = format!("mgmt-driver-state:c9:{TOKEN}");
            let mut same = None;
            for (r, what) in [
                (wrong.as_str(), "a wrong token"),
                (unknown.as_str(), "an unknown cluster"),
                ("mgmt-driver-state:c1:", "an empty token"),
                ("mgmt-driver-state:../c1:x", "a path"),
            ] {
                let e = targets(&a, &request_vims_with(&ips, "root", Some(r)), &st).expect_err(what);
                assert_eq!(e.exit_code(), 2, "{what}: {e}");
                let text = e.to_string();
                assert!(text.contains("extra.helm_info.masternode_credential_ref"), "{what}: {text}");
                assert!(!text.contains(PW) && !text.contains(TOKEN) && !text.contains("192.0.2.1"), "{what}: {text}");
                // The same words whether the cluster exists or not.
                assert_eq!(same.get_or_insert_with(|| text.clone()), &text, "{what}");
            }
            // The form written before tokens, and a reference that is not ours: refused, saying why.
            let e = targets(&a, &request_vims_with(&ips, "root", Some("mgmt-driver-state:c1")), &st).unwrap_err();
            assert!(e.to_string().contains("has no token") && e.to_string().contains(REF_FIELD), "{e}");
            let e = targets(&a, &request_vims_with(&ips, "root", Some("vault:c1")), &st).unwrap_err();
            assert!(e.to_string().contains("is not a reference mgmt-driver wrote"), "{e}");
            // Even beside a password of the request's own.
            let mut vc = serde_json::to_value(request_vims_with(&ips, "root", Some(&wrong))).unwrap();
            vc[0]["extra"]["helm_info"]["masternode_password"] = json!("mine");
            let vc: VimConnections = serde_json::from_value(vc).unwrap();
            assert!(targets(&a, &vc, &st).unwrap_err().to_string().contains(REF_FIELD));
        }
    }

    #[test]
    fn the_operator_naming_the_cluster_needs_no_token_and_neither_does_the_cnfs_record() {
        let (_d, st) = store();
        // A cluster recorded before tokens: its record has the old reference and no token.
        let mut doc: Value = st.load_doc("c1", "").unwrap().unwrap();
        doc.as_object_mut().unwrap().remove("credential_ref_token");
        doc["vim_connection_info"]["extra"]["helm_info"]["masternode_credential_ref"] = json!("mgmt-driver-state:c1");
        st.save_doc("c1", "", &doc).unwrap();
        let a = Inputs { cluster_instance: Some("c1".into()), ..Default::default() };
        let found = find_helm_info(&a, None, &st, None).unwrap();
        assert_eq!(found.chosen_by, ChosenBy::Operator);
        assert_eq!(passwords(&masters(&found, &a, &st).unwrap()), vec![Some(PW.into()), Some(PW.into())]);
        // The CNF's own record, written when its instantiate was checked.
        let saved = CnfState {
            params: json!({"__helm_info": doc["vim_connection_info"]["extra"]["helm_info"]}),
            ..Default::default()
        };
        let a = Inputs::default();
        let found = find_helm_info(&a, None, &st, Some(&saved)).unwrap();
        assert_eq!(found.chosen_by, ChosenBy::Record);
        assert_eq!(passwords(&masters(&found, &a, &st).unwrap()), vec![Some(PW.into()), Some(PW.into())]);
        // A request repeating that old reference: refused.
        let old = request_vims_with(&["192.0.2.11"], "root", Some("mgmt-driver-state:c1"));
        assert!(targets(&a, &old, &st).unwrap_err().to_string().contains("has no token"));
    }

    #[test]
    fn a_tenants_request_never_gets_the_conductors_ssh_agent() {
        let (_d, st) = store();
        let bare = request_vims_with(&["203.0.113.5"], "ubuntu", None);
        let e = targets(&Inputs::default(), &bare, &st).expect_err("refused");
        assert_eq!(e.exit_code(), 2);
        let text = e.to_string();
        assert!(text.contains("extra.helm_info.masternode_password") && text.contains("203.0.113.5"), "{text}");
        assert!(text.contains("ssh-agent"), "{text}");
        // The operator's own command line keeps the agent, as ssh would.
        let a = Inputs { author: Author::Operator, ..Default::default() };
        let t = targets(&a, &bare, &st).unwrap();
        assert!(t[0].host.auth.agent && t[0].host.auth.password.is_none());
        // A tenant's own password: used.
        let mut v = serde_json::to_value(&bare).unwrap();
        v[0]["extra"]["helm_info"]["masternode_password"] = json!("mine");
        let own: VimConnections = serde_json::from_value(v).unwrap();
        assert_eq!(passwords(&targets(&Inputs::default(), &own, &st).unwrap()), vec![Some("mine".into())]);
        // An operator's inventory giving the address a credential: used.
        let d = tempfile::tempdir().unwrap();
        let inv = d.path().join("inv.yaml");
        std::fs::write(&inv, "groups:\n  m:\n    - {name: m1, ssh_ip: 203.0.113.5, user: ubuntu, password: inv-pw}\n")
            .unwrap();
        let a = Inputs { inventory: Some(inv), ..Default::default() };
        assert_eq!(passwords(&targets(&a, &bare, &st).unwrap()), vec![Some("inv-pw".into())]);
    }

    #[test]
    fn the_recorded_login_password_beats_the_requests() {
        let (_d, st) = store();
        let mut doc: Value = st.load_doc("c1", "").unwrap().unwrap();
        doc["master_login_password"] = json!("the-inventory-password");
        st.save_doc("c1", "", &doc).unwrap();
        let a = Inputs::default();
        assert_eq!(
            passwords(&targets(&a, &request_vims(&["192.0.2.11"], "root"), &st).unwrap()),
            vec![Some("the-inventory-password".to_string())]
        );
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
        let f = find_helm_info(&a, Some(&agreeing), &st, None).unwrap();
        assert_eq!(
            (f.info.masternode_ip.len(), f.at.as_str(), f.chosen_by),
            (2, "--cluster-instance c1", ChosenBy::Operator)
        );
        // Without the flag the request's own helm_info is what there is.
        let f = find_helm_info(&Inputs::default(), Some(&hostile), &st, None).unwrap();
        assert_eq!(
            (f.info.masternode_ip[0].as_str(), f.at.as_str(), f.chosen_by),
            ("203.0.113.66", "request vimConnectionInfo", ChosenBy::Request)
        );
    }
}
