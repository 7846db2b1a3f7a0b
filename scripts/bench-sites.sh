#!/usr/bin/env bash
# Per-site benchmark: cluster instantiate of N sites, each 1 master + 1 worker on a lab-kit lab
# whose stand-in `kubeadm init/join` take a fixed T seconds, each site its own simulated cluster
# (each node bind-mounts its site's kit state). Three ways side by side, each on a fresh lab:
#   at once      one `mgmt-driver sites apply instantiate --max-sites N` process
#   in turn      the same with --max-sites 1: one site after another
#   xargs -P N   N separate `mgmt-driver instantiate-end` processes, one per site, all at once
#   canary       at once, in Ansible-style canary batches: --batch 1,10%,100% --max-fail 0
#                (one site, then a tenth of them, then the rest, stopping at the first failure)
# Prints a markdown table: wall time, the driver's CPU per site (user + sys of every driver
# process, / N) and peak RSS (of the one process; for xargs, the largest of the N).
#
#   scripts/bench-sites.sh [--sizes "1 10 40"] [--t SECONDS] [--out FILE]
#       [--name NAME] [--net K] [--rtt MS] [--ways LIST] [--tsv FILE]
#
# --rtt MS puts every node behind the delay relay (scripts/wan-lab.sh, docs/lab.md); --ways
# picks the ways (comma-separated: atonce,inturn,xargs,canary; default all); --tsv FILE appends
# every run: way, rtt, N, wall, cpu, rss KiB, execs, uploads, connections,
# round trips, the most of one host (tests/bench/events.py), slowest site's s.
#
# Expected: at once ≈ 2 × T + overhead whatever N; in turn ≈ N × 2 × T. Issue targets for 40
# sites: at once ≤ 0.25 × in turn, ≤ 50 ms driver CPU per site, ≤ 64 MiB RSS.
# Run as root (the lab uses namespaces); 2 × N lab nodes (at most 240).
set -euo pipefail
{
export LC_ALL=C
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
SIZES="1 10 40" T=3 OUT='' LAB=bs2 NET=92 RTT=0 WAYS=atonce,inturn,xargs,canary TSV=''
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --t) T=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) LAB=$2; shift 2 ;;
    --net) NET=$2; shift 2 ;;
    --rtt) RTT=$2; shift 2 ;;
    --ways) WAYS=$2; shift 2 ;;
    --tsv) TSV=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cd "$REPO"
cargo build --release --locked -q
md=$REPO/target/release/mgmt-driver
work=$(mktemp -d)
trap 'bash scripts/wan-lab.sh down "$work/wan" >/dev/null 2>&1 || true; bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" >/dev/null
# The kit's minimal contract script: a node costs T plus a few process starts, the rest is ours.
cp tests/labkit/fixed-time-install.sh "$work/pkg/Scripts/install_k8s_cluster.sh"
# One master: no VIP (the master's own address is the endpoint); no Helm.
sed -e 's/"helm_installation_script_path": "Scripts\/install_helm.sh",//' \
    -e 's/"cluster_cp_name": "vip_CP"/"cluster_cp_name": "masterNode_CP1"/' \
    samples/requests/k8s-cluster-lab.json >"$work/req.json"
export MGMT_DRIVER_STATE_KEY_FILE=$work/state.key MGMT_DRIVER_SSH_CONFIG=none

site() { printf 'b%02d' "$1"; }

# A fresh lab of 2N kit nodes, site j on nodes 2j+1 (master) and 2j+2 (worker), each pair with
# its own kit state and delay, and every site rendered (the rendered-site contract, by hand).
setup() { # $1 = N
    local n=$1 j m w name d
    bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true
    bash scripts/lab.sh up $((2 * n)) --kit --name "$LAB" --net "$NET" >/dev/null 2>&1
    [ "$RTT" = 0 ] || bash scripts/wan-lab.sh up "$work/wan" "$RTT" "target/lab/$LAB" 2>/dev/null
    rm -rf "$work/out" "$work/state"
    for ((j = 0; j < n; j++)); do
        name=$(site "$j") m=$((2 * j + 1)) w=$((2 * j + 2))
        for i in $m $w; do
            bash scripts/lab.sh exec "$i" --name "$LAB" -- sh -c \
                "mkdir -p /var/lib/labkit/$name && chmod 0777 /var/lib/labkit/$name && mount --bind /var/lib/labkit/$name /var/lib/labkit" >/dev/null
        done
        python3 tests/labkit/labkit-ctl set-delay "target/lab/$LAB/kit/$name" "$T" >/dev/null
        d=$work/out/$name
        mkdir -p "$d/cluster"
        printf '{"name": "%s", "index": %d, "labels": {}, "package": "%s"}\n' "$name" "$j" "$work/pkg" >"$d/site.json"
        bash tests/labkit/cluster-inventory.sh "target/lab/$LAB" "$NET" "$m" "$w" | sed '/^cps:/,$d' >"$d/inventory.yaml"
        if [ "$RTT" != 0 ]; then
            bash scripts/wan-lab.sh rewrite "$work/wan" <"$d/inventory.yaml" >"$d/inventory.wan.yaml"
            mv "$d/inventory.wan.yaml" "$d/inventory.yaml"
        fi
        cp "$work/req.json" "$d/cluster/instantiate.json"
    done
}

