//! What a lifecycle step runs on: a host with a role. The runner only needs the host (how to
//! reach it and its name); the role says what the host is to the operation (a cluster master, a
//! worker, or just a node of a fan-out). Cluster nodes carry more (their cluster address and
//! Kubernetes name), so the runner takes anything that is a [`Node`], and no operation has to
//! dress a host up as something it is not.

use crate::command::Become;
use crate::inventory::Host;

/// How become applies to a host: nothing for root, `sudo -S` with a password, `sudo -n` without.
pub fn become_for(host: &Host, want: bool) -> Become {
    match (want, host.user == "root", host.become_password.is_some()) {
        (false, _, _) | (true, true, _) => Become::No,
        (true, false, true) => Become::SudoWithPassword,
        (true, false, false) => Become::SudoNoPassword,
    }
}

/// A host's part in an operation. Stored in instance state, hence the stable lowercase names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A Kubernetes control-plane node (Helm runs here).
    Master,
    /// A Kubernetes worker.
    Worker,
    /// A plain host of a fan-out command.
    Node,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
            Role::Node => "node",
        }
    }
}

/// Anything the runner can run steps on.
pub trait Node: Sync {
    fn host(&self) -> &Host;

    /// The name events, errors and plans use for it (the inventory name).
    fn name(&self) -> &str {
        &self.host().name
    }

    /// What it is to the operation (messages say "the next master", not "the next host").
    fn role(&self) -> Role {
        Role::Node
    }
}

impl<T: Node + ?Sized> Node for &T {
    fn host(&self) -> &Host {
        (**self).host()
    }

    fn role(&self) -> Role {
        (**self).role()
    }
}

impl Node for Host {
    fn host(&self) -> &Host {
        self
    }
}

/// A host with a role: the target of a CNF step (a master) or of a fan-out command (a node).
#[derive(Clone, Debug)]
pub struct Target {
    pub host: Host,
    pub role: Role,
}

impl Target {
    pub fn new(host: Host, role: Role) -> Target {
        Target { host, role }
    }
}

impl Node for Target {
    fn host(&self) -> &Host {
        &self.host
    }

    fn role(&self) -> Role {
        self.role
    }
}
