//! Helm CNF lifecycle over SSH: Tacker's HelmClient and OSM's Helm connector, done right. Pure
//! parts (helm_info parsing, params, Helm 3/4 command lines, manifests) are unit-tested; `masters`
//! finds where Helm runs, `session` picks a master (with failover) and runs Helm there, `ops`
//! holds what the operations share, and `run/` has one file per operation (its checks and its
//! steps) beside `run/mod.rs`, which reads the inputs and dispatches.
//!
//! The operation list derives clap's `Subcommand` so the CLI can parse it directly; it is still
//! plain data to everything here.

pub mod cluster_env;
pub mod heal_program;
pub mod helm_apply;
pub mod helm_cmd;
pub mod helm_info;
pub mod helm_prepare;
pub mod helm_remove;
pub mod local_cluster;
pub mod manifest;
pub mod masters;
pub mod names;
pub mod ops;
pub mod params;
pub mod run;
pub mod secret_values;
pub mod services;
pub mod session;
pub mod values_file;
pub mod vnfd;
pub mod vnfd_read;

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::inventory::LoadOptions;
use crate::request::Doc;

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Op {
    /// Deploy the request's charts (install, or upgrade when the release exists).
    Instantiate,
    /// Scale an aspect: helm upgrade --reuse-values --set <helm_replica_values path>=<n>.
    Scale,
    /// SOL002 (vnfcInstanceId): re-create the VNFCs' pods (ids mapped through --vnf-instance's
    /// vnfcInfo, else pod names). SOL003 (no ids): restart every workload of the releases and
    /// wait until every pod is Ready again (within --timeout).
    Heal,
    /// Install one chart without a request (OSM's install): CHART is REPO/CHART (a repository
    /// added with repo-add or repo-sync), an oci:// or http(s):// chart URL, optionally
    /// `CHART:VERSION`. The release goes into --namespace (else --cluster-uuid's namespace), is
    /// recorded under --vnf-instance-id, and is upgraded in place when it exists already.
    Install {
        /// REPO/CHART, a chart URL, or either with `:VERSION`.
        chart: String,
        /// The release name (default: OSM's rule, the chart's name and 10 digits derived from
        /// --vnf-instance-id and the chart, the same on every run).
        #[arg(long)]
        release: Option<String>,
        /// The chart version (or put it in CHART as `CHART:VERSION`, not both).
        #[arg(long)]
        version: Option<String>,
        /// A values file on this machine (YAML or JSON, repeatable, later ones win): copied to the
        /// master 0600 for the one Helm command and removed.
        #[arg(long = "values", short = 'f', value_name = "FILE")]
        values: Vec<PathBuf>,
        /// key=value, repeatable; each stays one literal argument.
        #[arg(long)]
        set: Vec<String>,
    },
    /// Upgrade a release (new chart, version or values); prints the new revision.
    Upgrade {
        /// The release to upgrade.
        #[arg(long)]
        release: String,
        /// Chart reference (default: the release's recorded chart).
        #[arg(long)]
        chart: Option<String>,
        /// The chart version (default: the newest).
        #[arg(long)]
        version: Option<String>,
        /// key=value, repeatable; each stays one literal argument.
        #[arg(long)]
        set: Vec<String>,
        /// Start from the release's current values (helm --reuse-values); --set goes on top.
        #[arg(long)]
        reuse_values: bool,
        /// A values file on this machine (YAML or JSON, repeatable, later ones win): copied to the
        /// master 0600 for the one Helm command and removed.
        #[arg(long = "values", short = 'f', value_name = "FILE")]
        values: Vec<PathBuf>,
    },
    /// Uninstall one release (waiting) and forget it in the record; the CNF's other releases,
    /// repositories and charts stay. A release already gone is reported, not an error.
    Uninstall {
        /// The release.
        #[arg(long)]
        release: String,
    },
    /// Roll a release back (to REVISION, or the previous one).
    Rollback {
        /// The release to roll back.
        #[arg(long)]
        release: String,
        /// The revision to go back to (default: the previous one).
        #[arg(long)]
        revision: Option<u32>,
    },
    /// A release's status (helm status).
    Status {
        /// The release.
        #[arg(long)]
        release: String,
    },
    /// A release's revisions (helm history).
    History {
        /// The release.
        #[arg(long)]
        release: String,
    },
    /// A release's values (helm get values; values marked secret are masked).
    Values {
        /// The release.
        #[arg(long)]
        release: String,
        /// Every value, the chart's defaults included (helm get values --all).
        #[arg(long)]
        all: bool,
    },
    /// The releases on the cluster (helm list; with --namespace, that namespace only).
    List,
    /// helm show values|readme|chart|all CHART [--repo URL] [--version V]: CHART is REPO/CHART
    /// or a URL, or a bare chart name with --repo (an http(s) URL without credentials).
    Show {
        /// What to show: values, readme, chart or all.
        what: String,
        /// REPO/CHART, a chart URL, or a chart name with --repo.
        chart: String,
        /// The chart repository's URL (http or https, without credentials).
        #[arg(long)]
        repo: Option<String>,
        /// The chart version (default: the newest).
        #[arg(long)]
        version: Option<String>,
    },
    /// The masters' Helm repositories (helm repo list).
    RepoList,
    /// Make every master's repositories exactly NAME=URL... (add, re-add on URL change, remove
    /// extras; a CNF's own `<instance>@<name>` repositories are left alone). Userinfo in a URL
    /// goes to Helm as --username/--password-stdin, never in argv or output.
    RepoSync {
        /// A repository, NAME=URL (repeatable).
        #[arg(long = "repo")]
        repos: Vec<String>,
    },
    /// Add (or re-point) one repository on every master, in the cluster's environment: NAME=URL;
    /// userinfo in the URL goes to Helm as --username/--password-stdin. Others are left alone.
    RepoAdd {
        /// NAME=URL.
        repo: String,
    },
    /// Remove one repository from every master's cluster environment (absent: reported).
    RepoRemove {
        /// The repository's name.
        name: String,
    },
    /// Uninstall the releases, remove repositories and chart directories on every master.
    Terminate,
    /// The Services of a release (or of every release of the CNF), from its manifest: type,
    /// ports, and from the cluster the cluster IP, node ports and a LoadBalancer's external IPs.
    Services {
        /// Only this release (default: every release of the CNF).
        #[arg(long)]
        release: Option<String>,
    },
    /// Forget the cluster's Helm environment on every master (its kubeconfig copy,
    /// repositories and caches; OSM's reset). With --uninstall, first uninstall every release
    /// of the CNF and remove its repositories, charts and record, as terminate does. Running it
    /// again is a no-op.
    Reset {
        /// First uninstall every release of the CNF and remove its repositories, charts and
        /// record.
        #[arg(long)]
        uninstall: bool,
    },
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Instantiate => "cnf instantiate",
            Op::Scale => "cnf scale",
            Op::Heal => "cnf heal",
            Op::Install { .. } => "cnf install",
            Op::Upgrade { .. } => "cnf upgrade",
            Op::Uninstall { .. } => "cnf uninstall",
            Op::Rollback { .. } => "cnf rollback",
            Op::Status { .. } => "cnf status",
            Op::History { .. } => "cnf history",
            Op::Values { .. } => "cnf values",
            Op::List => "cnf list",
            Op::Show { .. } => "cnf show",
            Op::RepoList => "cnf repo-list",
            Op::RepoSync { .. } => "cnf repo-sync",
            Op::RepoAdd { .. } => "cnf repo-add",
            Op::RepoRemove { .. } => "cnf repo-remove",
            Op::Terminate => "cnf terminate",
            Op::Services { .. } => "cnf services",
            Op::Reset { .. } => "cnf reset",
        }
    }
}

