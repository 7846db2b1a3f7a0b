//! Which `vimConnectionInfo` entry the VNFCs run on, and its Keystone credentials, parsed
//! strictly. The entry is written by the tenant (docs/security.md, "The trust model"): its
//! endpoint is used only when the operator allow-listed it, and its password is a [`Secret`].

use serde_json::Value;

use crate::error::{Error, Result};
use crate::request::{VimConnection, VimConnections};
use crate::secret::Secret;

/// Keystone v3 password credentials of one VIM entry.
#[derive(Clone, Debug)]
pub struct Access {
    /// Where the entry is, for messages: `vimConnectionInfo.<key>` (a map) or `[i]` (a list).
    pub at: String,
    pub auth_url: String,
    pub username: String,
    pub password: Secret,
    pub project: String,
    pub project_domain: String,
    pub user_domain: String,
    pub region: Option<String>,
}

fn is_openstack(c: &VimConnection) -> bool {
    let t = c.vim_type.to_ascii_lowercase();
    t == "openstack" || t.starts_with("etsinfv.openstack_keystone")
}

/// The entries with where each is: the map's key, or the list's index.
fn entries(conns: &VimConnections) -> Vec<(String, &VimConnection)> {
    match conns {
        VimConnections::Map(m) => {
            m.iter().map(|(k, c)| (format!("vimConnectionInfo.{}", crate::error::excerpt(k)), c)).collect()
        }
        VimConnections::List(l) => l.iter().enumerate().map(|(i, c)| (format!("vimConnectionInfo[{i}]"), c)).collect(),
    }
}

/// The VIM entry the VNFCs run on: the one their `computeResource.vimConnectionId` names (a
/// map key, or a list entry's `id`), else the only OpenStack entry. None: no OpenStack entry.
pub fn select<'a>(
    conns: &'a VimConnections,
    named: Option<&str>,
    file: &str,
) -> Result<Option<(String, &'a VimConnection)>> {
    let all = entries(conns);
    if let Some(n) = named {
        let by_key = match conns {
            VimConnections::Map(m) => m.get(n).map(|c| (format!("vimConnectionInfo.{}", crate::error::excerpt(n)), c)),
            VimConnections::List(_) => None,
        };
        let found =
            by_key.or_else(|| all.iter().find(|(_, c)| c.id.as_deref() == Some(n)).map(|(a, c)| (a.clone(), *c)));
        if let Some((at, c)) = found {
            if !is_openstack(c) {
                return Err(Error::input(
                    file,
                    format!("{at}.vimType"),
                    "the VNFCs' VIM is not an OpenStack (Keystone v3) VIM",
                ));
            }
            return Ok(Some((at, c)));
        }
    }
    let mut os = all.into_iter().filter(|(_, c)| is_openstack(c));
    match (os.next(), os.next()) {
        (Some(one), None) => Ok(Some(one)),
        (None, _) => Ok(None),
        (Some(_), Some(_)) => Err(Error::input(
            file,
            "vimConnectionInfo",
            "several OpenStack VIMs and no VNFC's computeResource.vimConnectionId names one",
        )),
    }
}

/// A field the request must carry: a non-empty string of at most 255 printable characters.
fn text(v: Option<&Value>, file: &str, field: &str) -> Result<String> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| Error::input(file, field, "is required (a string) to ask the VIM for node addresses"))?;
    if s.is_empty() || s.len() > 255 || s.chars().any(char::is_control) {
        return Err(Error::input(file, field, "must be 1 to 255 printable characters"));
    }
    Ok(s.to_string())
}

/// `u` without a trailing slash: the form URLs are compared in.
pub fn normalize(u: &str) -> &str {
    u.trim_end_matches('/')
}

/// Whether `u` is an http(s) URL with a host and nothing a shell or header could misread.
pub fn is_http_url(u: &str) -> bool {
    let rest = u.strip_prefix("https://").or_else(|| u.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains('@'))
        && u.len() <= 2048
        && u.bytes().all(|b| b.is_ascii_graphic())
}

