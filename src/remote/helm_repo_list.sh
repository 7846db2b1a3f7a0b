#!/bin/sh
# helm_repo_list.sh: print Helm's repositories as JSON, `[]` when there are none (Helm itself
# fails with `Error: no repositories to show` then).
#
# Usage: helm_repo_list.sh [ENV]
#   ENV  a cluster's Helm environment (src/remote/helm_env.sh): list its repositories, not those
#        of Helm's default homes
# Exit status: 0 printed; 1 helm failed otherwise (its output on stderr).

if [ -n "${1-}" ]; then
    export KUBECONFIG="$1/kubeconfig" HELM_CACHE_HOME="$1/cache" HELM_CONFIG_HOME="$1/config" HELM_DATA_HOME="$1/data"
fi

if out=$(helm repo list -o json 2>&1); then
    printf '%s\n' "$out"
else
    case $out in
    *'no repositories'*) echo '[]' ;;
    *)
        printf '%s\n' "$out" >&2
        exit 1
        ;;
    esac
fi
