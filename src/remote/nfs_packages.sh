#!/bin/sh
# nfs_packages.sh: install Debian packages for NFS (`nfs-common` on cluster nodes,
# `nfs-kernel-server` on the storage server) with apt-get, non-interactively. Installing a
# package that is already there changes nothing, so a re-run is safe.
#
# Only package names are accepted (lower-case letters, digits, '+', '-', '.'), so no argument
# can become an apt-get option.
#
# With `-e FILE`, the variables of an env file (KEY='value' lines, mode 0600: the proxy, whose
# URL may hold a password) are exported to apt-get, and the file is deleted before apt-get runs
# and on every path out: a VM that is not a cluster node (the storage server) has no apt proxy
# configuration of ours.
#
# Usage: nfs_packages.sh [-e ENV_FILE] PACKAGE...
# Exit status: apt-get's; 1 the env file cannot be read; 2 bad usage or a refused name.

if [ "${1-}" = -e ]; then
    env_file=${2-}
    shift 2 || exit 2
    trap 'rm -f -- "$env_file"' EXIT
    set -a
    # shellcheck disable=SC1090 # a data file the driver wrote for this run, not a script here
    case $env_file in
    /*) . "$env_file" || exit 1 ;;
    *) . "./$env_file" || exit 1 ;;
    esac
    set +a
    rm -f -- "$env_file" || exit 1
    trap - EXIT
fi
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
