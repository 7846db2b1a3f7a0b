//! The words a workload operation hands to kubectl or puts in a manifest: workload and container
//! names, images, labels, environment names, resource quantities, paths, `CONTAINER=IMAGE`
//! pairs. Each reaches kubectl as one quoted argument or as a JSON value, but quoting does not
//! stop a word from being an *option* (`--all`) or an invalid object the API server refuses
//! half-way; these checks do, before anything connects. Pure; each returns the reason.

use crate::cnf::names::dns_label;
use crate::error::excerpt;

/// A Deployment or StatefulSet name we create and address: a DNS-1123 label starting with a
/// letter (so its Services, `<name>` and `<name>-nodeport`, are valid DNS-1035 names too), at
/// most 52 characters (a StatefulSet's pods add `-<ordinal>` and its revisions a hash).
pub fn workload(s: &str) -> Result<(), String> {
    if !dns_label(s, 52) || !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(format!(
            "'{}' is not a workload name (lowercase letters, digits and '-', starting with a letter, ending with a \
             letter or digit, at most 52)",
            excerpt(s)
        ));
    }
    Ok(())
}

/// A container name: a DNS-1123 label.
pub fn container(s: &str) -> Result<(), String> {
    if !dns_label(s, 63) {
        return Err(format!("'{}' is not a container name (a DNS-1123 label)", excerpt(s)));
    }
    Ok(())
}

/// A pod name read back from the API server: a DNS-1123 subdomain.
pub fn pod(s: &str) -> Result<(), String> {
    if !crate::cnf::names::dns_subdomain(s) {
        return Err(format!("'{}' is not a pod name", excerpt(s)));
    }
    Ok(())
}

/// An image reference: `[registry[:port]/]path[:tag][@digest]` characters only, not an option.
pub fn image(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 512
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-/:@".contains(&c));
    if !ok {
        return Err(format!(
            "'{}' is not an image reference (letters, digits, '.', '_', '-', '/', ':', '@'; starting with a letter \
             or digit)",
            excerpt(s)
        ));
    }
    Ok(())
}

/// Labels we set ourselves and an operator's labels may not replace.
pub const OWN_LABELS: [&str; 2] = ["app.kubernetes.io/name", "app.kubernetes.io/managed-by"];

/// A label `key: value` as Kubernetes accepts it (`[prefix/]name`, prefix a DNS subdomain).
pub fn label(k: &str, v: &str) -> Result<(), String> {
    if !crate::k8s_names::label_key(k) {
        return Err(format!("'{}' is not a label key", excerpt(k)));
    }
    if OWN_LABELS.contains(&k) {
        return Err(format!("'{k}' is set by mgmt-driver (the workload's name and manager)"));
    }
    if !crate::k8s_names::label_value(v) {
        return Err(format!("'{}' is not a label value (at most 63 letters, digits, '-', '_', '.')", excerpt(v)));
    }
    Ok(())
}

/// An environment variable name as Kubernetes accepts it: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn env_name(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 256
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._".contains(&c));
    if !ok {
        return Err(format!("'{}' is not an environment variable name", excerpt(s)));
    }
    Ok(())
}

/// A resource quantity: `100m`, `0.5`, `64Mi`, `1G`, `1e3`.
pub fn quantity(s: &str) -> Result<(), String> {
    let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let num_ok = !num.is_empty() && num.matches('.').count() <= 1 && num != "." && num.len() <= 20;
    let suffix_ok = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].contains(&suffix)
        || (suffix.len() >= 2
            && (suffix.starts_with('e') || suffix.starts_with('E'))
            && suffix[1..].bytes().all(|c| c.is_ascii_digit()));
    if !(num_ok && suffix_ok) {
        return Err(format!("'{}' is not a quantity (e.g. 100m, 0.5, 64Mi, 1G)", excerpt(s)));
    }
    Ok(())
}

/// An absolute path without `..`, NUL, or a newline, at most 1024 bytes.
pub fn abs_path(s: &str) -> Result<(), String> {
    let ok =
        s.starts_with('/') && s.len() <= 1024 && !s.split('/').any(|p| p == "..") && !s.chars().any(|c| c.is_control());
    if !ok {
        return Err(format!("'{}' is not an absolute path (no '..', no control characters)", excerpt(s)));
    }
    Ok(())
}

/// `CONTAINER=IMAGE`, both checked.
pub fn container_image(s: &str) -> Result<(String, String), String> {
    let (c, i) = s.split_once('=').ok_or_else(|| format!("'{}' is not CONTAINER=IMAGE", excerpt(s)))?;
    container(c)?;
    image(i)?;
    Ok((c.to_string(), i.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_words() {
        assert!(workload("vnf-web").is_ok());
        for bad in ["", "Web", "9web", "web-", "-web", "a.b", "--all", &"a".repeat(53)] {
            assert!(workload(bad).is_err(), "{bad}");
        }
        assert!(image("registry.example:5000/a/b:1.0@sha256:abc").is_ok());
        for bad in ["", "-x", "a b", "a;b", "a$(x)"] {
            assert!(image(bad).is_err(), "{bad}");
        }
        assert!(label("example.com/tier", "front").is_ok() && label("tier", "").is_ok());
        for (k, v) in [("tier", "front end"), ("/x", "y"), ("a/b/c", "y"), ("app.kubernetes.io/name", "x"), ("t", "-x")]
        {
            assert!(label(k, v).is_err(), "{k}={v}");
        }
        for ok in ["100m", "0.5", "64Mi", "1G", "1e3", "2"] {
            assert!(quantity(ok).is_ok(), "{ok}");
        }
        for bad in ["", "lots", "1.2.3", "-1", "1Mb", "1e"] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
        assert!(abs_path("/var/log").is_ok());
        for bad in ["var", "/a/../b", "/a\nb"] {
            assert!(abs_path(bad).is_err(), "{bad}");
        }
        assert_eq!(container_image("web=nginx:1.27").unwrap(), ("web".into(), "nginx:1.27".into()));
        for bad in ["web", "=nginx", "web=", "Web=nginx", "web=--x"] {
            assert!(container_image(bad).is_err(), "{bad}");
        }
    }
}
