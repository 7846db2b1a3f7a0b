#!/bin/sh
# haproxy_backend.sh: set one master's backend line in haproxy's configuration and reload it.
#
# Removes the `server NAME ...` line, then, given an address, adds it back as
# `    server  NAME  IP:6443 check` after the last `server` line (a `sed '/server * check/a'`
# would never match the real two-space lines), and reloads haproxy. A node without haproxy (a
# single-master cluster) has nothing to do. The file is rewritten in place.
#
# Usage: haproxy_backend.sh NAME [IP]
#   NAME  the master's name in the backend
#   IP    its new address; without it the line is only removed
# Exit status: 0 done, or no haproxy here; 1 the file could not be rewritten; systemctl's when
# haproxy did not reload.

cfg=/etc/haproxy/haproxy.cfg
if [ ! -f "$cfg" ]; then
    echo 'no haproxy on this node'
    exit 0
fi
tmp=$(mktemp /etc/haproxy/.cfg.XXXXXX) || exit 1
if awk -v name="$1" -v ip="${2-}" '
    $1 == "server" && $2 == name { next }
    { l[++n] = $0; if ($1 == "server") last = n }
    END {
        for (i = 1; i <= n; i++) {
            print l[i]
            if (i == last && ip != "") printf "    server  %s  %s:6443 check\n", name, ip
        }
    }
' "$cfg" >"$tmp" && cat "$tmp" >"$cfg"; then
    rm -f "$tmp"
else
    rm -f "$tmp"
    exit 1
fi
systemctl reload haproxy
