//! Typed errors. Every variant names what an operator needs at 3 a.m.: the field and file for bad
//! input, the address for connections, the node and command for remote failures. None of them
//! ever carries a secret: commands are stored in their display (masked) form.
//!
//! Messages embed values from input files and from nodes (a host name, a node's stderr, a
//! field's value), so every embedded value is shown through [`printable`]: control characters
//! escaped (a value cannot forge a log line or send a terminal sequence) and the userinfo of
//! URLs masked (a repository or proxy password in a value never reaches a log).

use std::borrow::Cow;
use std::time::Duration;

/// Exit codes of the CLI, documented in the README.
pub mod exit {
    /// Every host succeeded.
    pub const OK: i32 = 0;
    /// At least one host failed (connection, auth, host key, timeout or remote error).
    pub const HOST_FAILED: i32 = 1;
    /// The input was wrong (arguments, inventory, files); nothing was run anywhere.
    pub const BAD_INPUT: i32 = 2;
    /// Interrupted by SIGINT (Ctrl-C); hosts may be half done, their commands are stopped.
    pub const INTERRUPTED: i32 = 130;
    /// Stopped by SIGTERM; as for [`INTERRUPTED`].
    pub const TERMINATED: i32 = 143;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: which field, in which file (or argument), and why.
    #[error("{}: {}: {}", printable(location), printable(field), printable(message))]
    Input { location: String, field: String, message: String },

    /// TCP-level failure reaching a host (after retries, when they applied).
    #[error("{}: cannot connect to {}: {}{}", printable(node), printable(addr), printable(message), attempts_note(*attempts))]
    Connect { node: String, addr: String, message: String, attempts: u32 },

    /// The server refused every credential we had. Never retried: retrying a wrong password
    /// only locks accounts.
    #[error(
        "{}: authentication failed for user '{}' at {} (tried: {})",
        printable(node),
        printable(user),
        printable(addr),
        printable(tried)
    )]
    Auth { node: String, user: String, addr: String, tried: String },

    /// Host key verification failed: unknown under strict, or changed.
    #[error("{}: host key verification failed for {}: {}", printable(node), printable(addr), printable(message))]
    HostKey { node: String, addr: String, message: String },

    /// A command ran past its deadline and was killed (its whole process group on the node).
    #[error("{}: command timed out after {}s and was killed: {}", printable(node), elapsed.as_secs_f32().round(), printable(command))]
    Timeout { node: String, command: String, elapsed: Duration },

    /// The remote command finished unsuccessfully.
    #[error(
        "{}: command failed with {}: {}{}",
        printable(node),
        printable(status),
        printable(command),
        tail_note(stderr_tail)
    )]
    Remote { node: String, command: String, status: String, stderr_tail: String },

    /// File transfer failed (local or remote side).
    #[error("{}: transfer {} failed: {}", printable(node), printable(what), printable(message))]
    Transfer { node: String, what: String, message: String },

    /// SSH protocol trouble after the connection was established (channel refused, disconnect).
    #[error("{}: ssh session error during {}: {}", printable(node), printable(during), printable(message))]
    Session { node: String, during: String, message: String },

    /// A command succeeded but its output does not hold what the step needs (a node's
    /// hostname, a token, Helm's JSON). Such values are never used unchecked.
    #[error(
        "{}: cannot read {} from the output of: {}: {}",
        printable(node),
        printable(what),
        printable(command),
        printable(message)
    )]
    Unreadable { node: String, command: String, what: String, message: String },

    /// The state store could not be written after nodes may already have changed: not bad
    /// input. The previous document is intact (writes are atomic); re-running resumes.
    #[error(
        "{}: cannot write the state: {} (nodes may have changed; fix the cause and re-run)",
        printable(path),
        printable(message)
    )]
    State { path: String, message: String },

    /// The host was never started because an earlier host failed under --fail-fast.
    #[error("{}: skipped (an earlier host failed and --fail-fast is set)", printable(node))]
    Skipped { node: String },
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

fn tail_note(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("\n  stderr (last lines):\n{}", indent(tail.trim_end(), "    "))
    }
}

/// The tail keeps its lines (each indented, so none can pass for a message of its own); within a
/// line, control characters are escaped like everywhere else.
fn indent(s: &str, pad: &str) -> String {
    s.lines().map(|l| format!("{pad}{}", printable(l))).collect::<Vec<_>>().join("\n")
}

/// `text` as an error message may show it: the userinfo of URLs masked, and control characters
/// (newline, carriage return, escape, DEL, C1) and the invisible characters that reorder or
/// break lines (bidi overrides, line/paragraph separators) written as `\n`, `\r`, `\u{1b}`, ….
/// Tabs stay. Borrowed when there is nothing to change.
pub fn printable(text: &str) -> Cow<'_, str> {
    let masked = crate::url_mask::mask_userinfo(text);
    if !masked.chars().any(needs_escape) {
        return masked;
    }
    let mut out = String::with_capacity(masked.len() + 8);
    for c in masked.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A value quoted in a message: control characters (and quotes and backslashes) escaped, so a
