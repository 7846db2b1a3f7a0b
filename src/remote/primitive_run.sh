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
# deleted before it starts, params.json as soon as it ends, however it ends: its own exit, the
# timeout, or the leash's TERM when the driver goes away (primitive_result.sh removes the whole
# run directory afterwards). The script's exit status is written to RUN_DIR/rc, for
# primitive_result.sh, so its output stays in the command's result whatever the status.
#
# Before that, in this same exec (no round trip of its own), the parameters older runs left in
# their sibling directories are swept: those of a run whose program is gone (its pid file names
# a process that no longer exists: a driver killed while it ran, a node rebooted), and those of
# a run that never started, once they are over an hour old (the driver died between the upload
# and the run). A run in progress, or one being uploaded now, keeps its own.
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
printf '%s\n' "$$" >./pid || exit 2
# The parameters go however this ends. PIPE too: once sshd has closed the session's pipes,
# the shell's own report of a killed script ("Terminated") raises SIGPIPE. Signals caught here
# are back to their defaults in the script.
trap 'rm -f -- "$dir/params.json" "$dir/params.env" 2>/dev/null' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
trap 'exit 141' PIPE
for other in ../*/; do
    other=${other%/}
    [ "$other" = "../${dir##*/}" ] && continue
    [ -f "$other/params.json" ] || [ -f "$other/params.env" ] || continue
    if [ -f "$other/pid" ]; then
        p=$(head -n 1 -- "$other/pid")
        case $p in '' | *[!0-9]*) ;; *) [ -d "/proc/$p" ] && continue ;; esac
    elif [ -z "$(find "$other" -maxdepth 0 -mmin +60)" ]; then
        continue
    fi
    rm -f -- "$other/params.json" "$other/params.env"
done
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
rc=$?
rm -f -- ./params.json
printf '%s\n' "$rc" >./rc || exit 2
