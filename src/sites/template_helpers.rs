//! The functions and filters our templates get beyond tera's own: addresses from a CIDR
//! (`nth_host`, `netmask`, `cidr_prefix`, `network_addr`, by `ipnet`), text shaped for the file
//! it lands in (`indent`, `json`, `yaml`, `quote`, `abspath`), and `inventory_secret`, which
//! turns a secret reference into the inventory's reference form. Tera's `get_env` is replaced by
//! an error: reading the environment would put secrets into files meant for git and diffs.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::{IpAdd, IpAddrRange, IpNet, Ipv6AddrRange};
use serde_json::Value;
use tera::Tera;

use crate::error::excerpt;
use crate::sites::lexical_path::clean;

type Args = HashMap<String, Value>;

/// Our functions and filters on `t`, and `get_env` replaced by an error.
pub fn register(t: &mut Tera) {
    // Reading the environment would put secrets into files that are meant for git and diffs.
    t.register_function("get_env", |_: &Args| -> tera::Result<Value> {
        Err("get_env is disabled: declare the secret under secrets: and write {{ secrets.NAME }} (a reference)".into())
    });
    t.register_function("nth_host", |a: &Args| {
        let cidr = arg_str(a, "cidr")?;
        let n = arg_int(a, "n")?;
        nth_host(&cidr, n).map(Value::String).map_err(Into::into)
    });
    t.register_filter("nth_host", |v: &Value, a: &Args| {
        nth_host(&value_str(v, "nth_host")?, arg_int(a, "n")?).map(Value::String).map_err(Into::into)
    });
    for (name, f) in [
        ("netmask", netmask as fn(&str) -> std::result::Result<Value, String>),
        ("cidr_prefix", |c: &str| cidr_prefix(c).map(Value::from)),
        ("network_addr", |c: &str| network_addr(c).map(Value::String)),
    ] {
        t.register_function(name, move |a: &Args| f(&arg_str(a, "cidr")?).map_err(Into::into));
        t.register_filter(name, move |v: &Value, _: &Args| f(&value_str(v, name)?).map_err(Into::into));
    }
    t.register_filter("indent", |v: &Value, a: &Args| {
        let n = match a.get("n") {
            None => 2,
            Some(x) => x.as_u64().filter(|n| *n <= 64).ok_or("indent: n= must be a number of spaces, 0..64")?,
        };
        let first = match a.get("first") {
            None => false,
            Some(x) => x.as_bool().ok_or("indent: first= must be true or false")?,
        };
        Ok(Value::String(indent(&value_str(v, "indent")?, n as usize, first)))
    });
    t.register_filter("json", |v: &Value, _: &Args| Ok(Value::String(json_literal(v))));
    t.register_filter("yaml", |v: &Value, a: &Args| {
        let block = match a.get("block") {
            None => false,
            Some(x) => x.as_bool().ok_or("yaml: block= must be true or false")?,
        };
        Ok(Value::String(if block { yaml_block(v, 0) } else { yaml_literal(v) }))
    });
    t.register_filter("abspath", |v: &Value, a: &Args| {
        let p = value_str(v, "abspath")?;
        let base = arg_str(a, "base")?;
        if p.is_empty() {
            return Err("abspath: the path is empty".into());
        }
        Ok(Value::String(clean(&Path::new(&base).join(p)).display().to_string()))
    });
    t.register_filter("quote", |v: &Value, _: &Args| {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => v.to_string(),
            _ => return Err("quote: takes a string, number or boolean".into()),
        };
        crate::quote::quote(&s).map(Value::String).map_err(|e| tera::Error::msg(format!("quote: {e}")))
    });
    t.register_filter("inventory_secret", |v: &Value, a: &Args| {
        let key = match a.get("key") {
            None => "password".to_string(),
            Some(Value::String(k)) => k.clone(),
            Some(_) => return Err("inventory_secret: key= must be a string".into()),
        };
        inventory_secret(&value_str(v, "inventory_secret")?, &key).map(Value::String).map_err(Into::into)
    });
}

fn arg_str(a: &Args, name: &str) -> tera::Result<String> {
    match a.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{name}= must be a string").into()),
        None => Err(format!("{name}= is required").into()),
    }
}

fn arg_int(a: &Args, name: &str) -> tera::Result<i64> {
    match a.get(name) {
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        // A CSV or a computed value may hand a number as text.
        Some(Value::String(s)) => {
            s.trim().parse().map_err(|_| format!("{name}= '{}' is not a whole number", excerpt(s)).into())
        }
        Some(_) => Err(format!("{name}= must be a whole number").into()),
        None => Err(format!("{name}= is required").into()),
    }
}

