#!/usr/bin/env bash
# install_k8s_cluster.sh - turn this VM (Ubuntu 22.04, Ubuntu 24.04 or Debian 12) into a Kubernetes
# master or worker.
#
# Same options, environment and stdout lines as the install script of OpenStack Tacker's sample
# Kubernetes MgmtDriver, so a VNF package can ship either one. See docs/install-scripts.md for
# the interface, the pinned versions and the offline mode, and docs/cluster-contract.md for the
# contract with the driver.
#
# Progress and tool output go to stderr. stdout carries only the lines the driver parses
# (main master: token:, server:, ssl_ca_cert_hash:, certificate_key:, the CA PEM) and a few
# status lines that cannot be mistaken for them.
#
# The join token and certificate key may come from the environment (K8S_JOIN_TOKEN,
# K8S_CERT_KEY; mgmt-driver exports them from a 0600 env file) instead of -t/-k, so they are
# not in this script's argv. The next line tells mgmt-driver so (src/cluster/script_marker.rs):
# mgmt-driver: secrets-from-env
set -Eeuo pipefail
umask 022
export LC_ALL=C
export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------------------------------------
# Pins. Change them together (see docs/install-scripts.md, "Updating the pins").
# Each may be overridden from the environment. A download is never used unchecked: online mode
# refuses to run when a pin is missing or malformed. Offline mode (K8S_OFFLINE_DIR) does not use
# them (it checks its SHA256SUMS instead).
# ---------------------------------------------------------------------------------------------
K8S_MINOR=${K8S_MINOR:-v1.31}                       # pkgs.k8s.io repository (minor version)
K8S_PKG_VERSION=${K8S_PKG_VERSION:-1.31.2-1.1}      # kubelet/kubeadm/kubectl package version
K8S_KEY_URL=${K8S_KEY_URL:-https://pkgs.k8s.io/core:/stable:/${K8S_MINOR}/deb/Release.key}
# The signing key of the pkgs.k8s.io repositories, by its OpenPGP fingerprint: the Release.key
# downloaded from K8S_KEY_URL must hold exactly this one primary key. Kubernetes signs every
# pkgs.k8s.io repository with this same key ("the same signing key is used for all
# repositories", kubernetes.io blog 2023-08-15 "pkgs.k8s.io: Introducing Kubernetes
# Community-Owned Package Repositories"); `gpg --show-keys` of its Release.key shows uid
# "isv:kubernetes OBS Project <isv:kubernetes@build.opensuse.org>", rsa2048 key id
# 234654DA9A296436, created 2022-08-25, with this fingerprint. A fingerprint survives the key's
# expiry being extended (the file's sha256 does not), so this pin needs no refresh until the key
# itself is replaced.
K8S_KEY_FINGERPRINT=${K8S_KEY_FINGERPRINT:-DE15B14486CD377B9E876E1A234654DA9A296436}
# Optional, stricter: the sha256 of the Release.key file itself (checked too when set).
K8S_KEYRING_SHA256=${K8S_KEYRING_SHA256:-}
CALICO_VERSION=${CALICO_VERSION:-v3.28.2}
CALICO_URL=${CALICO_URL:-https://raw.githubusercontent.com/projectcalico/calico/${CALICO_VERSION}/manifests/calico.yaml}
# sha256 of manifests/calico.yaml at tag v3.28.2 of github.com/projectcalico/calico (commit
# 9a96ee39f3833c3eabde151add8a84d546bcf24d, blob f5ed59ca2de6ef3550f524f3a36acd842c3650c8,
# 253923 bytes): `git show v3.28.2:manifests/calico.yaml | sha256sum`, the bytes
# raw.githubusercontent.com serves for CALICO_URL. Changing CALICO_VERSION needs a new digest.
if [[ -z ${CALICO_SHA256:-} && $CALICO_VERSION == v3.28.2 ]]; then
    CALICO_SHA256=be59408bf990e96276f631d2f9285c2a0f9802194c0ad1cecdb6d9c52623a1c8
fi
CALICO_SHA256=${CALICO_SHA256:-}
PAUSE_IMAGE=${PAUSE_IMAGE:-registry.k8s.io/pause:3.10}   # the sandbox image kubeadm 1.31 expects

# Bounded waits (seconds).
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}
VIP_WAIT_SECONDS=${VIP_WAIT_SECONDS:-30}
CNI_WAIT_SECONDS=${CNI_WAIT_SECONDS:-300}
NODE_WAIT_SECONDS=${NODE_WAIT_SECONDS:-120}

# Ports of the Tacker contract.
readonly API_PORT=6443 LB_PORT=16443

readonly PROG=install_k8s_cluster.sh
readonly STATE_DIR=/var/lib/mgmt-driver
readonly MARKER=$STATE_DIR/installed
readonly COMPAT_MARKER=/tmp/installed
readonly ADMIN_CONF=/etc/kubernetes/admin.conf
readonly KUBELET_CONF=/etc/kubernetes/kubelet.conf
readonly CA_CRT=/etc/kubernetes/pki/ca.crt
readonly MANAGED="managed by $PROG"

ORIG_ARGS=("$@")
STEP=arguments
WORKDIR=''
JOIN_API='' JOIN_DIR=''   # kubeadm join config: its apiVersion; its private dir (holds the join secrets)

usage() {
    cat <<EOF
usage:
  $PROG -m IP[,IP...] -i CLUSTER_IP [-p POD_CIDR] [-a SERVICE_CIDR]            main master
  $PROG -m IP[,IP...] -i CLUSTER_IP -t TOKEN -s HASH -k CERT_KEY [-p ..] [-a ..] joining master
  $PROG -w IP -i CLUSTER_IP -t TOKEN -s HASH                                    worker

  -m LIST  all master IPs (cluster NIC), comma-separated; the first one is the main master.
           More than one IP sets up HA (haproxy on :$LB_PORT and keepalived for the VIP).
  -w IP    this worker's IP (cluster NIC). -m and -w are exclusive.
  -i IP    cluster IP: the VIP with HA, else the main master's IP.
  -p CIDR  pod network CIDR (default 192.168.0.0/16).
  -a CIDR  service CIDR (default 10.96.0.0/12).
  -t TOKEN kubeadm bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}); or K8S_JOIN_TOKEN in the environment.
  -s HASH  sha256 of the cluster CA's public key, 64 hex digits (no "sha256:" prefix needed).
  -k KEY   certificate key for a joining master, 64 hex digits; or K8S_CERT_KEY in the environment.
  -d       debug (set -x; may show secrets), -o log to /tmp/k8s_install_<date>.log, -h help.

