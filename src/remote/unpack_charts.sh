#!/bin/sh
# unpack_charts.sh: unpack an archive written by pack_charts.sh into / and delete it.
#
# Usage: unpack_charts.sh ARCHIVE
#   ARCHIVE  the .tgz, uploaded beforehand
# Exit status: 0 done; non-zero tar or rm failed (a failed unpack keeps the archive).

tar -xzf "$1" -C / && rm -f "$1"
