#!/bin/sh
# upload_lib.sh: functions of the upload programs. The driver sends this text in front of
# upload_inline.sh, upload_probe.sh and upload_finalize.sh, as one program (one exec), and in
# front of leash.sh when a command receives its file first (run-script's one exec).
#
# They avoid needless processes (`${h%% *}` instead of `cut`, `${1%/*}` instead of `dirname`,
# no mkdir when the directory exists): on a fleet every fork is paid once per node, and the
# nodes are where the time goes (docs/benchmarks.md).
#
# No positional parameters of its own; each function's are below. A function that fails ends
# the whole program with exit status 1 and a message on stderr.

# make_parent FILE: create FILE's parent directory when it is missing: private (umask 077) for a
# relative path, that is inside the login user's home; with the usual umask 022 elsewhere.
make_parent() {
    case $1 in
    */*) parent=${1%/*} ;;
    *) parent=. ;;
    esac
    [ -n "$parent" ] || parent=/
    if [ ! -d "$parent" ]; then
        case $1 in
        /*) mask=022 ;;
        *) mask=077 ;;
        esac
        (
            umask "$mask"
            mkdir -p -- "$parent"
        ) || exit 1
    fi
}

# verify_and_move TMP FILE SHA256 MODE: check that TMP has the expected content, give it MODE
# (octal) and rename it over FILE. A TMP that does not match is deleted and FILE is untouched.
verify_and_move() {
    got=$(sha256sum <"$1")
    got=${got%% *}
    if [ "$got" != "$3" ]; then
        rm -f -- "$1"
        printf 'checksum mismatch after transfer: %s (got %s)\n' "$2" "$got" >&2
        exit 1
    fi
    if ! { chmod -- "$4" "$1" && mv -f -- "$1" "$2"; }; then
        rm -f -- "$1"
        printf 'cannot move into place: %s\n' "$2" >&2
        exit 1
    fi
}

# receive FILE TMP SHA256 MODE SIZE: read exactly SIZE bytes of stdin (no more: what follows on
# stdin is not ours) and put them at FILE as upload_inline.sh does - skipped when FILE already
# has this content (the bytes are read and dropped), else written to TMP (0600), verified and
# renamed over FILE - then print `skipped` or `written`. `head -c` stops at SIZE bytes, where
# `cat` would wait for an end of input that never comes while the stream stays open.
receive() {
    make_parent "$1"
    if [ -f "$1" ]; then
        have=$(sha256sum <"$1")
        if [ "${have%% *}" = "$3" ]; then
            head -c "$5" >/dev/null
            chmod -- "$4" "$1" || exit 1
            echo skipped
            return 0
        fi
    fi
    # Cut short (hangup, termination): no temporary file is left behind.
    trap 'rm -f -- "$2"; exit 1' HUP INT TERM PIPE
    if ! (umask 077 && exec head -c "$5" >"$2"); then
        rm -f -- "$2"
        exit 1
    fi
    verify_and_move "$2" "$1" "$3" "$4"
    trap - HUP INT TERM PIPE
    echo written
}
