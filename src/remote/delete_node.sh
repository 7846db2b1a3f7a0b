#!/bin/sh
# delete_node.sh: delete a Node object; one that is already gone is fine (re-runs).
#
# Usage: delete_node.sh NAME
#   NAME  the node's Kubernetes name
# Environment: KUBECONFIG, the admin kubeconfig, exported by the caller (src/kube/kubectl.rs:
#   Kubectl::admin), which names it once for every kubectl command of the driver.
# Exit status: 0 deleted or already gone; 1 kubectl failed otherwise (its output on stderr), or
#   no KUBECONFIG.

[ -n "${KUBECONFIG-}" ] || {
    echo "delete_node.sh: KUBECONFIG is not set (the caller exports it)" >&2
    exit 1
}
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
