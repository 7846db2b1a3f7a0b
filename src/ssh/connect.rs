//! Reaching a host: TCP (with `TCP_NODELAY`), SSH handshake, host key, login — through a
//! ProxyJump chain of bastions when the inventory says so (each hop a `direct-tcpip` channel
//! on the previous one, each hop's host key checked, each hop logging in with its own
//! credentials: a bastion is never offered the target's password). Servers are asked first
//! for the host key types known_hosts records for them. "Not up yet" errors are retried with
//! jittered exponential backoff until a deadline: a VM that is still booting is normal.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use russh::client::{self, Handle};
use russh::keys::Algorithm;
use tokio::net::TcpStream;

use super::auth::login;
use super::client::Client;
use super::host_key::{known_algorithms, Verdict};
use super::options::SshOptions;
use crate::error::{Error, Result};
use crate::event::{EventKind, HostEvents};
use crate::inventory::{fmt_addr, Auth, Host, HostKeyCheck};

/// An authenticated connection, plus the bastion connections it runs through (kept alive
/// as long as the session lives).
pub struct Connected {
    pub handle: Handle<Client>,
    pub hops: Vec<Handle<Client>>,
}

/// One hop of the chain, the target being the last. Each hop logs in with its own
/// credentials: a bastion never sees the target's password (inventory `Jump::auth`).
struct Hop<'a> {
    user: &'a str,
    addr: &'a str,
    port: u16,
    auth: &'a Auth,
    known_hosts: &'a Path,
    policy: HostKeyCheck,
}

enum Failure {
    /// Worth another try once the VM has finished booting.
    NotUpYet(String),
    Fatal(Error),
}

pub async fn connect(
    host: &Host,
    opts: &SshOptions,
    config: &Arc<client::Config>,
    ev: &HostEvents,
) -> Result<Connected> {
    let mut hops: Vec<Hop> = host
        .jump
        .iter()
        .map(|j| {
            let (known_hosts, policy) = match &j.host_key {
                Some((p, c)) => (p.as_path(), *c),
                // A bastion was not rebuilt with the target: it never re-learns.
                None => (
                    host.known_hosts.as_path(),
                    match host.host_key_check {
                        HostKeyCheck::Relearn => HostKeyCheck::AcceptNew,
                        c => c,
                    },
                ),
            };
            Hop { user: &j.user, addr: &j.addr, port: j.port, auth: &j.auth, known_hosts, policy }
        })
        .collect();
    hops.push(Hop {
        user: &host.user,
        addr: &host.addr,
        port: host.port,
        auth: &host.auth,
        known_hosts: &host.known_hosts,
        policy: host.host_key_check,
    });
    ev.emit(EventKind::Connecting { addr: host.endpoint(), via: host.jump.iter().map(|j| j.to_string()).collect() });
    let started = Instant::now();
    let deadline = started + opts.retry_for;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match connect_chain(host, &hops, opts, config, ev).await {
            Ok(c) => {
                ev.emit(EventKind::Connected { ms: started.elapsed().as_millis() as u64 });
                return Ok(c);
            }
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::NotUpYet(msg)) => {
                let delay = opts.backoff.delay(attempt, fastrand::f64());
                if Instant::now() + delay >= deadline {
                    return Err(Error::Connect {
                        node: host.name.clone(),
                        addr: host.endpoint(),
                        message: msg,
                        attempts: attempt,
                    });
                }
                ev.emit(EventKind::Retry { attempt, delay_ms: delay.as_millis() as u64, error: msg });
                tokio::time::sleep(delay).await;
            }
        }
    }
}

async fn connect_chain(
    host: &Host,
    hops: &[Hop<'_>],
    opts: &SshOptions,
    config: &Arc<client::Config>,
    ev: &HostEvents,
) -> std::result::Result<Connected, Failure> {
    let mut previous: Vec<Handle<Client>> = Vec::new();
    for (i, hop) in hops.iter().enumerate() {
        let endpoint = fmt_addr(hop.addr, hop.port);
        let label = if i + 1 == hops.len() { host.name.clone() } else { format!("{} (jump {endpoint})", host.name) };
        let known = {
            let (path, addr, port) = (hop.known_hosts.to_path_buf(), hop.addr.to_string(), hop.port);
            super::host_key::off_runtime(move || known_algorithms(&path, &addr, port)).await.unwrap_or_default()
        };
        let config = if known.is_empty() || hop.policy == HostKeyCheck::Off {
            config.clone()
        } else {
            Arc::new(client_config_preferring(opts, &known).map_err(Failure::Fatal)?)
        };
        let verdict = Arc::new(Mutex::new(None));
        let handler = Client {
            host: hop.addr.to_string(),
            port: hop.port,
            policy: hop.policy,
            known_hosts: hop.known_hosts.to_path_buf(),
            verdict: verdict.clone(),
        };
        let handshake = async {
            match previous.last() {
                None => {
                    let tcp = TcpStream::connect((hop.addr, hop.port)).await.map_err(russh::Error::IO)?;
                    tcp.set_nodelay(true).map_err(russh::Error::IO)?;
                    client::connect_stream(config.clone(), tcp, handler).await
                }
                Some(via) => {
                    let ch = via.channel_open_direct_tcpip(hop.addr, hop.port as u32, "127.0.0.1", 0).await?;
                    client::connect_stream(config.clone(), ch.into_stream(), handler).await
                }
            }
        };
        let mut handle = match tokio::time::timeout(opts.connect_timeout, handshake).await {
            Err(_) => {
                return Err(Failure::NotUpYet(format!(
                    "{endpoint}: no SSH handshake within {:?}",
                    opts.connect_timeout
                )))
            }
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                let v = verdict.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(Verdict::Rejected { message }) = v {
                    return Err(Failure::Fatal(Error::HostKey { node: label, addr: endpoint, message }));
                }
                return Err(classify(&label, &endpoint, e));
            }
        };
        match verdict.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(Verdict::Learned { fingerprint }) => ev.emit(EventKind::Warning {
                message: format!(
                    "{endpoint}: new host key {fingerprint} recorded in {} (accept-new)",
                    hop.known_hosts.display()
                ),
            }),
            Some(Verdict::Relearned { old, fingerprint }) => ev.emit(EventKind::HostKeyRelearned {
                addr: endpoint.clone(),
                known_hosts: hop.known_hosts.display().to_string(),
                old,
                new: fingerprint,
            }),
            Some(Verdict::Unchecked { fingerprint }) => ev.emit(EventKind::Warning {
                message: format!(
                    "{endpoint}: host key NOT checked (--insecure-no-host-key-check); offered {fingerprint}"
                ),
            }),
            _ => {}
        }
        let auth =
            tokio::time::timeout(opts.connect_timeout, login(&mut handle, &label, &endpoint, hop.user, hop.auth)).await;
        match auth {
            Err(_) => {
                return Err(Failure::NotUpYet(format!(
                    "{endpoint}: authentication did not finish within {:?}",
                    opts.connect_timeout
                )))
            }
            Ok(Err(e)) => return Err(Failure::Fatal(e)),
            Ok(Ok(())) => {}
        }
        previous.push(handle);
    }
    let handle = previous.pop().expect("at least the target hop");
    Ok(Connected { handle, hops: previous })
}