environment:
  http_proxy, https_proxy, no_proxy   proxy settings ("%40" stands for "@")
  ha_flag                  "False": workers join CLUSTER_IP:$API_PORT, otherwise CLUSTER_IP:$LB_PORT
  HTTP_PRIVATE_REGISTRIES  '"host[:port]","host2"': plain-http registries for containerd
  K8S_OFFLINE_DIR          install from DIR (SHA256SUMS, debs/*.deb, cni.yaml); no downloads
  K8S_ALLOW_ANY_OS=1       run on an OS other than Ubuntu 22.04/24.04 or Debian 12 (with a warning)

Exit status 0: this node is part of the cluster. Non-zero: failure (255: the join did not complete).
EOF
}

# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
warn() { printf '%s: WARNING: %s\n' "$PROG" "$*" >&2; }
# die MESSAGE [STATUS]: fail, naming the step.
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
# Run a command with its stdout sent to stderr, so that stdout carries only our result lines.
run() { "$@" >&2; }

on_err() {
    local rc=$?
    # The command itself is not shown: it may hold a proxy credential or a join secret.
    printf '%s: error in step "%s": a command failed with status %s (line %s)\n' \
        "$PROG" "$STEP" "$rc" "${BASH_LINENO[0]}" >&2
}
cleanup() {
    if [[ -n $JOIN_DIR ]]; then rm -rf -- "$JOIN_DIR"; fi
    if [[ -n $WORKDIR ]]; then rm -rf -- "$WORKDIR"; fi
}
trap on_err ERR
trap cleanup EXIT

# write_file MODE PATH: write stdin to PATH atomically; the content is never world-readable
# while it is being written.
write_file() {
    local mode=$1 path=$2 tmp
    tmp=$(umask 077 && mktemp "$path.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    mv -f -- "$tmp" "$path"
}

is_ipv4() {
    [[ $1 =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || return 1
    local o
    for o in "${BASH_REMATCH[@]:1}"; do
        ((10#$o <= 255)) || return 1
    done
}
is_cidr() {
    [[ $1 =~ ^([0-9.]+)/([0-9]{1,2})$ ]] || return 1
    local ip=${BASH_REMATCH[1]} len=${BASH_REMATCH[2]}
    is_ipv4 "$ip" && ((10#$len <= 32))
}
last_octet() { printf '%s' "${1##*.}"; }

apt_get() {
    run apt-get -y -q -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@"
}

# ---------------------------------------------------------------------------------------------
# Arguments and environment (validated before anything is changed)
# ---------------------------------------------------------------------------------------------
MASTERS_ARG='' WORKER_IP='' CLUSTER_IP='' POD_CIDR='' SVC_CIDR=''
TOKEN='' CA_HASH='' CERT_KEY='' DEBUG=0 LOG_TO_FILE=0
MASTERS=() REGISTRIES=()
MODE='' ROLE='' HA=0
MY_IP='' MY_IFACE='' MY_PREFIX='' MY_INDEX=-1 NODE_NAME=''
OFFLINE_DIR='' INIT_TOKEN=''
P_HTTP='' P_HTTPS='' P_NO=''

parse_args() {
    local opt
    OPTIND=1
    while getopts ':dom:w:i:a:p:t:s:k:h' opt; do
        case $opt in
            d) DEBUG=1 ;;
            o) LOG_TO_FILE=1 ;;
            m) MASTERS_ARG=$OPTARG ;;
            w) WORKER_IP=$OPTARG ;;
            i) CLUSTER_IP=$OPTARG ;;
            a) SVC_CIDR=$OPTARG ;;
            p) POD_CIDR=$OPTARG ;;
            t) TOKEN=$OPTARG ;;
            s) CA_HASH=$OPTARG ;;
            k) CERT_KEY=$OPTARG ;;
            h)
                usage
                exit 0
                ;;
            :) usage_error "option -$OPTARG needs a value" ;;
            *) usage_error "unknown option -$OPTARG" ;;
        esac
    done
    shift $((OPTIND - 1))
    [[ $# -eq 0 ]] || usage_error "unexpected argument: $1"
    # Secrets from the environment when not given as options (not in argv); not passed on.
    TOKEN=${TOKEN:-${K8S_JOIN_TOKEN:-}}
    CERT_KEY=${CERT_KEY:-${K8S_CERT_KEY:-}}

    if [[ -n $MASTERS_ARG && -n $WORKER_IP ]]; then
        usage_error "-m and -w are exclusive"
    elif [[ -n $MASTERS_ARG ]]; then
        MODE=master
    elif [[ -n $WORKER_IP ]]; then
        MODE=worker
    else
        usage_error "one of -m (master) or -w (worker) is required"
    fi

    [[ -n $CLUSTER_IP ]] || usage_error "-i CLUSTER_IP is required"
    is_ipv4 "$CLUSTER_IP" || usage_error "-i: not an IPv4 address: $CLUSTER_IP"

    if [[ $MODE == master ]]; then
        local ip
        IFS=, read -r -a MASTERS <<<"$MASTERS_ARG"
        [[ ${#MASTERS[@]} -gt 0 && $MASTERS_ARG != *, && $MASTERS_ARG != ,* ]] ||
            usage_error "-m: empty item in '$MASTERS_ARG'"
        local -A seen=()
        for ip in "${MASTERS[@]}"; do
            is_ipv4 "$ip" || usage_error "-m: not an IPv4 address: '$ip'"
            [[ -z ${seen[$ip]:-} ]] || usage_error "-m: $ip is listed twice"
            seen[$ip]=1
        done
        ((${#MASTERS[@]} > 1)) && HA=1
        POD_CIDR=${POD_CIDR:-192.168.0.0/16}
        SVC_CIDR=${SVC_CIDR:-10.96.0.0/12}
        is_cidr "$POD_CIDR" || usage_error "-p: not an IPv4 CIDR: $POD_CIDR"
        is_cidr "$SVC_CIDR" || usage_error "-a: not an IPv4 CIDR: $SVC_CIDR"
        if [[ -n $TOKEN || -n $CA_HASH || -n $CERT_KEY ]]; then
            [[ -n $TOKEN && -n $CA_HASH && -n $CERT_KEY ]] ||
                usage_error "a joining master needs all of -t, -s and -k (or K8S_JOIN_TOKEN, K8S_CERT_KEY)"
            ROLE=join-master
        else
            ROLE=main-master
        fi
    else
        is_ipv4 "$WORKER_IP" || usage_error "-w: not an IPv4 address: $WORKER_IP"
        [[ -n $TOKEN && -n $CA_HASH ]] || usage_error "a worker needs -t (or K8S_JOIN_TOKEN) and -s"
        [[ -z $CERT_KEY ]] || log "-k is ignored for a worker"
        ROLE=worker
    fi

    if [[ -n $TOKEN ]]; then
        [[ $TOKEN =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] ||
            usage_error "-t: not a kubeadm token ([a-z0-9]{6}.[a-z0-9]{16})"
    fi
    if [[ -n $CA_HASH ]]; then
        CA_HASH=${CA_HASH#sha256:}
        [[ $CA_HASH =~ ^[0-9a-fA-F]{64}$ ]] || usage_error "-s: not 64 hex digits"
        CA_HASH=${CA_HASH,,}
    fi
    if [[ -n $CERT_KEY ]]; then
        [[ $CERT_KEY =~ ^[0-9a-fA-F]{64}$ ]] || usage_error "-k: not 64 hex digits"
    fi
    parse_env
}

# A proxy value: "%40" means "@". It goes into config files, so quotes, backslashes and
# whitespace are refused. Values are never printed.
is_proxy_url() {
    [[ -z $1 || $1 =~ ^[A-Za-z][A-Za-z0-9+.-]*://[^[:space:]\"\'\\]+$ ]]
}

parse_env() {
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

    local -a items=()
    local item raw=${HTTP_PRIVATE_REGISTRIES:-}
    REGISTRIES=()
    raw=${raw//\"/}
    IFS=, read -r -a items <<<"$raw"
    for item in "${items[@]}"; do
        item=${item//[[:space:]]/}
        [[ -n $item ]] || continue
        [[ $item =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$ ]] ||
            usage_error "HTTP_PRIVATE_REGISTRIES: not host[:port]: '$item'"
        REGISTRIES+=("$item")
    done

    if [[ -n ${K8S_OFFLINE_DIR:-} ]]; then
        [[ -d $K8S_OFFLINE_DIR ]] || usage_error "K8S_OFFLINE_DIR is not a directory: $K8S_OFFLINE_DIR"
        OFFLINE_DIR=$(cd -- "$K8S_OFFLINE_DIR" && pwd -P)
    fi
}

# Not root: run again under sudo, keeping the environment (proxy, ha_flag, ...). Without a
# terminal, sudo reads a password (if it needs one) from stdin (-S) instead of failing.
ensure_root() {
    [[ $EUID -eq 0 ]] && return 0
    command -v sudo >/dev/null 2>&1 || die "not root and sudo is not installed"
    if [[ -t 0 ]]; then
        exec sudo -E bash "$0" "$@"
    fi
    exec sudo -S -p '' -E bash "$0" "$@"
}

setup_output() {
    if ((LOG_TO_FILE)); then
        local logf
        logf=/tmp/k8s_install_$(date +%Y%m%d%H%M%S).log
        (umask 077 && : >>"$logf")
        exec > >(tee -a "$logf") 2> >(tee -a "$logf" >&2)
        log "logging to $logf (mode 0600)"
    fi
    ((DEBUG)) && set -x
    return 0
}

# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------
# os_supported ID VERSION_ID ARCH: the systems this script is made for. All three are apt based
# with the same package names here (containerd, gnupg, curl, ca-certificates from the
# distribution; kubelet/kubeadm/kubectl from pkgs.k8s.io).
os_supported() {
    [[ $3 == x86_64 || $3 == aarch64 ]] || return 1
    case $1/$2 in
        ubuntu/22.04 | ubuntu/24.04 | debian/12) return 0 ;;
        *) return 1 ;;
    esac
}

check_os() {
    STEP=os-check
    local id='' version='' arch
    if [[ -r /etc/os-release ]]; then
        # shellcheck disable=SC1091 # the node's own file, not in this repository
        id=$(. /etc/os-release && printf '%s' "${ID:-}")
        # shellcheck disable=SC1091 # the node's own file, not in this repository
        version=$(. /etc/os-release && printf '%s' "${VERSION_ID:-}")
    fi
    arch=$(uname -m)
    if os_supported "$id" "$version" "$arch"; then
        return 0
    fi
    if [[ ${K8S_ALLOW_ANY_OS:-0} == 1 ]]; then
        warn "unsupported OS ${id:-unknown} ${version:-?} $arch; continuing because K8S_ALLOW_ANY_OS=1"
        return 0
    fi
    die "this script supports Ubuntu 22.04, Ubuntu 24.04 and Debian 12 on x86_64/aarch64, found ${id:-unknown} ${version:-?} $arch (set K8S_ALLOW_ANY_OS=1 to try anyway)"
}

# Find this node's address among -m (master) or equal to -w (worker): its interface and prefix
# come from the kernel, no /24 is assumed.
find_my_ip() {
    STEP=find-my-ip
    local -a lines
    local line ifname addr ip i
    mapfile -t lines < <(ip -4 -o addr show 2>/dev/null | awk '{print $2, $4}')
    ((${#lines[@]} > 0)) || die "no IPv4 address found (ip -4 -o addr show)"
    for line in "${lines[@]}"; do
        ifname=${line%% *}
        addr=${line#* }
        ip=${addr%/*}
        if [[ $MODE == worker ]]; then
            [[ $ip == "$WORKER_IP" ]] || continue
            MY_IP=$ip MY_IFACE=$ifname MY_PREFIX=${addr#*/}
            break
        fi
        for i in "${!MASTERS[@]}"; do
            if [[ ${MASTERS[$i]} == "$ip" ]]; then
                MY_IP=$ip MY_IFACE=$ifname MY_PREFIX=${addr#*/} MY_INDEX=$i
                break 2
            fi
        done
    done
    if [[ -z $MY_IP ]]; then
        if [[ $MODE == worker ]]; then
            die "-w $WORKER_IP is not an address of this node"
        fi
        die "none of the -m addresses ($MASTERS_ARG) is an address of this node"
    fi
    NODE_NAME=$MODE$(last_octet "$MY_IP")
    log "node: $NODE_NAME, $MY_IP/$MY_PREFIX on $MY_IFACE, role $ROLE$( ((HA)) && printf ' (HA)')"
}

