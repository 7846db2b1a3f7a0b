#!/usr/bin/env bash
# tacker-venv.sh - a virtualenv with Tacker 16.0.0 (from PyPI, pinned and hashed in
# tests/tacker/requirements.txt) for the tests that run Tacker's own code against mgmt-driver.
#
#   scripts/tacker-venv.sh [DIR]     # default target/tacker-venv; prints the venv's python
#
# Re-running is cheap: the venv is kept while its stamp matches the requirements file.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/target/tacker-venv}
req=$repo/tests/tacker/requirements.txt
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$req" >&2
# Tacker imports must work without a database or a config file.
"$venv/bin/python" -c 'from tacker.sol_refactored.conductor import vnflcm_driver_v2; vnflcm_driver_v2.VnfLcmDriverV2()' >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
