//! The cluster a CNF's Helm commands address, and its own Helm environment on the masters (OSM's
//! per-cluster environment). Pure: parsing `--cluster-uuid`, choosing the cluster id, and the
//! command text that selects, prepares and resets the environment.
//!
//! Each cluster id gets `/var/lib/mgmt-driver/helm/<cluster_id>/` on a master: `kubeconfig` (a
//! 0600 copy of the master's admin.conf) and `cache`, `config`, `data` as Helm's
//! `HELM_CACHE_HOME`, `HELM_CONFIG_HOME`, `HELM_DATA_HOME`. A fixed root-owned path rather than
//! `~`: the commands run as root through `sudo`, whose `$HOME` depends on the node's sudoers, and
//! the environment belongs to the cluster, not to the login user.
//!
//! A CNF recorded by an older driver (no cluster id in its record) keeps Helm's default homes and
//! `/etc/kubernetes/admin.conf` ([`HelmEnv::Legacy`]): its repositories live there.

use crate::cnf::names;
use crate::kube::kubeconfig::{self, ADMIN_CONF};
use crate::kube::kubectl::Kubectl;
use crate::remote;

/// Where the per-cluster environments live on a master. An environment's kubeconfig is a copy of
/// [`ADMIN_CONF`], which the legacy environment uses as is.
pub const ENV_ROOT: &str = "/var/lib/mgmt-driver/helm";

/// OSM's `cluster_uuid`: `namespace:cluster_id` or `cluster_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterUuid {
    /// The default namespace of the cluster's releases (below `--namespace` and the request's).
    pub namespace: Option<String>,
    pub id: String,
}

/// A cluster id is a safe name: it becomes a directory name on the masters and a record field.
pub fn cluster_id(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a cluster id ([A-Za-z0-9._-], starting with a letter or digit, at most 128)",
            crate::error::excerpt(s)
        ))
    }
}

/// `NS:ID` or `ID`: the namespace a DNS label, the id a safe name ([`cluster_id`]).
pub fn parse_cluster_uuid(s: &str) -> Result<ClusterUuid, String> {
    match s.split_once(':') {
        Some((ns, id)) => {
            names::namespace(ns).map_err(|m| format!("the namespace part of '{}': {m}", crate::error::excerpt(s)))?;
            cluster_id(id)?;
            Ok(ClusterUuid { namespace: Some(ns.to_string()), id: id.to_string() })
        }
        None => {
            cluster_id(s)?;
            Ok(ClusterUuid { namespace: None, id: s.to_string() })
        }
    }
}

/// Which Helm environment a CNF's commands run with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelmEnv {
    /// Helm's default homes of root and `/etc/kubernetes/admin.conf` (records of older drivers).
    Legacy,
    /// The cluster's own environment, `ENV_ROOT/<id>` (the id checked by [`cluster_id`]).
    Cluster(String),
    /// A cluster known only by its kubeconfig, Helm run on the controller (`cnf/local_cluster.rs`):
    /// the operator's kubeconfig by path and private Helm homes in `dir` (under the state dir).
    Local { id: String, dir: String, kubeconfig: String },
}

impl HelmEnv {
    /// The cluster's environment; `id` must pass [`cluster_id`].
    pub fn cluster(id: &str) -> Result<HelmEnv, String> {
        cluster_id(id)?;
        Ok(HelmEnv::Cluster(id.to_string()))
    }

    pub fn id(&self) -> Option<&str> {
        match self {
            HelmEnv::Legacy => None,
            HelmEnv::Cluster(id) | HelmEnv::Local { id, .. } => Some(id),
        }
    }

    /// The environment's directory on a master (on the controller for [`HelmEnv::Local`]).
    pub fn dir(&self) -> Option<String> {
        match self {
            HelmEnv::Local { dir, .. } => Some(dir.clone()),
            _ => self.id().map(|id| format!("{ENV_ROOT}/{id}")),
        }
    }

    /// The kubeconfig Helm reads: the operator's file, or the environment's copy on a master.
    fn kubeconfig(&self, dir: &str) -> String {
        match self {
            HelmEnv::Local { kubeconfig, .. } => kubeconfig.clone(),
            _ => format!("{dir}/kubeconfig"),
        }
    }

