//! What every CNF operation shares: the record the store keeps per CNF (and [`Record`], which
//! saves it after every change), the context an operation runs in, and the steps more than one
//! operation takes: a release's chart argument, a repository added on a master, a release
//! described as recorded. Each operation's own checks and steps are its file under `run/`; every
//! command comes from `helm_cmd` (pure) and runs through the session's active master.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cnf::helm_cmd::InstallOpts;
use crate::cnf::manifest::Resource;
use crate::cnf::names;
use crate::cnf::params::{ChartSource, CnfParams, Release};
use crate::cnf::session::Session;
use crate::cnf::values_file::ValuesFile;
use crate::error::Result;
use crate::facts::helm::{ReleaseManifest, ReleaseStatus};
use crate::lifecycle::package::Package;
use crate::lifecycle::state::Store;
use crate::lifecycle::{Node, Target};
use crate::quote::quote;
use crate::transport::{ExecOutput, Source, UploadFile};

/// The CNF document's kind in the store: `<id>.cnf.json`.
pub const KIND: &str = "cnf";

/// What the CNF state store keeps per VNF instance. `Debug` masks its secrets (repository
/// password, helm_info password, secret-named values).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct CnfState {
    pub vnf_instance_id: String,
    pub namespace: String,
    /// The request's additionalParams (later operations reuse them).
    pub params: Value,
    pub masters: Vec<String>,
    pub releases: BTreeMap<String, ReleaseState>,
    /// The instantiate request's flavourId: whose VNFD flavour a scale reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavour_id: Option<String>,
    /// The cluster id whose Helm environment holds the CNF's repositories (`cluster_env`);
    /// none in records of drivers before it (they use the legacy environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The Helm major version the last instantiate found on the active master: a re-run with
    /// `--atomic` (whose flag Helm 3 and 4 spell differently) builds its command lines from it
    /// before it reads the version, and so needs no round trip of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_major: Option<u32>,
}

crate::secret::impl_debug_masked!(CnfState);

/// `Debug` masks secret-named values.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReleaseState {
    pub chart: String,
    pub revision: u64,
    pub status: String,
    pub resources: Vec<Resource>,
    pub values: Value,
}

crate::secret::impl_debug_masked!(ReleaseState);

pub struct Ctx<'a> {
    pub s: &'a Session,
    pub params: &'a CnfParams,
    pub instance: &'a str,
    pub pkg: Option<&'a Package>,
    pub req_file: &'a str,
    pub opts: InstallOpts,
    pub timeout: Duration,
}

/// The CNF's record in the store, saved after every change.
pub struct Record<'a> {
    pub st: CnfState,
    pub store: &'a Store,
    pub id: &'a str,
}

impl Record<'_> {
    pub fn save(&mut self) -> Result<()> {
        self.store.save_doc(self.id, KIND, &self.st)
    }

    pub fn release(&mut self, name: &str, rs: &ReleaseState) -> Result<()> {
        self.st.releases.insert(name.to_string(), rs.clone());
        self.save()
    }

    /// Forget the CNF (terminate, reset --uninstall): its document leaves the store (`false`:
    /// it was not there).
    pub fn remove(&self) -> Result<bool> {
        self.store.remove_doc(self.id, KIND)
    }
}

/// A Helm command's deadline: the operation's `--timeout` (Helm's own), and 30 s for Helm to
/// report that it ran out.
pub fn cmd_timeout(c: &Ctx) -> Duration {
    c.timeout + Duration::from_secs(30)
}

/// The chart argument of a release on the masters.
pub fn chart_ref(instance: &str, r: &Release) -> String {
    match &r.source {
        ChartSource::Local { chart_dir, .. } => format!("{}/{chart_dir}", names::chart_dir(instance)),
        ChartSource::External { repo, chart, .. } => format!("{}/{chart}", names::instance_repo(instance, repo)),
        ChartSource::Oci { reference } => reference.clone(),
    }
}

/// An operator's chart reference as the masters know it: `REPO/CHART` naming one of this CNF's
/// repositories (by the name its request gave it) means the instance's own copy of it
/// (`<instance>@REPO`, [`names::instance_repo`]); anything else is used as written.
pub fn own_chart(c: &Ctx, chart: &str) -> String {
    match chart.split_once('/') {
        Some((repo, name))
            if c.params
                .releases
                .iter()
                .any(|r| matches!(&r.source, ChartSource::External { repo: x, .. } if x == repo)) =>
        {
            format!("{}/{name}", names::instance_repo(c.instance, repo))
        }
        _ => chart.to_string(),
    }
}

/// The operator's values files onto the active master, each 0600 in the instance's run
/// directory, for one Helm command of `release`; returns their paths there, in order (Helm
/// merges them so, later ones winning). The caller removes them ([`remove_files`]).
pub async fn upload_values(c: &Ctx<'_>, release: &str, files: &[ValuesFile]) -> Result<Vec<String>> {
    let run = format!(".mgmt-driver/run/{}", c.instance);
    let mut paths = Vec::new();
    let mut uploads = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let remote = format!("{run}/values-{release}-{i}.yaml");
        uploads.push(UploadFile { source: Source::Bytes(f.bytes.clone().into()), remote: remote.clone(), mode: 0o600 });
        paths.push(remote);
    }
    if !uploads.is_empty() {
        c.s.rt.upload(c.s.master(), uploads).await?;
    }
    Ok(paths)
}

