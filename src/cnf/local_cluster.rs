//! A cluster that OSM knows only by its kubeconfig: no master is reachable over SSH, so Helm
//! runs on the controller with that file (`--kubeconfig`). The operations are the same; only
//! the transport ([`LocalConnector`]) and the Helm environment ([`HelmEnv::Local`]) differ.
//!
//! The kubeconfig is the operator's: it is passed to Helm by path (`KUBECONFIG`), never read
//! into argv, events, errors or results; it is checked before Helm runs (a regular file of at
//! most [`MAX_KUBECONFIG`] bytes, YAML with a `current-context`). Each cluster id gets private
//! Helm homes under the state dir (`helm/<id>`, 0700), so one cluster's repositories never
//! show up in another's.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::cnf::cluster_env::HelmEnv;
use crate::cnf::{Inputs, Op};
use crate::error::{Error, Result};
use crate::inventory::Host;
use crate::target::{Role, Target};
use crate::transport::local::LocalConnector;

/// A kubeconfig larger than this is refused (admin kubeconfigs are a few KiB).
pub const MAX_KUBECONFIG: u64 = 1 << 20;

/// The one node of a local cluster: the controller itself.
pub const NODE: &str = "controller";

const FLAG: &str = "--kubeconfig";

fn bad(message: impl Into<String>) -> Error {
    Error::input("arguments", FLAG, message)
}

/// The operations that make sense without a master: OSM's Helm connector verbs. The others
/// need the CNF's request and package (instantiate, scale, heal, terminate) or kubectl on a
/// master (services, reset).
pub fn supported(op: &Op) -> bool {
    matches!(
        op,
        Op::Install { .. }
            | Op::Upgrade { .. }
            | Op::Uninstall { .. }
            | Op::Rollback { .. }
            | Op::Status { .. }
            | Op::History { .. }
            | Op::Values { .. }
            | Op::List
            | Op::Show { .. }
            | Op::RepoList
            | Op::RepoSync { .. }
            | Op::RepoAdd { .. }
            | Op::RepoRemove { .. }
    )
}

/// Check `--kubeconfig` against the other inputs and the file itself; returns its absolute path.
/// One or the other: a kubeconfig together with masters (inventory, vimConnectionInfo, a
/// recorded cluster) is refused.
pub fn check(op: &Op, a: &Inputs, path: &Path) -> Result<PathBuf> {
    if !supported(op) {
        return Err(bad(format!("`{}` needs the cluster's masters; --kubeconfig works with install, upgrade, uninstall, rollback, status, history, values, list, show and the repo-* verbs", op.name())));
    }
    let conflicts = [
        ("--inventory", a.inventory.is_some()),
        ("--vim-connection-info", a.vim_connection_info.is_some()),
        ("--cluster-instance", a.cluster_instance.is_some()),
        ("--request", a.request.is_some()),
        ("--package-dir", a.package_dir.is_some()),
    ];
    if let Some((other, _)) = conflicts.iter().find(|(_, set)| *set) {
        return Err(bad(format!("cannot be used with {other}: Helm runs either on the controller with a kubeconfig or on the cluster's masters")));
    }
    check_file(path)
}

/// The kubeconfig file: a regular file (not a FIFO or a directory), at most [`MAX_KUBECONFIG`]
/// bytes, YAML with a non-empty `current-context`. Errors name the path, never the content.
pub fn check_file(path: &Path) -> Result<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| bad(format!("{shown}: {e}")))?;
    let meta = f.metadata().map_err(|e| bad(format!("{shown}: {e}")))?;
    if !meta.is_file() {
        return Err(bad(format!("{shown}: not a regular file")));
    }
    if meta.len() > MAX_KUBECONFIG {
        return Err(bad(format!("{shown}: larger than {MAX_KUBECONFIG} bytes")));
    }
    let mut text = String::new();
    f.take(MAX_KUBECONFIG + 1).read_to_string(&mut text).map_err(|e| bad(format!("{shown}: {e}")))?;
    check_text(&text).map_err(|m| bad(format!("{shown}: {m}")))?;
    std::path::absolute(path).map_err(|e| bad(format!("{shown}: {e}")))
}