# The pins an online install needs must be filled in.
check_pins() {
    STEP=pins
    [[ -n $OFFLINE_DIR ]] && return 0
    [[ $K8S_KEY_FINGERPRINT =~ ^[0-9A-F]{40}$ ]] ||
        die "online install needs the pin K8S_KEY_FINGERPRINT (40 upper-case hex digits: the OpenPGP fingerprint of the key at $K8S_KEY_URL), or use K8S_OFFLINE_DIR"
    [[ -z $K8S_KEYRING_SHA256 || $K8S_KEYRING_SHA256 =~ ^[0-9a-f]{64}$ ]] ||
        die "K8S_KEYRING_SHA256 is set but is not a sha256 (64 lower-case hex digits)"
    if [[ $ROLE == main-master ]]; then
        [[ $CALICO_SHA256 =~ ^[0-9a-f]{64}$ ]] ||
            die "online install needs the pin CALICO_SHA256 (sha256 of $CALICO_URL; the script only knows the one of Calico v3.28.2): set it in the environment, or use K8S_OFFLINE_DIR"
    fi
    return 0
}

# verify_offline REL...: every artifact in SHA256SUMS must match, and each REL we are about to
# use must be listed there.
OFFLINE_DEBS=()
verify_offline() {
    STEP=offline-verify
    local sums=$OFFLINE_DIR/SHA256SUMS name rel
    [[ -f $sums ]] || die "$sums is missing"
    if grep -q '^[\]' "$sums"; then
        die "SHA256SUMS lists an escaped file name; use plain names without backslashes or newlines"
    fi
    if ! (cd -- "$OFFLINE_DIR" && sha256sum --strict --quiet -c SHA256SUMS) >&2; then
        die "checksum verification against $sums failed (mismatch, missing file or malformed line)"
    fi
    local -A listed=()
    while IFS= read -r name; do
        name=${name#./}
        listed[$name]=1
    done < <(sed -E 's/^[0-9a-fA-F]{64} [ *]//' "$sums")

    local f
    OFFLINE_DEBS=()
    for f in "$OFFLINE_DIR"/debs/*.deb; do
        [[ -e $f ]] || continue
        OFFLINE_DEBS+=("$f")
    done
    ((${#OFFLINE_DEBS[@]} > 0)) || die "no $OFFLINE_DIR/debs/*.deb to install"
    local -a need=()
    for f in "${OFFLINE_DEBS[@]}"; do need+=("debs/${f##*/}"); done
    [[ $ROLE == main-master ]] && need+=(cni.yaml)
    for rel in "${need[@]}"; do
        [[ -f $OFFLINE_DIR/$rel ]] || die "$OFFLINE_DIR/$rel is missing"
        [[ -n ${listed[$rel]:-} ]] || die "$rel is not listed in SHA256SUMS, refusing to use it unchecked"
    done
    log "offline: ${#OFFLINE_DEBS[@]} packages$([[ $ROLE == main-master ]] && printf ' and cni.yaml') verified"
}

