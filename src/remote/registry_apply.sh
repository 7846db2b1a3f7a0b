#!/bin/sh
# registry_apply.sh: put the private-registry files the driver uploaded to the run directory in
# place for containerd and kubelet, and remove what earlier runs wrote for registries that are
# no longer listed. Runs after file_lib.sh. Idempotent: a re-run with the same arguments leaves
# the same files.
#
# For the K-th -s/-C argument (K from 0), the run directory holds registry-K.hosts.toml (and,
# for -C, registry-ca-K.crt). They go to /etc/containerd/certs.d/SERVER/hosts.toml and
# .../ca.crt (mode 0644). A directory there whose hosts.toml starts with one of our marker
# lines (`# managed by mgmt-driver` or the install script's `# managed by
# install_k8s_cluster.sh`) and whose server is not listed is removed; other directories are
# never touched.
#
# /etc/hosts: every line ending in `# mgmt-driver registry` is dropped and one such line is
# appended per -e entry (so a removed registry's line goes, and re-runs add no duplicates).
#
# Credentials: AUTH_FILE (a name in RUN_DIR, mode 0600, uploaded by the driver; `-` for none)
# becomes kubelet's docker config /var/lib/kubelet/config.json (mode 0600) and is deleted on
# every path once this program runs. The config is ours while /var/lib/kubelet/config.json.
# mgmt-driver exists; a config that was there before ours is kept once as
# config.json.pre-mgmt-driver and put back when a later run has no credentials. The secret is
# never an argument and never printed.
#
# containerd's CRI plugin reads certs.d only when its registry `config_path` says so: an empty
# `config_path = ""` in a `.registry]` section of /etc/containerd/config.toml is set to
# /etc/containerd/certs.d (and a running containerd restarted). No config.toml yet: the install
# script that runs next writes it with that path.
#
# With no registry and no AUTH_FILE it removes everything of ours (terminate --reset-nodes).
#
# Usage: registry_apply.sh RUN_DIR AUTH_FILE [-e 'IP NAME...']... [-s SERVER | -C SERVER]...
#   -e 'IP NAME...'  an /etc/hosts line for a registry (hosts_string)
#   -s SERVER        a registry without a CA file (host[:port], [v6]:port)
#   -C SERVER        a registry with its CA (registry-ca-K.crt)
# Exit status: 0 done; 1 a file could not be written or removed; 2 bad usage or a refused value.

refuse() {
    printf 'registry_apply.sh: refused %s: %s\n' "$1" "$2" >&2
    exit 2
}
[ $# -ge 2 ] || refuse 'usage' 'RUN_DIR AUTH_FILE [-e ENTRY]... [-s|-C SERVER]...'
run_dir=$1
auth=$2
shift 2
case $auth in
- | env.*) ;;
*) refuse 'credentials file name' "$auth" ;;
esac
case $auth in
*/*) refuse 'credentials file name' "$auth" ;;
esac
[ "$auth" = - ] || trap 'rm -f -- "$run_dir/$auth"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

certs=/etc/containerd/certs.d
entries=''
servers=''
nl='
'
while getopts e:s:C: opt; do
    case $opt in
    e)
        case $OPTARG in
        *"$nl"*) refuse 'hosts entry' "$OPTARG" ;;
        *' '*) ;;
        *) refuse 'hosts entry (no name)' "$OPTARG" ;;
        esac
        case ${OPTARG%% *} in
        '' | *[!0-9A-Fa-f.:]*) refuse 'address' "${OPTARG%% *}" ;;
        esac
        case ${OPTARG#* } in
        '' | ' '* | *[!A-Za-z0-9.\ -]*) refuse 'name' "${OPTARG#* }" ;;
        esac
        entries="$entries$OPTARG$nl"
        ;;
    s | C)
        case $OPTARG in
        '' | .* | -* | *..*) refuse 'server' "$OPTARG" ;;
        esac
        case $(printf '%s' "$OPTARG" | tr -d '][') in
        '' | *[!A-Za-z0-9.:-]*) refuse 'server' "$OPTARG" ;;
        esac
        servers="$servers$opt $OPTARG$nl"
        ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || refuse 'argument' "$1"
# The run directory holds the uploads; with none to read (terminate: remove everything) it may
# be gone already.
if [ -n "$servers" ] || [ "$auth" != - ]; then
    cd "$run_dir" || exit 1
    [ "$auth" = - ] || trap 'rm -f -- "$auth"' EXIT
fi

# put SRC DEST MODE: copy SRC over DEST through a temporary file beside it (atomic rename).
put() {
    t=$(mktemp -- "${2%/*}/.${2##*/}.mgmt-driver.XXXXXX") || exit 1
    if ! cat -- "$1" >"$t" || ! chmod -- "$3" "$t" || ! mv -f -- "$t" "$2"; then
        rm -f -- "$t"
        printf 'cannot write %s\n' "$2" >&2
        exit 1
    fi
}

