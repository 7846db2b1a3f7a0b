//! One live SSH connection to a node (with its jump hops), as the runner's `Transport`. The
//! exec and transfer halves add their methods in `exec.rs` and `transfer.rs`; the `Transport`
//! impl that ties them together is in `mod.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client::{Handle, Msg};
use russh::Channel;
use russh_sftp::client::SftpSession;
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;

use super::client;
use crate::event::HostEvents;
use crate::secret::Secret;

pub struct SshSession {
    pub(super) node: String,
    /// Shared with the task that opens the next channel ahead of need ([`SshSession::channel`]).
    pub(super) handle: Arc<Handle<client::Client>>,
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
    /// The next channel, being opened (or open) while the current command runs.
    pub(super) spare: Mutex<Option<JoinHandle<OpenResult>>>,
}

type OpenResult = std::result::Result<Channel<Msg>, russh::Error>;

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
    ///
    /// Opening a channel costs a round trip before the command can even be sent, so each call
    /// also starts opening the *next* one in the background: at an edge site 50 ms away, every
    /// command after the first then waits one round trip instead of two. At most one such spare
    /// is open or opening per connection (well under OpenSSH's 10 sessions); a spare that failed
    /// to open is replaced by a fresh open, so the worst case is today's cost.
    pub(super) async fn channel(&self) -> OpenResult {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let pending = self.spare.lock().expect("spare channel").take();
        self.open_spare();
        // The spare's own open is bounded by the stall timeout: a node that did not confirm it
        // in time is not asked again (that would double the wait); any other failure (a
        // server that allows fewer sessions, say) falls back to opening one now.
        let Some(p) = pending else { return self.open_fresh().await };
        match p.await {
            Ok(Ok(ch)) => Ok(ch),
            Ok(Err(russh::Error::IO(e))) if e.kind() == std::io::ErrorKind::TimedOut => Err(russh::Error::IO(e)),
            _ => self.open_fresh().await,
        }
    }

    /// Start opening the next channel, unless one is already on its way.
    fn open_spare(&self) {
        let mut spare = self.spare.lock().expect("spare channel");
        if spare.is_none() {
            let (handle, stall) = (self.handle.clone(), self.stall);
            *spare = Some(tokio::spawn(async move {
                tokio::time::timeout(stall, handle.channel_open_session()).await.unwrap_or_else(|_| Err(stalled(stall)))
            }));
        }
    }

    /// Forget the spare (the connection is closing).
    pub(super) fn drop_spare(&self) {
        if let Some(p) = self.spare.lock().expect("spare channel").take() {
            p.abort();
        }
    }

    async fn open_fresh(&self) -> OpenResult {
        let stall = self.stall;
        tokio::time::timeout(stall, self.open_channel()).await.unwrap_or_else(|_| Err(stalled(stall)))
    }

    async fn open_channel(&self) -> OpenResult {
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

fn stalled(stall: Duration) -> russh::Error {
    russh::Error::IO(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the node did not open a channel within {stall:?} (--stall-timeout)"),
    ))
}
