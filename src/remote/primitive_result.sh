#!/bin/sh
# primitive_result.sh: after primitive_run.sh, print the script's exit status and what it wrote
# to its result file, then remove the run directory (parameters and result with it).
#
# Output: the exit status on the first line (`none` when the script never finished), then at
# most MAX+1 bytes of RUN_DIR/result.json (nothing when the script wrote none), so the driver
# can tell a result over MAX bytes from one of exactly MAX.
#
# Usage: primitive_result.sh RUN_DIR MAX
# Exit status: 0; 2 bad usage.

case $2 in
'' | *[!0-9]*)
    printf 'primitive_result.sh: not a size: %s\n' "$2" >&2
    exit 2
    ;;
esac
if [ -f "$1/rc" ]; then
    head -n 1 -- "$1/rc"
else
    echo none
fi
if [ -f "$1/result.json" ]; then
    head -c "$(($2 + 1))" -- "$1/result.json"
fi
rm -rf -- "$1"
exit 0
