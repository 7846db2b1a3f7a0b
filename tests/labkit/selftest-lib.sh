# selftest-lib.sh - LAB KIT: helpers shared by the kit's self-tests (sourced, not run).
# The sourcing script sets PASS, FAIL, OUT, RC and DIR (the lab directory) first.
# shellcheck shell=bash disable=SC2034

ok() {
    PASS=$((PASS + 1))
    printf 'ok   %s\n' "$1"
}
bad() {
    FAIL=$((FAIL + 1))
    printf 'FAIL %s\n' "$1"
    if [ -n "$OUT" ]; then printf '%s\n' "$OUT" | tail -n 15 | sed 's/^/     | /'; fi
}
# expect DESC CONDITION...: the condition is a command (usually a test on $OUT/$RC)
expect() {
    local desc=$1
    shift
    if "$@"; then ok "$desc"; else bad "$desc"; fi
}
# check STATUS DESC: for conditions written out before it (check $? "...")
check() {
    if [ "$1" -eq 0 ]; then ok "$2"; else bad "$2"; fi
}
# on IP CMD: run CMD as root on a node over ssh; sets OUT (stdout+stderr) and RC
on() {
    local ip=$1
    shift
    OUT=$(ssh -F "$DIR/ssh_config" -n -o BatchMode=yes "root@$ip" "$*" 2>&1)
    RC=$?
}
