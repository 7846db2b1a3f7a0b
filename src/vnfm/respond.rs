//! What goes back to the VNFM after an action: the instance with its `vimConnectionInfo` entry
//! replaced (only when the action worked: Tacker applies the instance before it looks at the
//! exit code, and a half-done record is not one to keep), the masked result and warnings, and
//! `user_script_err_handling_data.mgmt_driver` for a rollback or a retry. The printed document
//! (`HookResponse`) is the command's; this is its content.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::cluster::state::InstanceState;
use crate::error::Error;
use crate::vnfm::prepare::Call;
use crate::vnfm::run::Done;
use crate::vnfm::vim_entry::{self, Recorded};

/// The response's content.
#[derive(Default)]
pub struct Answer {
    /// The instance with its updated vimConnectionInfo, when the operation changed it.
    pub vnf_instance: Option<Value>,
    /// `user_script_err_handling_data.mgmt_driver`.
    pub mgmt_driver: Value,
    pub kubeconfig: Option<PathBuf>,
    /// Masked whatever the options: it is for logs and people.
    pub result: Value,
    pub warnings: Vec<String>,
    /// What failed; the response's error and the exit code.
    pub error: Option<Error>,
}

/// The fields of a cluster's recorded state its `vimConnectionInfo` entry is made of.
pub fn recorded(st: &InstanceState) -> Recorded<'_> {
    Recorded {
        vim_connection_info: st.vim_connection_info.as_ref(),
        vim: st.vim.as_ref(),
        bearer_token: st.bearer_token.as_deref(),
        ca_pem: st.facts.as_ref().map(|f| f.ca_pem.as_str()),
    }
}

/// The answer to `c` from what its action left (or the error that stopped it).
pub fn answer(c: &Call, done: Result<Done, Error>) -> Answer {
    let d = match done {
        Ok(d) => d,
        Err(e) => {
            return Answer { mgmt_driver: err_data(c, false, vec![], vec![]), error: Some(e), ..Default::default() }
        }
    };
    let ok = d.context_error.is_none();
    let mut vnf_instance = None;
    if let Some((st, vim_name)) = &d.cluster {
        // A failed operation returns no instance: Tacker applies it before it looks at the
        // exit code, and a half-done record is not one to keep.
        if ok {
            let entry = if d.removed { None } else { vim_entry::entry(c.doc.vnfm, &recorded(st)) };
            let conns = c.doc.vnf_instance.get("vimConnectionInfo").cloned().unwrap_or(Value::Null);
            let mut inst = c.doc.vnf_instance.clone();
            inst["vimConnectionInfo"] = vim_entry::replace(&conns, c.doc.vnfm, vim_name, entry);
            vnf_instance = Some(inst);
        }
    }
    Answer {
        vnf_instance,
        mgmt_driver: err_data(c, ok, d.joined, d.removed_nodes),
        kubeconfig: d.kubeconfig,
        // What the VNFM must store (the v2 entry's token, a compat password) is in
        // `vnf_instance` only.
        result: crate::secret::masked(&d.result),
        warnings: d.warnings,
        error: d.context_error,
    }
}

/// `user_script_err_handling_data.mgmt_driver`: what a rollback or a retry of this operation
/// needs to know.
fn err_data(c: &Call, finished: bool, joined: Vec<String>, removed: Vec<String>) -> Value {
    json!({"operation": c.doc.operation, "finished": finished, "joined": joined, "removed": removed})
}
