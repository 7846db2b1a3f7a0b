//! Facts: values an operation reads back from a node (a hostname, a join token, an etcd member
//! id, Helm's JSON), each a named fact of `crate::facts`. One helper runs the command, parses
//! what it printed, and either gives the value, a placeholder when the step was only planned
//! (dry run), or one typed error that names the node, the command and what could not be read.
//! Operations never parse raw output by hand and never ask whether this is a dry run.

use crate::command::RemoteCommand;
use crate::error::{Error, Result};
use crate::facts::{Fact, Wait};
use crate::lifecycle::runner::Runner;
use crate::target::{become_for, Node};

impl Runner {
    /// Read a named fact (`crate::facts`) on `node`: its command within its wait, as root when
    /// it asks for root (as `root_cmd` makes every command of the operations).
    pub async fn read<F: Fact>(&self, node: &dyn Node, fact: &F) -> Result<F::Value> {
        let timeout = match fact.wait() {
            Wait::Command => self.timeouts.command,
            Wait::Helm => self.timeouts.helm,
            Wait::Install => self.timeouts.install,
            Wait::For(d) => d,
        };
        let cmd = fact.command()?;
        let cmd = cmd.with_timeout(Some(timeout)).with_become(become_for(node.host(), fact.as_root()));
        self.fact(node, cmd, &fact.what(), || fact.placeholder(), |out| fact.parse(out)).await
    }

    /// Run `cmd` on `node` and parse its stdout with `parse`; `what` names the value for the
    /// error ("the bootstrap token", "the release status"). In a plan, `placeholder()`. What
    /// [`read`](Self::read) stands on; a new value read back is a named fact, not a call here.
    pub async fn fact<T>(
        &self,
        node: &dyn Node,
        cmd: RemoteCommand,
        what: &str,
        placeholder: impl FnOnce() -> T,
        parse: impl FnOnce(&str) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let command = cmd.display().to_string();
        let out = self.exec(node, cmd).await?;
        if out.planned {
            return Ok(placeholder());
        }
        parse(&out.stdout_text()).map_err(|message| unreadable(node.name(), &command, what, message))
    }
}

/// The error for output that does not hold what it should.
pub fn unreadable(node: &str, command: &str, what: &str, message: impl Into<String>) -> Error {
    Error::Unreadable { node: node.into(), command: command.into(), what: what.into(), message: message.into() }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::event::Events;
    use crate::inventory::Host;
    use crate::lifecycle::plan::PlanConnector;
    use crate::lifecycle::runner::{FanOut, Runner, Timeouts};
    use crate::transport::fake::FakeConnector;
    use crate::transport::Connector;

    fn rt(c: Arc<dyn Connector>) -> Runner {
        Runner::new(c, Events::channel().0, FanOut::default(), Timeouts::default())
    }

    fn number(t: &str) -> Result<u32, String> {
        t.trim().parse().map_err(|e| format!("{e}"))
    }

    #[tokio::test]
    async fn parses_plans_or_names_node_command_and_value() {
        let h = Host::for_test("m1", "192.0.2.1");
        let fake = FakeConnector::new();
        fake.reply(None, "count", "42\n").reply(None, "garbage", "forty-two");
        let r = rt(Arc::new(fake));
        let cmd = |s: &str| crate::command::RemoteCommand::new(s);
        assert_eq!(r.fact(&h, cmd("count"), "the count", || 0, number).await.unwrap(), 42);
        let e = r.fact(&h, cmd("garbage"), "the count", || 0, number).await.unwrap_err();
        assert_eq!(e.kind(), "unreadable");
        let text = e.to_string();
        assert!(text.contains("m1") && text.contains("garbage") && text.contains("the count"), "{text}");
        let planned = rt(Arc::new(PlanConnector::new()));
        assert_eq!(planned.fact(&h, cmd("count"), "the count", || 7, number).await.unwrap(), 7);
        let list = crate::facts::helm::Json::new("helm list -o json".into(), "the release list");
        let j = planned.read(&h, &list).await.unwrap();
        assert!(j.is_null());
    }
}
