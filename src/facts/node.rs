//! Facts about the node itself.

use crate::cluster::hostname::parse_hostname;
use crate::cluster::node_cmd;
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::Fact;

/// The node's hostname, which is its Kubernetes name: recorded, then put into later commands
/// (drain, haproxy backends, etcd), so it must be a DNS name of RFC 1123 labels and nothing
/// else (`cluster/hostname.rs`). A plan goes on with the name the topology expects.
pub struct Hostname {
    pub planned: String,
}

impl Fact for Hostname {
    type Value = String;

    fn what(&self) -> String {
        "the node's hostname".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::hostname()))
    }

    fn placeholder(&self) -> String {
        self.planned.clone()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        parse_hostname(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Hostname;
    use crate::facts::testkit::{planned, read, unreadable, value};

    #[tokio::test]
    async fn hostname_lower_cased_or_refused() {
        let f = Hostname { planned: "worker1".into() };
        let (sent, got) = read(&f, "Worker21\n").await;
        assert_eq!((sent.as_str(), got.unwrap().as_str()), ("hostname", "worker21"));
        assert_eq!(value(&f, "node-1.example.com").await, "node-1.example.com");
        for bad in ["", "w1; rm -rf /", "-w1"] {
            assert!(unreadable(&f, bad).await.contains("not a DNS host name"), "{bad}");
        }
        assert_eq!(planned(&f).await, "worker1");
    }
}
