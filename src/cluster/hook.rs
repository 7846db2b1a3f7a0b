//! One hook run, as every step sees it: what `prepare` read and checked (params, nodes, storage,
//! the package), the runner that reaches the nodes, the instance's records (`state.rs`, kept in
//! the store) and what the run returns (`results.rs`). Steps read the inputs directly and change
//! records and results only through methods. Also the steps every hook reuses: env files on a
//! node, the install script on one node, a join token, the cluster facts, the VIM record.

use std::io::Read;
use std::sync::Mutex;

use chacha20poly1305::aead::Generate;
use serde::Serialize;
use serde_json::{json, Value};

use crate::cluster::credential_ref;
use crate::cluster::install_output::MasterOutput;
use crate::cluster::node_cmd::{self as cmd, InstallMode};
use crate::cluster::node_program::{self, NodeProgram};
use crate::cluster::params::ClusterParams;
use crate::cluster::record::{self, Record};
use crate::cluster::results::Results;
use crate::cluster::script_env;
use crate::cluster::script_marker;
use crate::cluster::state::{self, ClusterFacts, InstanceState};
use crate::cluster::state_store;
use crate::cluster::storage_setup::StorageSetup;
use crate::cluster::topology::{ClusterNode, Topology};
use crate::error::{Error, Result};
use crate::facts::kubeadm::{ApiServer, CaHash, CaPem, CertificateKey, Installed, JoinToken, MainMasterInstalled};
use crate::facts::node::Hostname;
use crate::facts::Fact;
use crate::lifecycle::fact::unreadable;
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::{Role, Runner};
use crate::request::VimConnections;
use crate::secret::Secret;
use crate::transport::{Source, UploadFile};

/// A node's prepare steps (`prepare_nodes.rs` builds them), run as the start of its next node
/// program: the files to upload with it, the env files among them, the steps after the sweep,
/// and the digest of what they set on the node.
pub struct Prep {
    pub files: Vec<UploadFile>,
    pub env_files: Vec<&'static str>,
    pub steps: Vec<String>,
    /// What the steps set (`/etc/hosts` lines, registries, their files and login), recorded
    /// on the node once they ran: a re-run with the same inputs leaves an installed node alone.
    pub digest: String,
}

pub struct Hook {
    /// How every step reaches a node: connections, fan-out, phases, facts.
    pub rt: Runner,
    pub params: ClusterParams,
    pub topo: Topology,
    /// The storage server, its devices and the PVs, when the params have storage.
    pub storage: Option<StorageSetup>,
    /// The instance's private run directory on a node (relative to the login's home): scripts,
    /// env files and uploads go there.
    pub run_dir: String,
    /// The instance's records: the store, the instance id, its state. Steps and callers use
    /// [`Hook::store`], [`Hook::instance_id`], [`Hook::with_state`] and [`Hook::save`].
    store: Store,
    instance_id: String,
    state: Mutex<InstanceState>,
    pkg: Option<Package>,
    /// The request file, for error messages.
    req_file: String,
    /// `--tacker-compat`: the node password in helm_info and the bearer token in the output.
    tacker_compat: bool,
    results: Results,
}

/// What `prepare` read and checked for one hook run: everything a [`Hook`] holds besides the
/// runner and the instance's records.
pub struct Checked {
    pub params: ClusterParams,
    pub topo: Topology,
    pub storage: Option<StorageSetup>,
    pub pkg: Option<Package>,
    pub req_file: String,
    pub tacker_compat: bool,
    /// vimConnectionInfo handed in (request or VnfInstance); the result updates it.
    pub vim_connections: VimConnections,
}

impl Hook {
    /// The run of instance `instance_id` (its recorded `state`, or a fresh one) on what `prepare`
    /// checked.
    pub fn new(rt: Runner, store: Store, instance_id: String, state: InstanceState, c: Checked) -> Hook {
        Hook {
            rt,
            params: c.params,
            topo: c.topo,
            storage: c.storage,
            run_dir: cmd::run_dir(&instance_id),
            store,
            instance_id,
            state: Mutex::new(state),
            pkg: c.pkg,
            req_file: c.req_file,
            tacker_compat: c.tacker_compat,
            results: Results::new(c.vim_connections),
        }
    }

