#!/bin/sh
# helm_env_reset.sh: forget a cluster's Helm environment on a master (OSM's reset): its
# kubeconfig copy, repositories, cache and plugins go; the cluster's releases are not touched
# (Helm keeps them in the cluster). Running it again is a no-op.
#
# Usage: helm_env_reset.sh DIR
#   DIR  the environment, /var/lib/mgmt-driver/helm/<cluster_id>
# Prints: `removed` or `absent`.
# Exit status: 0 done; 1 DIR could not be removed.

if [ -e "$1" ]; then
    rm -rf -- "$1" || exit 1
    echo removed
else
    echo absent
fi
