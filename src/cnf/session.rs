//! Where Helm runs: the masters named by helm_info, the first one that answers (Tacker only ever
//! used `masternode_ip[0]`), with Helm's major version detected once. Charts and repositories go
//! to every master, so any of them can take over.

use std::time::Duration;

use crate::cluster::runner::Runner;
use crate::cluster::topology::{ClusterNode, Role};
use crate::cnf::helm_cmd::{parse_version, Helm};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::transport::ExecOutput;

pub struct Session {
    pub rt: Runner,
    pub masters: Vec<ClusterNode>,
    /// Index of the master Helm runs on.
    pub active: usize,
    pub helm: Helm,
    pub status_every: Duration,
}

impl Session {
    /// Pick the first reachable master and detect its Helm.
    pub async fn open(rt: Runner, masters: Vec<ClusterNode>, status_every: Duration) -> Result<Session> {
        let refs: Vec<&ClusterNode> = masters.iter().collect();
        let m = rt.first_reachable(&refs).await?;
        let active = masters.iter().position(|x| x.name() == m.name()).expect("one of them");
        let mut s = Session { rt, masters, active, helm: Helm { major: 3 }, status_every };
        if !s.rt.dry {
            let node = s.master().clone();
            let out = s
                .rt
                .exec(&node, s.rt.root_cmd(&node, "command -v helm >/dev/null || { echo 'helm is not installed' >&2; exit 127; }; helm version --short".into(), Duration::from_secs(30)))
                .await?;
            s.helm.major = parse_version(&out.stdout_text()).ok_or_else(|| Error::Remote {
                node: node.name().into(),
                command: "helm version --short".into(),
                status: "exit code 0".into(),
                stderr_tail: format!("cannot read a version from {:?}", out.stdout_text().trim()),
            })?;
            s.rt.ev(&node)
                .emit(EventKind::Status { subject: "helm".into(), status: format!("major version {}", s.helm.major) });
        }
        Ok(s)
    }

    pub fn master(&self) -> &ClusterNode {
        &self.masters[self.active]
    }

    /// Run a Helm command (as root) on the active master.
    pub async fn run(&self, script: String, timeout: Duration) -> Result<ExecOutput> {
        let m = self.master();
        self.rt.exec(m, self.rt.root_cmd(m, script, timeout)).await
    }

    pub async fn text(&self, script: String, timeout: Duration) -> Result<String> {
        Ok(self.run(script, timeout).await?.stdout_text())
    }

    /// Run a long Helm command while polling `helm status` every `status_every` on a second
    /// channel, reporting each status as an event (OSM's `_store_status`), and a final one.
    pub async fn run_watched(&self, script: String, timeout: Duration, rel: &str, ns: &str) -> Result<ExecOutput> {
        let status_cmd = self.helm.status(rel, ns)?;
        let main = self.run(script, timeout);
        let poll = async {
            loop {
                tokio::time::sleep(self.status_every).await;
                self.report_status(&status_cmd, rel).await;
            }
        };
        // The final status is reported by whoever reads it next (`ops::describe`).
        tokio::select! {
            r = main => r,
            _ = poll => unreachable!("the poll loop never ends"),
        }
    }

    async fn report_status(&self, status_cmd: &str, rel: &str) {
        let m = self.master();
        let c = self.rt.root_cmd(m, status_cmd.to_string(), Duration::from_secs(30));
        let status = match self.rt.exec(m, c).await {
            Ok(o) => release_status(&o.stdout_text())
                .map(|(s, r)| format!("{s} (revision {r})"))
                .unwrap_or_else(|| "unknown".into()),
            Err(_) => "not found yet".into(),
        };
        self.rt.ev(m).emit(EventKind::Status { subject: format!("release {rel}"), status });
    }

    /// Every master, for steps that must reach all of them (charts, repositories).
    pub fn all(&self) -> Vec<&ClusterNode> {
        self.masters.iter().collect()
    }
}

/// `(status, revision)` from `helm status -o json`.
pub fn release_status(json: &str) -> Option<(String, u64)> {
    let v: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    Some((v.pointer("/info/status")?.as_str()?.to_string(), v.get("version")?.as_u64()?))
}

/// A master as a node the runner can reach.
pub fn master_node(host: crate::inventory::Host) -> ClusterNode {
    let nic = host.addr.clone();
    ClusterNode { k8s_name: String::new(), nic_ip: nic, role: Role::Master, host }
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_json() {
        let j = r#"{"name":"vdu1","info":{"status":"pending-install","description":"Initial install underway"},"version":1,"namespace":"default"}"#;
        assert_eq!(super::release_status(j), Some(("pending-install".into(), 1)));
        assert_eq!(super::release_status("Error: release: not found"), None);
    }
}
