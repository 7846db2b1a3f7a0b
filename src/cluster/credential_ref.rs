//! The reference a cluster's `helm_info` carries in place of its masters' password:
//! `mgmt-driver-state:<cluster id>:<token>`. A VNFM hands `helm_info` back in a CNF request,
//! and a request is written by the VNFM's API user (a tenant), who could copy another cluster's
//! `helm_info`: the cluster id alone is not a secret (VNF instance ids are listed, logged and
//! guessable), so the reference also carries a token, 32 random bytes minted when the cluster is
//! recorded and kept sealed in its state (`credential_ref_token`). Only who holds the cluster's
//! VIM entry (its owner, whose VNFM stored the instantiate response) has it; the ref is a bearer
//! secret, masked wherever the driver shows it. References written before tokens
//! (`mgmt-driver-state:<cluster id>`) are recognised, so that a refusal can say why.
//!
//! Pure: formatting, parsing and the comparison (in constant time, so a guess learns nothing
//! from how long the refusal took). Minting is the recording hook's (`cluster/hook.rs`).

use hmac::digest::CtOutput;
use sha2::{Digest, Sha256};

/// What every reference to our state store starts with.
pub const PREFIX: &str = "mgmt-driver-state:";

/// The key of the reference in `helm_info`.
pub const FIELD: &str = "masternode_credential_ref";

/// A token's length in bytes (hex-encoded in the reference).
pub const TOKEN_BYTES: usize = 32;

/// The reference to cluster `cluster`'s credential, bound to it by `token` (hex).
pub fn format(cluster: &str, token: &str) -> String {
    format!("{PREFIX}{cluster}:{token}")
}

/// A token as it goes into the reference and the state: lower-case hex.
pub fn token_text(bytes: &[u8; TOKEN_BYTES]) -> String {
    hex::encode(bytes)
}

/// A reference to our state store, taken apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ref<'a> {
    /// The cluster's VNF instance id as written (not checked here).
    pub cluster: &'a str,
    /// None: the form written before tokens, `mgmt-driver-state:<cluster id>`.
    pub token: Option<&'a str>,
}

/// `s` as a reference to our state store, or None when it is not one (another prefix).
pub fn parse(s: &str) -> Option<Ref<'_>> {
    let rest = s.strip_prefix(PREFIX)?;
    Some(match rest.split_once(':') {
        Some((cluster, token)) => Ref { cluster, token: Some(token) },
        None => Ref { cluster: rest, token: None },
    })
}

/// Whether `presented` is the `recorded` token. Both are hashed first, so the comparison takes
/// the same time whatever their lengths, and the digests are compared in constant time.
pub fn token_matches(presented: &str, recorded: &str) -> bool {
    let digest = |s: &str| CtOutput::<Sha256>::new(Sha256::digest(s.as_bytes()));
    !recorded.is_empty() && digest(presented) == digest(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

    #[test]
    fn a_reference_names_its_cluster_and_carries_its_token() {
        let r = format("c-1", TOKEN);
        assert_eq!(r, format!("mgmt-driver-state:c-1:{TOKEN}"));
        assert_eq!(parse(&r), Some(Ref { cluster: "c-1", token: Some(TOKEN) }));
        assert_eq!(token_text(&[0xab; TOKEN_BYTES]), "ab".repeat(32));
    }

    #[test]
    fn the_form_before_tokens_is_recognised_and_other_forms_are_not_ours() {
        assert_eq!(parse("mgmt-driver-state:c-1"), Some(Ref { cluster: "c-1", token: None }));
        assert_eq!(parse("mgmt-driver-state:c-1:"), Some(Ref { cluster: "c-1", token: Some("") }));
        assert_eq!(parse("vault:secret/c-1"), None);
        assert_eq!(parse("MGMT-DRIVER-STATE:c-1"), None);
    }

    #[test]
    fn only_the_recorded_token_matches() {
        assert!(token_matches(TOKEN, TOKEN));
        for wrong in ["", "0", &TOKEN[..63], &TOKEN.to_uppercase(), &format!("{TOKEN}0"), &"0".repeat(64)] {
            assert!(!token_matches(wrong, TOKEN), "{wrong:?}");
        }
        // A cluster recorded without a token matches nothing, not even an empty one.
        assert!(!token_matches("", ""));
    }
}
