#!/bin/sh
# extract_chart.sh: extract an uploaded chart archive next to itself, replacing any copy that
# an earlier run extracted (a fresh copy each time).
#
# Usage: extract_chart.sh DIR ARCHIVE CHART
#   DIR      the instance's chart directory, where the archive is
#   ARCHIVE  the archive's file name in DIR, `<chart>-<version>.tgz`
#   CHART    the directory the archive extracts to, removed first
# Exit status: 0 extracted; non-zero cd, rm or tar failed.

cd "$1" && rm -rf "$3" && tar -xzf "$2" --no-same-owner
