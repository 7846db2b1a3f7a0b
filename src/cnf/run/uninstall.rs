//! `cnf uninstall --release R`: one release (OSM's uninstall of one KDU), waiting, and forgotten
//! in the record; the CNF's other releases, its repositories and charts stay. A record made by
//! `cnf install` goes with its last release. A release already gone is reported, not an error.

use serde_json::{json, Value};

use crate::cnf::helm_remove;
use crate::cnf::ops::{cmd_timeout, Ctx, Record};
use crate::cnf::run::install::INSTALL_MARK;
use crate::error::{Error, Result};
use crate::lifecycle::Node;

pub async fn run(c: &Ctx<'_>, rec: &mut Record<'_>, release: &str) -> Result<Value> {
    let s = c.s;
    let ns = &c.params.namespace;
    // One Helm process in one exec (`helm_remove.sh`): a release Helm does not know is absent.
    let m = s.master();
    let cmd = helm_remove::command(&s.helm.env.prefix(), None, &[], &[(release.to_string(), ns.clone())])?;
    let outcome = match s.program(m, cmd, s.rt.timeouts.command + cmd_timeout(c)).await? {
        // A plan shows the uninstall.
        None => "uninstalled",
        Some((out, shown)) => {
            let got = helm_remove::parse(&out, &[release])
                .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), &shown, "the release removed", msg))?;
            match got.into_iter().next().map(|x| x.1) {
                Some(Ok(o)) => o,
                Some(Err(f)) => {
                    return Err(Error::Remote {
                        node: m.name().into(),
                        command: s.helm.uninstall(release, ns, true)?,
                        status: format!("exit {}", f.code),
                        stderr_tail: f.stderr_tail,
                    })
                }
                None => unreachable!("parse gives one outcome per release or fails"),
            }
        }
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
