#!/bin/sh
# helm_apply_lib.sh: the function that installs or upgrades a CNF's releases (helm_apply), sent
# in front of helm_apply.sh and helm_prepare.sh: see helm_apply.sh for what it does and prints.


# record KIND RELEASE WORD [FILE]: one record, FILE's bytes (none without FILE) after its header.
record() {
    if [ -n "${4-}" ]; then
        size=$(wc -c <"$4" | tr -d ' ') || exit 1
        printf '@@mgmt-driver %s %s %s %s\n' "$1" "$2" "$3" "$size"
        cat -- "$4" || exit 1
    else
        printf '@@mgmt-driver %s %s %s 0\n' "$1" "$2" "$3"
    fi
    printf '\n'
}

# fail RELEASE STEP CODE: a failure record with the tail of Helm's stderr.
fail() {
    tail -c 4000 "$tmp/err" >"$tmp/tail" || : >"$tmp/tail"
    record fail "$1" "$2:$3" "$tmp/tail"
    failed=1
}

# helm_first N WORD...: run helm with the first N words (the rest is ignored); stdout into
# $tmp/out, stderr into $tmp/err.
helm_first() {
    hn=$1
    shift
    hi=0
    htotal=$#
    while [ "$hi" -lt "$htotal" ]; do
        hw=$1
        shift
        if [ "$hi" -lt "$hn" ]; then
            set -- "$@" "$hw"
        fi
        hi=$((hi + 1))
    done
    helm "$@" >"$tmp/out" 2>"$tmp/err"
}

is_count() {
    case $1 in
    '' | *[!0-9]*) return 1 ;;
    esac
}

usage() {
    echo 'helm_apply: usage: [RELEASE NAMESPACE N WORD... M FILE...]...' >&2
    exit 2
}

# check_form ARG...: the whole argument list is in the form above, before anything runs.
check_form() {
    while [ $# -gt 0 ]; do
        if [ $# -lt 4 ] || ! is_count "$3"; then usage; fi
        cn=$3
        shift 3
        [ $# -gt "$cn" ] || usage
        shift "$cn"
        if ! is_count "$1" || [ $# -le "$1" ]; then usage; fi
        shift $(($1 + 1))
    done
}

# helm_apply [RELEASE NAMESPACE N WORD... M FILE...]...: the releases, as helm_apply.sh says.
helm_apply() {
    umask 077
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf -- "$tmp"' EXIT
    check_form "$@"
    failed=0
    while [ $# -gt 0 ]; do
        rel=$1 ns=$2 n=$3
        shift 3
        if [ "$failed" = 0 ]; then
            verb=upgrade
            helm status --namespace "$ns" -o json -- "$rel" >"$tmp/out" 2>"$tmp/err"
            code=$?
            if [ "$code" = 0 ]; then
                out=$(cat "$tmp/out")
                # Helm prints `info` (whose first key named status is the release's) before the
                # values; a string cannot hold a bare quote, so the first `"status":"` is that key.
                rest=${out#*\"status\":\"}
                status=${rest%%\"*}
                revision=${out##*\"version\":}
                revision=${revision%%[!0-9]*}
                case $status in '' | *[!a-z-]*) status=unknown ;; esac
                [ -n "$revision" ] || revision=0
                record status "$rel" "$status/$revision"
                case $status in
                pending-install)
                    if helm uninstall --namespace "$ns" -- "$rel" >"$tmp/out" 2>"$tmp/err"; then
                        record recovered "$rel" "$status"
                        verb=install
                    else
                        fail "$rel" recover $?
                    fi
                    ;;
                pending-upgrade | pending-rollback)
                    if helm rollback --namespace "$ns" -- "$rel" >"$tmp/out" 2>"$tmp/err"; then
                        record recovered "$rel" "$status"
                    else
                        fail "$rel" recover $?
                    fi
                    ;;
                esac
            elif grep -q 'release: not found' "$tmp/err"; then
                record status "$rel" absent/0
                verb=install
            else
                fail "$rel" status "$code"
            fi
            if [ "$failed" = 0 ]; then
                if helm_first $((n + 1)) "$verb" "$@"; then
                    record release "$rel" "$verb" "$tmp/out"
                else
                    fail "$rel" "$verb" $?
                fi
            fi
        fi
        shift "$n"
        m=$1
        shift
        while [ "$m" -gt 0 ]; do
            rm -f -- "$1"
            shift
            m=$((m - 1))
        done
    done
}
