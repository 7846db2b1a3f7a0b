//! Key rotation across the registered machines, in two phases that a re-run resumes:
//!
//! 1. every machine that holds one of our keys gets the new key (logging in with the keys it
//!    already trusts: the new and the old one are both offered), and a login with the new key
//!    alone is proven;
//! 2. once *every* such machine holds the new key, the old key is removed from each of them;
//!    only when it is gone everywhere does the store drop it (`KeyDoc::previous`).
//!
//! A machine that cannot be reached keeps the rotation pending (its record still lists the old
//! key's fingerprint; `key show` and `ee list` say so) and the run fails for it, naming it;
//! `key finish-rotation` picks up where this stopped.

use crate::ee::authorized_keys;
use crate::ee::driver_key::KeyDoc;
use crate::ee::record::Registry;
use crate::ee::register::answer_check;
use crate::error::Result;
use crate::inventory::{Auth, Host};
use crate::lifecycle::state::Store;
use crate::lifecycle::Runner;

/// What one pass did: per machine, the step's result (`None`: nothing to do there).
#[derive(Debug, Default)]
pub struct Pass {
    pub results: Vec<(String, &'static str, Result<()>)>,
    /// The old key is gone from every machine and from the store.
    pub finished: bool,
}

/// Names of the machines the rotation waits for: those that still lack the new key, or, once
/// every machine has it, those that still hold the old one.
pub fn pending(reg: &Registry, keys: &KeyDoc) -> Vec<String> {
    let Some(prev) = &keys.previous else { return vec![] };
    let ours = || reg.ees.iter().filter(|e| !e.driver_keys.is_empty());
    let lacking: Vec<String> =
        ours().filter(|e| !e.driver_keys.contains(&keys.current.fingerprint)).map(|e| e.name.clone()).collect();
    if !lacking.is_empty() {
        return lacking;
    }
    ours().filter(|e| e.driver_keys.contains(&prev.fingerprint)).map(|e| e.name.clone()).collect()
}

/// A host that logs in with the new key only.
fn new_key_only(h: &Host, keys: &KeyDoc) -> Host {
    Host { auth: Auth { driver_keys: vec![keys.current.secret()], ..Auth::default() }, ..h.clone() }
}

/// Run both phases as far as they go; `reg` and `keys` are updated in place for the caller to
/// save (also after a partial pass: what was done is recorded).
pub async fn advance(rt: &Runner, store: &Store, reg: &mut Registry, keys: &mut KeyDoc) -> Pass {
    let mut pass = Pass::default();
    let Some(prev) = keys.previous.clone() else {
        pass.finished = true;
        return pass;
    };
    let cur = keys.current.fingerprint.clone();
    // Phase 1: install the new key where it is missing.
    let todo: Vec<Host> = reg
        .ees
        .iter()
        .filter(|e| !e.driver_keys.is_empty() && !e.driver_keys.contains(&cur))
        .map(|e| e.to_host(store, Some(keys)))
        .collect();
    let refs: Vec<&Host> = todo.iter().collect();
    if !refs.is_empty() {
        rt.phase("install the new key", &refs, true);
    }
    let k: &KeyDoc = keys;
    let results = rt
        .each(&refs, |h| async move {
            let r = async {
                rt.exec(h, authorized_keys::add(k.current.blob())?).await?;
                rt.forget(h).await;
                let only = new_key_only(h, k);
                rt.exec(&only, answer_check()).await?;
                rt.forget(&only).await;
                Ok(())
            }
            .await;
            rt.forget(h).await;
            r
        })
        .await;
    for (h, r) in results {
        if r.is_ok() {
            if let Some(e) = reg.find_mut(&h.name) {
                e.driver_keys.push(cur.clone());
            }
        }
        pass.results.push((h.name.clone(), "install", r));
    }
    if reg.ees.iter().any(|e| !e.driver_keys.is_empty() && !e.driver_keys.contains(&cur)) {
        return pass;
    }
    // Phase 2: every machine has the new key; remove the old one.
    let todo: Vec<Host> = reg
        .ees
        .iter()
        .filter(|e| e.driver_keys.contains(&prev.fingerprint))
        .map(|e| new_key_only(&e.to_host(store, Some(keys)), keys))
        .collect();
    let refs: Vec<&Host> = todo.iter().collect();
    if !refs.is_empty() {
        rt.phase("remove the old key", &refs, true);
    }
    let old = &prev;
    let results = rt
        .each(&refs, |h| async move {
            let r = rt.exec(h, authorized_keys::remove(old.blob())?).await.map(|_| ());
            rt.forget(h).await;
            r
        })
        .await;
    for (h, r) in results {
        if r.is_ok() {
            if let Some(e) = reg.find_mut(&h.name) {
                e.driver_keys.retain(|f| f != &prev.fingerprint);
            }
        }
        pass.results.push((h.name.clone(), "remove", r));
    }
    if pending(reg, keys).is_empty() {
        keys.previous = None;
        pass.finished = true;
    }
    pass
}
