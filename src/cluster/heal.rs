//! `heal_start` / `heal_end`.
//!
//! SOL002 (named VNFCs):
//! - master, start: refuse when it is the only master; take its backend out of haproxy on the
//!   survivors (and reload); delete its Node and its etcd member, found by exact name.
//! - worker, start: drain with a bounded wait, check, delete the Node.
//! - end: a fresh token (and certificate key for a master) from a survivor; scripts, hosts and
//!   install on the new VM; for a master, Helm, the charts and repos of a survivor (over our own
//!   connections, no sshpass), and its haproxy backend back on every survivor, reloaded.
//!
//! SOL003 (whole VNF): start forgets the VIM record and every node; end is a full instantiate.
//! Tacker's grant names the replaced servers by their old ids at both hooks: heal_start records
//! each one's address under that id, so heal_end finds the replacement (`healing.rs`).

use crate::cluster::drain::remove_from_cluster;
use crate::cluster::hook::Hook;
use crate::cluster::instantiate;
use crate::cluster::labels_apply;
use crate::cluster::members::{installed_masters, k8s_name_of};
use crate::cluster::node_cmd::{self as cmd, InstallMode};
use crate::cluster::prepare_nodes::{self, prepare_nodes};
use crate::cluster::state::InstanceState;
use crate::cluster::topology::ClusterNode;
use crate::error::{Error, Result};
use crate::facts::etcd::EtcdMember;
use crate::facts::helm::{ChartsPacked, RepoListToCopy};
use crate::lifecycle::all_ok;
use crate::lifecycle::Role;
use crate::secret::Secret;
use crate::transport::{Source, UploadFile};

pub async fn start(h: &Hook, targets: &[&ClusterNode], whole: bool) -> Result<()> {
    if whole {
        h.rt.phase::<ClusterNode>("heal (whole VNF): forget the VIM record and the nodes", &[], false);
        h.with_state(InstanceState::forget_cluster);
        h.forget_vim_connection();
        return h.save();
    }
    // What prepare learned of the targets (their addresses), for heal_end: first, so a node
    // taken out below can always be found again.
    h.save()?;
    crate::cluster::storage_ops::heal_start(h).await?;
    for t in targets {
        let survivors: Vec<&ClusterNode> = installed_masters(h).into_iter().filter(|m| m.name() != t.name()).collect();
        let k = k8s_name_of(h, t)?;
        if !h.installed(t) {
            // A repeated heal-start: this node was already taken out.
            h.outcome(t, format!("already removed from the cluster ({k})"));
            continue;
        }
        match t.role {
            Role::Master => remove_master(h, t, &survivors, &k).await?,
            Role::Worker | Role::Node => {
                let masters = installed_masters(h);
                let via = h.rt.first_reachable(&masters).await?;
                h.rt.phase("heal worker: drain and delete", &[t], false);
                let r = remove_from_cluster(h, via, &k, t).await;
                h.rt.done(t, &r);
                r?;
            }
        }
        h.with_state(|s| {
            let n = s.node(t.name());
            n.installed = false;
            n.helm_installed = false;
            n.prepared_secret_digest = None;
        });
        h.save()?;
        h.outcome(t, format!("removed from the cluster ({k})"));
    }
    Ok(())
}

/// Take a master out: its haproxy backend off every survivor, then its Node and its etcd member
/// (found by exact name) via the first survivor that answers.
async fn remove_master(h: &Hook, t: &ClusterNode, survivors: &[&ClusterNode], k: &str) -> Result<()> {
    if survivors.is_empty() {
        return Err(Error::input(
            h.req_file(),
            "vnfcInstanceId",
            format!(
                "{} is the only master; a single-master cluster cannot heal a master (heal the whole VNF instead)",
                t.name()
            ),
        ));
    }
    h.rt.phase("heal master: haproxy backends on the survivors", survivors, true);
    let t_cmd = h.rt.timeouts.command;
    let res = h.rt.each(survivors, |m| async move {
        h.rt.exec(m, h.rt.root_cmd(m, cmd::haproxy_backend(k, None)?, t_cmd)).await.map(|_| ())
    });
    all_ok(res.await)?;
    let via = h.rt.first_reachable(survivors).await?;
    let via_k8s = k8s_name_of(h, via)?;
    h.rt.phase("heal master: delete node and etcd member", &[via], false);
    h.rt.exec(via, h.rt.root_cmd(via, cmd::delete_node(k)?, t_cmd)).await?;
    match h.rt.read(via, &EtcdMember { survivor: &via_k8s, name: k }).await? {
        Some(id) => {
            h.rt.exec(via, h.rt.root_cmd(via, cmd::etcd_remove(&via_k8s, &id)?, t_cmd)).await?;
        }
        None => h.outcome(t, "no etcd member left to remove"),
    }
    Ok(())
}