/// Who wrote the operation's request, which decides what it may make the driver do with the
/// conductor's own credentials (`masters::masters`, the one place that asks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Author {
    /// The operator's command line (`mgmt-driver cnf`): masters that no credential covers are
    /// logged in to with the conductor's ssh-agent, as `ssh` would.
    Operator,
    /// A VNFM's API user, through `mgmt-driver hook`: its request never gets the conductor's
    /// ssh-agent for addresses it chose. The default: the one with the least power.
    #[default]
    Tenant,
}

/// What the caller hands over for a CNF operation.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Who wrote the request (and the vimConnectionInfo in it).
    pub author: Author,
    /// The VNF instance (CNF) id: names the chart directory and the state document.
    pub vnf_instance_id: Option<String>,
    /// The operation's request (instantiate, scale, heal).
    pub request: Option<Doc>,
    /// The VnfInstance (SOL003): maps a heal's vnfcInstanceId to its pod.
    pub vnf_instance: Option<Doc>,
    /// `--namespace`: overrides the request's (or the recorded) `namespace`.
    pub namespace: Option<String>,
    pub package_dir: Option<PathBuf>,
    /// A vimConnectionInfo file (list, map or one entry) holding extra.helm_info.
    pub vim_connection_info: Option<PathBuf>,
    /// Use the cluster recorded by `instantiate-end` under this id.
    pub cluster_instance: Option<String>,
    /// OSM's `cluster_uuid` (`NAMESPACE:CLUSTER_ID` or `CLUSTER_ID`): whose Helm environment
    /// the commands use, and the releases' default namespace.
    pub cluster_uuid: Option<String>,
    /// Credentials and host keys for the masters (matched by address).
    pub inventory: Option<PathBuf>,
    /// A cluster known only by this kubeconfig (the operator's file): Helm runs on the
    /// controller with it, no master or inventory is used (`cnf/local_cluster.rs`).
    pub kubeconfig: Option<PathBuf>,
    pub inventory_opts: LoadOptions,
    pub known_hosts: Option<PathBuf>,
    /// helm --wait.
    pub wait: bool,
    /// Roll back on failure (Helm 3 --atomic, Helm 4 --rollback-on-failure).
    pub atomic: bool,
    /// Each Helm operation's --timeout, and our deadline around it.
    pub timeout: Duration,
    /// Poll `helm status` this often while a long Helm command runs.
    pub status_interval: Duration,
    /// Who wrote the request, so which `@env:` references its Helm values may use
    /// (`secret_ref.rs`). Default: a tenant's, none.
    pub secret_refs: crate::secret_ref::Policy,
}

