#!/usr/bin/env bash
# build-control-plane.sh - builds a REAL Kubernetes control plane from the Go modules pinned in
# controlplane/ (see docs/control-plane.md) into a cache outside the clone, and prints its path.
#
#   controlplane/kubernetes (go.mod, go.sum): k8s.io/kubernetes with every staging module
#       (k8s.io/api, k8s.io/apiserver, ...) replaced by the published v0.N.M of release v1.N.M
#       -> kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   controlplane/etcd (go.mod, go.sum): go.etcd.io/etcd/server/v3 and etcdctl/v3, the etcd
#       release that Kubernetes release pins (build/dependencies.yaml, kubeadm's DefaultEtcdVersion)
#       -> etcd, etcdctl
#   controlplane/kwok (go.mod, go.sum): sigs.k8s.io/kwok, a kubelet stand-in (no container runs)
#       -> kwok, and kwok-stages.yaml: the Stage resources it needs, copied from the module
#
# The cache directory is CACHE_ROOT/KEY, where KEY hashes the go.mod and go.sum files, the build
# flags below and the Go version, so a second clone or CI on the same machine reuses the build,
# and a changed pin builds anew beside the old one. CACHE_ROOT is $MGMT_DRIVER_CONTROL_PLANE_CACHE
# if set, else ${XDG_CACHE_HOME:-$HOME/.cache}/mgmt-driver/control-plane.
# Builds run one at a time per CACHE_ROOT (flock), into a temporary directory that is renamed
# into place only when every binary is built and answers --version with the pinned version.
# Idempotent: with the directory in place it builds nothing and prints it at once.
#
# Needs: Go 1.26 or newer, flock, sha256sum; network only to the Go module proxy, for the first
# build on a machine (the module cache, GOMODCACHE, keeps the sources afterwards).
# Output: progress on stderr; the LAST LINE OF STDOUT is the directory holding the binaries
# (etcd, etcdctl, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
# kwok-stages.yaml, VERSIONS, SHA256SUMS).
set -euo pipefail
umask 022
export LC_ALL=C

PROG=${0##*/}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(dirname -- "$SCRIPT_DIR")
K8S_MOD=$REPO_DIR/controlplane/kubernetes
ETCD_MOD=$REPO_DIR/controlplane/etcd
KWOK_MOD=$REPO_DIR/controlplane/kwok
readonly PROG SCRIPT_DIR REPO_DIR K8S_MOD ETCD_MOD KWOK_MOD

# etcd's own build (scripts/build_lib.sh of etcd) stamps the short git commit of the release into
# go.etcd.io/etcd/api/v3/version.GitSHA; the module proxy names the commit of tag v3.7.0 as
# 4d71f7c83a2cef992d57abd3284edfaf66c91a4a. Change it together with the etcd pin.
readonly ETCD_GIT_SHA=4d71f7c
# KWOK's release build (its Makefile and hack/releases.sh) stamps the tag into
# sigs.k8s.io/kwok/pkg/consts.Version and "v" + the first line of its supported_releases.txt into
# consts.KubeVersion (1.36.1 for v0.8.0; checked against the module after the build). Change it
# together with the kwok pin.
readonly KWOK_KUBE_VERSION=v1.36.1
# The Stage resources that kwokctl gives kwok by default (the module's kustomize/stage/fast:
# node/fast, node/heartbeat-with-lease, pod/fast), in that order. kwok itself has no default
# stages: without them it refuses to start ("no stages found").
readonly KWOK_STAGES=(
    kustomize/stage/node/fast/node-initialize.yaml
    kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    kustomize/stage/pod/fast/pod-ready.yaml
    kustomize/stage/pod/fast/pod-complete.yaml
    kustomize/stage/pod/fast/pod-delete.yaml
)

usage() {
    cat <<EOF
usage: $PROG [--print-key]
Builds etcd, etcdctl, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok
from the Go modules in controlplane/ into a cache directory outside the clone (unless already there)
and prints that directory as the last line of stdout.
  --print-key   print the cache directory this checkout would use, build nothing
Environment: MGMT_DRIVER_CONTROL_PLANE_CACHE (cache root; default
\${XDG_CACHE_HOME:-\$HOME/.cache}/mgmt-driver/control-plane). GOMODCACHE, GOCACHE, GOPROXY,
GOMAXPROCS are the go command's own. The first build takes tens of minutes on 2 cores.
EOF
}
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}

print_key=0
case ${1-} in
'') ;;
--print-key) print_key=1 ;;
-h | --help)
    usage
    exit 0
    ;;
*)
    usage >&2
    exit 2
    ;;
esac
[ $# -le 1 ] || {
    usage >&2
    exit 2
}

command -v go >/dev/null 2>&1 || die "go is not installed (Go 1.26 or newer is needed)"
command -v flock >/dev/null 2>&1 || die "flock is not installed (util-linux)"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum is not installed (coreutils)"
readonly MOD_FILES=("$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$ETCD_MOD/go.mod" "$ETCD_MOD/go.sum"
    "$KWOK_MOD/go.mod" "$KWOK_MOD/go.sum")
