#!/bin/sh
# nfs_packages.sh: install Debian packages for NFS (`nfs-common` on cluster nodes,
# `nfs-kernel-server` on the storage server) with apt-get, non-interactively. Installing a
# package that is already there changes nothing, so a re-run is safe.
#
# Only package names are accepted (lower-case letters, digits, '+', '-', '.'), so no argument
# can become an apt-get option.
#
# Usage: nfs_packages.sh PACKAGE...
# Exit status: apt-get's; 2 bad usage or a refused name.

[ $# -gt 0 ] || {
    printf 'nfs_packages.sh: no package named\n' >&2
    exit 2
}
for p do
    case $p in
    '' | [!a-z0-9]* | *[!a-z0-9+.-]*)
        printf 'nfs_packages.sh: refused package name: %s\n' "$p" >&2
        exit 2
        ;;
    esac
done
DEBIAN_FRONTEND=noninteractive
export DEBIAN_FRONTEND
exec apt-get install -y -q "$@"
