//! A node's hostname is its Kubernetes name: the install script sets it, the driver reads it back
//! and records it, and later steps put it into commands (drain, haproxy backends, etcd). So it is
//! held to one shape wherever it comes from: a DNS name of RFC 1123 labels, nothing else.

/// What `hostname` printed on a node, checked; lower-cased, as Kubernetes names the node.
pub fn parse_hostname(out: &str) -> std::result::Result<String, String> {
    let h = out.trim();
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !h.is_empty() && h.len() <= 253 && h.split('.').all(label) {
        Ok(h.to_ascii_lowercase())
    } else {
        Err(format!("{:?} is not a DNS host name", h.chars().take(80).collect::<String>()))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_hostname;

    #[test]
    fn a_dns_name_only_lower_cased() {
        assert_eq!(parse_hostname("Worker21\n").as_deref(), Ok("worker21"));
        assert_eq!(parse_hostname("node-1.example.com").as_deref(), Ok("node-1.example.com"));
        for bad in ["", "w1; rm -rf /", "-w1", "w1-", "a..b", "w_1", &"a".repeat(64)] {
            assert!(parse_hostname(bad).is_err(), "{bad:?}");
        }
    }
}
