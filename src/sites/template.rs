//! The template environment: every `*.tera` file of a templates folder, rendered for one site
//! into the files of the same relative path without `.tera`. Strict: a variable the context
//! lacks is an error naming the site, the template file and the line. Autoescape is off (the
//! outputs are YAML and JSON, not HTML); values are quoted on purpose with the `json`, `yaml`
//! and `quote` filters. The helpers an operator needs for addresses (`nth_host`, `netmask`,
//! `cidr_prefix`, `network_addr`) are ours, tested here.
//!
//! Secrets: the context's `secrets.NAME` is the reference marker (`@env:VAR` / `@file:PATH`),
//! never the value, and tera's `get_env` is replaced by an error, so no template can read the
//! process environment into a file. A rendered JSON/YAML file is also scanned for a literal
//! under a secret-looking key (a password typed into a template) and refused.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Map, Value};
use tera::Tera;

use crate::error::{excerpt, Error, Result};
use crate::input_limit::{read_capped, REQUEST_MAX_BYTES};
use crate::secret::{is_secret_name, is_secret_string};
use crate::sites::catalogue::{Catalogue, Site};

/// More template files than this in one folder is a mistake (a wrong `templates:` path).
const MAX_TEMPLATES: usize = 1000;
/// Files named like this are only for `{% include %}` / `{% import %}`, never rendered alone.
const PARTIAL_PREFIX: char = '_';

/// A templates folder, parsed once and rendered for many sites.
pub struct Templates {
    /// The folder as shown in messages (lexically cleaned: `a/../b` shown as `b`).
    shown: PathBuf,
    tera: Tera,
    /// Template name (path under the folder, `/`-separated) → its source, for line lookups.
    sources: BTreeMap<String, String>,
    /// Templates that produce a file, and the file's path under the site's folder.
    outputs: Vec<(String, PathBuf)>,
}

impl Templates {
    /// Read every `*.tera` under `dir` (symlinked folders are not followed). Parse errors name
    /// the file and line.
    pub fn load(dir: &Path) -> Result<Templates> {
        let shown = clean(dir);
        let mut files = Vec::new();
        walk(dir, Path::new(""), &mut files).map_err(|m| Error::input(shown.display().to_string(), "templates", m))?;
        files.sort();
        if files.is_empty() {
            return Err(Error::input(shown.display().to_string(), "templates", "holds no *.tera file"));
        }
        let mut sources = BTreeMap::new();
        let mut outputs = Vec::new();
        for rel in files {
            let name = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            let text = read_capped(&dir.join(&rel), REQUEST_MAX_BYTES, "template")?;
            let out = rel.with_extension("");
            let stem = rel.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
            if !stem.starts_with(PARTIAL_PREFIX) {
                if out == Path::new("site.json") {
                    return Err(Error::input(
                        shown.join(&rel).display().to_string(),
                        "template",
                        "site.json is written by render itself; rename this template",
                    ));
                }
                outputs.push((name.clone(), out));
            }
            sources.insert(name, text);
        }
        let mut tera = Tera::default();
        tera.autoescape_on(vec![]);
        register_helpers(&mut tera);
        tera.add_raw_templates(sources.iter().map(|(n, t)| (n.as_str(), t.as_str()))).map_err(|e| {
            let (name, line) = parse_error_at(&e, &sources);
            let at = match line {
                Some(l) => format!("{}:{l}", shown.join(&name).display()),
                None => shown.join(&name).display().to_string(),
            };
            Error::input(at, "template", chain(&e))
        })?;
        Ok(Templates { shown, tera, sources, outputs })
    }

    /// Relative paths of the files a site gets (in name order).
    pub fn outputs(&self) -> impl Iterator<Item = &Path> {
        self.outputs.iter().map(|(_, p)| p.as_path())
    }

    /// Render every output for `site` with `ctx` (see [`context`]). Errors:
    /// `site par1: templates/edge/inventory.yaml.tera:12: Variable `network` not found ...`.
    pub fn render(&self, site: &str, ctx: &Value) -> Result<Vec<(PathBuf, String)>> {
        let tctx = tera::Context::from_value(ctx.clone())
            .map_err(|e| Error::input(format!("site {site}"), "context", chain(&e)))?;
        let mut out = Vec::with_capacity(self.outputs.len());
        for (name, rel) in &self.outputs {
            let text = self.tera.render(name, &tctx).map_err(|e| {
                let (tname, line) = self.render_error_at(name, &e);
                let file = self.shown.join(&tname).display().to_string();
                let field = line.map_or(file.clone(), |l| format!("{file}:{l}"));
                Error::input(format!("site {site}"), field, chain(&e))
            })?;
            scan_for_secrets(rel, &text)
                .map_err(|(line, m)| Error::input(format!("site {site}"), format!("{}{line}", rel.display()), m))?;
            out.push((rel.clone(), text));
        }
        Ok(out)
    }

