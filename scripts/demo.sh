#!/usr/bin/env bash
# The main job on a local default: bring up a 5-node lab of real OpenSSH servers with the lab kit
# in its real-API mode (198.18.3.0/24; docs/labkit.md): a REAL Kubernetes control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl v1.37.2, built once per
# machine from Kubernetes' own Go modules by scripts/build-control-plane.sh, ~10 minutes the
# first time), while kubeadm, apt-get and systemctl are the kit's stand-ins and KWOK plays the
# kubelets. Build a VNF package from our scripts and run the instantiate_end hook: 3 masters
# behind a VIP (one after another, a real 3-member etcd) + 2 workers (at once) + the real
# Helm 3 (air-gapped install), then print the vimConnectionInfo the hook returns and the
# nodes the real API server lists. Then deploy two charts with `mgmt-driver cnf instantiate`
# (one from the package, one from a real HTTP chart repository on the host) and list the
# releases with the real helm. Tears the lab down at the end. Run as root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_deps
cargo build --release --locked
control_plane=$(bash scripts/build-control-plane.sh | tail -n 1)
LAB=demo NET=3
work=$(mktemp -d)
repo_pid=''
trap '[ -z "$repo_pid" ] || kill "$repo_pid" 2>/dev/null; bash scripts/lab.sh down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash scripts/lab.sh up 5 --kit --control-plane "$control_plane" --name "$LAB" --net "$NET"
dir=target/lab/$LAB

# The VNF package: our install scripts + an offline directory (the lab has no internet).
bash samples/package/make-package.sh "$work/pkg" >/dev/null
bash tests/labkit/fetch-helm.sh target/helm >/dev/null
bash tests/labkit/make-offline-dir.sh "$work/pkg/Files/offline" target/helm/helm3/helm-v*-linux-amd64.tar.gz >/dev/null

# Inventory: groups named after the request's aspect_id, the VIP as cps.vip_CP.
bash tests/labkit/cluster-inventory.sh "$dir" "$NET" "1 2 3" "4 5" >"$work/inventory.yaml"

md=./target/release/mgmt-driver
common=(-i "$work/inventory.yaml" --package-dir "$work/pkg" --vnf-instance-id demo-vnf --state-dir "$work/state")
echo "== plan (dry run, first lines)"
$md instantiate-end --dry-run -o plain --request samples/requests/k8s-cluster-lab.json "${common[@]}" 2>&1 | grep '^==' || true
echo "== instantiate_end"
$md instantiate-end -o json --request samples/requests/k8s-cluster-lab.json "${common[@]}" \
    2>"$work/events.jsonl" >"$work/result.json"
echo "result: $(wc -l <"$work/events.jsonl") events on stderr; the result document:"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"ok": d["ok"]} | {k: d["result"][k] for k in ("vimConnectionInfo","nodes")}, indent=2))' "$work/result.json"
echo "== kubectl get nodes (on the main master: the real kubectl and API server)"
bash scripts/lab.sh exec 1 --name "$LAB" -- env KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes

echo "== cnf instantiate: a chart from the package and one from an HTTP chart repository"
url=http://198.18.$NET.1:8879
bash tests/labkit/make-chart-repo.sh "$work/charts" target/helm/helm3/helm "$url" >/dev/null
python3 tests/labkit/serve-repo.py "$work/charts/repo" "198.18.$NET.1" 8879 "$work/repo.log" >/dev/null &
repo_pid=$!
mkdir -p "$work/pkg/Files/kubernetes"
cp "$work/charts/local/localhelm-0.1.0.tgz" "$work/pkg/Files/kubernetes/"
sed "s|@REPO_URL@|$url|" samples/requests/cnf-lab.json >"$work/cnf.json"
sleep 0.5
cnf=(cnf --vnf-instance-id demo-cnf --cluster-instance demo-vnf -i "$work/inventory.yaml" --state-dir "$work/state" --package-dir "$work/pkg")
$md "${cnf[@]}" -o json instantiate --request "$work/cnf.json" --wait 2>/dev/null >"$work/cnf-result.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"master": d["context"]["master"], "helmMajor": d["context"]["helmMajor"], "releases": {k: {x: v[x] for x in ("chart","revision","status")} | {"resources": ["%s/%s" % (r["kind"], r["name"]) for r in v["resources"]]} for k, v in d["result"]["releases"].items()}}, indent=2))' "$work/cnf-result.json"
echo "== helm list (on the main master: the real helm against the real API server)"
bash scripts/lab.sh exec 1 --name "$LAB" -- env KUBECONFIG=/etc/kubernetes/admin.conf helm list -n cnf
