#!/bin/sh
# admin_token.sh: print the bearer token of the VIM's cluster-admin ServiceAccount.
#
# Applies the manifest (a ServiceAccount bound to cluster-admin and a
# kubernetes.io/service-account-token Secret), then waits up to 60 s for the token controller
# to fill the Secret and prints the decoded token. Re-applying changes nothing, so re-runs print
# the same token. The token is a secret: the driver hides this program's output.
#
# Usage: admin_token.sh MANIFEST
#   MANIFEST  the manifest file (JSON), uploaded beforehand
# Environment: KUBECONFIG, the admin kubeconfig, exported by the caller (src/kube/kubectl.rs:
#   Kubectl::admin), which names it once for every kubectl command of the driver.
# Exit status: 0 token printed; 1 the manifest did not apply, no token within 60 s, or no
#   KUBECONFIG.

[ -n "${KUBECONFIG-}" ] || {
    echo "admin_token.sh: KUBECONFIG is not set (the caller exports it)" >&2
    exit 1
}
kubectl apply -f "$1" >&2 || exit 1
i=0
while [ "$i" -lt 60 ]; do
    if t=$(kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{.data.token}') &&
        [ -n "$t" ]; then
        printf '%s' "$t" | base64 -d
        exit 0
    fi
    i=$((i + 1))
    sleep 1
done
echo 'the token controller did not fill secret kube-system/mgmt-driver-admin-token within 60s' >&2
exit 1
