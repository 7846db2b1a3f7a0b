//! The words a CNF hands to Helm as names: releases, namespaces, repositories, charts, chart
//! references, versions, `--set` items (login names: `inventory::check_user`). Each reaches
//! Helm as one quoted argument, but quoting does not stop a word from being an *option*
//! (`--insecure-skip-tls-verify`) or a *local directory* (`.`, `..`) to Helm; these checks do,
//! before anything connects. Also the names a CNF instance's own things get on the masters (its
//! repositories, its chart directory), which those checks recognise. Pure.
//!
//! Every check returns the reason a word is refused; callers put it in an
//! [`Error::input`](crate::error::Error::input) naming the field.

use crate::error::excerpt;

/// Helm's release names: a DNS-1123 subdomain of at most 53 characters (Helm 3 and 4 refuse
/// longer ones; the release's Secret name adds a suffix).
pub fn release(s: &str) -> Result<(), String> {
    if s.len() > 53 || !dns_subdomain(s) {
        return Err(format!(
            "'{}' is not a Helm release name (lowercase letters, digits, '-' and '.', starting and ending \
             with a letter or digit, at most 53)",
            excerpt(s)
        ));
    }
    Ok(())
}

/// Kubernetes namespaces: a DNS-1123 label of at most 63 characters.
pub fn namespace(s: &str) -> Result<(), String> {
    if !dns_label(s, 63) {
        return Err(format!("'{}' is not a Kubernetes namespace name", excerpt(s)));
    }
    Ok(())
}

pub use crate::k8s_names::{dns_label, dns_subdomain};

/// Repository names a request or `repo-sync` may use: a letter or digit first, then letters,
/// digits, `_`, `-`, `.`; at most 63. So never `.`, `..`, an option, a path, and never `@`,
/// which marks the per-instance names ([`instance_repo`]).
pub fn repo(s: &str) -> Result<(), String> {
    let ok = s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(&c));
    if !ok {
        return Err(format!(
            "'{}' is not a repository name (a letter or digit, then letters, digits, '_', '-', '.'; at most 63)",
            excerpt(s)
        ));
    }
    Ok(())
}

/// The name a CNF instance's repository gets on the masters: `<instance>@<name>`. Repository
/// names are global on a master; this keeps one CNF from re-pointing (`--force-update`) or
/// removing another's repository of the same name. `@` is in neither an instance id nor a
/// request's repository name, so two (instance, name) pairs never share one; `repo-sync`
/// leaves such names alone.
pub fn instance_repo(instance: &str, name: &str) -> String {
    format!("{instance}@{name}")
}

/// Whether a repository name on a master belongs to a CNF instance (see [`instance_repo`]).
pub fn is_instance_repo(name: &str) -> bool {
    name.contains('@')
}

/// Where charts live on masters (Tacker's layout: `/var/tacker/helm/<vnf_instance_id>/`).
pub const CHART_ROOT: &str = "/var/tacker/helm";

/// The directory a CNF instance's local charts are extracted into on every master, named after
/// the instance as its repositories are ([`instance_repo`]); [`chart_ref`] accepts a chart in
/// it only for that instance.
pub fn chart_dir(instance: &str) -> String {
    format!("{CHART_ROOT}/{instance}")
}

/// Chart names (in a repository): a letter or digit first, then letters, digits, `_`, `-`, `.`.
pub fn chart(s: &str) -> Result<(), String> {
    let ok = s.len() <= 250
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(&c))
        && !s.contains("..");
    if !ok {
        return Err(format!(
            "'{}' is not a chart name (a letter or digit, then letters, digits, '_', '-', '.')",
            excerpt(s)
        ));
    }
    Ok(())
}

/// A chart reference the operator passes (`--chart`, `show CHART`): `REPO/CHART`, an
/// `oci://` or `http(s)://` URL without credentials, or the instance's chart directory under
/// `/var/tacker/helm/` (what a local chart is recorded as). A bare `CHART` only with `--repo`.
/// `instance`: the CNF the operation is for; another instance's chart directory or
/// `<instance>@<name>` repository is refused.
pub fn chart_ref(s: &str, bare_ok: bool, instance: &str) -> Result<(), String> {
    let own = |inst: &str| -> Result<(), String> {
        if inst == instance {
            Ok(())
        } else {
            Err(format!("'{}' belongs to another CNF instance than {instance}", excerpt(s)))
        }
    };
    if s.starts_with("oci://") || s.starts_with("http://") || s.starts_with("https://") {
        return match url(s)? {
            (_, None) => Ok(()),
            (_, Some(_)) => Err(format!("'{}': no credentials in a chart URL", crate::url_mask::mask_userinfo(s))),
        };
    }
    if let Some(rest) = s.strip_prefix(&format!("{CHART_ROOT}/")) {
        let mut parts = rest.split('/');
        let (Some(inst), Some(dir), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("'{}' is not an instance's chart directory", excerpt(s)));
        };
        own(inst)?;
        return chart(dir);
    }
    match s.split_once('/') {
        Some((r, c)) => {
            // A repository as the masters name it (`<instance>@<name>`) or as the request did.
            match r.split_once('@') {
                Some((inst, name)) => {
                    own(inst)?;
                    repo(name)?
                }
                None => repo(r)?,
            }
            chart(c)
        }
        None if bare_ok => chart(s),
        None => Err(format!("'{}' is not REPO/CHART, an oci:// or http(s):// URL", excerpt(s))),
    }
}

