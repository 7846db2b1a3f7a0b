//! Typed errors. Every variant names what an operator needs at 3 a.m.: the field and file for bad
//! input, the address for connections, the node and command for remote failures. None of them
//! ever carries a secret: commands are stored in their display (masked) form.

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
    #[error("{location}: {field}: {message}")]
    Input { location: String, field: String, message: String },

    /// TCP-level failure reaching a host (after retries, when they applied).
    #[error("{node}: cannot connect to {addr}: {message}{}", attempts_note(*attempts))]
    Connect { node: String, addr: String, message: String, attempts: u32 },

    /// The server refused every credential we had. Never retried: retrying a wrong password
    /// only locks accounts.
    #[error("{node}: authentication failed for user '{user}' at {addr} (tried: {tried})")]
    Auth { node: String, user: String, addr: String, tried: String },

    /// Host key verification failed: unknown under strict, or changed.
    #[error("{node}: host key verification failed for {addr}: {message}")]
    HostKey { node: String, addr: String, message: String },

    /// A command ran past its deadline and was killed (its whole process group on the node).
    #[error("{node}: command timed out after {}s and was killed: {command}", elapsed.as_secs_f32().round())]
    Timeout { node: String, command: String, elapsed: Duration },

    /// The remote command finished unsuccessfully.
    #[error("{node}: command failed with {status}: {command}{}", tail_note(stderr_tail))]
    Remote { node: String, command: String, status: String, stderr_tail: String },

    /// File transfer failed (local or remote side).
    #[error("{node}: transfer {what} failed: {message}")]
    Transfer { node: String, what: String, message: String },

    /// SSH protocol trouble after the connection was established (channel refused, disconnect).
    #[error("{node}: ssh session error during {during}: {message}")]
    Session { node: String, during: String, message: String },

    /// A command succeeded but its output does not hold what the step needs (a node's
    /// hostname, a token, Helm's JSON). Such values are never used unchecked.
    #[error("{node}: cannot read {what} from the output of: {command}: {message}")]
    Unreadable { node: String, command: String, what: String, message: String },

    /// The state store could not be written after nodes may already have changed: not bad
    /// input. The previous document is intact (writes are atomic); re-running resumes.
    #[error("{path}: cannot write the state: {message} (nodes may have changed; fix the cause and re-run)")]
    State { path: String, message: String },

    /// The host was never started because an earlier host failed under --fail-fast.
    #[error("{node}: skipped (an earlier host failed and --fail-fast is set)")]
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

fn indent(s: &str, pad: &str) -> String {
    s.lines().map(|l| format!("{pad}{l}")).collect::<Vec<_>>().join("\n")
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
    fn connect_error_mentions_attempts_only_when_retried() {
        let once = Error::Connect { node: "n".into(), addr: "a:22".into(), message: "refused".into(), attempts: 1 };
        assert!(!once.to_string().contains("attempts"));
        let many = Error::Connect { node: "n".into(), addr: "a:22".into(), message: "refused".into(), attempts: 4 };
        assert!(many.to_string().ends_with("(after 4 attempts)"));
    }
}
