//! Node addresses from the VMs' own cloud: the VNF instance Tacker records carries fixed
//! addresses only (a dynamic one is `isDynamic: true` with no address), so scaled VDUs, three
//! masters, a scaled-out worker and the VIP have none. Like Tacker's sample MgmtDriver asks Heat,
//! we ask OpenStack's own APIs: Keystone (a token and the catalogue), then Neutron (the VNFCs'
//! ports, their floating IPs), with the VIM entry Tacker passes in `vimConnectionInfo`.
//!
//! Pure: `access.rs` (which entry, its credentials, the operator's allow-list), `keystone.rs`
//! (the auth body, the token and the network endpoint), `neutron.rs` (the URLs, the ports and
//! floating IPs parsed strictly), `addresses.rs` (what to ask, and the answer as addresses per
//! VNFC CP), `http.rs` (the seam: a request, a response, the client trait). Edge: `client.rs`
//! (the real HTTPS client), `fake.rs` (a scripted one). The round trips: `lookup.rs`.

pub mod access;
pub mod addresses;
pub mod client;
pub mod fake;
pub mod http;
pub mod keystone;
pub mod lookup;
pub mod neutron;

use std::sync::Arc;

/// What the operator configured for reaching a VIM: the Keystone endpoints a request may name
/// (`--vim-auth-url`, `MGMT_DRIVER_VIM_AUTH_URLS`) and the client. The request is a tenant's:
/// without the operator's allow-list no cloud is ever asked.
#[derive(Clone, Default)]
pub struct Vim {
    pub allowed_auth_urls: Vec<String>,
    pub http: Option<Arc<dyn http::Http>>,
}

impl std::fmt::Debug for Vim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vim")
            .field("allowed_auth_urls", &self.allowed_auth_urls)
            .field("http", &self.http.as_ref().map(|_| "client"))
            .finish()
    }
}

/// The flag and variable an operator sets the allow-list with (for messages).
pub const ALLOW_FLAG: &str = "--vim-auth-url (or MGMT_DRIVER_VIM_AUTH_URLS)";
