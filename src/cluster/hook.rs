//! What every cluster hook shares: the validated inputs, the node runner, the instance state,
//! and the steps several hooks reuse (prepare a node, install or join one, get a join token,
//! write the record).

use std::sync::Mutex;

use serde_json::{json, Value};

use crate::cluster::install_output::{self, MasterOutput};
use crate::cluster::node_cmd::{self as cmd, InstallMode};
use crate::cluster::params::{Cidr, ClusterParams};
use crate::cluster::record::{self, HelmInfo, HelmPassword, Record};
use crate::cluster::state::{self, ClusterFacts, InstanceState};
use crate::cluster::topology::{ClusterNode, Topology};
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::{Role, Runner};
use crate::redact::Redact;
use crate::request::VimConnections;
use crate::secret::Secret;
use crate::transport::{Source, UploadFile};

pub struct Hook {
    pub rt: Runner,
    pub store: Store,
    pub state: Mutex<InstanceState>,
    pub params: ClusterParams,
    pub topo: Topology,
    pub pkg: Option<Package>,
    pub instance_id: String,
    pub run_dir: String,
    /// The request file, for error messages.
    pub req_file: String,
    /// `--tacker-compat`: the node password in helm_info and the bearer token in the output.
    pub tacker_compat: bool,
    /// What happened to each node, for the result document.
    pub outcomes: Mutex<Vec<(String, String)>>,
    /// vimConnectionInfo handed in (request or VnfInstance); the result updates it.
    pub vim_connections: Mutex<VimConnections>,
    /// The storage server, its devices and the PVs, when the params have storage.
    pub storage: Option<crate::cluster::storage_setup::StorageSetup>,
}

impl Hook {
    /// Record the instance state now (a plan's store writes nothing).
    pub fn save(&self) -> Result<()> {
        self.state.lock().expect("state lock").save(&self.store)
    }

    pub fn with_state<T>(&self, f: impl FnOnce(&mut InstanceState) -> T) -> T {
        f(&mut self.state.lock().expect("state lock"))
    }

    pub fn installed(&self, n: &ClusterNode) -> bool {
        self.with_state(|s| s.installed(n.name()))
    }

    pub fn outcome(&self, n: &ClusterNode, what: impl Into<String>) {
        self.outcomes.lock().expect("outcomes").push((n.name().to_string(), what.into()));
    }

    /// `no_proxy` from networks, not from every address in them (Tacker listed 256 or 65536).
    pub fn no_proxy(&self) -> String {
        let p = &self.params;
        let mut items: Vec<String> = Vec::new();
        if let Some(px) = &p.proxy {
            items.extend(px.no_proxy.iter().flat_map(|s| s.split(',').map(str::to_string)));
            match &px.k8s_node_cidr {
                Some(c) => items.push(c.text.clone()),
                None => items.extend(self.topo.masters.first().map(|m| slash24(&m.nic_ip))),
            }
        }
        items.extend([p.pod_cidr.text.clone(), p.cluster_cidr.text.clone(), "127.0.0.1".into(), "localhost".into()]);
        items.push(self.topo.cluster_ip.clone());
        items.extend([".svc".into(), ".cluster.local".into()]);
        let mut seen = std::collections::BTreeSet::new();
        items.retain(|i| !i.is_empty() && seen.insert(i.clone()));
        items.join(",")
    }

    /// The env file every script run gets (values quoted; secrets only ever here).
    pub fn env(&self, extra: &[(&str, &Secret)]) -> Result<String> {
        let p = &self.params;
        let mut vars: Vec<(String, String)> = Vec::new();
        if let Some(px) = &p.proxy {
            vars.push(("http_proxy".into(), px.http_proxy.expose().into()));
            vars.push(("https_proxy".into(), px.https_proxy.expose().into()));
            vars.push(("no_proxy".into(), self.no_proxy()));
        }
        vars.push(("ha_flag".into(), if self.topo.ha() { "True" } else { "False" }.into()));
        let http: Vec<String> = p.registries.iter().filter(|r| !r.https).map(|r| format!("\"{}\"", r.server)).collect();
        if !http.is_empty() {
            vars.push(("HTTP_PRIVATE_REGISTRIES".into(), http.join(",")));
        }
        vars.extend(p.script_environment.iter().cloned());
        for (k, v) in extra {
            vars.push((k.to_string(), v.expose().to_string()));
        }
        let mut text = cmd::env_file(&vars)?;
        if p.offline_artifacts_path.is_some() {
            // Expanded by the node's shell when sourced: the run directory's absolute path.
            text.push_str(&format!("K8S_OFFLINE_DIR=\"$PWD/{}\"\n", cmd::OFFLINE_DIR));
        }
        Ok(text)
    }

