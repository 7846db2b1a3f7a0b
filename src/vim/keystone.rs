//! Keystone v3 password authentication, as data: the request body, and the token and the
//! catalogue's `network` endpoint read back strictly. The body holds the password and the
//! response's header the token: both stay [`Secret`]s, and an error never quotes a body (Keystone
//! may echo what it was sent).

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::vim::access::{is_http_url, Access};

/// `POST` here: `<endpoint>/auth/tokens`, the endpoint being Keystone's v3 root (Tacker's
/// `interfaceInfo.endpoint`, e.g. `http://ks/identity/v3`); a root without `/v3` gets it.
pub fn tokens_url(auth_url: &str) -> String {
    let base = crate::vim::access::normalize(auth_url);
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

/// The password-method body, scoped to the project by name in its domain.
pub fn auth_body(a: &Access) -> Secret {
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": a.username, "domain": {"name": a.user_domain}, "password": a.password.expose()}}},
        "scope": {"project": {"name": a.project, "domain": {"name": a.project_domain}}}}});
    Secret::new(body.to_string())
}

/// What authentication gives: the token (for the `X-Auth-Token` header only) and Neutron's URL.
#[derive(Clone, Debug)]
pub struct Token {
    pub value: Secret,
    pub network_url: String,
}

/// A token is printable ASCII without spaces, 16 to 8192 bytes (Fernet tokens are ~200).
fn token_ok(t: &str) -> bool {
    (16..=8192).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_graphic())
}

/// A failed call, said without its body: the status and, when it is plain words, Keystone's
/// or Neutron's short error title.
pub fn status_error(service: &str, what: &str, url: &str, status: u16, body: &[u8]) -> Error {
    let title = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        let t = v.pointer("/error/title").or_else(|| v.pointer("/NeutronError/type"))?.as_str()?.to_string();
        (t.len() <= 64 && t.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')).then_some(t)
    });
    Error::Unreadable {
        node: service.to_string(),
        command: format!("{what} {}", crate::url_mask::mask_userinfo(url)),
        what: "the VIM's answer".into(),
        message: match title {
            Some(t) => format!("HTTP {status} ({t})"),
            None => format!("HTTP {status}"),
        },
    }
}

fn bad(url: &str, message: impl Into<String>) -> Error {
    Error::Unreadable {
        node: "keystone".into(),
        command: format!("POST {}", crate::url_mask::mask_userinfo(url)),
        what: "the token response".into(),
        message: message.into(),
    }
}

/// The token from `X-Subject-Token` and the `network` service's `public` endpoint in the
/// access's region (any region when the entry names none, if there is exactly one).
pub fn parse_token(
    url: &str,
    status: u16,
    subject: Option<&Secret>,
    body: &[u8],
    region: Option<&str>,
) -> Result<Token> {
    if status != 201 && status != 200 {
        return Err(status_error("keystone", "POST", url, status, body));
    }
    let value =
        subject.filter(|t| token_ok(t.expose())).cloned().ok_or_else(|| bad(url, "no valid X-Subject-Token header"))?;
    let doc: Value = serde_json::from_slice(body).map_err(|e| bad(url, format!("not JSON: {}", e.classify_name())))?;
    let catalog =
        doc.pointer("/token/catalog").and_then(Value::as_array).ok_or_else(|| bad(url, "no token.catalog list"))?;
    let mut urls = Vec::new();
    for svc in catalog.iter().filter(|s| s.get("type").and_then(Value::as_str) == Some("network")) {
        let eps = svc
            .get("endpoints")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(url, "a network service without an endpoints list"))?;
        for ep in eps {
            if ep.get("interface").and_then(Value::as_str) != Some("public") {
                continue;
            }
            let r = ep.get("region_id").or_else(|| ep.get("region")).and_then(Value::as_str);
            if region.is_some() && r != region {
                continue;
            }
            let u = ep
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(url, "a network endpoint without a url string"))?;
            if !is_http_url(u) {
                return Err(bad(
                    url,
                    format!("the network endpoint '{}' is not an http(s) URL", crate::error::excerpt(u)),
                ));
            }
            urls.push(crate::vim::access::normalize(u).to_string());
        }
    }
    urls.dedup();
    match urls.as_slice() {
        [one] => Ok(Token { value, network_url: one.clone() }),
        [] => Err(bad(
            url,
            format!(
                "the catalogue has no public network endpoint{}",
                region.map(|r| format!(" in region '{}'", crate::error::excerpt(r))).unwrap_or_default()
            ),
        )),
        _ => Err(bad(url, "the catalogue has several public network endpoints: name the region in accessInfo.region")),
    }
}

