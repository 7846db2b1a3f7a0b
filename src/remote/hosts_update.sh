#!/bin/sh
# hosts_update.sh: make the node's hosts file name each cluster node exactly once.
#
# Drops every line whose address is one of ours or one to drop (an exact field match, unlike a
# `sed '/10.0.0.1/d'` that also hits 10.0.0.10) and every line this program wrote earlier for
# one of our names, then appends one `IP NAME # mgmt-driver` line per entry. Idempotent. The
# file is rewritten in place, so it keeps its inode, owner and mode.
#
# Usage: hosts_update.sh [-d IP]... ['IP NAME']...
#   -d IP      an address whose lines go, with no replacement (a node that left)
#   'IP NAME'  one entry, one argument: a node's address and its name
# Exit status: 0 done; 1 the file could not be rewritten; 2 bad usage.

hosts=/etc/hosts
ips=''
while getopts d: opt; do
    case $opt in
    d) ips="$ips $OPTARG" ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
names=''
for entry do
    ips="$ips ${entry%% *}"
    names="$names ${entry#* }"
done

tmp=$(mktemp /etc/.hosts.mgmt-driver.XXXXXX) || exit 1
if awk -v ips="$ips" -v names="$names" '
    BEGIN {
        n = split(ips, a, " "); for (i = 1; i <= n; i++) ip[a[i]] = 1
        n = split(names, b, " "); for (i = 1; i <= n; i++) nm[b[i]] = 1
    }
    $1 in ip { next }
    /# mgmt-driver$/ && ($2 in nm) { next }
    { print }
' "$hosts" >"$tmp" &&
    { [ $# -eq 0 ] || printf '%s # mgmt-driver\n' "$@"; } >>"$tmp" &&
    cat "$tmp" >"$hosts"; then
    rm -f "$tmp"
else
    rm -f "$tmp"
    exit 1
fi
