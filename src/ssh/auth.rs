//! Logging in: key file (ed25519, ecdsa, RSA with rsa-sha2-256/512, passphrase-protected),
//! password, then ssh-agent. A refusal is final: we never loop on wrong credentials.

use std::sync::Arc;

use russh::client::{AuthResult, Handle};
use russh::keys::agent::client::AgentClient;
use russh::keys::agent::AgentIdentity;
use russh::keys::{decode_secret_key, load_secret_key, PrivateKeyWithHashAlg};

use super::client::Client;
use crate::error::{Error, Result};
use crate::inventory::Auth;

/// Authenticate `user` on an open handle with every configured method, in a fixed order.
pub async fn login(handle: &mut Handle<Client>, node: &str, addr: &str, user: &str, auth: &Auth) -> Result<()> {
    let mut tried: Vec<&str> = Vec::new();
    let session_err = |m: String| Error::Session { node: node.into(), during: "authentication".into(), message: m };

    for (i, text) in auth.driver_keys.iter().enumerate() {
        if i == 0 {
            tried.push("publickey (driver key)");
        }
        let key = decode_secret_key(text.expose(), None).map_err(|e| Error::Auth {
            node: node.into(),
            user: user.into(),
            addr: addr.into(),
            tried: format!("publickey: the driver's key #{} in the state store is unreadable: {e}", i + 1),
        })?;
        let hash = if key.algorithm().is_rsa() {
            handle.best_supported_rsa_hash().await.map_err(|e| session_err(e.to_string()))?.flatten()
        } else {
            None
        };
        let res = handle
            .authenticate_publickey(user, PrivateKeyWithHashAlg::new(Arc::new(key), hash))
            .await
            .map_err(|e| session_err(e.to_string()))?;
        if matches!(res, AuthResult::Success) {
            return Ok(());
        }
    }

    if let Some(path) = &auth.identity_file {
        tried.push("publickey");
        let passphrase = auth.identity_passphrase.as_ref().map(|s| s.expose());
        let key = load_secret_key(path, passphrase).map_err(|e| Error::Auth {
            node: node.into(),
            user: user.into(),
            addr: addr.into(),
            tried: format!(
                "publickey: cannot load {}: {}",
                path.display(),
                if passphrase.is_some() { format!("{e} (wrong passphrase?)") } else { e.to_string() }
            ),
        })?;
        let hash = if key.algorithm().is_rsa() {
            handle.best_supported_rsa_hash().await.map_err(|e| session_err(e.to_string()))?.flatten()
        } else {
            None
        };
        let res = handle
            .authenticate_publickey(user, PrivateKeyWithHashAlg::new(Arc::new(key), hash))
            .await
            .map_err(|e| session_err(e.to_string()))?;
        if matches!(res, AuthResult::Success) {
            return Ok(());
        }
    }

    if let Some(pw) = &auth.password {
        tried.push("password");
        let res = handle.authenticate_password(user, pw.expose()).await.map_err(|e| session_err(e.to_string()))?;
        if matches!(res, AuthResult::Success) {
            return Ok(());
        }
    }

    if auth.agent {
        tried.push("agent");
        let mut agent = AgentClient::connect_env().await.map_err(|e| Error::Auth {
            node: node.into(),
            user: user.into(),
            addr: addr.into(),
            tried: format!("agent: {e}"),
        })?;
        let ids = agent.request_identities().await.map_err(|e| session_err(format!("ssh-agent: {e}")))?;
        for id in ids {
            let AgentIdentity::PublicKey { key, .. } = id else { continue };
            let hash = if key.algorithm().is_rsa() {
                handle.best_supported_rsa_hash().await.map_err(|e| session_err(e.to_string()))?.flatten()
            } else {
                None
            };
            match handle.authenticate_publickey_with(user, key, hash, &mut agent).await {
                Ok(AuthResult::Success) => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(session_err(format!("ssh-agent signing failed: {e:?}"))),
            }
        }
    }

    let tried = if tried.is_empty() {
        // Only a jump host that is not an inventory host can get here (see `jump_auth`).
        "nothing: a jump host is never sent a password; give it a key (identity_file), an ssh-agent, or an inventory entry with its own credentials".to_string()
    } else {
        tried.join(", ")
    };
    Err(Error::Auth { node: node.into(), user: user.into(), addr: addr.into(), tried })
}
