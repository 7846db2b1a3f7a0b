//! The architecture test: the layers that docs/architecture.md draws, checked against every
//! `crate::` and `super::` path in `src/`.
//!
//! The doc is the source of truth. Its section "The layers, file by file" has two tables: which
//! layer each file is in, and which layers each layer may import. This test reads both, parses
//! every source file with `syn` (test-only items, `#[cfg(test)]`, are left out: a test may reach
//! anywhere), resolves each path to the file that defines it, and fails on
//! - a file the doc does not place, or a place in the doc with no file;
//! - an import that goes against the rules (pure ↛ lifecycle/operations/cli, ...);
//! - an import cycle that spans more than one file.
//!
//! A new file therefore needs a row in the doc, and the doc cannot drift from the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path: `["cluster", "hook"]` for `src/cluster/hook.rs`, `[]` for `src/lib.rs`.
type Module = Vec<String>;

/// Every `.rs` file under `src/` with its module path, skipping files that are compiled only for
/// tests (declared `#[cfg(test)] mod x;`) and the binary's `main.rs`.
fn source_files(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).expect("under src");
                let mut m: Module = rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
                if m.last().is_some_and(|l| l == "mod") || m == ["lib"] {
                    m.pop();
                }
                if m != ["main"] {
                    out.insert(m, p);
                }
            }
        }
    }
    // Drop the files that only test builds compile.
    let test_only: BTreeSet<Module> = out.iter().flat_map(|(m, p)| test_only_children(m, &read(p))).collect();
    out.retain(|m, _| !test_only.iter().any(|t| m.starts_with(t)));
    out
}

fn read(p: &Path) -> syn::File {
    let text = std::fs::read_to_string(p).expect("read source");
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().trim() == "test"))
}

/// The child modules of `m` that are declared `#[cfg(test)] mod x;`.
fn test_only_children(m: &Module, file: &syn::File) -> Vec<Module> {
    file.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(md) if md.content.is_none() && is_test_only(&md.attrs) => {
                let mut c = m.clone();
                c.push(md.ident.to_string());
                Some(c)
            }
            _ => None,
        })
        .collect()
}

/// Every path a file names that starts at `crate` or `super`, as absolute module paths. Items
/// compiled only for tests are skipped.
fn referenced_paths(m: &Module, file: &syn::File) -> Vec<Vec<String>> {
    // `super` is the parent of the module the file's own items live in (for `a/mod.rs` that
    // module is `a`, for `a/b.rs` it is `a::b`).
    let mut v = Paths { base: m.clone(), out: vec![] };
    for item in &file.items {
        if !item_attrs(item).is_some_and(is_test_only) {
            v.visit_item(item);
        }
    }
    v.out
}

fn item_attrs(item: &syn::Item) -> Option<&[syn::Attribute]> {
    Some(match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => return None,
    })
}

struct Paths {
    base: Module,
    out: Vec<Vec<String>>,
}

impl Paths {
    /// `segments` made absolute, if they start at `crate` or `super`.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        if first == "crate" {
            Some(segments[1..].to_vec())
        } else if first == "super" {
            let mut at = self.base.clone();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                at.pop();
                rest = &rest[1..];
            }
            at.extend(rest.iter().cloned());
            Some(at)
        } else {
            None
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.push_use(prefix, Some(n.ident.to_string())),
            syn::UseTree::Rename(r) => self.push_use(prefix, Some(r.ident.to_string())),
            syn::UseTree::Glob(_) => self.push_use(prefix, None),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn push_use(&mut self, prefix: &[String], last: Option<String>) {
        let mut segs = prefix.to_vec();
        if let Some(l) = last.filter(|l| l != "self") {
            segs.push(l);
        }
        match self.absolute(&segs) {
            Some(p) => self.out.push(p),
            // `use child::x` names a child module of this one (or an outside crate, which
            // resolves to nothing here).
            None if segs.first().is_some_and(|s| s != "self") => {
                self.out.push(self.base.iter().cloned().chain(segs).collect());
            }
            None => self.out.push(self.base.iter().cloned().chain(segs.into_iter().skip(1)).collect()),
        }
    }
}

