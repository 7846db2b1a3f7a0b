#!/bin/sh
# helm_prepare.sh: everything a master needs before a CNF's releases, in ONE exec (at the edge a
# round trip costs more than anything here): Helm's version, the cluster's Helm environment, the
# instance's chart directory with its local charts extracted, the instance's repositories added
# and updated; then, on the master Helm runs on, the releases themselves (helm_apply, when the
# driver already knows the command lines: they depend on Helm's major version only through
# `--atomic`). Runs after archive_lib.sh, helm_env_lib.sh, chart_lib.sh and helm_apply_lib.sh.
#
# Usage: helm_prepare.sh MAJOR ENV SRC CHARTS OWNER NC [UPLOADED ARCHIVE CHART]...
#                        NR [NAME URL USER PWFILE CAFILE]... [RELEASE ...]...
#   MAJOR     the Helm major version the releases' command lines are for ('': any); with another
#             Helm the releases are left to the driver (`@@mgmt-driver later - - 0`)
#   ENV SRC   the cluster's Helm environment and the kubeconfig it copies (helm_env; ENV '':
#             Helm's default homes, nothing made)
#   CHARTS    the instance's chart directory; OWNER the login user that gets it (chart_dir_make)
#   NC        how many local charts follow: each UPLOADED (the archive as uploaded, in the run
#             directory) is moved to CHARTS/ARCHIVE and extracted to CHARTS/CHART
#   NR        how many repositories follow: NAME URL added (--force-update) and updated; USER and
#             PWFILE ('' '' without credentials) the user and a 0600 file with the password, fed
#             to --password-stdin and removed; CAFILE ('' none) the CA file Helm keeps reading
#   RELEASE...  the releases, as helm_apply.sh takes them (none: this master only prepares)
# Prints `helm-version: <helm version --short>`, then helm_apply's records (or `later`).
# Exit status: 0 done (a release's failure is a record); 127 no Helm; 2 bad arguments; 1 a step
# failed (stderr says which).

command -v helm >/dev/null || {
    echo 'helm is not installed' >&2
    exit 127
}
if [ $# -lt 7 ]; then
    echo 'helm_prepare.sh: too few arguments' >&2
    exit 2
fi
version=$(helm version --short) || exit 1
printf 'helm-version: %s\n' "$version"
want=$1 env=$2 src=$3 charts=$4 owner=$5
shift 5
if [ -n "$env" ]; then
    helm_env "$env" "$src" >/dev/null
fi
nc=$1
shift
case $nc in '' | *[!0-9]*) exit 2 ;; esac
while [ "$nc" -gt 0 ]; do
    [ $# -ge 3 ] || exit 2
    chart_dir_make "$charts" "$owner" || exit 1
    mv -f -- "$1" "$charts/$2" || exit 1
    if ! chart_extract "$charts" "$2" "$3"; then
        printf 'helm_prepare.sh: the chart %s was not extracted\n' "$2" >&2
        exit 1
    fi
    shift 3
    nc=$((nc - 1))
done
nr=${1-}
case $nr in '' | *[!0-9]*) exit 2 ;; esac
shift
while [ "$nr" -gt 0 ]; do
    [ $# -ge 5 ] || exit 2
    name=$1 url=$2 user=$3 pw=$4 ca=$5
    shift 5
    if [ -n "$user" ]; then
        helm repo add --force-update --username "$user" --password-stdin ${ca:+--ca-file "$ca"} -- "$name" "$url" <"$pw" >&2
    else
        helm repo add --force-update ${ca:+--ca-file "$ca"} -- "$name" "$url" >&2 </dev/null
    fi
    added=$?
    [ -z "$pw" ] || rm -f -- "$pw"
    if [ "$added" != 0 ]; then
        printf 'helm_prepare.sh: helm repo add %s failed\n' "$name" >&2
        exit 1
    fi
    if ! helm repo update -- "$name" >&2; then
        printf 'helm_prepare.sh: helm repo update %s failed\n' "$name" >&2
        exit 1
    fi
    nr=$((nr - 1))
done
[ $# -gt 0 ] || exit 0
major=${version#v}
major=${major%%.*}
if [ -n "$want" ] && [ "$major" != "$want" ]; then
    echo '@@mgmt-driver later - - 0'
    echo
    exit 0
fi
helm_apply "$@"
exit 0
