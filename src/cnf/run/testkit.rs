//! The CNF operations' test fixture: two masters on the scripted fake transport, a request
//! and a vimConnectionInfo in a temporary folder, and the real `prepare` and `run`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cnf::run::{prepare, run, Outcome, Prepared};
use crate::cnf::{Inputs, Op};
use crate::error::{Error, Result};
use crate::event::Events;
use crate::lifecycle::state::Store;
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::transport::fake::FakeConnector;

pub const M1: &str = "master-192.0.2.11";
pub const M2: &str = "master-192.0.2.12";

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub fake: FakeConnector,
}

pub fn status(s: &str, rev: u64) -> String {
    json!({"name": "vdu2", "info": {"status": s}, "version": rev, "namespace": "cnf"}).to_string()
}

/// What `helm version --short` prints in the fixture, as `helm_prepare.sh` reports it.
pub const HELM3: &str = "helm-version: v3.17.3+g2a7b0d1\n";

/// One record of `helm_apply.sh` (`cnf/helm_apply.rs`).
pub fn record(kind: &str, rel: &str, word: &str, body: &str) -> String {
    format!("@@mgmt-driver {kind} {rel} {word} {}\n{body}\n", body.len())
}

/// What `helm_apply.sh` prints for release `rel` in `ns` that was `before` (`absent/0`,
/// `deployed/1`, ...) and was then installed or upgraded (`verb`) to revision `rev`, deployed,
/// with a Service of its name and `config` over the chart's defaults `{"replicaCount": 1}`.
pub fn applied(rel: &str, ns: &str, before: &str, verb: &str, rev: u64, config: Value) -> String {
    record("status", rel, before, "") + &record("release", rel, verb, &release_json(rel, ns, rev, config))
}

