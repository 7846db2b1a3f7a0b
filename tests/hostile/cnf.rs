//! Hostile cnf inputs (filled by the input-validation work of issue 9).

use crate::case::Case;

pub fn cases() -> Vec<Case> {
    Vec::new()
}
