#!/bin/sh
# extract_chart.sh: extract an uploaded chart archive next to itself, replacing any copy that
# an earlier run extracted (a fresh copy each time). Runs after archive_lib.sh.
#
# Only CHART/... can change: the archive is checked (check_archive: every member under CHART/,
# plain files and directories only), extracted into a new private directory beside it, checked
# again, and its CHART directory renamed into place. A refused or failed archive leaves the
# earlier copy as it was.
#
# Usage: extract_chart.sh DIR ARCHIVE CHART
#   DIR      the instance's chart directory, where the archive is
#   ARCHIVE  the archive's file name in DIR, `<chart>-<version>.tgz`
#   CHART    the directory the archive extracts to (a plain name), replaced
# Exit status: 0 extracted; 1 refused or failed (message on stderr); 2 CHART is not a plain name.

case $3 in
'' | . | .. | */* | -*)
    printf 'extract_chart.sh: not a chart directory name: %s\n' "$3" >&2
    exit 2
    ;;
esac
cd "$1" || exit 1
check_archive "$2" "$3"
stage=$(mktemp -d -- ./.extract.XXXXXX) || exit 1
trap 'rm -rf -- "$stage"' EXIT
extract_checked "$2" "$stage" --no-same-owner
if [ ! -d "$stage/$3" ]; then
    printf 'the archive %s has no %s directory\n' "$2" "$3" >&2
    exit 1
fi
rm -rf -- "./$3" && mv -- "$stage/$3" "./$3"