    // ------------------------------------------------------------------ records

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Record the instance state now (a plan's store writes nothing).
    pub fn save(&self) -> Result<()> {
        state_store::save(&mut self.state.lock().expect("state lock"), &self.store)
    }

    pub fn with_state<T>(&self, f: impl FnOnce(&mut InstanceState) -> T) -> T {
        f(&mut self.state.lock().expect("state lock"))
    }

    /// The cluster's record is written, with its bearer token: a re-run reuses that token.
    pub fn bearer_recorded(&self) -> bool {
        self.with_state(|s| s.bearer_token.is_some() && s.vim.is_some())
    }

    pub fn installed(&self, n: &ClusterNode) -> bool {
        self.with_state(|s| s.installed(n.name()))
    }

    /// The recorded CA hash a joining node checks the cluster by.
    pub fn ca_hash(&self) -> Result<String> {
        self.with_state(|s| s.facts.as_ref().map(|f| f.ca_hash.clone()))
            .ok_or_else(|| Error::input("state", "facts", "the cluster was never instantiated"))
    }

    /// Where this instance's document of `kind` is (or would be) in the store, for messages.
    pub fn doc_path(&self, kind: &str) -> String {
        self.store.doc_path(&self.instance_id, kind).display().to_string()
    }

    /// Store this instance's document of `kind` (the storage record; the state has [`Hook::save`]).
    pub fn save_doc<T: Serialize>(&self, kind: &str, doc: &T) -> Result<()> {
        self.store.save_doc(&self.instance_id, kind, doc)
    }

    /// Remove this instance's document of `kind`; whether there was one.
    pub fn remove_doc(&self, kind: &str) -> Result<bool> {
        self.store.remove_doc(&self.instance_id, kind)
    }

    /// The request file the params and nodes came from, for messages.
    pub fn req_file(&self) -> &str {
        &self.req_file
    }

    // ------------------------------------------------------------------ results

    pub fn outcome(&self, n: &ClusterNode, what: impl Into<String>) {
        self.results.outcome(n.name(), what.into());
    }

    /// The vimConnectionInfo the hook returns no longer has our entry (terminate, whole-VNF heal).
    pub fn forget_vim_connection(&self) {
        self.results.remove_vim_connection(&self.params.vim_name);
    }

    // ------------------------------------------------------------------ nodes

    /// An env file (secrets) for the run dir, mode 0600.
    pub fn env_upload(&self, name: &str, text: String) -> UploadFile {
        UploadFile {
            source: Source::Bytes(text.into_bytes().into()),
            remote: format!("{}/{name}", self.run_dir),
            mode: 0o600,
        }
    }

    /// Scripts (and offline artifacts) into the node's private run dir.
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
        Ok(files)
    }

    /// The registries' CA copies from the package, for `registry_apply.sh` (`-C`): with every
    /// prepare program, not only the scripts' upload, so a node re-prepared later has them.
    pub fn registry_ca_uploads(&self) -> Result<Vec<UploadFile>> {
        let mut files = Vec::new();
        for (i, r) in self.params.registries.iter().enumerate() {
            if let Some(c) = &r.certificate_path {
                let pkg = self
                    .pkg
                    .as_ref()
                    .ok_or_else(|| Error::input("arguments", "--package-dir", "is required for this operation"))?;
                let field = format!("additionalParams.k8s_cluster_installation_param.private_registry_connection_info[{i}].certificate_path");
                let source = pkg.file(c, &self.req_file, &field)?;
                let remote = format!("{}/{}", self.run_dir, crate::cluster::registry::ca_upload(i));
                files.push(UploadFile { source, remote, mode: 0o700 });
            }
        }
        Ok(files)
    }

    /// Read the head of the install script the nodes get (the very file uploaded: the
    /// package's checked, open file) and look for the marker.
    fn install_script_reads_secrets_from_env(&self) -> Result<bool> {
        let Some(pkg) = &self.pkg else { return Ok(false) };
        let field = "additionalParams.k8s_cluster_installation_param.script_path";
        let src = pkg.file(&self.params.script_path, &self.req_file, field)?;
        let Some(path) = src.local_path() else { return Ok(false) };
        let mut head = Vec::with_capacity(script_marker::HEADER_BYTES);
        std::fs::File::open(&path)
            .and_then(|f| f.take(script_marker::HEADER_BYTES as u64).read_to_end(&mut head))
            .map_err(|e| Error::input(&self.req_file, field, format!("cannot read {}: {e}", src.shown())))?;
        Ok(script_marker::reads_secrets_from_env(&head))
    }

