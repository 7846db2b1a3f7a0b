//! An audit, as a test: every struct that holds a password, a token or a key, formatted with
//! `{:?}` (as a log line, a panic or a `dbg!` would), shows none of them. A struct that gains a
//! secret field belongs here.

use serde_json::{json, Map, Value};

const SECRETS: [&str; 7] = ["Node-Pw-1", "Proxy-Pw-2", "Bearer-3", "Helm-Pw-4", "Repo-Pw-5", "Env-Pw-6", "Access-Pw-7"];

fn assert_clean(what: &str, shown: String) {
    for s in SECRETS {
        assert!(!shown.contains(s), "{what} shows {s} under {{:?}}: {shown}");
    }
    assert!(shown.contains(crate::secret::MASK), "{what} masks nothing: {shown}");
}

fn cluster_params() -> Map<String, Value> {
    json!({"k8s_cluster_installation_param": {
        "script_path": "Scripts/install_k8s_cluster.sh",
        "master_node": {"aspect_id": "m", "ssh_cp_name": "m_CP", "username": "ubuntu", "password": "Node-Pw-1", "cluster_cp_name": "vip_CP"},
        "worker_node": {"aspect_id": "w", "ssh_cp_name": "w_CP", "username": "ubuntu", "password": "Node-Pw-1"},
        "proxy": {"http_proxy": "http://u:Proxy-Pw-2@p:3128", "https_proxy": "http://u:Proxy-Pw-2@p:3128"},
        "script_environment": {"REGISTRY_PASSWORD": "Env-Pw-6", "MIRROR": "https://u:Env-Pw-6@mirror/"},
        "private_registry_connection_info": [{"connection_type": "1", "server": "reg:5000", "username": "puller", "password": "Repo-Pw-5"}]
    }})
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn no_struct_that_holds_a_secret_prints_it_under_debug() {
    let ap = cluster_params();
    let p = crate::cluster::params::ClusterParams::from_additional_params(
        &ap,
        "req.json",
        "i1",
        &crate::secret_ref::Policy::Tenant,
    )
    .unwrap();
    assert_clean("ClusterParams", format!("{p:?}"));
    assert_clean("Registry", format!("{:?}", p.registries[0]));

    let mut st = crate::cluster::state::InstanceState::new("i1");
    st.params = ap["k8s_cluster_installation_param"].clone();
    st.bearer_token = Some("Bearer-3".into());
    st.vim = Some(json!({"auth_cred": {"bearer_token": "Bearer-3"}}));
    st.master_login_password = Some("Node-Pw-1".into());
    assert_clean("InstanceState", format!("{st:?}"));

    let conn = json!({"vimType": "kubernetes", "accessInfo": {"username": "a", "password": "Access-Pw-7", "bearer_token": "Bearer-3"},
                      "extra": {"helm_info": {"masternode_ip": ["192.0.2.1"], "masternode_username": "root", "masternode_password": "Helm-Pw-4"}}});
    let req: crate::request::InstantiateRequest =
        serde_json::from_value(json!({"flavourId": "s", "vimConnectionInfo": [conn], "additionalParams": ap})).unwrap();
    assert_clean("InstantiateRequest", format!("{req:?}"));
    let vc: crate::request::VimConnection = serde_json::from_value(conn.clone()).unwrap();
    assert_clean("VimConnection", format!("{vc:?}"));
    // The hook protocol's documents: the request's params, the answer's v2 entry with its token.
    let doc = json!({"operation": "instantiate_end", "vnf_instance": {"id": "i1", "vimConnectionInfo": {"k": conn.clone()}},
                     "request": {"flavourId": "s", "additionalParams": ap}});
    let hook: crate::vnfm::document::HookRequest = serde_json::from_value(doc.clone()).unwrap();
    assert_clean("HookRequest", format!("{hook:?}"));
    let mut resp = crate::cli::vnfm_hook::HookResponse::new("instantiate_end", false, Map::new());
    resp.vnf_instance = Some(doc["vnf_instance"].clone());
    assert_clean("HookResponse", format!("{resp:?}"));
    for (name, shown) in [
        (
            "ScaleRequest",
            format!(
                "{:?}",
                serde_json::from_value::<crate::request::ScaleRequest>(
                    json!({"type": "SCALE_OUT", "aspectId": "a", "additionalParams": {"token": "Bearer-3"}})
                )
                .unwrap()
            ),
        ),
        (
            "HealRequest",
            format!(
                "{:?}",
                serde_json::from_value::<crate::request::HealRequest>(
                    json!({"additionalParams": {"password": "Node-Pw-1"}})
                )
                .unwrap()
            ),
        ),
        (
            "TerminateRequest",
            format!(
                "{:?}",
                serde_json::from_value::<crate::request::TerminateRequest>(
                    json!({"additionalParams": {"password": "Node-Pw-1"}})
                )
                .unwrap()
            ),
        ),
    ] {
        assert_clean(name, shown);
    }

    let hi = crate::cnf::helm_info::parse(&conn["extra"]["helm_info"], "at").unwrap();
    assert_eq!(hi.password.as_deref(), Some("Helm-Pw-4"));
    assert_clean("HelmInfo", format!("{hi:?}"));

    let rel = crate::cnf::ops::ReleaseState { values: json!({"db": {"password": "Repo-Pw-5"}}), ..Default::default() };
    let cnf = crate::cnf::ops::CnfState {
        params: json!({"using_helm_install_param": [{"exthelmrepo_password": "Repo-Pw-5", "exthelmrepo_url": "https://u:Repo-Pw-5@charts/"}],
                       "__helm_info": conn["extra"]["helm_info"]}),
        releases: [("r".to_string(), rel.clone())].into(),
        ..Default::default()
    };
    assert_clean("ReleaseState", format!("{rel:?}"));
    assert_clean("CnfState", format!("{cnf:?}"));

    // Execution environments and primitives: a record's password, the driver's private key,
    // a run's secret-named parameter.
    let rec = crate::ee::record::EeRecord {
        id: "i".into(),
        name: "e1".into(),
        host: "192.0.2.1".into(),
        port: 22,
        user: "ops".into(),
        password: Some("Node-Pw-1".into()),
        identity_file: None,
        host_key_check: crate::inventory::HostKeyCheck::AcceptNew,
        host_key: None,
        namespace: None,
        driver_keys: vec![],
        registered: "t".into(),
    };
    assert_clean("EeRecord", format!("{rec:?}"));
    assert_clean("Registry", format!("{:?}", crate::ee::record::Registry { ees: vec![rec.clone()] }));
    let key = crate::ee::driver_key::DriverKey::generate(crate::ee::driver_key::KeyType::Ed25519).unwrap();
    let kd = crate::ee::driver_key::KeyDoc { current: key.clone(), previous: Some(key) };
    let shown = format!("{kd:?}");
    assert!(!shown.contains("PRIVATE KEY") && !shown.contains(&kd.current.private_key), "{shown}");
    assert_clean("KeyDoc", shown);
    let auth = crate::inventory::Auth { driver_keys: kd.login_keys(), ..Default::default() };
    assert!(!format!("{auth:?}").contains("PRIVATE KEY"));
    let mut params = Map::new();
    params.insert("db_password".into(), json!("Env-Pw-6"));
    let run = crate::primitive::status::RunRecord::new("r1", "p", "e1", params);
    assert_clean("RunRecord", format!("{run:?}"));
}

/// The storage server's password (storage slice): in the params and in the resolved setup.
#[test]
fn the_storage_servers_password_is_masked_under_debug() {
    let mut ap = cluster_params();
    ap["k8s_cluster_installation_param"]["storage_server"] = json!({
        "ssh_cp_name": "s_CP", "username": "ubuntu", "password": "Node-Pw-1",
        "cinder_volume_setup_params": [{"volume_resource_id": "v", "mount_to": "/volume"}],
        "nfs_server_setup_params": [{"export_dir": "/volume/a", "export_to": "10.0.0.0/24"}]});
    let p = crate::cluster::params::ClusterParams::from_additional_params(
        &ap,
        "req.json",
        "i1",
        &crate::secret_ref::Policy::Tenant,
    )
    .unwrap();
    let srv = p.storage.as_ref().and_then(|s| s.server.clone()).expect("a storage server");
    assert_clean("ClusterParams with storage", format!("{p:?}"));
    assert_clean("StorageServer", format!("{srv:?}"));
    let host = crate::inventory::Host {
        auth: crate::inventory::Auth { password: Some(srv.password.clone()), ..Default::default() },
        become_password: Some(srv.password.clone()),
        ..crate::inventory::Host::for_test("nfs1", "192.0.2.5")
    };
    let node = crate::cluster::topology::ClusterNode {
        host,
        role: crate::lifecycle::Role::Node,
        nic_ip: "192.0.2.5".into(),
        k8s_name: "nfs1".into(),
        placement: Default::default(),
    };
    let setup = crate::cluster::storage_setup::StorageSetup {
        server: Some(crate::cluster::storage_setup::ServerNode { node, params: srv, devices: vec!["/dev/vdb".into()] }),
        pvs: vec![],
        healed: false,
        warnings: vec![],
    };
    assert_clean("StorageSetup", format!("{setup:?}"));
}
