//! `vimConnectionInfo[].extra.helm_info`: where Helm runs. We write a JSON object; Tacker wrote
//! a Python `repr()` string and read it back with `json.loads(s.replace("'", '"'))`, which breaks
//! on any quote inside a password. Here the repr form is parsed as what it is: a Python literal
//! (dicts, lists, strings with either quote and escapes, numbers, True/False/None).

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// `Debug` masks the password.
#[derive(Clone, PartialEq)]
pub struct HelmInfo {
    pub masternode_ip: Vec<String>,
    pub username: String,
    pub password: Option<String>,
    /// `mgmt-driver-state:<id>`: credentials are in our state store.
    pub credential_ref: Option<String>,
}

impl std::fmt::Debug for HelmInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelmInfo")
            .field("masternode_ip", &self.masternode_ip)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| crate::secret::MASK))
            .field("credential_ref", &self.credential_ref)
            .finish()
    }
}

/// Parse helm_info given as a JSON object or a Python-repr string; `at` names where it came from.
pub fn parse(v: &Value, at: &str) -> Result<HelmInfo> {
    let obj = match v {
        Value::Object(m) => m.clone(),
        Value::String(s) => match parse_python_literal(s) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(Error::input(at, "helm_info", "is a string but not a dict")),
            Err(e) => return Err(Error::input(at, "helm_info", format!("content of helm_info is invalid: {e}"))),
        },
        _ => return Err(Error::input(at, "helm_info", "must be an object (or Tacker's repr string)")),
    };
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string).filter(|x| !x.is_empty());
    let ips: Vec<String> = match obj.get("masternode_ip") {
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => vec![],
    };
    if ips.is_empty() {
        return Err(Error::input(at, "helm_info.masternode_ip", "content of helm_info is invalid: no master address"));
    }
    for ip in &ips {
        if ip.parse::<std::net::IpAddr>().is_err() && !ip.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
        {
            return Err(Error::input(at, "helm_info.masternode_ip", format!("'{ip}' is not an address")));
        }
    }
    let username = s("masternode_username")
        .ok_or_else(|| Error::input(at, "helm_info.masternode_username", "content of helm_info is invalid: missing"))?;
    Ok(HelmInfo {
        masternode_ip: ips,
        username,
        password: s("masternode_password"),
        credential_ref: s("masternode_credential_ref"),
    })
}

/// A Python literal (the subset `repr()` of a dict of strings and lists produces) as JSON.
pub fn parse_python_literal(s: &str) -> std::result::Result<Value, String> {
    let mut p = Py { b: s.as_bytes(), i: 0 };
    let v = p.value()?;
    p.ws();
    if p.i != p.b.len() {
        return Err(format!("unexpected text at offset {}", p.i));
    }
    Ok(v)
}

struct Py<'a> {
    b: &'a [u8],
    i: usize,
}

