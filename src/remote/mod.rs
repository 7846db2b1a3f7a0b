//! The shell programs the driver runs on nodes, one `.sh` file each beside this one, embedded at
//! build time. Keeping them as files lets shellcheck read every word of them
//! (`scripts/lint-shell.sh`); the Rust side only chooses the program and its arguments.
//!
//! A program never has a value pasted into its text: it is run as
//! `sh -c <program> <name> <arg>...`, every argument quoted with [`crate::quote`], so the
//! values reach it only as `$1`, `$2`, ... (and `$0` is its file name, which the shell uses in
//! its own error messages). One exec request, as before: the upload programs keep their single
//! round trip. Secrets are never arguments: they travel on stdin or in a 0600 env file.
//!
//! People see such a command as `<name> <arg>...` (see [`label`]), not as the whole text.

use crate::error::Result;
use crate::quote::{join, quote};

/// One node-side program: its file name and its text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Program {
    pub name: &'static str,
    pub text: &'static str,
}

/// `program!("x.sh")` is `src/remote/x.sh`; `program!("lib.sh", "x.sh")` is `x.sh` run after the
/// functions of `lib.sh` (sent as one text, still one exec); `program!(["a_lib.sh", "b_lib.sh"], "x.sh")`
/// after those of several.
macro_rules! program {
    ($file:literal) => {
        Program { name: $file, text: include_str!($file) }
    };
    ($lib:literal, $file:literal) => {
        Program { name: $file, text: concat!(include_str!($lib), include_str!($file)) }
    };
    ([$($lib:literal),+], $file:literal) => {
        Program { name: $file, text: concat!($(include_str!($lib),)+ include_str!($file)) }
    };
}

// The wrapper of every command (src/command.rs); the same, receiving one file first (run-script).
pub(crate) const LEASH: Program = program!("leash.sh");
pub(crate) const LEASH_RECEIVING: Program = program!("upload_lib.sh", "leash.sh");

// Cluster steps (src/cluster/node_cmd.rs).
pub(crate) const HOSTS_UPDATE: Program = program!("file_lib.sh", "hosts_update.sh");
pub(crate) const HAPROXY_BACKEND: Program = program!("file_lib.sh", "haproxy_backend.sh");
pub(crate) const ADMIN_TOKEN: Program = program!("admin_token.sh");
pub(crate) const DELETE_NODE: Program = program!("delete_node.sh");
pub(crate) const PACK_CHARTS: Program = program!("pack_charts.sh");
pub(crate) const UNPACK_CHARTS: Program = program!("archive_lib.sh", "unpack_charts.sh");
pub(crate) const HELM_REPO_LIST: Program = program!("helm_repo_list.sh");
pub(crate) const RUN_WITH_ENV: Program = program!("run_with_env.sh");
pub(crate) const CLEAN_ENV: Program = program!("clean_env.sh");
pub(crate) const REGISTRY_APPLY: Program = program!("file_lib.sh", "registry_apply.sh");
pub(crate) const PROXY_CLEANUP: Program = program!("proxy_cleanup.sh");

// Storage server and NFS clients (src/cluster/storage_ops.rs).
pub(crate) const NFS_PACKAGES: Program = program!("nfs_packages.sh");
pub(crate) const STORAGE_VOLUME: Program = program!("file_lib.sh", "storage_volume.sh");
pub(crate) const NFS_EXPORTS: Program = program!("file_lib.sh", "nfs_exports.sh");

// Uploads (src/ssh/transfer.rs).
pub(crate) const UPLOAD_INLINE: Program = program!("upload_lib.sh", "upload_inline.sh");
pub(crate) const UPLOAD_PROBE: Program = program!("upload_lib.sh", "upload_probe.sh");
pub(crate) const UPLOAD_FINALIZE: Program = program!("upload_lib.sh", "upload_finalize.sh");
pub(crate) const UPLOAD_STREAM: Program = program!("upload_stream.sh");

// CNF releases installed or upgraded in one exec, and everything a master needs before them in
// one exec (src/cnf/helm_apply.rs).
pub(crate) const HELM_APPLY: Program = program!("helm_apply_lib.sh", "helm_apply.sh");
pub(crate) const HELM_REMOVE: Program = program!("helm_remove.sh");
// A whole-CNF heal in one exec (src/cnf/heal_program.rs).
pub(crate) const CNF_HEAL: Program = program!("cnf_heal.sh");
pub(crate) const HELM_PREPARE: Program =
    program!(["archive_lib.sh", "helm_env_lib.sh", "chart_lib.sh", "helm_apply_lib.sh"], "helm_prepare.sh");

// Execution environments and primitives (src/ee/, src/primitive/).
pub(crate) const AUTHORIZED_KEY: Program = program!("authorized_key.sh");
pub(crate) const PRIMITIVE_RUN: Program = program!("primitive_run.sh");
pub(crate) const PRIMITIVE_RESULT: Program = program!("primitive_result.sh");

// The per-cluster Helm environment on the masters (src/cnf/cluster_env.rs).
pub(crate) const HELM_ENV: Program = program!("helm_env_lib.sh", "helm_env.sh");
pub(crate) const HELM_ENV_RESET: Program = program!("helm_env_reset.sh");

