//! The russh client handler: the one place the server's host key is judged.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use russh::client;
use russh::keys::{PublicKey, PublicKeyOrCertificate};

use super::host_key::{off_runtime, verify, Verdict};
use crate::inventory::HostKeyCheck;

pub struct Client {
    /// Host name as written in the inventory: the known_hosts lookup key (like OpenSSH).
    pub host: String,
    pub port: u16,
    pub policy: HostKeyCheck,
    pub known_hosts: PathBuf,
    /// The verdict, read after the handshake to explain a rejection or warn about a learned key.
    pub verdict: Arc<Mutex<Option<Verdict>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(&mut self, offered: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let key: PublicKey = match offered {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            // We never advertise certificate host-key algorithms, so this only happens with a
            // misbehaving server; judge the certified key like a plain one.
            PublicKeyOrCertificate::Certificate(c) => PublicKey::from(c.public_key().clone()),
        };
        // File lock and file I/O: never on the async threads, where a known_hosts held by
        // another process would stall every other connection of the run.
        let (policy, path, host, port) = (self.policy, self.known_hosts.clone(), self.host.clone(), self.port);
        let v = off_runtime(move || verify(policy, &path, &host, port, &key))
            .await
            .unwrap_or_else(|| Verdict::Rejected { message: "host key check failed: the check panicked".into() });
        let ok = !matches!(v, Verdict::Rejected { .. });
        *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
        Ok(ok)
    }
}
