//! The private-registry step on a node (`registry.rs` checks the params and builds every file
//! and the node program's arguments): the `hosts.toml` files uploaded, then the node program
//! run with the kubelet credentials in a 0600 env file it consumes. Also the removal of all of
//! it when a kept VM leaves the cluster (terminate `--reset-nodes`).

use crate::cluster::hook::Hook;
use crate::cluster::registry::{apply_cmd, hosts_toml_upload, kubelet_auth, AUTH_UPLOAD};
use crate::cluster::topology::ClusterNode;
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::transport::{Source, UploadFile};

/// The registry step on one node about to be installed (from `prepare_nodes`, after the CA
/// copies were uploaded with the scripts): upload each `hosts.toml`, then run the node program,
/// with the kubelet credentials in a 0600 env file it consumes. Runs also when the params list
/// no registry, so what an earlier run configured on the node is removed.
pub async fn apply(h: &Hook, n: &ClusterNode) -> Result<()> {
    let regs = &h.params.registries;
    let files: Vec<UploadFile> = regs
        .iter()
        .enumerate()
        .map(|(i, r)| UploadFile {
            source: Source::Bytes(r.hosts_toml().into_bytes().into()),
            remote: format!("{}/{}", h.run_dir, hosts_toml_upload(i)),
            mode: 0o600,
        })
        .collect();
    h.rt.upload(n, files).await?;
    let auth = kubelet_auth(regs);
    let c = |with_auth| -> Result<RemoteCommand> {
        Ok(h.rt.root_cmd(n, apply_cmd(&h.run_dir, regs, with_auth)?, h.rt.timeouts.command))
    };
    match auth {
        Some(a) => {
            let text = a.expose().to_string();
            h.with_env_file(n, AUTH_UPLOAD, text, async { h.rt.exec(n, c(true)?).await }).await?;
        }
        None => {
            h.rt.exec(n, c(false)?).await?;
        }
    }
    Ok(())
}

/// Remove every registry file of ours from `n` (terminate `--reset-nodes`: the VM is kept, the
/// credentials must not be).
pub async fn remove(h: &Hook, n: &ClusterNode) -> Result<()> {
    let c = h.rt.root_cmd(n, apply_cmd(&h.run_dir, &[], false)?, h.rt.timeouts.command);
    h.rt.exec(n, c).await.map(|_| ())
}