pub async fn end(h: &Hook, targets: &[&ClusterNode], whole: bool) -> Result<serde_json::Value> {
    if whole {
        return instantiate::run(h).await;
    }
    if targets.is_empty() && h.storage.as_ref().is_some_and(|s| s.healed) {
        // Only the storage server was healed: the cluster is not touched.
        crate::cluster::storage_ops::heal_end(h, &[]).await?;
        return Ok(serde_json::Value::Null);
    }
    let survivors: Vec<&ClusterNode> =
        installed_masters(h).into_iter().filter(|m| !targets.iter().any(|t| t.name() == m.name())).collect();
    let via = h.rt.first_reachable(&survivors).await?;
    let token = h.join_token(via).await?;
    let hash = h.ca_hash()?;
    // The VNFM replaced these VMs: reinstall them whatever the state says (our install script
    // is a no-op on a node that already joined, so a re-run after a later failure is safe).
    let todo: Vec<&ClusterNode> = targets.to_vec();
    // A fresh VM has no Helm either, even when heal-start was never called.
    h.with_state(|s| {
        for t in &todo {
            s.node(t.name()).helm_installed = false;
        }
    });
    // Every other node learns the healed node's (possibly new) address (left alone when it
    // has it already); a healed worker prepares and rejoins in one node program meanwhile; a
    // healed master does too, after them, one at a time, each with a fresh certificate key.
    let others: Vec<&ClusterNode> = h.topo.all().filter(|n| !todo.iter().any(|t| t.name() == n.name())).collect();
    let masters: Vec<&ClusterNode> = todo.iter().copied().filter(|t| t.role == Role::Master).collect();
    let workers: Vec<&ClusterNode> = todo.iter().copied().filter(|t| t.role != Role::Master).collect();
    let prepare = prepare_nodes(h, &others);
    let rejoin_workers = async {
        if workers.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = workers.iter().map(|w| w.name()).collect();
        h.rt.phase(&format!("heal: reinstall {}", names.join(", ")), &workers, true);
        let res =
            h.rt.each(&workers, |t| {
                let token = &token;
                let hash = &hash;
                async move {
                    let p = prepare_nodes::prep(h, t, true)?;
                    h.install(t, InstallMode::Worker, Some((token, hash)), None, Some(p)).await
                }
            })
            .await;
        all_ok(res).map(|_| ())
    };
    let rejoin = async {
        rejoin_workers.await?;
        labels_apply::apply(h, via, &workers).await?;
        for t in &workers {
            h.outcome(t, "rejoined as worker");
        }
        for t in &masters {
            h.rt.phase(&format!("heal: reinstall {}", t.name()), &[t], false);
            rejoin_master(h, t, via, &survivors, &token, &hash).await?;
        }
        Ok::<(), Error>(())
    };
    let (prepared, rejoined) = tokio::join!(prepare, rejoin);
    rejoined?;
    prepared?;
    crate::cluster::storage_ops::heal_end(h, &todo).await?;
    // helm_info lists the masters' current addresses (Tacker never updated it).
    let bearer = h.with_state(|s| s.bearer_token.clone()).map(Secret::new).unwrap_or_else(|| Secret::new(""));
    if h.with_state(|s| s.vim.is_some()) {
        return h.write_record(&bearer);
    }
    Ok(serde_json::Value::Null)
}