/// Every program, for the test that no file here is left unused. Only tests read this list, so a
/// program no builder runs is a dead-code warning (and `clippy -D warnings` fails).
#[cfg(test)]
const ALL: &[Program] = &[
    LEASH,
    LEASH_RECEIVING,
    HOSTS_UPDATE,
    HAPROXY_BACKEND,
    ADMIN_TOKEN,
    DELETE_NODE,
    PACK_CHARTS,
    UNPACK_CHARTS,
    HELM_REPO_LIST,
    RUN_WITH_ENV,
    CLEAN_ENV,
    REGISTRY_APPLY,
    PROXY_CLEANUP,
    NFS_PACKAGES,
    STORAGE_VOLUME,
    NFS_EXPORTS,
    UPLOAD_INLINE,
    UPLOAD_PROBE,
    UPLOAD_FINALIZE,
    UPLOAD_STREAM,
    HELM_APPLY,
    HELM_PREPARE,
    HELM_REMOVE,
    CNF_HEAL,
    AUTHORIZED_KEY,
    PRIMITIVE_RUN,
    PRIMITIVE_RESULT,
    HELM_ENV,
    HELM_ENV_RESET,
];

impl Program {
    /// The command that runs this program with `args` as its positional parameters.
    pub fn command<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let mut s = format!("sh -c {} {}", quote(self.text)?, self.name);
        if !args.is_empty() {
            s.push(' ');
            s.push_str(&join(args)?);
        }
        Ok(s)
    }
}

/// What people see of a command built by [`Program::command`]: `<name> <arg>...`, the text after
/// the program. `None` for anything else. Reads the exact form [`quote`] writes: a single-quoted
/// word in which a quote is written `'\''`.
///
/// An environment before the program (`export KUBECONFIG=...; `, from `crate::kube`) is not
/// shown, like the program's text: it is ours, not a value of the run, and a kubectl program
/// reads its kubeconfig from it.
pub fn label(script: &str) -> Option<&str> {
    let rest = without_exports(script)?.strip_prefix("sh -c '")?;
    let end = quoted_len(rest)?;
    let tail = rest[end..].strip_prefix(' ')?;
    let name = tail.split(' ').next()?;
    let stem = name.strip_suffix(".sh")?;
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    (!stem.is_empty() && stem.chars().all(plain)).then_some(tail)
}

/// The length of the rest of a single-quoted word as [`quote`] writes it (after its opening
/// quote, up to and with its closing one).
fn quoted_len(rest: &str) -> Option<usize> {
    let mut at = 0;
    loop {
        let q = at + rest[at..].find('\'')?;
        if rest[q..].starts_with("'\\''") {
            at = q + 4;
        } else {
            return Some(q + 1);
        }
    }
}

/// `script` without an `export NAME=WORD ...; ` prefix (`crate::kube::kubeconfig::exports`),
/// each WORD as [`quote`] writes it; `script` itself when it has none, `None` when the prefix is
/// not of that form.
fn without_exports(script: &str) -> Option<&str> {
    let Some(mut rest) = script.strip_prefix("export ") else {
        return Some(script);
    };
    loop {
        let (name, value) = rest.split_once('=')?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return None;
        }
        let len = match value.strip_prefix('\'') {
            Some(q) => 1 + quoted_len(q)?,
            None => value.find([' ', ';', '\'']).filter(|&n| n > 0)?,
        };
        rest = &value[len..];
        if let Some(after) = rest.strip_prefix("; ") {
            return Some(after);
        }
        rest = rest.strip_prefix(' ')?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn every_file_here_is_a_program_the_driver_sends() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/remote");
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                ALL.iter().any(|p| p.text.contains(text.as_str())),
                "src/remote/{name} is not embedded in any program (add it to a program! and to ALL)"
            );
            if !name.ends_with("_lib.sh") {
                assert!(ALL.iter().any(|p| p.name == name), "src/remote/{name} is not a program in ALL");
            }
        }
        for p in ALL {
            assert!(dir.join(p.name).is_file(), "{} is not a file in src/remote", p.name);
            assert!(p.text.starts_with("#!/bin/sh\n"), "{}: no #!/bin/sh line (shellcheck reads it as sh)", p.name);
        }
    }

    #[test]
    fn arguments_arrive_as_positional_parameters_and_the_label_shows_them() {
        let p = Program { name: "echo_args.sh", text: "#!/bin/sh\nprintf '[%s]' \"$0\" \"$@\"\n" };
        let args = ["a b", "it's", "$(id)", "", "-n"];
        let cmd = p.command(&args).unwrap();
        let out = Command::new("sh").arg("-c").arg(&cmd).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "[echo_args.sh][a b][it's][$(id)][][-n]");
        assert_eq!(label(&cmd), Some("echo_args.sh 'a b' 'it'\\''s' '$(id)' '' -n"));
        assert_eq!(label(&p.command::<&str>(&[]).unwrap()), Some("echo_args.sh"));
        for p in ALL {
            let cmd = p.command(&["x'y"]).unwrap();
            assert_eq!(label(&cmd), Some(format!("{} 'x'\\''y'", p.name).as_str()));
        }
    }

    #[test]
    fn other_commands_have_no_label() {
        for s in [
            "hostname",
            "sh -c 'echo hi'",
            "sh -c 'x' y",
            "sh -c 'x' Y.sh",
            "sh -c 'unterminated a.sh",
            "sh -c 'x'a.sh",
            "sh -c 'x' .sh",
            "export KUBECONFIG=/k sh -c 'x' a.sh",
            "export =/k; sh -c 'x' a.sh",
            "export k=/k; sh -c 'x' a.sh",
            "export K='/k; sh -c 'x' a.sh",
            "export K=; sh -c 'x' a.sh",
            "export K=/k; echo; sh -c 'x' a.sh",
        ] {
            assert_eq!(label(s), None, "{s}");
        }
    }

    #[test]
    fn an_environment_before_a_program_is_not_shown() {
        let cmd = HELM_ENV.command(&["d"]).unwrap();
        for env in ["export KUBECONFIG=/etc/kubernetes/admin.conf; ", "export A='x; y'\\''z' B=/b; "] {
            assert_eq!(label(&format!("{env}{cmd}")), Some("helm_env.sh d"), "{env}");
        }
    }
}

#[cfg(test)]
mod safety_tests;
