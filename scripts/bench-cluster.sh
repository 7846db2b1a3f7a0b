#!/usr/bin/env bash
# Cluster benchmark: instantiate_end on 3 masters + W workers of a lab-kit lab whose stand-in
# `kubeadm init/join` take a fixed T seconds per node. mgmt-driver (masters in order, workers
# at once) is measured side by side with the same binary at --parallel 1, which runs every node
# one after another as Tacker's sample driver does. Prints a markdown table.
#
#   [SCRIPT=fixed|ours] scripts/bench-cluster.sh [--t SECONDS] [--workers W] [--reps R] [--out FILE]
#
# Expected: parallel ≈ (3 + 1) × T + overhead; sequential ≈ (3 + W) × T + overhead.
# Run as root (the lab uses namespaces).
set -euo pipefail
{
export LC_ALL=C
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
T=3 W=20 REPS=3 OUT=''
while [ $# -gt 0 ]; do
    case $1 in
    --t) T=$2; shift 2 ;;
    --workers) W=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
LAB=bcl NET=91 N=$((3 + W))
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cd "$REPO"
cargo build --release --locked -q
md=$REPO/target/release/mgmt-driver
work=$(mktemp -d)
trap 'bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" >/dev/null
sed 's/"helm_installation_script_path": "Scripts\/install_helm.sh",//' samples/requests/k8s-cluster-lab.json >"$work/req.json"
# SCRIPT=fixed (default): the kit's minimal contract script, so a node costs T plus a few
# process starts and the rest is the driver's overhead. SCRIPT=ours: our real install script.
if [ "${SCRIPT:-fixed}" = fixed ]; then
    cp tests/labkit/fixed-time-install.sh "$work/pkg/Scripts/install_k8s_cluster.sh"
fi

# One run on a fresh lab: prints "wall_s maxrss_kib cpu_s" (cpu = the driver's user + sys).
run_once() { # $1 = extra mgmt-driver args
    bash scripts/lab.sh up "$N" --kit --name "$LAB" --net "$NET" >/dev/null 2>&1
    python3 tests/labkit/labkit-ctl set-delay "target/lab/$LAB/kit" "$T" >/dev/null
    bash tests/labkit/cluster-inventory.sh "target/lab/$LAB" "$NET" "1 2 3" "$(seq -s " " 4 "$N")" >"$work/inv.yaml"
    rm -rf "$work/state"
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # $1 is a list of words
    /usr/bin/time -f '%M %U %S' -o "$work/rss" "$md" instantiate-end -o json --request "$work/req.json" -i "$work/inv.yaml" \
        --package-dir "$work/pkg" --vnf-instance-id bench --state-dir "$work/state" $1 >"$work/out.json" 2>"$work/err.log" \
        || { echo "run failed:" >&2; tail -20 "$work/err.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["ok"] and len(d["result"]["nodes"])==int(sys.argv[2]) else 1)' "$work/out.json" "$N" \
        || { echo "result not ok" >&2; exit 1; }
    printf '%s %s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$(awk '{print $1, $2 + $3}' "$work/rss")"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -a par=() seq=() prss=() srss=() pcpu=() scpu=()
for ((r = 1; r <= REPS; r++)); do
    read -r w m c < <(run_once "")
    par+=("$w"); prss+=("$m"); pcpu+=("$c")
    read -r w m c < <(run_once "--parallel 1")
    seq+=("$w"); srss+=("$m"); scpu+=("$c")
    echo "rep $r: parallel ${par[-1]}s, sequential ${seq[-1]}s" >&2
done
pm=$(printf '%s\n' "${par[@]}" | median)
sm=$(printf '%s\n' "${seq[@]}" | median)
table=$(
    printf '| run (3 masters + %d workers, T = %ss per node, %s script, %d reps, medians) | wall | model | overhead | driver CPU | peak RSS |\n' "$W" "$T" "${SCRIPT:-fixed}" "$REPS"
    printf '|---|---|---|---|---|---|\n'
    printf '| mgmt-driver (masters in order, workers at once) | %.1f s | (3 + 1) × T = %s s | %.1f s | %.2f s | %d MiB |\n' \
        "$pm" "$(awk -v t="$T" 'BEGIN {print 4 * t}')" "$(awk -v p="$pm" -v t="$T" 'BEGIN {print p - 4 * t}')" "$(printf '%s\n' "${pcpu[@]}" | median)" "$(($(printf '%s\n' "${prss[@]}" | median | cut -d. -f1) / 1024))"
    # shellcheck disable=SC2016 # backquotes are markdown here
    printf '| same binary, `--parallel 1` (every node in turn, as Tacker) | %.1f s | (3 + %d) × T = %s s | %.1f s | %.2f s | %d MiB |\n' \
        "$sm" "$W" "$(awk -v t="$T" -v w="$W" 'BEGIN {print (3 + w) * t}')" "$(awk -v p="$sm" -v t="$T" -v w="$W" 'BEGIN {print p - (3 + w) * t}')" "$(printf '%s\n' "${scpu[@]}" | median)" "$(($(printf '%s\n' "${srss[@]}" | median | cut -d. -f1) / 1024))"
)
echo "$table"
[ -z "$OUT" ] || printf '%s\n' "$table" >"$OUT"
exit 0
}
