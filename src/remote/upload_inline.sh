#!/bin/sh
# upload_inline.sh: write one small file from stdin, in one exec. Runs after upload_lib.sh.
#
# When FILE already has this content, stdin is read and dropped, only the mode is set, and the
# program prints `skipped`. Otherwise the content goes to TMP (created 0600), is verified and
# renamed over FILE, and the program prints `written`: a reader never sees a half file, and a
# corrupted or cut-short transfer never replaces a good one (its TMP is removed).
#
# Usage: upload_inline.sh FILE TMP SHA256 MODE  (stdin: the content)
#   FILE    the target path (relative: in the login user's home); missing parents are made
#   TMP     a temporary name next to FILE (same filesystem, so the rename is atomic)
#   SHA256  the content's expected sha256, in hex
#   MODE    FILE's mode, in octal
# Exit status: 0 skipped or written; 1 failed (message on stderr; TMP is removed).

file=$1 tmp=$2 sha=$3 mode=$4
make_parent "$file"
if [ -f "$file" ]; then
    have=$(sha256sum <"$file")
    if [ "${have%% *}" = "$sha" ]; then
        cat >/dev/null
        chmod -- "$mode" "$file" || exit 1
        echo skipped
        exit 0
    fi
fi
umask 077
# Cut short (hangup, termination): no temporary file is left behind.
trap 'rm -f -- "$tmp"; exit 1' HUP INT TERM PIPE
if ! cat >"$tmp"; then
    rm -f -- "$tmp"
    exit 1
fi
verify_and_move "$tmp" "$file" "$sha" "$mode"
echo written
