#!/usr/bin/env bash
# Cluster benchmark: instantiate_end on 3 masters + W workers of a lab-kit lab whose stand-in
# `kubeadm init/join` take a fixed T seconds per node. mgmt-driver (masters in order, workers
# at once) is measured side by side with the same binary at --parallel 1, which runs every node
# one after another as Tacker's sample driver does. Prints a markdown table.
#
#   [SCRIPT=fixed|ours] scripts/bench-cluster.sh [--t SECONDS] [--workers W] [--reps R] [--out FILE]
#       [--name NAME] [--net K] [--rtt MS] [--tacker PYTHON] [--no-seq] [--tsv FILE]
#
# Expected: parallel ≈ (3 + 1) × T + overhead; sequential ≈ (3 + W) × T + overhead.
# --rtt MS puts every node behind the delay relay (scripts/wan-lab.sh, docs/lab.md); --tacker
# PYTHON (one with paramiko: scripts/tacker-venv.sh prints it) adds a row for the stand-in for
# Tacker's SSH pattern (tests/bench/tacker_pattern.py); --no-seq leaves out the --parallel 1 row;
# --tsv FILE appends every run: row, rtt, rep, wall, cpu, rss KiB, execs, uploads, connections,
# round trips, the most round trips of one node (tests/bench/events.py).
# Run as root (the lab uses namespaces).
set -euo pipefail
{
export LC_ALL=C
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
T=3 W=20 REPS=3 OUT='' LAB=bcl NET=91 RTT=0 TACKER='' SEQ=1 TSV=''
while [ $# -gt 0 ]; do
    case $1 in
    --t) T=$2; shift 2 ;;
    --workers) W=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) LAB=$2; shift 2 ;;
    --net) NET=$2; shift 2 ;;
    --rtt) RTT=$2; shift 2 ;;
    --tacker) TACKER=$2; shift 2 ;;
    --no-seq) SEQ=0; shift ;;
    --tsv) TSV=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
N=$((3 + W))
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cd "$REPO"
cargo build --release --locked -q
md=$REPO/target/release/mgmt-driver
work=$(mktemp -d)
trap 'bash scripts/wan-lab.sh down "$work/wan" >/dev/null 2>&1 || true; bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" >/dev/null
sed 's/"helm_installation_script_path": "Scripts\/install_helm.sh",//' samples/requests/k8s-cluster-lab.json >"$work/req.json"
# SCRIPT=fixed (default): the kit's minimal contract script, so a node costs T plus a few
# process starts and the rest is the driver's overhead. SCRIPT=ours: our real install script.
if [ "${SCRIPT:-fixed}" = fixed ]; then
    cp tests/labkit/fixed-time-install.sh "$work/pkg/Scripts/install_k8s_cluster.sh"
fi

# A fresh lab (and, with --rtt, the relay in front of it) and its cluster inventory.
fresh_lab() {
    bash scripts/lab.sh up "$N" --kit --name "$LAB" --net "$NET" >/dev/null 2>&1
    python3 tests/labkit/labkit-ctl set-delay "target/lab/$LAB/kit" "$T" >/dev/null
    bash tests/labkit/cluster-inventory.sh "target/lab/$LAB" "$NET" "1 2 3" "$(seq -s " " 4 "$N")" >"$work/inv.yaml"
    KH=target/lab/$LAB/known_hosts
    if [ "$RTT" != 0 ]; then
        bash scripts/wan-lab.sh up "$work/wan" "$RTT" "target/lab/$LAB" 2>/dev/null
        bash scripts/wan-lab.sh rewrite "$work/wan" <"$work/inv.yaml" >"$work/inv.wan.yaml"
        mv "$work/inv.wan.yaml" "$work/inv.yaml"
        KH=$work/wan/known_hosts
    fi
}

# The address a tool reaches lab node i at: the node's own, or the relay's with --rtt.
ssh_ip() { if [ "$RTT" != 0 ]; then echo "127.$NET.0.$((10 + $1))"; else echo "198.18.$NET.$((10 + $1))"; fi; }

# The kit's cluster has every node: the run did what it says.
check_kit() {
    local got
    got=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(len((s.get("cluster") or {}).get("nodes") or {}))' "target/lab/$LAB/kit/state.json")
    [ "$got" = "$N" ] || { echo "the kit cluster has $got nodes, not $N" >&2; exit 1; }
}

