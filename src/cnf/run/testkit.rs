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

async fn run_inputs(f: &Fixture, op: Op, inputs: Inputs, events: Events) -> Result<Outcome> {
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
