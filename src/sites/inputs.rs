//! What one operation reads from a rendered site's folder, and its digest. `sites apply` records
//! the digest with a site's status and the files themselves when the operation succeeds, so a
//! later run sees that a site's inputs changed since it was done (and runs it again) and `sites
//! diff` shows what changed. Pure: the folder's files in (`export::read_site_files` reads them),
//! the operation's share and a digest out.
//!
//! By folder, so that a change reaches the operations that read it and no other: a cluster
//! operation reads `inventory.yaml` and its own `cluster/<op>.json`; a CNF operation reads
//! `inventory.yaml`, `cnf/` and `values/`; every operation reads the files outside those folders
//! (a `known_hosts` the inventory names, say). `site.json` is no input: its index moves when the
//! catalogue does, and its package is a path whose contents are not digested. A changed Helm
//! values file therefore re-runs `cnf-instantiate`, never the cluster's `instantiate`.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::sites::plan::Op;

/// The files `op` reads, path (relative to the site's folder) to text.
pub type Files = BTreeMap<String, String>;

/// The share of a site's rendered files that `op` reads.
pub fn of(op: &Op, files: &[(String, String)]) -> Files {
    let own = match op {
        Op::Instantiate => Some("cluster/instantiate.json"),
        Op::Terminate { .. } => Some("cluster/terminate.json"),
        Op::ScaleOut => Some("cluster/scale-out.json"),
        Op::ScaleIn { .. } => Some("cluster/scale-in.json"),
        Op::CnfInstantiate | Op::CnfTerminate | Op::RunScript { .. } => None,
    };
    let cnf = matches!(op, Op::CnfInstantiate | Op::CnfTerminate);
    files
        .iter()
        .filter(|(p, _)| {
            let under = |d: &str| p.starts_with(&format!("{d}/"));
            if p == crate::sites::render::SITE_FILE {
                false
            } else if under("cluster") {
                Some(p.as_str()) == own
            } else if under("cnf") || under("values") {
                cnf
            } else {
                true
            }
        })
        .cloned()
        .collect()
}

/// `sha256:<hex>` over every path and text, each length-prefixed, so no two different sets of
/// files share a digest by moving bytes between a name and a text.
pub fn digest(files: &Files) -> String {
    let mut h = Sha256::new();
    for (p, t) in files {
        for part in [p.as_bytes(), t.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> Vec<(String, String)> {
        [
            ("site.json", "{\"index\": 0}"),
            ("inventory.yaml", "groups: {}"),
            ("known_hosts", "h ssh-ed25519 AAAA"),
            ("cluster/instantiate.json", "{}"),
            ("cluster/terminate.json", "{}"),
            ("cnf/app.json", "{}"),
            ("values/app.yaml", "replicaCount: 1"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
    }

    #[test]
    fn each_operation_reads_its_own_files_and_the_shared_ones() {
        let names = |op: &Op| of(op, &folder()).into_keys().collect::<Vec<_>>();
        assert_eq!(names(&Op::Instantiate), ["cluster/instantiate.json", "inventory.yaml", "known_hosts"]);
        assert_eq!(
            names(&Op::Terminate { reset_nodes: false }),
            ["cluster/terminate.json", "inventory.yaml", "known_hosts"]
        );
        assert_eq!(names(&Op::CnfInstantiate), ["cnf/app.json", "inventory.yaml", "known_hosts", "values/app.yaml"]);
        assert_eq!(names(&Op::RunScript { script: "x".into(), args: vec![] }), ["inventory.yaml", "known_hosts"]);
    }

    #[test]
    fn the_digest_changes_with_what_the_operation_reads_and_nothing_else() {
        let d = |files: &[(String, String)], op: &Op| digest(&of(op, files));
        let mut changed = folder();
        changed[6].1 = "replicaCount: 2".into();
        assert_ne!(d(&folder(), &Op::CnfInstantiate), d(&changed, &Op::CnfInstantiate));
        assert_eq!(d(&folder(), &Op::Instantiate), d(&changed, &Op::Instantiate), "values are no cluster input");
        changed[0].1 = "{\"index\": 4}".into();
        assert_eq!(d(&folder(), &Op::Instantiate), d(&changed, &Op::Instantiate), "site.json is no input");
        // A byte moved from a name to a text is another digest.
        let a: Files = [("ab".to_string(), "c".to_string())].into();
        let b: Files = [("a".to_string(), "bc".to_string())].into();
        assert_ne!(digest(&a), digest(&b));
        assert!(digest(&a).starts_with("sha256:") && digest(&a).len() == 7 + 64);
    }
}
