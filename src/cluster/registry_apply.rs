//! The private-registry step on a node (`registry.rs` checks the params and builds every file
//! and the node program's arguments): the `hosts.toml` files uploaded, then the node program
//! run with the kubelet credentials in a 0600 env file it consumes; both go with the node's
//! other prepare steps (`prepare_nodes.rs`: one upload, one exec). Also the removal of all of
//! it when a kept VM leaves the cluster (terminate `--reset-nodes`).

use crate::cluster::hook::Hook;
use crate::cluster::registry::{apply_cmd, hosts_toml_upload, kubelet_auth, AUTH_UPLOAD};
use crate::error::Result;
use crate::transport::{Source, UploadFile};

/// The registry step on a node, as part of its prepare program (`prepare_nodes.rs`, after the
/// CA copies were uploaded with the scripts): the `hosts.toml` files to upload, the kubelet
/// credentials as a 0600 env file to upload with them (the node program consumes it), and the
/// node program. Built also when the params list no registry, so what an earlier run configured
/// on the node is removed.
pub struct RegistryStep {
    pub files: Vec<UploadFile>,
    /// The env file among `files`, when a registry has a login.
    pub env_file: Option<&'static str>,
    pub command: String,
}

pub fn step(h: &Hook) -> Result<RegistryStep> {
    let regs = &h.params.registries;
    let mut files: Vec<UploadFile> = regs
        .iter()
        .enumerate()
        .map(|(i, r)| UploadFile {
            source: Source::Bytes(r.hosts_toml().into_bytes().into()),
            remote: format!("{}/{}", h.run_dir, hosts_toml_upload(i)),
            mode: 0o600,
        })
        .collect();
    let auth = kubelet_auth(regs);
    if let Some(a) = &auth {
        files.push(h.env_upload(AUTH_UPLOAD, a.expose().to_string()));
    }
    let env_file = auth.is_some().then_some(AUTH_UPLOAD);
    Ok(RegistryStep { files, env_file, command: apply_cmd(&h.run_dir, regs, auth.is_some())? })
}

/// Remove every registry file of ours from a node (terminate `--reset-nodes`: the VM is kept,
/// the credentials must not be): the node program with no registry and no login.
pub fn remove_cmd(h: &Hook) -> Result<String> {
    apply_cmd(&h.run_dir, &[], false)
}
