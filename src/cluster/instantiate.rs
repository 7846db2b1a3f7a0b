//! `instantiate_end`: VMs → a Kubernetes cluster with Helm, and the record of how to reach it.
//!
//! 1. Upload the scripts to the masters and write `/etc/hosts` (and the registries; workers
//!    already installed too, and none of it on a node that got the same before:
//!    `prepare_nodes.rs`).
//! 2. Main master, in the same node program as its step 1: run the install script; parse
//!    token, server, CA hash and CA certificate.
//! 3. Other masters, one after another, each with a fresh certificate key.
//! 4. Workers, all at once, each on its own (`worker_join.rs`: scripts, `/etc/hosts`, join);
//!    then their placement labels (`labels_apply.rs`) from the main master.
//! 5. The VIM's bearer token (cluster-admin ServiceAccount token Secret), or the one recorded.
//! 6. Helm on every master at once, when the package ships a Helm script (while step 5 runs).
//! 7. Storage (`storage_ops.rs`): NFS clients, the storage server, the PersistentVolumes.
//! 8. The VIM record and the vimConnectionInfo entry.
//!
//! Every finished node is recorded in the state store at once, so a second run after a failure
//! completes the missing nodes only and ends with the same record. A re-run on a finished
//! cluster with the same inputs costs one round trip per node, all at once (its host key is
//! checked, its leftover env files swept: `prepare_nodes.rs`); every step is recorded as done,
//! and the record is written again from the state.

use crate::cluster::hook::Hook;
use crate::cluster::labels_apply;
use crate::cluster::node_cmd::{self as cmd, InstallMode};
use crate::cluster::prepare_nodes::{self, prepare_nodes};
use crate::cluster::script_env;
use crate::cluster::topology::ClusterNode;
use crate::cluster::worker_join::join_workers;
use crate::error::Result;
use crate::facts::kubectl::BearerToken;
use crate::lifecycle::all_ok;
use crate::secret::Secret;

pub async fn run(h: &Hook) -> Result<serde_json::Value> {
    // The masters first, all of them; each new worker prepares with its own join (step 4). A
    // main master still to install prepares and installs in one node program, the other nodes
    // prepare meanwhile.
    let workers: Vec<&ClusterNode> = h.topo.workers.iter().filter(|w| !h.installed(w)).collect();
    let main = &h.topo.masters[0];
    let fresh_main = !h.installed(main);
    let first: Vec<&ClusterNode> = h
        .topo
        .all()
        .filter(|n| !workers.iter().any(|w| w.name() == n.name()))
        .filter(|n| !(fresh_main && n.name() == main.name()))
        .collect();
    // The bearer token of a record already written is reused (step 5): read before anything
    // changes the state.
    let recorded_bearer = h.bearer_recorded().then(|| h.with_state(|s| s.bearer_token.clone())).flatten();

    // 2. Main master.
    let (prepared, main_done) = tokio::join!(prepare_nodes(h, &first), main_master(h, main));
    let (mut token, mut cert_key) = main_done?;
    prepared?;
    let ca_hash = h.with_state(|s| s.facts.as_ref().map(|f| f.ca_hash.clone())).unwrap_or_default();

    let masters: Vec<&ClusterNode> = h.topo.masters.iter().skip(1).filter(|m| !h.installed(m)).collect();
    for m in h.topo.masters.iter().skip(1).chain(h.topo.workers.iter()).filter(|n| h.installed(n)) {
        h.outcome(m, "already installed");
    }
    if (!masters.is_empty() || !workers.is_empty()) && token.is_none() {
        token = Some(h.join_token(main).await?);
    }

    // 3. Other masters, in order: etcd and the control plane grow one member at a time.
    if !masters.is_empty() {
        h.rt.phase("masters: join", &masters, false);
    }
    for (i, m) in masters.iter().enumerate() {
        // The key from the main master's own run is fresh for the first join only.
        let key = match (i, cert_key.take()) {
            (0, Some(k)) => k,
            _ => h.certificate_key(main).await?,
        };
        let r = h
            .install(m, InstallMode::JoinMaster, Some((token.as_ref().expect("set above"), &ca_hash)), Some(&key), None)
            .await;
        h.rt.done(m, &r);
        r?;
        h.outcome(m, "joined as master");
    }

    // 4. Workers, all at once, each on its own: one that never boots keeps no other out. Those
    // that joined are recorded and labelled; the hook then fails naming the others, before the
    // VIM record (there is none before the cluster is complete), and a re-run joins only them.
    if !workers.is_empty() {
        let tok = token.as_ref().expect("set above");
        let (joined, failed) = join_workers(h, "workers: join", &workers, tok, &ca_hash).await;
        labels_apply::apply(h, main, &joined).await?;
        if let Some(e) = failed {
            return Err(e);
        }
    }

    // 5. Bearer token for the VIM.
    // 6. Helm on every master, while the main master gives the token: neither needs the other.
    let bearer = async {
        match recorded_bearer {
            Some(b) => Ok(Secret::new(b)),
            None => {
                h.rt.phase("VIM bearer token", &[main], false);
                h.rt.read(main, &BearerToken { run_dir: &h.run_dir }).await
            }
        }
    };
    let masters: Vec<&ClusterNode> = h.topo.masters.iter().collect();
    let (bearer, helm) = tokio::join!(bearer, install_helm(h, &masters));
    let bearer = bearer?;
    helm?;

    // 7. Storage: NFS clients, the storage server, the PVs (when the params have storage).
    crate::cluster::storage_ops::setup(h).await?;

    // 8. Record.
    h.write_record(&bearer)
}