/// serde_json's error category, without the text it quotes.
pub(crate) trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "an I/O error",
            serde_json::error::Category::Syntax => "a syntax error",
            serde_json::error::Category::Data => "a wrong type",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "gAAAAABfake-token-value-0123456789";

    fn catalog(eps: Value) -> Vec<u8> {
        json!({"token": {"catalog": [{"type": "identity", "endpoints": []}, {"type": "network", "endpoints": eps}]}})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn the_body_scopes_the_project_and_the_url_ends_in_auth_tokens() {
        let a = Access {
            at: "vimConnectionInfo.v".into(),
            auth_url: "http://ks/identity/v3".into(),
            username: "u".into(),
            password: Secret::new("pw"),
            project: "p".into(),
            project_domain: "Default".into(),
            user_domain: "Dom".into(),
            region: None,
        };
        let b: Value = serde_json::from_str(auth_body(&a).expose()).unwrap();
        assert_eq!(b.pointer("/auth/identity/password/user/password").unwrap(), "pw");
        assert_eq!(b.pointer("/auth/scope/project/domain/name").unwrap(), "Default");
        assert_eq!(b.pointer("/auth/identity/password/user/domain/name").unwrap(), "Dom");
        assert_eq!(tokens_url("http://ks/identity/v3/"), "http://ks/identity/v3/auth/tokens");
        assert_eq!(tokens_url("http://ks:5000"), "http://ks:5000/v3/auth/tokens");
    }

    #[test]
    fn the_network_endpoint_of_the_region() {
        let t = Secret::new(TOKEN);
        let body = catalog(json!([
            {"interface": "public", "region_id": "RegionOne", "url": "http://n1:9696/"},
            {"interface": "internal", "region_id": "RegionOne", "url": "http://internal:9696"},
            {"interface": "public", "region_id": "RegionTwo", "url": "http://n2:9696"}]));
        let k = parse_token("u", 201, Some(&t), &body, Some("RegionOne")).unwrap();
        assert_eq!(k.network_url, "http://n1:9696");
        assert!(!format!("{k:?}").contains(TOKEN));
        let e = parse_token("u", 201, Some(&t), &body, None).unwrap_err().to_string();
        assert!(e.contains("several public network endpoints"), "{e}");
        let e = parse_token("u", 201, Some(&t), &body, Some("RegionX")).unwrap_err().to_string();
        assert!(e.contains("no public network endpoint in region 'RegionX'"), "{e}");
    }

    #[test]
    fn hostile_token_responses_are_refused_without_quoting_them() {
        let t = Secret::new(TOKEN);
        let ok = catalog(json!([{"interface": "public", "region_id": "R", "url": "http://n:9696"}]));
        assert!(parse_token("u", 201, None, &ok, None).unwrap_err().to_string().contains("X-Subject-Token"));
        let short = Secret::new("x");
        assert!(parse_token("u", 201, Some(&short), &ok, None).is_err());
        let bad_url = catalog(json!([{"interface": "public", "url": "file:///etc/shadow"}]));
        assert!(parse_token("u", 201, Some(&t), &bad_url, None)
            .unwrap_err()
            .to_string()
            .contains("not an http(s) URL"));
        let wrong_type = br#"{"token": {"catalog": {"network": 1}}}"#;
        assert!(parse_token("u", 201, Some(&t), wrong_type, None)
            .unwrap_err()
            .to_string()
            .contains("no token.catalog list"));
        let e = parse_token("u", 201, Some(&t), b"not json s3cret-pw", None).unwrap_err().to_string();
        assert!(!e.contains("s3cret-pw") && e.contains("a syntax error"), "{e}");
        // Keystone's 401 echoing what it got: neither the password nor the token comes back.
        let echo = format!(
            r#"{{"error": {{"code": 401, "title": "Unauthorized", "message": "bad password s3cret-pw for token {TOKEN}"}}}}"#
        );
        let e = parse_token("http://ks/v3/auth/tokens", 401, Some(&t), echo.as_bytes(), None).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("HTTP 401 (Unauthorized)") && !m.contains("s3cret-pw") && !m.contains(TOKEN), "{m}");
        let title_echo = format!(r#"{{"error": {{"title": "{TOKEN}"}}}}"#);
        let m = parse_token("u", 401, None, title_echo.as_bytes(), None).unwrap_err().to_string();
        assert!(!m.contains(TOKEN), "{m}");
    }

    /// A real Keystone's token body (tests/data/openstack/): its public network endpoint.
    #[test]
    fn a_recorded_keystone_answer() {
        let body = include_bytes!("../../tests/data/openstack/keystone-token-body.json");
        let k = parse_token("u", 201, Some(&Secret::new(TOKEN)), body, Some("RegionOne")).unwrap();
        assert!(k.network_url.starts_with("http://127.0.0.1:"), "{}", k.network_url);
    }
}