/// What `helm install|upgrade -o json` prints for release `rel` in `ns` at revision `rev`,
/// deployed, with a Service of its name and `config` over the chart's `{"replicaCount": 1}`.
pub fn release_json(rel: &str, ns: &str, rev: u64, config: Value) -> String {
    json!({"name": rel, "namespace": ns, "version": rev, "info": {"status": "deployed"},
        "manifest": format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {rel}\n"),
        "config": config, "chart": {"values": {"replicaCount": 1}}})
    .to_string()
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let vci = json!([{"id": "x", "vimId": "y", "vimType": "kubernetes", "extra": {"helm_info": {
            "masternode_ip": ["192.0.2.11", "192.0.2.12"], "masternode_username": "root", "masternode_password": "pw"}}}]);
        std::fs::write(dir.path().join("vci.json"), vci.to_string()).unwrap();
        let req = json!({"flavourId": "simple", "additionalParams": {"use_helm": "true", "namespace": "cnf", "using_helm_install_param": [{
            "exthelmchart": "true", "helmreleasename": "vdu2", "helmrepositoryname": "labrepo",
            "helmchartname": "nginxlab", "exthelmrepo_url": "http://192.0.2.50/charts"}]}});
        std::fs::write(dir.path().join("req.json"), req.to_string()).unwrap();
        let fake = FakeConnector::new();
        fake.reply(None, "helm_prepare.sh", HELM3)
            .reply(None, "status --namespace cnf -o json -- vdu2", &status("deployed", 2))
            .reply(
                None,
                "get manifest --namespace cnf -- vdu2",
                "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: vdu2\n",
            )
            .reply(None, "get values --namespace cnf -o json --all -- vdu2", r#"{"replicaCount": 1}"#);
        // `cnf upgrade` and `cnf scale`: the release from the upgrade itself.
        fake.reply(None, "; helm upgrade --namespace cnf ", &release_json("vdu2", "cnf", 3, json!({})));
        let f = Fixture { dir, fake };
        f.reply_applied("vdu2", "cnf", &applied("vdu2", "cnf", "deployed/1", "upgrade", 2, json!({})));
        f.reply_removed("cnf1", &["vdu2"]);
        f
    }

    /// What `helm_remove.sh` prints for instance `id` whose releases `rels` it uninstalls (the
    /// other masters' runs, which remove charts and repositories only, print nothing read).
    pub fn reply_removed(&self, id: &str, rels: &[&str]) {
        let out: String = rels.iter().map(|r| format!("@@mgmt-driver uninstalled {r} - 0\n\n")).collect();
        self.fake.reply(None, &format!("helm_remove.sh /var/tacker/helm/{id} "), &out);
    }

    /// What the node programs print for releases that start with `rel` in `ns`: `helm_apply.sh`
    /// its records, `helm_prepare.sh` with releases the version line and them.
    pub fn reply_applied(&self, rel: &str, ns: &str, records: &str) {
        let with_version = format!("{HELM3}{records}");
        self.fake
            .reply(None, &format!("helm_apply.sh {rel} {ns} "), records)
            .reply(None, &format!("'' {rel} {ns} "), &with_version)
            .reply(None, &format!(" 0 {rel} {ns} "), &with_version);
    }

    pub fn inputs(&self) -> Inputs {
        Inputs {
            vnf_instance_id: Some("cnf1".into()),
            request: Some(self.dir.path().join("req.json").into()),
            vim_connection_info: Some(self.dir.path().join("vci.json")),
            timeout: Duration::from_secs(300),
            status_interval: Duration::from_secs(60),
            // A request file the operator named, who allows the tests' own variables.
            secret_refs: crate::secret_ref::Policy::Operator(crate::secret_ref::Allowed {
                env: vec!["CNFIN_*".into()],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The inputs of an operation on `id` without a request (an operator's verb).
    pub fn inputs_for(&self, id: &str) -> Inputs {
        Inputs { vnf_instance_id: Some(id.into()), request: None, ..self.inputs() }
    }

    pub async fn instantiate(&self) -> Result<Outcome> {
        let p = self.prepare(&self.inputs());
        let p = p?;
        let rt = Runner::new(Arc::new(self.fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default());
        run(&Op::Instantiate, &self.inputs(), p, rt).await
    }

    /// `prepare`, waiting out a lock that a child process of another test still shares from
    /// fork until its exec (see cluster/testkit.rs); a real run is one operation per process.
    pub fn prepare(&self, inputs: &Inputs) -> Result<Prepared> {
        for _ in 0..100 {
            let store = Store::open(&self.dir.path().join("state")).unwrap();
            match prepare(&Op::Instantiate, inputs, store) {
                Err(Error::Input { field, .. }) if field == "lock" => std::thread::sleep(Duration::from_millis(10)),
                other => return other,
            }
        }
        panic!("the instance lock stayed held")
    }
}

/// Run `op` for `id` with request `req` (written to the fixture's dir) on the fake.
pub async fn run_op(f: &Fixture, op: Op, id: &str, req: Option<Value>) -> Result<Outcome> {
    run_op_events(f, op, id, req).await.0
}

/// [`run_op`], and every event it emitted, as JSON lines.
pub async fn run_op_events(f: &Fixture, op: Op, id: &str, req: Option<Value>) -> (Result<Outcome>, String) {
    let (events, mut rx) = Events::channel();
    let r = run_op_with(f, op, id, req, events).await;
    let mut lines = String::new();
    while let Ok(e) = rx.try_recv() {
        lines.push_str(&serde_json::to_string(&e).unwrap());
        lines.push('\n');
    }
    (r, lines)
}

pub async fn run_op_with(f: &Fixture, op: Op, id: &str, req: Option<Value>, events: Events) -> Result<Outcome> {
    let request = req.map(|r| {
        let p = f.dir.path().join(format!("req-{id}.json"));
        std::fs::write(&p, r.to_string()).unwrap();
        p.into()
    });
    let inputs = Inputs { vnf_instance_id: Some(id.into()), request, ..f.inputs() };
    run_inputs(f, op, inputs, events).await
}

/// Run `op` with `inputs` as given, and every event it emitted, as JSON lines.
pub async fn run_inputs_events(f: &Fixture, op: Op, inputs: Inputs) -> (Result<Outcome>, String) {
    let (events, mut rx) = Events::channel();
    let r = run_inputs(f, op, inputs, events).await;
    let mut lines = String::new();
    while let Ok(e) = rx.try_recv() {
        lines.push_str(&serde_json::to_string(&e).unwrap());
        lines.push('\n');
    }
    (r, lines)
}

pub async fn run_inputs(f: &Fixture, op: Op, inputs: Inputs, events: Events) -> Result<Outcome> {
    let mut p = None;
    for _ in 0..100 {
        let store = Store::open(&f.dir.path().join("state")).unwrap();
        match prepare(&op, &inputs, store) {
            Err(Error::Input { field, .. }) if field == "lock" => std::thread::sleep(Duration::from_millis(10)),
            other => {
                p = Some(other?);
                break;
            }
        }
    }
    let rt = Runner::new(Arc::new(f.fake.clone()), events, FanOut::default(), Timeouts::default());
    run(&op, &inputs, p.expect("the instance lock stayed held"), rt).await
}

/// The CNF of [`round_trip_rows`]: three releases of one repository, vdu2's replicas scalable.
fn three_releases() -> Value {
    let item = |rel: &str| {
        json!({"exthelmchart": "true", "helmreleasename": rel, "helmrepositoryname": "labrepo",
               "helmchartname": "nginxlab", "exthelmrepo_url": "http://192.0.2.50/charts"})
    };
    json!({"flavourId": "simple", "additionalParams": {"use_helm": "true", "namespace": "cnf",
        "using_helm_install_param": [item("vdu1"), item("vdu2"), item("vdu3")],
        "helm_replica_values": {"vdu2_aspect": "replicaCount"},
        "vdu_mapping": {
            "VDU1": {"kind": "Deployment", "name": "vdu1-nginxlab", "helmreleasename": "vdu1"},
            "VDU2": {"kind": "Deployment", "name": "vdu2-nginxlab", "helmreleasename": "vdu2", "aspect_id": "vdu2_aspect"},
            "VDU3": {"kind": "Deployment", "name": "vdu3-nginxlab", "helmreleasename": "vdu3"}}}})
}

/// One operation on the fixture with every call `latency` long: (critical-path round trips,
/// round trips in all), and per master.
async fn measured(f: &Fixture, op: Op, req: Option<Value>, atomic: bool) -> (usize, usize, usize, usize) {
    let latency = Duration::from_secs(1);
    f.fake.with_latency(latency);
    let (n, n1, n2) = (f.fake.round_trips(), f.fake.round_trips_on(M1), f.fake.round_trips_on(M2));
    let start = tokio::time::Instant::now();
    let request = req.map(|r| {
        let p = f.dir.path().join("req-rt.json");
        std::fs::write(&p, r.to_string()).unwrap();
        p.into()
    });
    let inputs = Inputs { vnf_instance_id: Some("cnf1".into()), request, atomic, ..f.inputs() };
    run_inputs(f, op, inputs, Events::channel().0).await.expect("the operation runs");
    let critical = (start.elapsed().as_secs_f64() / latency.as_secs_f64()).round() as usize;
    let (t, t1, t2) = (f.fake.round_trips() - n, f.fake.round_trips_on(M1) - n1, f.fake.round_trips_on(M2) - n2);
    assert_eq!(t, t1 + t2);
    (critical, t, t1, t2)
}

/// `cnf_heal.sh`'s records for Deployments `names` (labels `app=NAME`), every rollout done, a
/// Ready pod each.
pub fn healed(names: &[&str]) -> String {
    let rec = |kind: &str, w: &str, word: &str, body: &str| {
        format!("@@mgmt-driver {kind} {w} {word} {}\n{body}\n", body.len())
    };
    let mut out = String::new();
    for n in names {
        out += &rec("restarted", &format!("deployment/{n}"), "-", "");
    }
    for n in names {
        out += &rec("ready", &format!("deployment/{n}"), "-", "");
    }
    let objects: Vec<Value> = names
        .iter()
        .map(|n| json!({"kind": "Deployment", "metadata": {"name": n}, "spec": {"selector": {"matchLabels": {"app": n}}}}))
        .collect();
    let pods: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"metadata": {"name": format!("{n}-x"), "uid": "0af1", "labels": {"app": n}},
                        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    out += &rec("objects", "-", "get:0", &json!({"kind": "List", "items": objects}).to_string());
    out += &rec("pods", "-", "get:0", &json!({"items": pods}).to_string());
    out
}

/// The round trips of the CNF operations on the fixture (two masters; a CNF of three releases):
/// `(operation, critical-path round trips, round trips in all)`. The critical path is the
/// virtual time the operation took over the fake's latency (a connect costs none: its handshake
/// is paid once per master, in parallel, whatever the operation). Run it under
/// `#[tokio::test(start_paused = true)]`: the latency is on tokio's clock.
pub async fn round_trip_rows() -> Vec<(String, usize, usize)> {
    let rows = round_trip_table().await;
    rows.into_iter().map(|(what, c, t, _, _)| (what, c, t)).collect()
}

/// [`round_trip_rows`] with the round trips on each master (M1 runs Helm, M2 is the other).
pub async fn round_trip_table() -> Vec<(String, usize, usize, usize, usize)> {
    let f = Fixture::new();
    let three: String =
        ["vdu1", "vdu2", "vdu3"].iter().map(|r| applied(r, "cnf", "absent/0", "install", 1, json!({}))).collect();
    f.reply_applied("vdu1", "cnf", &three);
    f.reply_removed("cnf1", &["vdu1", "vdu2", "vdu3"]);
    f.fake.reply(None, "get values --namespace cnf -o json --all -- vdu2", r#"{"replicaCount": 1}"#);
    for rel in ["vdu1", "vdu2", "vdu3"] {
        let manifest = format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {rel}-nginxlab\n");
        f.fake.reply(None, &format!("get manifest --namespace cnf -- {rel}"), &manifest);
    }
    f.fake.reply(None, "cnf_heal.sh cnf ", &healed(&["vdu1-nginxlab", "vdu2-nginxlab", "vdu3-nginxlab"]));
    let mut rows = Vec::new();
    let mut row = |what: &str, m: (usize, usize, usize, usize)| rows.push((what.to_string(), m.0, m.1, m.2, m.3));
    row("cnf instantiate, 3 releases, 2 masters", measured(&f, Op::Instantiate, Some(three_releases()), false).await);
    row(
        "cnf instantiate again, nothing changed (no-op re-run)",
        measured(&f, Op::Instantiate, Some(three_releases()), false).await,
    );
    let upgrade = Op::Upgrade {
        release: "vdu2".into(),
        chart: None,
        version: None,
        set: vec!["a=b".into()],
        reuse_values: true,
        values: vec![],
    };
    row("cnf upgrade of one release", measured(&f, upgrade, None, false).await);
    let scale = json!({"type": "SCALE_OUT", "aspectId": "vdu2_aspect", "numberOfSteps": 1});
    row("cnf scale of one aspect", measured(&f, Op::Scale, Some(scale), false).await);
    row(
        "cnf heal of the whole CNF (3 releases, a Deployment each)",
        measured(&f, Op::Heal, Some(json!({})), false).await,
    );
    row("cnf terminate, 3 releases", measured(&f, Op::Terminate, None, false).await);
    let g = Fixture::new();
    g.reply_applied("vdu1", "cnf", &three);
    row(
        "cnf instantiate --atomic, first run (Helm's version read first)",
        measured(&g, Op::Instantiate, Some(three_releases()), true).await,
    );
    rows
}

/// The counts, exact: each operation at its round-trip floor (issue 24), Helm's work on the
/// master in node programs whose Helm processes per release are counted by their own tests
/// (`cnf/helm_apply.rs`: status then install or upgrade; `cnf/helm_remove.rs`: one uninstall).
#[tokio::test(start_paused = true)]
async fn every_cnf_operation_is_at_its_round_trip_floor() {
    let rows = round_trip_table().await;
    let got: Vec<(usize, usize, usize, usize)> = rows.iter().map(|(_, c, t, a, b)| (*c, *t, *a, *b)).collect();
    // (critical path, in all, on M1, on M2); connects cost no virtual time (fake.rs)
    let want = [
        (1, 2, 1, 1), // instantiate: one exec per master at once, the releases in M1's (was 11)
        (1, 2, 1, 1), // the no-op re-run: the same, one round trip per master, at once
        (2, 2, 2, 0), // upgrade: version + environment, then `upgrade -o json`
        (3, 3, 3, 0), // scale: version + environment, the replicas, `upgrade -o json`
        (5, 5, 5, 0), // heal: a manifest per release, then one exec restarts, waits, reads back (was 16)
        (3, 3, 2, 1), // terminate: version + environment, helm_remove.sh on M1, then on M2
        (2, 3, 2, 1), // instantiate --atomic, first run: the releases wait for Helm's version
    ];
    assert_eq!(got, want, "{rows:#?}");
    // The lead's table reads the same through `round_trip_rows`.
    let short: Vec<(String, usize, usize)> = rows.into_iter().map(|(w, c, t, _, _)| (w, c, t)).collect();
    assert_eq!(round_trip_rows().await, short);
}
