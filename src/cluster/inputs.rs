//! What the caller of a cluster hook hands over (the hook commands, the VNFM hook, a per-site
//! plan): paths, documents and flags, nothing read yet; `prepare` reads and checks them. Built
//! with [`Inputs::new`] and one setter per input, so every caller says the same three things
//! first and an input added later is a setter, not an edit of each caller's struct literal.

use std::path::PathBuf;

use crate::inventory::LoadOptions;
use crate::request::Doc;
use crate::secret_ref::Policy;

#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The operation's request body (SOL002/SOL003 JSON).
    pub request: Option<Doc>,
    pub inventory: Option<PathBuf>,
    /// `inventory` as the request named it in the package (in package mode), which
    /// instantiate_end records for the later hooks whose request names none.
    pub request_inventory: Option<String>,
    pub inventory_opts: LoadOptions,
    pub package_dir: Option<PathBuf>,
    /// The VnfInstance (SOL003 JSON): its id, vimConnectionInfo and vnfcResourceInfo.
    pub vnf_instance: Option<Doc>,
    /// The SOL003 GrantRequest: a SCALE_IN's or heal's `removeResources` name the VMs.
    pub grant_request: Option<Doc>,
    pub vnf_instance_id: Option<String>,
    /// Inventory host names to scale or heal (default: from the request).
    pub node: Vec<String>,
    pub tacker_compat: bool,
    /// known_hosts for nodes taken from the VnfInstance (accept-new).
    pub known_hosts: Option<PathBuf>,
    /// Only planning: a scale or heal may be planned without a recorded instantiate.
    pub dry_run: bool,
    /// Who wrote the documents, so which secret references their passwords may use
    /// (`secret_ref.rs`). Default: a tenant's, none.
    pub secret_refs: Policy,
    /// The operator's VIM settings: which Keystone endpoints a request may name, and the
    /// client. The VIM is asked only for addresses the instance lacks.
    pub vim: crate::vim::Vim,
}

impl Inputs {
    /// A hook's inputs: its request (terminate may have none), how inventories are loaded, and
    /// whether this run only plans. Every other input starts absent (off, empty).
    pub fn new(request: Option<Doc>, inventory_opts: LoadOptions, dry_run: bool) -> Inputs {
        Inputs { request, inventory_opts, dry_run, ..Inputs::default() }
    }

    /// The inventory the nodes come from (else the VnfInstance's `vnfcResourceInfo`).
    pub fn inventory(mut self, path: Option<PathBuf>) -> Inputs {
        self.inventory = path;
        self
    }

    /// The request's own inventory, a path in the package (`inventory` is that file, read in
    /// package mode): recorded by instantiate_end for the later hooks.
    pub fn request_inventory(mut self, rel: Option<String>) -> Inputs {
        self.request_inventory = rel;
        self
    }

    /// The unpacked VNF package the request's script paths are relative to.
    pub fn package_dir(mut self, dir: Option<PathBuf>) -> Inputs {
        self.package_dir = dir;
        self
    }

    pub fn vnf_instance(mut self, doc: Option<Doc>) -> Inputs {
        self.vnf_instance = doc;
        self
    }

    /// The instance id when no VnfInstance gives it (both given: they must agree).
    pub fn vnf_instance_id(mut self, id: Option<String>) -> Inputs {
        self.vnf_instance_id = id;
        self
    }

    /// The operator's VIM allow-list and client (`vim/`).
    pub fn vim(mut self, vim: crate::vim::Vim) -> Inputs {
        self.vim = vim;
        self
    }

    pub fn grant_request(mut self, doc: Option<Doc>) -> Inputs {
        self.grant_request = doc;
        self
    }

    /// The nodes to scale or heal, by inventory host name.
    pub fn node(mut self, names: Vec<String>) -> Inputs {
        self.node = names;
        self
    }

    pub fn tacker_compat(mut self, on: bool) -> Inputs {
        self.tacker_compat = on;
        self
    }

    pub fn known_hosts(mut self, path: Option<PathBuf>) -> Inputs {
        self.known_hosts = path;
        self
    }

    /// The secret references the documents may use: the operator's confinement for files the
    /// operator named, [`Policy::Tenant`] (the default) for a VNFM's request body.
    pub fn secret_refs(mut self, policy: Policy) -> Inputs {
        self.secret_refs = policy;
        self
    }
}
