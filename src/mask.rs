//! The one text every hidden secret is shown as, in plans, events, errors and results. A leaf of
//! its own so that both the secret types (`secret.rs`) and the URL masking (`url_mask.rs`) can use
//! it without importing each other.

pub const MASK: &str = "********";
