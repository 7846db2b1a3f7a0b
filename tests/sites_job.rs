//! The Indexed Job, played locally: this test is the Job controller. For a catalogue of four
//! rendered sites (one lab node each), every completion index runs as its own
//! `mgmt-driver sites apply run-script ... --index I` process with `JOB_COMPLETION_INDEX=I`, at
//! most K at once (the Job's `parallelism`), on one shared state directory (the Job's volume).
//! One index is killed mid-run (SIGKILL, as a node loss or OOM kill does to a pod) and started
//! again (the Job's `backoffLimitPerIndex`). Then every site must be done exactly once: its
//! status document says done, each node ran the script to its end once, and a second pass
//! over every index (a Job re-created) runs nothing.
//!
//! Needs root (namespaces), as every lab main (tests/support/harness.rs).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::harness::Suite;
use support::kit::{check, doc, s, R};
use support::phase::phase;
use support::{mgmt, spawn, Lab, Run, Running};

const SITES: usize = 4;
/// The Job's parallelism.
const K: usize = 2;
/// The index killed mid-run.
const KILLED: usize = 1;
/// How long the script sleeps between its two marks: long enough to kill inside it.
const SLEEP: &str = "3";

fn site_name(i: usize) -> String {
    format!("j{i}")
}

struct Fleet {
    lab: Lab,
    dir: tempfile::TempDir,
}

