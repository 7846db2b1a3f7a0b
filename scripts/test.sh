#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (openssh-server,
# sudo, iproute2, ...), then runs unit tests and the lab tests against real sshd nodes.
# Run as root: the lab uses network/mount/pid namespaces. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_deps
cargo test --locked "$@"
