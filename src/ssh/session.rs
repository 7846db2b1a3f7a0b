//! One live SSH connection to a node (with its jump hops), as the runner's `Transport`. The
//! exec and transfer halves add their methods in `exec.rs` and `transfer.rs`; the `Transport`
//! impl that ties them together is in `mod.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use russh::client::{Handle, Msg};
use russh::Channel;
use russh_sftp::client::SftpSession;
use tokio::sync::OnceCell;

use super::client;
use crate::event::HostEvents;
use crate::secret::Secret;

pub struct SshSession {
    pub(super) node: String,
    pub(super) handle: Handle<client::Client>,
    pub(super) hops: Vec<Handle<client::Client>>,
    pub(super) sftp: OnceCell<Option<SftpSession>>,
    pub(super) become_password: Option<Secret>,
    pub(super) grace: Duration,
    pub(super) stall: Duration,
    /// Sink for internal commands (probes, finalizers) whose output is data, not news.
    pub(super) quiet: HostEvents,
    /// Whether the first channel has been opened (see [`SshSession::channel`]).
    pub(super) warmed: AtomicBool,
    /// Channels opened and SFTP files sent or fetched: [`Transport::round_trips`].
    pub(super) round_trips: AtomicU64,
}

impl SshSession {
    /// Open a session channel, within the stall timeout (a node that never confirms the
    /// open must not hold the run).
    ///
    /// OpenSSH follows a key login with a burst of small packets (host keys, key-option
    /// notices) and keeps Nagle on for exec sessions, so each packet of the burst after the
    /// first waits for our ACK, which the kernel delays by 40 ms when we have nothing to
    /// send; the first channel's confirmation sits behind them. While the first channel opens
    /// we therefore send a tiny keepalive (no reply asked) every 3 ms, at most 20: each one
    /// carries the ACK at once. Later channels do not need it.
    pub(super) async fn channel(&self) -> std::result::Result<Channel<Msg>, russh::Error> {
        let stall = self.stall;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        tokio::time::timeout(stall, self.open_channel()).await.unwrap_or_else(|_| {
            Err(russh::Error::IO(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the node did not open a channel within {stall:?} (--stall-timeout)"),
            )))
        })
    }

    async fn open_channel(&self) -> std::result::Result<Channel<Msg>, russh::Error> {
        if self.warmed.swap(true, Ordering::Relaxed) {
            return self.handle.channel_open_session().await;
        }
        let open = self.handle.channel_open_session();
        tokio::pin!(open);
        for _ in 0..20 {
            tokio::select! {
                r = &mut open => return r,
                _ = tokio::time::sleep(Duration::from_millis(3)) => {
                    let _ = self.handle.send_keepalive(false).await;
                }
            }
        }
        open.await
    }
}
