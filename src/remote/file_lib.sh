#!/bin/sh
# file_lib.sh: functions that replace a system file (/etc/hosts, haproxy.cfg) as a whole, so a
# reader never sees half a file and a failed edit leaves the old one. The driver sends this text
# in front of hosts_update.sh and haproxy_backend.sh, as one program (one exec).
#
# No positional parameters of its own; each function's are below. A function that fails ends
# the whole program with exit status 1 and a message on stderr.

# new_copy FILE: print the name of a new temporary file in FILE's directory (so the final rename
# stays on one filesystem) that has FILE's mode and owner (`cp -p`: the caller then rewrites its
# content). The caller removes it on every path (a trap), `replace_file` consumes it.
new_copy() {
    case $1 in
    */*) dir=${1%/*} ;;
    *) dir=. ;;
    esac
    t=$(mktemp -- "$dir/.${1##*/}.mgmt-driver.XXXXXX") || exit 1
    if ! cp -p -- "$1" "$t"; then
        rm -f -- "$t"
        printf 'cannot copy %s\n' "$1" >&2
        exit 1
    fi
    printf '%s\n' "$t"
}

# replace_file TMP FILE: rename TMP over FILE (atomic). When the rename is refused although the
# directory is writable (FILE is a mount point: a container's bind-mounted /etc/hosts answers
# EBUSY), FILE is rewritten in place from TMP instead, with a note on stderr: not atomic, but
# the only way to change such a file. TMP is gone afterwards either way.
replace_file() {
    if mv -f -- "$1" "$2" 2>/dev/null; then
        return 0
    fi
    if cat -- "$1" >"$2"; then
        rm -f -- "$1"
        printf 'note: %s cannot be renamed over (a mount point?); rewritten in place\n' "$2" >&2
        return 0
    fi
    rm -f -- "$1"
    printf 'cannot replace %s\n' "$2" >&2
    exit 1
}
