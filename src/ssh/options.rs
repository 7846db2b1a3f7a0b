//! How every connection of a run behaves: timeouts, retries, keepalives, key exchange order.

use std::time::Duration;

use crate::backoff::Backoff;

/// Connection behaviour, shared by every host of a run.
#[derive(Clone, Debug)]
pub struct SshOptions {
    /// Per attempt: TCP connect + SSH handshake + login.
    pub connect_timeout: Duration,
    /// Keep retrying "not up yet" errors (refused, unreachable, reset in banner) this long.
    pub retry_for: Duration,
    pub backoff: Backoff,
    /// Send a keepalive after this much silence; 3 unanswered ones drop the connection, so a
    /// dead link ends a command instead of hanging it.
    pub keepalive: Duration,
    /// Key exchange preference, most preferred first.
    pub kex: Vec<String>,
    /// Extra local wait beyond a command's timeout before we give up on the remote kill.
    pub grace: Duration,
    /// A transfer step (a chunk sent or received, a reply, an SFTP request) or a channel open
    /// that makes no progress this long fails, naming node and path: a stalled or hostile
    /// node cannot hold a run. `--stall-timeout`.
    pub stall: Duration,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            connect_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(60),
            backoff: Backoff::default(),
            keepalive: Duration::from_secs(15),
            // Post-quantum hybrid second: it costs several times the CPU of curve25519 and
            // a fleet run pays that per host (see docs/benchmarks.md).
            kex: vec![
                "curve25519-sha256".into(),
                "curve25519-sha256@libssh.org".into(),
                "mlkem768x25519-sha256".into(),
                "diffie-hellman-group16-sha512".into(),
                "diffie-hellman-group14-sha256".into(),
            ],
            grace: Duration::from_secs(10),
            // A flaky WAN link shared by 200 uploads still moves each one every few seconds;
            // two minutes of total silence is a dead or hostile node, not congestion.
            stall: Duration::from_secs(120),
        }
    }
}