impl Inputs {
    /// A CNF operation on `vnf_instance_id` with nothing else given: no request, package or
    /// masters yet (every caller names its own), written by a tenant (the operator's own
    /// command line says it is the operator), no `--wait` or `--atomic`, Helm's timeout of
    /// [`TIMEOUT`] and its status polled every [`STATUS_INTERVAL`] (the CLI's defaults). The one
    /// place these are decided: callers fill what they have with `..Inputs::new(..)`.
    pub fn new(vnf_instance_id: Option<String>, inventory_opts: LoadOptions) -> Inputs {
        Inputs {
            author: Author::Tenant,
            vnf_instance_id,
            request: None,
            vnf_instance: None,
            namespace: None,
            package_dir: None,
            vim_connection_info: None,
            cluster_instance: None,
            cluster_uuid: None,
            inventory: None,
            kubeconfig: None,
            inventory_opts,
            known_hosts: None,
            wait: false,
            atomic: false,
            timeout: TIMEOUT,
            status_interval: STATUS_INTERVAL,
            secret_refs: crate::secret_ref::Policy::Tenant,
        }
    }

    /// The operation's request; without one, bad input naming `op`.
    pub fn need_request(&self, op: &str) -> Result<&Doc> {
        self.request.as_ref().ok_or_else(|| Error::input("arguments", "--request", format!("is required for {op}")))
    }
}

/// Each Helm operation's `--timeout` unless the caller says otherwise.
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// How often `helm status` is polled while a long Helm command runs, unless the caller says.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(5);

/// An operator's argument checked by a `names` rule: bad input naming the argument.
pub fn check_arg(field: &str, r: std::result::Result<(), String>) -> Result<()> {
    r.map_err(|m| Error::input("arguments", field, m))
}