fn value_str(v: &Value, filter: &str) -> tera::Result<String> {
    v.as_str().map(str::to_string).ok_or_else(|| format!("{filter}: takes a string").into())
}

/// The network of `a.b.c.d/p` or `x::y/p` (a prefix is required: a bare address would silently
/// mean /32). The text is checked here only to word the errors; the network is `ipnet`'s.
fn parse_cidr(cidr: &str) -> std::result::Result<IpNet, String> {
    let bad = || format!("'{}' is not a CIDR (address/prefix, as 10.20.1.0/24)", excerpt(cidr));
    let (a, p) = cidr.trim().split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) || p.len() > 3 {
        return Err(bad());
    }
    let prefix: u32 = p.parse().map_err(|_| bad())?;
    let past = || format!("'{}': the prefix is past /{}", excerpt(cidr), if addr.is_ipv4() { 32 } else { 128 });
    let prefix = u8::try_from(prefix).map_err(|_| past())?;
    IpNet::new(addr, prefix).map_err(|_| past())
}

/// The hosts of `net`, in order. IPv4: `ipnet`'s, without the network and broadcast addresses
/// except in a /31 or /32, whose addresses are all hosts (RFC 3021). IPv6 has no broadcast, but
/// its network address (the subnet-router anycast) is not a host either, unless it is a /128's
/// only address.
fn hosts(net: &IpNet) -> IpAddrRange {
    match net {
        IpNet::V4(n) => IpAddrRange::V4(n.hosts()),
        IpNet::V6(n) if n.prefix_len() == 128 => IpAddrRange::V6(n.hosts()),
        IpNet::V6(n) => IpAddrRange::V6(Ipv6AddrRange::new(n.network().saturating_add(1), n.broadcast())),
    }
}

/// The n-th host of the network: `nth_host("10.20.1.0/24", 1)` is 10.20.1.1, `-1` the last host
/// (10.20.1.254); which addresses are hosts: [`hosts`].
pub fn nth_host(cidr: &str, n: i64) -> std::result::Result<String, String> {
    let net = parse_cidr(cidr)?;
    let mut all = hosts(&net);
    // `nth` and `nth_back` are arithmetic in `ipnet`, not a walk.
    let found = match n {
        1.. => usize::try_from(n - 1).ok().and_then(|i| all.nth(i)),
        ..=-1 => usize::try_from(n.unsigned_abs() - 1).ok().and_then(|i| all.nth_back(i)),
        0 => return Err("n=0: hosts are counted from 1 (and -1 is the last)".to_string()),
    };
    found.map(|a| a.to_string()).ok_or_else(|| {
        // Past the end: the network has at most |n| <= 2^63 hosts, so they count in a usize.
        let count = hosts(&net).count();
        let (addr, prefix) = (net.network(), net.prefix_len());
        format!("n={n} is past the hosts of {addr}/{prefix} ({count} hosts: n=1..{count} or -1..-{count})")
    })
}

/// The IPv4 netmask of a CIDR (`/24` → `255.255.255.0`); IPv6 has none.
pub fn netmask(cidr: &str) -> std::result::Result<Value, String> {
    match parse_cidr(cidr)? {
        IpNet::V4(n) => Ok(Value::String(n.netmask().to_string())),
        IpNet::V6(_) => Err(format!("'{}' is IPv6, which has no netmask; use cidr_prefix", excerpt(cidr))),
    }
}

pub fn cidr_prefix(cidr: &str) -> std::result::Result<u32, String> {
    parse_cidr(cidr).map(|n| u32::from(n.prefix_len()))
}

/// The network address of a CIDR (`10.20.1.7/24` → `10.20.1.0`).
pub fn network_addr(cidr: &str) -> std::result::Result<String, String> {
    parse_cidr(cidr).map(|n| n.network().to_string())
}

/// Every line but the first (unless `first`) indented by `n` spaces; blank lines stay empty
/// (trailing spaces would change a YAML block scalar).
pub fn indent(s: &str, n: usize, first: bool) -> String {
    let pad = " ".repeat(n);
    let mut out = String::with_capacity(s.len() + n * 8);
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if (i > 0 || first) && !line.is_empty() {
            out.push_str(&pad);
        }
        out.push_str(line);
    }
    out
}