    /// The template and line a render error comes from. Tera's render errors carry no line,
    /// so the line is the first one of the template that uses the missing variable or the
    /// failing function/filter inside a tag: exact for the usual case (a variable used once,
    /// or first used where it fails).
    fn render_error_at(&self, top: &str, e: &tera::Error) -> (String, Option<usize>) {
        let msgs = messages(e);
        // The innermost "while rendering 'x'" names an included template, when one failed.
        let tname = msgs
            .iter()
            .rev()
            .find_map(|m| between(m, "while rendering '", "'"))
            .filter(|n| self.sources.contains_key(*n))
            .unwrap_or(top)
            .to_string();
        let needle = msgs.iter().find_map(|m| {
            between(m, "Variable `", "`")
                .or_else(|| between(m, "Function call '", "'"))
                .or_else(|| between(m, "Filter call '", "'"))
                .or_else(|| between(m, "Test call '", "'"))
        });
        let Some(n) = needle else { return (tname, None) };
        // A path such as `vars.a.b` or `x[0]`: look for its whole text first, then its root; in
        // the template, then in the templates it includes (tera names only the outer one).
        let root = n.split(['.', '[']).next().unwrap_or(n);
        let mut candidates = vec![tname.clone()];
        let mut i = 0;
        while i < candidates.len() && candidates.len() < 64 {
            if let Some(src) = self.sources.get(&candidates[i]) {
                for inc in includes(src) {
                    if self.sources.contains_key(&inc) && !candidates.contains(&inc) {
                        candidates.push(inc);
                    }
                }
            }
            i += 1;
        }
        for c in &candidates {
            if let Some(line) = self.sources.get(c).and_then(|src| line_of(src, n).or_else(|| line_of(src, root))) {
                return (c.clone(), Some(line));
            }
        }
        (tname, None)
    }
}

