#!/bin/sh
# upload_lib.sh: functions of the upload programs. The driver sends this text in front of
# upload_inline.sh, upload_probe.sh and upload_finalize.sh, as one program (one exec).
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
