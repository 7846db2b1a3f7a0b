#!/bin/sh
# unpack_charts.sh: put the Helm chart root packed by pack_charts.sh on a survivor
# (var/tacker/helm/...) in place on this master, then delete the archive. Runs after
# archive_lib.sh.
#
# Nothing outside /var/tacker/helm can change: the archive is checked (check_archive: only
# var/tacker/helm/..., plain files and directories), extracted into a new private directory
# under /var/tacker, checked again, and each entry of its chart root then replaces the entry of
# the same name in /var/tacker/helm (a rename: same filesystem). Entries this master has and
# the survivor has not are kept. The archive is deleted on every path (a re-run packs a new one).
#
# Usage: unpack_charts.sh ARCHIVE
#   ARCHIVE  the .tgz, uploaded beforehand
# Exit status: 0 done; 1 refused or failed (message on stderr).

archive=$1
top=var/tacker/helm
root=/var/tacker/helm
stage=
trap 'rm -f -- "$archive"; [ -z "$stage" ] || rm -rf -- "$stage"' EXIT
check_archive "$archive" "$top"
mkdir -p -- "$root" || exit 1
stage=$(mktemp -d -- "${root%/*}/.helm-restore.XXXXXX") || exit 1
extract_checked "$archive" "$stage"
for e in "$stage/$top"/* "$stage/$top"/.[!.]* "$stage/$top"/..?*; do
    [ -e "$e" ] || continue
    name=${e##*/}
    if ! { rm -rf -- "${root:?}/$name" && mv -- "$e" "$root/$name"; }; then
        printf 'cannot put %s in place\n' "$root/$name" >&2
        exit 1
    fi
done
