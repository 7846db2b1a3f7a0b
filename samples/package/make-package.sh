#!/usr/bin/env bash
# make-package.sh - assemble a VNF package directory for `mgmt-driver --package-dir`.
#
#   samples/package/make-package.sh OUTDIR [--offline-from DIR]
#
# Copies the repository's install scripts into OUTDIR/Scripts/ (so a package never carries a
# stale, hand-edited copy) and, with --offline-from, the offline artifacts into
# OUTDIR/Files/offline/ with a checked SHA256SUMS. See samples/package/README.md.
set -euo pipefail
export LC_ALL=C

PROG=${0##*/}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(cd -- "$SCRIPT_DIR/../.." && pwd -P)
readonly PROG SCRIPT_DIR REPO_DIR
readonly SCRIPTS=(install_k8s_cluster.sh install_helm.sh)

usage() {
    cat <<EOF
usage: $PROG OUTDIR [--offline-from DIR]

  OUTDIR             package directory to create or update (Scripts/, Files/offline/)
  --offline-from DIR copy DIR (debs/*.deb, cni.yaml, helm-v*-linux-<arch>.tar.gz) into
                     OUTDIR/Files/offline/. If DIR has a SHA256SUMS it must verify and list
                     every file; without one, it is generated from the files found.
EOF
}
die() {
    printf '%s: %s\n' "$PROG" "$1" >&2
    exit "${2:-1}"
}

OUT='' OFFLINE_FROM=''
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help)
            usage
            exit 0
            ;;
        --offline-from)
            [[ $# -ge 2 ]] || die "--offline-from needs a directory" 2
            OFFLINE_FROM=$2
            shift 2
            ;;
        -*) die "unknown option $1 (see $PROG -h)" 2 ;;
        *)
            [[ -z $OUT ]] || die "only one OUTDIR (see $PROG -h)" 2
            OUT=$1
            shift
            ;;
    esac
done
[[ -n $OUT ]] || die "OUTDIR is required (see $PROG -h)" 2

# The artifact files of DIR (relative, sorted): the ones the install scripts may use.
artifacts() {
    (cd -- "$1" && find . -type f ! -name SHA256SUMS -printf '%P\n' | sort)
}

check_offline() {
    local dir=$1 f
    [[ -d $dir ]] || die "--offline-from: not a directory: $dir"
    if ! compgen -G "$dir/debs/*.deb" >/dev/null; then
        die "--offline-from: $dir/debs/*.deb is missing (the packages to install)"
    fi
    [[ -f $dir/cni.yaml ]] || die "--offline-from: $dir/cni.yaml is missing (the CNI manifest)"
    compgen -G "$dir/helm-v*-linux-*.tar.gz" >/dev/null ||
        printf '%s: note: no helm-v*-linux-<arch>.tar.gz in %s (needed only with install_helm.sh)\n' "$PROG" "$dir" >&2
    if [[ -L $dir ]] || find "$dir" -type l | grep -q .; then
        die "--offline-from: $dir contains symlinks; copy real files"
    fi
    if [[ -f $dir/SHA256SUMS ]]; then
        (cd -- "$dir" && sha256sum --strict --quiet -c SHA256SUMS) ||
            die "--offline-from: $dir/SHA256SUMS does not verify"
        local listed
        listed=$(sed -E 's/^[0-9a-fA-F]{64} [ *]//; s#^\./##' "$dir/SHA256SUMS" | sort -u)
        while IFS= read -r f; do
            grep -qxF -- "$f" <<<"$listed" || die "--offline-from: $f is not listed in $dir/SHA256SUMS"
        done < <(artifacts "$dir")
    fi
}

for s in "${SCRIPTS[@]}"; do
    [[ -f $REPO_DIR/scripts/$s ]] || die "$REPO_DIR/scripts/$s is missing"
done
[[ -z $OFFLINE_FROM ]] || check_offline "$OFFLINE_FROM"

mkdir -p -- "$OUT/Scripts"
for s in "${SCRIPTS[@]}"; do
    install -m 0755 "$REPO_DIR/scripts/$s" "$OUT/Scripts/$s"
done
echo "$OUT/Scripts: ${SCRIPTS[*]}"

if [[ -n $OFFLINE_FROM ]]; then
    dest=$OUT/Files/offline
    if [[ -d $dest && $(cd -- "$dest" && pwd -P) == "$(cd -- "$OFFLINE_FROM" && pwd -P)" ]]; then
        die "--offline-from is OUTDIR/Files/offline itself"
    fi
    rm -rf -- "$dest"
    mkdir -p -- "$dest"
    cp -R -- "$OFFLINE_FROM"/. "$dest"/
    if [[ ! -f $dest/SHA256SUMS ]]; then
        sums=$(cd -- "$dest" && artifacts . | xargs -d '\n' sha256sum --)
        printf '%s\n' "$sums" >"$dest/SHA256SUMS"
        echo "$dest/SHA256SUMS: generated from the files found (review them before shipping)"
    fi
    (cd -- "$dest" && sha256sum --strict --quiet -c SHA256SUMS) || die "$dest/SHA256SUMS does not verify"
    echo "$dest: $(artifacts "$dest" | wc -l) artifacts, SHA256SUMS verified"
fi

cat <<EOF
k8s_cluster_installation_param (additionalParams):
  "script_path": "Scripts/install_k8s_cluster.sh",
  "helm_installation_script_path": "Scripts/install_helm.sh"$([[ -n $OFFLINE_FROM ]] && printf ',\n  "offline_artifacts_path": "Files/offline"')
EOF
