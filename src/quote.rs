//! The one shell-quoting function. Every value that reaches a remote shell goes through
//! [`quote`]; command builders never paste raw strings (Tacker's `str.format` into shell strings
//! is how `helmparameter = "a=b; rm -rf /"` became remote code execution).

use crate::error::Error;

/// Quote `s` so that a POSIX shell reads it back as exactly one word with exactly these bytes.
///
/// Single quotes preserve everything literally except `'` itself, which is written as `'\''`.
/// NUL cannot be represented in a C string argument at all, so it is refused rather than
/// silently truncated. The error carries no copy of the value (it may be a secret).
pub fn quote(s: &str) -> Result<String, Error> {
    if s.contains('\0') {
        return Err(Error::input(
            "argument",
            "shell value",
            "contains a NUL byte, which a shell argument cannot carry",
        ));
    }
    if !s.is_empty() && s.bytes().all(is_plain) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Ok(out)
}

/// Quote every word and join with spaces: an argv turned into one shell command line.
pub fn join<S: AsRef<str>>(words: &[S]) -> Result<String, Error> {
    let mut parts = Vec::with_capacity(words.len());
    for w in words {
        parts.push(quote(w.as_ref())?);
    }
    Ok(parts.join(" "))
}

/// Bytes that never need quoting. Deliberately small: `=`/`,`/`:`/`@` are safe everywhere
/// in POSIX sh, but `~`, `*`, `?`, `[`, `{`, `#` and friends are not.
fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'=' | b',' | b':' | b'@' | b'+' | b'%')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Run `printf '%s' <quoted>` through a real /bin/sh and return what it printed.
    fn roundtrip(s: &str) -> String {
        let script = format!("printf '%s' {}", quote(s).unwrap());
        let out = Command::new("/bin/sh").arg("-c").arg(&script).output().unwrap();
        assert!(out.status.success(), "sh failed on {script:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    const HOSTILE: &[&str] = &[
        "",
        "plain",
        "it's",
        "'",
        "''",
        "\"double\"",
        "$(touch /tmp/pwned)",
        "`touch /tmp/pwned`",
        "a=b; rm -rf /",
        "x && y || z",
        "line1\nline2\n",
        "tab\there",
        "$HOME ${PATH} $1 $@ $*",
        "*?[a-z]{1,2}~#!",
        "back\\slash\\",
        "ünïcödé ✓ 日本語",
        "-n",
        "--flag=value with space",
        "a'b\"c`d$e\\f",
        "> /etc/passwd < /dev/null | cat &",
    ];

    #[test]
    fn hostile_strings_survive_a_real_shell_byte_exact() {
        for s in HOSTILE {
            assert_eq!(roundtrip(s), *s, "value {s:?} changed on its way through sh");
        }
    }

    #[test]
    fn nul_is_rejected() {
        assert!(quote("a\0b").is_err());
        assert!(join(&["ok", "a\0"]).is_err());
    }

    #[test]
    fn plain_words_stay_readable() {
        assert_eq!(quote("/usr/local/bin/helm").unwrap(), "/usr/local/bin/helm");
        assert_eq!(quote("key=value").unwrap(), "key=value");
        assert_eq!(quote("it's").unwrap(), "'it'\\''s'");
        assert_eq!(quote("").unwrap(), "''");
        assert_eq!(quote("~root").unwrap(), "'~root'");
    }

    #[test]
    fn join_keeps_word_boundaries() {
        let words = ["printf", "%s|", "a b", "c;d", ""];
        let out = Command::new("/bin/sh").arg("-c").arg(join(&words).unwrap()).output().unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "a b|c;d||");
    }
}