/// A healed master joins again through the survivor `via`: a fresh certificate key, the
/// install (in one node program with its prepare steps), its haproxy backend back on every survivor (reloaded), Helm, and `via`'s charts and
/// repositories.
async fn rejoin_master(
    h: &Hook,
    t: &ClusterNode,
    via: &ClusterNode,
    survivors: &[&ClusterNode],
    token: &Secret,
    hash: &str,
) -> Result<()> {
    let key = h.certificate_key(via).await?;
    let p = prepare_nodes::prep(h, t, true)?;
    h.install(t, InstallMode::JoinMaster, Some((token, hash)), Some(&key), Some(p)).await?;
    let k = k8s_name_of(h, t)?;
    h.rt.phase("heal master: haproxy backend back on the survivors", survivors, true);
    let ip = t.nic_ip.clone();
    let res =
        h.rt.each(survivors, |m| {
            let (k, ip) = (&k, &ip);
            async move {
                h.rt.exec(m, h.rt.root_cmd(m, cmd::haproxy_backend(k, Some(ip))?, h.rt.timeouts.command))
                    .await
                    .map(|_| ())
            }
        })
        .await;
    all_ok(res)?;
    instantiate::install_helm(h, &[t]).await?;
    if h.params.helm_script_path.is_some() {
        restore_helm(h, via, t).await?;
    }
    h.outcome(t, "rejoined as master");
    Ok(())
}

