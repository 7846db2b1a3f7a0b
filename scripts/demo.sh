#!/usr/bin/env bash
# The main job on a local default: bring up a 3-node lab of real OpenSSH servers (network
# namespaces, 198.18.3.0/24), fan a script out to every node with mgmt-driver, print the
# per-node results, and tear the lab down again. Run as root on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_deps
cargo build --release --locked
N=${N:-3}
trap 'bash scripts/lab.sh down --name demo >/dev/null 2>&1 || true' EXIT
bash scripts/lab.sh up "$N" --name demo --net 3
./target/release/mgmt-driver run-script -o plain -i target/lab/demo/inventory.yaml \
    samples/scripts/node-info.sh "hello from mgmt-driver"