    fn env_upload(&self, name: &str, text: String) -> UploadFile {
        UploadFile {
            source: Source::Bytes(text.into_bytes().into()),
            remote: format!("{}/{name}", self.run_dir),
            mode: 0o600,
        }
    }

    /// Scripts (and offline artifacts, registry certificates) into the node's private run dir.
    pub fn script_uploads(&self, n: &ClusterNode) -> Result<Vec<UploadFile>> {
        let pkg = self
            .pkg
            .as_ref()
            .ok_or_else(|| Error::input("arguments", "--package-dir", "is required for this operation"))?;
        let p = &self.params;
        let f = |rel: &str, field: &str, name: &str| -> Result<UploadFile> {
            let source =
                pkg.file(rel, &self.req_file, &format!("additionalParams.k8s_cluster_installation_param.{field}"))?;
            Ok(UploadFile { source, remote: format!("{}/{name}", self.run_dir), mode: 0o700 })
        };
        let mut files = vec![f(&p.script_path, "script_path", cmd::INSTALL_SCRIPT)?];
        if n.role == Role::Master {
            if let Some(h) = &p.helm_script_path {
                files.push(f(h, "helm_installation_script_path", cmd::HELM_SCRIPT)?);
            }
            files.push(UploadFile {
                source: Source::Bytes(cmd::admin_token_manifest().into_bytes().into()),
                remote: format!("{}/{}", self.run_dir, cmd::ADMIN_TOKEN_FILE),
                mode: 0o600,
            });
        }
        if let Some(off) = &p.offline_artifacts_path {
            let field = "additionalParams.k8s_cluster_installation_param.offline_artifacts_path";
            let dir = pkg.resolve(off, &self.req_file, field, true)?;
            let job = crate::fanout::put_job(&dir, &format!("{}/{}", self.run_dir, cmd::OFFLINE_DIR), Some(0o600))
                .map_err(|e| Error::input(&self.req_file, field, e.to_string()))?;
            for a in job.actions {
                if let crate::lifecycle::job::Action::Upload(v) = a {
                    files.extend(v);
                }
            }
        }
        for (i, r) in p.registries.iter().enumerate() {
            if let Some(c) = &r.certificate_path {
                files.push(f(
                    c,
                    &format!("private_registry_connection_info[{i}].certificate_path"),
                    &crate::cluster::registry::ca_upload(i),
                )?);
            }
        }
        Ok(files)
    }

    /// `/etc/hosts` entries: every node by its Kubernetes name. (Registry `hosts_string` lines
    /// are the registry step's, see [`crate::cluster::registry`].)
    pub fn hosts_entries(&self) -> Vec<(String, String)> {
        self.topo.all().map(|n| (n.nic_ip.clone(), n.k8s_name.clone())).collect()
    }

