#!/usr/bin/env bash
# run-v1.sh - the Tacker v1 MgmtDriver tests (tests/tacker/test_v1.py) with Tacker 16's own code.
#
#   tests/tacker/run-v1.sh [TEST...]    # default test_v1; e.g. test_v1.DryRun, test_v1.Lab
#
# Builds the Tacker venv (scripts/tacker-venv.sh), installs integrations/tacker-v1 into it
# from the work tree, as its README tells an operator to install it into Tacker's
# environment (offline: its build backend, flit_core, pinned in v1-build-requirements.txt),
# fails if that left anything in the tree (build/, *.egg-info, __pycache__: issue 22), then
# runs the tests with that python. The lab part needs root
# (under CI=true a missing root fails); its lab is `tkv1` on --net 72, so it can run beside
# other labs. MGMT_DRIVER_BIN defaults to target/debug/mgmt-driver.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=$(bash "$repo/scripts/tacker-venv.sh")
src=$repo/integrations/tacker-v1
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$repo/tests/tacker/v1-build-requirements.txt" >&2
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-index \
    --no-build-isolation --force-reinstall "$src" >&2
# Untracked or ignored files under the package's directory: what the install wrote there.
left=$(git -C "$repo" status --porcelain --ignored --untracked-files=all -- integrations/tacker-v1 |
    grep -E '^(\?\?|!!) ' || true)
if [[ -n $left ]]; then
    echo "run-v1.sh: installing integrations/tacker-v1 wrote into the work tree:" >&2
    echo "$left" >&2
    exit 1
fi
export MGMT_DRIVER_BIN=${MGMT_DRIVER_BIN:-$repo/target/debug/mgmt-driver}
cd "$repo/tests/tacker"
"$py" -m unittest -v "${@:-test_v1}"
