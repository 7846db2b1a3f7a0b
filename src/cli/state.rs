//! `state`: upkeep of the state store itself. `state reseal` authenticates, once, the documents
//! an earlier version wrote ([`crate::lifecycle::reseal`]): the store refuses documents without
//! a MAC, and only the operator can say a directory's documents are theirs. The document kinds
//! are named here, the composition root, which knows every operation family.

use clap::Subcommand;
use serde_json::json;

use crate::cli::common::{Ctx, StateDir};
use crate::cli::envelope::Envelope;
use crate::console;
use crate::error::{exit, Result};
use crate::lifecycle::reseal;
use crate::render::Output;

#[derive(Subcommand, Debug)]
pub enum StateCmd {
    /// Authenticate every document of the state directory under the state key: once, after
    /// upgrading from a version that did not (docs/security.md). Nothing is written when a
    /// document cannot be read or was changed after it was authenticated.
    Reseal,
}

/// Every document kind of the store besides the cluster's (`<id>.json`).
const KINDS: [&str; 5] = [
    crate::cnf::ops::KIND,
    crate::cluster::storage_setup::KIND,
    crate::primitive::status::KIND,
    crate::ee::driver_key::DOC_KIND,
    crate::ee::record::DOC_KIND,
];

pub fn run(cmd: StateCmd, dir: StateDir, ctx: &Ctx) -> Result<i32> {
    let StateCmd::Reseal = cmd;
    let store = ctx.store(&dir.state_dir)?;
    let done = reseal::reseal(&store, &KINDS)?;
    let file = |r: &reseal::Resealed| store.doc_path(&r.id, &r.kind).display().to_string();
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new("state reseal", ctx.run.dry_run);
            env.result = json!({
                "stateDir": store.dir().display().to_string(),
                "documents": done.iter().map(|r| json!({"file": file(r), "upgraded": r.upgraded})).collect::<Vec<_>>(),
                "upgraded": done.iter().filter(|r| r.upgraded).count(),
            });
            env.print(ctx.output);
        }
        _ => {
            let verb = if ctx.run.dry_run { "would authenticate" } else { "authenticated" };
            for r in &done {
                let what = if r.upgraded { verb } else { "already authenticated" };
                console::out_line(&format!("{what}\t{}", file(r)));
            }
        }
    }
    Ok(exit::OK)
}
