#!/bin/sh
# prepare_chart_dir.sh: make a CNF instance's chart directory, owned by the login user so that
# uploads into it need no root (Tacker's put_helmchart), mode 0755.
#
# OWNER is a user name by POSIX rules (letters, digits, `.`, `_`, `-`, not starting with `-`),
# optionally `:GROUP` likewise: anything else is refused, so it can never reach chown as an
# option (and `--` ends the options anyway).
#
# Usage: prepare_chart_dir.sh DIR OWNER
#   DIR    the chart directory, /var/tacker/helm/<instance>
#   OWNER  the user (or user:group) that gets it
# Exit status: 0 done; 2 OWNER refused; non-zero mkdir, chown or chmod failed.

case $2 in
'' | [-:]* | *: | *:*:* | *[!A-Za-z0-9._:-]*)
    printf 'prepare_chart_dir.sh: not a user name: %s\n' "$2" >&2
    exit 2
    ;;
esac
mkdir -p -- "$1" && chown -- "$2" "$1" && chmod 0755 -- "$1"
