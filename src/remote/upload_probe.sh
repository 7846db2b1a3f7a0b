#!/bin/sh
# upload_probe.sh: report what is already at each upload target, making missing parent
# directories on the way (see make_parent), and removing the target's stale temporary files.
# Runs after upload_lib.sh.
#
# Prints one line per FILE, in order: `<octal mode> <sha256>`, or `-` when there is no such file.
#
# A temporary file of an earlier upload (FILE.mgmtd-<16 hex digits>, see the driver's temp_name)
# that was not written to for more than STALE seconds belongs to an upload that is dead: the
# driver fails any upload that makes no progress for that long (its stall timeout). An SFTP
# transfer cut by a broken link leaves such a file; the next upload of FILE removes it.
#
# Usage: upload_probe.sh STALE FILE...
#   STALE  seconds without a write after which a temporary file is stale
#   FILE   a target path (relative: in the login user's home)
# Exit status: 0 reported; 1 a parent directory could not be made.

stale=$1
shift
now=
for file do
    make_parent "$file"
    for tmp in "$file".mgmtd-????????????????; do
        [ -f "$tmp" ] || continue
        [ -n "$now" ] || now=$(date +%s)
        written=$(stat -c %Y -- "$tmp") || continue
        if [ $((now - written)) -gt "$stale" ]; then
            rm -f -- "$tmp"
        fi
    done
    if [ -f "$file" ]; then
        have=$(sha256sum <"$file")
        printf '%s %s\n' "$(stat -c %a -- "$file")" "${have%% *}"
    else
        echo -
    fi
done