/// A JSON literal of `v` (a string gets its quotes and escapes).
pub fn json_literal(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A YAML scalar or flow collection of `v` that a YAML 1.1 or 1.2 parser reads back as exactly
/// `v`: a string stays plain only when it cannot be read as anything else (`yes`, `1.0`,
/// `null`, `0x1`, `a: b` are quoted); everything else is JSON, which YAML reads as flow.
pub fn yaml_literal(v: &Value) -> String {
    match v {
        Value::String(s) if yaml_plain_ok(s) => s.clone(),
        _ => json_literal(v),
    }
}

/// `v` as block YAML (`key: value` lines, `- item` lists), for a values file a person reads;
/// scalars as [`yaml_literal`]. No trailing newline.
pub fn yaml_block(v: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = yaml_literal(&Value::String(k.clone()));
                match x {
                    Value::Object(n) if !n.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n{}\n", yaml_block(x, indent + 2)));
                    }
                    Value::Array(n) if !n.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n{}\n", yaml_block(x, indent + 2)));
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", yaml_literal(x))),
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for x in a {
                // The item as a block two columns further in, its first indent turned into "- ".
                let inner = yaml_block(x, indent + 2);
                let first = inner.get(indent + 2..).unwrap_or_default();
                out.push_str(&format!("{pad}- {first}\n"));
            }
        }
        _ => return format!("{pad}{}", yaml_literal(v)),
    }
    out.pop();
    out
}

fn yaml_plain_ok(s: &str) -> bool {
    const WORDS: [&str; 13] = ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf", "~", ""];
    let lower = s.to_ascii_lowercase();
    s.len() <= 1024
        && s.bytes().next().is_some_and(|c| c.is_ascii_alphabetic() || c == b'/')
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
        && !WORDS.contains(&lower.as_str())
}

