//! Guards run on an inventory's text before it is deserialized, against YAML input bombs:
//! - **flow nesting** (`[[[[…` or `{a: {a: …`): the YAML parser takes time quadratic in its
//!   depth (100,000 levels, 200 KB, took about a minute), so it is counted on the raw text
//!   first, before any parser sees it;
//! - **alias expansion** (`&a "<10 KB>"` then `*a` 60,000 times: a 250 KB file that grew to more
//!   than 1 GB of memory): a first pass walks the document as the deserializer will, following
//!   aliases without storing anything, and stops as soon as the expanded size passes a budget;
//! - **deep block nesting**: the same walk stops at [`MAX_DEPTH`] levels.
//!
//! Anchors and aliases stay usable for what they are for (one host listed in two groups).

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

use crate::input_limit::MAX_DEPTH;

/// Expanded scalar text, aliases followed: four times the largest file we read.
pub const MAX_EXPANDED_BYTES: usize = 16 << 20;
/// Expanded nodes (scalars, lists, mappings), aliases followed.
pub const MAX_EXPANDED_NODES: usize = 1_000_000;

/// Refuse `text` when its flow collections nest deeper than [`MAX_DEPTH`], or when it expands
/// (aliases followed) past [`MAX_EXPANDED_BYTES`] / [`MAX_EXPANDED_NODES`] or nests deeper.
/// Other YAML errors are left to the real deserialization, which words them better.
pub fn check(text: &str) -> Result<(), String> {
    flow_depth(text)?;
    expansion(text)
}

/// The deepest flow nesting of `text`, counted on the raw text, refused past [`MAX_DEPTH`].
///
/// This is a guard, not a YAML parser, so it counts twice and keeps the worse: once skipping
/// quoted scalars (a `]` inside `']'` closes nothing) and once reading quotes as text (a quote
/// that only looks like one, as in `[it's, [[[…]]]]`, must not hide the brackets after it).
/// Either way a `[` or `{` glued to a word outside any collection (`pass[word`) is plain text,
/// as YAML reads it. Only a real inventory with more than 32 `[`/`{` nested inside quoted
/// text could be refused wrongly.
fn flow_depth(text: &str) -> Result<(), String> {
    for skip_quotes in [true, false] {
        if let Some(line) = deeper_than(text.as_bytes(), MAX_DEPTH, skip_quotes) {
            return Err(format!(
                "line {line}: collections nested deeper than {MAX_DEPTH} levels; refused before parsing"
            ));
        }
    }
    Ok(())
}

/// The line where flow nesting first passes `max`, if it does.
fn deeper_than(b: &[u8], max: usize, skip_quotes: bool) -> Option<usize> {
    let (mut depth, mut line, mut i) = (0usize, 1usize, 0usize);
    // The last significant byte (b'\n' at line start), and the byte just before this one.
    let mut prev = b'\n';
    // Inside a word: a bracket here is text, unless a collection is open (then it never is).
    let mut glued = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                prev = b'\n';
                glued = false;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                glued = false;
                i += 1;
                continue;
            }
            b'#' if !glued => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            // A quoted scalar starts where a value does; skip to its end ('' and \" are
            // escapes); it may span lines.
            b'\'' | b'"' if skip_quotes && !glued && value_start(prev) => {
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'\n' => line += 1,
                        b'\\' if c == b'"' => i += 1,
                        b'\'' if c == b'\'' && b.get(i + 1) == Some(&b'\'') => i += 1,
                        x if x == c => break,
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'[' | b'{' if depth > 0 || !glued => {
                depth += 1;
                if depth > max {
                    return Some(line);
                }
                (prev, glued, i) = (c, false, i + 1);
                continue;
            }
            b']' | b'}' | b',' if depth > 0 => {
                depth -= usize::from(c != b',');
                (prev, glued, i) = (c, false, i + 1);
                continue;
            }
            _ => {}
        }
        (prev, glued, i) = (c, true, i + 1);
    }
    None
}

/// Where a YAML value (and so a quoted scalar) may start.
fn value_start(prev: u8) -> bool {
    matches!(prev, b'\n' | b':' | b',' | b'[' | b'{' | b'-' | b'?')
}

/// What the walk has used so far, and why it stopped.
#[derive(Default)]
struct Budget {
    bytes: Cell<usize>,
    nodes: Cell<usize>,
    over: Cell<Option<&'static str>>,
}

impl Budget {
    fn spend<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.bytes.set(self.bytes.get().saturating_add(bytes));
        self.nodes.set(self.nodes.get() + 1);
        if self.bytes.get() > MAX_EXPANDED_BYTES {
            self.over.set(Some("bytes"));
        } else if self.nodes.get() > MAX_EXPANDED_NODES {
            self.over.set(Some("nodes"));
        }
        match self.over.get() {
            Some(_) => Err(E::custom("over budget")),
            None => Ok(()),
        }
    }
}

