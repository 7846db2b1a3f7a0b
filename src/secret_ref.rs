//! Secret references, `@env:NAME` and `@file:/abs/path`: a value that is read on the
//! controller (the driver's environment, a file of the machine it runs on) instead of being
//! written in the request. They are the OPERATOR's tool, and this file is the one place that
//! says who may use them and what they may reach (docs/security.md, "Secret references").
//!
//! Why a policy: whatever a reference reads leaves the controller (a node password goes to a
//! login on a host the request names, a registry password into the nodes' registry config, a
//! Helm value into the release). A VNFM's request body is written by the VNFM's API user, a
//! tenant; honouring a reference there would hand the tenant the controller's files and
//! environment. So:
//! - [`Policy::Tenant`] (the hook's document: `request`, `vnf_instance`, grants) honours no
//!   reference: each is bad input naming the field, read from nowhere;
//! - [`Policy::Operator`] (request files the operator names on the command line, `sites`
//!   renders and the sites Job) honours a reference only when the operator allowed it:
//!   `@file:` under a `--secrets-dir` (compared after resolving symlinks), `@env:` for a
//!   `--secret-env` name or prefix, or exactly a reference a site catalogue declared;
//!   nothing allowed is nothing honoured.
//!
//! A refused or unreadable `@file:` gives one message whatever the cause (missing, unreadable,
//! a directory, outside the allowed directories): a message must not tell whether a file of the
//! controller exists. No message shows a value. A literal that starts with `@env:`/`@file:` is
//! written with a doubled `@` (`@@env:x` is the text `@env:x`).
//!
//! Pure by layer (it imports only pure files); like `input_limit.rs` it reads the one file a
//! reference names, non-blocking, regular files only, capped.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::excerpt;
use crate::secret::Secret;

/// The flags (and their variables, `env_vars.rs`) that allow references: named in every refusal.
pub const FLAGS: &str =
    "--secrets-dir DIR (MGMT_DRIVER_SECRETS_DIR) / --secret-env NAME|PREFIX* (MGMT_DRIVER_SECRET_ENV)";

/// The most a referenced file may hold: a password, a token, a key.
pub const FILE_MAX_BYTES: u64 = 64 << 10;

/// A value as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written<'a> {
    /// Taken as it is (a doubled `@` already undone).
    Literal(&'a str),
    /// `@env:NAME`.
    Env(&'a str),
    /// `@file:PATH`.
    File(&'a str),
}

impl Written<'_> {
    /// The reference as written (`@env:NAME`), for messages and for the declared list.
    pub fn marker(&self) -> String {
        match self {
            Written::Literal(s) => s.to_string(),
            Written::Env(n) => format!("@env:{n}"),
            Written::File(p) => format!("@file:{p}"),
        }
    }
}

/// Parse a value: `@env:NAME`, `@file:PATH`, `@@env:`/`@@file:` (a literal, one `@` dropped),
/// or a plain literal.
pub fn parse(text: &str) -> Written<'_> {
    if let Some(n) = text.strip_prefix("@env:") {
        Written::Env(n)
    } else if let Some(p) = text.strip_prefix("@file:") {
        Written::File(p)
    } else {
        match text.strip_prefix('@') {
            Some(rest) if rest.starts_with("@env:") || rest.starts_with("@file:") => Written::Literal(rest),
            _ => Written::Literal(text),
        }
    }
}

/// Who wrote the value holding a reference, and so what the reference may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// A VNFM's request body, written by its API user (a tenant): no reference is honoured.
    /// The default, so an input nobody classified gets no operator power.
    #[default]
    Tenant,
    /// The operator's own input (a request file named on the command line, a `sites` render):
    /// references within what the operator allowed.
    Operator(Allowed),
}

/// What the operator allows references to reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    /// `--secrets-dir`: a `@file:` must be a regular file under one of these, once symlinks
    /// are resolved.
    pub dirs: Vec<PathBuf>,
    /// `--secret-env`: a `@env:` name equal to one of these, or starting with one that ends in
    /// `*` (`EDGE_*`).
    pub env: Vec<String>,
    /// References honoured exactly as written: those a site catalogue declares (its `secrets`),
    /// recorded by `sites render` in each site's `site.json`.
    pub declared: Vec<String>,
}

impl Allowed {
    /// Nothing allowed: every reference is refused, naming [`FLAGS`].
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.env.is_empty() && self.declared.is_empty()
    }

    fn env_allowed(&self, name: &str) -> bool {
        self.declared.iter().any(|d| d.strip_prefix("@env:") == Some(name))
            || self.env.iter().any(|e| match e.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => e == name,
            })
    }
}

/// An `@env:` name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn env_name_ok(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A `--secret-env` entry: an env name, or one followed by `*` (a prefix; `*` alone allows all).
pub fn check_env_rule(rule: &str) -> std::result::Result<(), String> {
    if rule == "*" || env_name_ok(rule.strip_suffix('*').unwrap_or(rule)) {
        Ok(())
    } else {
        Err(format!("'{}' is not an environment variable name or a NAME* prefix", excerpt(rule)))
    }
}