/// A kubeconfig's text: YAML (a mapping) with a non-empty string `current-context`. The message
/// never quotes the text (it holds the cluster's credentials).
pub fn check_text(text: &str) -> std::result::Result<(), String> {
    let doc: yaml_serde::Value = yaml_serde::from_str(text).map_err(|_| "does not parse as YAML".to_string())?;
    match doc.get("current-context").and_then(|v| v.as_str()) {
        Some(c) if !c.trim().is_empty() => Ok(()),
        _ => Err("has no current-context (kubectl config use-context NAME sets one)".into()),
    }
}

/// The controller as the session's only "master".
pub fn target() -> Target {
    // Never used to log in: the local transport runs as the operator and ignores sudo.
    let host = Host::bare(NODE, "localhost", 0);
    Target::new(host, Role::Master)
}

/// The cluster's environment on the controller: `<state dir>/helm/<id>` and the kubeconfig.
pub fn env(id: &str, state_dir: &Path, kubeconfig: &Path) -> Result<HelmEnv> {
    crate::cnf::cluster_env::cluster_id(id).map_err(|m| Error::input("arguments", "--cluster-uuid", m))?;
    let dir = std::path::absolute(state_dir.join("helm").join(id))
        .map_err(|e| Error::input("arguments", "--state-dir", e.to_string()))?;
    let text = |p: &Path, field: &str| {
        p.to_str()
            .filter(|s| !s.contains(['\n', '\0']))
            .map(str::to_string)
            .ok_or_else(|| Error::input("arguments", field, "the path must be UTF-8 without newlines"))
    };
    Ok(HelmEnv::Local { id: id.into(), dir: text(&dir, "--state-dir")?, kubeconfig: text(kubeconfig, FLAG)? })
}

