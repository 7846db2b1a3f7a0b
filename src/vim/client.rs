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

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use super::*;

    /// A one-shot HTTP server on a free local port: answers each of `answers` in turn, and
    /// hands back each request as received (head and body).
    fn server(answers: Vec<Vec<u8>>) -> (String, mpsc::Receiver<String>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for answer in answers {
                let Ok((s, _)) = l.accept() else { return };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut head = String::new();
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let _ = tx.send(format!("{head}\r\n{}", String::from_utf8_lossy(&body)));
                let mut s = s;
                let _ = s.write_all(&answer);
            }
        });
        (url, rx)
    }

    fn answer(status: &str, extra: &str, body: &[u8]) -> Vec<u8> {
        let mut a = format!("HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len())
            .into_bytes();
        a.extend_from_slice(body);
        a
    }

    fn req(method: Method, url: String) -> Request {
        Request {
            method,
            url,
            token: Some(Secret::new("tok-0123456789abcdef")),
            body: Some(Secret::new("{\"a\":1}")),
            service: "keystone",
        }
    }

    #[test]
    fn the_token_goes_in_its_header_and_an_http_error_is_an_answer() {
        let (url, got) = server(vec![
            answer("201 Created", "X-Subject-Token: gAAAA-subject\r\n", b"{}"),
            answer("404 Not Found", "", b"{\"error\": {}}"),
        ]);
        let c = Client::new(None).unwrap();
        let r = c.send(&req(Method::Post, format!("{url}/v3/auth/tokens"))).unwrap();
        assert_eq!((r.status, r.subject_token.unwrap().expose()), (201, "gAAAA-subject"));
        let sent = got.recv().unwrap();
        assert!(sent.starts_with("POST /v3/auth/tokens HTTP/1.1"), "{sent}");
        assert!(sent.to_ascii_lowercase().contains("x-auth-token: tok-0123456789abcdef"), "{sent}");
        assert!(sent.ends_with("{\"a\":1}"), "{sent}");
        let r = c.send(&req(Method::Get, format!("{url}/v2.0/ports?device_id=a"))).unwrap();
        assert_eq!(r.status, 404);
        assert!(got.recv().unwrap().starts_with("GET /v2.0/ports?device_id=a HTTP/1.1"));
    }

    #[test]
    fn a_redirect_is_not_followed_and_a_huge_body_is_refused() {
        let (other, other_got) = server(vec![answer("200 OK", "", b"{}")]);
        let (url, _got) = server(vec![
            answer("307 Temporary Redirect", &format!("Location: {other}/steal\r\n"), b""),
            answer("200 OK", "", &vec![b' '; 10 * 1024 * 1024]),
        ]);
        let c = Client::new(None).unwrap();
        match c.send(&req(Method::Post, format!("{url}/v3/auth/tokens"))) {
            Ok(r) => assert_eq!(r.status, 307),
            Err(e) => assert!(!e.to_string().contains("tok-0123456789abcdef"), "{e}"),
        }
        assert!(other_got.try_recv().is_err(), "the password went nowhere else");
        let e = c.send(&req(Method::Get, format!("{url}/v2.0/ports"))).unwrap_err().to_string();
        assert!(e.contains("larger than 4194304 bytes"), "{e}");
    }

    #[test]
    fn a_refused_connection_is_tried_again_then_named() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = Client::new(None).unwrap();
        let e = c.send(&req(Method::Get, format!("http://127.0.0.1:{port}/v2.0/ports"))).unwrap_err();
        match &e {
            Error::Connect { node, attempts, .. } => assert_eq!((node.as_str(), *attempts), ("keystone", TRIES)),
            other => panic!("{other}"),
        }
        assert!(!e.to_string().contains("tok-0123456789abcdef"));
    }

    #[test]
    fn a_cacert_that_is_no_pem_is_an_input_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ca.pem");
        std::fs::write(&p, "not a certificate").unwrap();
        let e = Client::new(Some(&p)).err().unwrap().to_string();
        assert!(e.contains("--vim-cacert"), "{e}");
    }
}
