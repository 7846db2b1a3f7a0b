//! Facts read from etcd (through `etcdctl` in a surviving master's etcd pod).

use crate::cluster::node_cmd;
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::Fact;

/// The etcd member id of the master named `name`, read through the etcd pod of `survivor` (a
/// Kubernetes name): `None` when no member has that exact name (Tacker grepped, so `master1`
/// matched `master11`). The id goes into `etcdctl member remove`, so a line that names the
/// member with anything but 1 to 16 hex digits is an error, not a miss.
pub struct EtcdMember<'a> {
    pub survivor: &'a str,
    pub name: &'a str,
}

impl Fact for EtcdMember<'_> {
    type Value = Option<String>;

    fn what(&self) -> String {
        "the etcd member list".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::etcd_members(self.survivor)?))
    }

    fn placeholder(&self) -> Option<String> {
        Some("<member id>".to_string())
    }

    fn parse(&self, out: &str) -> std::result::Result<Option<String>, String> {
        node_cmd::parse_member_id(out, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::EtcdMember;
    use crate::facts::testkit::{planned, read, unreadable, value};

    #[tokio::test]
    async fn the_member_of_that_exact_name() {
        let f = EtcdMember { survivor: "master2", name: "master1" };
        let list = "8e9e05c52164694d, started, master11, https://x, https://y, false\n\
                    91bc3c398fb3c146, started, master1, https://x, https://y, false\n";
        let (sent, got) = read(&f, list).await;
        assert!(sent.contains("etcd-master2") && sent.contains("member list; fi"), "{sent}");
        assert_eq!(got.unwrap().as_deref(), Some("91bc3c398fb3c146"));
        assert_eq!(value(&f, "8e9e05c52164694d, started, master11, https://x\n").await, None);
        let m = unreadable(&f, "$(reboot), started, master1, https://x\n").await;
        assert!(m.contains("not 1 to 16 hex digits"), "{m}");
        assert_eq!(planned(&f).await.as_deref(), Some("<member id>"));
    }
}