impl Fleet {
    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }
    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn script(&self) -> PathBuf {
        self.dir.path().join("mark.sh")
    }

    /// The rendered-site contract, by hand: site.json and an inventory of one host (node i+1).
    fn render(&self) {
        for i in 0..SITES {
            let d = self.out().join(site_name(i));
            std::fs::create_dir_all(&d).unwrap();
            let site = json!({"name": site_name(i), "index": i, "labels": {}, "package": null});
            std::fs::write(d.join("site.json"), site.to_string()).unwrap();
            let inv = format!(
                "defaults:\n  known_hosts: {}\n  host_key_check: strict\n  user: root\n  identity_file: {}\n\
                 groups:\n  node:\n    - {{name: {}, ssh_ip: {}}}\n",
                self.lab.file("known_hosts").display(),
                self.lab.file("id_ed25519").display(),
                self.lab.node(i + 1),
                self.lab.ip(i + 1),
            );
            std::fs::write(d.join("inventory.yaml"), inv).unwrap();
        }
        // A start mark, a pause, an end mark: a run cut off in the pause leaves a start alone.
        std::fs::write(
            self.script(),
            "#!/bin/sh\necho start >> /tmp/job-marks\nsleep \"$1\"\necho end >> /tmp/job-marks\n",
        )
        .unwrap();
    }

    /// One pod: `sites apply run-script mark.sh SLEEP --index I`, JOB_COMPLETION_INDEX=I.
    fn pod(&self, i: usize) -> Running {
        let idx = i.to_string();
        let (out, state, script) = (self.out(), self.state(), self.script());
        let args = [
            "sites",
            "apply",
            "-o",
            "json",
            "--rendered",
            s(&out),
            "--state-dir",
            s(&state),
            "--max-sites",
            "1",
            "--index",
            &idx,
            "run-script",
            s(&script),
            SLEEP,
        ];
        spawn(&args, &[("JOB_COMPLETION_INDEX", &idx)])
    }

    fn marks(&self, i: usize) -> String {
        let o = self.lab.node_exec(&(i + 1).to_string(), &["sh", "-c", "cat /tmp/job-marks 2>/dev/null || true"]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// Play the controller over `indexes`: at most K pods at once; `kill` is called on each pod
/// while it runs and may kill it (then it is started again, once). Returns each index's last run.
fn controller(f: &Fleet, indexes: &[usize], kill: impl Fn(usize, &Running) -> bool) -> Vec<(usize, Run, u32)> {
    let mut todo: Vec<(usize, u32)> = indexes.iter().rev().map(|&i| (i, 0)).collect();
    let mut running: Vec<(usize, u32, Running)> = Vec::new();
    let mut done = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !todo.is_empty() || !running.is_empty() {
        assert!(Instant::now() < deadline, "the local Job did not finish in 2 minutes");
        while running.len() < K {
            let Some((i, attempt)) = todo.pop() else { break };
            running.push((i, attempt, f.pod(i)));
        }
        let mut still = Vec::new();
        for (i, attempt, mut p) in running.drain(..) {
            if attempt == 0 && kill(i, &p) {
                p.signal("KILL");
                let r = p.wait(Duration::from_secs(10));
                assert_eq!(r.code, -1, "index {i} was not killed: {}", r.all());
                todo.push((i, attempt + 1)); // backoffLimitPerIndex: a new pod for the same index
                continue;
            }
            if p.child.try_wait().unwrap().is_some() {
                done.push((i, p.wait(Duration::from_secs(10)), attempt));
            } else {
                still.push((i, attempt, p));
            }
        }
        running = still;
        std::thread::sleep(Duration::from_millis(50));
    }
    done.sort_by_key(|d| d.0);
    done
}

fn every_index_once_one_killed_and_rerun() -> R {
    let f = phase("bring up 4 nodes, render 4 sites", || {
        let lab = Lab::up("bs1", 91, SITES, &[]);
        let f = Fleet { lab, dir: tempfile::tempdir().unwrap() };
        f.render();
        Ok(f)
    })?;
    phase("the Job: every index its own process, K at once, one killed mid-run and re-run", || {
        let all: Vec<usize> = (0..SITES).collect();
        // Kill the chosen index once its node has the start mark (the script is in its pause).
        let runs = controller(&f, &all, |i, _| i == KILLED && f.marks(i) == "start\n");
        check(runs.len() == SITES, || format!("{} indexes finished", runs.len()))?;
        for (i, r, attempt) in &runs {
            r.ok();
            let d = doc(r);
            let sites = d["result"]["sites"].as_array().cloned().unwrap_or_default();
            check(sites.len() == 1 && sites[0]["site"] == site_name(*i), || format!("index {i} ran: {d}"))?;
            check(sites[0]["status"] == "done", || format!("index {i}: {}", sites[0]))?;
            check(*attempt == u32::from(*i == KILLED), || format!("index {i} attempt {attempt}"))?;
        }
        Ok(())
    })?;
    phase("each site done exactly once: status documents and the nodes' marks", || {
        for i in 0..SITES {
            let m = f.marks(i);
            // The killed pod's run stopped on the node too (its session's leash), so the killed
            // site has one start alone and one full run; every other site one full run.
            let want = if i == KILLED { "start\nstart\nend\n" } else { "start\nend\n" };
            check(m == want, || format!("site {} (node {}): marks {m:?}, want {want:?}", site_name(i), i + 1))?;
        }
        let st = mgmt(&["sites", "status", "-o", "json", "--state-dir", s(&f.state())], &[]);
        st.ok();
        let all: Vec<Value> = doc(&st)["result"]["sites"].as_array().cloned().unwrap_or_default();
        check(all.len() == SITES, || format!("{all:?}"))?;
        check(all.iter().all(|x| x["status"] == "done" && x["op"] == "run-script"), || format!("{all:?}"))
    })?;
    phase("the Job re-created: every index again, nothing runs twice", || {
        let all: Vec<usize> = (0..SITES).collect();
        let runs = controller(&f, &all, |_, _| false);
        for (i, r, _) in &runs {
            r.ok();
            let d = doc(r);
            let st = &d["result"]["sites"][0];
            check(st["status"] == "skipped", || format!("index {i}: {st}"))?;
        }
        for i in 0..SITES {
            let starts = f.marks(i).matches("start").count();
            check(starts == 1 + usize::from(i == KILLED), || format!("site {}: {} starts", site_name(i), starts))?;
        }
        Ok(())
    })?;
    // The state directory as the Job's volume holds it: one status document per site, and one
    // record of what its successful run read (for `sites diff`), each named after the site, so
    // no two pods ever wrote the same file.
    phase("the state volume: per-site files only", || {
        let names = list(&f.state().join("sites"));
        let mut want: Vec<String> = (0..SITES).map(|i| format!("{}.json", site_name(i))).collect();
        want.insert(0, "applied".into());
        check(names == want, || format!("{names:?}"))?;
        let applied = list(&f.state().join("sites/applied"));
        let want: Vec<String> = (0..SITES).map(|i| format!("{}.run-script.json", site_name(i))).collect();
        check(applied == want, || format!("{applied:?}"))
    })
}

fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| !n.starts_with('.'));
    v.sort();
    v
}

/// The suite's trials, run by its test binary (tests/bin/).
pub fn suite() -> Suite {
    Suite::new(file!())
        .needing_root(&[("every_index_once_one_killed_and_rerun", every_index_once_one_killed_and_rerun)])
}
