//! Named facts: every value an operation reads back from a node (a hostname, a join token, a
//! PersistentVolume's phase, Helm's JSON), each one a type that says what it is called, which
//! command prints it, what a plan assumes instead, and how its output is parsed.
//!
//! Pure: a fact is data and a parser. `Runner::read` (`lifecycle/fact.rs`) runs it on a node and
//! gives the value, the placeholder when the step is only planned, or one `Unreadable` error
//! naming the node, the command and [`Fact::what`]. Output from a node may be hostile (a
//! compromised node, a tampered chart): every parser here checks what it keeps before it goes
//! into a record, an event or another command line.

use std::time::Duration;

use crate::command::RemoteCommand;
use crate::error::Result;

pub mod etcd;
pub mod helm;
pub mod kubeadm;
pub mod kubectl;
pub mod node;
pub mod primitive;
pub mod storage;
#[cfg(test)]
mod testkit;

/// A value read from a node by running one command.
pub trait Fact {
    type Value;

    /// What the value is called in the error when it cannot be read ("a bootstrap token").
    fn what(&self) -> String;

    /// The command that prints it, with how its output is streamed (`with_redact`) and how much
    /// of it is kept (`with_capture`). The runner runs it within [`Fact::wait`], as root unless
    /// [`Fact::as_root`] says otherwise.
    fn command(&self) -> Result<RemoteCommand>;

    /// Whether the command needs root (through sudo for a login that is not root). Every fact
    /// of the cluster and CNF operations does; a primitive says for itself.
    fn as_root(&self) -> bool {
        true
    }

    /// How long the command may run.
    fn wait(&self) -> Wait {
        Wait::Command
    }

    /// The value a plan (dry run) goes on with: the command only ran on paper.
    fn placeholder(&self) -> Self::Value;

    /// The value in what the command printed, or why it is not there (the message never quotes
    /// output that may be a secret).
    fn parse(&self, out: &str) -> std::result::Result<Self::Value, String>;
}

/// The last line of `out` that is not blank, trimmed (`""` when there is none): where node
/// programs and kubeadm print the value or the verdict after whatever they logged.
pub fn last_line(out: &str) -> &str {
    out.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

/// How long a fact's command may run: one of the runner's configured timeouts, or a fixed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The runner's bound for a quick command (`Timeouts::command`).
    Command,
    /// The runner's bound for Helm (`--helm-timeout` where a command has it).
    Helm,
    /// The runner's bound for the install script (`--install-timeout`).
    Install,
    /// A fixed bound.
    For(Duration),
}