/// A chart version or version constraint (`1.2.3`, `>=1.0.0 <2`, `~1.2`): semver characters,
/// comparison operators and spaces; never an option.
pub fn version(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('-')
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b".-+~^<>=*|, ".contains(&c));
    if !ok {
        return Err(format!("'{}' is not a chart version or constraint", excerpt(s)));
    }
    Ok(())
}

/// A `--set` item: `key=value`, a key that is not empty and not an option, no NUL or newline.
pub fn set_item(s: &str) -> Result<(), String> {
    match s.split_once('=') {
        Some((k, _)) if !k.trim().is_empty() && !k.starts_with('-') && !s.contains(['\0', '\n', '\r']) => Ok(()),
        _ => Err("must be a \"key=value\" string (no newline or NUL)".into()),
    }
}

/// An http(s):// or oci:// URL: no whitespace, control characters or quotes; its userinfo (if
/// any) split off. Returns `(url without userinfo, Some((user, password)))`.
pub fn url(s: &str) -> Result<(String, Option<(String, String)>), String> {
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(format!("'{}' is not an http(s):// or oci:// URL", crate::url_mask::mask_userinfo(&excerpt(s))));
    };
    let bad = |c: char| c.is_whitespace() || c.is_control() || "\"'`<>\\".contains(c);
    if !["http", "https", "oci"].contains(&scheme) || rest.is_empty() || s.len() > 2048 || s.contains(bad) {
        return Err(format!("'{}' is not an http(s):// or oci:// URL", crate::url_mask::mask_userinfo(&excerpt(s))));
    }
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(auth_end);
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    if host.is_empty() || host.starts_with('-') {
        return Err(format!("'{}' has no host", crate::url_mask::mask_userinfo(&excerpt(s))));
    }
    let bare = format!("{scheme}://{host}{path}");
    let creds = userinfo.map(|u| match u.split_once(':') {
        Some((user, pw)) => (percent_decoded(user), percent_decoded(pw)),
        None => (percent_decoded(u), String::new()),
    });
    Ok((bare, creds))
}

/// URL userinfo as the words it encodes (`bob%40corp` is `bob@corp`); an invalid escape is
/// kept as written.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_helm_would_take_as_options_or_paths_are_refused() {
        for bad in ["", ".", "..", "-x", "--insecure-skip-tls-verify", "a/b", "a b", "A", "a_b", &"a".repeat(54)] {
            assert!(release(bad).is_err(), "{bad:?}");
        }
        for ok in ["vdu1", "a.b", "x-1", &"a".repeat(53)] {
            assert!(release(ok).is_ok(), "{ok:?}");
        }
        for bad in ["", ".", "..", "-r", "--insecure-skip-tls-verify", "a/b", "a@b", "a b", "_x", &"r".repeat(64)] {
            assert!(repo(bad).is_err(), "{bad:?}");
        }
        for ok in ["bitnami", "charts.example", "my_repo-2"] {
            assert!(repo(ok).is_ok(), "{ok:?}");
        }
        for bad in [".", "..", "-c", "a..b", "a/b", ""] {
            assert!(chart(bad).is_err(), "{bad:?}");
        }
        assert!(namespace("kube-system").is_ok() && namespace("-n").is_err() && namespace("Default").is_err());
    }

    #[test]
    fn chart_references() {
        for ok in [
            "labrepo/nginxlab",
            "cnf1@labrepo/nginxlab",
            "oci://registry.example/charts/app",
            "https://h/c-1.0.tgz",
            "/var/tacker/helm/cnf1/localhelm",
        ] {
            assert!(chart_ref(ok, false, "cnf1").is_ok(), "{ok:?}");
        }
        for bad in [
            ".",
            "..",
            "./x",
            "../x",
            "-x",
            "--repo=x",
            "nginx",
            "/etc/passwd",
            "/var/tacker/helm/../../etc",
            "/var/tacker/helm/cnf1/..",
            "a/b/c",
            "oci://u:p@h/c",
            "http://h/ x",
            "cnf2@labrepo/nginxlab",
            "/var/tacker/helm/cnf2/localhelm",
        ] {
            assert!(chart_ref(bad, false, "cnf1").is_err(), "{bad:?}");
        }
        assert!(chart_ref("nginx", true, "cnf1").is_ok() && chart_ref("-x", true, "cnf1").is_err());
    }

    #[test]
    fn urls_lose_their_userinfo() {
        assert_eq!(
            url("https://bob:s3cret@charts.example:8443/x?y").unwrap(),
            ("https://charts.example:8443/x?y".into(), Some(("bob".into(), "s3cret".into())))
        );
        assert_eq!(url("http://tok@h/").unwrap(), ("http://h/".into(), Some(("tok".into(), String::new()))));
        assert_eq!(url("http://h/c").unwrap(), ("http://h/c".into(), None));
        assert_eq!(url("https://bob%40corp:p%3As%zz@h/").unwrap().1, Some(("bob@corp".into(), "p:s%zz".into())));
        for bad in ["ftp://h", "http://", "http://h/ x", "file:///etc", "-x", "http://u:p@/x", "http://h/'"] {
            let e = url(bad).unwrap_err();
            assert!(!e.contains(":p@"), "{e}");
        }
    }

    #[test]
    fn versions_sets_and_logins() {
        assert!(version("1.2.3").is_ok() && version(">=1.0.0 <2").is_ok() && version("--devel").is_err());
        assert!(version("1;id").is_err() && version("").is_err());
        assert!(set_item("a.b=c").is_ok() && set_item("=c").is_err() && set_item("a").is_err());
        assert!(set_item("--post-renderer=x").is_err() && set_item("a=b\nc").is_err());
        assert_eq!(excerpt("a\nb"), "a\\nb");
    }
}
