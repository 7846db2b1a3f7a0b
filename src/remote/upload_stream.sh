#!/bin/sh
# upload_stream.sh: write stdin to a new private file (mode 0600), the upload's fallback when
# the node has no SFTP server. upload_finalize.sh then verifies it and moves it into place.
#
# A transfer cut short (the link dropped, the driver gone: stdin ends early, or a hangup or
# termination signal arrives) leaves nothing behind: TMP is removed.
#
# Usage: upload_stream.sh TMP SIZE  (stdin: the content)
#   TMP   the temporary file to write
#   SIZE  the number of bytes the driver sends
# Exit status: 0 written, all SIZE bytes; 1 cut short or not writable (TMP removed).

tmp=$1 size=$2
trap 'rm -f -- "$tmp"; exit 1' HUP INT TERM PIPE
umask 077
if ! cat >"$tmp"; then
    rm -f -- "$tmp"
    exit 1
fi
got=$(wc -c <"$tmp")
if [ "$got" -ne "$size" ]; then
    rm -f -- "$tmp"
    printf 'transfer cut short: %s bytes of %s\n' "$got" "$size" >&2
    exit 1
fi
