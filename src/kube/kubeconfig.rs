//! Which kubeconfig a node-side command uses, and the `export ...; ` prefix that selects it.
//!
//! The cluster's admin kubeconfig is named here and nowhere else: the cluster steps, the legacy
//! Helm environment of a CNF and the `src/remote/` programs that run kubectl (which get it from
//! their caller's `export`, not from their own text) all read [`ADMIN_CONF`].

use crate::error::Result;
use crate::quote::quote;

/// The kubeconfig `kubeadm init` writes on a master: cluster-admin rights. Root-only on the node,
/// which is why every command that uses it runs as root.
pub const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";

/// `export NAME=VALUE ...; ` for a command line, every value quoted: what goes before a command
/// so that it (and everything after it in the same shell) runs with these variables.
pub fn exports(vars: &[(&str, &str)]) -> Result<String> {
    let mut s = String::from("export");
    for (name, value) in vars {
        s.push(' ');
        s.push_str(name);
        s.push('=');
        s.push_str(&quote(value)?);
    }
    s.push_str("; ");
    Ok(s)
}

/// `export KUBECONFIG=ADMIN_CONF; `: the prefix of every command that acts as the cluster's admin.
pub fn admin_env() -> String {
    exports(&[("KUBECONFIG", ADMIN_CONF)]).expect("a constant path has no NUL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_prefix_is_the_admin_conf_exported() {
        assert_eq!(admin_env(), "export KUBECONFIG=/etc/kubernetes/admin.conf; ");
        assert_eq!(exports(&[("A", "x y"), ("B", "it's")]).unwrap(), "export A='x y' B='it'\\''s'; ");
        assert!(exports(&[("A", "a\0")]).is_err());
    }
}