/// Which handshake errors mean "the VM is not up yet" (retry) versus a real problem.
fn classify(node: &str, endpoint: &str, e: russh::Error) -> Failure {
    use std::io::ErrorKind::*;
    match &e {
        russh::Error::IO(io) => match io.kind() {
            ConnectionRefused | ConnectionReset | ConnectionAborted | TimedOut | HostUnreachable
            | NetworkUnreachable | UnexpectedEof | BrokenPipe | NotConnected | AddrNotAvailable => {
                Failure::NotUpYet(format!("{endpoint}: {io}"))
            }
            _ => Failure::Fatal(Error::Connect {
                node: node.into(),
                addr: endpoint.into(),
                message: io.to_string(),
                attempts: 1,
            }),
        },
        // sshd dropping us during the banner (MaxStartups, still starting) looks like these.
        russh::Error::Disconnect | russh::Error::HUP | russh::Error::ConnectionTimeout => {
            Failure::NotUpYet(format!("{endpoint}: {e}"))
        }
        // A bastion could not reach the next hop yet.
        russh::Error::ChannelOpenFailure(f) => {
            Failure::NotUpYet(format!("{endpoint}: jump host could not connect: {f:?}"))
        }
        _ => Failure::Fatal(Error::Session {
            node: node.into(),
            during: format!("SSH handshake with {endpoint}"),
            message: e.to_string(),
        }),
    }
}

/// Host key algorithms in russh's order, those of a type `known` records moved to the front
/// (stable), so a server with several host keys shows the one we can check — what `ssh` does
/// with its known_hosts. RSA matches whatever signature hash.
pub fn prefer_known(default: &[Algorithm], known: &[Algorithm]) -> Vec<Algorithm> {
    let is_known = |a: &Algorithm| known.iter().any(|k| k == a || (k.clone().is_rsa() && a.clone().is_rsa()));
    let mut v = default.to_vec();
    v.sort_by_key(|a| !is_known(a));
    v
}

/// Build the russh client configuration once per run.
pub fn client_config(opts: &SshOptions) -> Result<client::Config> {
    client_config_preferring(opts, &[])
}

/// The client configuration asking first for host keys of the `known` types.
fn client_config_preferring(opts: &SshOptions, known: &[Algorithm]) -> Result<client::Config> {
    use russh::kex;
    let mut names = Vec::new();
    for k in &opts.kex {
        let name = kex::Name::try_from(k.as_str())
            .map_err(|_| Error::input("--kex", k.clone(), "unknown key exchange algorithm"))?;
        names.push(name);
    }
    names.push(kex::EXTENSION_SUPPORT_AS_CLIENT);
    names.push(kex::EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT);
    Ok(client::Config {
        preferred: russh::Preferred {
            kex: names.into(),
            key: prefer_known(&russh::Preferred::default().key, known).into(),
            ..Default::default()
        },
        keepalive_interval: Some(opts.keepalive),
        keepalive_max: 3,
        inactivity_timeout: None,
        nodelay: true,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::{EcdsaCurve, HashAlg};

    #[test]
    fn known_key_types_are_asked_for_first() {
        let ed = Algorithm::Ed25519;
        let ec = Algorithm::Ecdsa { curve: EcdsaCurve::NistP256 };
        let rsa512 = Algorithm::Rsa { hash: Some(HashAlg::Sha512) };
        let default = [ed.clone(), ec.clone(), rsa512.clone(), Algorithm::Rsa { hash: None }];
        assert_eq!(prefer_known(&default, &[]), default.to_vec());
        assert_eq!(prefer_known(&default, std::slice::from_ref(&ec))[0], ec);
        let v = prefer_known(&default, &[Algorithm::Rsa { hash: None }]);
        assert_eq!(v[..2], [rsa512, Algorithm::Rsa { hash: None }]);
        assert_eq!(v[2..], [ed, ec]);
    }
}