/// Copy the chart root and the repository list from a survivor to a healed master.
///
/// The archive travels through a private directory on this machine (`tempfile`: mode 0700, an
/// unpredictable name, removed when done; the transport downloads to a file, it has no stream
/// from one node to another) and is deleted on the survivor once downloaded. On the healed
/// master `unpack_charts.sh` puts only plain files and directories under /var/tacker/helm. The
/// repository list is checked entry by entry (`parse_repo_list`) before any `helm repo add`.
async fn restore_helm(h: &Hook, from: &ClusterNode, to: &ClusterNode) -> Result<()> {
    h.rt.phase("heal master: restore Helm charts and repositories", &[from, to], false);
    if h.rt.read(from, &ChartsPacked { run_dir: &h.run_dir }).await? {
        let tmp = tempfile::tempdir().map_err(|e| Error::input("temp dir", "TMPDIR", e.to_string()))?;
        let local = tmp.path().join("helm-charts.tgz");
        let remote = cmd::charts_archive(&h.run_dir);
        let got = h.rt.download(from, &remote, &local).await;
        let discard = h.rt.root_cmd(from, cmd::discard_charts_archive(&h.run_dir)?, h.rt.timeouts.command);
        let discarded = h.rt.exec(from, discard).await;
        got?;
        discarded?;
        let archive = UploadFile { source: Source::Path(local), remote, mode: 0o600 };
        h.rt.upload(to, vec![archive]).await?;
        h.rt.exec(to, h.rt.root_cmd(to, cmd::unpack_charts(&h.run_dir)?, h.rt.timeouts.helm)).await?;
    }
    for (name, url) in h.rt.read(from, &RepoListToCopy).await? {
        h.rt.exec(to, h.rt.root_cmd(to, cmd::helm_repo_add(&name, &url)?, h.rt.timeouts.command)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::cluster::prepare::Op;
    use crate::cluster::testkit::{position, Fixture};

    fn heal(ids: &[&str]) -> serde_json::Value {
        json!({"vnfcInstanceId": ids})
    }

    #[tokio::test]
    async fn master_heal_edits_haproxy_on_survivors_then_removes_node_and_etcd_member() {
        let f = Fixture::new(3, 1);
        f.instantiate().await;
        f.fake.reply(
            None,
            "member list",
            "8e9e05c52164694d, started, master11, https://x\n1a2b, started, master13, https://y\n",
        );
        let before = f.execs().len();
        let o = f.run(Op::HealStart, heal(&["m3"]), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        let haproxy = ["m1", "m2"].map(|m| position(e, m, "haproxy").expect("backend edited on every survivor"));
        assert!(position(e, "m3", "haproxy").is_none(), "{e:#?}");
        let del = position(e, "m1", "delete_node.sh master13").expect("node deleted via the first survivor");
        let rm = position(e, "m1", "member remove 1a2b").expect("the healed master's member removed, by exact name");
        assert!(haproxy.iter().all(|&h| h < del) && del < rm, "{e:#?}");
        assert_eq!(f.state()["nodes"]["m3"]["installed"], false);
        // A repeated heal-start (VNFMs retry hooks) finds it already removed and runs nothing.
        let before = f.execs().len();
        let o = f.run(Op::HealStart, heal(&["m3"]), &[]).await;
        assert!(o.error.is_none() && f.execs().len() == before, "{:?} {:#?}", o.error, &f.execs()[before..]);
        assert!(o.result["nodes"][0]["outcome"].as_str().unwrap().starts_with("already removed"));
    }

    #[tokio::test]
    async fn a_member_id_that_is_not_hex_is_unreadable_and_nothing_is_removed() {
        let f = Fixture::new(3, 1);
        f.instantiate().await;
        f.fake.reply(None, "member list", "1a2b; reboot, started, master13, https://y\n");
        let o = f.run(Op::HealStart, heal(&["m3"]), &[]).await;
        let e = o.error.expect("refused");
        assert_eq!(e.kind(), "unreadable", "{e}");
        assert!(e.to_string().starts_with("m1: cannot read the etcd member list"), "{e}");
        assert!(!f.execs().iter().any(|x| x.contains("member remove")), "{:#?}", f.execs());
    }

    #[tokio::test]
    async fn a_recorded_name_that_is_not_a_dns_name_reaches_no_command() {
        let f = Fixture::new(3, 1);
        f.instantiate().await;
        f.edit_state(|s| s["nodes"]["m3"]["k8s_name"] = "master13\\n    server evil 6.6.6.6:6443".into());
        let before = f.execs().len();
        let o = f.run(Op::HealStart, heal(&["m3"]), &[]).await;
        let e = o.error.expect("refused").to_string();
        assert!(e.contains("nodes.m3.k8s_name") && e.contains("not a DNS host name"), "{e}");
        assert_eq!(f.execs().len(), before, "{:#?}", &f.execs()[before..]);
    }

    #[tokio::test]
    async fn master_heal_end_copies_charts_through_a_checked_unpack_and_checked_repos() {
        let f = Fixture::new(3, 1);
        f.instantiate().await;
        assert!(f.run(Op::HealStart, heal(&["m3"]), &[]).await.error.is_none());
        f.fake.reply(None, "helm_repo_list.sh", r#"[{"name":"bitnami","url":"https://charts.bitnami.com/bitnami"}]"#);
        let before = f.execs().len();
        let o = f.run(Op::HealEnd, heal(&["m3"]), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        let pack = position(e, "m1", "pack_charts.sh").expect("packed on a survivor");
        let discard = position(e, "m1", "rm -f -- .mgmt-driver/run/vnf1/helm-charts.tgz").expect("survivor copy gone");
        let unpack = position(e, "m3", "unpack_charts.sh").expect("unpacked on the healed master");
        let add = position(e, "m3", "helm repo add --force-update -- bitnami https://charts.bitnami.com/bitnami");
        assert!(pack < discard && discard < unpack && Some(unpack) < add, "{e:#?}");

        // A survivor whose repository list could steer the healed master's helm: refused, unread.
        f.fake.reply(None, "helm_repo_list.sh", r#"[{"name":"x","url":"https://h --insecure-skip-tls-verify"}]"#);
        f.edit_state(|s| s["nodes"]["m3"]["helm_installed"] = false.into());
        let before = f.execs().len();
        let o = f.run(Op::HealEnd, heal(&["m3"]), &[]).await;
        let err = o.error.expect("refused");
        assert_eq!(err.kind(), "unreadable", "{err}");
        assert!(err.to_string().contains("the Helm repository list") && err.to_string().contains("m1"), "{err}");
        assert!(!f.execs()[before..].iter().any(|x| x.contains("helm repo add")), "{:#?}", &f.execs()[before..]);

        // Output that is neither `packed` nor `none` is not taken for either.
        f.fake.reply(None, "pack_charts.sh", "tar: warning\npacked\n");
        let o = f.run(Op::HealEnd, heal(&["m3"]), &[]).await;
        let err = o.error.expect("refused").to_string();
        assert!(err.contains("whether charts were packed") && err.contains("neither"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_survivor_stops_a_master_heal_before_anything_is_deleted() {
        let f = Fixture::new(3, 1);
        f.instantiate().await;
        f.fake.down("m1");
        let rt_fresh = f.execs().len();
        let o = f.run(Op::HealStart, heal(&["m3"]), &[]).await;
        let e = o.error.expect("m1 is down").to_string();
        assert!(e.contains("m1") && e.contains("no route to host"), "{e}");
        assert!(!f.execs()[rt_fresh..].iter().any(|x| x.contains("delete_node.sh")), "{:#?}", &f.execs()[rt_fresh..]);
        assert_eq!(f.state()["nodes"]["m3"]["installed"], true, "the node must stay recorded");
    }

    #[tokio::test]
    async fn the_only_master_cannot_be_healed_and_nothing_runs() {
        let f = Fixture::new(1, 1);
        f.instantiate().await;
        let before = f.execs().len();
        let o = f.run(Op::HealStart, heal(&["m1"]), &[]).await;
        let e = o.error.expect("refused");
        assert!(e.to_string().contains("only master") && e.exit_code() == 2, "{e}");
        assert_eq!(f.execs().len(), before);
    }

    /// Tacker v2 heals `worker-srv-w1` by replacing server srv-w1 with srv-w1b (same port, same
    /// address); heal_end's request still names the old vnfcInfo id.
    #[tokio::test]
    async fn a_tacker_heal_that_replaces_the_server_rejoins_it_and_records_one_node() {
        use crate::cluster::testkit::tacker_instance;
        let f = Fixture::new(1, 0);
        let before = tacker_instance(&[("master", "srv-m1", "192.0.2.11"), ("worker", "srv-w1", "192.0.2.21")]);
        let after = tacker_instance(&[("master", "srv-m1", "192.0.2.11"), ("worker", "srv-w1b", "192.0.2.21")]);
        let o = f.run_tacker(Op::InstantiateEnd, Fixture::instantiate_body(), &[], &before).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        let o = f.run_tacker(Op::HealStart, heal(&["worker-srv-w1"]), &[], &before).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(f.state()["nodes"]["srv-w1"]["installed"], false);
        let mark = f.execs().len();
        let o =
            f.run_tacker(Op::HealEnd, heal(&["worker-srv-w1"]), &[], &after).await.expect("the healed node is found");
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[mark..];
        assert!(position(e, "srv-w1b", "install_k8s_cluster.sh -w").is_some(), "{e:#?}");
        let nodes = f.state()["nodes"].clone();
        let names: Vec<&String> = nodes.as_object().unwrap().keys().collect();
        assert_eq!(names, ["srv-m1", "srv-w1b"], "one node per address: {nodes:#}");
        assert_eq!(nodes["srv-w1b"]["installed"], true);
        // The next operation on the recorded nodes (Tacker v1's terminate_end: the instance no
        // longer lists its VMs) is not refused for an address used twice.
        let mut emptied = after.clone();
        emptied["instantiatedVnfInfo"]["vnfcResourceInfo"] = serde_json::json!([]);
        let o = f.run_tacker(Op::TerminateEnd, serde_json::json!({}), &[], &emptied).await.expect("terminated");
        assert!(o.error.is_none(), "{:?}", o.error);
    }

    /// Tacker v2's SOL003 heal (no vnfcInstanceId): the grant's removeResources name every
    /// server by its old id, heal_end's grant still does, and the instance lists the
    /// replacements (new ids, same ports and addresses). heal_end finds them by what heal_start
    /// recorded, rebuilds the cluster, and records one node per address.
    #[tokio::test]
    async fn a_sol003_heal_named_by_the_grants_old_server_ids_is_found_at_heal_end() {
        use crate::cluster::testkit::tacker_instance;
        let f = Fixture::new(1, 0);
        let before = tacker_instance(&[("master", "srv-m1", "192.0.2.11"), ("worker", "srv-w1", "192.0.2.21")]);
        let after = tacker_instance(&[("master", "srv-m1b", "192.0.2.11"), ("worker", "srv-w1b", "192.0.2.21")]);
        let o = f.run_tacker(Op::InstantiateEnd, Fixture::instantiate_body(), &[], &before).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        // As VnfLcmDriverV2._make_SOL003_heal_grant_request makes it.
        let rm = |vdu: &str, srv: &str| {
            json!({"id": format!("rm-{srv}"), "type": "COMPUTE", "resourceTemplateId": vdu,
                   "resource": {"resourceId": srv, "vimLevelResourceType": "OS::Nova::Server"}})
        };
        let grant = json!({"vnfInstanceId": "vnf1", "vnfLcmOpOccId": "op1", "vnfdId": "d", "operation": "HEAL",
            "isAutomaticInvocation": false, "flavourId": "simple",
            "removeResources": [rm("master", "srv-m1"), rm("worker", "srv-w1")],
            "addResources": [{"id": "a1", "type": "COMPUTE", "resourceTemplateId": "master"},
                             {"id": "a2", "type": "COMPUTE", "resourceTemplateId": "worker"}]});
        let o = f.run_tacker_granted(Op::HealStart, json!({}), &[], &before, Some(&grant)).await.unwrap();
        assert!(o.error.is_none(), "{:?}", o.error);
        let mark = f.execs().len();
        let o = f
            .run_tacker_granted(Op::HealEnd, json!({}), &[], &after, Some(&grant))
            .await
            .expect("the replaced servers are found by their addresses");
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[mark..];
        assert!(position(e, "srv-m1b", "install_k8s_cluster.sh").is_some(), "{e:#?}");
        assert!(position(e, "srv-w1b", "install_k8s_cluster.sh -w").is_some(), "{e:#?}");
        let nodes = f.state()["nodes"].clone();
        let names: Vec<&String> = nodes.as_object().unwrap().keys().collect();
        assert_eq!(names, ["srv-m1b", "srv-w1b"], "one node per address: {nodes:#}");
    }

    #[tokio::test]
    async fn worker_heal_drains_checks_and_deletes_and_a_stuck_pod_keeps_the_node() {
        let f = Fixture::new(1, 2);
        f.instantiate().await;
        f.fake.reply(None, "get pods", r#"{"items": [{"metadata": {"namespace": "default", "name": "stuck", "ownerReferences": [{"kind": "ReplicaSet"}]}}]}"#);
        let o = f.run(Op::HealStart, heal(&["w1"]), &[]).await;
        let e = o.error.expect("a pod is left").to_string();
        assert!(e.contains("w1") && e.contains("stuck"), "{e}");
        assert!(!f.execs().iter().any(|x| x.contains("delete_node.sh worker21")), "deleted although a pod is left");
        assert_eq!(f.state()["nodes"]["w1"]["installed"], true);
        f.fake.reply(None, "get pods", r#"{"items": []}"#);
        let o = f.run(Op::HealStart, heal(&["w1"]), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = f.execs();
        let drain = position(&e, "m1", "kubectl drain worker21");
        assert!(drain.is_some() && drain < position(&e, "m1", "delete_node.sh worker21"), "{e:#?}");
        // heal-end: a fresh token from a master, then the new VM joins as a worker.
        let before = e.len();
        let o = f.run(Op::HealEnd, heal(&["w1"]), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        assert!(
            position(e, "m1", "kubeadm token create").unwrap()
                < position(e, "w1", "install_k8s_cluster.sh -w").unwrap()
        );
        assert_eq!(f.state()["nodes"]["w1"]["installed"], true);
    }
}