/// Why a tenant's reference is refused (no path in it: the message is the same whatever the
/// reference names).
fn tenant_refusal(kind: &str) -> String {
    format!(
        "is a secret reference ({kind}), and references are the operator's tool: a VNFM's request may not read \
         the driver's environment or files; give the value itself (a literal starting with {kind} is written \
         with a doubled @)"
    )
}

/// Check that `w` may be honoured under `policy`, without reading anything: the tenant's
/// refusal, the reference's shape, and (for `@env:`) the allow-list. A `@file:` is checked for
/// confinement only when it is read ([`resolve`]). Literals always pass.
pub fn check(w: Written, policy: &Policy) -> std::result::Result<(), String> {
    let allowed = match (w, policy) {
        (Written::Literal(_), _) => return Ok(()),
        (Written::Env(_), Policy::Tenant) => return Err(tenant_refusal("@env:")),
        (Written::File(_), Policy::Tenant) => return Err(tenant_refusal("@file:")),
        (_, Policy::Operator(a)) => a,
    };
    match w {
        Written::Env(name) if !env_name_ok(name) => {
            Err(format!("'@env:{}' does not name an environment variable", excerpt(name)))
        }
        Written::File(p) if !Path::new(p).is_absolute() => {
            Err(format!("'@file:{}' must be an absolute path", excerpt(p)))
        }
        _ if allowed.is_empty() => Err(format!(
            "'{}' is a secret reference, and no reference is allowed here: the operator allows them with {FLAGS}",
            excerpt(&w.marker())
        )),
        Written::Env(name) if !allowed.env_allowed(name) => Err(format!(
            "'@env:{name}' names a variable the operator did not allow (--secret-env / MGMT_DRIVER_SECRET_ENV)"
        )),
        _ => Ok(()),
    }
}

