//! `cnf uninstall --release R`: one release (OSM's uninstall of one KDU), waiting, and forgotten
//! in the record; the CNF's other releases, its repositories and charts stay. A record made by
//! `cnf install` goes with its last release. A release already gone is reported, not an error.

use serde_json::{json, Value};

use crate::cnf::ops::{cmd_timeout, Ctx, Record};
use crate::cnf::run::install::INSTALL_MARK;
use crate::error::Result;

pub async fn run(c: &Ctx<'_>, rec: &mut Record<'_>, release: &str) -> Result<Value> {
    let s = c.s;
    let ns = &c.params.namespace;
    // A plan shows the uninstall.
    let outcome = if s.release(release, ns, Some(("deployed".into(), 0))).await?.is_none() {
        "already absent"
    } else {
        s.run(s.helm.uninstall(release, ns, true)?, cmd_timeout(c)).await?;
        "uninstalled"
    };
    let recorded = rec.st.releases.remove(release).is_some();
    let install_record = rec.st.params.get(INSTALL_MARK).is_some();
    let record_removed = if install_record && rec.st.releases.is_empty() {
        rec.remove()?
    } else {
        if recorded {
            rec.save()?;
        }
        false
    };
    Ok(json!({"release": release, "namespace": ns, "outcome": outcome, "recordRemoved": record_removed}))
}
