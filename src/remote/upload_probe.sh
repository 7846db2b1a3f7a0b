#!/bin/sh
# upload_probe.sh: report what is already at each upload target, making missing parent
# directories on the way (see make_parent). Runs after upload_lib.sh.
#
# Prints one line per FILE, in order: `<octal mode> <sha256>`, or `-` when there is no such file.
#
# Usage: upload_probe.sh FILE...
#   FILE  a target path (relative: in the login user's home)
# Exit status: 0 reported; 1 a parent directory could not be made.

for file do
    make_parent "$file"
    if [ -f "$file" ]; then
        have=$(sha256sum <"$file")
        printf '%s %s\n' "$(stat -c %a -- "$file")" "${have%% *}"
    else
        echo -
    fi
done
