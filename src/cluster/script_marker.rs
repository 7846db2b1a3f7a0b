//! Whether the package's install script reads the join token and certificate key from its
//! environment, so they need not be in its argv (world-readable in `/proc/PID/cmdline` for the
//! script's whole run). Our `scripts/install_k8s_cluster.sh` says so with a marker line in its
//! header; a Tacker-contract script without the marker still gets `-t TOKEN` / `-k KEY`, as
//! Tacker's sample did.
//!
//! Both ways the secrets travel in the 0600 env file (`run_with_env.sh` exports its variables
//! `K8S_JOIN_TOKEN` / `K8S_CERT_KEY` to the script); only the marker-less way also puts them on
//! the script's command line. The hook reads the head of the script the nodes get
//! (`Hook::install_script_reads_secrets_from_env`) and asks [`reads_secrets_from_env`].

/// The marker: a line of its own, exactly this text (trailing blanks allowed), in the script's
/// first [`HEADER_BYTES`] bytes — the header comment, not something a value could inject later.
pub const SECRETS_FROM_ENV: &str = "# mgmt-driver: secrets-from-env";

/// How much of the script's head is searched for the marker.
pub const HEADER_BYTES: usize = 8192;

/// Whether `head` (the start of a script) carries the marker line.
pub fn reads_secrets_from_env(head: &[u8]) -> bool {
    let head = &head[..head.len().min(HEADER_BYTES)];
    head.split(|&b| b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let end = line.iter().rposition(|b| !b" \t".contains(b)).map_or(0, |i| i + 1);
        &line[..end] == SECRETS_FROM_ENV.as_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_a_whole_line_in_the_header() {
        assert!(reads_secrets_from_env(b"#!/bin/bash\n# mgmt-driver: secrets-from-env\nset -e\n"));
        assert!(reads_secrets_from_env(b"#!/bin/bash\r\n# mgmt-driver: secrets-from-env \t\r\n"));
        assert!(reads_secrets_from_env(b"# mgmt-driver: secrets-from-env"));
        // Not the marker: part of another line, another spelling, or past the header.
        assert!(!reads_secrets_from_env(b"#!/bin/bash\necho '# mgmt-driver: secrets-from-env'\n"));
        assert!(!reads_secrets_from_env(b"  # mgmt-driver: secrets-from-env\n"));
        assert!(!reads_secrets_from_env(b"# mgmt-driver: secrets-from-env-not\n"));
        assert!(!reads_secrets_from_env(b"#!/bin/sh\n# Tacker's sample: -t TOKEN -k KEY\n"));
        let mut late = vec![b'#'; HEADER_BYTES];
        late.extend_from_slice(b"\n# mgmt-driver: secrets-from-env\n");
        assert!(!reads_secrets_from_env(&late));
    }

    #[test]
    fn our_shipped_install_script_carries_it() {
        let ours = include_bytes!("../../scripts/install_k8s_cluster.sh");
        assert!(reads_secrets_from_env(ours), "scripts/install_k8s_cluster.sh lost its marker line");
    }
}
