//! The round-trip table of docs/benchmarks.md, computed: every operation runs its real code on
//! the fake transport with a latency on tokio's paused clock (src/transport/fake.rs), so its
//! critical path (round trips that had to happen one after another) and its total are exact
//! counts, not measurements. `scripts/round-trips.sh` runs [`print_round_trip_table`] and puts
//! its output into the doc; the tests beside each operation pin the same counts.
//!
//! The "before" column is history: the same operations on commit f3a3323, before issue 24
//! brought them to their floor, recorded once here.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Map;

use crate::event::Events;
use crate::inventory::Host;
use crate::lifecycle::{FanOut, Runner, Timeouts};
use crate::target::{Role, Target};
use crate::transport::fake::FakeConnector;
use crate::transport::Source;

/// One row: the operation, its round trips on the critical path, its round trips in all.
pub type Row = (String, usize, usize);

/// The fake's latency: one virtual second per round trip.
const RT: Duration = Duration::from_secs(1);

fn runner(fake: &FakeConnector) -> Runner {
    fake.with_latency(RT);
    Runner::new(Arc::new(fake.clone()), Events::channel().0, FanOut::default(), Timeouts::default())
}

/// Virtual seconds since `t`: round trips one after another.
fn trips_since(t: tokio::time::Instant) -> usize {
    (t.elapsed().as_secs_f64() / RT.as_secs_f64()).round() as usize
}

/// `run-script` on 10 hosts at once, the job exactly as the command builds it.
async fn fan_out() -> Row {
    let fake = FakeConnector::new();
    let rt = runner(&fake);
    let d = tempfile::tempdir().expect("tempdir");
    let script = d.path().join("job.sh");
    std::fs::write(&script, "#!/bin/sh\necho ok\n").expect("script");
    let sj = crate::fanout::ScriptJob::new(&script, &[]).await.expect("a script job");
    let hosts: Vec<Host> = (1..=10).map(|i| Host::for_test(&format!("n{i}"), &format!("192.0.2.{i}"))).collect();
    let refs: Vec<&Host> = hosts.iter().collect();
    let t = tokio::time::Instant::now();
    let done = rt
        .each(&refs, |h| {
            let (rt, job) = (&rt, sj.job(h, &crate::lifecycle::job::CommandOpts::default()));
            async move { rt.run_job(h, &job).await }
        })
        .await;
    for (_, r) in done {
        r.expect("the job runs");
    }
    (String::from("fan-out `run-script`, 10 hosts"), trips_since(t), fake.round_trips())
}

/// `workload deploy` on one master: the manifest's upload, then `kubectl apply`.
async fn workload_deploy() -> Row {
    let fake = FakeConnector::new();
    let rt = runner(&fake);
    let m = Target::new(Host::for_test("m1", "192.0.2.11"), Role::Master);
    let w = crate::workload::spec::parse("name: web\nimage: registry.example/web:1.0\n", "spec.yaml", None, None)
        .expect("a valid spec");
    let t = tokio::time::Instant::now();
    let c = crate::workload::ops::Ctx { rt: &rt, m: &m, kind: w.kind, ns: &w.namespace, name: &w.name };
    crate::workload::ops::deploy(&c, &w).await.expect("deploys");
    (String::from("workload deploy, 1 master"), trips_since(t), fake.round_trips())
}

/// `primitive run` on one node: upload, run, read the result.
async fn primitive_run() -> Row {
    let fake = FakeConnector::new();
    fake.reply(None, "primitive_result.sh", "0\n{}");
    let rt = runner(&fake);
    let d = tempfile::tempdir().expect("tempdir");
    let key = crate::lifecycle::state_key::StateKey::at(d.path().join("k"));
    let store = crate::lifecycle::state::Store::open_with_key(&d.path().join("s"), key).expect("store");
    let prim = crate::primitive::spec::parse("primitives:\n  - {name: p, script: p.sh}\n", "f").expect("spec");
    let prep =
        crate::primitive::run::Prepared::new(prim[0].clone(), Source::Bytes(b"true".to_vec().into()), Map::new())
            .expect("prepared");
    let t = tokio::time::Instant::now();
    let ran = crate::primitive::run::run(&prep, &Map::new(), vec![Host::for_test("n1", "192.0.2.1")], &store, rt)
        .await
        .expect("runs");
    assert!(ran.errors.is_empty(), "{:?}", ran.errors);
    (String::from("primitive run, 1 node"), trips_since(t), fake.round_trips())
}

