//! The one kubectl command builder: `<environment>kubectl WORD...`, every word quoted with
//! [`crate::quote::quote`]. The cluster steps, a CNF's heal and services and the workload
//! operations build their kubectl lines here, so how kubectl is called (which kubeconfig, how a
//! value is quoted, how an uploaded manifest is applied and removed) is decided once.

use crate::error::Result;
use crate::kube::kubeconfig;
use crate::quote::quote;
use crate::remote::Program;

/// kubectl in one environment: the `export ...; ` text that goes before it (empty: the
/// kubeconfig the shell already has).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubectl {
    env: String,
}

impl Kubectl {
    /// kubectl after `env`, an `export ...; ` prefix (a CNF's Helm environment, for one).
    pub fn new(env: impl Into<String>) -> Kubectl {
        Kubectl { env: env.into() }
    }

    /// kubectl as the cluster's admin ([`kubeconfig::ADMIN_CONF`]), on a master.
    pub fn admin() -> Kubectl {
        Kubectl::new(kubeconfig::admin_env())
    }

    /// kubectl with the kubeconfig the shell already has: root's `~/.kube/config`, or one exported
    /// earlier on the same command line (the commands chained after the first).
    pub fn ambient() -> Kubectl {
        Kubectl::new("")
    }

    /// `kubectl WORD...` in this environment, every word quoted.
    pub fn args(&self, words: &[&str]) -> Result<String> {
        let mut s = format!("{}kubectl", self.env);
        for w in words {
            s.push(' ');
            s.push_str(&quote(w)?);
        }
        Ok(s)
    }

    /// [`args`](Self::args) then `-o jsonpath=TEMPLATE` (the template quoted).
    pub fn jsonpath(&self, words: &[&str], template: &str) -> Result<String> {
        Ok(format!("{} -o jsonpath={}", self.args(words)?, quote(template)?))
    }

    /// `kubectl apply -f FILE` of an uploaded manifest, then the file removed whatever the
    /// outcome (it may hold values meant only for the cluster); the apply's exit status is the
    /// command's.
    pub fn apply_and_remove(&self, file: &str) -> Result<String> {
        let f = quote(file)?;
        Ok(format!("{}; rc=$?; rm -f -- {f}; exit $rc", self.args(&["apply", "-f", file])?))
    }

    /// A `src/remote/` program that runs kubectl, in this environment (the program reads
    /// `KUBECONFIG` from it rather than naming a kubeconfig itself).
    pub(crate) fn program<S: AsRef<str>>(&self, p: &Program, args: &[S]) -> Result<String> {
        Ok(format!("{}{}", self.env, p.command(args)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_quoted_after_the_environment() {
        assert_eq!(
            Kubectl::admin().args(&["drain", "w 1", "--timeout=5s"]).unwrap(),
            "export KUBECONFIG=/etc/kubernetes/admin.conf; kubectl drain 'w 1' --timeout=5s"
        );
        assert_eq!(Kubectl::ambient().args(&["get", "$(id)"]).unwrap(), "kubectl get '$(id)'");
        assert_eq!(
            Kubectl::new("export KUBECONFIG=/k; ").jsonpath(&["get", "pv", "p"], "{.status.phase}").unwrap(),
            "export KUBECONFIG=/k; kubectl get pv p -o jsonpath='{.status.phase}'"
        );
        assert_eq!(
            Kubectl::ambient().apply_and_remove("d/it's.json").unwrap(),
            "kubectl apply -f 'd/it'\\''s.json'; rc=$?; rm -f -- 'd/it'\\''s.json'; exit $rc"
        );
        assert!(Kubectl::ambient().args(&["a\0"]).is_err());
        // The workload operations' lines (root's own kubeconfig): workload/kubectl.rs's form.
        assert_eq!(
            Kubectl::ambient().apply_and_remove(".mgmt-driver/workloads/d.web.json").unwrap(),
            "kubectl apply -f .mgmt-driver/workloads/d.web.json; rc=$?; rm -f -- .mgmt-driver/workloads/d.web.json; exit $rc"
        );
        assert_eq!(
            Kubectl::ambient().args(&["scale", "statefulset.apps/db", "-n", "ns1", "--replicas=3"]).unwrap(),
            crate::quote::join(&["kubectl", "scale", "statefulset.apps/db", "-n", "ns1", "--replicas=3"]).unwrap()
        );
    }

    #[test]
    fn a_program_runs_in_the_environment_and_is_still_shown_by_name() {
        let c = Kubectl::admin().program(&crate::remote::DELETE_NODE, &["w1"]).unwrap();
        assert!(c.starts_with("export KUBECONFIG=/etc/kubernetes/admin.conf; sh -c '"), "{c}");
        assert_eq!(crate::remote::label(&c), Some("delete_node.sh w1"));
    }
}
