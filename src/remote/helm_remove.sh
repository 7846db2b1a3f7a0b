#!/bin/sh
# helm_remove.sh: take a CNF off a master in ONE exec (at the edge every round trip costs more
# than Helm's work): uninstall its releases in order, one Helm process each (`helm uninstall
# --wait`; a release Helm does not know is reported absent, not an error), then remove its
# repositories and its chart directory. The first release that fails to go stops the run before
# anything else is removed (the CNF stays whole enough to retry). Helm runs with the environment
# the caller exported (KUBECONFIG, HELM_*_HOME).
#
# Usage: helm_remove.sh CHARTS NR [REPO]... [RELEASE NAMESPACE]...
#   CHARTS   the instance's chart directory, removed ('' : none)
#   NR REPO  how many repositories follow, each removed (one already gone is fine)
#   RELEASE NAMESPACE  the releases, uninstalled first
# Prints a record per release, as helm_apply.sh frames them: `@@mgmt-driver KIND RELEASE WORD
# SIZE`, SIZE bytes, a newline; KIND `uninstalled` or `absent` (WORD `-`, no bytes) or `fail`
# (WORD `uninstall:EXIT`, the bytes the tail of Helm's stderr).
# Exit status: 0 done (a failed release is a record); 2 bad arguments; 1 a removal failed.

umask 077
tmp=$(mktemp -d) || exit 1
trap 'rm -rf -- "$tmp"' EXIT
if [ $# -lt 2 ]; then
    echo 'helm_remove.sh: usage: CHARTS NR [REPO]... [RELEASE NAMESPACE]...' >&2
    exit 2
fi
charts=$1 nr=$2
shift 2
case $nr in '' | *[!0-9]*) exit 2 ;; esac
if [ "$#" -lt "$nr" ]; then
    exit 2
fi
# The repositories are kept aside (appended after the releases) while the releases are read.
i=0
while [ "$i" -lt "$nr" ]; do
    set -- "$@" "$1"
    shift
    i=$((i + 1))
done
n=$(($# - nr))
if [ $((n % 2)) != 0 ]; then
    exit 2
fi
while [ "$n" -gt 0 ]; do
    rel=$1 ns=$2
    shift 2
    n=$((n - 2))
    if helm uninstall --namespace "$ns" --wait -- "$rel" >"$tmp/out" 2>"$tmp/err"; then
        printf '@@mgmt-driver uninstalled %s - 0\n\n' "$rel"
    else
        code=$?
        if grep -q 'release: not found' "$tmp/err"; then
            printf '@@mgmt-driver absent %s - 0\n\n' "$rel"
        else
            tail -c 4000 "$tmp/err" >"$tmp/tail" || : >"$tmp/tail"
            printf '@@mgmt-driver fail %s uninstall:%s %s\n' "$rel" "$code" "$(wc -c <"$tmp/tail" | tr -d ' ')"
            cat -- "$tmp/tail"
            printf '\n'
            exit 0
        fi
    fi
done
for repo in "$@"; do
    helm repo remove -- "$repo" >/dev/null 2>&1 || :
done
if [ -n "$charts" ]; then
    rm -rf -- "$charts" || exit 1
fi
exit 0