/// Install the main master, or on a re-run take its facts from the record or from the node.
/// Returns the join token and certificate key its own run printed (fresh only on that run).
async fn main_master(h: &Hook, main: &ClusterNode) -> Result<(Option<Secret>, Option<Secret>)> {
    h.rt.phase("main master: install", &[main], false);
    if h.installed(main) && h.with_state(|s| s.facts.is_some()) {
        h.outcome(main, "already installed");
        return Ok((None, None));
    }
    let (facts, secrets) = if h.installed(main) {
        (h.query_facts(main).await?, (None, None))
    } else {
        let o = h.install_main(main, Some(prepare_nodes::prep(h, main, true)?)).await?;
        h.outcome(main, "installed");
        (h.facts_from_output(main, &o), (Some(o.token.clone()), o.certificate_key.clone()))
    };
    h.with_state(|s| s.facts = Some(facts));
    h.save()?;
    Ok(secrets)
}

/// Run the package's Helm script on `masters` that do not have it yet, at once.
pub async fn install_helm(h: &Hook, masters: &[&ClusterNode]) -> Result<()> {
    if h.params.helm_script_path.is_none() {
        return Ok(());
    }
    let todo: Vec<&ClusterNode> = masters
        .iter()
        .copied()
        .filter(|m| !h.with_state(|s| s.nodes.get(m.name()).is_some_and(|n| n.helm_installed)))
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    h.rt.phase("helm: install", &todo, true);
    let res =
        h.rt.each(&todo, |m| async move {
            let c = h.rt.root_cmd(m, cmd::helm_install(&h.run_dir, "env.helm")?, h.rt.timeouts.helm);
            let env = script_env::env_file(&h.params, &h.topo, &[])?;
            h.with_env_file(m, "env.helm", env, h.rt.exec(m, c)).await?;
            h.with_state(|s| s.node(m.name()).helm_installed = true);
            h.save()
        })
        .await;
    all_ok(res).map(|_| ())
}

#[cfg(test)]
mod tests {
    use crate::cluster::prepare::Op;
    use crate::cluster::testkit::{position, Fixture};

    /// A worker VM that never boots fails only itself: the others join and are recorded, and
    /// the hook's error names it (a re-run then joins only it: nothing is lost).
    #[tokio::test]
    async fn an_unreachable_worker_fails_alone_and_the_others_are_recorded() {
        let f = Fixture::new(1, 2);
        f.fake.down("w1");
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        let err = o.error.expect("w1 never answered").to_string();
        assert!(err.contains("w1") && !err.contains("w2"), "{err}");
        let e = f.execs();
        assert!(position(&e, "w2", "install_k8s_cluster.sh -w").is_some(), "{e:#?}");
        let st = f.state();
        assert_eq!(st["nodes"]["w2"]["installed"], true, "{st:#}");
        assert_eq!(st["nodes"]["m1"]["installed"], true, "{st:#}");
        assert!(st["nodes"].get("w1").is_none_or(|n| n["installed"] != true), "{st:#}");
        assert!(st["vim"].is_null(), "no record before the cluster is complete");
    }

