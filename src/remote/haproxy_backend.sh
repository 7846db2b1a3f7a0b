#!/bin/sh
# haproxy_backend.sh: set one master's backend line in haproxy's configuration and reload it.
# Runs after file_lib.sh.
#
# Removes the `server NAME ...` line, then, given an address, adds it back as
# `    server  NAME  IP:6443 check` after the last `server` line (a `sed '/server * check/a'`
# would never match the real two-space lines), and reloads haproxy. A node without haproxy (a
# single-master cluster) has nothing to do. The new file is written beside the old one with its
# mode and owner and renamed over it (see replace_file).
#
# NAME must be a DNS name (letters, digits, dots, dashes) and IP hex digits, dots and colons:
# nothing else, so no value can add a line or a field. They reach awk through its environment
# (`awk -v` would turn a `\n` in them into a new line).
#
# Usage: haproxy_backend.sh NAME [IP]
#   NAME  the master's name in the backend
#   IP    its new address; without it the line is only removed
# Exit status: 0 done, or no haproxy here; 1 the file could not be rewritten; 2 a refused value;
# systemctl's when haproxy did not reload.

cfg=/etc/haproxy/haproxy.cfg
case $1 in
'' | -* | *[!A-Za-z0-9.-]*)
    printf 'haproxy_backend.sh: refused name: %s\n' "$1" >&2
    exit 2
    ;;
esac
case ${2-} in
*[!0-9A-Fa-f.:]*)
    printf 'haproxy_backend.sh: refused address: %s\n' "$2" >&2
    exit 2
    ;;
esac
if [ ! -f "$cfg" ]; then
    echo 'no haproxy on this node'
    exit 0
fi
tmp=$(new_copy "$cfg") || exit 1
trap 'rm -f -- "$tmp"' EXIT
if ! MGMT_NAME=$1 MGMT_IP=${2-} awk '
    BEGIN { name = ENVIRON["MGMT_NAME"]; ip = ENVIRON["MGMT_IP"] }
    $1 == "server" && $2 == name { next }
    { l[++n] = $0; if ($1 == "server") last = n }
    END {
        for (i = 1; i <= n; i++) {
            print l[i]
            if (i == last && ip != "") printf "    server  %s  %s:6443 check\n", name, ip
        }
    }
' "$cfg" >"$tmp"; then
    exit 1
fi
replace_file "$tmp" "$cfg"
systemctl reload haproxy