/// newline cannot forge a log line, and cut at 80 characters, so a 10 KB value cannot fill the
/// screen. The one helper for input and node values shown in errors and warnings.
pub fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_debug).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl Error {
    pub fn input(location: impl Into<String>, field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Input { location: location.into(), field: field.into(), message: message.into() }
    }

    /// A short machine-readable kind, used in JSON events and results.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Input { .. } => "input",
            Error::Connect { .. } => "connect",
            Error::Auth { .. } => "auth",
            Error::HostKey { .. } => "host_key",
            Error::Timeout { .. } => "timeout",
            Error::Remote { .. } => "remote",
            Error::Transfer { .. } => "transfer",
            Error::Session { .. } => "session",
            Error::Skipped { .. } => "skipped",
            Error::Unreadable { .. } => "unreadable",
            Error::State { .. } => "state",
        }
    }

    /// The node an error happened on, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Error::Input { .. } | Error::State { .. } => None,
            Error::Connect { node, .. }
            | Error::Auth { node, .. }
            | Error::HostKey { node, .. }
            | Error::Timeout { node, .. }
            | Error::Remote { node, .. }
            | Error::Transfer { node, .. }
            | Error::Session { node, .. }
            | Error::Unreadable { node, .. }
            | Error::Skipped { node } => Some(node),
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input { .. } => exit::BAD_INPUT,
            _ => exit::HOST_FAILED,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_error_names_node_command_code_and_tail() {
        let e = Error::Remote {
            node: "worker2".into(),
            command: "bash install.sh -w 10.0.0.2".into(),
            status: "exit code 3".into(),
            stderr_tail: "E: unable to locate package\nfatal\n".into(),
        };
        let s = e.to_string();
        assert!(s.starts_with("worker2: command failed with exit code 3: bash install.sh -w 10.0.0.2"), "{s}");
        assert!(s.contains("    E: unable to locate package\n    fatal"), "{s}");
    }

    #[test]
    fn embedded_values_cannot_forge_lines_or_terminal_sequences_nor_show_url_passwords() {
        let forged = "x\nerror: forged line\r\u{1b}[2J\u{202e}";
        let errors = [
            Error::input(forged, forged, forged),
            Error::Connect { node: forged.into(), addr: forged.into(), message: forged.into(), attempts: 1 },
            Error::Auth { node: forged.into(), user: forged.into(), addr: forged.into(), tried: forged.into() },
            Error::HostKey { node: forged.into(), addr: forged.into(), message: forged.into() },
            Error::Timeout { node: forged.into(), command: forged.into(), elapsed: Duration::from_secs(1) },
            Error::Remote {
                node: forged.into(),
                command: forged.into(),
                status: forged.into(),
                stderr_tail: forged.into(),
            },
            Error::Transfer { node: forged.into(), what: forged.into(), message: forged.into() },
            Error::Session { node: forged.into(), during: forged.into(), message: forged.into() },
            Error::Unreadable {
                node: forged.into(),
                command: forged.into(),
                what: forged.into(),
                message: forged.into(),
            },
            Error::State { path: forged.into(), message: forged.into() },
            Error::Skipped { node: forged.into() },
        ];
        for e in &errors {
            let s = e.to_string();
            assert!(s.contains("x\\nerror: forged line\\r\\u{1b}[2J\\u{202e}") || e.kind() == "remote", "{s}");
            assert!(!s.contains('\r') && !s.contains('\u{1b}') && !s.contains('\u{202e}'), "{s:?}");
            // Only the stderr tail has lines of its own, and each is indented.
            for line in s.lines().skip(1) {
                assert!(line.starts_with("  "), "{s:?}");
            }
        }
        let e = Error::Remote {
            node: "m1".into(),
            command: "helm repo add r https://u:Pw-1@charts/".into(),
            status: "exit code 1".into(),
            stderr_tail: "Error: looks like \"https://u:Pw-1@charts/\" is not a valid chart repository\n".into(),
        };
        let s = e.to_string();
        assert!(!s.contains("Pw-1") && s.contains("https://********@charts/"), "{s}");
        assert!(matches!(printable("plain, tab\tkept"), Cow::Borrowed(_)));
    }

    #[test]
    fn connect_error_mentions_attempts_only_when_retried() {
        let once = Error::Connect { node: "n".into(), addr: "a:22".into(), message: "refused".into(), attempts: 1 };
        assert!(!once.to_string().contains("attempts"));
        let many = Error::Connect { node: "n".into(), addr: "a:22".into(), message: "refused".into(), attempts: 4 };
        assert!(many.to_string().ends_with("(after 4 attempts)"));
    }
}
