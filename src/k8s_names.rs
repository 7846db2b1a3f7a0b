//! Kubernetes' own name rules, once: DNS-1123 labels and subdomains (object and namespace
//! names) and label keys and values. Four files used to carry their own copies, and they
//! disagreed (one accepted label prefixes the API server refuses, one had no length limit on a
//! part). Every check that a name or a label will pass the API server uses these. Pure.
//!
//! The rules are those of Kubernetes' validation (`IsDNS1123Label`, `IsDNS1123Subdomain`,
//! `IsQualifiedName`, `IsValidLabelValue`): each caller keeps its own wording of the error,
//! since the field it names differs.

/// Longest DNS-1123 label: namespaces, and most object names that end up in a host name.
pub const LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain: object names, and the prefix of a label key.
pub const SUBDOMAIN_MAX: usize = 253;

/// A lowercase DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most `max` (≤ 63)
/// characters. Some names are shorter still (a Helm release: 53).
pub fn dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max.min(LABEL_MAX)
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: dot-separated DNS labels, at most 253 characters.
pub fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= SUBDOMAIN_MAX && s.split('.').all(|l| dns_label(l, LABEL_MAX))
}

/// `[A-Za-z0-9]([-._A-Za-z0-9]*[A-Za-z0-9])?`, at most 63: a label key's name part, and a
/// label value when not empty.
fn qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= LABEL_MAX
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._".contains(&c))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A label key: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name a qualified part.
pub fn label_key(k: &str) -> bool {
    match k.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && qualified_part(name),
        None => qualified_part(k),
    }
}

/// A label value: empty, or a qualified part (at most 63).
pub fn label_value(v: &str) -> bool {
    v.is_empty() || qualified_part(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_and_subdomains() {
        assert!(dns_label("a", 63) && dns_label("web-1", 63) && dns_label(&"a".repeat(63), 63));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!dns_label(bad, 63), "{bad:?}");
        }
        assert!(!dns_label(&"a".repeat(54), 53), "a shorter limit holds");
        assert!(!dns_label(&"a".repeat(64), 100), "never past 63");
        assert!(dns_subdomain("a.b-c.d") && dns_subdomain(&format!("{}.b", "a".repeat(63))));
        for bad in ["", "a..b", ".a", "a.", "A.b", &format!("{}.b", "a".repeat(64)), &"a.".repeat(127)] {
            assert!(!dns_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn label_keys_and_values_as_the_api_server_takes_them() {
        for ok in ["app", "app.kubernetes.io/name", "example.com/Tier_1", "a", "A-b.c_D"] {
            assert!(label_key(ok), "{ok:?}");
        }
        for bad in [
            "",
            "/name",
            "pre/",
            "Pre.Com/name", // uppercase prefix
            "pre_fix/name", // `_` in the prefix
            "-name",
            "name-",
            "a/b/c",
            &"a".repeat(64),
            &format!("{}/n", "a".repeat(254)),
        ] {
            assert!(!label_key(bad), "{bad:?}");
        }
        for ok in ["", "v1", "a.b_c-D", &"a".repeat(63)] {
            assert!(label_value(ok), "{ok:?}");
        }
        for bad in ["-v", "v-", "a b", "a/b", &"a".repeat(64)] {
            assert!(!label_value(bad), "{bad:?}");
        }
    }
}
