#!/usr/bin/env bash
# make-chart-repo.sh OUTDIR HELM [URL] - test charts and an HTTP chart repository, made with
# the REAL helm.
#
# Part of the mgmt-driver LAB KIT (tests/labkit/, see docs/labkit.md, section "Helm").
# HELM is a real helm binary (tests/labkit/fetch-helm.sh). Writes
#
#   OUTDIR/local/localhelm-0.1.0.tgz   `helm create localhelm` as generated (a Deployment whose
#                                      replicas come from .Values.replicaCount), packaged:
#                                      Tacker's "<chart>-<version>.tgz" local chart
#   OUTDIR/repo/nginxlab-0.1.0.tgz     `helm create nginxlab` plus a ConfigMap
#   OUTDIR/repo/nginxlab-0.2.0.tgz       (<fullname>-greeting, data.greeting from .Values.greeting);
#                                      0.2.0 changes the defaults: greeting "hello from 0.2.0"
#                                      (0.1.0: "hello from 0.1.0"), image.tag "1.27" (0.1.0: "1.26")
#                                      and appVersion 1.27.0 (0.1.0: 1.26.0)
#   OUTDIR/repo/index.yaml             `helm repo index` (URLs relative, or under URL when given,
#                                      e.g. http://198.18.60.1:8879)
#   OUTDIR/src/                        the chart sources
#
# Serve OUTDIR/repo with tests/labkit/serve-repo.py. The chart sources are deterministic; the
# .tgz and index.yaml carry helm's own timestamps.
set -euo pipefail
export LC_ALL=C

PROG=${0##*/}
usage() {
    cat <<USAGE
usage: $PROG OUTDIR HELM [URL]
Writes OUTDIR/local/localhelm-0.1.0.tgz and the chart repository OUTDIR/repo (nginxlab 0.1.0 and
0.2.0 + index.yaml, with URLs under URL when given), using HELM, a real helm binary.
USAGE
}
case ${1:-} in
-h | --help)
    usage
    exit 0
    ;;
esac
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    usage >&2
    exit 2
fi
out=$1 helm=$2 url=${3:-}
[ -x "$helm" ] || {
    echo "$PROG: $helm is not an executable helm (see tests/labkit/fetch-helm.sh)" >&2
    exit 1
}
"$helm" version --short >/dev/null 2>&1 || {
    echo "$PROG: $helm version failed" >&2
    exit 1
}
case $helm in /*) ;; *) helm=$PWD/$helm ;; esac
mkdir -p -- "$out"
out=$(cd -- "$out" && pwd -P)
rm -rf -- "$out/src" "$out/local" "$out/repo"
mkdir -p "$out/src" "$out/local" "$out/repo"

# helm must not touch the caller's config (no repositories, caches, plugins)
hhome=$(mktemp -d)
trap 'rm -rf -- "$hhome"' EXIT
export HELM_CONFIG_HOME=$hhome/config HELM_CACHE_HOME=$hhome/cache HELM_DATA_HOME=$hhome/data
H() { "$helm" "$@"; }

# set_field FILE KEY VALUE: replace the top-level "KEY: ..." line
set_field() {
    sed -i -E "s|^$2:.*|$2: $3|" "$1"
    grep -qxF "$2: $3" "$1" || {
        echo "$PROG: could not set $2 in $1" >&2
        exit 1
    }
}

# ---- localhelm 0.1.0 (as helm create makes it)
(cd "$out/src" && H create localhelm >/dev/null)
set_field "$out/src/localhelm/Chart.yaml" version 0.1.0
grep -q '^replicaCount: ' "$out/src/localhelm/values.yaml"
H lint "$out/src/localhelm" >/dev/null
H package "$out/src/localhelm" -d "$out/local" >/dev/null
[ -f "$out/local/localhelm-0.1.0.tgz" ]

# ---- nginxlab 0.1.0 and 0.2.0
nginxlab() { # VERSION IMAGE_TAG APP_VERSION
    local v=$1 tag=$2 app=$3 d=$out/src/nginxlab-$1
    mkdir -p "$d"
    (cd "$d" && H create nginxlab >/dev/null)
    d=$d/nginxlab
    set_field "$d/Chart.yaml" version "$v"
    set_field "$d/Chart.yaml" appVersion "\"$app\""
    set_field "$d/Chart.yaml" description "\"lab kit test chart nginxlab $v (mgmt-driver tests/labkit)\""
    sed -i -E "0,/^  tag: .*/s||  tag: \"$tag\"|" "$d/values.yaml"
    grep -qxF "  tag: \"$tag\"" "$d/values.yaml"
    cat >>"$d/values.yaml" <<VALUES

# lab kit: shown in the <fullname>-greeting ConfigMap; 0.2.0 changes it
greeting: "hello from $v"
VALUES
    cat >"$d/templates/configmap.yaml" <<'TPL'
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "nginxlab.fullname" . }}-greeting
  labels:
    {{- include "nginxlab.labels" . | nindent 4 }}
data:
  greeting: {{ .Values.greeting | quote }}
  chartVersion: {{ .Chart.Version | quote }}
TPL
    H lint "$d" >/dev/null
    H package "$d" -d "$out/repo" >/dev/null
    [ -f "$out/repo/nginxlab-$v.tgz" ]
}
nginxlab 0.1.0 1.26 1.26.0
nginxlab 0.2.0 1.27 1.27.0

if [ -n "$url" ]; then
    H repo index "$out/repo" --url "$url"
else
    H repo index "$out/repo"
fi
[ -f "$out/repo/index.yaml" ]
find "$out/local" "$out/repo" -type f | LC_ALL=C sort