    /// What goes before every `helm` (and `kubectl`) command of the cluster.
    pub fn prefix(&self) -> String {
        match self.dir() {
            None => kubeconfig::admin_env(),
            Some(d) => {
                // The id is a safe name: nothing here needs quoting, but it is quoted all the same.
                let p = |sub: &str| format!("{d}/{sub}");
                let (k, c, f, a) = (self.kubeconfig(&d), p("cache"), p("config"), p("data"));
                kubeconfig::exports(&[
                    ("KUBECONFIG", &k),
                    ("HELM_CACHE_HOME", &c),
                    ("HELM_CONFIG_HOME", &f),
                    ("HELM_DATA_HOME", &a),
                ])
                .expect("no NUL in a checked id")
            }
        }
    }

    /// kubectl with the cluster's kubeconfig, as its Helm.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self.prefix())
    }

    /// Make or refresh the environment on a master (`src/remote/helm_env.sh`); none for Legacy.
    pub fn prepare(&self) -> Option<String> {
        if let HelmEnv::Local { dir, .. } = self {
            // The operator's kubeconfig is used where it is: only the private homes are made.
            let q = |sub: &str| crate::quote::quote(&format!("{dir}/{sub}")).expect("no NUL in a checked path");
            return Some(format!("umask 077 && mkdir -p -- {} {} {}", q("cache"), q("config"), q("data")));
        }
        let d = self.dir()?;
        Some(remote::HELM_ENV.command(&[d.as_str(), ADMIN_CONF]).expect("no NUL in a checked id"))
    }

    /// Remove the environment from a master (`src/remote/helm_env_reset.sh`); none for Legacy
    /// (Helm's default homes are not ours to remove).
    pub fn reset(&self) -> Option<String> {
        if let HelmEnv::Local { dir, .. } = self {
            return Some(format!("rm -rf -- {}", crate::quote::quote(dir).expect("no NUL in a checked path")));
        }
        let d = self.dir()?;
        Some(remote::HELM_ENV_RESET.command(&[d.as_str()]).expect("no NUL in a checked id"))
    }
}

