//! The seam between the VIM lookup and the network: one request, one response. The token and
//! the auth body are [`Secret`]s, so a request printed with `{:?}` shows neither.

use crate::error::Result;
use crate::secret::Secret;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

#[derive(Clone, Debug)]
pub struct Request {
    pub method: Method,
    pub url: String,
    /// `X-Auth-Token`: only ever in this header.
    pub token: Option<Secret>,
    /// A JSON body (Keystone's holds the password).
    pub body: Option<Secret>,
    /// Who answers, for errors: `keystone`, `neutron`.
    pub service: &'static str,
}

#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    /// `X-Subject-Token` (Keystone's token), when sent.
    pub subject_token: Option<Secret>,
    /// At most [`BODY_MAX_BYTES`]: a longer body is an error of the client.
    pub body: Vec<u8>,
}

/// The largest response body read: a port list of a few thousand ports fits; 10 MB does not.
pub const BODY_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// A blocking HTTP client (the lookup runs before anything connects, inside `prepare`).
pub trait Http: Send + Sync {
    fn send(&self, req: &Request) -> Result<Response>;
}
