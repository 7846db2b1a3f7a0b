//! An operator's values file (`cnf install --values FILE`, `cnf upgrade --values FILE`, OSM's
//! `params` file): read on this machine before anything connects, checked to be a YAML (or JSON)
//! mapping, so a wrong path or a broken file fails naming `--values` and the file rather than
//! as Helm's error on a master. On the master it lives in a 0600 file for the one Helm command
//! and is removed (`ops::upload_values`). A values file may hold passwords: its bytes never
//! reach argv, events, errors or `Debug`.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The largest values file taken (Helm charts' own values rarely pass 100 KiB).
pub const MAX_BYTES: usize = 1 << 20;

/// One values file: the path as the operator gave it, and its bytes.
#[derive(Clone)]
pub struct ValuesFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ValuesFile {
    /// The path and size only: the content may hold secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ValuesFile({}, {} bytes)", self.path, self.bytes.len())
    }
}

/// Why `bytes` is not a values file: too big, not UTF-8, not YAML, or YAML that is not a
/// mapping (an empty file is Helm's "no values" and is taken). Pure. The parser's message is
/// not quoted: it may echo a line of the file.
pub fn check(bytes: &[u8]) -> std::result::Result<(), String> {
    if bytes.len() > MAX_BYTES {
        return Err(format!("is larger than {MAX_BYTES} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    match yaml_serde::from_str::<yaml_serde::Value>(text) {
        Ok(yaml_serde::Value::Mapping(_)) | Ok(yaml_serde::Value::Null) => Ok(()),
        Ok(_) => Err("is not a mapping of values (key: value)".into()),
        Err(e) => Err(format!(
            "is not YAML or JSON{}",
            e.location().map(|l| format!(" (line {}, column {})", l.line(), l.column())).unwrap_or_default()
        )),
    }
}

/// Read and check every `--values` file, in order.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<ValuesFile>> {
    paths
        .iter()
        .map(|p| {
            let shown = p.display().to_string();
            let bad = |m: String| Error::input("arguments", "--values", format!("{shown}: {m}"));
            let meta = std::fs::metadata(p).map_err(|e| bad(e.to_string()))?;
            if meta.len() > MAX_BYTES as u64 {
                return Err(bad(format!("is larger than {MAX_BYTES} bytes")));
            }
            let bytes = std::fs::read(p).map_err(|e| bad(e.to_string()))?;
            check(&bytes).map_err(bad)?;
            Ok(ValuesFile { path: shown, bytes })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_values_file_is_a_yaml_or_json_mapping_and_its_content_never_shows() {
        assert!(check(b"replicaCount: 2\nimage:\n  tag: \"1.2\"\n").is_ok());
        assert!(check(br#"{"replicaCount": 2}"#).is_ok());
        assert!(check(b"").is_ok(), "an empty file is no values");
        assert!(check(b"- a\n- b\n").unwrap_err().contains("mapping"));
        let e = check(b"db:\n  password: hunter2\n bad: [\n").unwrap_err();
        assert!(e.contains("line") && !e.contains("hunter2"), "{e}");
        assert!(check(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(check(&vec![b'a'; MAX_BYTES + 1]).unwrap_err().contains("larger"));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.yaml");
        std::fs::write(&p, "db:\n  password: hunter2\n").unwrap();
        let read = read_all(std::slice::from_ref(&p)).unwrap();
        assert!(!format!("{read:?}").contains("hunter2"));
        let e = read_all(&[d.path().join("missing.yaml")]).unwrap_err().to_string();
        assert!(e.contains("--values") && e.contains("missing.yaml"), "{e}");
    }
}