impl Access {
    /// The entry's credentials, with its Keystone endpoint checked against the operator's
    /// allow-list: a tenant's request never makes the controller connect where it chose.
    pub fn parse(at: &str, c: &VimConnection, allowed: &[String], file: &str) -> Result<Access> {
        let endpoint_field = format!("{at}.interfaceInfo.endpoint");
        let auth_url = text(c.interface_info.as_ref().and_then(|i| i.get("endpoint")), file, &endpoint_field)?;
        if allowed.is_empty() {
            return Err(Error::input(
                file,
                &endpoint_field,
                format!(
                    "node addresses must come from the VIM, and the operator allowed no Keystone endpoint: set {}",
                    super::ALLOW_FLAG
                ),
            ));
        }
        if !allowed.iter().any(|a| normalize(a) == normalize(&auth_url)) || !is_http_url(&auth_url) {
            return Err(Error::input(
                file,
                &endpoint_field,
                format!(
                    "'{}' is not a Keystone endpoint the operator allowed ({})",
                    crate::error::excerpt(&auth_url),
                    super::ALLOW_FLAG
                ),
            ));
        }
        let a = c.access_info.as_ref();
        let get = |k: &str| a.and_then(|a| a.get(k));
        let f = |k: &str| format!("{at}.accessInfo.{k}");
        let password = text(get("password"), file, &f("password")).map_err(|_| {
            Error::input(file, f("password"), "is required (a string of 1 to 255 printable characters)")
        })?;
        let region = match get("region") {
            None | Some(Value::Null) => None,
            v => Some(text(v, file, &f("region"))?),
        };
        Ok(Access {
            at: at.to_string(),
            auth_url: normalize(&auth_url).to_string(),
            username: text(get("username"), file, &f("username"))?,
            password: Secret::new(password),
            project: text(get("project"), file, &f("project"))?,
            project_domain: text(get("projectDomain"), file, &f("projectDomain"))?,
            user_domain: text(get("userDomain"), file, &f("userDomain"))?,
            region,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conns(v: Value) -> VimConnections {
        serde_json::from_value(v).unwrap()
    }

    fn entry(endpoint: &str) -> Value {
        json!({"vimId": "v", "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3", "interfaceInfo": {"endpoint": endpoint},
               "accessInfo": {"username": "nfv_user", "password": "s3cret-pw", "region": "RegionOne",
                              "project": "nfv", "projectDomain": "Default", "userDomain": "Default"}})
    }

    #[test]
    fn the_named_entry_else_the_only_openstack_one() {
        let c = conns(
            json!({"k8s": {"vimType": "ETSINFV.HELM.V_3"}, "vim1": entry("http://ks/v3"), "vim2": entry("http://ks2/v3")}),
        );
        assert_eq!(select(&c, Some("vim2"), "f").unwrap().unwrap().0, "vimConnectionInfo.vim2");
        let e = select(&c, None, "f").unwrap_err().to_string();
        assert!(e.contains("several OpenStack VIMs"), "{e}");
        let e = select(&c, Some("k8s"), "f").unwrap_err().to_string();
        assert!(e.contains("vimConnectionInfo.k8s.vimType"), "{e}");
        let one = conns(json!({"vim1": entry("http://ks/v3")}));
        assert_eq!(select(&one, Some("gone"), "f").unwrap().unwrap().0, "vimConnectionInfo.vim1");
        let list = conns(json!([{"id": "a", "vimType": "kubernetes"}, {"id": "b", "vimType": "openstack"}]));
        assert_eq!(select(&list, Some("b"), "f").unwrap().unwrap().0, "vimConnectionInfo[1]");
        assert!(select(&conns(json!({"k": {"vimType": "kubernetes"}})), None, "f").unwrap().is_none());
    }

    #[test]
    fn only_an_allowed_endpoint_and_the_password_never_prints() {
        let c = conns(json!({"vim1": entry("http://ks/identity/v3/")}));
        let (at, e) = select(&c, None, "f").unwrap().unwrap();
        let allowed = vec!["http://ks/identity/v3".to_string()];
        let a = Access::parse(&at, e, &allowed, "f").unwrap();
        assert_eq!(a.auth_url, "http://ks/identity/v3");
        assert_eq!((a.project.as_str(), a.region.as_deref()), ("nfv", Some("RegionOne")));
        assert!(!format!("{a:?}").contains("s3cret-pw"));
        let err = Access::parse(&at, e, &[], "f").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let m = err.to_string();
        assert!(m.contains("vimConnectionInfo.vim1.interfaceInfo.endpoint") && m.contains("--vim-auth-url"), "{m}");
        let m = Access::parse(&at, e, &["http://other/v3".into()], "f").unwrap_err().to_string();
        assert!(m.contains("is not a Keystone endpoint the operator allowed"), "{m}");
        let mut bad = entry("http://ks/v3");
        bad["accessInfo"]["projectDomain"] = json!(7);
        let c = conns(json!({"vim1": bad}));
        let (at, e) = select(&c, None, "f").unwrap().unwrap();
        let m = Access::parse(&at, e, &["http://ks/v3".into()], "f").unwrap_err().to_string();
        assert!(m.contains("vimConnectionInfo.vim1.accessInfo.projectDomain"), "{m}");
        let mut bad = entry("http://ks/v3");
        bad["accessInfo"]["password"] = json!("pw\nwith-newline");
        let c = conns(json!({"vim1": bad}));
        let (at, e) = select(&c, None, "f").unwrap().unwrap();
        let m = Access::parse(&at, e, &["http://ks/v3".into()], "f").unwrap_err().to_string();
        assert!(m.contains("accessInfo.password") && !m.contains("with-newline"), "{m}");
    }

    #[test]
    fn urls_with_userinfo_or_spaces_are_not_urls() {
        assert!(is_http_url("https://ks.example:5000/v3"));
        assert!(!is_http_url("https://user:pw@ks/v3"));
        assert!(!is_http_url("file:///etc/passwd"));
        assert!(!is_http_url("http://ks/v3 x"));
    }
}