    #[tokio::test]
    async fn masters_join_one_after_another_then_workers_then_token_helm_record() {
        let f = Fixture::new(3, 2);
        f.instantiate().await;
        let e = f.execs();
        let install = |n: &str| position(&e, n, "install_k8s_cluster.sh").unwrap_or_else(|| panic!("{n}: {e:#?}"));
        // The main master first, the other masters strictly in order, workers after them.
        assert!(install("m1") < install("m2") && install("m2") < install("m3"), "{e:#?}");
        assert!(install("m3") < install("w1") && install("m3") < install("w2"), "{e:#?}");
        // Joining masters get a fresh certificate key each (the first one reuses m1's own).
        assert!(position(&e, "m1", "upload-certs").unwrap() < install("m3"), "{e:#?}");
        let bearer = position(&e, "m1", "admin_token.sh").unwrap();
        let helm = ["m1", "m2", "m3"].map(|m| position(&e, m, "install_helm.sh").unwrap());
        assert!(helm.iter().all(|&h| h > bearer), "{e:#?}");
        let st = f.state();
        assert_eq!(st["nodes"]["m2"]["k8s_name"], "master12");
        assert!(st["vim"]["auth_cred"]["bearer_token"] == "bearer-token");
    }

    /// `--tacker-compat` puts the first master's own login into helm_info, not the request's.
    async fn compat_helm_info(f: &Fixture, inventory_defaults: &str) -> (serde_json::Value, Vec<String>) {
        let inv = std::fs::read_to_string(f.path("inv.yaml")).unwrap();
        let inv = inv.replacen("defaults:\n", &format!("defaults:\n{inventory_defaults}"), 1);
        std::fs::write(f.path("inv.yaml"), inv).unwrap();
        let p =
            f.prepare_with(Op::InstantiateEnd, Fixture::instantiate_body(), &[], |i| i.tacker_compat = true).unwrap();
        let o = crate::cluster::run(Op::InstantiateEnd, &p, false).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let conn = &o.result["vimConnectionInfo"];
        let k8s = conn.as_array().unwrap().iter().find(|c| c["vimType"] == "kubernetes").unwrap();
        assert_eq!(k8s["extra"]["helm_info"], o.result["vim"]["extra"]["helm_info"]);
        (k8s["extra"]["helm_info"].clone(), o.warnings)
    }

