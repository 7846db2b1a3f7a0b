//! The template engine: every `*.tera` file of a templates folder, rendered for one site into
//! the files of the same relative path without `.tera`. Strict: a variable the context lacks is
//! an error naming the site, the template file and the line. Autoescape is off (the outputs are
//! YAML and JSON, not HTML); values are quoted on purpose with the `json`, `yaml` and `quote`
//! filters. Our functions and filters are in `template_helpers.rs`; every rendered file passes
//! `rendered_check.rs` (it parses, and holds no literal secret) before it is returned.
//!
//! Secrets: the context's `secrets.NAME` is the reference marker (`@env:VAR` / `@file:PATH`),
//! never the value (`catalogue::context`), and tera's `get_env` is replaced by an error, so no
//! template can read the process environment into a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tera::Tera;

use crate::error::{Error, Result};
use crate::input_limit::{read_capped, REQUEST_MAX_BYTES};
use crate::sites::lexical_path::clean;
use crate::sites::rendered_check::scan_for_secrets;
use crate::sites::template_helpers;

/// The rendered file `sites plan` / `apply` load as the site's inventory.
pub const INVENTORY: &str = "inventory.yaml";
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
        template_helpers::register(&mut tera);
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

    /// Render every output for `site` with `ctx` (see `catalogue::context`). Errors:
    /// `site par1: templates/edge/inventory.yaml.tera:12: Variable `network` not found ...`.
    /// `not_secret`: the catalogue's `FILE:PATH` marks, values the secret check lets be literal.
    pub fn render(&self, site: &str, ctx: &Value, not_secret: &[String]) -> Result<Vec<(PathBuf, String)>> {
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
            let file = rel.display().to_string();
            let marked: Vec<&str> = not_secret
                .iter()
                .filter_map(|n| n.split_once(':').filter(|(f, _)| *f == file).map(|(_, p)| p))
                .collect();
            scan_for_secrets(rel, &text, &marked)
                .map_err(|(line, m)| Error::input(format!("site {site}"), format!("{}{line}", rel.display()), m))?;
            if rel == Path::new(INVENTORY) {
                // The shape an inventory must have: a catalogue value that rendered into YAML
                // structure (a key it should not have, a port that is not a number) stops here.
                let at = format!("site {site}: {}", rel.display());
                crate::inventory::Inventory::check_shape(&text, &at)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let files = t.render("par1", &ctx, &[]).unwrap();
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
        let e = t.render("par1", &ctx, &[]).unwrap_err().to_string();
        assert!(e.starts_with(&format!("site par1: {root}/inventory.yaml.tera:4: Variable `nework` not found")), "{e}");
        let (d2, t2) = tpl(&[("x.json.tera", "{\n\"v\": {{ nth_host(cidr=\"10.0.0.0/30\", n=9) | json }}}\n")]);
        let e = t2.unwrap().render("par1", &ctx, &[]).unwrap_err().to_string();
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
        let e = t4.unwrap().render("s", &json!({"v": "unquoted"}), &[]).unwrap_err().to_string();
        assert!(e.starts_with("site s: x.json:2: not JSON after rendering"), "{e}");
        drop(d);
    }

    #[test]
    fn no_secret_reaches_a_rendered_file() {
        std::env::set_var("MGMT_TEST_TEMPLATE_SECRET", "s3cr3t-value");
        let (_d, t) = tpl(&[("a.txt.tera", "{{ get_env(name=\"MGMT_TEST_TEMPLATE_SECRET\") }}")]);
        let e = t.unwrap().render("s", &json!({}), &[]).unwrap_err().to_string();
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
            let r = t.unwrap().render("s", &json!({}), &[]);
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
    }
}