fn expansion(text: &str) -> Result<(), String> {
    let budget = Budget::default();
    let walked = Walk { budget: &budget, depth: 0 }.deserialize(yaml_serde::Deserializer::from_str(text));
    match (budget.over.get(), walked) {
        (Some("depth"), _) => Err(format!("nested deeper than {MAX_DEPTH} levels")),
        (Some("bytes"), _) => Err(format!(
            "expands (YAML aliases followed) to more than {} MiB of text; refused before loading",
            MAX_EXPANDED_BYTES >> 20
        )),
        (Some(_), _) => Err(format!(
            "expands (YAML aliases followed) to more than {MAX_EXPANDED_NODES} values; refused before loading"
        )),
        // yaml_serde's own guard: alias jumps past 100 per event.
        (None, Err(e)) if e.to_string().contains("repetition limit exceeded") => {
            Err("expands YAML aliases too many times (more than 100 per node written); refused before loading".into())
        }
        // Not a bomb: any other error is reported by the real deserialization.
        (None, _) => Ok(()),
    }
}

/// A visitor that accepts any YAML and keeps nothing, spending the budget on the way.
#[derive(Clone, Copy)]
struct Walk<'a> {
    budget: &'a Budget,
    depth: usize,
}

impl<'a> Walk<'a> {
    fn deeper<E: de::Error>(self) -> Result<Walk<'a>, E> {
        if self.depth >= MAX_DEPTH {
            self.budget.over.set(Some("depth"));
            return Err(E::custom("too deep"));
        }
        Ok(Walk { budget: self.budget, depth: self.depth + 1 })
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.budget.spend(1)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.budget.spend(8)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.budget.spend(8)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.budget.spend(8)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.budget.spend(s.len())
    }
    fn visit_bytes<E: de::Error>(self, s: &[u8]) -> Result<(), E> {
        self.budget.spend(s.len())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.budget.spend(1)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.budget.spend(1)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        self.budget.spend(1)?;
        let inner = self.deeper()?;
        while a.next_element_seed(inner)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        self.budget.spend(1)?;
        let inner = self.deeper()?;
        while a.next_key_seed(inner)?.is_some() {
            a.next_value_seed(inner)?;
        }
        Ok(())
    }
    /// A tagged value (`!tag x`): walk what is tagged.
    fn visit_enum<A: EnumAccess<'de>>(self, a: A) -> Result<(), A::Error> {
        let (_, v) = a.variant::<de::IgnoredAny>()?;
        v.newtype_variant_seed(self.deeper()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_nesting_is_counted_on_the_text() {
        let deep = format!("cps: {}{}\n", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let e = check(&deep).unwrap_err();
        assert!(e.starts_with("line 1: collections nested deeper than 32 levels"), "{e}");
        let ok = format!("cps: {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(flow_depth(&ok), Ok(()));
        let maps = format!("a:\n  b: {}x{}\n", "{a: ".repeat(40), "}".repeat(40));
        assert!(check(&maps).unwrap_err().starts_with("line 2:"));
        // Brackets in plain scalars, quotes and comments are text, not nesting.
        let text = format!(
            "a: x{}\nb: '{}'\nc: \"{}\\\"\"\n# {}\nd: [\"]]]\", '[[''[[', {{e: f}}]\n",
            "[".repeat(100),
            "[".repeat(100),
            "{".repeat(100),
            "[".repeat(100)
        );
        assert_eq!(check(&text), Ok(()));
        // A quote inside a flow plain scalar opens nothing: it cannot hide nesting.
        let hidden = format!("cps: [a'b, {}{}, c'd]\n", "[".repeat(40), "]".repeat(40));
        assert!(check(&hidden).is_err());
    }

    #[test]
    fn alias_bombs_are_refused_quickly_and_plain_anchors_still_work() {
        let big = "x".repeat(10_000);
        let bomb = format!("a: &s \"{big}\"\nb: [{}]\n", vec!["*s"; 2_000].join(", "));
        let t = std::time::Instant::now();
        let e = check(&bomb).unwrap_err();
        assert!(e.contains("more than 16 MiB of text"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
        // Billion laughs: few bytes, many nodes.
        let mut laughs = String::from("l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
        for i in 1..8 {
            laughs.push_str(&format!("l{i}: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 10].join(", ")));
        }
        let e = check(&laughs).unwrap_err();
        assert!(e.contains("expands YAML aliases too many times"), "{e}");
        // Many small aliases to a big list: the node budget.
        let list = vec!["a"; 20_000].join(", ");
        let wide = format!("l: &l [{list}]\nm: [{}]\n", vec!["*l"; 60].join(", "));
        assert!(check(&wide).unwrap_err().contains("more than 1000000 values"));
        let ok = "groups:\n  a:\n    - &h {name: n1, ssh_ip: 10.0.0.1}\n  b:\n    - *h\n";
        assert_eq!(check(ok), Ok(()));
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        let mut t = String::new();
        for i in 0..40 {
            t.push_str(&format!("{}a:\n", " ".repeat(i)));
        }
        t.push_str(&format!("{}b\n", " ".repeat(40)));
        assert_eq!(check(&t).unwrap_err(), "nested deeper than 32 levels");
    }
}
