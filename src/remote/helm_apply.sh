#!/bin/sh
# helm_apply.sh: install or upgrade a CNF's releases, in order, on the master Helm runs on, in
# ONE exec: at the edge every round trip costs more than anything Helm does, so the decision that
# used to take a round trip per Helm call (status, then install or upgrade, then three reads)
# is taken here, with two Helm processes per release: `helm status`, then `helm install` or
# `helm upgrade` with `-o json`, whose release JSON carries everything the driver records
# (status, revision, manifest, the user-supplied values and the chart's defaults).
#
# Per release, as the driver decided it before (src/cnf/run/instantiate.rs):
#   absent (`release: not found`)   -> install
#   pending-install (interrupted)   -> `helm uninstall`, then install
#   pending-upgrade/-rollback       -> `helm rollback` (to the last deployed revision), then upgrade
#   anything else (deployed, failed, superseded, ...) -> upgrade
# The first failure stops the run: later releases are not touched (their values files are still
# removed). Helm runs with the environment the caller exported (KUBECONFIG, HELM_*_HOME).
#
# Runs after helm_apply_lib.sh (the function helm_apply does the work).
#
# Usage: helm_apply.sh [RELEASE NAMESPACE N WORD... M FILE...]...
#   RELEASE, NAMESPACE  the release and its namespace (checked names)
#   N WORD...           the N words after the verb: `--namespace NS ... -o json -- RELEASE CHART`
#   M FILE...           the release's values files, removed after its Helm command
# Prints, per release, records a hostile Helm cannot forge: a header line
#   @@mgmt-driver KIND RELEASE WORD SIZE
# then exactly SIZE bytes and a newline. KIND is `status` (WORD: STATUS/REVISION or absent/0),
# `recovered` (WORD: the pending state), `release` (WORD: install or upgrade; the bytes: Helm's
# release JSON) or `fail` (WORD: STEP:EXIT, STEP one of status, recover, install, upgrade; the
# bytes: the tail of Helm's stderr).
# Exit status: 0 records printed (a failure is a record); 1 the program itself failed; 2 the
# arguments are not in the form above.

helm_apply "$@"
exit 0