# ---------------------------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------------------------
setup_proxy() {
    step proxy
    local xt=$- apt_conf=/etc/apt/apt.conf.d/95mgmt-driver-proxy
    local dropin_dir=/etc/systemd/system/containerd.service.d
    local dropin=$dropin_dir/http-proxy.conf
    set +x
    if [[ -z $P_HTTP && -z $P_HTTPS ]]; then
        rm -f -- "$apt_conf" "$dropin"
        log "proxy: none"
        [[ $xt == *x* ]] && set -x
        return 0
    fi
    # Addresses of the cluster itself never go through the proxy.
    local extra="localhost,127.0.0.1,$CLUSTER_IP,${POD_CIDR:-},${SVC_CIDR:-}"
    local ip
    for ip in "${MASTERS[@]}" "$MY_IP"; do extra+=",$ip"; done
    local no=${P_NO:+$P_NO,}$extra
    no=$(printf '%s\n' "$no" | tr ',' '\n' | awk 'NF && !seen[$0]++' | paste -sd, -)

    export http_proxy=$P_HTTP https_proxy=$P_HTTPS no_proxy=$no
    export HTTP_PROXY=$P_HTTP HTTPS_PROXY=$P_HTTPS NO_PROXY=$no

    install -d -m 0755 /etc/apt/apt.conf.d
    {
        printf '// %s; may hold proxy credentials (root-only)\n' "$MANAGED"
        [[ -n $P_HTTP ]] && printf 'Acquire::http::Proxy "%s";\n' "$P_HTTP"
        [[ -n $P_HTTPS ]] && printf 'Acquire::https::Proxy "%s";\n' "$P_HTTPS"
        true
    } | write_file 0640 "$apt_conf"

    # systemd expands "%" specifiers in unit files: double it.
    install -d -m 0755 "$dropin_dir"
    {
        printf '# %s; may hold proxy credentials (root-only)\n[Service]\n' "$MANAGED"
        [[ -n $P_HTTP ]] && printf 'Environment="HTTP_PROXY=%s"\n' "${P_HTTP//%/%%}"
        [[ -n $P_HTTPS ]] && printf 'Environment="HTTPS_PROXY=%s"\n' "${P_HTTPS//%/%%}"
        printf 'Environment="NO_PROXY=%s"\n' "${no//%/%%}"
    } | write_file 0600 "$dropin"
    log "proxy: configured"
    [[ $xt == *x* ]] && set -x
    return 0
}

