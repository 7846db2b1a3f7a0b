#!/usr/bin/env bash
# make-helm-tarball.sh OUTDIR - build the lab kit's fake helm release tarball.
#
# Part of the mgmt-driver LAB KIT (tests/labkit/, see docs/labkit.md). Writes
# OUTDIR/helm-v3.99.0-lab-linux-amd64.tar.gz with the layout of a real helm
# release (linux-amd64/helm, LICENSE, README.md), where linux-amd64/helm is the
# kit's helm STAND-IN (tests/labkit/helm-standin, a self-contained Python script),
# not the real helm. The archive is reproducible (fixed owner, mtime and order), so
# its sha256 is stable. For the REAL helm 3/4 tarballs see fetch-helm.sh; on kit
# nodes the wrapper tests/labkit/helm (/usr/local/sbin/helm) runs whichever helm
# install_helm.sh put at /usr/local/bin/helm.
set -euo pipefail

usage() {
    cat <<USAGE
usage: ${0##*/} OUTDIR
Writes OUTDIR/helm-v3.99.0-lab-linux-amd64.tar.gz holding linux-amd64/helm = the lab kit's
helm stand-in (NOT the real helm), for install_helm.sh on lab-kit nodes.
USAGE
}

case ${1:-} in
-h | --help)
    usage
    exit 0
    ;;
'')
    usage >&2
    exit 2
    ;;
esac
[ $# -eq 1 ] || {
    usage >&2
    exit 2
}

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
out=$1
mkdir -p -- "$out"
out=$(cd -- "$out" && pwd -P)
name=helm-v3.99.0-lab-linux-amd64.tar.gz

stage=$(mktemp -d)
trap 'rm -rf -- "$stage"' EXIT
mkdir "$stage/linux-amd64"
install -m 0755 "$here/helm-standin" "$stage/linux-amd64/helm"
cat >"$stage/linux-amd64/README.md" <<'README'
# helm v3.99.0-lab: LAB KIT STAND-IN

This archive comes from mgmt-driver's lab kit (tests/labkit/make-helm-tarball.sh).
`linux-amd64/helm` is a stand-in written in Python, not the real Helm: it supports
`version`, `repo add|list|remove|update`, and nothing that talks to a cluster.
README
printf 'Lab kit stand-in for helm; part of mgmt-driver (Apache-2.0).\n' \
    >"$stage/linux-amd64/LICENSE"
chmod 0644 "$stage/linux-amd64/README.md" "$stage/linux-amd64/LICENSE"
touch -d @0 "$stage/linux-amd64" "$stage/linux-amd64"/*

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - linux-amd64 |
    gzip -n -9 >"$out/$name.tmp"
mv -f -- "$out/$name.tmp" "$out/$name"
printf '%s\n' "$out/$name"