    /// Upload scripts and set `/etc/hosts` on `nodes`, in parallel.
    pub async fn prepare(&self, nodes: &[&ClusterNode], drop_ips: &[String]) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        self.rt.phase("upload scripts, /etc/hosts", nodes, true);
        let entries = self.hosts_entries();
        let res = self
            .rt
            .each(nodes, |n| {
                let entries = &entries;
                async move {
                    self.clean_env(n).await?;
                    self.rt.upload(n, self.script_uploads(n)?).await?;
                    let hosts = cmd::hosts_update(entries, drop_ips)?;
                    self.rt.exec(n, self.rt.root_cmd(n, hosts, self.rt.timeouts.command)).await?;
                    crate::cluster::registry::apply(self, n).await?;
                    Ok(())
                }
            })
            .await;
        crate::lifecycle::all_ok(res).map(|_| ())
    }

    /// Delete env files (secrets) that an earlier run of this instance left on `n` because the
    /// command meant to consume them never started: the connection dropped, or the driver was
    /// killed, between the upload and the exec (`src/remote/clean_env.sh`). The first step on a
    /// node in `prepare`; the instance lock means no other run of this instance is using them.
    pub async fn clean_env(&self, n: &ClusterNode) -> Result<()> {
        let c = crate::command::RemoteCommand::new(cmd::clean_env(&self.run_dir)?)
            .with_timeout(Some(self.rt.timeouts.command));
        self.rt.exec(n, c).await.map(|_| ())
    }

    /// Upload the env file `env_name` (secrets) and run `step`, which consumes it (through
    /// `run_with_env.sh`, which deletes it before the command starts). When the upload or the
    /// step fails in any way, the file may still be there (sudo refused, the connection dropped
    /// before the program ran), or the upload's temporary copy of it: one attempt to delete it
    /// at once, whose own failure is a warning (the next run's `clean_env` catches it); the
    /// step's error is what the caller gets.
    pub async fn with_env_file<T, F>(&self, n: &ClusterNode, env_name: &str, text: String, step: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let r = async {
            self.rt.upload(n, vec![self.env_upload(env_name, text)]).await?;
            step.await
        }
        .await;
        if r.is_err() {
            if let Err(e) = self.clean_env(n).await {
                // The file holds secrets: the operator hears of it (stderr and the result's
                // warnings), not only a log nobody shows.
                let message = format!(
                    "could not delete a leftover env file (it holds secrets) in {}; the next run on this node \
                     deletes it: {e}",
                    self.run_dir
                );
                self.rt.ev(n).emit(crate::event::EventKind::Warning { message });
            }
        }
        r
    }

    /// Run the install script on one node (a joining master or a worker) and record it.
    pub async fn install(
        &self,
        n: &ClusterNode,
        mode: InstallMode,
        join: Option<(&Secret, &str)>,
        cert_key: Option<&Secret>,
    ) -> Result<()> {
        self.install_as(n, mode, join, cert_key, "nothing", || (), |_| Ok(())).await
    }

    /// Install the main master and read what its script printed: token, server, CA.
    pub async fn install_main(&self, n: &ClusterNode) -> Result<MasterOutput> {
        let placeholder = || MasterOutput {
            token: Secret::new("<token>"),
            server: format!("https://{}:6443", self.topo.cluster_ip),
            ca_hash: "<ca-hash>".into(),
            certificate_key: Some(Secret::new("<certificate-key>")),
            ca_pem: "<CA PEM>".into(),
        };
        let what = "the cluster facts (token, server, CA)";
        self.install_as(n, InstallMode::MainMaster, None, None, what, placeholder, install_output::parse).await
    }

    /// The install script on one node: secrets go in the env file, output is redacted; then the
    /// node's hostname (its Kubernetes name) is read back, checked, and the node recorded.
    #[allow(clippy::too_many_arguments)] // the script's contract plus how to read its output
    async fn install_as<T>(
        &self,
        n: &ClusterNode,
        mode: InstallMode,
        join: Option<(&Secret, &str)>,
        cert_key: Option<&Secret>,
        what: &str,
        placeholder: impl FnOnce() -> T,
        parse: impl FnOnce(&str) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let mut extra: Vec<(&str, &Secret)> = Vec::new();
        let hash = join.map(|(_, h)| h).unwrap_or("");
        if let Some((t, _)) = join {
            extra.push(("K8S_JOIN_TOKEN", t));
        }
        if let Some(k) = cert_key {
            extra.push(("K8S_CERT_KEY", k));
        }
        let env_name = "env.install";
        let net = cmd::Networks { pod: &self.params.pod_cidr.text, service: &self.params.cluster_cidr.text };
        let join = cmd::Join { ca_hash: hash, secrets_from_env: self.install_script_reads_secrets_from_env()? };
        let line = cmd::install(&self.run_dir, env_name, mode, &self.topo, n, net, join)?;
        let c = self.rt.root_cmd(n, line, self.rt.timeouts.install).with_redact(Redact::Kubeadm);
        let out =
            self.with_env_file(n, env_name, self.env(&extra)?, self.rt.fact(n, c, what, placeholder, parse)).await?;
        let hostname = self.rt.root_cmd(n, cmd::hostname(), self.rt.timeouts.command);
        let k8s = self.rt.fact(n, hostname, "the node's hostname", || n.k8s_name.clone(), parse_hostname).await?;
        self.with_state(|s| {
            let st = s.node(n.name());
            st.role = Some(n.role);
            st.ssh_addr = n.host.addr.clone();
            st.nic_ip = n.nic_ip.clone();
            st.k8s_name = k8s;
            st.installed = true;
        });
        self.save()?;
        Ok(out)
    }

    /// A fresh join token from a master (redacted: the output is the secret).
    pub async fn join_token(&self, m: &ClusterNode) -> Result<Secret> {
        let c = self.rt.root_cmd(m, cmd::token_create(), self.rt.timeouts.command).with_redact(Redact::All);
        self.rt.fact(m, c, "a bootstrap token", || Secret::new("<token>"), parse_token).await
    }

    /// A fresh certificate key for a joining master (uploads the control-plane certificates).
    pub async fn certificate_key(&self, m: &ClusterNode) -> Result<Secret> {
        let c = self.rt.root_cmd(m, cmd::certificate_key(), self.rt.timeouts.command).with_redact(Redact::Kubeadm);
        self.rt.fact(m, c, "a certificate key", || Secret::new("<certificate-key>"), parse_certificate_key).await
    }

    /// Cluster facts from a running master (re-runs, where the script's output is gone).
    pub async fn query_facts(&self, m: &ClusterNode) -> Result<ClusterFacts> {
        let t = self.rt.timeouts.command;
        let placeholder = format!("https://{}:6443", self.topo.cluster_ip);
        let server = self.rt.fact(
            m,
            self.rt.root_cmd(m, cmd::server_url(), t),
            "the API server URL",
            || placeholder,
            |o| install_output::check_server(o.trim()),
        );
        let server = server.await?;
        let ca_pem = self.rt.fact(
            m,
            self.rt.root_cmd(m, cmd::ca_pem(), t),
            "the CA certificate",
            || "<CA PEM>".into(),
            install_output::ca_pem,
        );
        let ca_pem = ca_pem.await?;
        let ca_hash = self.rt.fact(
            m,
            self.rt.root_cmd(m, cmd::ca_hash(), t),
            "the CA hash",
            || "<ca-hash>".into(),
            install_output::check_ca_hash,
        );
        Ok(self.facts(m, server, ca_pem, ca_hash.await?))
    }

    pub fn facts(&self, m: &ClusterNode, server: String, ca_pem: String, ca_hash: String) -> ClusterFacts {
        ClusterFacts { server, ca_pem, ca_hash, cluster_ip: self.topo.cluster_ip.clone(), main_master: m.name().into() }
    }

    pub fn facts_from_output(&self, m: &ClusterNode, o: &MasterOutput) -> ClusterFacts {
        self.facts(m, o.server.clone(), o.ca_pem.clone(), o.ca_hash.clone())
    }

    /// Build and store the VIM record and the vimConnectionInfo entry; returns the VIM (masked
    /// unless `--tacker-compat`).
    pub fn write_record(&self, bearer: &Secret) -> Result<Value> {
        let facts = self
            .with_state(|s| s.facts.clone())
            .ok_or_else(|| Error::input("state", "facts", "no cluster facts recorded"))?;
        let helm = self.params.helm_script_path.is_some().then(|| {
            let masters: Vec<String> = self.topo.masters.iter().map(|m| m.host.addr.clone()).collect();
            // The login the first master really uses (the inventory's, else the request's).
            let login = &self.topo.masters[0].host;
            HelmInfo {
                master_ips: masters,
                username: &login.user,
                password: match (self.tacker_compat, &login.auth.password) {
                    (false, _) => HelmPassword::Reference,
                    (true, Some(p)) => HelmPassword::Reveal(p.expose()),
                    (true, None) => HelmPassword::None,
                },
                vnf_instance_id: &self.instance_id,
            }
            .to_json()
        });
        let rec = Record {
            vim_name: &self.params.vim_name,
            auth_url: record::auth_url(&facts.server, self.topo.cluster_fip.as_deref()),
            bearer_token: bearer.expose(),
            ca_pem: if self.topo.cluster_fip.is_some() { None } else { Some(&facts.ca_pem) },
            helm_info: helm,
            vnf_instance_id: &self.instance_id,
        };
        let conn = rec.vim_connection();
        {
            let mut vc = self.vim_connections.lock().expect("vim connections");
            vc.remove_kubernetes(rec.auth_url.as_str().into(), &self.params.vim_name);
            vc.push(&VimConnections::key_for(&self.params.vim_name), conn.clone());
        }
        let login_password = self.topo.masters[0].host.auth.password.as_ref().map(|p| p.expose().to_string());
        self.with_state(|s| {
            s.bearer_token = Some(bearer.expose().to_string());
            s.master_login_password = login_password;
            s.vim = Some(rec.vim(true));
            s.vim_connection_info = Some(serde_json::to_value(&conn).expect("serializes"));
        });
        self.save()?;
        Ok(rec.vim(self.tacker_compat))
    }

    /// Warnings about the record: with `--tacker-compat` and Helm, `helm_info` carries the first
    /// master's login for Tacker v1's Helm client, which logs in to every master with a
    /// password. Each master that login does not fit is named (see [`record::helm_login_warnings`]).
    pub fn record_warnings(&self) -> Vec<String> {
        if !self.tacker_compat || self.params.helm_script_path.is_none() {
            return Vec::new();
        }
        let logins: Vec<record::Login> = self
            .topo
            .masters
            .iter()
            .map(|m| record::Login {
                node: m.name(),
                user: &m.host.user,
                password: m.host.auth.password.as_ref().map(|p| p.expose()),
            })
            .collect();
        record::helm_login_warnings(&logins)
    }

    /// Where the hook ran, for the result document's context.
    pub fn context(&self) -> Value {
        json!({
            "vnfInstanceId": self.instance_id,
            "state": self.store.doc_path(&self.instance_id, state::KIND),
        })
    }

    /// The recorded VIM (its bearer token masked unless `--tacker-compat`).
    pub fn recorded_vim(&self) -> Option<Value> {
        self.with_state(|s| s.vim.clone()).map(|mut v| {
            if !self.tacker_compat {
                v["auth_cred"]["bearer_token"] = crate::secret::MASK.into();
            }
            v
        })
    }

    /// The hook's result: the updated vimConnectionInfo, the VIM record and each node's outcome.
    pub fn result(&self, vim: Option<Value>) -> Value {
        let mut outcomes = self.outcomes.lock().expect("outcomes").clone();
        // Cluster order (masters, then workers), whatever order parallel steps finished in.
        let order: Vec<&str> = self.topo.all().map(|n| n.name()).collect();
        outcomes.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
        json!({
            "vimConnectionInfo": *self.vim_connections.lock().expect("vim connections"),
            "vim": vim,
            "nodes": outcomes.iter().map(|(n, o)| json!({"node": n, "outcome": o})).collect::<Vec<_>>(),
        })
    }
}

