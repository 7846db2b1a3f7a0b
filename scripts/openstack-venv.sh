#!/usr/bin/env bash
# openstack-venv.sh - a virtualenv with a real Keystone (30.0.0) and Neutron (29.0.0) from PyPI,
# pinned and hashed in tests/openstack/requirements.txt, for scripts/openstack-lab.sh.
#
#   scripts/openstack-venv.sh [DIR]     # default target/openstack-venv; prints the venv's python
#
# Re-running is cheap: the venv is kept while its stamp matches both requirements files.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/target/openstack-venv}
req=$repo/tests/openstack/requirements.txt
build=$repo/tests/openstack/build-requirements.txt
stamp=$venv/.requirements.sha256
want=$(cat "$req" "$build" | sha256sum | cut -d' ' -f1)
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes)
# ovs ships only as an sdist; building it with the pinned setuptools (no build isolation) keeps
# every file that ends up in the venv hashed.
"${pip[@]}" -r "$build" >&2
"${pip[@]}" --no-build-isolation -r "$req" >&2
# Both services must import before the lab tries to start them.
"$venv/bin/python" -c 'import keystone.server.wsgi, neutron.server.api, pymysql' >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
