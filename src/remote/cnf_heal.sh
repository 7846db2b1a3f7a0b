#!/bin/sh
# cnf_heal.sh: heal a whole CNF on its master in ONE exec (at the edge every round trip costs
# more than kubectl's work; it was four per workload): restart every workload (`kubectl rollout
# restart`, which replaces every pod the way a real cluster does), then wait for each rollout in
# turn (`kubectl rollout status`), all within SECONDS, then read back the workloads and the
# namespace's pods for the controller to report (it matches pods to workloads by their
# selectors). The first restart that fails stops the run; the first rollout that is not done in
# time stops the waiting, and the objects and pods are still read (to name the pods that are
# not Ready). kubectl runs with the environment the caller exported (KUBECONFIG).
#
# Usage: cnf_heal.sh NAMESPACE SECONDS WORKLOAD...
#   WORKLOAD  kind/name, kind lower-case (deployment, statefulset, daemonset)
# Prints records as helm_apply.sh frames them (`@@mgmt-driver KIND WORKLOAD WORD SIZE`, SIZE
# bytes, a newline): `restarted W -`, then `ready W -` for each rollout done in time, or
# `fail W restart:EXIT` / `late W status:EXIT` with the tail of kubectl's stderr and output;
# then `objects - get:EXIT` (`kubectl get W... -o json`) and `pods - get:EXIT` (`kubectl get
# pods -o json` of the namespace), each with kubectl's output, or its stderr when EXIT is not 0.
# Exit status: 0 the records are complete (a failure is a record); 2 bad arguments.

umask 077
tmp=$(mktemp -d) || exit 1
trap 'rm -rf -- "$tmp"' EXIT
if [ $# -lt 3 ]; then
    echo 'cnf_heal.sh: usage: NAMESPACE SECONDS WORKLOAD...' >&2
    exit 2
fi
ns=$1 secs=$2
shift 2
case $secs in '' | *[!0-9]*) exit 2 ;; esac
for w; do
    case $w in
    deployment/?* | statefulset/?* | daemonset/?*) ;;
    *) exit 2 ;;
    esac
done

# rec KIND WORKLOAD WORD FILE: one record, FILE's bytes after its header.
rec() {
    printf '@@mgmt-driver %s %s %s %s\n' "$1" "$2" "$3" "$(wc -c <"$4" | tr -d ' ')"
    cat -- "$4"
    printf '\n'
}

# tail_of: the end of kubectl's stderr and then its output, for a failure record.
tail_of() {
    { tail -c 3000 "$tmp/err"; tail -c 1000 "$tmp/out"; } >"$tmp/tail" 2>/dev/null || : >"$tmp/tail"
}

: >"$tmp/none"
for w; do
    if kubectl rollout restart "$w" --namespace "$ns" >"$tmp/out" 2>"$tmp/err"; then
        rec restarted "$w" - "$tmp/none"
    else
        code=$?
        tail_of
        rec fail "$w" "restart:$code" "$tmp/tail"
        exit 0
    fi
done
end=$(($(date +%s) + secs))
for w; do
    left=$((end - $(date +%s)))
    [ "$left" -ge 1 ] || left=1
    if kubectl rollout status "$w" --namespace "$ns" --timeout="${left}s" >"$tmp/out" 2>"$tmp/err"; then
        rec ready "$w" - "$tmp/none"
    else
        code=$?
        tail_of
        rec late "$w" "status:$code" "$tmp/tail"
        break
    fi
done
if kubectl get "$@" --namespace "$ns" -o json >"$tmp/out" 2>"$tmp/err"; then
    rec objects - get:0 "$tmp/out"
else
    code=$?
    rec objects - "get:$code" "$tmp/err"
fi
if kubectl get pods --namespace "$ns" -o json >"$tmp/out" 2>"$tmp/err"; then
    rec pods - get:0 "$tmp/out"
else
    code=$?
    rec pods - "get:$code" "$tmp/err"
fi