/// Every row, in the doc's order.
async fn rows() -> Vec<Row> {
    let mut rows = vec![];
    let cluster = crate::cluster::testkit::round_trip_rows().await;
    rows.extend(cluster.into_iter().map(|(op, c, t)| (format!("cluster {op}, 3 masters + 20 workers"), c, t)));
    rows.extend(crate::cnf::run::testkit::round_trip_rows().await);
    rows.push(primitive_run().await);
    rows.push(workload_deploy().await);
    rows.push(fan_out().await);
    rows
}

/// The same operations on commit f3a3323 (critical path, total), where they were measured.
const BEFORE: &[(&str, usize, usize)] = &[
    ("cluster instantiate_end, 3 masters + 20 workers", 24, 169),
    ("cluster instantiate_end again (no-op re-run), 3 masters + 20 workers", 5, 93),
    ("cluster scale_end SCALE_OUT +1 worker, 3 masters + 20 workers", 10, 54),
    ("cluster scale_end SCALE_OUT again (no-op re-run), 3 masters + 20 workers", 0, 0),
    ("cluster scale_start SCALE_IN -1 worker, 3 masters + 20 workers", 4, 26),
    ("cluster scale_start SCALE_IN again (no-op re-run), 3 masters + 20 workers", 1, 23),
    ("cluster heal_start worker, 3 masters + 20 workers", 3, 3),
    ("cluster heal_end worker, 3 masters + 20 workers", 8, 96),
    ("cluster heal_start master, 3 masters + 20 workers", 3, 4),
    ("cluster heal_end master, 3 masters + 20 workers", 18, 107),
    ("cluster terminate_end, 3 masters + 20 workers", 0, 0),
    ("cluster terminate_end --reset-nodes, 3 masters + 20 workers", 4, 92),
    ("primitive run, 1 node", 3, 3),
    ("workload deploy, 1 master", 2, 2),
    ("fan-out `run-script`, 10 hosts", 2, 20),
];

fn before(op: &str) -> String {
    BEFORE.iter().find(|(o, _, _)| *o == op).map(|(_, c, t)| format!("{c} | {t}")).unwrap_or_else(|| "– | –".into())
}

/// The markdown table.
fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| operation | before: critical path | before: in all | critical path | in all |\n|---|---:|---:|---:|---:|\n",
    );
    for (op, critical, total) in rows {
        s.push_str(&format!("| {op} | {} | {critical} | {total} |\n", before(op)));
    }
    s
}

/// The fan-out's, workload's and primitive's counts, pinned (the families' own tests pin theirs).
#[tokio::test(start_paused = true)]
async fn small_operations_take_their_floor() {
    let (_, c, t) = fan_out().await;
    assert_eq!((c, t), (1, 10), "the script sent and run in one exec, on every host at once");
    let (_, c, t) = workload_deploy().await;
    assert_eq!((c, t), (2, 2), "upload then apply");
    let (_, c, t) = primitive_run().await;
    assert_eq!((c, t), (3, 3), "upload, run, result");
}

/// `scripts/round-trips.sh` runs this and puts what it prints into docs/benchmarks.md.
#[tokio::test(start_paused = true)]
#[ignore = "prints the table for scripts/round-trips.sh"]
async fn print_round_trip_table() {
    let t = table(&rows().await);
    println!("<!-- round-trips:begin -->\n{t}<!-- round-trips:end -->");
}