for f in "${MOD_FILES[@]}"; do
    [ -f "$f" ] || die "missing $f"
done

go_version=$(go env GOVERSION)
case $go_version in
go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
*) die "$go_version is too old: controlplane/*/go.mod need Go 1.26 or newer" ;;
esac

# The versions come from the pins themselves, so go.mod is the one place to change them.
mod_version() { # mod_version MODULE_DIR MODULE_PATH: the version built, after any replace line
    (cd -- "$1" && go list -mod=readonly -m \
        -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$2")
}
k8s_version=$(mod_version "$K8S_MOD" k8s.io/kubernetes)
etcd_version=$(mod_version "$ETCD_MOD" go.etcd.io/etcd/server/v3)
etcdctl_version=$(mod_version "$ETCD_MOD" go.etcd.io/etcd/etcdctl/v3)
kwok_version=$(mod_version "$KWOK_MOD" sigs.k8s.io/kwok)
[[ $kwok_version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "unexpected sigs.k8s.io/kwok version '$kwok_version'"
[[ $k8s_version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "unexpected k8s.io/kubernetes version '$k8s_version'"
k8s_minor=${BASH_REMATCH[1]}
[ "$etcd_version" = "$etcdctl_version" ] || die "etcd server $etcd_version and etcdctl $etcdctl_version differ"
# Every staging module must be replaced by the matching v0.N.M of release v1.N.M.
staging_want=v0.${k8s_version#v1.}
replaced=$(cd -- "$K8S_MOD" && go list -mod=readonly -m \
    -f '{{if .Replace}}{{.Path}} {{.Replace.Path}} {{.Replace.Version}}{{end}}' all)
[ -n "$replaced" ] || die "controlplane/kubernetes/go.mod replaces no staging module"
while read -r path rpath rversion; do
    if [ "$rpath" != "$path" ] || [ "$rversion" != "$staging_want" ]; then
        die "$path is replaced by $rpath $rversion; release $k8s_version needs $path $staging_want"
    fi
done <<<"$replaced"
[ "$(mod_version "$K8S_MOD" k8s.io/apiserver)" = "$staging_want" ] ||
    die "k8s.io/apiserver is not pinned to $staging_want"

# What `--version` prints. Kubernetes' own build (hack/lib/version.sh) sets these variables in
# both k8s.io/component-base/version and k8s.io/client-go/pkg/version; buildDate is the release's
# publication time at the module proxy, so the flags (and the cache key) are reproducible. The
# proxy does not name the release's git commit, so gitCommit is empty (not the "$Format:%H$"
# placeholder of the source) and gitTreeState is "archive", as for a build from a source archive.
build_date=$(cd -- "$K8S_MOD" && go list -mod=readonly -m \
    -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
[ -n "$build_date" ] || build_date=1970-01-01T00:00:00Z
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
    k8s_ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=archive -X $pkg.buildDate=$build_date"
done
etcd_ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_GIT_SHA"
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok_version"
kwok_ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KWOK_KUBE_VERSION"
# Static binaries as upstream ships them (Kubernetes' KUBE_STATIC_LIBRARIES, etcd's CGO_ENABLED=0).
build_flags=(-trimpath -buildvcs=false -mod=readonly)
readonly K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

key=$(
    {
        for f in "${MOD_FILES[@]}"; do
            sha256sum <"$f"
        done
        printf 'flags %s\nk8s %s\netcd %s\ncgo 0\n' "${build_flags[*]}" "$k8s_ldflags" "$etcd_ldflags"
        printf 'go %s %s/%s\n' "$go_version" "$(go env GOOS)" "$(go env GOARCH)"
        printf 'cmds %s etcd etcdctl kwok\n' "${K8S_CMDS[*]}"
        printf 'kwok %s\nkwok-stages %s\n' "$kwok_ldflags" "${KWOK_STAGES[*]}"
    } | sha256sum | cut -c1-16
)
cache_root=${MGMT_DRIVER_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mgmt-driver/control-plane}
name=k8s-$k8s_version-etcd-$etcd_version-kwok-$kwok_version-$key
dir=$cache_root/$name
if [ "$print_key" = 1 ]; then
    printf '%s\n' "$dir"
    exit 0
fi

complete() { # complete DIR: every binary in place and the checksums match
    local d=$1 b
    for b in "${K8S_CMDS[@]}" etcd etcdctl kwok; do [ -x "$d/$b" ] || return 1; done
    [ -f "$d/VERSIONS" ] && [ -f "$d/kwok-stages.yaml" ] && (cd -- "$d" && sha256sum --quiet --strict -c SHA256SUMS) >/dev/null 2>&1
}

if [ -d "$dir" ] && complete "$dir"; then
    printf '%s\n' "$dir"
    exit 0
fi

mkdir -p -- "$cache_root"
cache_root=$(cd -- "$cache_root" && pwd -P)
dir=$cache_root/$name
# One build at a time per cache root: a second clone waits and then finds the result.
exec 9>"$cache_root/.build.lock"
if ! flock -n 9; then
    log "another build holds $cache_root/.build.lock; waiting for it"
    flock 9
fi
if [ -d "$dir" ]; then
    if complete "$dir"; then
        printf '%s\n' "$dir"
        exit 0
    fi
    # Only a rename puts a directory here, so this one was damaged afterwards: build it anew.
    log "$dir is incomplete or altered; rebuilding it"
    rm -rf -- "$dir"
fi

tmp=$(mktemp -d "$cache_root/.tmp-$name.XXXXXX")
cleanup() { if [ -n "${tmp-}" ]; then rm -rf -- "$tmp"; fi; }
trap cleanup EXIT

export CGO_ENABLED=0
start=$SECONDS
log "building Kubernetes $k8s_version (${K8S_CMDS[*]}) with $go_version; the first build takes a while"
(cd -- "$K8S_MOD" && go build "${build_flags[@]}" -ldflags "$k8s_ldflags" -o "$tmp/" \
    "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}") || die "building Kubernetes $k8s_version failed"
log "building etcd $etcd_version (etcd, etcdctl)"
(cd -- "$ETCD_MOD" && go build "${build_flags[@]}" -ldflags "$etcd_ldflags" -o "$tmp/etcd" \
    go.etcd.io/etcd/server/v3) || die "building etcd $etcd_version failed"
(cd -- "$ETCD_MOD" && go build "${build_flags[@]}" -ldflags "$etcd_ldflags" -o "$tmp/etcdctl" \
    go.etcd.io/etcd/etcdctl/v3) || die "building etcdctl $etcd_version failed"
log "building KWOK $kwok_version (kwok)"
(cd -- "$KWOK_MOD" && go build "${build_flags[@]}" -ldflags "$kwok_ldflags" -o "$tmp/kwok" \
    sigs.k8s.io/kwok/cmd/kwok) || die "building kwok $kwok_version failed"
kwok_src=$(cd -- "$KWOK_MOD" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kwok)
[ -d "${kwok_src:-/nonexistent}" ] || die "the source of sigs.k8s.io/kwok $kwok_version is not in the module cache"
kwok_kube=$(head -n 1 -- "$kwok_src/supported_releases.txt") || die "cannot read $kwok_src/supported_releases.txt"
[ "v$kwok_kube" = "$KWOK_KUBE_VERSION" ] ||
    die "kwok $kwok_version's release build stamps KubeVersion v$kwok_kube, the script pins $KWOK_KUBE_VERSION"
(
    printf '# The Stage resources kwok %s plays: kwokctl'"'"'s default set, copied unchanged from the\n' "$kwok_version"
    printf '# module sigs.k8s.io/kwok@%s by scripts/build-control-plane.sh. Pass with --config.\n' "$kwok_version"
    for f in "${KWOK_STAGES[@]}"; do
        printf -- '---\n# %s\n' "$f"
        cat -- "$kwok_src/$f" || exit 1
    done
) >"$tmp/kwok-stages.yaml" || die "copying kwok's stages from $kwok_src failed"

# Every binary must report the pinned version (the driver parses versions).
first_line_with() { # first_line_with WANT BINARY ARGS...: the line of the output holding WANT
    local want=$1 out line
    shift
    out=$("$@" 2>&1) || die "$* failed: $out"
    line=$(printf '%s\n' "$out" | grep -F -m 1 -- "$want") ||
        die "$* printed '$out', expected a line with '$want'"
    printf '%s\n' "$line"
}
versions=$(
    set -e
    printf 'kubernetes %s (k8s.io/kubernetes; staging modules %s)\n' "$k8s_version" "$staging_want"
    printf 'etcd %s (go.etcd.io/etcd/server/v3, etcdctl/v3)\n' "$etcd_version"
    printf 'go %s\n' "$go_version"
    for c in kube-apiserver kube-controller-manager kube-scheduler; do
        line=$(first_line_with "Kubernetes $k8s_version" "$tmp/$c" --version)
        printf '%s: %s\n' "$c" "$line"
    done
    line=$(first_line_with "Client Version: $k8s_version" "$tmp/kubectl" version --client)
    printf 'kubectl: %s\n' "$line"
    line=$(first_line_with "etcd Version: ${etcd_version#v}" "$tmp/etcd" --version)
    printf 'etcd: %s\n' "$line"
    line=$(first_line_with "etcdctl version: ${etcd_version#v}" "$tmp/etcdctl" version)
    printf 'etcdctl: %s\n' "$line"
    printf 'kwok %s (sigs.k8s.io/kwok; stages: %s)\n' "$kwok_version" "${KWOK_STAGES[*]}"
    line=$(first_line_with "kwok version $kwok_version" "$tmp/kwok" --version)
    printf 'kwok: %s\n' "$line"
) || die "a built binary does not report the pinned version"
printf '%s\n' "$versions" >"$tmp/VERSIONS"
(cd -- "$tmp" && sha256sum -- "${K8S_CMDS[@]}" etcd etcdctl kwok kwok-stages.yaml VERSIONS >SHA256SUMS)
chmod 0755 "$tmp"
mv -T -- "$tmp" "$dir" || die "could not rename $tmp to $dir"
tmp=''
log "built in $((SECONDS - start)) s: $(du -sh -- "$dir" | cut -f1) in $dir"
printf '%s\n' "$dir"
