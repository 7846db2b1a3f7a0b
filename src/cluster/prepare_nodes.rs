//! The first step on the nodes a hook installs (every node at instantiate and for a heal, the new
//! workers of a scale-out) and on the nodes that must learn of a change (the existing nodes at a
//! scale-out, the others at a heal), on all of them at once: env files an earlier run left are
//! swept, the scripts (and offline artifacts, registry CAs) go into the node's private run
//! directory, `/etc/hosts` names every node, and the registries are configured
//! (`registry_apply.rs`).
//!
//! One upload and one node program per node (`node_program.rs`): the sweep keeps only the env
//! files of this upload. A node about to be installed runs its install in the same program
//! (`Hook::install`). A node already installed gets no scripts, and when what the steps set is
//! what the state records it got ([`Prep::digest`]) it gets only the sweep: a re-run with the
//! same inputs costs it one round trip, in parallel with the others. Not zero: the state cannot
//! prove the VM is still the one it installed (one replaced behind the VNFM's back has a new
//! host key, refused at this connect), and the sweep deletes env files (secrets) a run that was
//! killed between an upload and its command left there.

use sha2::{Digest, Sha256};

use crate::cluster::hook::{Hook, Prep};
use crate::cluster::node_cmd as cmd;
use crate::cluster::node_program::NodeProgram;
use crate::cluster::registry_apply;
use crate::cluster::topology::ClusterNode;
use crate::error::{Error, Result};
use crate::lifecycle::Role;
use crate::transport::Source;

/// The prepare steps of `n`: the scripts with them when `scripts`.
pub fn prep(h: &Hook, n: &ClusterNode, scripts: bool) -> Result<Prep> {
    let reg = registry_apply::step(h)?;
    let hosts = cmd::hosts_update(&h.topo.hosts_entries(), &[])?;
    let cas = h.registry_ca_uploads()?;
    let mut d = Sha256::new();
    for part in [hosts.as_bytes(), reg.command.as_bytes()] {
        d.update((part.len() as u64).to_be_bytes());
        d.update(part);
    }
    for f in reg.files.iter().chain(&cas) {
        let bytes = match &f.source {
            Source::Bytes(b) => b.to_vec(),
            other => {
                let p = other.local_path().expect("a file source has a path");
                std::fs::read(&p).map_err(|e| Error::input(h.req_file(), other.shown(), e.to_string()))?
            }
        };
        for part in [f.remote.as_bytes(), &bytes] {
            d.update((part.len() as u64).to_be_bytes());
            d.update(part);
        }
    }
    let mut files = if scripts { h.script_uploads(n)? } else { Vec::new() };
    files.extend(cas);
    files.extend(reg.files);
    Ok(Prep {
        files,
        env_files: reg.env_file.into_iter().collect(),
        steps: vec![hosts, reg.command],
        digest: hex::encode(d.finalize()),
    })
}

/// Whether `n` needs the scripts in the run dir in this run: it is installed now, or it is a
/// master whose Helm is still to install (its script), or the main master whose bearer token is
/// still to read (the manifest goes with the scripts).
pub fn needs_scripts(h: &Hook, n: &ClusterNode) -> bool {
    if !h.installed(n) {
        return true;
    }
    let helm = h.params.helm_script_path.is_some()
        && !h.with_state(|s| s.nodes.get(n.name()).is_some_and(|x| x.helm_installed));
    let bearer = h.topo.masters.first().is_some_and(|m| m.name() == n.name()) && !h.bearer_recorded();
    n.role == Role::Master && (helm || bearer)
}

/// Prepare `nodes` in parallel. A node installed whose recorded digest is current gets only the
/// sweep (see the module doc).
pub async fn prepare_nodes(h: &Hook, nodes: &[&ClusterNode]) -> Result<()> {
    let (mut todo, mut current) = (Vec::new(), Vec::new());
    for n in nodes {
        let scripts = needs_scripts(h, n);
        let digest = prep(h, n, scripts)?.digest;
        let recorded = h.with_state(|s| s.nodes.get(n.name()).and_then(|x| x.prepared_secret_digest.clone()));
        if scripts || recorded.as_deref() != Some(digest.as_str()) {
            todo.push(*n);
        } else {
            current.push(*n);
        }
    }
    if !todo.is_empty() {
        h.rt.phase("upload scripts, /etc/hosts", &todo, true);
    }
    if !current.is_empty() {
        h.rt.phase("prepared already: host key checked, leftover env files swept", &current, true);
    }
    let all: Vec<&ClusterNode> = todo.iter().chain(&current).copied().collect();
    let res =
        h.rt.each(&all, |n| {
            let full = todo.iter().any(|t| t.name() == n.name());
            async move {
                if full {
                    prepare_node(h, n, prep(h, n, needs_scripts(h, n))?).await
                } else {
                    h.clean_env(n).await
                }
            }
        })
        .await;
    crate::lifecycle::all_ok(res).map(|_| ())
}

/// The prepare steps alone on one node, as one node program, and their digest recorded.
pub async fn prepare_node(h: &Hook, n: &ClusterNode, p: Prep) -> Result<()> {
    let mut program = NodeProgram::new();
    program.push(cmd::clean_env(&h.run_dir, &p.env_files)?);
    for s in p.steps {
        program.push(s);
    }
    let c = h.rt.root_cmd(n, program.script()?, h.rt.timeouts.command).with_label(program.label());
    h.run_program(n, p.files, &p.env_files, c).await?;
    h.with_state(|s| s.node(n.name()).prepared_secret_digest = Some(p.digest));
    h.save()
}
