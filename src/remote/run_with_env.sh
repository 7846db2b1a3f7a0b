#!/bin/sh
# run_with_env.sh: run a command in the instance's run directory with the variables of an env
# file, which is deleted before the command starts.
#
# The env file (KEY='value' lines, mode 0600) is how secrets such as the kubeadm join token
# reach the node: never in a command line. A command argument that is exactly the text
# `$K8S_JOIN_TOKEN` or `$K8S_CERT_KEY` is replaced by that variable's value from the env file
# (empty when the file does not set it); every other argument is passed on as it is.
#
# The env file goes on every path once this program runs: when the run directory cannot be
# entered, when the file cannot be read, and when a signal arrives while it is read. (When the
# program never runs at all, the driver removes the file: see clean_env.sh.)
#
# Usage: run_with_env.sh RUN_DIR ENV_FILE COMMAND [ARG]...
#   RUN_DIR   the run directory (relative paths are in the login user's home)
#   ENV_FILE  the env file's name in RUN_DIR (a plain name, no slash)
#   COMMAND   what to run there, e.g. `bash ./install_k8s_cluster.sh -m ...`
# Exit status: the command's; non-zero when RUN_DIR or ENV_FILE cannot be used (the env file is
# removed then too); 2 bad usage.

case $2 in
'' | */*)
    printf 'run_with_env.sh: not a file name: %s\n' "$2" >&2
    exit 2
    ;;
esac
env_file=$1/$2
trap 'rm -f -- "$env_file"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$1" || exit
env_file=./$2
set -a
# shellcheck disable=SC1090 # a data file the driver wrote for this run, not a script here
. "$env_file" || exit
set +a
rm -f -- "$env_file" || exit
trap - EXIT HUP INT TERM
shift 2
for arg do
    shift
    # shellcheck disable=SC2016 # the placeholders are literal text, matched as such
    case $arg in
    '$K8S_JOIN_TOKEN') set -- "$@" "${K8S_JOIN_TOKEN-}" ;;
    '$K8S_CERT_KEY') set -- "$@" "${K8S_CERT_KEY-}" ;;
    *) set -- "$@" "$arg" ;;
    esac
done
exec "$@"