# 1. containerd host configs.
k=0
listed=' '
while IFS=' ' read -r kind server; do
    [ -n "$server" ] || continue
    dir=$certs/$server
    mkdir -p -- "$dir" || exit 1
    chmod 0755 -- "$dir" || exit 1
    put "registry-$k.hosts.toml" "$dir/hosts.toml" 0644
    if [ "$kind" = C ]; then
        put "registry-ca-$k.crt" "$dir/ca.crt" 0644
        printf 'registry %s: hosts.toml, ca.crt\n' "$server"
    else
        rm -f -- "$dir/ca.crt" || exit 1
        printf 'registry %s: hosts.toml\n' "$server"
    fi
    listed="$listed$server "
    k=$((k + 1))
done <<EOF
$servers
EOF
for d in "$certs"/*/; do
    [ -f "${d}hosts.toml" ] || continue
    name=${d%/}
    name=${name##*/}
    case $listed in
    *" $name "*) continue ;;
    esac
    IFS= read -r first <"${d}hosts.toml" || first=''
    case $first in
    '# managed by mgmt-driver'* | '# managed by install_k8s_cluster.sh'*)
        rm -rf -- "${d%/}" || exit 1
        printf 'registry %s: removed (no longer listed)\n' "$name"
        ;;
    esac
done

# 2. /etc/hosts lines of the registries.
hosts=/etc/hosts
tmp=$(new_copy "$hosts") || exit 1
if ! awk '!/# mgmt-driver registry$/' "$hosts" >"$tmp" ||
    ! printf '%s' "$entries" | awk 'NF { print $0 " # mgmt-driver registry" }' >>"$tmp"; then
    rm -f -- "$tmp"
    exit 1
fi
replace_file "$tmp" "$hosts"

# 3. containerd reads certs.d.
cfg=/etc/containerd/config.toml
if [ -f "$cfg" ]; then
    new=$(mktemp -- "$cfg.mgmt-driver.XXXXXX") || exit 1
    if ! awk -v dir="$certs" '
        /^[[:space:]]*\[/ { in_reg = ($0 ~ /\.registry\][[:space:]]*$/) }
        in_reg && /^[[:space:]]*config_path[[:space:]]*=[[:space:]]*""[[:space:]]*$/ {
            sub(/=.*/, "= \"" dir "\""); changed = 1 }
        { print }
        END { exit !changed }' "$cfg" >"$new"; then
        rm -f -- "$new"
    elif chmod 0644 -- "$new" && mv -f -- "$new" "$cfg"; then
        printf 'containerd: registry config_path set to %s\n' "$certs"
        if systemctl is-active --quiet containerd; then
            systemctl restart containerd || exit 1
        fi
    else
        rm -f -- "$new"
        exit 1
    fi
fi

# 4. kubelet's credentials.
kdir=/var/lib/kubelet
kcfg=$kdir/config.json
mark=$kcfg.mgmt-driver
keep=$kcfg.pre-mgmt-driver
if [ "$auth" != - ]; then
    [ -f "$auth" ] || {
        printf 'registry_apply.sh: no credentials file %s\n' "$auth" >&2
        exit 1
    }
    [ -d "$kdir" ] || mkdir -m 0700 -- "$kdir" || exit 1
    if [ -e "$kcfg" ] && [ ! -e "$mark" ] && [ ! -e "$keep" ]; then
        cp -p -- "$kcfg" "$keep" || exit 1
        printf 'kubelet: kept the earlier %s as %s\n' "$kcfg" "$keep"
    fi
    put "$auth" "$kcfg" 0600
    : >"$mark" || exit 1
    rm -f -- "$auth" || exit 1
    printf 'kubelet: registry credentials written to %s (mode 0600)\n' "$kcfg"
elif [ -e "$mark" ]; then
    rm -f -- "$kcfg" "$mark" || exit 1
    if [ -e "$keep" ]; then
        mv -f -- "$keep" "$kcfg" || exit 1
    fi
    printf 'kubelet: registry credentials removed from %s\n' "$kcfg"
fi
