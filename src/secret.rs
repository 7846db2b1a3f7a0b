//! A string that must never be printed. `Debug`/`Display` show a mask, so a secret that slips
//! into a log line, an event or an error message leaks nothing.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

pub const MASK: &str = "********";

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The only way to the value. Call it at the last moment, where the bytes go on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?} {:?}", Some(&s)), "******** ******** Some(********)");
        assert_eq!(s.expose(), "hunter2");
    }
}
