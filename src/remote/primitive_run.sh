#!/bin/sh
# primitive_run.sh: run one primitive's script in its run directory, with its parameters.
#
# The parameters never reach a command line: the driver uploaded them (mode 0600) into RUN_DIR
# as params.json (the whole set, JSON) and params.env (`PARAM_<NAME>='value'` lines, every
# value quoted by the driver). This program exports them, points the script at them and at
# where it may write a structured result, and runs it:
#   MGMT_DRIVER_PARAMS  RUN_DIR/params.json
#   MGMT_DRIVER_RESULT  RUN_DIR/result.json (the script may write JSON there; the driver reads
#                       it back after the script ends, size-capped, and checks it is JSON)
#   MGMT_DRIVER_PRIMITIVE  the primitive's name
#   PARAM_<NAME>        each parameter (name upper-cased, '-' as '_')
# The script runs with RUN_DIR as its working directory and /dev/null as stdin; params.env is
# deleted before it starts (params.json stays for the script; primitive_result.sh removes the
# whole run directory afterwards). The script's exit status is written to RUN_DIR/rc, for
# primitive_result.sh, so its output stays in the command's result whatever the status.
#
# Usage: primitive_run.sh RUN_DIR SCRIPT PRIMITIVE
#   RUN_DIR    the run's private directory (relative: in the login user's home)
#   SCRIPT     the script's file name in RUN_DIR (a plain name, no slash)
#   PRIMITIVE  the primitive's name
# Exit status: 0 once the script ran (its own status is in RUN_DIR/rc); 2 bad usage or a run
# directory that cannot be used.

case $2 in
'' | */*)
    printf 'primitive_run.sh: not a file name: %s\n' "$2" >&2
    exit 2
    ;;
esac
cd "$1" || exit 2
dir=$(pwd) || exit 2
set -a
# shellcheck disable=SC1091 # a data file the driver wrote for this run, not a script here
. ./params.env || exit 2
set +a
rm -f -- ./params.env || exit 2
MGMT_DRIVER_PARAMS=$dir/params.json
MGMT_DRIVER_RESULT=$dir/result.json
MGMT_DRIVER_PRIMITIVE=$3
export MGMT_DRIVER_PARAMS MGMT_DRIVER_RESULT MGMT_DRIVER_PRIMITIVE
rm -f -- "$MGMT_DRIVER_RESULT" ./rc
"./$2" </dev/null
printf '%s\n' "$?" >./rc || exit 2
