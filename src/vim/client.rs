//! The real HTTP(S) client for Keystone and Neutron: ureq (blocking, small) on rustls with the
//! aws-lc-rs provider russh already brings. It trusts the system's CA store plus the
//! operator's `--vim-cacert`, follows no redirect (an allow-listed Keystone must not send the
//! password elsewhere), bounds the connect and the whole call, retries network errors only
//! (never an HTTP answer), and reads at most [`BODY_MAX_BYTES`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::vim::http::{Http, Method, Request, Response, BODY_MAX_BYTES};

/// How long a TCP/TLS connect may take, and a whole call.
const CONNECT: Duration = Duration::from_secs(10);
const CALL: Duration = Duration::from_secs(60);
/// Tries per call on a network error (refused, reset, timed out).
const TRIES: u32 = 3;

pub struct Client {
    agent: ureq::Agent,
}

impl Client {
    /// A client trusting the system CAs and `cacert` (a PEM bundle), when given.
    pub fn new(cacert: Option<&Path>) -> Result<Client> {
        let mut roots = rustls_native_certs::load_native_certs().certs;
        if let Some(p) = cacert {
            let r = rustls_native_certs::load_certs_from_paths(Some(p), None);
            if let Some(e) = r.errors.first() {
                return Err(Error::input("arguments", "--vim-cacert", format!("{}: {e}", p.display())));
            }
            if r.certs.is_empty() {
                return Err(Error::input(
                    "arguments",
                    "--vim-cacert",
                    format!("{}: no PEM certificate in it", p.display()),
                ));
            }
            roots.extend(r.certs);
        }
        let certs: Vec<ureq::tls::Certificate<'static>> =
            roots.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect();
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(CONNECT))
            .timeout_global(Some(CALL))
            .build()
            .into();
        Ok(Client { agent })
    }

    fn once(&self, req: &Request) -> std::result::Result<Response, ureq::Error> {
        let token = req.token.as_ref().map(Secret::expose);
        let mut resp = match req.method {
            Method::Get => {
                let mut r = self.agent.get(&req.url).header("Accept", "application/json");
                if let Some(t) = token {
                    r = r.header("X-Auth-Token", t);
                }
                r.call()?
            }
            Method::Post => {
                let mut r =
                    self.agent.post(&req.url).header("Accept", "application/json").content_type("application/json");
                if let Some(t) = token {
                    r = r.header("X-Auth-Token", t);
                }
                r.send(req.body.as_ref().map(Secret::expose).unwrap_or_default())?
            }
        };
        let status = resp.status().as_u16();
        let subject_token = resp.headers().get("X-Subject-Token").and_then(|v| v.to_str().ok()).map(Secret::new);
        let body = resp.body_mut().with_config().limit(BODY_MAX_BYTES).read_to_vec()?;
        Ok(Response { status, subject_token, body })
    }
}

/// Whether `e` is the network's (worth another try), not an answer's.
fn transient(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Io(_) | ureq::Error::Timeout(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
    )
}

/// `e` said without what could hold a secret: ureq's messages name the URL (no userinfo: our
/// URLs have none) and the cause, never a header or a body.
fn said(e: &ureq::Error) -> String {
    match e {
        ureq::Error::BodyExceedsLimit(_) => format!("the answer is larger than {BODY_MAX_BYTES} bytes; refused"),
        other => crate::error::excerpt(&other.to_string()),
    }
}

impl Http for Client {
    fn send(&self, req: &Request) -> Result<Response> {
        let run = || {
            let mut attempt = 0;
            loop {
                attempt += 1;
                match self.once(req) {
                    Ok(r) => return Ok(r),
                    Err(e) if transient(&e) && attempt < TRIES => {
                        std::thread::sleep(Duration::from_millis(500 * u64::from(attempt)));
                    }
                    Err(e) => {
                        return Err(Error::Connect {
                            node: req.service.to_string(),
                            addr: crate::url_mask::mask_userinfo(&req.url).into_owned(),
                            message: said(&e),
                            attempts: attempt,
                        })
                    }
                }
            }
        };
        // Called from `prepare`, inside the runtime: a blocking call there must tell tokio.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        }
    }
}
