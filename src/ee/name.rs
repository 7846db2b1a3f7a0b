//! The name an execution environment is registered under (`ee register NAME`, `--ee NAME`,
//! a primitive's `runs_on: {ee: NAME}`): like an inventory host name, since it names the node in
//! events and results. Pure, so a primitives file is checked without the registry.

use crate::error::excerpt;

/// An EE name: 1..63 letters, digits, `_`, `-`, `.`, starting with a letter or digit.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{}': an EE name is 1..63 letters, digits, '_', '-', '.', starting with a letter or digit",
            excerpt(name)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_boring() {
        assert!(check_name("ee-1.lab_a").is_ok());
        for bad in ["", "-x", ".x", "a b", "a/b", "$(id)", "a\nb", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
