//! Kubernetes' own schemas for what we generate: `kubernetes-validate` (PyPI, pinned and hashed,
//! offline schemas) in the venv `scripts/k8s-validate-venv.sh` makes on first use. Shared by the
//! Job export, workload and storage tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest and the newest Kubernetes the generated objects must be valid for.
pub const VERSIONS: [&str; 2] = ["1.31.0", "1.37.0"];

/// The `kubernetes-validate` executable (the venv is made, or checked, first).
pub fn validator() -> PathBuf {
    let out = Command::new("bash").arg(super::repo().join("scripts/k8s-validate-venv.sh")).output().unwrap();
    assert!(out.status.success(), "k8s-validate-venv.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// (passed, output) of a strict validation of `file` for `version`.
pub fn validate(kv: &Path, file: &Path, version: &str) -> (bool, String) {
    let out = Command::new(kv).args(["--strict", "-k", version]).arg(file).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success() && !text.contains("ERROR"), text)
}