/// `@env:VAR` → `password_env: VAR`, `@file:PATH` → `password_file: "PATH"` (with `key=` for
/// another inventory field, e.g. `become_password`): the inventory's reference forms.
pub fn inventory_secret(marker: &str, key: &str) -> std::result::Result<String, String> {
    const KEYS: [&str; 3] = ["password", "become_password", "identity_passphrase"];
    if !KEYS.contains(&key) {
        return Err(format!("inventory_secret: key= '{}' is not one of {}", excerpt(key), KEYS.join(", ")));
    }
    if let Some(var) = marker.strip_prefix("@env:") {
        Ok(format!("{key}_env: {}", yaml_literal(&Value::String(var.into()))))
    } else if let Some(path) = marker.strip_prefix("@file:") {
        Ok(format!("{key}_file: {}", json_literal(&Value::String(path.into()))))
    } else {
        Err("inventory_secret: takes a secret reference (secrets.NAME), not a value".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nth_host_counts_hosts_and_refuses_past_the_broadcast() {
        assert_eq!(nth_host("10.20.1.0/24", 1).unwrap(), "10.20.1.1");
        assert_eq!(nth_host("10.20.1.77/24", 100).unwrap(), "10.20.1.100");
        assert_eq!(nth_host("10.20.1.0/24", 254).unwrap(), "10.20.1.254");
        assert_eq!(nth_host("10.20.1.0/24", -1).unwrap(), "10.20.1.254");
        assert_eq!(nth_host("10.20.1.0/24", -254).unwrap(), "10.20.1.1");
        assert_eq!(nth_host("10.0.0.0/8", 65536).unwrap(), "10.1.0.0");
        assert_eq!(nth_host("10.0.0.4/31", 2).unwrap(), "10.0.0.5");
        assert_eq!(nth_host("10.0.0.4/32", 1).unwrap(), "10.0.0.4");
        assert_eq!(nth_host("0.0.0.0/0", 1).unwrap(), "0.0.0.1");
        let e = nth_host("10.20.1.0/24", 255).unwrap_err();
        assert_eq!(e, "n=255 is past the hosts of 10.20.1.0/24 (254 hosts: n=1..254 or -1..-254)");
        assert!(nth_host("10.20.1.0/24", -255).is_err());
        assert!(nth_host("10.20.1.0/30", 3).is_err());
        assert!(nth_host("10.0.0.4/32", 2).is_err());
        assert!(nth_host("10.20.1.0/24", 0).unwrap_err().contains("counted from 1"));
        // IPv6: no broadcast; the network address is not a host.
        assert_eq!(nth_host("fd00:1::/64", 1).unwrap(), "fd00:1::1");
        assert_eq!(nth_host("fd00:1::/64", 256).unwrap(), "fd00:1::100");
        assert_eq!(nth_host("fd00:1::/126", 3).unwrap(), "fd00:1::3");
        assert!(nth_host("fd00:1::/126", 4).is_err());
        assert_eq!(nth_host("fd00:1::/64", -1).unwrap(), "fd00:1::ffff:ffff:ffff:ffff");
        assert_eq!(nth_host("::/0", 1).unwrap(), "::1");
        for bad in ["10.20.1.0", "10.20.1.0/33", "10.20.1/24", "x/24", "10.20.1.0/", "10.20.1.0/+4", "fd00::/129", ""] {
            assert!(nth_host(bad, 1).is_err(), "{bad}");
        }
        assert_eq!(nth_host("10.1.0.0/33", 1).unwrap_err(), "'10.1.0.0/33': the prefix is past /32");
    }

    #[test]
    fn netmask_prefix_network() {
        assert_eq!(netmask("10.20.1.0/24").unwrap(), "255.255.255.0");
        assert_eq!(netmask("10.0.0.0/0").unwrap(), "0.0.0.0");
        assert_eq!(netmask("10.0.0.0/32").unwrap(), "255.255.255.255");
        assert_eq!(netmask("10.0.0.0/20").unwrap(), "255.255.240.0");
        assert!(netmask("fd00::/64").unwrap_err().contains("IPv6"));
        assert!(netmask("nope").is_err());
        assert_eq!(cidr_prefix("10.0.0.0/20").unwrap(), 20);
        assert_eq!(cidr_prefix("fd00::/56").unwrap(), 56);
        assert!(cidr_prefix("10.0.0.0").is_err());
        assert_eq!(network_addr("10.20.1.77/24").unwrap(), "10.20.1.0");
        assert_eq!(network_addr("10.20.1.77/32").unwrap(), "10.20.1.77");
        assert_eq!(network_addr("fd00:1:2:3:4::9/64").unwrap(), "fd00:1:2:3::");
        assert!(network_addr("10.20.1.277/24").is_err());
    }

    #[test]
    fn indent_json_yaml() {
        assert_eq!(indent("a\nb\n\nc", 2, false), "a\n  b\n\n  c");
        assert_eq!(indent("a\nb", 4, true), "    a\n    b");
        assert_eq!(json_literal(&json!("a\"b\n")), r#""a\"b\n""#);
        assert_eq!(json_literal(&json!({"a": [1, true]})), r#"{"a":[1,true]}"#);
        for (v, want) in [
            (json!("plain-name.v1"), "plain-name.v1"),
            (json!("/opt/x"), "/opt/x"),
            (json!("yes"), "\"yes\""),
            (json!("No"), "\"No\""),
            (json!("1.31"), "\"1.31\""),
            (json!("0x1"), "\"0x1\""),
            (json!("a: b"), "\"a: b\""),
            (json!("#x"), "\"#x\""),
            (json!(""), "\"\""),
            (json!("null"), "\"null\""),
            (json!(3), "3"),
            (json!(null), "null"),
            (json!(["a", {"b": "c d"}]), r#"["a",{"b":"c d"}]"#),
        ] {
            let got = yaml_literal(&v);
            assert_eq!(got, want, "{v}");
            // And YAML reads it back as the same value.
            let back: Value = yaml_serde::from_str(&format!("k: {got}\n")).unwrap();
            assert_eq!(back["k"], v, "{got}");
        }
    }

    #[test]
    fn yaml_blocks_read_back_as_the_same_value() {
        let v = json!({"replicaCount": 2, "image": {"repository": "nginx", "tag": "1.27"}, "list": ["a", {"b": 1, "c": [true, null]}, []],
                       "empty": {}, "yes": "no", "nested": [[1, 2], ["x"]]});
        let text = yaml_block(&v, 0);
        assert!(text.starts_with("replicaCount: 2\nimage:\n  repository: nginx\n  tag: \"1.27\"\nlist:\n  - a\n  - b: 1\n    c:\n      - true\n"), "{text}");
        let back: Value = yaml_serde::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert_eq!(yaml_block(&json!("x y"), 0), "\"x y\"");
        assert_eq!(yaml_block(&json!({}), 0), "{}");
    }

    #[test]
    fn inventory_secret_forms() {
        assert_eq!(inventory_secret("@env:EDGE_PW", "password").unwrap(), "password_env: EDGE_PW");
        assert_eq!(inventory_secret("@file:/s/pw", "become_password").unwrap(), "become_password_file: \"/s/pw\"");
        assert!(inventory_secret("hunter2", "password").unwrap_err().contains("not a value"));
        assert!(inventory_secret("@env:X", "user").is_err());
    }
}