/// The value `text` stands for under `policy`: a literal as written, or what its reference
/// reads (an `@env:` variable from `env`; an `@file:` file's whole text, one trailing newline
/// dropped). Errors are messages for the caller to put under the field's name; none shows a
/// value, and none tells why a file could not be used.
pub fn resolve(
    text: &str,
    policy: &Policy,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<Secret, String> {
    let w = parse(text);
    check(w, policy)?;
    match w {
        Written::Literal(s) => Ok(Secret::new(s.to_string())),
        Written::Env(name) => match env(name) {
            Some(v) if !v.is_empty() => Ok(Secret::new(v)),
            _ => Err(format!("refers to environment variable {name}, which is unset or empty")),
        },
        Written::File(path) => match policy {
            Policy::Operator(a) => read_confined(path, a),
            Policy::Tenant => Err(tenant_refusal("@file:")),
        },
    }
}

/// The one message for a `@file:` that cannot be used, whatever the reason.
fn unusable(path: &str) -> String {
    format!(
        "'@file:{}' is not a readable regular file under an allowed secrets directory (--secrets-dir / \
         MGMT_DRIVER_SECRETS_DIR, or a site catalogue's declared secret); which of these it is, is not said",
        excerpt(path)
    )
}

/// Whether `file` (canonical) lies under one of `dirs` (each canonicalized here; one that does
/// not resolve holds nothing).
pub fn under_any(file: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().filter_map(|d| std::fs::canonicalize(d).ok()).any(|d| file.starts_with(&d) && file != d)
}

fn read_confined(path: &str, a: &Allowed) -> std::result::Result<Secret, String> {
    let declared = a.declared.iter().any(|d| d.strip_prefix("@file:") == Some(path));
    // Resolve symlinks first: a link inside a secrets directory that leads out is outside.
    let canon = std::fs::canonicalize(path).map_err(|_| unusable(path))?;
    let inside = under_any(&canon, &a.dirs);
    if !inside && !declared {
        return Err(unusable(path));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&canon)
        .map_err(|_| unusable(path))?;
    let meta = f.metadata().map_err(|_| unusable(path))?;
    if !meta.file_type().is_file() {
        return Err(unusable(path));
    }
    let mut v = Vec::new();
    f.take(FILE_MAX_BYTES + 1).read_to_end(&mut v).map_err(|_| unusable(path))?;
    if v.len() as u64 > FILE_MAX_BYTES {
        return Err(format!("'@file:{}' is over {FILE_MAX_BYTES} bytes", excerpt(path)));
    }
    if v.ends_with(b"\n") {
        v.pop();
        if v.ends_with(b"\r") {
            v.pop();
        }
    }
    let v = String::from_utf8(v).map_err(|_| format!("'@file:{}' is not UTF-8 text", excerpt(path)))?;
    if v.is_empty() {
        return Err(format!("'@file:{}' is empty", excerpt(path)));
    }
    Ok(Secret::new(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(dirs: &[&Path], env: &[&str]) -> Policy {
        Policy::Operator(Allowed {
            dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
            env: env.iter().map(|s| s.to_string()).collect(),
            declared: vec![],
        })
    }

    fn env(k: &str) -> Option<String> {
        (k == "EDGE_PW" || k == "OTHER").then(|| "fr0m-env".to_string())
    }

    #[test]
    fn parse_tells_references_from_literals_and_undoes_a_doubled_at() {
        assert_eq!(parse("@env:A"), Written::Env("A"));
        assert_eq!(parse("@file:/s/pw"), Written::File("/s/pw"));
        assert_eq!(parse("@@env:A"), Written::Literal("@env:A"));
        assert_eq!(parse("@@file:/x"), Written::Literal("@file:/x"));
        assert_eq!(parse("@@x"), Written::Literal("@@x"));
        assert_eq!(parse("plain"), Written::Literal("plain"));
        assert_eq!(parse("@env:A").marker(), "@env:A");
    }

    #[test]
    fn a_tenant_gets_no_reference_and_learns_nothing_about_files() {
        let t = Policy::Tenant;
        assert_eq!(resolve("plain", &t, &env).unwrap().expose(), "plain");
        assert_eq!(resolve("@@env:EDGE_PW", &t, &env).unwrap().expose(), "@env:EDGE_PW");
        let e = resolve("@env:EDGE_PW", &t, &env).unwrap_err();
        assert!(e.contains("operator's tool") && !e.contains("fr0m"), "{e}");
        let a = resolve("@file:/etc/hostname", &t, &env).unwrap_err();
        let b = resolve("@file:/nonexistent/x", &t, &env).unwrap_err();
        assert_eq!(a, b, "the same words whether the file exists or not");
        assert!(!a.contains("/etc"), "{a}");
    }

    #[test]
    fn nothing_allowed_refuses_naming_the_flags() {
        let p = Policy::Operator(Allowed::default());
        for r in ["@env:EDGE_PW", "@file:/etc/hostname"] {
            let e = resolve(r, &p, &env).unwrap_err();
            assert!(e.contains("--secrets-dir") && e.contains("--secret-env"), "{e}");
        }
    }

    #[test]
    fn env_references_only_for_allowed_names_or_prefixes() {
        let p = op(&[], &["EDGE_*", "OTHER"]);
        assert_eq!(resolve("@env:EDGE_PW", &p, &env).unwrap().expose(), "fr0m-env");
        assert_eq!(resolve("@env:OTHER", &p, &env).unwrap().expose(), "fr0m-env");
        let e = resolve("@env:HOME", &p, &env).unwrap_err();
        assert!(e.contains("did not allow"), "{e}");
        let e = resolve("@env:EDGE_UNSET", &p, &env).unwrap_err();
        assert!(e.contains("unset or empty"), "{e}");
        assert!(resolve("@env:A-B", &p, &env).unwrap_err().contains("does not name"));
        assert!(check_env_rule("EDGE_*").is_ok() && check_env_rule("*").is_ok() && check_env_rule("A-B").is_err());
    }

    #[test]
    fn file_references_are_confined_and_every_failure_reads_the_same() {
        let d = tempfile::tempdir().unwrap();
        let sec = d.path().join("secrets");
        std::fs::create_dir(&sec).unwrap();
        std::fs::write(sec.join("pw"), "fr0m-file\n").unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "not-yours\n").unwrap();
        std::os::unix::fs::symlink(&outside, sec.join("link-out")).unwrap();
        std::fs::create_dir(sec.join("dir")).unwrap();
        let p = op(&[&sec], &[]);
        let got = |path: &Path| resolve(&format!("@file:{}", path.display()), &p, &env);
        assert_eq!(got(&sec.join("pw")).unwrap().expose(), "fr0m-file");
        let msg = |path: &Path| got(path).unwrap_err().replace(&path.display().to_string(), "PATH");
        let want = msg(&outside);
        for bad in
            [sec.join("link-out"), sec.join("missing"), sec.join("dir"), sec.clone(), PathBuf::from("/etc/hostname")]
        {
            assert_eq!(msg(&bad), want, "{}", bad.display());
        }
        assert!(!want.contains("not-yours") && !want.contains("No such file"), "{want}");
        assert!(got(Path::new("relative")).is_err());
        assert!(resolve("@file:rel/pw", &p, &env).unwrap_err().contains("absolute path"));
        std::fs::write(sec.join("empty"), "").unwrap();
        assert!(got(&sec.join("empty")).unwrap_err().contains("empty"));
    }

    #[test]
    fn declared_references_are_honoured_exactly() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "fr0m-file").unwrap();
        let marker = format!("@file:{}", f.display());
        let p =
            Policy::Operator(Allowed { declared: vec![marker.clone(), "@env:EDGE_PW".into()], ..Default::default() });
        assert_eq!(resolve(&marker, &p, &env).unwrap().expose(), "fr0m-file");
        assert_eq!(resolve("@env:EDGE_PW", &p, &env).unwrap().expose(), "fr0m-env");
        assert!(resolve("@env:OTHER", &p, &env).is_err());
        let other = d.path().join("other");
        std::fs::write(&other, "x").unwrap();
        assert!(resolve(&format!("@file:{}", other.display()), &p, &env).is_err());
    }
}
