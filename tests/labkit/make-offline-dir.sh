#!/usr/bin/env bash
# make-offline-dir.sh OUTDIR - LAB KIT: an offline artifacts directory for lab runs.
#
# Lab nodes have no internet, so lab runs use the install scripts' offline mode
# (K8S_OFFLINE_DIR, see docs/install-scripts.md). This builds the directory with
# lab-kit stand-ins: placeholder .deb files whose names the kit's apt-get reads,
# a tiny CNI manifest, the kit's helm tarball, and a real SHA256SUMS over all of
# them. Nothing here is a real package, unless HELM_TARBALL is given: a real
# helm-vX.Y.Z-linux-amd64.tar.gz (fetch-helm.sh writes target/helm/helm3/ and
# helm4/), which then replaces the kit's helm stand-in tarball.
set -euo pipefail
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: ${0##*/} OUTDIR [HELM_TARBALL]" >&2; exit 2; }
out=$1
helm_tgz=${2:-}
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
mkdir -p "$out/debs"
for deb in kubeadm_1.31.4-1.1_amd64.deb kubelet_1.31.4-1.1_amd64.deb kubectl_1.31.4-1.1_amd64.deb \
    containerd_1.7.12-0ubuntu4_amd64.deb haproxy_2.8.5-1ubuntu3_amd64.deb keepalived_2.2.8-1build2_amd64.deb; do
    printf 'lab kit stand-in package %s\n' "$deb" >"$out/debs/$deb"
done
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: lab-kit-cni\n' >"$out/cni.yaml"
rm -f "$out"/helm-v*-linux-amd64.tar.gz
if [ -n "$helm_tgz" ]; then
    case ${helm_tgz##*/} in
    helm-v*-linux-amd64.tar.gz) cp -- "$helm_tgz" "$out/" ;;
    *) echo "${0##*/}: $helm_tgz is not a helm-vX.Y.Z-linux-amd64.tar.gz" >&2; exit 2 ;;
    esac
else
    bash "$here/make-helm-tarball.sh" "$out" >/dev/null
fi
# shellcheck disable=SC2094 # find skips SHA256SUMS itself
(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum >SHA256SUMS)
echo "$out"
