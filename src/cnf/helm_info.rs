//! `vimConnectionInfo[].extra.helm_info`: where Helm runs. We write a JSON object; Tacker wrote
//! a Python `repr()` string and read it back with `json.loads(s.replace("'", '"'))`, which breaks
//! on any quote inside a password. Here the repr form is parsed as what it is: a Python literal
//! (dicts, lists, strings with either quote and escapes, numbers, True/False/None).

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// `Debug` masks the password and the credential reference (a bearer secret).
#[derive(Clone, PartialEq)]
pub struct HelmInfo {
    pub masternode_ip: Vec<String>,
    pub username: String,
    pub password: Option<String>,
    /// `mgmt-driver-state:<cluster id>:<token>`: the credentials are in our state store, with
    /// the cluster recorded under that id (`cluster/credential_ref.rs`).
    pub credential_ref: Option<String>,
}

impl std::fmt::Debug for HelmInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelmInfo")
            .field("masternode_ip", &self.masternode_ip)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| crate::secret::MASK))
            .field("credential_ref", &self.credential_ref.as_ref().map(|_| crate::secret::MASK))
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
        let host_name = ip.len() <= 253
            && ip.starts_with(|c: char| c.is_ascii_alphanumeric())
            && ip.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c));
        if ip.parse::<std::net::IpAddr>().is_err() && !host_name {
            return Err(Error::input(
                at,
                "helm_info.masternode_ip",
                format!("'{}' is not an address", crate::error::excerpt(ip)),
            ));
        }
    }
    let username = s("masternode_username")
        .ok_or_else(|| Error::input(at, "helm_info.masternode_username", "content of helm_info is invalid: missing"))?;
    // The SSH login on every master, and what `chown` and `sudo` receive: a login name, never an option.
    crate::inventory::check_user(&username).map_err(|m| Error::input(at, "helm_info.masternode_username", m))?;
    Ok(HelmInfo {
        masternode_ip: ips,
        username,
        password: s("masternode_password"),
        credential_ref: s("masternode_credential_ref"),
    })
}

