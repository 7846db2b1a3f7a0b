//! The instance document (`state.rs`) in the state store: loaded, with a document of another
//! format version refused, and saved, stamped with the time. The store seals its secrets and
//! writes it atomically (`lifecycle/state.rs`).

use crate::cluster::state::{InstanceState, KIND, STATE_VERSION};
use crate::error::{Error, Result};
use crate::lifecycle::state::{now_rfc3339, Store};

/// The recorded document of instance `id`, if any (a newer or older format is refused), with
/// the superseded node records an earlier version's heal left migrated away
/// ([`InstanceState::migrate_same_address`]; saved with the hook's next write).
pub fn load(store: &Store, id: &str) -> Result<Option<InstanceState>> {
    let s: Option<InstanceState> = store.load_doc(id, KIND)?;
    let path = || store.doc_path(id, KIND).display().to_string();
    match s {
        Some(s) if s.version != STATE_VERSION => {
            Err(Error::input(path(), "version", format!("state version {} is not {STATE_VERSION}", s.version)))
        }
        Some(mut s) => {
            s.migrate_same_address().map_err(|m| Error::input(path(), "nodes", m))?;
            Ok(Some(s))
        }
        None => Ok(None),
    }
}

/// Record `st` under its own instance id.
pub fn save(st: &mut InstanceState, store: &Store) -> Result<()> {
    st.updated_at = Some(now_rfc3339());
    store.save_doc(&st.vnf_instance_id.clone(), KIND, st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::state::KIND;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        assert!(load(&st, "abc").unwrap().is_none());
        let mut s = InstanceState::new("abc");
        s.node("m1").installed = true;
        save(&mut s, &st).unwrap();
        let back = load(&st, "abc").unwrap().unwrap();
        assert!(back.installed("m1") && !back.installed("m2") && back.updated_at.is_some());
        st.save_doc("abc", KIND, &serde_json::json!({"version": 9, "vnf_instance_id": "abc"})).unwrap();
        assert!(load(&st, "abc").unwrap_err().to_string().contains("state version 9"));
    }

    /// The next hook on a document an earlier heal left with two records at one address loads
    /// it migrated, or refuses it naming the file and the nodes.
    #[test]
    fn a_document_with_a_superseded_record_loads_migrated_and_an_ambiguous_one_is_refused() {
        use crate::cluster::state::NodeState;
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let rec = |installed| NodeState { nic_ip: "10.0.0.2".into(), installed, ..Default::default() };
        let mut s = InstanceState::new("abc");
        s.nodes.insert("srv-w1".into(), rec(false));
        s.nodes.insert("srv-w1b".into(), rec(true));
        save(&mut s, &st).unwrap();
        let back = load(&st, "abc").unwrap().unwrap();
        assert_eq!(back.nodes.keys().collect::<Vec<_>>(), ["srv-w1b"]);
        s.nodes.insert("srv-w1".into(), rec(true));
        save(&mut s, &st).unwrap();
        let e = load(&st, "abc").unwrap_err().to_string();
        assert!(e.contains("abc.json") && e.contains("nodes srv-w1, srv-w1b record the same cluster address"), "{e}");
    }

    /// The request's secrets, each distinct so a hit names which one leaked.
    const SECRETS: [&str; 4] = ["M4ster-Pw", "W0rker-Pw", "Pr0xy-Pw", "bearer-token"];

    /// Every file in the state directory, recursively, as raw bytes.
    fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
        out
    }

    #[tokio::test]
    async fn no_secret_of_the_request_is_at_rest_after_instantiate_and_heal_still_reads_them() {
        use crate::cluster::prepare::Op;
        use crate::cluster::testkit::Fixture;
        let f = Fixture::new(1, 2);
        let mut body = Fixture::instantiate_body();
        let p = &mut body["additionalParams"]["k8s_cluster_installation_param"];
        p["master_node"]["password"] = SECRETS[0].into();
        p["worker_node"]["password"] = SECRETS[1].into();
        let proxy = format!("http://user1:{}@proxy.example:3128", SECRETS[2]);
        p["proxy"] = serde_json::json!({"http_proxy": proxy, "https_proxy": proxy, "no_proxy": "10.0.0.1",
                                        "k8s_node_cidr": "192.0.2.0/24"});
        let o = f.run(Op::InstantiateEnd, body, &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let all = files(&f.path("state"));
        assert!(
            all.iter().any(|(p, _)| p.ends_with("vnf1.json")),
            "{:?}",
            all.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        let mut hits = Vec::new();
        for (path, bytes) in &all {
            for s in SECRETS {
                if bytes.windows(s.len()).any(|w| w == s.as_bytes()) {
                    hits.push(format!("{s} in {path}"));
                }
            }
        }
        assert!(hits.is_empty(), "secrets at rest: {hits:?}");
        // The hooks still read them back: the recorded request and the bearer token are whole.
        let st = f.state();
        let params = &st["params"];
        assert_eq!(params["master_node"]["password"], SECRETS[0]);
        assert_eq!(params["proxy"]["https_proxy"], proxy.as_str());
        assert_eq!(st["bearer_token"], SECRETS[3]);
        // A later hook (SOL002 heal of a worker) runs on the recorded, sealed state.
        let before = f.execs().len();
        let o = f.run(Op::HealEnd, serde_json::json!({"vnfcInstanceId": ["w2"]}), &[]).await;
        assert!(o.error.is_none(), "{:?}", o.error);
        let execs = &f.execs()[before..];
        assert!(execs.iter().any(|e| e.starts_with("w2: ") && e.contains("install_k8s_cluster.sh")), "{execs:#?}");
    }
}
