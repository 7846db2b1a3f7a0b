#!/bin/sh
# upload_finalize.sh: finish an upload whose files were streamed to temporary names: verify
# each one and rename it into place, or only fix a mode. Runs after upload_lib.sh.
#
# Usage: upload_finalize.sh STEP...  where each STEP is a few arguments:
#   chmod MODE FILE            give FILE (already there with the right content) MODE, in octal
#   move TMP FILE SHA256 MODE  check TMP's sha256, set MODE, rename TMP over FILE (see
#                              verify_and_move)
# The steps run in order; the first that fails stops the program.
# Exit status: 0 every step done; 1 a step failed (message on stderr); 2 bad usage.

while [ $# -gt 0 ]; do
    case $1 in
    chmod)
        [ $# -ge 3 ] || exit 2
        if ! chmod -- "$2" "$3"; then
            printf 'chmod failed: %s\n' "$3" >&2
            exit 1
        fi
        shift 3
        ;;
    move)
        [ $# -ge 5 ] || exit 2
        verify_and_move "$2" "$3" "$4" "$5"
        shift 5
        ;;
    *)
        printf 'upload_finalize.sh: unknown step %s\n' "$1" >&2
        exit 2
        ;;
    esac
done
