//! A path cleaned by its text alone, for what the operator reads (messages, paths written into
//! rendered files): the catalogue's secret files, the templates folder, the `abspath` filter.

use std::path::{Component, Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_and_parents_fold_away() {
        assert_eq!(clean(Path::new("s/../../t/./e")), Path::new("../t/e"));
    }
}
