#!/bin/sh
# delete_node.sh: delete a Node object; one that is already gone is fine (re-runs).
#
# Usage: delete_node.sh NAME
#   NAME  the node's Kubernetes name
# Exit status: 0 deleted or already gone; 1 kubectl failed otherwise (its output on stderr).

export KUBECONFIG=/etc/kubernetes/admin.conf
if out=$(kubectl delete node "$1" 2>&1); then
    printf '%s\n' "$out"
else
    case $out in
    *NotFound*) printf 'node %s already deleted\n' "$1" ;;
    *)
        printf '%s\n' "$out" >&2
        exit 1
        ;;
    esac
fi