/// The cluster id a CNF operation uses, first that applies:
/// 1. the CNF's record names one: that one (an explicit `--cluster-uuid` naming another is refused:
///    the CNF's repositories are in the recorded environment);
/// 2. `--cluster-uuid`;
/// 3. a record of an older driver without one: the legacy environment;
/// 4. `--cluster-instance` (the cluster recorded by `instantiate-end`);
/// 5. the VNF instance id.
pub fn choose(
    explicit: Option<&ClusterUuid>,
    record: Option<Option<&str>>,
    cluster_instance: Option<&str>,
    instance: &str,
) -> Result<HelmEnv, String> {
    match (record, explicit) {
        (Some(Some(rec)), Some(e)) if e.id != rec => Err(format!(
            "names cluster '{}', but this CNF was instantiated in cluster '{rec}' (its repositories \
             are in that cluster's Helm environment)",
            e.id
        )),
        (Some(Some(rec)), _) => HelmEnv::cluster(rec),
        (_, Some(e)) => HelmEnv::cluster(&e.id),
        (Some(None), None) => Ok(HelmEnv::Legacy),
        (None, None) => HelmEnv::cluster(cluster_instance.unwrap_or(instance)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    #[test]
    fn cluster_uuid_is_namespace_colon_id_or_an_id() {
        assert_eq!(
            parse_cluster_uuid("cnf:0b9d8c51-7c1e-4a3e-9f7e-1d2c3b4a5f60").unwrap(),
            ClusterUuid { namespace: Some("cnf".into()), id: "0b9d8c51-7c1e-4a3e-9f7e-1d2c3b4a5f60".into() }
        );
        assert_eq!(parse_cluster_uuid("k8s-east").unwrap(), ClusterUuid { namespace: None, id: "k8s-east".into() });
        for bad in ["", ":id", "ns:", "Bad_NS:id", "ns:a:b", "ns:../x", "ns:.x", "-x", "a b", "ns:$(id)", "a/b"] {
            assert!(parse_cluster_uuid(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_cluster_uuid(&"x".repeat(129)).is_err());
    }

    #[test]
    fn the_cluster_id_comes_from_the_record_then_the_flag_then_the_cluster_then_the_instance() {
        let e = ClusterUuid { namespace: None, id: "east".into() };
        let c = |id: &str| HelmEnv::Cluster(id.into());
        assert_eq!(choose(Some(&e), None, Some("k8s"), "cnf1").unwrap(), c("east"));
        assert_eq!(choose(None, Some(Some("east")), Some("k8s"), "cnf1").unwrap(), c("east"));
        assert_eq!(choose(Some(&e), Some(Some("east")), None, "cnf1").unwrap(), c("east"));
        let err = choose(Some(&e), Some(Some("west")), None, "cnf1").unwrap_err();
        assert!(err.contains("'east'") && err.contains("'west'"), "{err}");
        assert_eq!(choose(None, Some(None), Some("k8s"), "cnf1").unwrap(), HelmEnv::Legacy);
        assert_eq!(choose(Some(&e), Some(None), None, "cnf1").unwrap(), c("east"));
        assert_eq!(choose(None, None, Some("k8s"), "cnf1").unwrap(), c("k8s"));
        assert_eq!(choose(None, None, None, "cnf1").unwrap(), c("cnf1"));
        // An instance id may start with '_' or '-': not a cluster id.
        assert!(choose(None, None, None, "_x").is_err());
    }

    #[test]
    fn every_command_of_a_cluster_runs_in_its_own_homes() {
        assert_eq!(HelmEnv::Legacy.prefix(), "export KUBECONFIG=/etc/kubernetes/admin.conf; ");
        assert_eq!(
            HelmEnv::cluster("east").unwrap().prefix(),
            "export KUBECONFIG=/var/lib/mgmt-driver/helm/east/kubeconfig \
             HELM_CACHE_HOME=/var/lib/mgmt-driver/helm/east/cache \
             HELM_CONFIG_HOME=/var/lib/mgmt-driver/helm/east/config \
             HELM_DATA_HOME=/var/lib/mgmt-driver/helm/east/data; "
        );
        assert!(HelmEnv::Legacy.prepare().is_none() && HelmEnv::Legacy.reset().is_none());
        let e = HelmEnv::cluster("east").unwrap();
        assert_eq!(
            remote::label(&e.prepare().unwrap()),
            Some("helm_env.sh /var/lib/mgmt-driver/helm/east /etc/kubernetes/admin.conf")
        );
        assert_eq!(remote::label(&e.reset().unwrap()), Some("helm_env_reset.sh /var/lib/mgmt-driver/helm/east"));
    }

    #[test]
    fn the_environment_programs_make_a_private_env_refresh_the_kubeconfig_and_reset_once() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("helm/east");
        let src = t.path().join("admin conf");
        std::fs::write(&src, "apiVersion: v1\n# first\n").unwrap();
        let (d, s) = (dir.display().to_string(), src.display().to_string());
        let run = |cmd: String| {
            let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        let prep = || remote::HELM_ENV.command(&[d.as_str(), s.as_str()]).unwrap();
        assert_eq!(run(prep()), "created\n");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("kubeconfig")), 0o600);
        for sub in ["cache", "config", "data"] {
            assert!(dir.join(sub).is_dir(), "{sub}");
        }
        std::fs::write(dir.join("config/repositories.yaml"), "repositories: []\n").unwrap();
        std::fs::write(&src, "apiVersion: v1\n# renewed\n").unwrap();
        assert_eq!(run(prep()), "kept\n");
        assert_eq!(std::fs::read_to_string(dir.join("kubeconfig")).unwrap(), "apiVersion: v1\n# renewed\n");
        assert!(dir.join("config/repositories.yaml").exists(), "a refresh keeps the repositories");
        let reset = || remote::HELM_ENV_RESET.command(&[d.as_str()]).unwrap();
        assert_eq!(run(reset()), "removed\n");
        assert!(!dir.exists());
        assert_eq!(run(reset()), "absent\n");
        // Without the source kubeconfig: the homes, no kubeconfig.
        std::fs::remove_file(&src).unwrap();
        assert_eq!(run(prep()), "created\n");
        assert!(dir.join("config").is_dir() && !dir.join("kubeconfig").exists());
    }
}
