//! What a hook run returns. While the steps run (some in parallel, finishing in any order) it
//! gathers each node's outcome and the vimConnectionInfo it hands back; at the end it is the
//! result document, and with the context, the warnings and the error, the run's [`Outcome`].

use std::sync::Mutex;

use serde_json::{json, Value};

use crate::error::Error;
use crate::request::{VimConnection, VimConnections};

/// What a hook run produced, for the result document.
pub struct Outcome {
    pub context: Value,
    pub result: Value,
    pub warnings: Vec<String>,
    pub error: Option<Error>,
}

/// The result being gathered.
pub struct Results {
    /// What happened to each node, in the order the steps finished.
    outcomes: Mutex<Vec<(String, String)>>,
    /// vimConnectionInfo handed in (request or VnfInstance); the hook updates it.
    vim_connections: Mutex<VimConnections>,
}

impl Results {
    pub fn new(vim_connections: VimConnections) -> Results {
        Results { outcomes: Mutex::new(Vec::new()), vim_connections: Mutex::new(vim_connections) }
    }

    pub fn outcome(&self, node: &str, what: String) {
        self.outcomes.lock().expect("outcomes").push((node.to_string(), what));
    }

    /// Our entry for the VIM `vim_name`, in place of any Kubernetes entry for the same URL or
    /// VIM name.
    pub fn set_vim_connection(&self, auth_url: &str, vim_name: &str, conn: VimConnection) {
        let mut vc = self.vim_connections.lock().expect("vim connections");
        vc.remove_kubernetes(Some(auth_url), vim_name);
        vc.push(&VimConnections::key_for(vim_name), conn);
    }

    /// No entry for the VIM `vim_name` any more (terminate, a whole-VNF heal).
    pub fn remove_vim_connection(&self, vim_name: &str) {
        self.vim_connections.lock().expect("vim connections").remove_kubernetes(None, vim_name);
    }

    /// The result document: the updated vimConnectionInfo, the VIM record and each node's
    /// outcome, in `order` (the cluster's: masters, then workers) whatever order the steps
    /// finished in.
    pub fn document(&self, order: &[&str], vim: Option<Value>) -> Value {
        let mut outcomes = self.outcomes.lock().expect("outcomes").clone();
        outcomes.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
        json!({
            "vimConnectionInfo": *self.vim_connections.lock().expect("vim connections"),
            "vim": vim,
            "nodes": outcomes.iter().map(|(n, o)| json!({"node": n, "outcome": o})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_in_cluster_order_whatever_order_they_came_in() {
        let r = Results::new(VimConnections::default());
        r.outcome("w1", "joined as worker".into());
        r.outcome("nfs1", "exported".into());
        r.outcome("m1", "installed".into());
        let d = r.document(&["m1", "w1"], None);
        let nodes: Vec<&str> = d["nodes"].as_array().unwrap().iter().map(|n| n["node"].as_str().unwrap()).collect();
        assert_eq!(nodes, ["m1", "w1", "nfs1"], "a node outside the cluster comes last");
        assert!(d["vim"].is_null());
    }
}
