//! A kubeconfig for a recorded cluster (`--kubeconfig-out`): what OSM's `k8scluster-add --creds`
//! and ONAP's cloud-region k8s registration take, so those orchestrators run Helm themselves
//! and need no `helm_info` and no node login. It holds the cluster's CA, the same API server URL
//! as the VIM record (the VIP, or the floating IP), and the cluster-admin ServiceAccount token:
//! whoever reads the file owns the cluster, so it is written 0600 from its first byte and
//! replaced atomically, and the token never reaches an event, a log or an error.
//!
//! The document is built from the instance state only (`kubeconfig_doc.rs`, pure), so a later
//! hook or the VNFM hook command can write it again without touching a node.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::cluster::kubeconfig_doc::from_state;
use crate::cluster::state;
use crate::cluster::state_store;
use crate::error::{Error, Result};
use crate::lifecycle::state::Store;

/// Write `text` to `path` atomically: a temporary file beside it, created 0600 (never readable
/// by others, not even before the rename), synced, renamed over `path`. A symlink at `path` is
/// replaced, not followed. Errors name the file only: the text holds a token.
pub fn write_private(path: &Path, text: &str) -> Result<PathBuf> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let err = |e: std::io::Error| Error::State {
        path: path.display().to_string(),
        message: format!("cannot write the kubeconfig: {e}"),
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut tmp = tempfile::Builder::new().prefix(".kubeconfig.").tempfile_in(dir).map_err(err)?;
    // tempfile creates 0600 already; say so here rather than rely on it.
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(&path).map_err(|e| err(e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(path)
}

/// Check, before anything runs, that a kubeconfig can be written at `path`: its directory
/// exists and `path` is not a directory (bad input, exit 2).
pub fn check_destination(path: &Path) -> Result<()> {
    let shown = path.display().to_string();
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if abs.is_dir() {
        return Err(Error::input("--kubeconfig-out", shown, "is a directory; give a file name"));
    }
    match abs.parent() {
        Some(d) if d.is_dir() => Ok(()),
        _ => Err(Error::input("--kubeconfig-out", shown, "its directory does not exist")),
    }
}

/// Write the kubeconfig of instance `id`'s recorded cluster to `path` (0600, atomic); returns
/// the absolute path. For the hook commands and the VNFM hook: nothing connects to a node.
pub fn write_for_instance(store: &Store, id: &str, path: &Path) -> Result<PathBuf> {
    let at = store.doc_path(id, state::KIND).display().to_string();
    let st = state_store::load(store, id)?.ok_or_else(|| {
        Error::input(&at, "state", format!("no cluster is recorded for VNF instance {id}: run instantiate-end first"))
    })?;
    write_private(path, &from_state(&st, &at)?.to_yaml())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::kubeconfig_doc::tests::{recorded, TOKEN};
    use crate::cluster::state::InstanceState;
    use serde_json::{json, Value};

    #[test]
    fn a_cluster_not_instantiated_is_an_error_naming_the_state_file_and_the_missing_fact() {
        let mut st = recorded(None);
        st.bearer_token = None;
        let e = from_state(&st, "/s/vnf1.json").err().unwrap().to_string();
        assert!(e.contains("/s/vnf1.json") && e.contains("bearer_token") && e.contains("instantiate-end"), "{e}");
        let e = from_state(&InstanceState::new("vnf1"), "/s/vnf1.json").err().unwrap().to_string();
        assert!(e.contains("facts") && e.contains("vnf1"), "{e}");
        let mut st = recorded(None);
        st.vim = Some(json!({"auth_url": "http://10.0.0.1:6443"}));
        assert!(from_state(&st, "s").err().unwrap().to_string().contains("not an https URL"));

        let d = tempfile::tempdir().unwrap();
        let store = Store::open_with_key(
            &d.path().join("state"),
            crate::lifecycle::state_key::StateKey::at(d.path().join("key")),
        )
        .unwrap();
        let e = write_for_instance(&store, "vnf1", &d.path().join("kc")).unwrap_err();
        assert_eq!(e.kind(), "input");
        assert!(e.to_string().contains("vnf1.json") && e.to_string().contains("no cluster is recorded"), "{e}");
        assert!(!d.path().join("kc").exists());
    }

    #[test]
    fn written_0600_atomically_over_an_old_file_and_read_back_from_the_store() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open_with_key(
            &d.path().join("state"),
            crate::lifecycle::state_key::StateKey::at(d.path().join("key")),
        )
        .unwrap();
        state_store::save(&mut recorded(None), &store).unwrap();
        let out = d.path().join("kubeconfig");
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        let p = write_for_instance(&store, "vnf1", &out).unwrap();
        assert_eq!(p, out);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        let v: Value = yaml_serde::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["users"][0]["user"]["token"], TOKEN, "the sealed token is unsealed into the file");
        // Nothing else is left beside it (no temporary file).
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with(".kubeconfig.")), "{names:?}");
        // A symlink at the destination is replaced, not written through.
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_for_instance(&store, "vnf1", &link).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }

    #[test]
    fn destinations_are_checked_before_anything_runs() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_destination(&d.path().join("kc")).is_ok());
        let e = check_destination(d.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = check_destination(&d.path().join("no/such/kc")).unwrap_err().to_string();
        assert!(e.contains("--kubeconfig-out") && e.contains("does not exist"), "{e}");
    }
}
