//! What an input file may cost to read. A VNFM or an operator hands us files we parse before
//! anything connects; a file that is huge, endless (`/dev/zero`, a FIFO) or built to explode
//! (YAML aliases, deep nesting) must be refused quickly with a message naming it, not eat the
//! machine's memory or stall the hook. The caps are far above any real inventory or request.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// An inventory file: 4 MiB is about 40,000 hosts written one per line.
pub const INVENTORY_MAX_BYTES: u64 = 4 << 20;

/// A request or VnfInstance JSON file: Tacker's largest bodies are a few KiB; a VnfInstance of
/// hundreds of VNFCs stays under 1 MiB.
pub const REQUEST_MAX_BYTES: u64 = 16 << 20;

/// Nesting depth of a YAML inventory and of Tacker's `helm_info` Python literal: real ones
/// nest 5 levels at most.
pub const MAX_DEPTH: usize = 32;

/// Read `path` as UTF-8, refusing more than `max` bytes. Errors are `Input` errors located at
/// the file, with `field` (e.g. `inventory`, `request`).
pub fn read_capped(path: &Path, max: u64, field: &str) -> Result<String> {
    let at = path.display().to_string();
    let err = |m: String| Error::input(&at, field, m);
    let f = std::fs::File::open(path).map_err(|e| err(format!("cannot read: {e}")))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(err("cannot read: is a directory".into()));
    }
    let mut buf = Vec::new();
    // One byte more than allowed tells "exactly at the cap" from "over it", also for files
    // whose size the metadata does not tell (devices, FIFOs, /proc).
    f.take(max + 1).read_to_end(&mut buf).map_err(|e| err(format!("cannot read: {e}")))?;
    if buf.len() as u64 > max {
        return Err(err(format!("is larger than {} (the cap for this kind of file); refused unread", human(max))));
    }
    String::from_utf8(buf)
        .map_err(|e| err(format!("is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to())))
}

fn human(n: u64) -> String {
    if n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_size_names_the_file_and_reads_endless_files_only_to_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.json");
        std::fs::write(&p, vec![b' '; 101]).unwrap();
        let e = read_capped(&p, 100, "request").unwrap_err().to_string();
        assert!(e.contains("big.json: request: is larger than 100 bytes"), "{e}");
        assert_eq!(read_capped(&p, 101, "request").unwrap().len(), 101);
        let e = read_capped(Path::new("/dev/zero"), 1 << 20, "inventory").unwrap_err().to_string();
        assert!(e.contains("/dev/zero: inventory: is larger than 1 MiB"), "{e}");
        std::fs::write(&p, [b'a', 0xff, b'b']).unwrap();
        let e = read_capped(&p, 100, "inventory").unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text (invalid byte at offset 1)"), "{e}");
        let e = read_capped(d.path(), 100, "inventory").unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
        let e = read_capped(&d.path().join("nope"), 100, "inventory").unwrap_err().to_string();
        assert!(e.contains("nope: inventory: cannot read"), "{e}");
    }
}