/// Where in `src` (1-based line) `word` first appears as a whole word inside `{{ }}`/`{% %}`.
fn line_of(src: &str, word: &str) -> Option<usize> {
    let mut in_tag = false;
    let bytes = src.as_bytes();
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            line += 1;
        } else if !in_tag && (src[i..].starts_with("{{") || src[i..].starts_with("{%")) {
            in_tag = true;
            i += 2;
            continue;
        } else if in_tag && (src[i..].starts_with("}}") || src[i..].starts_with("%}")) {
            in_tag = false;
        } else if in_tag && matches!(bytes[i], b'"' | b'\'' | b'`') {
            // A string literal in a tag is text, not a use of a name.
            let q = bytes[i];
            let end = src[i + 1..].find(q as char).map_or(src.len(), |e| i + 1 + e);
            line += src[i..end].matches('\n').count();
            i = end + 1;
            continue;
        } else if in_tag && src[i..].starts_with(word) {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + word.len()).copied();
            let ident = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
            let before_ok = !ident(before) && before != Some(b'.');
            if before_ok && !ident(after) {
                return Some(line);
            }
        }
        i += src[i..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The templates `src` names in `{% include "x" %}` tags.
fn includes(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("include") {
        rest = &rest[i + "include".len()..];
        let t = rest.trim_start();
        if let Some(q) = t.chars().next().filter(|c| *c == '"' || *c == '\'') {
            if let Some(end) = t[1..].find(q) {
                out.push(t[1..1 + end].to_string());
            }
        }
    }
    out
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &s[s.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
}

/// The error's own message and its sources', outermost first.
fn messages(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out
}

/// One line for an operator: tera's "Failed to render 'x'" wrapper dropped (the file is named
/// already), the causes joined.
fn chain(e: &tera::Error) -> String {
    let msgs = messages(e);
    let useful: Vec<&str> = msgs
        .iter()
        .map(|m| m.trim())
        .filter(|m| !m.starts_with("Failed to render '") && !m.starts_with("Failed to parse '"))
        .collect();
    let text = if useful.is_empty() { msgs.join(": ") } else { useful.join(": ") };
    text.split('\n').map(str::trim_end).filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(" ")
}

/// The template a parse error is in, and the line pest reports (` --> 12:5`).
fn parse_error_at(e: &tera::Error, sources: &BTreeMap<String, String>) -> (String, Option<usize>) {
    let msgs = messages(e);
    let name = msgs
        .iter()
        .find_map(|m| between(m, "Failed to parse '", "'"))
        .or_else(|| msgs.iter().find_map(|m| between(m, "template '", "'")))
        .filter(|n| sources.contains_key(*n))
        .unwrap_or_default()
        .to_string();
    let line = msgs.iter().find_map(|m| {
        let rest = &m[m.find("--> ")? + 4..];
        rest.split(':').next()?.trim().parse::<usize>().ok()
    });
    (name, line)
}

/// `dir` without `.` and with `x/..` folded (lexically: for messages and for paths shown in
/// rendered files; a `..` after a symlink would be folded wrongly, which the catalogue's own
/// folder, made canonical, never has).
pub fn clean(dir: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in dir.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::result::Result<(), String> {
    let here = root.join(rel);
    let rd = std::fs::read_dir(&here).map_err(|e| format!("cannot read {}: {e}", here.display()))?;
    for entry in rd {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", here.display()))?;
        let ty = entry.file_type().map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
        let name = entry.file_name();
        let r = rel.join(&name);
        if ty.is_dir() {
            walk(root, &r, out)?;
        } else if name.to_string_lossy().ends_with(".tera")
            && (ty.is_file() || ty.is_symlink() && entry.path().is_file())
        {
            if name.to_str().is_none() {
                return Err(format!("{}: file names must be UTF-8", r.display()));
            }
            out.push(r);
            if out.len() > MAX_TEMPLATES {
                return Err(format!("more than {MAX_TEMPLATES} templates; is templates: the right folder?"));
            }
        }
    }
    Ok(())
}

/// The context one site's templates see: every variable (defaults deep-merged with the
/// site's), `site` (name, index, labels), `secrets` (name → `@env:VAR` / `@file:PATH`) and
/// `catalogue.dir` (the catalogue's folder, absolute: relative paths in variables are meant from
/// there, and a rendered inventory lives elsewhere; see the `abspath` filter).
pub fn context(cat: &Catalogue, site: &Site, index: usize) -> Value {
    let mut m = cat.vars_of(site);
    m.insert("site".into(), json!({"name": site.name, "index": index, "labels": site.labels}));
    let secrets: Map<String, Value> = cat.secrets.iter().map(|(k, r)| (k.clone(), Value::String(r.marker()))).collect();
    m.insert("secrets".into(), Value::Object(secrets));
    let dir = cat.file.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = std::fs::canonicalize(&dir).or_else(|_| std::env::current_dir().map(|c| c.join(&dir))).unwrap_or(dir);
    m.insert("catalogue".into(), json!({"dir": dir.display().to_string()}));
    Value::Object(m)
}

// ---------------------------------------------------------------------------------------------
// Helpers.

type Args = HashMap<String, Value>;

fn register_helpers(t: &mut Tera) {
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

/// An address and prefix length parsed from `a.b.c.d/p` or `x::y/p` (a prefix is required:
/// a bare address would silently mean /32).
fn parse_cidr(cidr: &str) -> std::result::Result<(IpAddr, u32), String> {
    let bad = || format!("'{}' is not a CIDR (address/prefix, as 10.20.1.0/24)", excerpt(cidr));
    let (a, p) = cidr.trim().split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) || p.len() > 3 {
        return Err(bad());
    }
    let prefix: u32 = p.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(format!("'{}': the prefix is past /{max}", excerpt(cidr)));
    }
    Ok((addr, prefix))
}

fn bits(addr: IpAddr) -> (u128, u32) {
    match addr {
        IpAddr::V4(a) => (u32::from(a) as u128, 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    }
}

fn mask(prefix: u32, width: u32) -> u128 {
    let all = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
    if prefix == 0 {
        0
    } else {
        all & !((1u128 << (width - prefix)) - 1).min(all)
    }
}

fn from_bits(v: u128, width: u32) -> IpAddr {
    if width == 32 {
        IpAddr::V4(Ipv4Addr::from(v as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(v))
    }
}

/// The n-th host of the network: `nth_host("10.20.1.0/24", 1)` is 10.20.1.1, `-1` the last host
/// (10.20.1.254). IPv4 excludes the network and broadcast addresses (except /31 and /32, whose
/// addresses are all hosts, RFC 3021); IPv6 counts from the network address, which is not a host.
pub fn nth_host(cidr: &str, n: i64) -> std::result::Result<String, String> {
    let (addr, prefix) = parse_cidr(cidr)?;
    let (v, width) = bits(addr);
    let net = v & mask(prefix, width);
    let size: u128 = if width - prefix >= 128 { u128::MAX } else { 1u128 << (width - prefix) };
    // First and last host offsets inside the network.
    let (first, last) = match (width, width - prefix) {
        (32, 0) => (0, 0),
        (32, 1) => (0, 1),
        (32, _) => (1, size - 2),
        (_, 0) => (0, 0),
        _ => (1, size - 1),
    };
    let count = last - first + 1;
    let off = if n > 0 && (n as u128) <= count {
        first + (n as u128 - 1)
    } else if n < 0 && n.unsigned_abs() as u128 <= count {
        last + 1 - n.unsigned_abs() as u128
    } else {
        let net_s = from_bits(net, width);
        return Err(if n == 0 {
            "n=0: hosts are counted from 1 (and -1 is the last)".to_string()
        } else {
            format!("n={n} is past the hosts of {net_s}/{prefix} ({count} hosts: n=1..{count} or -1..-{count})")
        });
    };
    Ok(from_bits(net + off, width).to_string())
}

/// The IPv4 netmask of a CIDR (`/24` → `255.255.255.0`); IPv6 has none.
pub fn netmask(cidr: &str) -> std::result::Result<Value, String> {
    let (addr, prefix) = parse_cidr(cidr)?;
    if addr.is_ipv6() {
        return Err(format!("'{}' is IPv6, which has no netmask; use cidr_prefix", excerpt(cidr)));
    }
    Ok(Value::String(from_bits(mask(prefix, 32), 32).to_string()))
}

pub fn cidr_prefix(cidr: &str) -> std::result::Result<u32, String> {
    parse_cidr(cidr).map(|(_, p)| p)
}

/// The network address of a CIDR (`10.20.1.7/24` → `10.20.1.0`).
pub fn network_addr(cidr: &str) -> std::result::Result<String, String> {
    let (addr, prefix) = parse_cidr(cidr)?;
    let (v, width) = bits(addr);
    Ok(from_bits(v & mask(prefix, width), width).to_string())
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

// ---------------------------------------------------------------------------------------------
// The rendered-file scan.

/// A rendered `.json`/`.yaml`/`.yml` file must parse, and hold no literal secret: a value under
/// a secret-looking key is a reference (`@env:`/`@file:`, or a key ending `_env`/`_file`, the
/// inventory's forms), and no string is a URL with a password or `db.password=literal`.
/// `Err((":LINE" or "", message))`; the message never shows the value.
fn scan_for_secrets(rel: &Path, text: &str) -> std::result::Result<(), (String, String)> {
    let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or_default();
    let doc: Value = match ext {
        "json" => serde_json::from_str(text)
            .map_err(|e| (format!(":{}", e.line()), format!("not JSON after rendering: {e}")))?,
        "yaml" | "yml" => {
            crate::inventory::yaml_limits::check(text).map_err(|m| (String::new(), m))?;
            yaml_serde::from_str(text).map_err(|e| {
                let line = e.location().map(|l| format!(":{}", l.line())).unwrap_or_default();
                (line, format!("not YAML after rendering: {e}"))
            })?
        }
        _ => return Ok(()),
    };
    let mut path = String::new();
    literal_secret(&doc, Under::Plain, &mut path).map_or(Ok(()), |p| {
        Err((String::new(), format!("{p}: a literal secret in a rendered file; use a secrets: reference")))
    })
}

fn is_reference(s: &str) -> bool {
    s.starts_with("@env:") || s.starts_with("@file:") || s.is_empty()
}

/// How a value is to be read in the scan.
#[derive(Clone, Copy, PartialEq)]
enum Under {
    /// Nothing special: only URLs with a password and `secret.name=literal` are secrets.
    Plain,
    /// A secret-looking key: the value must be a reference.
    SecretKey,
    /// `helmsecretparameter`: every item is `name=VALUE` with VALUE a reference.
    SecretItems,
}

/// The JSON path of the first literal secret in `v`, if any.
fn literal_secret(v: &Value, under: Under, path: &mut String) -> Option<String> {
    let here = |path: &str| if path.is_empty() { "$".to_string() } else { path.trim_start_matches('.').to_string() };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let kk = k.to_ascii_lowercase();
                let next = if kk.ends_with("secretparameter") {
                    Under::SecretItems
                } else if kk.ends_with("_env") || kk.ends_with("_file") {
                    // The inventory's reference forms (`password_env: VAR`) name, not hold.
                    Under::Plain
                } else if under != Under::Plain || is_secret_name(k) {
                    Under::SecretKey
                } else {
                    Under::Plain
                };
                if let Some(p) = literal_secret(x, next, path) {
                    return Some(p);
                }
                path.truncate(len);
            }
            None
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                if let Some(p) = literal_secret(x, under, path) {
                    return Some(p);
                }
                path.truncate(len);
            }
            None
        }
        Value::String(s) => {
            // `name=@env:VAR` (a helmparameter taking its value from a reference).
            let item_ref = s.split_once('=').is_some_and(|(_, val)| is_reference(val));
            let bad = match under {
                Under::SecretKey => !is_reference(s),
                Under::SecretItems => !item_ref,
                Under::Plain => is_secret_string(s) && !item_ref,
            };
            bad.then(|| here(path))
        }
        Value::Null | Value::Bool(_) => None,
        Value::Number(_) => (under != Under::Plain).then(|| here(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn tpl(files: &[(&str, &str)]) -> (tempfile::TempDir, std::result::Result<Templates, String>) {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in files {
            let p = d.path().join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        }
        let t = Templates::load(d.path()).map_err(|e| e.to_string());
        (d, t)
    }

    #[test]
    fn renders_with_helpers_and_strict_variables() {
        let (d, t) = tpl(&[
            ("a.yaml.tera", "name: {{ site.name }}\nvip: {{ nth_host(cidr=network, n=100) }}\nmask: {{ network | netmask }}\np: {{ network | cidr_prefix }}\nnet: {{ network_addr(cidr=network) }}\nx: {{ x | yaml }}\n"),
            ("cmd.sh.tera", "run {{ cmd | quote }} {{ 3 | quote }}\n"),
            ("sub/b.json.tera", "{\"x\": {{ x | json }}, \"h\": {{ network | nth_host(n=-1) | json }}}\n{% include \"_part.tera\" %}"),
            ("_part.tera", ""),
            ("README.md", "not a template"),
        ]);
        let t = t.unwrap();
        let outs: Vec<_> = t.outputs().map(|p| p.display().to_string()).collect();
        assert_eq!(outs, ["a.yaml", "cmd.sh", "sub/b.json"]);
        let ctx = json!({"site": {"name": "par1", "index": 0, "labels": {}}, "network": "10.20.1.0/24", "cmd": "a b'c", "x": "yes", "secrets": {}});
        let files = t.render("par1", &ctx).unwrap();
        assert_eq!(
            files[0].1,
            "name: par1\nvip: 10.20.1.100\nmask: 255.255.255.0\np: 24\nnet: 10.20.1.0\nx: \"yes\"\n"
        );
        assert_eq!(files[1].1, "run 'a b'\\''c' 3\n");
        assert_eq!(files[2].1, "{\"x\": \"yes\", \"h\": \"10.20.1.254\"}\n");
        drop(d);
    }

    #[test]
    fn errors_name_site_template_file_and_line() {
        let (d, t) = tpl(&[
            ("inventory.yaml.tera", "a: 1\n\nb: {{ site.name }}\nc: {{ nework }}\n"),
            ("x.json.tera", "{\"v\": {{ nth_host(cidr=\"10.0.0.0/30\", n=9) | json }}}\n"),
        ]);
        let t = t.unwrap();
        let root = d.path().display().to_string();
        let ctx = json!({"site": {"name": "par1", "index": 0, "labels": {}}, "secrets": {}});
        let e = t.render("par1", &ctx).unwrap_err().to_string();
        assert!(e.starts_with(&format!("site par1: {root}/inventory.yaml.tera:4: Variable `nework` not found")), "{e}");
        let (d2, t2) = tpl(&[("x.json.tera", "{\n\"v\": {{ nth_host(cidr=\"10.0.0.0/30\", n=9) | json }}}\n")]);
        let e = t2.unwrap().render("par1", &ctx).unwrap_err().to_string();
        let root2 = d2.path().display().to_string();
        assert!(
            e.starts_with(&format!("site par1: {root2}/x.json.tera:2: Function call 'nth_host' failed: n=9 is past")),
            "{e}"
        );
        // A parse error: file and line.
        let (d3, t3) = tpl(&[("ok.tera", "x"), ("bad.yaml.tera", "a\nb: {{ x \nc: {% if %}\n")]);
        let e = t3.err().unwrap();
        let root3 = d3.path().display().to_string();
        assert!(e.starts_with(&format!("{root3}/bad.yaml.tera:")), "{e}");
        assert!(e.contains(": template: "), "{e}");
        // A rendered file that is not JSON.
        let (_d4, t4) = tpl(&[("x.json.tera", "{\n\"a\": {{ v }}\n}\n")]);
        let e = t4.unwrap().render("s", &json!({"v": "unquoted"})).unwrap_err().to_string();
        assert!(e.starts_with("site s: x.json:2: not JSON after rendering"), "{e}");
        drop(d);
    }

    #[test]
    fn no_secret_reaches_a_rendered_file() {
        std::env::set_var("MGMT_TEST_TEMPLATE_SECRET", "s3cr3t-value");
        let (_d, t) = tpl(&[("a.txt.tera", "{{ get_env(name=\"MGMT_TEST_TEMPLATE_SECRET\") }}")]);
        let e = t.unwrap().render("s", &json!({})).unwrap_err().to_string();
        assert!(e.contains("get_env is disabled"), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
        // Literal secrets typed into a template are refused, references pass.
        let cases = [
            ("inv.yaml.tera", "defaults: {password: hunter2}\n", Some("defaults.password")),
            ("inv.yaml.tera", "defaults: {password_env: PW, password_file: /x}\n", None),
            ("r.json.tera", "{\"node\": {\"password\": \"@env:PW\"}}", None),
            ("r.json.tera", "{\"node\": {\"password\": \"hunter2\"}}", Some("node.password")),
            ("r.json.tera", "{\"p\": [\"db.password=hunter2\"]}", Some("p[0]")),
            ("r.json.tera", "{\"p\": [\"db.password=@env:DBPW\"]}", None),
            ("r.json.tera", "{\"helmsecretparameter\": [\"greeting=hunter2\"]}", Some("helmsecretparameter[0]")),
            ("r.json.tera", "{\"helmsecretparameter\": [\"greeting=@file:Files/g\"]}", None),
            ("r.json.tera", "{\"p\": [\"db.password=@@env:hunter2\"]}", Some("p[0]")),
            ("r.json.tera", "{\"p\": [\"replicaCount=2\", \"image.tag=1.27\"]}", None),
            ("r.json.tera", "{\"repo\": \"http://u:hunter2@r/\"}", Some("repo")),
            ("v.yaml.tera", "token: 12345\n", Some("token")),
            ("v.yaml.tera", "apiKey: null\n", None),
        ];
        for (name, text, bad) in cases {
            let (_d, t) = tpl(&[(name, text)]);
            let r = t.unwrap().render("s", &json!({}));
            match bad {
                None => assert!(r.is_ok(), "{text}: {:?}", r.err()),
                Some(p) => {
                    let e = r.unwrap_err().to_string();
                    assert!(e.contains(&format!("{p}: a literal secret")), "{text}: {e}");
                    assert!(!e.contains("hunter2") && !e.contains("12345"), "{e}");
                }
            }
        }
    }

    #[test]
    fn line_lookup() {
        assert_eq!(line_of("a: network\nb: {{ x.network }}\nc: {{ network }}\n", "network"), Some(3));
        assert_eq!(line_of("{% if a %}\n{{ ab }}\n", "ab"), Some(2));
        assert_eq!(line_of("{{ a }}", "b"), None);
        assert_eq!(line_of("{{ throw(message=\"no\nnetwork\") }}\n{{ network }}", "network"), Some(3));
        assert_eq!(line_of("{{ 'x' ~ network }}", "network"), Some(1));
        assert_eq!(clean(Path::new("s/../../t/./e")), Path::new("../t/e"));
    }
}
