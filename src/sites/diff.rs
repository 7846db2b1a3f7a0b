//! `sites diff`'s text: what a site's rendered inputs change against what its last successful
//! run of the operation used, file by file, as a unified diff with two lines of context (the
//! shape Helmfile's and git's users read). Pure: two sets of files in, text out.
//!
//! Rendered files carry secret references, not values (`rendered_check.rs`), but a template can
//! still write a literal into a file that check does not parse; a diff is shown on terminals
//! and pasted into tickets, so every line goes through [`mask_line`] first: a value under a
//! secret-looking key, and a URL's password, never appear.

use std::collections::BTreeMap;

use crate::secret::{is_secret_name, is_secret_string, MASK};

/// Lines of context around each change.
const CONTEXT: usize = 2;
/// Past this many lines in one file the diff says the file changed and not how (the line
/// diff is quadratic; rendered files are a few hundred lines).
const MAX_LINES: usize = 5000;

/// The unified diff of `old` (what the last successful run used; `None`: never run) and `new`
/// (the folder now), one `--- a/PATH` / `+++ b/PATH` section per changed file, prefixed
/// `SITE/`. Empty when nothing changed.
pub fn unified(site: &str, old: Option<&BTreeMap<String, String>>, new: &BTreeMap<String, String>) -> String {
    let empty = BTreeMap::new();
    let old_files = old.unwrap_or(&empty);
    let mut paths: Vec<&String> = old_files.keys().chain(new.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut out = String::new();
    for p in paths {
        let (a, b) = (old_files.get(p), new.get(p));
        if a == b {
            continue;
        }
        let from = if a.is_some() { format!("a/{site}/{p}") } else { "/dev/null".into() };
        let to = if b.is_some() { format!("b/{site}/{p}") } else { "/dev/null".into() };
        out.push_str(&format!("--- {from}\n+++ {to}\n"));
        out.push_str(&hunks(a.map_or("", String::as_str), b.map_or("", String::as_str)));
    }
    out
}

/// One line as shown: a secret-looking key's value (`key: v`, `"key": "v"`, `key=v`) replaced by
/// the mask unless it is a reference (`@env:`, `@file:`), and a line holding a URL with a password
/// masked whole.
pub fn mask_line(line: &str) -> String {
    for sep in [':', '='] {
        if let Some((k, v)) = line.split_once(sep) {
            let key = k.trim().trim_start_matches("- ").trim_matches(|c| c == '"' || c == '\'');
            let value = v.trim().trim_end_matches(',').trim_matches(|c| c == '"' || c == '\'');
            // `@env:`/`@file:` markers, and the inventory's `password_env: VAR` / `_file: PATH`
            // forms, name a secret without holding it.
            let lower = key.to_ascii_lowercase();
            let reference = value.starts_with("@env:")
                || value.starts_with("@file:")
                || lower.ends_with("_env")
                || lower.ends_with("_file");
            if !key.is_empty() && is_secret_name(key) && !value.is_empty() && !reference && !value.starts_with('{') {
                return format!("{k}{sep} {MASK}");
            }
        }
    }
    if line.split(|c: char| c.is_whitespace() || c == '"' || c == '\'').any(is_secret_string) {
        return MASK.to_string();
    }
    line.to_string()
}

#[derive(Clone, Copy, PartialEq)]
enum Edit {
    Keep,
    Del,
    Add,
}

/// The hunks (`@@ -a,n +b,m @@`) turning `a` into `b`.
fn hunks(a: &str, b: &str) -> String {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    if x.len() > MAX_LINES || y.len() > MAX_LINES {
        return format!("@@ (over {MAX_LINES} lines: changed, not shown) @@\n");
    }
    // Longest common subsequence, from the end.
    let mut l = vec![vec![0u32; y.len() + 1]; x.len() + 1];
    for i in (0..x.len()).rev() {
        for j in (0..y.len()).rev() {
            l[i][j] = if x[i] == y[j] { l[i + 1][j + 1] + 1 } else { l[i + 1][j].max(l[i][j + 1]) };
        }
    }
    // (edit, old line index, new line index)
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < x.len() || j < y.len() {
        if i < x.len() && j < y.len() && x[i] == y[j] {
            ops.push((Edit::Keep, i, j));
            i += 1;
            j += 1;
        } else if j < y.len() && (i == x.len() || l[i][j + 1] > l[i + 1][j]) {
            ops.push((Edit::Add, i, j));
            j += 1;
        } else {
            ops.push((Edit::Del, i, j));
            i += 1;
        }
    }
    let mut out = String::new();
    let mut k = 0;
    while k < ops.len() {
        if ops[k].0 == Edit::Keep {
            k += 1;
            continue;
        }
        // A hunk: from CONTEXT before this change to CONTEXT after the last change within reach.
        let start = k.saturating_sub(CONTEXT);
        let mut end = k;
        let mut last_change = k;
        while end < ops.len() && end <= last_change + 2 * CONTEXT {
            if ops[end].0 != Edit::Keep {
                last_change = end;
            }
            end += 1;
        }
        let end = (last_change + CONTEXT + 1).min(ops.len());
        let span = &ops[start..end];
        let olds = span.iter().filter(|o| o.0 != Edit::Add).count();
        let news = span.iter().filter(|o| o.0 != Edit::Del).count();
        let (o0, n0) = (span[0].1 + usize::from(olds > 0), span[0].2 + usize::from(news > 0));
        out.push_str(&format!("@@ -{o0},{olds} +{n0},{news} @@\n"));
        for &(e, oi, ni) in span {
            let (mark, text) = match e {
                Edit::Keep => (' ', x[oi]),
                Edit::Del => ('-', x[oi]),
                Edit::Add => ('+', y[ni]),
            };
            out.push(mark);
            out.push_str(&mask_line(text));
            out.push('\n');
        }
        k = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(f: &[(&str, &str)]) -> BTreeMap<String, String> {
        f.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    }

    #[test]
    fn a_changed_file_shows_its_changed_lines_with_context() {
        let old = files(&[("values/app.yaml", "a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\ng: 7\n"), ("same", "x\n")]);
        let new = files(&[("values/app.yaml", "a: 1\nb: 2\nc: 3\nd: 40\ne: 5\nf: 6\ng: 7\n"), ("same", "x\n")]);
        assert_eq!(
            unified("par1", Some(&old), &new),
            "--- a/par1/values/app.yaml\n+++ b/par1/values/app.yaml\n@@ -2,5 +2,5 @@\n b: 2\n c: 3\n-d: 4\n+d: 40\n e: 5\n f: 6\n"
        );
        assert_eq!(unified("par1", Some(&new), &new), "");
    }

    #[test]
    fn a_site_never_run_shows_every_file_as_new_and_a_dropped_file_as_removed() {
        let new = files(&[("inventory.yaml", "groups: {}\n")]);
        assert_eq!(
            unified("ber2", None, &new),
            "--- /dev/null\n+++ b/ber2/inventory.yaml\n@@ -0,0 +1,1 @@\n+groups: {}\n"
        );
        let old = files(&[("inventory.yaml", "groups: {}\n"), ("known_hosts", "h k\n")]);
        assert!(unified("ber2", Some(&old), &new)
            .starts_with("--- a/ber2/known_hosts\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-h k\n"));
    }

    #[test]
    fn secrets_are_masked_and_references_shown() {
        let old = files(&[("cluster/instantiate.json", "{\n  \"password\": \"@env:EDGE_PW\",\n  \"x\": 1\n}\n")]);
        let new = files(&[(
            "cluster/instantiate.json",
            "{\n  \"password\": \"hunter2\",\n  \"proxy\": \"http://u:hunter3@p:3128\",\n  \"x\": 1\n}\n",
        )]);
        let d = unified("par1", Some(&old), &new);
        assert!(!d.contains("hunter2") && !d.contains("hunter3"), "{d}");
        assert!(d.contains("-  \"password\": \"@env:EDGE_PW\",\n"), "{d}");
        assert!(d.contains(&format!("+  \"password\": {MASK}\n")), "{d}");
        assert_eq!(mask_line("  db_pass=s3cret"), format!("  db_pass= {MASK}"));
        assert_eq!(mask_line("  password_file: /secrets/pw"), "  password_file: /secrets/pw");
        assert_eq!(mask_line("  host_key_check: strict"), "  host_key_check: strict");
    }
}
