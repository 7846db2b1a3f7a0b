#!/bin/sh
# pack_charts.sh: pack the Helm chart root (/var/tacker/helm) so a healed master gets the same
# charts (unpack_charts.sh unpacks it there).
#
# Usage: pack_charts.sh ARCHIVE
#   ARCHIVE  the .tgz to write
# Prints `packed`, or `none` when this node has no chart root (then no archive is written).
# Exit status: 0 packed or none; tar's status when packing failed.

if [ -d /var/tacker/helm ]; then
    tar -czf "$1" -C / var/tacker/helm && echo packed
else
    echo none
fi
