#!/usr/bin/env bash
# install_helm.sh - install Helm on a Kubernetes master, for CNF deployment over SSH.
#
# A drop-in for the install_helm.sh of OpenStack Tacker's sample Kubernetes MgmtDriver: same
# environment (http_proxy, https_proxy, no_proxy with "%40" for "@"), same result
# (/usr/local/bin/helm, /var/tacker/helm). The download is pinned and checked, or comes from
# K8S_OFFLINE_DIR. See docs/install-scripts.md.
#
# Progress goes to stderr; the last stdout line is `helm version --short`.
set -Eeuo pipefail
umask 022
export LC_ALL=C

# ---------------------------------------------------------------------------------------------
# Pins (see docs/install-scripts.md, "Updating the pins"). Each may be overridden from the
# environment. An empty sha256 pin for this machine's architecture makes online mode refuse
# to run. Offline mode uses the offline directory's SHA256SUMS instead.
# ---------------------------------------------------------------------------------------------
HELM_VERSION=${HELM_VERSION:-v3.16.3}
HELM_BASE_URL=${HELM_BASE_URL:-https://get.helm.sh}
# sha256 of helm-<version>-linux-<arch>.tar.gz, as published in get.helm.sh's .sha256sum files.
HELM_SHA256_AMD64=${HELM_SHA256_AMD64:-f5355c79190951eed23c5432a3b920e071f4c00a64f75e077de0dd4cb7b294ea}
HELM_SHA256_ARM64=${HELM_SHA256_ARM64:-5bd34ed774df6914b323ff84a0a156ea6ff2ba1eaf0113962fa773f3f9def798}

readonly PROG=install_helm.sh
readonly HELM_BIN=/usr/local/bin/helm
readonly HELM_DATA_DIR=/var/tacker/helm
readonly ENV_FILE=/etc/environment
readonly BLOCK_BEGIN="# BEGIN mgmt-driver proxy (managed by install scripts, do not edit)"
readonly BLOCK_END="# END mgmt-driver proxy"
readonly VERSION_RE='^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'

ORIG_ARGS=("$@")
STEP=arguments
WORKDIR=''
DEBUG=0
ARCH=''
OFFLINE_DIR=''
P_HTTP='' P_HTTPS='' P_NO=''

usage() {
    cat <<EOF
usage: $PROG [-d] [-h]

Installs Helm $HELM_VERSION to $HELM_BIN and creates $HELM_DATA_DIR.

  -d  debug (set -x; may show secrets)
  -h  this help

environment:
  http_proxy, https_proxy, no_proxy  proxy ("%40" stands for "@"); kept in a managed block of
                                     $ENV_FILE for later helm commands over SSH
  K8S_OFFLINE_DIR                    take helm-*-linux-<arch>.tar.gz from DIR (checked against
                                     DIR/SHA256SUMS); no downloads
  HELM_VERSION, HELM_SHA256_AMD64, HELM_SHA256_ARM64   override the pins

Exit status 0 when $HELM_BIN works; non-zero otherwise.
EOF
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error in step "%s": %s\n' "$PROG" "$STEP" "$1" >&2
    exit "${2:-1}"
}
usage_error() {
    printf '%s: %s (see %s -h)\n' "$PROG" "$1" "$PROG" >&2
    exit 2
}
step() {
    STEP=$1
    log "==> $STEP"
}
run() { "$@" >&2; }
on_err() {
    local rc=$?
    printf '%s: error in step "%s": a command failed with status %s (line %s)\n' \
        "$PROG" "$STEP" "$rc" "${BASH_LINENO[0]}" >&2
}
cleanup() { if [[ -n $WORKDIR ]]; then rm -rf -- "$WORKDIR"; fi; }
trap on_err ERR
trap cleanup EXIT

# write_file MODE PATH: write stdin to PATH atomically, private while being written.
write_file() {
    local mode=$1 path=$2 tmp
    tmp=$(umask 077 && mktemp "$path.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    mv -f -- "$tmp" "$path"
}

is_proxy_url() {
    [[ -z $1 || $1 =~ ^[A-Za-z][A-Za-z0-9+.-]*://[^[:space:]\"\'\\]+$ ]]
}

parse_args() {
    local opt
    OPTIND=1
    while getopts ':dh' opt; do
        case $opt in
            d) DEBUG=1 ;;
            h)
                usage
                exit 0
                ;;
            *) usage_error "unknown option -$OPTARG" ;;
        esac
    done
    shift $((OPTIND - 1))
    [[ $# -eq 0 ]] || usage_error "unexpected argument: $1"

    [[ $HELM_VERSION =~ $VERSION_RE ]] || usage_error "HELM_VERSION is not vX.Y.Z[-suffix]"

    local xt=$-
    set +x
    P_HTTP=${http_proxy:-}
    P_HTTP=${P_HTTP//%40/@}
    P_HTTPS=${https_proxy:-}
    P_HTTPS=${P_HTTPS//%40/@}
    P_NO=${no_proxy:-}
    P_NO=${P_NO//%40/@}
    is_proxy_url "$P_HTTP" || usage_error "environment http_proxy is not a proxy URL (scheme://[user:pass@]host[:port])"
    is_proxy_url "$P_HTTPS" || usage_error "environment https_proxy is not a proxy URL (scheme://[user:pass@]host[:port])"
    [[ $P_NO =~ ^[^[:space:]\"\'\\]*$ ]] || usage_error "environment no_proxy holds invalid characters"
    [[ $xt == *x* ]] && set -x

    if [[ -n ${K8S_OFFLINE_DIR:-} ]]; then
        [[ -d $K8S_OFFLINE_DIR ]] || usage_error "K8S_OFFLINE_DIR is not a directory: $K8S_OFFLINE_DIR"
        OFFLINE_DIR=$(cd -- "$K8S_OFFLINE_DIR" && pwd -P)
    fi

    case $(uname -m) in
        x86_64 | amd64) ARCH=amd64 ;;
        aarch64 | arm64) ARCH=arm64 ;;
        *) usage_error "unsupported architecture $(uname -m) (amd64 and arm64 only)" ;;
    esac
    return 0
}

# Not root: run again under sudo, keeping the environment (proxy, K8S_OFFLINE_DIR). Without a
# terminal, sudo reads a password (if it needs one) from stdin (-S) instead of failing.
ensure_root() {
    [[ $EUID -eq 0 ]] && return 0
    command -v sudo >/dev/null 2>&1 || die "not root and sudo is not installed"
    if [[ -t 0 ]]; then
        exec sudo -E bash "$0" "$@"
    fi
    exec sudo -S -p '' -E bash "$0" "$@"
}

# The proxy, for later helm commands run over SSH (pam_env reads /etc/environment): one managed
# block, replaced on every run and removed when no proxy is set. Values are never printed.
setup_proxy() {
    step proxy
    local xt=$- current rest
    set +x
    current=''
    [[ -f $ENV_FILE ]] && current=$(cat "$ENV_FILE")
    rest=$(printf '%s\n' "$current" | awk -v b="$BLOCK_BEGIN" -v e="$BLOCK_END" '
        $0 == b { skip = 1; next }
        $0 == e { skip = 0; next }
        !skip { print }')
    local block=''
    if [[ -n $P_HTTP || -n $P_HTTPS || -n $P_NO ]]; then
        block=$BLOCK_BEGIN$'\n'
        if [[ -n $P_HTTP ]]; then block+="http_proxy=$P_HTTP"$'\n'"HTTP_PROXY=$P_HTTP"$'\n'; fi
        if [[ -n $P_HTTPS ]]; then block+="https_proxy=$P_HTTPS"$'\n'"HTTPS_PROXY=$P_HTTPS"$'\n'; fi
        if [[ -n $P_NO ]]; then block+="no_proxy=$P_NO"$'\n'"NO_PROXY=$P_NO"$'\n'; fi
        block+=$BLOCK_END
        export http_proxy=$P_HTTP https_proxy=$P_HTTPS no_proxy=$P_NO
        export HTTP_PROXY=$P_HTTP HTTPS_PROXY=$P_HTTPS NO_PROXY=$P_NO
    fi
    # ($(...) has dropped the rest's trailing empty lines.)
    local mode=0644
    [[ -f $ENV_FILE ]] && mode=$(stat -c %a "$ENV_FILE")
    # A proxy URL with credentials ("user:pass@") must not be readable by every local user.
    if [[ $P_HTTP == *@* || $P_HTTPS == *@* ]]; then
        mode=0640
    fi
    local new
    if [[ -n $rest && -n $block ]]; then
        new=$rest$'\n'$block
    else
        new=$rest$block
    fi
    if [[ $new != "$current" || ! -f $ENV_FILE ]]; then
        if [[ -n $new ]]; then printf '%s\n' "$new"; fi | write_file "$mode" "$ENV_FILE"
    else
        chmod "$mode" "$ENV_FILE"
    fi
    if [[ -n $block ]]; then
        if [[ $mode == 0640 ]]; then
            log "proxy: configured ($ENV_FILE holds credentials: mode 0640)"
        else
            log "proxy: configured"
        fi
    else
        log "proxy: none"
    fi
    [[ $xt == *x* ]] && set -x
    return 0
}

# Version of the helm at HELM_BIN ("v3.16.3" from "v3.16.3+gcfd0749"), or empty.
installed_version() {
    [[ -x $HELM_BIN ]] || return 0
    "$HELM_BIN" version --short 2>/dev/null | sed -n 's/^\(v[0-9][^+[:space:]]*\).*/\1/p' | head -n 1
}

# Choose and check the tarball: sets TARBALL and the version it holds.
prepare_offline() {
    step offline-verify
    local sums=$OFFLINE_DIR/SHA256SUMS f name
    [[ -f $sums ]] || die "$sums is missing"
    if grep -q '^[\]' "$sums"; then
        die "SHA256SUMS lists an escaped file name; use plain names without backslashes or newlines"
    fi
    local -a found=()
    for f in "$OFFLINE_DIR"/helm-v*-linux-"$ARCH".tar.gz; do
        [[ -e $f ]] && found+=("$f")
    done
    ((${#found[@]} == 1)) ||
        die "need exactly one $OFFLINE_DIR/helm-v*-linux-$ARCH.tar.gz, found ${#found[@]}"
    TARBALL=${found[0]}
    name=${TARBALL##*/}
    HELM_VERSION=${name#helm-}
    HELM_VERSION=${HELM_VERSION%-linux-"$ARCH".tar.gz}
    [[ $HELM_VERSION =~ $VERSION_RE ]] || die "cannot read a version from $name"
    if ! (cd -- "$OFFLINE_DIR" && sha256sum --strict --quiet -c SHA256SUMS) >&2; then
        die "checksum verification against $sums failed (mismatch, missing file or malformed line)"
    fi
    sed -E 's/^[0-9a-fA-F]{64} [ *]//; s#^\./##' "$sums" | grep -qxF -- "$name" ||
        die "$name is not listed in SHA256SUMS, refusing to use it unchecked"
    log "offline: $name verified"
}

download() {
    step download
    local sha name url
    case $ARCH in
        amd64) sha=$HELM_SHA256_AMD64 ;;
        arm64) sha=$HELM_SHA256_ARM64 ;;
    esac
    [[ $sha =~ ^[0-9a-f]{64}$ ]] ||
        die "online install needs the sha256 pin HELM_SHA256_${ARCH^^} for $HELM_VERSION; fill it in at the top of $PROG or set it in the environment, or use K8S_OFFLINE_DIR"
    command -v curl >/dev/null 2>&1 || die "curl is not installed"
    name=helm-$HELM_VERSION-linux-$ARCH.tar.gz
    url=$HELM_BASE_URL/$name
    TARBALL=$WORKDIR/$name
    run curl -fsSL --retry 3 --connect-timeout 20 --max-time 300 -o "$TARBALL" "$url" ||
        die "download of $url failed"
    printf '%s  %s\n' "$sha" "$TARBALL" | sha256sum --quiet -c - >&2 ||
        die "$url does not match the pinned sha256"
}

install_binary() {
    step install
    run tar -xzf "$TARBALL" -C "$WORKDIR" "linux-$ARCH/helm" ||
        die "${TARBALL##*/} holds no linux-$ARCH/helm"
    install -d -m 0755 "${HELM_BIN%/*}"
    install -m 0755 "$WORKDIR/linux-$ARCH/helm" "$HELM_BIN.new"
    mv -f -- "$HELM_BIN.new" "$HELM_BIN"
    log "installed $HELM_BIN ($HELM_VERSION)"
}

main() {
    parse_args "$@"
    ensure_root "${ORIG_ARGS[@]}"
    ((DEBUG)) && set -x
    WORKDIR=$(mktemp -d)

    TARBALL=''
    [[ -n $OFFLINE_DIR ]] && prepare_offline
    setup_proxy

    step check-installed
    local have
    have=$(installed_version)
    if [[ $have == "$HELM_VERSION" ]]; then
        log "helm $HELM_VERSION is already installed at $HELM_BIN"
    else
        [[ -n $have ]] && log "replacing helm $have at $HELM_BIN with $HELM_VERSION"
        [[ -z $TARBALL ]] && download
        install_binary
    fi

    step data-dir
    install -d -m 0755 "$HELM_DATA_DIR"
    chmod 0755 "$HELM_DATA_DIR"

    step verify
    local short
    short=$("$HELM_BIN" version --short) || die "$HELM_BIN version --short failed"
    [[ $short == "$HELM_VERSION"* ]] ||
        die "$HELM_BIN reports $short, expected $HELM_VERSION"
    printf '%s\n' "$short"
}

main "$@"
