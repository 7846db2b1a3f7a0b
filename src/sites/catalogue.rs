//! The site catalogue (`sites.yaml`, optionally with its site list in a CSV): every site's name,
//! labels and variables, the defaults they share, the templates and package they use, and the
//! secrets they may name. Secrets are references only (an environment variable or a file): the
//! catalogue is meant to live in git next to its templates, so a value in it would be a leak, and
//! so would a literal under a variable whose name says it is secret. Pure: reads the file it is
//! given (and the CSV it names) under the project's size and YAML caps, checks, and returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::{excerpt, Error, Result};
use crate::input_limit::{read_capped, INVENTORY_MAX_BYTES, MAX_DEPTH};
use crate::inventory::yaml_limits;
use crate::sites::csv_cells;
use crate::sites::lexical_path::clean;
use crate::sites::rendered_check::{child, refuses_string, Under};

/// The only `apiVersion` / `kind` a catalogue may declare (a later format gets a new version).
pub const API_VERSION: &str = "mgmt-driver/v1";
pub const KIND: &str = "SiteCatalogue";

/// Variable names the templates' context already uses for something else.
const RESERVED: [&str; 3] = ["site", "secrets", "catalogue"];

/// Where a secret comes from when a hook needs it. Never the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// An environment variable of the process that runs the operation.
    Env(String),
    /// A file (absolute: a relative path in the catalogue is taken from the catalogue's folder).
    File(PathBuf),
}

impl SecretRef {
    /// The marker a rendered file carries: `@env:VAR` or `@file:PATH` (the forms the hooks resolve).
    pub fn marker(&self) -> String {
        match self {
            SecretRef::Env(v) => format!("@env:{v}"),
            SecretRef::File(p) => format!("@file:{}", p.display()),
        }
    }
}

/// One site: a DNS-label name, labels to select it by, its own variables (not yet merged).
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub vars: Map<String, Value>,
}

/// A loaded, checked catalogue. Paths are absolute or relative to the working directory, as the
/// catalogue's own path was given.
#[derive(Debug, Clone)]
pub struct Catalogue {
    pub file: PathBuf,
    pub templates: PathBuf,
    pub package: Option<PathBuf>,
    pub defaults: Map<String, Value>,
    pub secrets: BTreeMap<String, SecretRef>,
    pub sites: Vec<Site>,
    /// Values the operator marks as not secret (`not_secret:`, `FILE:PATH`, e.g.
    /// `values/app.yaml:auth.apiKeyName`): the rendered-file check lets them be literal.
    pub not_secret: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCatalogue {
    api_version: String,
    kind: String,
    templates: String,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    defaults: Map<String, Value>,
    #[serde(default)]
    secrets: BTreeMap<String, Value>,
    #[serde(default)]
    sites: Option<Vec<RawSite>>,
    #[serde(default, rename = "sites_csv")]
    sites_csv: Option<String>,
    #[serde(default, rename = "not_secret")]
    not_secret: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    vars: Map<String, Value>,
}

impl Catalogue {
    /// Read and check `path` (and the CSV it names). Every error is an input error naming the
    /// file and the field (`sites[3].vars.network`), so nothing runs on a bad catalogue.
    pub fn load(path: &Path) -> Result<Catalogue> {
        let text = read_capped(path, INVENTORY_MAX_BYTES, "catalogue")?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, path, &base)
    }

