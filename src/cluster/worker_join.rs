//! New workers join each on its own (instantiate_end's workers, scale_end's new ones): one
//! worker's upload, `/etc/hosts`, registries, join and hostname run as one job, one upload and
//! one node program (`Hook::install` with its prepare steps), so a VM that never boots fails only
//! its own job and the reachable workers join. The hook goes on with those that joined (each
//! recorded as it joins) and fails at the end naming the others.

use crate::cluster::hook::Hook;
use crate::cluster::node_cmd::InstallMode;
use crate::cluster::prepare_nodes::prep;
use crate::cluster::topology::ClusterNode;
use crate::error::Error;
use crate::lifecycle::all_ok;
use crate::secret::Secret;

/// Prepare and join `workers` (none installed yet) with the join `token` and CA `hash`, all at
/// once, shown as the step `phase`: the ones that joined, and the failure of the others (it
/// names them), if any.
pub async fn join_workers<'a>(
    h: &Hook,
    phase: &str,
    workers: &[&'a ClusterNode],
    token: &Secret,
    hash: &str,
) -> (Vec<&'a ClusterNode>, Option<Error>) {
    if workers.is_empty() {
        return (vec![], None);
    }
    h.rt.phase(phase, workers, true);
    let res =
        h.rt.each(workers, |w| async move {
            let p = prep(h, w, true)?;
            h.install(w, InstallMode::Worker, Some((token, hash)), None, Some(p)).await?;
            h.outcome(w, "joined as worker");
            Ok(())
        })
        .await;
    let joined: Vec<&ClusterNode> = res.iter().filter(|(_, r)| r.is_ok()).map(|(n, _)| *n).collect();
    for (n, r) in &res {
        if r.is_err() {
            h.outcome(n, "failed");
        }
    }
    (joined, all_ok(res).err())
}
