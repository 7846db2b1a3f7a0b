#!/usr/bin/env bash
# make-package.sh - assemble a VNF package directory for `mgmt-driver --package-dir`, and
# optionally the Tacker v2 CSAR zip built from it.
#
#   samples/package/make-package.sh OUTDIR [--offline-from DIR] [--helm BIN] [--csar FILE]
#
# Copies the repository's install scripts into OUTDIR/Scripts/ (so a package never carries a
# stale, hand-edited copy), the CSAR's own files (TOSCA-Metadata/, Definitions/, the Tacker v2
# shim Scripts/mgmt_driver_hook.py), packages the sample chart into Files/kubernetes/ with
# `helm package`, and, with --offline-from, the offline artifacts into OUTDIR/Files/offline/
# with a checked SHA256SUMS. With --csar, zips OUTDIR as a CSAR. See samples/package/README.md.
set -euo pipefail
export LC_ALL=C

PROG=${0##*/}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(cd -- "$SCRIPT_DIR/../.." && pwd -P)
readonly PROG SCRIPT_DIR REPO_DIR
readonly SCRIPTS=(install_k8s_cluster.sh install_helm.sh)
# The CSAR's own parts, kept here in samples/package/ (not in scripts/).
readonly CSAR_DIRS=(TOSCA-Metadata Definitions)
readonly SHIM=Scripts/mgmt_driver_hook.py
readonly CHART=samplecnf

usage() {
    cat <<EOF
usage: $PROG OUTDIR [--offline-from DIR] [--helm BIN] [--csar FILE]

  OUTDIR             package directory to create or update (TOSCA-Metadata/, Definitions/,
                     Scripts/, Files/kubernetes/, Files/offline/)
  --offline-from DIR copy DIR (debs/*.deb, cni.yaml, helm-v*-linux-<arch>.tar.gz) into
                     OUTDIR/Files/offline/. If DIR has a SHA256SUMS it must verify and list
                     every file; without one, it is generated from the files found.
  --helm BIN         the helm that packages the sample chart (default: helm on PATH; without
                     one, Files/kubernetes/ is not built and the cnf flavour cannot deploy)
  --csar FILE        also write OUTDIR as a CSAR zip to FILE (for openstack vnf package upload)
EOF
}
die() {
    printf '%s: %s\n' "$PROG" "$1" >&2
    exit "${2:-1}"
}

OUT='' OFFLINE_FROM='' HELM='' CSAR=''
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
        --helm)
            [[ $# -ge 2 ]] || die "--helm needs a helm binary" 2
            HELM=$2
            shift 2
            ;;
        --csar)
            [[ $# -ge 2 ]] || die "--csar needs a file name" 2
            CSAR=$2
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
for d in "${CSAR_DIRS[@]}" "$SHIM" "charts/$CHART/Chart.yaml"; do
    [[ -e $SCRIPT_DIR/$d ]] || die "$SCRIPT_DIR/$d is missing"
done
[[ -z $OFFLINE_FROM ]] || check_offline "$OFFLINE_FROM"
if [[ -z $HELM ]]; then
    HELM=$(command -v helm || true)
elif [[ ! -x $HELM ]]; then
    die "--helm: $HELM is not an executable helm" 2
fi

mkdir -p -- "$OUT/Scripts"
for s in "${SCRIPTS[@]}"; do
    install -m 0755 "$REPO_DIR/scripts/$s" "$OUT/Scripts/$s"
done
install -m 0755 "$SCRIPT_DIR/$SHIM" "$OUT/$SHIM"
echo "$OUT/Scripts: ${SCRIPTS[*]} ${SHIM#Scripts/}"

# The VNFD is replaced as a whole, so a file removed here does not linger in the package.
for d in "${CSAR_DIRS[@]}"; do
    rm -rf -- "${OUT:?}/$d"
    cp -R -- "$SCRIPT_DIR/$d" "$OUT/$d"
done
echo "$OUT: ${CSAR_DIRS[*]}"

if [[ -n $HELM ]]; then
    mkdir -p -- "$OUT/Files/kubernetes"
    # helm must not read or write the caller's repositories, cache or plugins.
    hhome=$(mktemp -d)
    HELM_CACHE_HOME=$hhome/cache HELM_CONFIG_HOME=$hhome/config HELM_DATA_HOME=$hhome/data \
        "$HELM" package "$SCRIPT_DIR/charts/$CHART" -d "$OUT/Files/kubernetes" >/dev/null ||
        { rm -rf -- "$hhome"; die "helm package charts/$CHART failed"; }
    rm -rf -- "$hhome"
    echo "$OUT/Files/kubernetes: $(cd -- "$OUT/Files/kubernetes" && ls -- "$CHART"-*.tgz)"
else
    printf '%s: note: no helm (--helm BIN or helm on PATH): Files/kubernetes/%s-*.tgz not built; the cnf flavour needs it\n' "$PROG" "$CHART" >&2
fi

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

# TOSCA.meta lists the scripts and the chart with their SHA-256: Tacker's onboarding refuses a
# package whose listed files do not match, so a file changed after the build cannot run.
meta=$OUT/TOSCA-Metadata/TOSCA.meta
while IFS= read -r f; do
    printf '\nName: %s\nContent-Type: %s\nAlgorithm: SHA-256\nHash: %s\n' "$f" \
        "$(case $f in *.py) echo text/x-python ;; *.sh) echo application/x-sh ;; *) echo application/gzip ;; esac)" \
        "$(sha256sum -- "$OUT/$f" | cut -d' ' -f1)" >>"$meta"
done < <(cd -- "$OUT" && find Scripts Files/kubernetes -type f 2>/dev/null | sort)

if [[ -n $CSAR ]]; then
    # A CSAR is a zip of the package root; file modes are kept (Tacker extracts them as stored).
    csar_abs=$(cd -- "$(dirname -- "$CSAR")" && pwd -P)/$(basename -- "$CSAR")
    rm -f -- "$csar_abs"
    parts=()
    for p in TOSCA-Metadata Definitions Scripts Files; do
        [[ -e $OUT/$p ]] && parts+=("$p")
    done
    (cd -- "$OUT" && python3 -m zipfile -c "$csar_abs" "${parts[@]}") || die "could not write $CSAR"
    echo "$CSAR: CSAR of $OUT ($(python3 -m zipfile -l "$csar_abs" | tail -n +2 | wc -l) entries)"
fi

cat <<EOF
k8s_cluster_installation_param (additionalParams):
  "script_path": "Scripts/install_k8s_cluster.sh",
  "helm_installation_script_path": "Scripts/install_helm.sh"$([[ -n $OFFLINE_FROM ]] && printf ',\n  "offline_artifacts_path": "Files/offline"')
EOF
