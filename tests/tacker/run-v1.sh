#!/usr/bin/env bash
# run-v1.sh - the Tacker v1 MgmtDriver tests (tests/tacker/test_v1.py) with Tacker 16's own code.
#
#   tests/tacker/run-v1.sh [TEST...]    # default test_v1; e.g. test_v1.DryRun, test_v1.Lab
#
# Builds the Tacker venv (scripts/tacker-venv.sh), installs integrations/tacker-v1 into it
# from a copy (so the work tree gets no build/ or egg-info), as an operator installs it
# into Tacker's environment, then runs the tests with that python. The lab part needs root
# (under CI=true a missing root fails); its lab is `tkv1` on --net 72, so it can run beside
# other labs. MGMT_DRIVER_BIN defaults to target/debug/mgmt-driver.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=$(bash "$repo/scripts/tacker-venv.sh")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$repo/integrations/tacker-v1" "$tmp/src"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$repo/tests/tacker/v1-build-requirements.txt" >&2
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-index \
    --no-build-isolation --force-reinstall "$tmp/src" >&2
export MGMT_DRIVER_BIN=${MGMT_DRIVER_BIN:-$repo/target/debug/mgmt-driver}
cd "$repo/tests/tacker"
"$py" -m unittest -v "${@:-test_v1}"