set_hostname() {
    step hostname
    if [[ $(hostname) != "$NODE_NAME" ]]; then
        run hostnamectl set-hostname "$NODE_NAME"
    fi
    log "hostname: $NODE_NAME"
}

disable_swap() {
    step swap
    run swapoff -a
    if [[ -f /etc/fstab ]]; then
        local new
        new=$(awk '!/^[[:space:]]*#/ && $3 == "swap" { print "#" $0; next } { print }' /etc/fstab)
        if [[ $new != "$(cat /etc/fstab)" ]]; then
            printf '%s\n' "$new" | write_file 0644 /etc/fstab
            log "swap entries in /etc/fstab commented out"
        fi
    fi
}

kernel_settings() {
    step kernel
    install -d -m 0755 /etc/modules-load.d /etc/sysctl.d
    printf '# %s\noverlay\nbr_netfilter\n' "$MANAGED" | write_file 0644 /etc/modules-load.d/k8s.conf
    run modprobe overlay
    run modprobe br_netfilter
    printf '# %s\nnet.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\nnet.ipv4.ip_forward = 1\n' \
        "$MANAGED" | write_file 0644 /etc/sysctl.d/99-kubernetes.conf
    run sysctl --system
}

# ---------------------------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------------------------
# key_fingerprint FILE: the fingerprint of the one primary key in the OpenPGP public key FILE
# (armoured or binary); fails when FILE holds no key or more than one. gpg only reads FILE
# (--show-keys) with a throwaway home: nothing is imported anywhere.
key_fingerprint() {
    local home out rc=0
    home=$(mktemp -d) || return 1
    out=$(GNUPGHOME=$home gpg --batch --no-tty --show-keys --with-colons --with-fingerprint -- "$1" 2>/dev/null) || rc=$?
    rm -rf -- "$home"
    ((rc == 0)) || return 1
    # The fpr line right after each pub line is that primary key's; sub keys have their own.
    awk -F: '
        $1 == "pub" { keys++; want = 1; next }
        $1 == "fpr" && want { fpr = $10; want = 0; next }
        $1 != "fpr" { want = 0 }
        END { if (keys != 1 || fpr == "") exit 1; print fpr }' <<<"$out"
}

install_packages() {
    step packages
    local -a extra=()
    ((HA)) && [[ $MODE == master ]] && extra=(haproxy keepalived)
    if [[ -n $OFFLINE_DIR ]]; then
        # All debs in one call, so dpkg orders them by their dependencies.
        apt_get install "${OFFLINE_DEBS[@]}" || die "apt-get install of the offline debs failed"
    else
        apt_get update || die "apt-get update failed"
        apt_get install ca-certificates curl gnupg containerd "${extra[@]}" ||
            die "apt-get install containerd ${extra[*]} failed"
        local key=$WORKDIR/Release.key fpr
        run curl -fsSL --retry 3 --connect-timeout 20 --max-time 120 -o "$key" "$K8S_KEY_URL" ||
            die "download of $K8S_KEY_URL failed"
        fpr=$(key_fingerprint "$key") || die "$K8S_KEY_URL is not one OpenPGP public key"
        [[ $fpr == "$K8S_KEY_FINGERPRINT" ]] ||
            die "$K8S_KEY_URL holds key $fpr, not the pinned K8S_KEY_FINGERPRINT $K8S_KEY_FINGERPRINT"
        if [[ -n $K8S_KEYRING_SHA256 ]]; then
            printf '%s  %s\n' "$K8S_KEYRING_SHA256" "$key" | sha256sum --quiet -c - >&2 ||
                die "$K8S_KEY_URL does not match the pinned K8S_KEYRING_SHA256"
        fi
        install -d -m 0755 /etc/apt/keyrings
        install -m 0644 "$key" /etc/apt/keyrings/kubernetes-apt-keyring.asc
        printf 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.asc] https://pkgs.k8s.io/core:/stable:/%s/deb/ /\n' \
            "$K8S_MINOR" | write_file 0644 /etc/apt/sources.list.d/kubernetes.list
        apt_get update || die "apt-get update (with pkgs.k8s.io) failed"
        apt_get install --allow-change-held-packages \
            "kubelet=$K8S_PKG_VERSION" "kubeadm=$K8S_PKG_VERSION" "kubectl=$K8S_PKG_VERSION" ||
            die "apt-get install kubelet/kubeadm/kubectl $K8S_PKG_VERSION failed"
    fi
    run apt-mark hold kubelet kubeadm kubectl || die "apt-mark hold failed"
    local c
    for c in containerd kubeadm kubelet kubectl; do
        command -v "$c" >/dev/null 2>&1 || die "$c is not installed after the package step"
    done
}

