#!/bin/sh
# nfs_exports.sh: export directories over NFS: create each directory when missing (owned by
# 65534:65534, the `all_squash` user, so clients can write), write our own exports file
# /etc/exports.d/mgmt-driver.exports (the whole file; /etc/exports is left alone), enable and
# start nfs-kernel-server, and `exportfs -ra`. Runs after file_lib.sh. Idempotent: the file is
# rewritten only when it changes.
#
# Each line is `DIR CLIENT(rw,sync,no_subtree_check,insecure,all_squash)`, Tacker's options.
# DIR is letters, digits and `_ . - + /`; CLIENT is an address, a CIDR or a host name. Nothing
# else, so no value can add an option, a client or a line.
#
# The last line printed is `exports=changed|unchanged` for the driver.
#
# Usage: nfs_exports.sh DIR CLIENT [DIR CLIENT]...
# Exit status: 0 done; 1 a step failed; 2 bad usage or a refused value.

file=/etc/exports.d/mgmt-driver.exports
opts=rw,sync,no_subtree_check,insecure,all_squash
refuse() {
    printf 'nfs_exports.sh: refused %s: %s\n' "$1" "$2" >&2
    exit 2
}
if [ $# -eq 0 ] || [ $(($# % 2)) -ne 0 ]; then
    printf 'usage: nfs_exports.sh DIR CLIENT [DIR CLIENT]...\n' >&2
    exit 2
fi
mkdir -p /etc/exports.d || exit 1
[ -e "$file" ] || : >"$file" || exit 1
tmp=$(new_copy "$file") || exit 1
trap 'rm -f -- "$tmp"' EXIT
printf '# written by mgmt-driver (storage_server.nfs_server_setup_params); replaced as a whole\n' >"$tmp" || exit 1
while [ $# -gt 0 ]; do
    dir=$1 client=$2
    shift 2
    case $dir in
    /*) ;;
    *) refuse directory "$dir" ;;
    esac
    case $dir in
    *[!A-Za-z0-9_.+/-]* | */../* | */.. | */./* | */.) refuse directory "$dir" ;;
    esac
    case $client in
    '' | -* | *[!A-Za-z0-9.:/-]*) refuse client "$client" ;;
    esac
    if [ ! -d "$dir" ]; then
        mkdir -p -- "$dir" && chown 65534:65534 -- "$dir" || exit 1
    fi
    printf '%s %s(%s)\n' "$dir" "$client" "$opts" >>"$tmp" || exit 1
done
if cmp -s -- "$tmp" "$file"; then
    rm -f -- "$tmp"
    changed=unchanged
else
    replace_file "$tmp" "$file"
    changed=changed
fi
systemctl enable --now nfs-kernel-server >&2 || exit 1
exportfs -ra >&2 || exit 1
printf 'exports=%s\n' "$changed"
