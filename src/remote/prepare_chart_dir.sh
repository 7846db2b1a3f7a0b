#!/bin/sh
# prepare_chart_dir.sh: make a CNF instance's chart directory, owned by the login user so that
# uploads into it need no root (Tacker's put_helmchart), mode 0755.
#
# Usage: prepare_chart_dir.sh DIR OWNER
#   DIR    the chart directory, /var/tacker/helm/<instance>
#   OWNER  the user (or user:group) that gets it
# Exit status: 0 done; non-zero mkdir, chown or chmod failed.

mkdir -p "$1" && chown "$2" "$1" && chmod 0755 "$1"
