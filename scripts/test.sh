#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (openssh-server,
# sudo, iproute2, python3, shellcheck, ...), checks the house rules (rustfmt, clippy on every
# target, shellcheck on every shell program, cargo deny), builds the real Kubernetes control
# plane once per machine (scripts/build-control-plane.sh), then runs the unit tests, the five
# test binaries (tests/bin/: lab, cluster and cnf against real sshd nodes, real against the real
# control plane in kit labs, offline for the
# hostile corpus and the snapshots; every `-o json` document they see is checked against
# docs/result.schema.json), Tacker's own code calling our package, and the lab kit's
# self-tests. Run as root: the lab uses network/mount/pid namespaces. Extra arguments go to
# `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_deps
echo "== house rules: cargo fmt --check, cargo clippy --all-targets -D warnings, shellcheck" >&2
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
# Supply chain (deny.toml): licences, duplicate versions, crates.io only. Advisories are not
# checked: the RustSec database is fetched from GitHub, out of reach here (docs/dependencies.md).
echo "== supply chain: cargo deny check licenses bans sources" >&2
install_cargo_deny
cargo deny --locked check licenses bans sources
bash scripts/lint-shell.sh
# The real Kubernetes control plane for the `real` test binary (docs/control-plane.md): built once
# per machine from the pinned Go modules into a cache outside the clone (~10 minutes and 4 GB of
# Go build cache the first time, under a second afterwards); the tests find it themselves.
echo "== the real control plane: scripts/build-control-plane.sh" >&2
bash scripts/build-control-plane.sh >/dev/null
cargo test --locked "$@"
# The round-trip table of docs/benchmarks.md is computed (src/round_trip_table.rs): it must be current.
bash scripts/round-trips.sh --check
# The delay relay of the WAN-like lab (examples/delay_relay.rs, docs/lab.md): its unit tests.
cargo test --locked --example delay_relay
# Tacker 16's own code (from PyPI, pinned and hashed) calling our package, shim and driver class.
"$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2.py  # v2: the conductor runs our CSAR's shim
# v2 on the real API (root, control plane built; else skipped loudly): Tacker's own Helm infra
# driver deploys a chart with the VIM entry our hook returned (lab rt, net 99, ~45 s).
"$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2_real.py
bash tests/tacker/run-v1.sh  # v1: Tacker's loader runs our MgmtDriver class (lab part: root)
# The VMs' cloud: a real Keystone v3 and Neutron from PyPI (pinned and hashed) over a private
# MariaDB on 127.0.0.1 (docs/openstack-lab.md). The fixture's pure parts, the lab's self-test
# (~1 min: up, populate, read back as the driver does, tenant isolation, down), then Tacker v2's
# conductor with instances that carry no address: dry runs, and the cluster's life cycle on kit
# lab tkc (net 73; root) with every address from Neutron (~1.5 min).
python3 tests/openstack/test_cloud.py
python3 tests/openstack/selftest.py
"$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2_cloud.py
if [ "$(id -u)" = 0 ]; then
    bash tests/labkit/selftest.sh
    bash tests/labkit/helm-selftest.sh
else
    echo "*** lab kit self-test SKIPPED: needs root ***" >&2
    [ "${CI:-}" != true ] || exit 1
fi
