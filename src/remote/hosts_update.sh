#!/bin/sh
# hosts_update.sh: make the node's hosts file name each cluster node exactly once. Runs after
# file_lib.sh.
#
# Drops every line whose address is one of ours or one to drop (an exact field match, unlike a
# `sed '/10.0.0.1/d'` that also hits 10.0.0.10) and every line this program wrote earlier for
# one of our names, then appends one `IP NAME # mgmt-driver` line per entry. Lines of the
# registry step (`# mgmt-driver registry`, registry_apply.sh) are its own: kept here, even at a
# node's address. Idempotent. The new file is written beside the old one with its mode and
# owner and renamed over it (see replace_file for a bind-mounted /etc/hosts).
#
# Every address and name is checked first: an address is hex digits, dots and colons; a name
# is letters, digits, dots, dashes and underscores (several names: separated by spaces). Nothing
# else, so no value can add a line or a field. The values reach awk through its environment
# (`awk -v` would turn a `\n` in them into a new line).
#
# Usage: hosts_update.sh [-d IP]... ['IP NAME']...
#   -d IP      an address whose lines go, with no replacement (a node that left)
#   'IP NAME'  one entry, one argument: a node's address and its name(s)
# Exit status: 0 done; 1 the file could not be rewritten; 2 bad usage or a refused value.

hosts=/etc/hosts
refuse() {
    printf 'hosts_update.sh: refused %s: %s\n' "$1" "$2" >&2
    exit 2
}
check_ip() {
    case $1 in
    '' | *[!0-9A-Fa-f.:]*) refuse 'address' "$1" ;;
    esac
}
ips=''
while getopts d: opt; do
    case $opt in
    d)
        check_ip "$OPTARG"
        ips="$ips $OPTARG"
        ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
names=''
for entry do
    case $entry in
    *' '*) ;;
    *) refuse 'entry (no name)' "$entry" ;;
    esac
    check_ip "${entry%% *}"
    case ${entry#* } in
    '' | ' '* | *[!A-Za-z0-9._\ -]*) refuse 'name' "${entry#* }" ;;
    esac
    ips="$ips ${entry%% *}"
    names="$names ${entry#* }"
done

tmp=$(new_copy "$hosts") || exit 1
trap 'rm -f -- "$tmp"' EXIT
if ! MGMT_IPS=$ips MGMT_NAMES=$names awk '
    BEGIN {
        n = split(ENVIRON["MGMT_IPS"], a, " "); for (i = 1; i <= n; i++) ip[a[i]] = 1
        n = split(ENVIRON["MGMT_NAMES"], b, " "); for (i = 1; i <= n; i++) nm[b[i]] = 1
    }
    /# mgmt-driver registry$/ { print; next }
    $1 in ip { next }
    /# mgmt-driver$/ && ($2 in nm) { next }
    { print }
' "$hosts" >"$tmp"; then
    exit 1
fi
{ [ $# -eq 0 ] || printf '%s # mgmt-driver\n' "$@"; } >>"$tmp" || exit 1
replace_file "$tmp" "$hosts"