impl Py<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at offset {}", c as char, self.i))
        }
    }

    fn value(&mut self) -> std::result::Result<Value, String> {
        match self.peek() {
            Some(b'{') => self.dict(),
            Some(b'[') | Some(b'(') => self.list(),
            Some(b'\'') | Some(b'"') => Ok(Value::String(self.string()?)),
            Some(c) if c.is_ascii_digit() || c == b'-' => self.number(),
            Some(_) => self.word(),
            None => Err("unexpected end".into()),
        }
    }

    fn dict(&mut self) -> std::result::Result<Value, String> {
        self.expect(b'{')?;
        let mut m = Map::new();
        loop {
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Value::Object(m));
            }
            let k = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            self.expect(b':')?;
            let v = self.value()?;
            m.insert(k, v);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' or '}}' at offset {}", self.i)),
            }
        }
    }

    fn list(&mut self) -> std::result::Result<Value, String> {
        let close = if self.peek() == Some(b'(') { b')' } else { b']' };
        self.i += 1;
        let mut v = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok(Value::Array(v));
            }
            v.push(self.value()?);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(c) if c == close => {}
                _ => return Err(format!("expected ',' at offset {}", self.i)),
            }
        }
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        let q = self.b[self.i];
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        while self.i < self.b.len() {
            let c = self.b[self.i];
            self.i += 1;
            if c == q {
                return String::from_utf8(out).map_err(|e| e.to_string());
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let e = *self.b.get(self.i).ok_or("unfinished escape")?;
            self.i += 1;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0' => out.push(0),
                b'x' => {
                    let h = std::str::from_utf8(self.b.get(self.i..self.i + 2).ok_or("short \\x escape")?)
                        .map_err(|e| e.to_string())?;
                    let ch = char::from_u32(u32::from_str_radix(h, 16).map_err(|e| e.to_string())?)
                        .ok_or("bad \\x escape")?;
                    out.extend(ch.to_string().as_bytes());
                    self.i += 2;
                }
                b'u' => {
                    let h = std::str::from_utf8(self.b.get(self.i..self.i + 4).ok_or("short \\u escape")?)
                        .map_err(|e| e.to_string())?;
                    let ch = char::from_u32(u32::from_str_radix(h, 16).map_err(|e| e.to_string())?)
                        .ok_or("bad \\u escape")?;
                    out.extend(ch.to_string().as_bytes());
                    self.i += 4;
                }
                other => out.push(other),
            }
        }
        Err("unterminated string".into())
    }

    fn number(&mut self) -> std::result::Result<Value, String> {
        let start = self.i;
        while self.i < self.b.len() && (self.b[self.i].is_ascii_digit() || b"-+.eE".contains(&self.b[self.i])) {
            self.i += 1;
        }
        let t = std::str::from_utf8(&self.b[start..self.i]).map_err(|e| e.to_string())?;
        serde_json::from_str(t).map_err(|_| format!("bad number '{t}'"))
    }

    fn word(&mut self) -> std::result::Result<Value, String> {
        let start = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_alphabetic() {
            self.i += 1;
        }
        match &self.b[start..self.i] {
            b"True" => Ok(Value::Bool(true)),
            b"False" => Ok(Value::Bool(false)),
            b"None" => Ok(Value::Null),
            _ => Err(format!("unexpected text at offset {start}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tackers_repr_string_parses() {
        // As in Tacker's guide (`openstack vnflcm show`): a Python dict repr.
        let s = "{'masternode_ip': ['10.10.0.35', '10.10.0.63', '10.10.0.4'], 'masternode_username': 'ubuntu', 'masternode_password': 'ubuntu'}";
        let h = parse(&Value::String(s.into()), "vim").unwrap();
        assert_eq!(h.masternode_ip, vec!["10.10.0.35", "10.10.0.63", "10.10.0.4"]);
        assert_eq!((h.username.as_str(), h.password.as_deref()), ("ubuntu", Some("ubuntu")));
    }

    #[test]
    fn quotes_inside_passwords_do_not_break_it() {
        // repr() switches to double quotes when the text holds a single quote, and escapes both.
        let s = r#"{'masternode_ip': ['10.0.0.1'], 'masternode_username': 'ubuntu', 'masternode_password': "it's \"x\"\\y"}"#;
        let h = parse(&Value::String(s.into()), "vim").unwrap();
        assert_eq!(h.password.as_deref(), Some("it's \"x\"\\y"));
        let s = r"{'masternode_ip': ['10.0.0.1'], 'masternode_username': 'u', 'masternode_password': 'a\'b\x41\u00e9', 'n': None, 'ok': True}";
        assert_eq!(parse(&Value::String(s.into()), "vim").unwrap().password.as_deref(), Some("a'bAé"));
    }

    #[test]
    fn json_objects_and_errors() {
        let h = parse(&json!({"masternode_ip": ["10.0.0.1"], "masternode_username": "root", "masternode_credential_ref": "mgmt-driver-state:i"}), "vim").unwrap();
        assert_eq!(h.credential_ref.as_deref(), Some("mgmt-driver-state:i"));
        let e = parse(&json!({"masternode_username": "root"}), "vim").unwrap_err().to_string();
        assert!(e.contains("masternode_ip") && e.contains("content of helm_info is invalid"), "{e}");
        assert!(parse(&Value::String("{'a': ".into()), "vim")
            .unwrap_err()
            .to_string()
            .contains("content of helm_info is invalid"));
        assert!(parse(&json!({"masternode_ip": ["1.2.3.4; rm -rf /"], "masternode_username": "u"}), "vim").is_err());
    }
}
