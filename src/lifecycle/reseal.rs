//! `state reseal`: the operator's one-time upgrade of a state directory to authenticated
//! documents ([`super::seal`]). The store refuses a document without its MAC, since nothing
//! tells an earlier version's document from one someone else put there; the operator, who
//! knows the directory is theirs, says so once with this command, which reads every document
//! (an earlier version's `v1` values opened with the key) and writes it back sealed and
//! authenticated.
//!
//! All or nothing: every document is read and checked first, and nothing is written when one
//! of them cannot be (a document with a MAC that does not match is reported, never blessed: it
//! was changed after it was authenticated). A document already authenticated is left as it is.
//! A plan (`--dry-run`) says what would be done and writes nothing.

use serde_json::Value;

use crate::error::Result;
use crate::lifecycle::seal;
use crate::lifecycle::state::Store;

/// One document of the directory and what `reseal` did (or, in a plan, would do) with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resealed {
    pub id: String,
    pub kind: String,
    /// `true`: written again, sealed and authenticated; `false`: it was already.
    pub upgraded: bool,
}

/// Every document of `store` authenticated; `kinds` are the document kinds the store holds
/// besides the cluster's (`""`), to tell `<id>.<kind>.json` from an id with a dot in it.
pub fn reseal(store: &Store, kinds: &[&str]) -> Result<Vec<Resealed>> {
    // Each document's lock is held from its check to its write: no run changes it in between.
    let mut docs = Vec::new();
    for (id, kind) in documents(store, kinds)? {
        let lock = store.lock(&id, &kind)?;
        let Some(raw) = store.read_raw(&id, &kind)? else { continue };
        if seal::is_authenticated(&raw) {
            store.open_sealed(&id, &kind, raw)?;
            docs.push((Resealed { id, kind, upgraded: false }, None, lock));
        } else {
            let opened = store.open_legacy(&id, &kind, raw)?;
            docs.push((Resealed { id, kind, upgraded: true }, Some(opened), lock));
        }
    }
    let mut done = Vec::new();
    for (r, opened, _lock) in docs {
        if let Some(doc) = opened {
            store.save_doc::<Value>(&r.id, &r.kind, &doc)?;
        }
        done.push(r);
    }
    Ok(done)
}

/// The (id, kind) of every `*.json` document in the store's directory, sorted; none when the
/// directory does not exist (a plan before any run).
fn documents(store: &Store, kinds: &[&str]) -> Result<Vec<(String, String)>> {
    let dir = store.dir();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(crate::error::Error::input(dir.display().to_string(), "state", e.to_string())),
    };
    let mut out: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_string))
        .filter(|stem| !stem.starts_with('.'))
        .map(|stem| split(&stem, kinds))
        .collect();
    out.sort();
    Ok(out)
}

/// `<id>.<kind>` when the stem ends in a known kind, else the cluster document `<id>`.
fn split(stem: &str, kinds: &[&str]) -> (String, String) {
    match stem.rsplit_once('.') {
        Some((id, kind)) if kinds.contains(&kind) && !id.is_empty() => (id.to_string(), kind.to_string()),
        _ => (stem.to_string(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::state_key::StateKey;
    use serde_json::json;

    const KINDS: [&str; 2] = ["cnf", "key"];

    #[test]
    fn file_names_split_into_id_and_kind() {
        assert_eq!(split("i1", &KINDS), ("i1".into(), "".into()));
        assert_eq!(split("i1.cnf", &KINDS), ("i1".into(), "cnf".into()));
        assert_eq!(split("a.b", &KINDS), ("a.b".into(), "".into()));
        assert_eq!(split("a.b.key", &KINDS), ("a.b".into(), "key".into()));
    }

    #[test]
    fn earlier_documents_are_upgraded_current_ones_kept_and_a_tamper_stops_everything() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let key = || StateKey::at(d.path().join("k"));
        let st = Store::open_with_key(&dir, key()).unwrap();
        st.save_doc("cur", "", &json!({"password": "Pw-cur"})).unwrap();
        let cur = std::fs::read(st.doc_path("cur", "")).unwrap();
        // A plain document from before sealing, with a secret and without.
        std::fs::write(st.doc_path("old", ""), r#"{"params": {"password": "Pw-old"}, "n": 1}"#).unwrap();
        std::fs::write(st.doc_path("old", "cnf"), r#"{"releases": {}}"#).unwrap();
        assert!(st.load_doc::<Value>("old", "").unwrap_err().to_string().contains("state reseal"));
        // A plan changes nothing.
        let plan = reseal(&Store::read_only_with_key(&dir, key()), &KINDS).unwrap();
        assert_eq!(plan.iter().filter(|r| r.upgraded).count(), 2, "{plan:?}");
        assert!(st.load_doc::<Value>("old", "").is_err());
        let done = reseal(&st, &KINDS).unwrap();
        let upgraded: Vec<_> = done.iter().filter(|r| r.upgraded).map(|r| format!("{}.{}", r.id, r.kind)).collect();
        assert_eq!(upgraded, ["old.", "old.cnf"]);
        assert_eq!(std::fs::read(st.doc_path("cur", "")).unwrap(), cur, "an authenticated document is kept");
        assert_eq!(st.load_doc::<Value>("old", "").unwrap().unwrap()["params"]["password"], "Pw-old");
        assert!(!std::fs::read_to_string(st.doc_path("old", "")).unwrap().contains("Pw-old"));
        assert_eq!(st.load_doc::<Value>("old", "cnf").unwrap().unwrap(), json!({"releases": {}}));
        // A changed authenticated document is never blessed, and stops the whole pass.
        let text = std::fs::read_to_string(st.doc_path("old", "")).unwrap().replace("\"n\": 1", "\"n\": 2");
        std::fs::write(st.doc_path("old", ""), text).unwrap();
        std::fs::write(st.doc_path("zz", ""), r#"{"n": 1}"#).unwrap();
        let e = reseal(&st, &KINDS).unwrap_err().to_string();
        assert!(e.contains("old.json") && e.contains("/state_mac") && e.contains("does not match"), "{e}");
        assert!(st.load_doc::<Value>("zz", "").is_err(), "nothing was written");
    }
}
