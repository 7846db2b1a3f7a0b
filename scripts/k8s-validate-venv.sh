#!/usr/bin/env bash
# k8s-validate-venv.sh - a virtualenv with kubernetes-validate (from PyPI, pinned and hashed in
# tests/k8s/requirements.txt): it checks manifests against the Kubernetes API's own JSON schemas,
# shipped in the package, so no API server is needed. Used by the `sites export k8s-job` test.
#
#   scripts/k8s-validate-venv.sh [DIR]   # default target/k8s-validate-venv; prints the command
#
# Re-running is cheap: the venv is kept while its stamp matches the requirements file.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/target/k8s-validate-venv}
req=$repo/tests/k8s/requirements.txt
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ -x $venv/bin/kubernetes-validate && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "$venv/bin/kubernetes-validate"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$req" >&2
"$venv/bin/kubernetes-validate" --version >&2
echo "$want" > "$stamp"
echo "$venv/bin/kubernetes-validate"