# One run on a fresh lab: prints "wall_s maxrss_kib cpu_s execs uploads connections" (cpu = the
# tool's user + sys; round trips from mgmt-driver's events, or the stand-in's own counts).
run_once() { # $1 = extra mgmt-driver args, or "tacker"
    fresh_lab
    rm -rf "$work/state"
    local t0 t1 i m='' w='' rts
    if [ "$1" = tacker ]; then
        for i in 1 2 3; do m+="$(ssh_ip "$i")=198.18.$NET.$((10 + i)),"; done
        for ((i = 4; i <= N; i++)); do w+="$(ssh_ip "$i")=198.18.$NET.$((10 + i)),"; done
        t0=$(date +%s.%N)
        /usr/bin/time -f '%M %U %S' -o "$work/rss" "$TACKER" tests/bench/tacker_pattern.py cluster \
            --key "target/lab/$LAB/id_ed25519" --known-hosts "$KH" --masters "$m" --workers "$w" \
            --cluster-ip "198.18.$NET.100" --script "$work/pkg/Scripts/install_k8s_cluster.sh" >"$work/out.json" 2>"$work/err.log" \
            || { echo "tacker pattern failed:" >&2; tail -20 "$work/err.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        check_kit
        rts=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["execs"], d["uploads"], d["connections"], d["round_trips"], d["max_per_host"])' "$work/out.json")
    else
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086 # $1 is a list of words
        /usr/bin/time -f '%M %U %S' -o "$work/rss" "$md" instantiate-end -o json --request "$work/req.json" -i "$work/inv.yaml" \
            --package-dir "$work/pkg" --vnf-instance-id bench --state-dir "$work/state" $1 >"$work/out.json" 2>"$work/err.log" \
            || { echo "run failed:" >&2; tail -20 "$work/err.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["ok"] and len(d["result"]["nodes"])==int(sys.argv[2]) else 1)' "$work/out.json" "$N" \
            || { echo "result not ok" >&2; exit 1; }
        rts=$(python3 tests/bench/events.py "$work/err.log" | tr '\t' ' ')
    fi
    printf '%s %s %s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$(awk '{print $1, $2 + $3}' "$work/rss")" "$rts"
}

# tsv ROW REP WALL RSS CPU EXECS UPLOADS CONNECTIONS ROUND_TRIPS MAX_PER_HOST
tsv() { [ -z "$TSV" ] || printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$RTT" "$2" "$3" "$5" "$4" "$6" "$7" "$8" "$9" "${10}" >>"$TSV"; }

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -a par=() seq=() prss=() srss=() pcpu=() scpu=()
for ((r = 1; r <= REPS; r++)); do
    read -r w m c e u k rt rh < <(run_once "")
    [ -n "${rh:-}" ] || exit 1
    par+=("$w"); prss+=("$m"); pcpu+=("$c")
    tsv mgmt-driver "$r" "$w" "$m" "$c" "$e" "$u" "$k" "$rt" "$rh"
    echo "rep $r: parallel ${w}s ($e execs, $u uploads, $k connections)" >&2
    if [ "$SEQ" = 1 ]; then
        read -r w m c e u k rt rh < <(run_once "--parallel 1")
        [ -n "${rh:-}" ] || exit 1
        seq+=("$w"); srss+=("$m"); scpu+=("$c")
        tsv mgmt-driver-seq "$r" "$w" "$m" "$c" "$e" "$u" "$k" "$rt" "$rh"
        echo "rep $r: sequential ${w}s" >&2
    fi
    if [ -n "$TACKER" ]; then
        read -r w m c e u k rt rh < <(run_once tacker)
        [ -n "${rh:-}" ] || exit 1
        tsv tacker-pattern "$r" "$w" "$m" "$c" "$e" "$u" "$k" "$rt" "$rh"
        echo "rep $r: Tacker's pattern ${w}s ($e execs, $u uploads, $k connections)" >&2
    fi
done
[ "$SEQ" = 1 ] || { seq=(0); srss=(0); scpu=(0); }
pm=$(printf '%s\n' "${par[@]}" | median)
sm=$(printf '%s\n' "${seq[@]}" | median)
table=$(
    printf '| run (3 masters + %d workers, T = %ss per node, %s script, %d reps, medians) | wall | model | overhead | driver CPU | peak RSS |\n' "$W" "$T" "${SCRIPT:-fixed}" "$REPS"
    printf '|---|---|---|---|---|---|\n'
    printf '| mgmt-driver (masters in order, workers at once) | %.1f s | (3 + 1) × T = %s s | %.1f s | %.2f s | %d MiB |\n' \
        "$pm" "$(awk -v t="$T" 'BEGIN {print 4 * t}')" "$(awk -v p="$pm" -v t="$T" 'BEGIN {print p - 4 * t}')" "$(printf '%s\n' "${pcpu[@]}" | median)" "$(($(printf '%s\n' "${prss[@]}" | median | cut -d. -f1) / 1024))"
    [ "$SEQ" = 1 ] || exit 0
    # shellcheck disable=SC2016 # backquotes are markdown here
    printf '| same binary, `--parallel 1` (every node in turn, as Tacker) | %.1f s | (3 + %d) × T = %s s | %.1f s | %.2f s | %d MiB |\n' \
        "$sm" "$W" "$(awk -v t="$T" -v w="$W" 'BEGIN {print (3 + w) * t}')" "$(awk -v p="$sm" -v t="$T" -v w="$W" 'BEGIN {print p - (3 + w) * t}')" "$(printf '%s\n' "${scpu[@]}" | median)" "$(($(printf '%s\n' "${srss[@]}" | median | cut -d. -f1) / 1024))"
)
echo "$table"
[ -z "$OUT" ] || printf '%s\n' "$table" >"$OUT"
exit 0
}