/// Remove files of the run directory from the active master (best effort: a file left behind
/// is 0600 in the login user's own directory, and the next run overwrites it).
pub async fn remove_files(c: &Ctx<'_>, files: &[String]) -> Result<()> {
    for f in files {
        let _ = c.s.run(format!("rm -f -- {}", quote(f)?), c.s.rt.timeouts.command).await;
    }
    Ok(())
}

/// The CNF's releases: the request's (or recorded request's), else the recorded ones.
pub fn cnf_releases(params: &CnfParams, st: &CnfState) -> Vec<String> {
    if params.releases.is_empty() {
        st.releases.keys().cloned().collect()
    } else {
        params.releases.iter().map(|r| r.name.clone()).collect()
    }
}

/// `helm repo add NAME URL` and `helm repo update NAME` on `n`. Credentials: the password in a
/// 0600 file of the run dir fed to `--password-stdin` and deleted; the CA file kept 0600 (Helm
/// reads it on every pull).
pub async fn add_repo_as(
    s: &Session,
    n: &Target,
    instance: &str,
    name: &str,
    url: &str,
    creds: Option<(&str, &crate::secret::Secret)>,
    ca: Option<Source>,
) -> Result<()> {
    let t = s.rt.timeouts.command;
    let run = format!(".mgmt-driver/run/{instance}");
    let mut files = Vec::new();
    let pw_file = creds.map(|_| format!("{run}/repo-{name}.pw"));
    if let (Some(f), Some((_, pw))) = (&pw_file, creds) {
        let bytes = Source::Bytes(pw.expose().as_bytes().to_vec().into());
        files.push(UploadFile { source: bytes, remote: f.clone(), mode: 0o600 });
    }
    let ca_file = match ca {
        Some(local) => {
            let remote = format!("{run}/repo-{name}-ca.crt");
            files.push(UploadFile { source: local, remote: remote.clone(), mode: 0o600 });
            Some(remote)
        }
        None => None,
    };
    if !files.is_empty() {
        s.rt.upload(n, files).await?;
    }
    let add = s.helm.repo_add(name, url, creds.map(|c| c.0), pw_file.as_deref(), ca_file.as_deref())?;
    let res = s.rt.exec(n, s.rt.root_cmd(n, add, t)).await;
    if let Some(f) = &pw_file {
        s.rt.exec(n, s.rt.root_cmd(n, format!("rm -f -- {}", quote(f)?), t)).await?;
    }
    res?;
    s.rt.exec(n, s.rt.root_cmd(n, s.helm.repo_update(name)?, t)).await?;
    Ok(())
}

/// A release as `helm upgrade -o json` printed it (`out`), checked (`helm_apply::made`), its
/// values masked: what [`describe`] reads with three more Helm processes.
pub fn made_release(c: &Ctx<'_>, r: &Release, chart: &str, command: &str, out: &ExecOutput) -> Result<ReleaseState> {
    let s = c.s;
    let m = s.master();
    if out.planned {
        return Ok(ReleaseState { chart: chart.into(), ..Default::default() });
    }
    let out = &out.stdout;
    let x = crate::cnf::helm_apply::made(out, &r.name, &c.params.namespace)
        .map_err(|msg| crate::lifecycle::fact::unreadable(m.name(), command, "the release Helm made", msg))?;
    let mut values = x.values;
    crate::cnf::secret_values::mask(&mut values, &r.secret_set);
    s.rt.ev(m).emit(crate::event::EventKind::Status {
        subject: format!("release {}", r.name),
        status: format!("{} (revision {})", x.status, x.revision),
    });
    Ok(ReleaseState { chart: chart.into(), revision: x.revision, status: x.status, resources: x.resources, values })
}

/// Status, manifest → resources, and all values of a release, as recorded.
pub async fn describe(c: &Ctx<'_>, r: &Release, chart: &str) -> Result<ReleaseState> {
    let s = c.s;
    let ns = &c.params.namespace;
    let m = s.master();
    // Read, not streamed: status JSON carries the user-supplied values, manifests the
    // rendered Secrets. What is kept is parsed and masked.
    let (status, revision) = s.rt.read(m, &ReleaseStatus { helm: &s.helm, release: &r.name, namespace: ns }).await?;
    let man = ReleaseManifest { helm: &s.helm, release: &r.name, namespace: ns, planned: Vec::new() };
    let resources = s.rt.read(m, &man).await?;
    let mut values = s.json(s.helm.get_values(&r.name, ns, true)?, "the release values").await?;
    if !(values.is_object() || values.is_null()) {
        return Err(crate::lifecycle::fact::unreadable(
            m.name(),
            "helm get values",
            "the release values",
            "not a JSON object",
        ));
    }
    crate::cnf::secret_values::mask(&mut values, &r.secret_set);
    s.rt.ev(m).emit(crate::event::EventKind::Status {
        subject: format!("release {}", r.name),
        status: format!("{status} (revision {revision})"),
    });
    Ok(ReleaseState { chart: chart.into(), revision, status, resources, values })
}