    /// Delete env files (secrets) that an earlier run of this instance left on `n` because the
    /// command meant to consume them never started: the connection dropped, or the driver was
    /// killed, between the upload and the exec (`src/remote/clean_env.sh`). The first step on a
    /// node in `prepare`; the instance lock means no other run of this instance is using them.
    pub async fn clean_env(&self, n: &ClusterNode) -> Result<()> {
        let c = crate::command::RemoteCommand::new(cmd::clean_env(&self.run_dir, &[])?)
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
            self.sweep_after_failure(n).await;
        }
        r
    }

    /// After a failed step that uploaded env files: one attempt to delete them; its own failure
    /// is a warning (the next run's sweep catches them).
    async fn sweep_after_failure(&self, n: &ClusterNode) {
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

    /// Upload `files` (the env files `envs` among them; no upload without files) and run
    /// `cmd` (a node program that consumes those env files), one upload and one exec. When
    /// either fails the env files may still be on the node: one attempt to delete them at
    /// once, as [`Hook::with_env_file`] does.
    pub async fn run_program(
        &self,
        n: &ClusterNode,
        files: Vec<UploadFile>,
        envs: &[&str],
        cmd: crate::command::RemoteCommand,
    ) -> Result<crate::transport::ExecOutput> {
        let r = async {
            self.rt.upload(n, files).await?;
            self.rt.exec(n, cmd).await
        }
        .await;
        if r.is_err() && !envs.is_empty() {
            self.sweep_after_failure(n).await;
        }
        r
    }

    /// Run the install script on one node (a joining master or a worker) and record it; with
    /// `prep`, the node's prepare steps go first in the same node program.
    pub async fn install(
        &self,
        n: &ClusterNode,
        mode: InstallMode,
        join: Option<(&Secret, &str)>,
        cert_key: Option<&Secret>,
        prep: Option<Prep>,
    ) -> Result<()> {
        self.install_as(n, mode, join, cert_key, prep, |script| Installed { script }).await
    }

    /// Install the main master (after its `prep`, in the same node program) and read what its
    /// script printed: token, server, CA.
    pub async fn install_main(&self, n: &ClusterNode, prep: Option<Prep>) -> Result<MasterOutput> {
        let cluster_ip = self.topo.cluster_ip.as_str();
        self.install_as(n, InstallMode::MainMaster, None, None, prep, |script| MainMasterInstalled {
            script,
            cluster_ip,
        })
        .await
    }

    /// The install script on one node: secrets go in the env file, output is redacted; `read`
    /// names the fact its output is (from the script's line); then the node's hostname (its
    /// Kubernetes name) is read back, checked, and the node recorded. One node program: the
    /// sweep and the `prep` steps (when given), the install, the hostname after a marker line;
    /// one upload before it (the env file, and `prep`'s files).
    async fn install_as<F: Fact>(
        &self,
        n: &ClusterNode,
        mode: InstallMode,
        join: Option<(&Secret, &str)>,
        cert_key: Option<&Secret>,
        prep: Option<Prep>,
        read: impl FnOnce(String) -> F,
    ) -> Result<F::Value> {
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
        let installed = read(line);
        let install_cmd = installed.command()?;
        let env = script_env::env_file(&self.params, &self.topo, &extra)?;

        let mut program = NodeProgram::new();
        let mut envs = vec![env_name];
        let (mut files, digest) = match prep {
            Some(p) => {
                envs.extend(p.env_files);
                program.push(cmd::clean_env(&self.run_dir, &envs)?);
                for s in p.steps {
                    program.push(s);
                }
                (p.files, Some(p.digest))
            }
            None => (Vec::new(), None),
        };
        files.push(self.env_upload(env_name, env));
        program.push(install_cmd.script.clone());
        program.push_as(node_program::hostname_after(), node_program::HOSTNAME_LABEL);
        let c = self
            .rt
            .root_cmd(n, program.script()?, self.rt.timeouts.install)
            .with_label(program.label())
            .with_redact(install_cmd.redact);
        let out = self.run_program(n, files, &envs, c).await?;
        let hostname = Hostname { planned: n.k8s_name.clone() };
        let (value, k8s) = if out.planned {
            (installed.placeholder(), hostname.placeholder())
        } else {
            let text = out.stdout_text();
            let label = node_program::HOSTNAME_LABEL;
            let (printed, host) = node_program::split_hostname(&text).ok_or_else(|| {
                unreadable(n.name(), label, &hostname.what(), "the node program ended without printing it")
            })?;
            let value = installed
                .parse(printed)
                .map_err(|m| unreadable(n.name(), install_cmd.display(), &installed.what(), m))?;
            let k8s = hostname.parse(host).map_err(|m| unreadable(n.name(), label, &hostname.what(), m))?;
            (value, k8s)
        };
        self.with_state(|s| {
            let st = s.node(n.name());
            st.role = Some(n.role);
            st.ssh_addr = n.host.addr.clone();
            st.nic_ip = n.nic_ip.clone();
            st.k8s_name = k8s;
            st.installed = true;
            if digest.is_some() {
                st.prepared_secret_digest = digest;
            }
            // A healed VM under a new id: its old record (same address) goes.
            s.supersede_same_address(n.name());
        });
        self.save()?;
        Ok(value)
    }

    /// A fresh join token from a master (redacted: the output is the secret).
    pub async fn join_token(&self, m: &ClusterNode) -> Result<Secret> {
        self.rt.read(m, &JoinToken).await
    }

    /// A fresh certificate key for a joining master (uploads the control-plane certificates).
    pub async fn certificate_key(&self, m: &ClusterNode) -> Result<Secret> {
        self.rt.read(m, &CertificateKey).await
    }

    /// Cluster facts from a running master (re-runs, where the script's output is gone).
    pub async fn query_facts(&self, m: &ClusterNode) -> Result<ClusterFacts> {
        let server = self.rt.read(m, &ApiServer { cluster_ip: &self.topo.cluster_ip }).await?;
        let ca_pem = self.rt.read(m, &CaPem).await?;
        let ca_hash = self.rt.read(m, &CaHash).await?;
        Ok(self.facts(m, server, ca_pem, ca_hash))
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
        // The token that binds the credential reference to this cluster: minted once, kept by
        // every re-record (a heal), so the references VNFMs and CNF records hold stay valid; a
        // record written before tokens gets one now.
        let token = self.with_state(|s| {
            s.credential_ref_token
                .get_or_insert_with(|| {
                    let bytes: [u8; credential_ref::TOKEN_BYTES] = Generate::generate();
                    credential_ref::token_text(&bytes)
                })
                .clone()
        });
        let rec =
            Record::of_cluster(&self.params, &self.topo, &facts, bearer, &self.instance_id, self.tacker_compat, &token);
        let conn = rec.vim_connection();
        // The result shows the entry; only the stored record and the VNFM's entry hold the ref.
        let shown = record::masked_ref(&serde_json::to_value(&conn).expect("serializes"));
        let shown = serde_json::from_value(shown).expect("the same entry, one string masked");
        self.results.set_vim_connection(&rec.auth_url, &self.params.vim_name, shown);
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
    /// password. Each master that login does not fit is named (see [`record::compat_warnings`]).
    pub fn record_warnings(&self) -> Vec<String> {
        record::compat_warnings(&self.params, &self.topo, self.tacker_compat)
    }

    /// Where the hook ran, for the result document's context.
    pub fn context(&self) -> Value {
        json!({
            "vnfInstanceId": self.instance_id,
            "state": self.store.doc_path(&self.instance_id, state::KIND),
        })
    }

    /// The recorded VIM (its bearer token masked unless `--tacker-compat`; its credential
    /// reference always).
    pub fn recorded_vim(&self) -> Option<Value> {
        self.with_state(|s| s.vim.clone()).map(|mut v| {
            if !self.tacker_compat {
                v["auth_cred"]["bearer_token"] = crate::secret::MASK.into();
            }
            record::masked_ref(&v)
        })
    }

    /// The hook's result: the updated vimConnectionInfo, the VIM record and each node's outcome.
    pub fn result(&self, vim: Option<Value>) -> Value {
        let order: Vec<&str> = self.topo.all().map(|n| n.name()).collect();
        self.results.document(&order, vim)
    }
}