impl<'a> Visit<'a> for Paths {
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&mut vec![], &u.tree);
    }

    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        match self.absolute(&segs) {
            Some(a) => self.out.push(a),
            // `child::f()` from a module file names its child module; anything else
            // (`std::mem::take`, `Foo::new`) resolves to this file itself and is dropped.
            None if segs.len() > 1 => self.out.push(self.base.iter().cloned().chain(segs).collect()),
            None => {}
        }
        syn::visit::visit_path(self, p);
    }

    /// `pub(super)` and `pub(in crate::x)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'a syn::Visibility) {}

    /// An inline `mod x { .. }`: its `super` is this file's module.
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            self.base.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.base.pop();
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        // Paths inside macro calls (`matches!(x, crate::a::B)`, `vec![crate::a::f()]`) count too:
        // parse the tokens as expressions where they are.
        syn::visit::visit_macro(self, mac);
        if let Ok(args) =
            mac.parse_body_with(syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for e in &args {
                self.visit_expr(e);
            }
        }
    }
}

/// The file that defines `path`: the longest prefix of it that is a module file.
fn resolve<'m>(files: &'m BTreeMap<Module, PathBuf>, path: &[String]) -> Option<&'m Module> {
    (1..=path.len()).rev().find_map(|n| files.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// The doc's two tables: the layer of each place (a file, `dir/x.rs`, or a folder, `dir/*`) and
/// what each layer may import.
struct Layers {
    places: Vec<(String, String)>,
    may_import: BTreeMap<String, BTreeSet<String>>,
}

const SECTION: &str = "## The layers, file by file";

fn read_doc(doc: &str) -> Layers {
    let start = doc.find(SECTION).unwrap_or_else(|| panic!("docs/architecture.md has no section {SECTION:?}"));
    let body = &doc[start + SECTION.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut tables: Vec<Vec<(String, String)>> = vec![];
    let mut in_table = false;
    for line in body.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 2 || cells[0].starts_with("---") {
            continue;
        }
        if !in_table {
            in_table = true;
            tables.push(vec![]); // the header row
            continue;
        }
        tables.last_mut().expect("a table").push((cells[0].to_string(), cells[1].to_string()));
    }
    assert_eq!(tables.len(), 2, "{SECTION}: expected two tables (places, rules), found {}", tables.len());
    let places = tables[0]
        .iter()
        .flat_map(|(layer, files)| {
            files
                .split_whitespace()
                .map(move |f| (f.trim_matches('`').trim_end_matches(',').to_string(), layer.clone()))
        })
        .filter(|(f, _)| !f.is_empty())
        .collect();
    let may_import = tables[1]
        .iter()
        .map(|(layer, allowed)| {
            let set = allowed.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
            (layer.clone(), set)
        })
        .collect();
    Layers { places, may_import }
}

/// The file's path under `src/`, as the doc writes it.
fn doc_name(src: &Path, p: &Path) -> String {
    p.strip_prefix(src).expect("under src").to_string_lossy().into_owned()
}

/// The layer of a file: an exact place beats the longest folder place.
fn layer_of(layers: &Layers, name: &str) -> Option<String> {
    if let Some((_, l)) = layers.places.iter().find(|(p, _)| p == name) {
        return Some(l.clone());
    }
    layers
        .places
        .iter()
        .filter_map(|(p, l)| p.strip_suffix('*').filter(|dir| name.starts_with(dir)).map(|dir| (dir.len(), l)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, l)| l.clone())
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'e> {
        edges: &'e BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        out: Vec<Vec<Module>>,
    }
    impl T<'_> {
        fn visit(&mut self, v: &Module) {
            let i = self.index.len();
            self.index.insert(v.clone(), i);
            self.low.insert(v.clone(), i);
            self.stack.push(v.clone());
            self.on.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("low");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("low");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = vec![];
                loop {
                    let w = self.stack.pop().expect("stack");
                    self.on.remove(&w);
                    let done = &w == v;
                    scc.push(w);
                    if done {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t =
        T { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("/")
    }
}

struct Graph {
    files: BTreeMap<Module, PathBuf>,
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

fn graph(src: &Path) -> Graph {
    let files = source_files(src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, p) in &files {
        let set = edges.entry(m.clone()).or_default();
        for path in referenced_paths(m, &read(p)) {
            if let Some(t) = resolve(&files, &path).filter(|t| *t != m && !t.is_empty()) {
                set.insert(t.clone());
            }
        }
    }
    Graph { files, edges }
}

#[test]
fn every_import_follows_the_layers_of_docs_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layers = read_doc(&std::fs::read_to_string(root.join("docs/architecture.md")).expect("read the doc"));
    let g = graph(&src);
    let mut problems = vec![];

    // Every file has a place, and every place names something that exists.
    let names: BTreeMap<&Module, String> = g.files.iter().map(|(m, p)| (m, doc_name(&src, p))).collect();
    let layer: BTreeMap<&Module, String> = names
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .filter_map(|(m, n)| match layer_of(&layers, n) {
            Some(l) => Some((*m, l)),
            None => {
                problems.push(format!("src/{n} has no layer in docs/architecture.md"));
                None
            }
        })
        .collect();
    for (place, l) in &layers.places {
        let exists = match place.strip_suffix('*') {
            Some(dir) => names.values().any(|n| n.starts_with(dir)),
            None => names.values().any(|n| n == place),
        };
        if !exists {
            problems.push(format!("docs/architecture.md places src/{place} in {l}, but there is no such file"));
        }
        if !layers.may_import.contains_key(l) {
            problems.push(format!("docs/architecture.md: layer {l} (of {place}) has no rule"));
        }
    }

    // Every import goes where its layer may go.
    for (from, tos) in &g.edges {
        let Some(lf) = layer.get(from) else { continue };
        for to in tos {
            let Some(lt) = layer.get(to) else { continue };
            if !layers.may_import.get(lf).is_some_and(|ok| ok.contains(lt)) {
                problems.push(format!("{lf} ↛ {lt}: src/{} imports src/{}", names[from], names[to]));
            }
        }
    }

    // No cycle spans more than one file.
    for c in cycles(&g.edges) {
        let files: Vec<String> = c.iter().map(show).collect();
        let inside: Vec<String> = c
            .iter()
            .flat_map(|a| {
                g.edges[a].iter().filter(|b| c.contains(b)).map(move |b| format!("{} → {}", show(a), show(b)))
            })
            .collect();
        problems.push(format!(
            "an import cycle spans {} files: {}\n    its imports: {}",
            c.len(),
            files.join(", "),
            inside.join(", ")
        ));
    }

    assert!(problems.is_empty(), "{} architecture problems:\n  {}", problems.len(), problems.join("\n  "));
}

/// The checker itself: a cycle and a forbidden edge in a made-up tree are found, and a test
/// module's imports are not counted.
#[test]
fn the_checker_finds_a_cycle_a_forbidden_edge_and_ignores_tests() {
    let d = tempfile::tempdir().expect("tempdir");
    let src = d.path().join("src");
    std::fs::create_dir_all(src.join("ops")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "mod pure; mod ops; #[cfg(test)] mod testkit;").expect("write");
    std::fs::write(src.join("pure.rs"), "use crate::ops::run::go;\n#[cfg(test)]\nmod tests { use crate::ops::x; }")
        .expect("write");
    std::fs::write(src.join("ops/mod.rs"), "pub mod run; pub mod other; fn f() { other::g() }").expect("write");
    std::fs::write(src.join("ops/other.rs"), "pub fn g() {}").expect("write");
    std::fs::write(src.join("ops/run.rs"), "pub fn go() { let _ = crate::pure::f(); let _ = matches!(1, super::X); }")
        .expect("write");
    std::fs::write(src.join("testkit.rs"), "use crate::ops::run::go;").expect("write");
    let g = graph(&src);
    let m = |s: &str| -> Module { s.split('/').map(String::from).collect() };
    assert!(!g.files.contains_key(&m("testkit")), "a #[cfg(test)] file is left out");
    assert_eq!(g.edges[&m("pure")], BTreeSet::from([m("ops/run")]));
    assert_eq!(g.edges[&m("ops/run")], BTreeSet::from([m("pure"), m("ops")]));
    assert_eq!(g.edges[&m("ops")], BTreeSet::from([m("ops/other")]), "a child named in an expression");
    assert_eq!(cycles(&g.edges), vec![vec![m("ops/run"), m("pure")]]);

    let layers = read_doc(&format!(
        "{SECTION}\n\n| layer | files |\n|---|---|\n| pure | `pure.rs` |\n| operations | `ops/*` |\n\n\
         | layer | may import |\n|---|---|\n| pure | pure |\n| operations | pure, operations |\n"
    ));
    assert_eq!(layer_of(&layers, "ops/run.rs").as_deref(), Some("operations"));
    assert_eq!(layer_of(&layers, "pure.rs").as_deref(), Some("pure"));
    assert!(!layers.may_import["pure"].contains("operations"));
}
