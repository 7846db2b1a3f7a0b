#!/bin/sh
# proxy_cleanup.sh: remove the proxy settings our install scripts wrote on a node, and nothing
# else, when terminate resets a node that is kept (`terminate-end --reset-nodes`):
# - /etc/environment: the managed block install_helm.sh writes, from its BEGIN line to its END
#   line; every other line stays as it is, and the file keeps its mode and owner;
# - /etc/apt/apt.conf.d/95mgmt-driver-proxy and the `http-proxy.conf` systemd drop-ins of
#   containerd and kubelet, which install_k8s_cluster.sh writes, only when their first line says
#   they are managed by it (an operator's own file of that name is left alone); a drop-in
#   directory left empty goes too, and systemd reloads its units.
#
# Usage: proxy_cleanup.sh [ROOT]
#   ROOT  a directory the paths are under (tests); empty or absent: the node's /
# Prints what it removed, one a line. Exit status: 0 done (also when there was nothing);
# 1 a file could not be rewritten or removed.

root=${1-}
begin='# BEGIN mgmt-driver proxy (managed by install scripts, do not edit)'
end='# END mgmt-driver proxy'
managed='managed by install_k8s_cluster.sh'

env_file=$root/etc/environment
if [ -f "$env_file" ] && grep -qxF -- "$begin" "$env_file"; then
    tmp=$(mktemp -- "$env_file.XXXXXX") || exit 1
    if awk -v b="$begin" -v e="$end" '
        $0 == b { skip = 1; next }
        skip && $0 == e { skip = 0; next }
        !skip { print }' "$env_file" >"$tmp" &&
        chmod --reference="$env_file" -- "$tmp" &&
        chown --reference="$env_file" -- "$tmp" &&
        mv -f -- "$tmp" "$env_file"; then
        printf 'removed the proxy block of /etc/environment\n'
    else
        rm -f -- "$tmp"
        exit 1
    fi
fi

reload=0
for f in "$root/etc/apt/apt.conf.d/95mgmt-driver-proxy" \
    "$root/etc/systemd/system/containerd.service.d/http-proxy.conf" \
    "$root/etc/systemd/system/kubelet.service.d/http-proxy.conf"; do
    [ -f "$f" ] || continue
    first=
    IFS= read -r first <"$f" || [ -n "$first" ] || continue
    case $first in
    *"$managed"*) ;;
    *) continue ;;
    esac
    rm -f -- "$f" || exit 1
    printf 'removed %s\n' "${f#"$root"}"
    case $f in
    */systemd/system/*)
        reload=1
        rmdir -- "${f%/*}" 2>/dev/null || true
        ;;
    esac
done
if [ "$reload" = 1 ] && [ -z "$root" ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || exit 1
fi
exit 0