    #[tokio::test]
    async fn tacker_compat_writes_the_password_the_masters_log_in_with() {
        let f = Fixture::new(2, 1);
        let (hi, warnings) = compat_helm_info(&f, "  user: ops\n  password: Inv3ntory-Pw\n").await;
        assert_eq!(hi["masternode_username"], "ops", "{hi}");
        assert_eq!(hi["masternode_password"], "Inv3ntory-Pw", "not the request's 'pw': {hi}");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[tokio::test]
    async fn tacker_compat_with_key_logins_leaves_the_password_out_and_warns_naming_the_master() {
        let f = Fixture::new(1, 1);
        let key = f.path("id_ed25519");
        std::fs::write(&key, "not read by the fake transport\n").unwrap();
        let (hi, warnings) = compat_helm_info(&f, &format!("  user: root\n  identity_file: {}\n", key.display())).await;
        assert_eq!(hi["masternode_username"], "root", "{hi}");
        assert!(hi.get("masternode_password").is_none() && hi.get("masternode_credential_ref").is_none(), "{hi}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("master m1 logs in with a key"), "{warnings:?}");
    }

    #[tokio::test]
    async fn a_rerun_skips_finished_nodes_and_a_failed_worker_is_named() {
        let f = Fixture::new(1, 2);
        f.fake.fail(Some("w2"), "install_k8s_cluster.sh", 3, "E: unable to locate package");
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        let err = o.error.expect("w2 failed").to_string();
        assert!(err.contains("w2") && err.contains("unable to locate package"), "{err}");
        assert_eq!(f.state()["nodes"]["w1"]["installed"], true);
        // The node is fixed; the re-run installs w2 only.
        f.fake.reply(Some("w2"), "install_k8s_cluster.sh", &crate::cluster::testkit::install_reply("", "worker22"));
        let before = f.execs().len();
        f.instantiate().await;
        let again = &f.execs()[before..];
        assert_eq!(again.iter().filter(|e| e.contains("install_k8s_cluster.sh")).count(), 1, "{again:#?}");
        assert!(position(again, "w2", "install_k8s_cluster.sh").is_some(), "{again:#?}");
    }

    /// A re-run on a finished cluster with the same inputs reaches every node once, at once:
    /// its leftover env files swept, nothing else (no scripts, no /etc/hosts, no token). A VM
    /// that is gone fails it, named: the state alone cannot prove the cluster is still there.
    #[tokio::test]
    async fn a_rerun_on_a_finished_cluster_reaches_every_node_once_and_a_gone_vm_fails_it() {
        let f = Fixture::new(2, 2);
        f.instantiate().await;
        let before = f.execs().len();
        let calls = f.fake.round_trips();
        f.instantiate().await;
        let again = &f.execs()[before..];
        assert_eq!(f.fake.round_trips() - calls, 4, "{again:#?}");
        assert!(again.iter().all(|x| x.ends_with(": clean_env.sh .mgmt-driver/run/vnf1")), "{again:#?}");
        f.fake.down("w2");
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        let err = o.error.expect("w2 is gone").to_string();
        assert!(err.contains("w2"), "{err}");
    }

    #[tokio::test]
    async fn leftover_env_files_are_swept_first_and_after_a_failed_install() {
        use crate::cluster::testkit::step;
        let f = Fixture::new(1, 1);
        f.fake.fail(Some("w1"), "install_k8s_cluster.sh", 1, "sudo: a password is required");
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        assert!(o.error.is_some());
        let e = f.execs();
        for n in ["m1", "w1"] {
            let sweep = step(&e, n, "clean_env.sh .mgmt-driver/run/vnf1").unwrap_or_else(|| panic!("{n}: {e:#?}"));
            assert!(sweep < step(&e, n, "hosts_update.sh").unwrap(), "{n}: the sweep is the first step: {e:#?}");
            // It keeps only the env file uploaded with this node program, for the install.
            assert!(e[sweep.0].contains("clean_env.sh .mgmt-driver/run/vnf1 env.install && "), "{e:#?}");
        }
        let failed = position(&e, "w1", "install_k8s_cluster.sh").unwrap();
        assert!(
            e[failed + 1..].iter().any(|x| x.starts_with("w1: clean_env.sh")),
            "the env file is deleted at once after the failed step: {e:#?}"
        );
        let m1_sweeps = e.iter().filter(|x| x.starts_with("m1: clean_env.sh")).count();
        assert_eq!(m1_sweeps, 1, "a step that succeeded consumed its env file itself: {e:#?}");
    }

    #[tokio::test]
    async fn a_bearer_token_with_odd_characters_is_refused_without_quoting_it() {
        let f = Fixture::new(1, 0);
        f.fake.reply(None, "admin_token.sh", "secret-part\n\u{1b}]0;x");
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        let e = o.error.expect("refused");
        assert_eq!(e.kind(), "unreadable");
        assert!(!e.to_string().contains("secret-part"), "{e}");
        assert!(f.state()["vim"].is_null(), "no record from an unreadable token");
    }

    #[tokio::test]
    async fn a_hostname_that_is_not_a_dns_name_is_refused_naming_node_and_command() {
        let f = Fixture::new(1, 1);
        f.fake.reply(Some("w1"), "hostname", &crate::cluster::testkit::install_reply("", "w1; rm -rf /"));
        let o = f.run(Op::InstantiateEnd, Fixture::instantiate_body(), &[]).await;
        let e = o.error.expect("refused");
        assert_eq!(e.kind(), "unreadable");
        let text = e.to_string();
        assert!(text.starts_with("w1: cannot read the node's hostname") && text.contains("hostname"), "{text}");
    }
}
