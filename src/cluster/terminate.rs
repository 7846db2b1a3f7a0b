//! `terminate_end`: forget the cluster. The VNFM deletes the VMs; we remove the VIM record and
//! the instance state. With `--reset-nodes`, `kubeadm reset -f` runs on every node first (for
//! VMs that are kept and reused), then the proxy settings our install scripts wrote there (marked
//! ones only); any env file (secrets) this instance left there is deleted, with the registry
//! files (containerd hosts, /etc/hosts lines, kubelet credentials: `registry_apply.rs`).

use crate::cluster::hook::Hook;
use crate::cluster::node_cmd as cmd;
use crate::cluster::node_program::NodeProgram;
use crate::cluster::registry_apply;
use crate::cluster::topology::ClusterNode;
use crate::error::Result;
use crate::lifecycle::all_ok;

pub async fn run(h: &Hook, reset_nodes: bool) -> Result<serde_json::Value> {
    crate::cluster::storage_ops::terminate(h, reset_nodes).await?;
    if reset_nodes {
        let nodes: Vec<&ClusterNode> = h.topo.all().filter(|n| h.installed(n)).collect();
        h.rt.phase("kubeadm reset", &nodes, true);
        let res =
            h.rt.each(&nodes, |n| async move {
                // One node program: the reset, what install wrote besides Kubernetes (the proxy
                // settings, ours only), every env file (secrets) of this instance, and the
                // registry files (the VMs are kept).
                let mut p = NodeProgram::new();
                p.push(cmd::kubeadm_reset());
                p.push(cmd::proxy_cleanup()?);
                p.push(cmd::clean_env(&h.run_dir, &[])?);
                p.push(registry_apply::remove_cmd(h)?);
                let c = h.rt.root_cmd(n, p.script()?, h.rt.timeouts.install).with_label(p.label());
                h.rt.exec(n, c).await?;
                h.outcome(n, "reset");
                Ok(())
            })
            .await;
        all_ok(res)?;
    }
    let vim = h.with_state(|s| s.vim.clone());
    h.forget_vim_connection();
    h.rt.phase::<ClusterNode>("remove the VIM record and the instance state", &[], false);
    h.remove_doc(crate::cluster::state::KIND)?;
    // The instance's learned host keys go with it: its addresses may serve another VM next.
    crate::cluster::instance_hosts::forget(h.store(), h.instance_id())?;
    Ok(serde_json::json!({"removed": vim.and_then(|v| v.get("name").cloned())}))
}

#[cfg(test)]
mod tests {
    use crate::cluster::prepare::Op;
    use crate::cluster::testkit::{step, Fixture};

    #[tokio::test]
    async fn reset_nodes_are_left_without_env_files_and_the_state_goes() {
        let f = Fixture::new(1, 1);
        f.instantiate().await;
        let before = f.execs().len();
        let p = f.prepare(Op::TerminateEnd, serde_json::json!({}), &[]).unwrap();
        let o = crate::cluster::run(Op::TerminateEnd, &p, true).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let e = &f.execs()[before..];
        for n in ["m1", "w1"] {
            let reset = step(e, n, "kubeadm reset -f").unwrap_or_else(|| panic!("{n}: {e:#?}"));
            let proxy = step(e, n, "proxy_cleanup.sh").unwrap_or_else(|| panic!("{n}: {e:#?}"));
            assert!(proxy > reset, "{n}: {e:#?}");
            assert!(step(e, n, "clean_env.sh").is_some_and(|c| c > proxy), "{n}: {e:#?}");
            assert!(step(e, n, "registry_apply.sh").is_some_and(|c| c > reset), "{n}: {e:#?}");
        }
        // One node program per node: the reset and every cleanup after it.
        assert_eq!(e.len(), 2, "{e:#?}");
        assert!(!f.path("state/vnf1.json").exists());
        // The instance lock, held until the hook is done, goes with the state it guarded.
        assert!(f.path("state/vnf1.lock").exists(), "held while the hook runs");
        drop(p);
        assert!(!f.path("state/vnf1.lock").exists(), "an empty lock file stays after terminate");
    }
}
