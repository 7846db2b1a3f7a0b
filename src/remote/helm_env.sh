#!/bin/sh
# helm_env.sh: make (or refresh) a cluster's own Helm environment on a master, as OSM keeps one
# per cluster: DIR/kubeconfig (mode 0600) and Helm's cache, config and data homes under DIR, all
# private to root (DIR 0700). The commands of that cluster then run with KUBECONFIG and
# HELM_{CACHE,CONFIG,DATA}_HOME pointing there, so two clusters reached from one master never
# share repositories.
#
# The kubeconfig is a copy of SRC, rewritten only when SRC changed (a renewed admin.conf reaches
# the environment on the next run); a master without SRC gets no kubeconfig (Helm's client verbs
# still work; cluster verbs fail as Helm says).
#
# Runs after helm_env_lib.sh (the function helm_env does the work).
#
# Usage: helm_env.sh DIR SRC
#   DIR  the environment, /var/lib/mgmt-driver/helm/<cluster_id>
#   SRC  the kubeconfig to copy, /etc/kubernetes/admin.conf
# Prints: `created` (DIR was new) or `kept`.
# Exit status: 0 done; non-zero mkdir, cp or chmod failed.

helm_env "$1" "$2"