# Every site's kit cluster has its 2 nodes: the run did what it says.
check_done() { # $1 = N
    local j name got
    for ((j = 0; j < $1; j++)); do
        name=$(site "$j")
        got=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(len((s.get("cluster") or {}).get("nodes") or {}))' \
            "target/lab/$LAB/kit/$name/state.json")
        [ "$got" = 2 ] || { echo "site $name: its cluster has $got nodes, not 2" >&2; exit 1; }
    done
}

# One measured run: prints "wall_s cpu_s maxrss_kib".
run_sites() { # $1 = N, $2 = --max-sites, then more `sites apply` flags
    local t0 t1 n=$1 max=$2
    shift 2
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M %U %S' -o "$work/time" "$md" sites apply instantiate -o json --rendered "$work/out" \
        --state-dir "$work/state" --max-sites "$max" "$@" >"$work/out.json" 2>"$work/err.log" \
        || { echo "sites apply failed:" >&2; tail -20 "$work/err.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    check_done "$n"
    awk -v a="$t0" -v b="$t1" '{print b - a, $2 + $3, $1}' "$work/time"
    if [ -n "$TSV" ]; then
        # Round trips from the events; the slowest site's own seconds from the result.
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(if [ $# -gt 0 ]; then echo canary; elif [ "$max" = 1 ]; then echo inturn; else echo atonce; fi)" "$RTT" "$n" \
            "$(awk -v a="$t0" -v b="$t1" '{print b - a "\t" $2 + $3 "\t" $1}' "$work/time")" \
            "$(python3 tests/bench/events.py "$work/err.log")" \
            "$(python3 -c '
import json, sys
def walk(x):
    if isinstance(x, dict):
        if "site" in x and "seconds" in x:
            yield x["seconds"]
        for v in x.values():
            yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
print(max(walk(json.load(open(sys.argv[1]))), default=0))' "$work/out.json")" >>"$TSV"
    fi
}

run_xargs() { # $1 = N
    local t0 t1 j
    for ((j = 0; j < $1; j++)); do site "$j"; echo; done >"$work/names"
    rm -f "$work"/time.*
    t0=$(date +%s.%N)
    # shellcheck disable=SC2016 # expanded by the inner shell, once per site
    xargs -P "$1" -I{} sh -c '/usr/bin/time -f "%M %U %S" -o "$0/time.$1" "$2" instantiate-end -o json \
        --request "$0/out/$1/cluster/instantiate.json" -i "$0/out/$1/inventory.yaml" --package-dir "$0/pkg" \
        --vnf-instance-id "site-$1" --state-dir "$0/state" >"$0/x.$1.json" 2>"$0/x.$1.log" \
        || { echo "instantiate-end $1 failed:" >&2; tail -5 "$0/x.$1.log" >&2; exit 255; }' "$work" {} "$md" <"$work/names"
    t1=$(date +%s.%N)
    check_done "$1"
    cat "$work"/time.* | awk -v a="$t0" -v b="$t1" '{c += $2 + $3; if ($1 > m) m = $1} END {print b - a, c, m}'
}

rows=()
for n in $SIZES; do
    [ $((2 * n)) -le 240 ] || { echo "N=$n needs $((2 * n)) nodes; the lab has at most 240" >&2; exit 2; }
    aw=0 ac=0 am=0 sw=0 sc=0 sm=0 xw=0 xc=0 xm=0 cw=0 cc=0
    case ,$WAYS, in *,atonce,*) setup "$n"; read -r aw ac am < <(run_sites "$n" "$n"); [ -n "$am" ] || exit 1 ;; esac
    case ,$WAYS, in *,inturn,*) setup "$n"; read -r sw sc sm < <(run_sites "$n" 1); [ -n "$sm" ] || exit 1 ;; esac
    case ,$WAYS, in *,xargs,*) setup "$n"; read -r xw xc xm < <(run_xargs "$n"); [ -n "$xm" ] || exit 1 ;; esac
    case ,$WAYS, in *,canary,*) setup "$n"; read -r cw cc _ < <(run_sites "$n" "$n" --batch 1,10%,100% --max-fail 0); [ -n "$cc" ] || exit 1 ;; esac
    echo "N=$n: at once ${aw}s, in turn ${sw}s, xargs ${xw}s, canary ${cw}s" >&2
    rows+=("$(awk -v n="$n" -v aw="$aw" -v ac="$ac" -v am="$am" -v sw="$sw" -v sc="$sc" -v sm="$sm" \
        -v xw="$xw" -v xc="$xc" -v xm="$xm" -v cw="$cw" -v cc="$cc" 'BEGIN {
        printf "| %d | %.1f s | %.0f ms | %d MiB | %.1f s | %.0f ms | %d MiB | %.1f s | %.0f ms | %d MiB | %.2f | %.1f s | %.0f ms |", n,
            aw, 1000 * ac / n, am / 1024, sw, 1000 * sc / n, sm / 1024, xw, 1000 * xc / n, xm / 1024, (sw > 0 ? aw / sw : 0),
            cw, 1000 * cc / n }')")
done
table=$(
    printf '| sites (1 master + 1 worker each, T = %ss per node) | at once: wall | CPU/site | RSS | in turn (--max-sites 1): wall | CPU/site | RSS | xargs -P N instantiate-end: wall | CPU/site | max RSS | at once / in turn | canary batches 1,10%%,100%%: wall | CPU/site |\n' "$T"
    printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
    printf '%s\n' "${rows[@]}"
)
echo "$table"
[ -z "$OUT" ] || printf '%s\n' "$table" >"$OUT"
exit 0
}
