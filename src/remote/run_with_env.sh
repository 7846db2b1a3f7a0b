#!/bin/sh
# run_with_env.sh: run a command in the instance's run directory with the variables of an env
# file, which is deleted before the command starts.
#
# The env file (KEY='value' lines, mode 0600) is how secrets such as the kubeadm join token
# reach the node: never in a command line. A command argument that is exactly the text
# `$K8S_JOIN_TOKEN` or `$K8S_CERT_KEY` is replaced by that variable's value from the env file
# (empty when the file does not set it); every other argument is passed on as it is.
#
# Usage: run_with_env.sh RUN_DIR ENV_FILE COMMAND [ARG]...
#   RUN_DIR   the run directory (relative paths are in the login user's home)
#   ENV_FILE  the env file's name in RUN_DIR
#   COMMAND   what to run there, e.g. `bash ./install_k8s_cluster.sh -m ...`
# Exit status: the command's; non-zero when RUN_DIR or ENV_FILE cannot be used.

cd "$1" || exit
set -a
# shellcheck disable=SC1090 # a data file the driver wrote for this run, not a script here
. "./$2" || exit
set +a
rm -f "./$2" || exit
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