/// The controller's transport for `env` (made 0700), running `helm_bin` as `helm` when given
/// (else the `helm` on `PATH`). Every command also gets the environment's variables, so even
/// the version probe (which has no prefix) stays in the private homes.
pub fn connector(env: &HelmEnv, helm_bin: Option<&Path>) -> Result<LocalConnector> {
    let HelmEnv::Local { dir, kubeconfig, .. } = env else {
        return Err(bad("not a local cluster"));
    };
    let dir = PathBuf::from(dir);
    let mk = |d: &Path| {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| Error::input("arguments", "--state-dir", format!("{}: {e}", d.display())))
    };
    mk(&dir)?;
    let bin_dir = match helm_bin {
        None => None,
        Some(b) => {
            let meta = std::fs::metadata(b)
                .map_err(|e| Error::input("arguments", "--helm-bin", format!("{}: {e}", b.display())))?;
            if !meta.is_file() {
                return Err(Error::input("arguments", "--helm-bin", format!("{}: not a regular file", b.display())));
            }
            let abs = std::path::absolute(b).map_err(|e| Error::input("arguments", "--helm-bin", e.to_string()))?;
            let bin = dir.join("bin");
            mk(&bin)?;
            let link = bin.join("helm");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&abs, &link)
                .map_err(|e| Error::input("arguments", "--helm-bin", format!("{}: {e}", link.display())))?;
            Some(bin)
        }
    };
    let vars = vec![
        ("KUBECONFIG".to_string(), OsString::from(kubeconfig)),
        ("HELM_CACHE_HOME".into(), dir.join("cache").into_os_string()),
        ("HELM_CONFIG_HOME".into(), dir.join("config").into_os_string()),
        ("HELM_DATA_HOME".into(), dir.join("data").into_os_string()),
    ];
    Ok(LocalConnector { dir, vars, bin_dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KC: &str = "apiVersion: v1\nkind: Config\ncurrent-context: admin@k\ncontexts: []\nusers:\n- name: a\n  user:\n    token: sekrit-token\n";

    #[test]
    fn the_kubeconfig_is_checked_and_its_content_never_quoted() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("ok");
        std::fs::write(&ok, KC).unwrap();
        assert_eq!(check_file(&ok).unwrap(), ok);
        let cases: Vec<(PathBuf, &str)> = vec![
            (d.path().join("missing"), "No such file"),
            (d.path().to_path_buf(), "not a regular file"),
            (
                {
                    let p = d.path().join("big");
                    std::fs::write(&p, vec![b'#'; MAX_KUBECONFIG as usize + 1]).unwrap();
                    p
                },
                "larger than",
            ),
            (
                {
                    let p = d.path().join("notyaml");
                    std::fs::write(&p, "token: [sekrit-token\n").unwrap();
                    p
                },
                "does not parse as YAML",
            ),
            (
                {
                    let p = d.path().join("nocontext");
                    std::fs::write(&p, KC.replace("current-context: admin@k\n", "")).unwrap();
                    p
                },
                "no current-context",
            ),
        ];
        for (p, want) in cases {
            let e = check_file(&p).unwrap_err().to_string();
            assert!(e.contains("--kubeconfig") && e.contains(want), "{e}");
            assert!(!e.contains("sekrit"), "{e}");
        }
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(check_file(&fifo).unwrap_err().to_string().contains("not a regular file"));
    }

    #[test]
    fn a_kubeconfig_is_one_or_the_other_and_only_for_the_helm_verbs() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kc");
        std::fs::write(&kc, KC).unwrap();
        let base = Inputs::new(Some("cnf1".into()), Default::default());
        let status = Op::Status { release: "r".into() };
        assert!(check(&status, &base, &kc).is_ok());
        let with_inv = Inputs { inventory: Some("inv.yaml".into()), ..base.clone() };
        let e = check(&status, &with_inv, &kc).unwrap_err().to_string();
        assert!(e.contains("--kubeconfig") && e.contains("--inventory"), "{e}");
        let with_vim = Inputs { vim_connection_info: Some("v.json".into()), ..base.clone() };
        assert!(check(&status, &with_vim, &kc).unwrap_err().to_string().contains("--vim-connection-info"));
        let e = check(&Op::Instantiate, &base, &kc).unwrap_err().to_string();
        assert!(e.contains("--kubeconfig") && e.contains("cnf instantiate"), "{e}");
    }

    #[test]
    fn the_environment_is_private_per_cluster_and_helm_is_the_named_binary() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kc");
        std::fs::write(&kc, KC).unwrap();
        let helm = d.path().join("my-helm");
        std::fs::write(&helm, "#!/bin/sh\n").unwrap();
        let east = env("east", &d.path().join("state"), &kc).unwrap();
        let west = env("west", &d.path().join("state"), &kc).unwrap();
        let c = connector(&east, Some(&helm)).unwrap();
        let dir = d.path().join("state/helm/east");
        assert_eq!(c.dir, dir);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::read_link(dir.join("bin/helm")).unwrap(), helm);
        let var = |n: &str| c.vars.iter().find(|(k, _)| k == n).map(|(_, v)| PathBuf::from(v)).unwrap();
        assert_eq!(var("KUBECONFIG"), kc);
        assert_eq!(var("HELM_CONFIG_HOME"), dir.join("config"));
        assert_eq!(var("HELM_CACHE_HOME"), dir.join("cache"));
        assert_eq!(var("HELM_DATA_HOME"), dir.join("data"));
        // The same homes in the command prefix; another cluster has its own.
        let pre = east.prefix();
        assert!(pre.contains(&format!("KUBECONFIG={}", kc.display())), "{pre}");
        assert!(pre.contains(&format!("HELM_CONFIG_HOME={}", dir.join("config").display())), "{pre}");
        assert!(west.prefix().contains("state/helm/west/config") && !west.prefix().contains("east"));
        assert!(east.prepare().unwrap().starts_with("umask 077 && mkdir -p -- "));
        assert!(connector(&east, Some(&d.path().join("nope"))).unwrap_err().to_string().contains("--helm-bin"));
    }
}