configure_containerd() {
    step containerd
    install -d -m 0755 /etc/containerd
    local cfg=/etc/containerd/config.toml new
    new=$(containerd config default) || die "containerd config default failed"
    new=$(printf '%s\n' "$new" |
        sed -E 's/^([[:space:]]*SystemdCgroup[[:space:]]*=[[:space:]]*)false/\1true/' |
        sed -E "s#^([[:space:]]*sandbox_image[[:space:]]*=[[:space:]]*).*#\\1\"$PAUSE_IMAGE\"#" |
        awk '
            /^[[:space:]]*\[/ { in_reg = ($0 ~ /^[[:space:]]*\[plugins\."io\.containerd\.grpc\.v1\.cri"\.registry\][[:space:]]*$/) }
            in_reg && /^[[:space:]]*config_path[[:space:]]*=/ {
                sub(/=.*/, "= \"/etc/containerd/certs.d\""); print; next }
            { print }')
    grep -Eq '^[[:space:]]*SystemdCgroup[[:space:]]*=[[:space:]]*true' <<<"$new" ||
        die "no SystemdCgroup setting in 'containerd config default'; cannot select the systemd cgroup driver"
    grep -q '/etc/containerd/certs.d' <<<"$new" ||
        warn "containerd config has no registry config_path; HTTP_PRIVATE_REGISTRIES may be ignored"
    printf '%s\n' "$new" | write_file 0644 "$cfg"

    local reg dir
    for reg in "${REGISTRIES[@]}"; do
        dir=/etc/containerd/certs.d/$reg
        # mgmt-driver's registry step wrote it before this script ran: keep it.
        if [[ $(head -n 1 "$dir/hosts.toml" 2>/dev/null) == "# managed by mgmt-driver"* ]]; then
            log "registry: $reg (configured by mgmt-driver)"
            continue
        fi
        install -d -m 0755 "$dir"
        printf '# %s: insecure (plain http) registry\nserver = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve", "push"]\n  skip_verify = true\n' \
            "$MANAGED" "$reg" "$reg" | write_file 0644 "$dir/hosts.toml"
        log "registry: $reg (http, insecure)"
    done

    # kubelet must report the cluster NIC address (multi-NIC VMs).
    printf 'KUBELET_EXTRA_ARGS=--node-ip=%s\n' "$MY_IP" | write_file 0644 /etc/default/kubelet

    run systemctl daemon-reload
    run systemctl enable containerd
    run systemctl restart containerd || die "containerd did not restart"
    run systemctl enable kubelet
}

# ---------------------------------------------------------------------------------------------
# HA: haproxy + keepalived on every master
# ---------------------------------------------------------------------------------------------
configure_ha() {
    step ha-loadbalancer
    local ip i peers=''
    install -d -m 0755 /etc/haproxy /etc/keepalived
    {
        cat <<EOF
# $MANAGED. The backend lines are edited by mgmt-driver (heal/scale): keep their format
# "    server  <name>  <ip>:$API_PORT check". There is no stats page.
global
    log /dev/log local0
    chroot /var/lib/haproxy
    user haproxy
    group haproxy
    daemon

defaults
    log     global
    mode    tcp
    option  tcplog
    timeout connect 5s
    timeout client  1h
    timeout server  1h

frontend kube-apiserver
    bind *:$LB_PORT
    mode tcp
    default_backend kube-apiserver

backend kube-apiserver
    mode tcp
    balance roundrobin
    option tcp-check
EOF
        for ip in "${MASTERS[@]}"; do
            printf '    server  master%s  %s:%s check\n' "$(last_octet "$ip")" "$ip" "$API_PORT"
        done
    } | write_file 0644 /etc/haproxy/haproxy.cfg
    if command -v haproxy >/dev/null 2>&1; then
        run haproxy -c -f /etc/haproxy/haproxy.cfg || die "haproxy rejects /etc/haproxy/haproxy.cfg"
    fi

    for i in "${!MASTERS[@]}"; do
        [[ $i -eq $MY_INDEX ]] && continue
        peers+="        ${MASTERS[$i]}"$'\n'
    done
    local state=BACKUP
    ((MY_INDEX == 0)) && state=MASTER
    write_file 0644 /etc/keepalived/keepalived.conf <<EOF
# $MANAGED
global_defs {
    router_id $NODE_NAME
    script_user root
    enable_script_security
}

vrrp_script chk_haproxy {
    script "/usr/bin/pgrep -x haproxy"
    interval 2
    fall 2
    rise 2
}

vrrp_instance VI_K8S_API {
    state $state
    interface $MY_IFACE
    virtual_router_id 51
    priority $((100 - MY_INDEX))
    advert_int 1
    unicast_src_ip $MY_IP
    unicast_peer {
${peers%$'\n'}
    }
    virtual_ipaddress {
        $CLUSTER_IP/$MY_PREFIX dev $MY_IFACE
    }
    track_script {
        chk_haproxy
    }
}
EOF
    run systemctl enable haproxy keepalived
    run systemctl restart haproxy || die "haproxy did not restart"
    run systemctl restart keepalived || die "keepalived did not restart"
    log "haproxy *:$LB_PORT -> ${#MASTERS[@]} masters; keepalived VIP $CLUSTER_IP/$MY_PREFIX on $MY_IFACE, priority $((100 - MY_INDEX))"
}

# The main master initialises the cluster through the VIP, so wait (bounded) for keepalived
# to bring it up here.
wait_for_vip() {
    local deadline=$((SECONDS + VIP_WAIT_SECONDS))
    while ((SECONDS < deadline)); do
        if ip -4 -o addr show | awk '{print $4}' | grep -qx "$CLUSTER_IP/[0-9]*"; then
            log "VIP $CLUSTER_IP is up on this node"
            return 0
        fi
        sleep 2
    done
    warn "VIP $CLUSTER_IP did not appear on this node within ${VIP_WAIT_SECONDS}s; continuing"
}

# ---------------------------------------------------------------------------------------------
# Kubernetes
# ---------------------------------------------------------------------------------------------
install_kubeconfig() {
    install -d -m 0700 /root/.kube
    install -m 0600 "$ADMIN_CONF" /root/.kube/config
    local user=${SUDO_USER:-} home group
    if [[ -n $user && $user != root ]]; then
        home=$(getent passwd "$user" | cut -d: -f6)
        group=$(id -gn "$user")
        if [[ -n $home && -d $home ]]; then
            install -d -m 0700 -o "$user" -g "$group" "$home/.kube"
            install -m 0600 -o "$user" -g "$group" "$ADMIN_CONF" "$home/.kube/config"
            log "kubeconfig: /root/.kube/config and $home/.kube/config"
            return 0
        fi
    fi
    log "kubeconfig: /root/.kube/config"
}

kubeadm_init() {
    step kubeadm-init
    local endpoint=$CLUSTER_IP:$API_PORT
    if ((HA)); then
        endpoint=$CLUSTER_IP:$LB_PORT
        wait_for_vip
    fi
    # The bootstrap token is chosen here and printed later, so no second token is created.
    INIT_TOKEN=$(kubeadm token generate | tail -n 1) || die "kubeadm token generate failed"
    [[ $INIT_TOKEN =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || die "kubeadm token generate printed no token"
    run kubeadm init \
        --token "$INIT_TOKEN" \
        --pod-network-cidr "$POD_CIDR" \
        --service-cidr "$SVC_CIDR" \
        --control-plane-endpoint "$endpoint" \
        --upload-certs \
        --apiserver-advertise-address "$MY_IP" ||
        die "kubeadm init failed (see the output above; 'kubeadm reset -f' before trying again)"
}

# Get the CNI manifest: the verified offline copy, or the pinned download.
fetch_cni() {
    STEP=cni
    if [[ -n $OFFLINE_DIR ]]; then
        CNI_MANIFEST=$OFFLINE_DIR/cni.yaml
        return 0
    fi
    CNI_MANIFEST=$WORKDIR/calico.yaml
    run curl -fsSL --retry 3 --connect-timeout 20 --max-time 300 -o "$CNI_MANIFEST" "$CALICO_URL" ||
        die "download of $CALICO_URL failed"
    printf '%s  %s\n' "$CALICO_SHA256" "$CNI_MANIFEST" | sha256sum --quiet -c - >&2 ||
        die "$CALICO_URL does not match the pinned CALICO_SHA256"
}

apply_cni() {
    step cni
    local attempt
    # One apply; only a failing apply (API server still starting) is tried again, at most 5 times.
    for attempt in 1 2 3 4 5; do
        if run kubectl apply -f "$CNI_MANIFEST"; then
            break
        fi
        ((attempt == 5)) && die "kubectl apply -f $CNI_MANIFEST failed 5 times"
        sleep 5
    done
    log "waiting up to ${CNI_WAIT_SECONDS}s for node/$NODE_NAME to be Ready"
    run kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout="${CNI_WAIT_SECONDS}s" ||
        die "node/$NODE_NAME is not Ready ${CNI_WAIT_SECONDS}s after applying the CNI"
}

# Print the lines the driver parses (contract §2): the token of kubeadm init, or on a re-run a
# fresh one; a fresh certificate key every time.
print_join_info() {
    step join-info
    local token=$INIT_TOKEN server hash key
    if [[ -z $token ]]; then
        token=$(kubeadm token create | tail -n 1) || die "kubeadm token create failed"
        [[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || die "kubeadm token create printed no token"
    fi
    server=$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}') ||
        die "kubectl config view failed"
    [[ $server == https://* ]] || die "no API server URL in $ADMIN_CONF"
    hash=$(openssl x509 -pubkey -noout -in "$CA_CRT" | openssl pkey -pubin -outform der |
        sha256sum | awk '{print $1}') || die "cannot compute the CA public key hash of $CA_CRT"
    [[ $hash =~ ^[0-9a-f]{64}$ ]] || die "cannot compute the CA public key hash of $CA_CRT"
    key=$(kubeadm init phase upload-certs --upload-certs | tail -n 1) ||
        die "kubeadm init phase upload-certs failed"
    [[ $key =~ ^[0-9a-f]{64}$ ]] || die "kubeadm init phase upload-certs printed no certificate key"
    grep -q -- '-----BEGIN CERTIFICATE-----' "$CA_CRT" || die "$CA_CRT is not a PEM certificate"

    printf 'token:%s\n' "$token"
    printf 'server:%s\n' "$server"
    printf 'ssl_ca_cert_hash:%s\n' "$hash"
    printf 'certificate_key:%s\n' "$key"
    sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p' "$CA_CRT"
}

# The JoinConfiguration apiVersion the installed kubeadm reads: v1beta4 from 1.31 on (where
# v1beta3 is deprecated), v1beta3 before.
join_config_api() {
    local v
    v=$(kubeadm version -o short 2>/dev/null) || die "kubeadm version -o short failed"
    [[ $v =~ ^v?1\.([0-9]+)\. ]] || die "kubeadm version -o short printed no version"
    if ((BASH_REMATCH[1] >= 31)); then
        JOIN_API=kubeadm.k8s.io/v1beta4
    else
        JOIN_API=kubeadm.k8s.io/v1beta3
    fi
}

# Write the JoinConfiguration for ENDPOINT to stdout. JSON, which kubeadm reads as YAML; every
# value was checked by parse_args (token, hash and key patterns, IPv4 addresses), so none needs
# escaping. printf is a builtin: the secrets are in no process's argv.
join_config() {
    local endpoint=$1
    printf '{\n  "apiVersion": "%s",\n  "kind": "JoinConfiguration",\n' "$JOIN_API"
    printf '  "discovery": {\n    "bootstrapToken": {\n      "apiServerEndpoint": "%s",\n' "$endpoint"
    printf '      "token": "%s",\n      "caCertHashes": ["sha256:%s"]\n    }\n  }' "$TOKEN" "$CA_HASH"
    if [[ $ROLE == join-master ]]; then
        printf ',\n  "controlPlane": {\n    "certificateKey": "%s",\n' "$CERT_KEY"
        printf '    "localAPIEndpoint": {"advertiseAddress": "%s"}\n  }' "$MY_IP"
    fi
    printf '\n}\n'
}

# kubeadm join, with its output also kept to look for the success line. The token and the
# certificate key go to kubeadm in a --config file (0600, in a 0700 directory of its own, removed
# right after the join and by the EXIT trap on every other path), not as --token or
# --certificate-key, which any user could read in kubeadm's argv while it runs.
kubeadm_join() {
    local endpoint=$1 out=$WORKDIR/join.log rc=0 cfg
    join_config_api
    JOIN_DIR=$(umask 077 && mktemp -d) || die "mktemp -d failed"
    cfg=$JOIN_DIR/join.json
    (umask 077 && join_config "$endpoint" >"$cfg") || die "cannot write $cfg"
    kubeadm join --config "$cfg" 2>&1 | tee "$out" >&2 || rc=$?
    rm -rf -- "$JOIN_DIR"
    JOIN_DIR=''
    if ((rc != 0)) || ! grep -q 'This node has joined the cluster' "$out"; then
        die "kubeadm join $endpoint did not complete (status $rc)" 255
    fi
}

join_master() {
    step kubeadm-join-master
    local endpoint=$CLUSTER_IP:$API_PORT
    ((HA)) && endpoint=$CLUSTER_IP:$LB_PORT
    kubeadm_join "$endpoint"
}

join_worker() {
    step kubeadm-join-worker
    local endpoint=$CLUSTER_IP:$LB_PORT
    [[ ${ha_flag:-} == False ]] && endpoint=$CLUSTER_IP:$API_PORT
    kubeadm_join "$endpoint"
}

# A master is done when `kubectl get nodes -o wide` shows its address (bounded wait).
verify_master() {
    step verify
    local deadline=$((SECONDS + NODE_WAIT_SECONDS)) nodes
    while :; do
        nodes=$(kubectl get nodes -o wide 2>/dev/null || true)
        if awk -v ip="$MY_IP" '{ for (i = 1; i <= NF; i++) if ($i == ip) found = 1 } END { exit !found }' \
            <<<"$nodes"; then
            log "node $NODE_NAME ($MY_IP) is in the cluster"
            return 0
        fi
        ((SECONDS < deadline)) || break
        sleep 3
    done
    die "kubectl get nodes -o wide does not list $MY_IP after ${NODE_WAIT_SECONDS}s" 255
}

mark_installed() {
    install -d -m 0755 "$STATE_DIR"
    printf 'role=%s node=%s ip=%s date=%s\n' "$ROLE" "$NODE_NAME" "$MY_IP" "$(date -u +%FT%TZ)" |
        write_file 0644 "$MARKER"
    touch "$COMPAT_MARKER"
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
# Only the first master of -m may initialise the cluster.
check_main_master() {
    if [[ $ROLE == main-master && $MY_INDEX -ne 0 ]]; then
        STEP=find-my-ip
        die "this node is master #$((MY_INDEX + 1)) in -m, not the first: a joining master needs -t, -s and -k"
    fi
}

already_installed() {
    step already-installed
    log "$KUBELET_CONF exists: this node already joined a cluster; skipping install and join"
    # A master further down -m that joined earlier, re-run without -t/-s/-k.
    if [[ $ROLE == main-master && $MY_INDEX -ne 0 ]]; then
        ROLE=join-master
    fi
    export KUBECONFIG=$ADMIN_CONF
    if [[ $ROLE == main-master ]]; then
        [[ -f $ADMIN_CONF ]] || die "$ADMIN_CONF is missing on the main master"
        if [[ ! -f $MARKER ]]; then
            log "the previous run did not finish: resuming after kubeadm init"
            [[ -n $OFFLINE_DIR ]] && verify_offline
            check_pins
            WORKDIR=$(mktemp -d)
            install_kubeconfig
            fetch_cni
            apply_cni
            verify_master
        fi
        print_join_info
    elif [[ $ROLE == join-master && ! -f $MARKER ]]; then
        verify_master
    fi
    mark_installed
    log "done (already installed)"
}

main() {
    parse_args "$@"
    ensure_root "${ORIG_ARGS[@]}"
    # (Kept until now for the sudo -E re-run above; not passed on to what this script runs.)
    unset K8S_JOIN_TOKEN K8S_CERT_KEY
    setup_output
    check_os
    find_my_ip
    if [[ -f $KUBELET_CONF ]]; then
        already_installed
        exit 0
    fi
    check_main_master
    check_pins
    [[ -n $OFFLINE_DIR ]] && verify_offline
    WORKDIR=$(mktemp -d)

    setup_proxy
    set_hostname
    disable_swap
    kernel_settings
    install_packages
    configure_containerd
    [[ $MODE == master ]] && ((HA)) && configure_ha

    case $ROLE in
        main-master)
            fetch_cni
            kubeadm_init
            export KUBECONFIG=$ADMIN_CONF
            install_kubeconfig
            apply_cni
            verify_master
            print_join_info
            ;;
        join-master)
            join_master
            export KUBECONFIG=$ADMIN_CONF
            install_kubeconfig
            verify_master
            ;;
        worker)
            join_worker
            ;;
    esac
    mark_installed
    STEP=finished
    log "done: $NODE_NAME ($MY_IP) is a $ROLE"
}

# Run, unless sourced (the script tests call its functions one by one).
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
fi