/// The last non-empty line, when it is a bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`). The
/// message never quotes the output: it may be a secret.
fn parse_token(out: &str) -> std::result::Result<Secret, String> {
    let t = out.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let ok = t.len() == 23
        && t.as_bytes()[6] == b'.'
        && t.chars().filter(|c| *c != '.').all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(Secret::new(t))
    } else {
        Err("the last line is not a bootstrap token".into())
    }
}

fn parse_certificate_key(out: &str) -> std::result::Result<Secret, String> {
    let k = out.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if k.len() == 64 && k.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(Secret::new(k))
    } else {
        Err("the last line is not a 64-hex certificate key".into())
    }
}

/// A node's hostname becomes its Kubernetes name and is used in later commands: it must be a
/// DNS name (RFC 1123 labels), nothing else.
pub fn parse_hostname(out: &str) -> std::result::Result<String, String> {
    let h = out.trim();
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !h.is_empty() && h.len() <= 253 && h.split('.').all(label) {
        Ok(h.to_ascii_lowercase())
    } else {
        Err(format!("{:?} is not a DNS host name", h.chars().take(80).collect::<String>()))
    }
}

/// `a.b.c.d` → `a.b.c.0/24` (Tacker's default node network for `no_proxy`, as a CIDR); an IPv6
/// address gives its /64 network, host bits cleared like the IPv4 case.
fn slash24(ip: &str) -> String {
    let prefix = if ip.contains(':') { 64 } else { 24 };
    Cidr::parse(&format!("{ip}/{prefix}")).map(|c| c.network().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_network_default_is_a_cidr() {
        assert_eq!(super::slash24("10.10.0.35"), "10.10.0.0/24");
        assert_eq!(super::slash24("10.10.0.0"), "10.10.0.0/24");
        assert_eq!(super::slash24("fd00:1:2:3:4:5:6:7"), "fd00:1:2:3::/64");
        assert_eq!(super::slash24("fd00:1:2:3::"), "fd00:1:2:3::/64");
        assert_eq!(super::slash24("node1.example"), "");
    }
}