/// A Python literal (the subset `repr()` of a dict of strings and lists produces) as JSON.
pub fn parse_python_literal(s: &str) -> std::result::Result<Value, String> {
    let mut p = Py { b: s.as_bytes(), i: 0, depth: 0 };
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
    /// Open dicts and lists: capped, so a hostile string is an error, not a stack overflow.
    depth: usize,
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
            Some(b'{' | b'[' | b'(') => {
                self.depth += 1;
                if self.depth > crate::input_limit::MAX_DEPTH {
                    return Err(format!(
                        "nested deeper than {} levels at offset {}",
                        crate::input_limit::MAX_DEPTH,
                        self.i
                    ));
                }
                let v = if self.peek() == Some(b'{') { self.dict() } else { self.list() };
                self.depth -= 1;
                v
            }
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

    /// A quoted string with every escape CPython's `repr()` writes: `\\ \' \" \n \r \t \a \b \f
    /// \v`, octal `\0`..`\777`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`, and a backslash-newline (a line
    /// continuation). `\N{NAME}` and any other escape are refused: guessing would silently
    /// change a password.
    fn string(&mut self) -> std::result::Result<String, String> {
        let q = self.b[self.i];
        let start = self.i;
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        while self.i < self.b.len() {
            let c = self.b[self.i];
            self.i += 1;
            if c == q {
                return String::from_utf8(out).map_err(|_| format!("string at offset {start} is not UTF-8"));
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let at = self.i - 1;
            let e = *self.b.get(self.i).ok_or("unfinished escape")?;
            self.i += 1;
            let ch: char = match e {
                b'\\' | b'\'' | b'"' => e as char,
                b'\n' => continue,
                b'n' => '\n',
                b't' => '\t',
                b'r' => '\r',
                b'a' => '\u{7}',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'v' => '\u{b}',
                b'0'..=b'7' => {
                    let mut v = u32::from(e - b'0');
                    for _ in 0..2 {
                        match self.b.get(self.i) {
                            Some(d @ b'0'..=b'7') => {
                                v = v * 8 + u32::from(d - b'0');
                                self.i += 1;
                            }
                            _ => break,
                        }
                    }
                    char::from_u32(v).ok_or_else(|| format!("bad octal escape at offset {at}"))?
                }
                b'x' => self.hex_escape(2, at)?,
                b'u' => self.hex_escape(4, at)?,
                b'U' => self.hex_escape(8, at)?,
                b'N' => return Err(format!("\\N{{...}} escape at offset {at} is not supported")),
                other => return Err(format!("unknown escape '\\{}' at offset {at}", (other as char).escape_debug())),
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
        Err("unterminated string".into())
    }

    /// `n` hex digits after `\x`, `\u` or `\U`, as one Unicode scalar value.
    fn hex_escape(&mut self, n: usize, at: usize) -> std::result::Result<char, String> {
        let digits = self.b.get(self.i..self.i + n).ok_or_else(|| format!("short escape at offset {at}"))?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!("bad hex escape at offset {at}"));
        }
        let v = u32::from_str_radix(std::str::from_utf8(digits).expect("hex digits are ASCII"), 16)
            .map_err(|_| format!("bad hex escape at offset {at}"))?;
        self.i += n;
        char::from_u32(v).ok_or_else(|| format!("escape at offset {at} is not a Unicode scalar value (U+{v:X})"))
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
        let e = parse(&json!({"masternode_ip": ["-oProxyCommand=x"], "masternode_username": "u"}), "vim").unwrap_err();
        assert!(e.to_string().contains("helm_info.masternode_ip"), "{e}");
        let e = parse(&json!({"masternode_ip": ["-x"], "masternode_username": "u"}), "vim").unwrap_err();
        assert!(e.to_string().contains("helm_info.masternode_ip"), "{e}");
        for user in ["-oProxyCommand=sh", "root;id", "a b", "u\nx"] {
            let e = parse(&json!({"masternode_ip": ["10.0.0.1"], "masternode_username": user}), "vim").unwrap_err();
            assert!(
                e.to_string().contains("helm_info.masternode_username") && e.to_string().contains("not a login name"),
                "{e}"
            );
        }
    }

    /// CPython is the reference: it writes `repr()` of dicts holding every escape class
    /// (quotes, backslashes, control characters, Latin-1, BMP, astral plane, non-printables)
    /// and the same values as JSON; our parser must read back every one exactly.
    #[test]
    fn round_trips_cpython_repr() {
        const GEN: &str = r#"
import json, random, sys
r = random.Random(9)
pools = [
    [chr(c) for c in range(32, 127)] + ["'", '"', "\\"] * 8,
    [chr(c) for c in range(0, 32)] + [chr(127)],
    [chr(c) for c in range(128, 256)],
    [chr(c) for c in range(0x100, 0xd800, 97)] + [chr(c) for c in range(0xe000, 0x10000, 89)],
    [chr(c) for c in range(0x10000, 0x110000, 997)] + ["\U0001F600", "\U000E0001", "\U0010FFFF"],
    ["\u2028", "\u00ad", "\ufeff", "\u200b", "\x85", "\xa0", "\x00", "\\N", "\\x", "\\U"],
]
def s():
    return "".join(r.choice(r.choice(pools)) for _ in range(r.randrange(0, 24)))
out = []
for i in range(int(sys.argv[1])):
    d = {"masternode_ip": ["10.0.0.%d" % (i % 250)], "masternode_username": s(), "masternode_password": s(), s(): [s(), (s(), None), i, True]}
    out.append([repr(d), d])
print(json.dumps(out))
"#;
        let n = 3000;
        let o = std::process::Command::new("python3")
            .args(["-c", GEN, &n.to_string()])
            .output()
            .expect("python3 (installed by scripts/test.sh) is needed for this test");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let cases: Vec<(String, Value)> = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(cases.len(), n);
        let mut wrong = Vec::new();
        for (repr, want) in &cases {
            match parse_python_literal(repr) {
                Ok(got) if &got == want => {}
                other => wrong.push(format!("{repr}\n  -> {other:?}")),
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {n} CPython reprs read back wrong, e.g.:\n{}",
            wrong.len(),
            wrong[..3.min(wrong.len())].join("\n")
        );
        // Every escape class was exercised.
        let all: String = cases.iter().map(|c| c.0.as_str()).collect();
        for esc in ["\\\\", "\\'", "\\n", "\\t", "\\r", "\\x", "\\u", "\\U", "\\\\N"] {
            assert!(all.contains(esc), "no {esc} in the generated reprs");
        }
    }

    #[test]
    fn escapes_python_writes_and_ones_it_does_not() {
        let p = |s: &str| parse_python_literal(s);
        assert_eq!(p(r"'\a\b\f\v\0\177\7\101x'").unwrap(), json!("\u{7}\u{8}\u{c}\u{b}\0\u{7f}\u{7}Ax"));
        assert_eq!(p(r"'\U0001f600\u00e9\x85'").unwrap(), json!("😀é\u{85}"));
        assert_eq!(p("'a\\\nb'").unwrap(), json!("ab"), "backslash-newline continues the line");
        for (bad, msg) in [
            (r"'\N{BULLET}'", "\\N{...} escape"),
            (r"'\q'", "unknown escape '\\q'"),
            (r"'\ud800'", "not a Unicode scalar value"),
            (r"'\U00110000'", "not a Unicode scalar value"),
            (r"'\xZZ'", "bad hex escape"),
            (r"'\U0001f6'", "short escape"),
            (r"'\u+0e9'", "bad hex escape"),
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for open in ["[", "{'a': ", "("] {
            let deep = open.repeat(1_000_000);
            let e = parse(&Value::String(deep), "vim").unwrap_err().to_string();
            assert!(e.contains("helm_info") && e.contains("nested deeper than 32 levels"), "{e}");
        }
        let ok =
            format!("{{'masternode_ip': {}'10.0.0.1'{}, 'masternode_username': 'u'}}", "[".repeat(20), "]".repeat(20));
        assert!(parse_python_literal(&ok).is_ok());
    }
}
