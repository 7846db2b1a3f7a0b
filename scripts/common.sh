# shellcheck shell=bash
# Shared helpers for the controller-side scripts (lab.sh, bench-fanout.sh). Sourced, not run.
# Expects PROG (the script's name) and a usage() function to be defined by the caller.

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}
usage_error() {
    printf '%s: %s\n\n' "$PROG" "$*" >&2
    usage >&2
    exit 2
}