    /// Parse catalogue text read from `file`; relative paths are taken from `base`.
    pub fn parse(text: &str, file: &Path, base: &Path) -> Result<Catalogue> {
        let at = file.display().to_string();
        let err = |field: &str, m: String| Error::input(&at, field, m);
        yaml_limits::check(text).map_err(|m| err("catalogue", m))?;
        let de = yaml_serde::Deserializer::from_str(text);
        let raw: RawCatalogue = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "catalogue".to_string() } else { path };
            err(&field, strip_path_prefix(&e.into_inner().to_string()))
        })?;
        if raw.api_version != API_VERSION {
            return Err(err("apiVersion", format!("'{}': expected {API_VERSION}", excerpt(&raw.api_version))));
        }
        if raw.kind != KIND {
            return Err(err("kind", format!("'{}': expected {KIND}", excerpt(&raw.kind))));
        }
        let path_of = |field: &str, p: &str| -> Result<PathBuf> {
            if p.is_empty() || p.contains('\0') {
                return Err(err(field, "is empty or not a path".into()));
            }
            Ok(base.join(p))
        };
        let templates = path_of("templates", &raw.templates)?;
        let package = raw.package.as_deref().map(|p| path_of("package", p)).transpose()?;
        check_vars(&raw.defaults, "defaults").map_err(|(f, m)| err(&f, m))?;
        let mut secrets = BTreeMap::new();
        for (name, v) in &raw.secrets {
            let field = format!("secrets.{}", excerpt(name));
            check_ident(name).map_err(|m| err(&field, m))?;
            secrets.insert(name.clone(), secret_ref(v, base).map_err(|m| err(&field, m))?);
        }
        let sites = match (raw.sites, raw.sites_csv) {
            (Some(_), Some(_)) => return Err(err("sites_csv", "give either sites: or sites_csv:, not both".into())),
            (None, None) => return Err(err("sites", "is required (or sites_csv: naming a CSV file)".into())),
            (Some(list), None) => {
                let mut sites = Vec::with_capacity(list.len());
                for (i, s) in list.into_iter().enumerate() {
                    let field = format!("sites[{i}]");
                    check_site(&s.name, &s.labels, &s.vars).map_err(|(f, m)| err(&format!("{field}.{f}"), m))?;
                    check_declared_types(&raw.defaults, &s.vars, "vars")
                        .map_err(|(f, m)| err(&format!("{field}.{f}"), m))?;
                    sites.push(Site { name: s.name, labels: s.labels, vars: s.vars });
                }
                sites
            }
            (None, Some(csv)) => {
                let csv_path = path_of("sites_csv", &csv)?;
                let text = read_capped(&csv_path, INVENTORY_MAX_BYTES, "sites_csv")?;
                parse_csv(&text, &csv_path, &raw.defaults)?
            }
        };
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, s) in sites.iter().enumerate() {
            if let Some(first) = seen.insert(&s.name, i) {
                return Err(err(
                    &format!("sites[{i}].name"),
                    format!("'{}' is already the name of sites[{first}]; site names are unique", s.name),
                ));
            }
        }
        for (i, n) in raw.not_secret.iter().enumerate() {
            if !n.split_once(':').is_some_and(|(f, p)| !f.is_empty() && !p.is_empty()) {
                return Err(err(
                    &format!("not_secret[{i}]"),
                    format!("'{}' is not FILE:PATH (values/app.yaml:auth.apiKeyName)", excerpt(n)),
                ));
            }
        }
        Ok(Catalogue {
            file: file.to_path_buf(),
            templates,
            package,
            defaults: raw.defaults,
            secrets,
            sites,
            not_secret: raw.not_secret,
        })
    }

    /// Sites named by `only` (all when empty) whose labels match every `selector` pair, in
    /// catalogue order; the usize is the site's place in the whole catalogue (`site.index`), the
    /// same whatever else is selected. A name in `only` that no site has, or a selection that
    /// matches no site, is an error: a typo must not quietly select nothing.
    pub fn select(&self, only: &[String], selector: &[(String, String)]) -> Result<Vec<(usize, &Site)>> {
        for name in only {
            if !self.sites.iter().any(|s| &s.name == name) {
                return Err(Error::input(
                    "--only",
                    excerpt(name),
                    format!("no site of this name in {}", self.file.display()),
                ));
            }
        }
        let chosen: Vec<(usize, &Site)> = self
            .sites
            .iter()
            .enumerate()
            .filter(|(_, s)| only.is_empty() || only.contains(&s.name))
            .filter(|(_, s)| selector.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
            .collect();
        if chosen.is_empty() {
            let (flag, what) = selection_words(only, selector);
            return Err(Error::input(flag, what, format!("matches no site in {}", self.file.display())));
        }
        Ok(chosen)
    }

    /// Every variable a site's templates see: the defaults deep-merged with the site's own (a
    /// site's value wins; maps are merged key by key, anything else is replaced).
    pub fn vars_of(&self, site: &Site) -> Map<String, Value> {
        let mut out = self.defaults.clone();
        merge(&mut out, &site.vars);
        out
    }
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

/// The flag and the words of a selection, for the error that says it matched nothing:
/// `--selector region=eu,tier=x`, `--only par1 --selector ...`, or `(every site)`.
pub fn selection_words(only: &[String], selector: &[(String, String)]) -> (&'static str, String) {
    let sel = selector.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    match (only.is_empty(), selector.is_empty()) {
        (true, true) => ("sites", "(every site)".to_string()),
        (true, false) => ("--selector", sel),
        (false, true) => ("--only", only.join(",")),
        (false, false) => ("--only/--selector", format!("{} with {sel}", only.join(","))),
    }
}

/// The YAML parser starts its messages with the path it was at (`sites[0]: unknown field`);
/// the field is named already, so that prefix goes.
fn strip_path_prefix(m: &str) -> String {
    match m.split_once(": ") {
        Some((p, rest)) if !p.is_empty() && !p.contains(' ') && p.bytes().all(|c| c != b'`') => rest.to_string(),
        _ => m.to_string(),
    }
}

/// Parse `--selector region=eu,tier=small` (or one pair per flag) into pairs.
pub fn parse_selector(text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| Error::input("--selector", excerpt(part), "expected key=value (key=value,...)"))?;
        check_label(k.trim(), v.trim()).map_err(|m| Error::input("--selector", excerpt(part), m))?;
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// `a` with `b` merged in: maps recursively, `b` winning everywhere else.
pub fn merge(a: &mut Map<String, Value>, b: &Map<String, Value>) {
    for (k, v) in b {
        match (a.get_mut(k), v) {
            (Some(Value::Object(x)), Value::Object(y)) => merge(x, y),
            _ => {
                a.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A site name is a DNS label: it names directories, state documents, logs, pods and the
/// site's VNF instance id.
pub fn check_site_name(name: &str) -> std::result::Result<(), String> {
    if crate::k8s_names::dns_label(name, crate::k8s_names::LABEL_MAX) {
        Ok(())
    } else {
        Err(format!("'{}' is not a DNS label (1..63 of a-z, 0-9, '-', not starting or ending with '-')", excerpt(name)))
    }
}

/// A label as Kubernetes takes it (`k8s_names`): labels end up in pod labels.
fn check_label(k: &str, v: &str) -> std::result::Result<(), String> {
    if !crate::k8s_names::label_key(k) {
        return Err(format!(
            "label key '{}': 1..63 letters, digits, '-', '_', '.', starting and ending with a letter or digit \
             (an optional prefix/: a DNS subdomain)",
            excerpt(k)
        ));
    }
    if !crate::k8s_names::label_value(v) {
        return Err(format!(
            "label value '{}': 0..63 letters, digits, '-', '_', '.', starting and ending with a letter or digit",
            excerpt(v)
        ));
    }
    Ok(())
}

/// A variable or secret name: what a template can write as `{{ name }}`.
fn check_ident(name: &str) -> std::result::Result<(), String> {
    let mut c = name.chars();
    let ok = c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && name.len() <= 128;
    if ok {
        Ok(())
    } else {
        Err(format!("'{}': names are letters, digits and '_', not starting with a digit", excerpt(name)))
    }
}

/// Name, labels, variables of one site; `Err((field under the site, message))`.
fn check_site(
    name: &str,
    labels: &BTreeMap<String, String>,
    vars: &Map<String, Value>,
) -> std::result::Result<(), (String, String)> {
    check_site_name(name).map_err(|m| ("name".to_string(), m))?;
    for (k, v) in labels {
        check_label(k, v).map_err(|m| (format!("labels.{}", excerpt(k)), m))?;
    }
    check_vars(vars, "vars")
}

/// Top-level names are identifiers and not reserved; no secret literal anywhere inside.
fn check_vars(vars: &Map<String, Value>, at: &str) -> std::result::Result<(), (String, String)> {
    for (k, v) in vars {
        let field = format!("{at}.{}", excerpt(k));
        check_ident(k).map_err(|m| (field.clone(), m))?;
        if RESERVED.contains(&k.as_str()) {
            return Err((field, format!("'{k}' is reserved (the templates' context uses it)")));
        }
        no_secret_literal(v, &field, child(Under::Plain, k), 0)?;
    }
    Ok(())
}

/// A site's value has the type its default declares: a number stays a number, a string a
/// string, a map a map (checked key by key), a list a list; a `null` default declares nothing.
/// The templates write numbers and booleans where YAML and JSON take them bare, so a CSV cell
/// `22\n  jump: evil` for `ssh_port` must stop here, not reach a rendered inventory as
/// structure. `at` is the path the error names (`vars`, or empty for a CSV line).
fn check_declared_types(
    defaults: &Map<String, Value>,
    vars: &Map<String, Value>,
    at: &str,
) -> std::result::Result<(), (String, String)> {
    for (k, v) in vars {
        let field = format!("{at}.{}", excerpt(k));
        let Some(d) = defaults.get(k) else { continue };
        match (d, v) {
            (Value::Null, _) | (_, Value::Null) => {}
            (Value::Object(dm), Value::Object(vm)) => check_declared_types(dm, vm, &field)?,
            _ if type_name(d) == type_name(v) => {}
            _ => return Err((field, format!("is {}, but its default declares {}", type_name(v), type_name(d)))),
        }
    }
    Ok(())
}

/// The JSON type of `v`, as an error names it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// A value under a secret-looking name (or a URL with a password anywhere) is refused: it would
/// be written into rendered files and into git. The message never shows the value.
fn no_secret_literal(v: &Value, at: &str, under: Under, depth: usize) -> std::result::Result<(), (String, String)> {
    if depth > MAX_DEPTH {
        return Err((at.to_string(), format!("nested deeper than {MAX_DEPTH} levels")));
    }
    let refuse = || {
        Err((
            at.to_string(),
            "looks like a secret and holds a value; declare it under secrets: ({env: VAR} or {file: PATH}) \
             and write {{ secrets.NAME }} in the template"
                .to_string(),
        ))
    };
    match v {
        Value::Null => Ok(()),
        Value::Object(m) => {
            for (k, x) in m {
                no_secret_literal(x, &format!("{at}.{}", excerpt(k)), child(under, k), depth + 1)?;
            }
            Ok(())
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                no_secret_literal(x, &format!("{at}[{i}]"), under, depth + 1)?;
            }
            Ok(())
        }
        // Judged as the rendered files are (`rendered_check.rs`): by what it holds and where
        // it goes, so a taint key or a key file's path is not refused for its key's name.
        Value::String(s) if refuses_string(under, s) => refuse(),
        Value::String(_) => Ok(()),
        _ if under != Under::Plain => refuse(),
        _ => Ok(()),
    }
}

/// `{env: VAR}` or `{file: PATH}`, nothing else (a string here would be the secret itself).
fn secret_ref(v: &Value, base: &Path) -> std::result::Result<SecretRef, String> {
    let Value::Object(m) = v else {
        return Err("must be {env: VAR} or {file: PATH}: a catalogue holds references, never secret values".into());
    };
    if m.len() != 1 {
        return Err("must have exactly one of env: or file:".into());
    }
    match m.iter().next() {
        Some((k, Value::String(var))) if k == "env" => {
            let mut c = var.chars();
            let ok = c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_');
            if !ok {
                return Err(format!("env: '{}' is not an environment variable name", excerpt(var)));
            }
            Ok(SecretRef::Env(var.clone()))
        }
        Some((k, Value::String(p))) if k == "file" => {
            if p.is_empty() || p.contains('\0') || p.chars().any(char::is_control) {
                return Err("file: is empty or not a path".into());
            }
            let p = base.join(p);
            let abs = std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p);
            Ok(SecretRef::File(clean(&abs)))
        }
        Some((k, _)) => Err(format!("'{}': expected env: VAR or file: PATH (a string)", excerpt(k))),
        None => Err("must have exactly one of env: or file:".into()),
    }
}

/// A site list as a spreadsheet keeps it: header `name,labels,<var>...`; `labels` is
/// `k=v;k=v`; every other column is a variable, empty cells left unset (the defaults apply).
/// Cells are strings, except whole integers (`3`, not `03`) and booleans in any case (`true`,
/// and `TRUE`/`FALSE` as spreadsheets write them), so `masters == 3` and `helm == false` read
/// the same from a CSV as from YAML; `1.31` stays the string "1.31". A quoted cell keeps its
/// spaces (`csv_cells.rs`); line numbers are an editor's, whatever the line ends.
fn parse_csv(text: &str, file: &Path, defaults: &Map<String, Value>) -> Result<Vec<Site>> {
    let at = file.display().to_string();
    // A spreadsheet's "CSV UTF-8" starts with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records =
        csv_cells::records(text).map_err(|(line, m)| Error::input(&at, format!("line {line}"), m))?.into_iter();
    let header: Vec<String> = records.next().map(|r| r.cells.into_iter().map(|c| c.text).collect()).unwrap_or_default();
    if header.first().map(String::as_str) != Some("name") {
        return Err(Error::input(&at, "header", "the first column must be 'name'"));
    }
    for (i, h) in header.iter().enumerate().skip(1) {
        if h == "labels" {
            continue;
        }
        for part in h.split('.') {
            check_ident(part).map_err(|m| Error::input(&at, format!("header column {}", i + 1), m))?;
        }
        let root = h.split('.').next().unwrap_or_default();
        let clash = header
            .iter()
            .enumerate()
            .any(|(j, x)| j != i && (x == h || x.starts_with(&format!("{h}.")) || h.starts_with(&format!("{x}."))));
        if RESERVED.contains(&root) || root == "name" || clash {
            return Err(Error::input(
                &at,
                format!("header column {}", i + 1),
                format!("'{h}' is reserved or repeated"),
            ));
        }
        // A column is not refused for its name: each cell is judged by what it holds and
        // where it goes (`check_site` below, as a YAML site's vars are), so an `ssh_key` column
        // of key paths or a taint's `key` is fine and a password's value is not.
    }
    let mut sites = Vec::new();
    for rec in records {
        let line = rec.line;
        if rec.cells.len() != header.len() {
            return Err(Error::input(
                &at,
                format!("line {line}"),
                format!("has {} cells, the header has {}", rec.cells.len(), header.len()),
            ));
        }
        let mut site = Site { name: String::new(), labels: BTreeMap::new(), vars: Map::new() };
        for (i, cell) in rec.cells.iter().enumerate() {
            let cell = cell.text.as_str();
            let col = &header[i];
            let field = format!("line {line}.{col}");
            match col.as_str() {
                "name" => site.name = cell.to_string(),
                "labels" => {
                    for pair in cell.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                        let (k, v) =
                            pair.split_once('=').ok_or_else(|| Error::input(&at, &field, "expected k=v;k=v"))?;
                        site.labels.insert(k.trim().to_string(), v.trim().to_string());
                    }
                }
                _ if cell.is_empty() => {}
                _ => insert_path(&mut site.vars, col, csv_value(cell)),
            }
        }
        check_site(&site.name, &site.labels, &site.vars)
            .map_err(|(f, m)| Error::input(&at, format!("line {line}.{f}"), m))?;
        check_declared_types(defaults, &site.vars, "")
            .map_err(|(f, m)| Error::input(&at, format!("line {line}{f}"), m))?;
        sites.push(site);
    }
    Ok(sites)
}

/// `a.b.c` = v as nested maps (a dotted column sets one key deep inside a variable; the rest of
/// the variable comes from the defaults, deep-merged).
fn insert_path(vars: &mut Map<String, Value>, dotted: &str, v: Value) {
    match dotted.split_once('.') {
        None => {
            vars.insert(dotted.to_string(), v);
        }
        Some((head, rest)) => {
            let child = vars.entry(head.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            if let Value::Object(m) = child {
                insert_path(m, rest, v);
            }
        }
    }
}

fn csv_value(cell: &str) -> Value {
    let int = cell.strip_prefix('-').unwrap_or(cell);
    let plain_int = !int.is_empty() && int.bytes().all(|c| c.is_ascii_digit()) && (int == "0" || !int.starts_with('0'));
    match cell {
        _ if cell.eq_ignore_ascii_case("true") => Value::Bool(true),
        _ if cell.eq_ignore_ascii_case("false") => Value::Bool(false),
        _ if plain_int => cell.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::String(cell.into())),
        _ => Value::String(cell.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> std::result::Result<Catalogue, String> {
        Catalogue::parse(text, Path::new("sites.yaml"), Path::new("/cat")).map_err(|e| e.to_string())
    }

    const HEAD: &str = "apiVersion: mgmt-driver/v1\nkind: SiteCatalogue\ntemplates: tpl\n";

    #[test]
    fn loads_sites_defaults_secrets_and_merges_deeply() {
        let c = parse(&format!(
            "{HEAD}package: pkg\ndefaults: {{workers: 1, helm: {{chart: a, version: '1'}}}}\n\
             secrets: {{node_password: {{env: EDGE_PW}}, key: {{file: k/pw}}}}\n\
             sites:\n  - {{name: par1, labels: {{region: eu}}, vars: {{workers: 2, helm: {{version: '2'}}}}}}\n  - name: ber2\n"
        ))
        .unwrap();
        assert_eq!(c.templates, Path::new("/cat/tpl"));
        assert_eq!(c.package.as_deref(), Some(Path::new("/cat/pkg")));
        assert_eq!(c.secrets["node_password"], SecretRef::Env("EDGE_PW".into()));
        assert_eq!(c.secrets["key"], SecretRef::File("/cat/k/pw".into()));
        assert_eq!(c.secrets["key"].marker(), "@file:/cat/k/pw");
        let v = c.vars_of(&c.sites[0]);
        assert_eq!(Value::Object(v), json!({"workers": 2, "helm": {"chart": "a", "version": "2"}}));
        assert_eq!(
            Value::Object(c.vars_of(&c.sites[1])),
            json!({"workers": 1, "helm": {"chart": "a", "version": "1"}})
        );
    }

    /// A variable is judged by what it holds and where it goes, as rendered files are: a key
    /// file's path, a taint key and a Secret's name are values; a literal password is not.
    #[test]
    fn ordinary_values_with_secret_looking_names_load() {
        let c = parse(&format!(
            "{HEAD}defaults: {{ssh_key: /home/op/.ssh/id_ed25519, app: {{values: {{tolerations: [{{key: edge, operator: Exists}}], \
             tls: [{{secretName: edge-tls}}], auth: {{existingSecret: app-creds}}}}}}}}\n\
             not_secret: ['values/app.yaml:auth.passwordPolicy']\nsites: [{{name: a}}]\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.not_secret, ["values/app.yaml:auth.passwordPolicy"]);
        let e = parse(&format!("{HEAD}defaults: {{ssh_key: AAAAC3Nza}}\nsites: []\n")).unwrap_err();
        assert!(e.contains("defaults.ssh_key: looks like a secret"), "{e}");
        let e = parse(&format!("{HEAD}not_secret: [auth.token]\nsites: []\n")).unwrap_err();
        assert!(e.contains("not_secret[0]") && e.contains("FILE:PATH"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "sites: [{name: a, vars: {x: 1}}, {name: Bad_Name}]",
                "sites.yaml: sites[1].name: 'Bad_Name' is not a DNS label",
            ),
            ("sites: [{name: a}, {name: a}]", "sites.yaml: sites[1].name: 'a' is already the name of sites[0]"),
            (
                "sites: [{name: a, vars: {x: 1}, extra: 2}]",
                "sites.yaml: sites[0].extra: unknown field `extra`, expected one of",
            ),
            ("sitez: []", "sites.yaml: sitez: unknown field `sitez`"),
            ("sites: [{name: a, vars: [1]}]", "sites.yaml: sites[0].vars: invalid type: sequence, expected a map"),
            ("secrets: {pw: hunter2}\nsites: []", "sites.yaml: secrets.pw: must be {env: VAR} or {file: PATH}"),
            ("secrets: {pw: {env: A, file: b}}\nsites: []", "sites.yaml: secrets.pw: must have exactly one"),
            ("secrets: {pw: {env: 'A B'}}\nsites: []", "sites.yaml: secrets.pw: env: 'A B' is not"),
            (
                "sites: [{name: a}, {name: b}, {name: c}, {name: d, vars: {node_password: hunter2}}]",
                "sites.yaml: sites[3].vars.node_password: looks like a secret and holds a value",
            ),
            (
                "defaults: {helm: {values: {db: {apiToken: 3}}}}\nsites: []",
                "sites.yaml: defaults.helm.values.db.apiToken: looks like a secret",
            ),
            (
                "defaults: {proxy: 'http://u:hunter2@p:3128'}\nsites: []",
                "sites.yaml: defaults.proxy: looks like a secret",
            ),
            ("sites: [{name: a, vars: {site: 1}}]", "sites.yaml: sites[0].vars.site: 'site' is reserved"),
            ("sites: [{name: a, vars: {a-b: 1}}]", "sites.yaml: sites[0].vars.a-b: 'a-b': names are letters"),
            ("sites: [{name: a, labels: {'bad key': x}}]", "sites.yaml: sites[0].labels.bad key: label key"),
            ("sites: []\nsites_csv: x.csv", "sites.yaml: sites_csv: give either"),
            ("defaults: {}", "sites.yaml: sites: is required"),
            (
                "defaults: {ssh_port: 22, app: {replicas: 1}, any: null}\nsites: [{name: a, vars: {any: [1], ssh_port: '22'}}]",
                "sites.yaml: sites[0].vars.ssh_port: is a string, but its default declares a number",
            ),
            (
                "defaults: {app: {replicas: 1}}\nsites: [{name: a, vars: {app: {replicas: {x: 1}}}}]",
                "sites.yaml: sites[0].vars.app.replicas: is a map, but its default declares a number",
            ),
        ];
        for (body, want) in cases {
            let e = parse(&format!("{HEAD}{body}\n")).unwrap_err();
            assert!(e.starts_with(want), "{body}\n got: {e}\nwant: {want}");
            assert!(!e.contains("hunter2"), "{e}");
        }
        let e = parse("apiVersion: v2\nkind: SiteCatalogue\ntemplates: t\nsites: []\n").unwrap_err();
        assert_eq!(e, "sites.yaml: apiVersion: 'v2': expected mgmt-driver/v1");
        let e = parse("apiVersion: mgmt-driver/v1\nkind: Other\ntemplates: t\nsites: []\n").unwrap_err();
        assert_eq!(e, "sites.yaml: kind: 'Other': expected SiteCatalogue");
        // A secret name holding null (unset) is fine: nothing to leak.
        parse(&format!("{HEAD}defaults: {{token: null}}\nsites: []\n")).unwrap();
    }

    #[test]
    fn yaml_bombs_are_refused_before_parsing() {
        let deep = format!("{HEAD}defaults: {{a: {}{}}}\nsites: []\n", "[".repeat(40), "]".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("nested deeper"), "deep");
        let mut bomb = format!("{HEAD}defaults:\n  a: &a \"{}\"\n  b: [", "x".repeat(10_000));
        bomb.push_str(&vec!["*a"; 3000].join(","));
        bomb.push_str("]\nsites: []\n");
        let e = parse(&bomb).unwrap_err();
        assert!(e.starts_with("sites.yaml: catalogue:"), "{e}");
    }

    #[test]
    fn select_by_name_and_labels_with_indices_among_the_selected() {
        let c = parse(&format!(
            "{HEAD}sites:\n  - {{name: a, labels: {{region: eu, tier: s}}}}\n  - {{name: b, labels: {{region: us}}}}\n  \
             - {{name: c, labels: {{region: eu, tier: l}}}}\n"
        ))
        .unwrap();
        let names = |v: Vec<(usize, &Site)>| v.into_iter().map(|(i, s)| format!("{i}:{}", s.name)).collect::<Vec<_>>();
        assert_eq!(names(c.select(&[], &[]).unwrap()), ["0:a", "1:b", "2:c"]);
        // A site's index is its place in the catalogue, whatever else is selected.
        let eu = parse_selector("region=eu").unwrap();
        assert_eq!(names(c.select(&[], &eu).unwrap()), ["0:a", "2:c"]);
        let eu_l = parse_selector("region=eu, tier=l").unwrap();
        assert_eq!(names(c.select(&[], &eu_l).unwrap()), ["2:c"]);
        assert_eq!(names(c.select(&["c".into(), "b".into()], &[]).unwrap()), ["1:b", "2:c"]);
        // A selection that matches nothing is an error naming it, not zero sites.
        let e = c.select(&["a".into()], &[("region".into(), "us".into())]).unwrap_err().to_string();
        assert_eq!(e, "--only/--selector: a with region=us: matches no site in sites.yaml");
        let e = c.select(&[], &parse_selector("region=ue").unwrap()).unwrap_err().to_string();
        assert_eq!(e, "--selector: region=ue: matches no site in sites.yaml");
        let e = c.select(&["zz".into()], &[]).unwrap_err().to_string();
        assert_eq!(e, "--only: zz: no site of this name in sites.yaml");
        assert!(parse_selector("region").unwrap_err().to_string().contains("expected key=value"));
    }

    #[test]
    fn csv_site_lists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("s.csv"),
            "name,labels,network,masters,k8s_version,app.values.replicaCount\npar1,region=eu;tier=small,10.20.1.0/24,3,1.31,2\nber2,,10.20.2.0/24,,007,\n",
        )
        .unwrap();
        let f = dir.path().join("sites.yaml");
        std::fs::write(
            &f,
            format!("{HEAD}defaults: {{masters: 1, app: {{values: {{replicaCount: 1, x: y}}}}}}\nsites_csv: s.csv\n"),
        )
        .unwrap();
        let c = Catalogue::load(&f).unwrap();
        assert_eq!(c.sites.len(), 2);
        let with_bom = format!("\u{feff}{}", std::fs::read_to_string(dir.path().join("s.csv")).unwrap());
        std::fs::write(dir.path().join("bom.csv"), with_bom).unwrap();
        let g = dir.path().join("bom.yaml");
        std::fs::write(
            &g,
            format!("{HEAD}defaults: {{masters: 1, app: {{values: {{replicaCount: 1, x: y}}}}}}\nsites_csv: bom.csv\n"),
        )
        .unwrap();
        assert_eq!(Catalogue::load(&g).unwrap().sites, c.sites);
        assert_eq!(c.sites[0].labels.get("tier").map(String::as_str), Some("small"));
        assert_eq!(
            Value::Object(c.vars_of(&c.sites[0])),
            json!({"masters": 3, "app": {"values": {"replicaCount": 2, "x": "y"}}, "network": "10.20.1.0/24", "k8s_version": "1.31"})
        );
        assert_eq!(
            Value::Object(c.vars_of(&c.sites[1])),
            json!({"masters": 1, "app": {"values": {"replicaCount": 1, "x": "y"}}, "network": "10.20.2.0/24", "k8s_version": "007"})
        );
        let bad = [
            ("site,x\na,1\n", "header: the first column must be 'name'"),
            ("name,x\nGood,1\n", "line 2.name: 'Good' is not a DNS label"),
            ("name,x\na,1\na,2\n", "sites[1].name: 'a' is already the name"),
            ("name,labels\na,region\n", "line 2.labels: expected k=v;k=v"),
            ("name,db_password\na,x\n", "line 2.vars.db_password: looks like a secret and holds a value"),
            ("name,x,x\na,1,2\n", "header column 2: 'x' is reserved or repeated"),
            ("name,a,a.b\nz,1,2\n", "header column 2: 'a' is reserved or repeated"),
            ("name,app.db.token\nz,1\n", "line 2.vars.app.db.token: looks like a secret"),
            ("name,ssh_key\nz,-----BEGIN OPENSSH PRIVATE KEY-----\n", "line 2.vars.ssh_key: looks like a secret"),
            ("name,a..b\nz,1\n", "header column 2: '': names are"),
            ("name,x\na,1,2\n", "line 2: has 3 cells, the header has 2"),
            // Line numbers as an editor shows them, whatever the line ends.
            ("name,x\r\na,1\r\n\r\nGood,2\r\n", "line 4.name: 'Good' is not a DNS label"),
            ("name,x\r\na,\"1\r\n2\"\r\nGood,2\r\n", "line 4.name: 'Good' is not a DNS label"),
            ("name,x\na,\"open\n", "line 2: a quoted cell is never closed"),
            ("name,x\na,http://u:pw@h/\n", "line 2.vars.x: looks like a secret"),
            // A cell typed against its default: a port with YAML structure in it stops here.
            ("name,masters\na,\"3\n  jump: evil\"\n", "line 2.masters: is a string, but its default declares a number"),
            ("name,app.values.replicaCount\na,two\n", "line 2.app.values.replicaCount: is a string, but its default"),
        ];
        // A column named like a secret holding what is no secret (a key file's path, a taint's
        // key, a Kubernetes Secret's name, a reference) is accepted, judged by its cells.
        std::fs::write(
            dir.path().join("s.csv"),
            "name,ssh_key,tolerations.key,tls.secretName,db_password\na,/home/op/.ssh/id_ed25519,edge,web-tls,@env:DB_PW\n",
        )
        .unwrap();
        std::fs::write(&f, format!("{HEAD}sites_csv: s.csv\n")).unwrap();
        let c = Catalogue::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.sites[0].vars["ssh_key"], json!("/home/op/.ssh/id_ed25519"));
        // Booleans as spreadsheets write them are booleans; a quoted cell keeps its spaces.
        std::fs::write(
            dir.path().join("s.csv"),
            "name,helm,ipv6,motd\r\na,FALSE,True,\"  two  words \"\r\nb , TRUE , false , plain \r\n",
        )
        .unwrap();
        std::fs::write(&f, format!("{HEAD}defaults: {{helm: true, ipv6: false}}\nsites_csv: s.csv\n")).unwrap();
        let c = Catalogue::load(&f).unwrap();
        assert_eq!(
            Value::Object(c.sites[0].vars.clone()),
            json!({"helm": false, "ipv6": true, "motd": "  two  words "})
        );
        assert_eq!(c.sites[1].name, "b");
        assert_eq!(Value::Object(c.sites[1].vars.clone()), json!({"helm": true, "ipv6": false, "motd": "plain"}));
        std::fs::write(
            &f,
            format!("{HEAD}defaults: {{masters: 1, app: {{values: {{replicaCount: 1, x: y}}}}}}\nsites_csv: s.csv\n"),
        )
        .unwrap();
        for (text, want) in bad {
            std::fs::write(dir.path().join("s.csv"), text).unwrap();
            let e = Catalogue::load(&f).unwrap_err().to_string();
            assert!(e.contains(want), "{text}\n got: {e}\nwant: {want}");
        }
    }

    #[test]
    fn site_names_are_dns_labels() {
        for ok in ["a", "par1", "a-b", &"a".repeat(63)] {
            check_site_name(ok).unwrap();
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64), "é", "a b", "../x"] {
            assert!(check_site_name(bad).is_err(), "{bad}");
        }
    }
}
