#!/usr/bin/env bash
# control-plane-smoke.sh - starts the REAL control plane that scripts/build-control-plane.sh
# built (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) on 127.0.0.1, checks
# that it works with kubectl, stops it and removes everything it made. See docs/control-plane.md.
#
# What it does, all in a temporary directory and on free high ports of 127.0.0.1:
#   - openssl makes the cluster, etcd and front-proxy CAs, etcd's serving and peer certificate,
#     the apiserver's serving, etcd-client and front-proxy-client certificates, client
#     certificates for an admin (O=system:masters), system:kube-controller-manager and
#     system:kube-scheduler, and the service-account key pair, as kubeadm lays them out in
#     /etc/kubernetes/pki;
#   - etcd with TLS and client-certificate auth; kube-apiserver (--authorization-mode=Node,RBAC,
#     client-certificate auth); kube-controller-manager and kube-scheduler with kubeconfigs;
#   - waits for /readyz, then kubectl get --raw /version, kubectl get ns, creates a Deployment
#     and waits until the real controllers made its ReplicaSet and Pods and the real scheduler
#     marked the Pods Unschedulable (there is no node: they stay Pending);
#   - then KWOK (the kubelet stand-in that build-control-plane.sh also builds): two Nodes are
#     registered as a kubelet registers itself, each with its own system:node:NAME credential,
#     and one kwok per node, with that node's credential and --manage-single-node, makes it Ready,
#     keeps its Lease and moves its Pods to Running; checked, and timed: a Deployment, a
#     StatefulSet with a PVC bound to a hand-made PV, kubectl rollout status and restart, a
#     DaemonSet, kubectl drain and kubectl delete node (controllers and scheduler are real);
#   - prints each process's peak RSS (VmHWM), stops every process it started and removes the
#     directory (--keep leaves the directory for a look).
# Needs: openssl, and the binaries (BINDIR, default: the directory build-control-plane.sh
# prints, which builds them first if they are not in the cache). Runs as any user.
set -euo pipefail
umask 077
export LC_ALL=C

PROG=${0##*/}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
readonly PROG SCRIPT_DIR
readonly READY_TIMEOUT_S=${SMOKE_READY_TIMEOUT_S:-180} STEP_TIMEOUT_S=${SMOKE_STEP_TIMEOUT_S:-120}

usage() {
    cat <<EOF
usage: $PROG [--keep] [BINDIR]
Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler from BINDIR (default:
the last line of scripts/build-control-plane.sh) on 127.0.0.1, checks them with kubectl, then
stops them and removes their directory (--keep: leave the directory, with the logs).
Timeouts (seconds): SMOKE_READY_TIMEOUT_S=$READY_TIMEOUT_S, SMOKE_STEP_TIMEOUT_S=$STEP_TIMEOUT_S.
EOF
}
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}

keep=0
bindir=''
while [ $# -gt 0 ]; do
    case $1 in
    --keep) keep=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    -*)
        usage >&2
        exit 2
        ;;
    *)
        [ -z "$bindir" ] || {
            usage >&2
            exit 2
        }
        bindir=$1
        ;;
    esac
    shift
done

command -v openssl >/dev/null 2>&1 || die "openssl is not installed"
if [ -z "$bindir" ]; then
    bindir=$(bash "$SCRIPT_DIR/build-control-plane.sh" | tail -n 1) || die "build-control-plane.sh failed"
fi
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
    [ -x "$bindir/$b" ] || die "$bindir/$b is missing (run scripts/build-control-plane.sh)"
done
[ -f "$bindir/kwok-stages.yaml" ] || die "$bindir/kwok-stages.yaml is missing (run scripts/build-control-plane.sh)"
readonly NODES=(smoke-node1 smoke-node2)
start_s=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/mgmt-driver-cp-smoke.XXXXXX")
declare -A pid=()
# Stops only the processes this script started, by their pid.
stop_all() {
    local n p i
    for n in kwok@smoke-node1 kwok@smoke-node2 kube-scheduler kube-controller-manager kube-apiserver etcd; do
        p=${pid[$n]-}
        [ -n "$p" ] || continue
        kill -TERM "$p" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
        unset "pid[$n]"
    done
}
failed=1
cleanup() {
    stop_all
    if [ "$failed" = 1 ]; then
        local f
        for f in "$work"/*.log; do
            [ -f "$f" ] || continue
            printf '%s: ---- last lines of %s\n' "$PROG" "${f##*/}" >&2
            tail -n 15 -- "$f" >&2
        done
    fi
    if [ "$keep" = 1 ]; then
        log "kept $work"
    else
        rm -rf -- "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- ports: five free ones in a row on 127.0.0.1 (a connect that fails means free)
port_free() { ! (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base=''
for ((try = 0; try < 50; try++)); do
    b=$((20000 + RANDOM % 40000))
    if port_free "$b" && port_free $((b + 1)) && port_free $((b + 2)) && port_free $((b + 3)) &&
        port_free $((b + 4)); then
        base=$b
        break
    fi
done
[ -n "$base" ] || die "found no five free ports in a row on 127.0.0.1"
readonly ETCD_PORT=$base ETCD_PEER_PORT=$((base + 1)) API_PORT=$((base + 2))
readonly KCM_PORT=$((base + 3)) SCHED_PORT=$((base + 4))

# ---- certificates and keys (openssl), laid out as kubeadm's /etc/kubernetes/pki
pki=$work/pki
mkdir -p -- "$pki/etcd"
ossl() { openssl "$@" 2>>"$work/openssl.log" || die "openssl $1 failed (see $work/openssl.log)"; }
ca() { # ca FILE_PREFIX CN
    ossl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.crt" -days 2 \
        -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
}
cert() { # cert CA_PREFIX FILE_PREFIX SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
    local ext=$2.ext
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$4"
        if [ -n "${5-}" ]; then echo "subjectAltName=$5"; fi
    } >"$ext"
    ossl req -newkey rsa:2048 -nodes -keyout "$2.key" -out "$2.csr" -subj "$3"
    ossl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -days 2 \
        -extfile "$ext" -out "$2.crt"
    rm -f -- "$2.csr" "$ext"
}
ca "$pki/ca" kubernetes
ca "$pki/etcd/ca" etcd-ca
ca "$pki/front-proxy-ca" front-proxy-ca
cert "$pki/etcd/ca" "$pki/etcd/server" /CN=etcd-server serverAuth,clientAuth \
    "DNS:localhost,IP:127.0.0.1"
cert "$pki/etcd/ca" "$pki/etcd/peer" /CN=etcd-peer serverAuth,clientAuth \
    "DNS:localhost,IP:127.0.0.1"
cert "$pki/etcd/ca" "$pki/apiserver-etcd-client" "/O=system:masters/CN=kube-apiserver-etcd-client" clientAuth
cert "$pki/ca" "$pki/apiserver" /CN=kube-apiserver serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
cert "$pki/front-proxy-ca" "$pki/front-proxy-client" /CN=front-proxy-client clientAuth
cert "$pki/ca" "$pki/admin" "/O=system:masters/CN=kubernetes-admin" clientAuth
cert "$pki/ca" "$pki/controller-manager" /CN=system:kube-controller-manager clientAuth
cert "$pki/ca" "$pki/scheduler" /CN=system:kube-scheduler clientAuth
# What a kubelet gets from the CSR flow (kubelet-client-current.pem): CN=system:node:NAME in
# O=system:nodes, which the Node authorizer and NodeRestriction confine to that node.
for node in "${NODES[@]}"; do
    cert "$pki/ca" "$pki/$node" "/O=system:nodes/CN=system:node:$node" clientAuth
done
ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key"
ossl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

kubeconfig() { # kubeconfig NAME CERT_PREFIX: $work/NAME.conf, as kubeadm's admin.conf & co.
    local f=$work/$1.conf
    KUBECONFIG=$f "$bindir/kubectl" config set-cluster smoke --server="https://127.0.0.1:$API_PORT" \
        --certificate-authority="$pki/ca.crt" --embed-certs=true >/dev/null
    KUBECONFIG=$f "$bindir/kubectl" config set-credentials "$1" --client-certificate="$2.crt" \
        --client-key="$2.key" --embed-certs=true >/dev/null
    KUBECONFIG=$f "$bindir/kubectl" config set-context "$1@smoke" --cluster=smoke --user="$1" >/dev/null
    KUBECONFIG=$f "$bindir/kubectl" config use-context "$1@smoke" >/dev/null
}
kubeconfig admin "$pki/admin"
kubeconfig controller-manager "$pki/controller-manager"
kubeconfig scheduler "$pki/scheduler"
for node in "${NODES[@]}"; do kubeconfig "$node" "$pki/$node"; done
k() { "$bindir/kubectl" --kubeconfig="$work/admin.conf" "$@"; }

launch() { # launch NAME[@INSTANCE] ARGS...: start $bindir/NAME in the background, log to $work/NAME[@INSTANCE].log
    local n=$1
    shift
    "$bindir/${n%@*}" "$@" >"$work/$n.log" 2>&1 &
    pid[$n]=$!
    log "started $n (pid ${pid[$n]})"
}
alive() { kill -0 "${pid[$1]}" 2>/dev/null || die "$1 exited (see its log below)"; }
# wait_for WHAT TIMEOUT COMMAND...: retry COMMAND every half second; every process must stay up
wait_for() {
    local what=$1 limit=$2 end n
    shift 2
    end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        for n in "${!pid[@]}"; do alive "$n"; done
        [ "$SECONDS" -lt "$end" ] || die "timed out after ${limit}s waiting for $what"
        sleep 0.5
    done
}

# ---- etcd
launch etcd --name=smoke --data-dir="$work/etcd-data" \
    --listen-client-urls="https://127.0.0.1:$ETCD_PORT" --advertise-client-urls="https://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="https://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="https://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="smoke=https://127.0.0.1:$ETCD_PEER_PORT" \
    --cert-file="$pki/etcd/server.crt" --key-file="$pki/etcd/server.key" \
    --client-cert-auth=true --trusted-ca-file="$pki/etcd/ca.crt" \
    --peer-cert-file="$pki/etcd/peer.crt" --peer-key-file="$pki/etcd/peer.key" \
    --peer-client-cert-auth=true --peer-trusted-ca-file="$pki/etcd/ca.crt" \
    --snapshot-count=10000
etcd_ok() {
    "$bindir/etcdctl" --endpoints="https://127.0.0.1:$ETCD_PORT" --cacert="$pki/etcd/ca.crt" \
        --cert="$pki/apiserver-etcd-client.crt" --key="$pki/apiserver-etcd-client.key" endpoint health
}
wait_for "etcd to be healthy" "$STEP_TIMEOUT_S" etcd_ok
log "etcd: $(etcd_ok 2>&1 | head -n 1)"

# ---- kube-apiserver (flags as kubeadm's static Pod manifest, less the kubelet and proxy ones)
launch kube-apiserver --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$API_PORT" \
    --endpoint-reconciler-type=none \
    --allow-privileged=true --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --client-ca-file="$pki/ca.crt" --enable-bootstrap-token-auth=true \
    --etcd-servers="https://127.0.0.1:$ETCD_PORT" --etcd-cafile="$pki/etcd/ca.crt" \
    --etcd-certfile="$pki/apiserver-etcd-client.crt" --etcd-keyfile="$pki/apiserver-etcd-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/12 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key" \
    --cert-dir="$work/apiserver-certs"
wait_for "kube-apiserver /readyz" "$READY_TIMEOUT_S" k get --raw /readyz
log "kube-apiserver ready after $((SECONDS - start_s)) s (/readyz: $(k get --raw /readyz))"

# ---- kube-controller-manager and kube-scheduler (kubeadm's flags)
kcm_conf=$work/controller-manager.conf
launch kube-controller-manager --kubeconfig="$kcm_conf" --authentication-kubeconfig="$kcm_conf" \
    --authorization-kubeconfig="$kcm_conf" --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --cert-dir="$work/kcm-certs" --client-ca-file="$pki/ca.crt" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
    --cluster-name=smoke --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --controllers='*,bootstrapsigner,tokencleaner' --leader-elect=false \
    --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 \
    --root-ca-file="$pki/ca.crt" --service-account-private-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/12 --use-service-account-credentials=true
sched_conf=$work/scheduler.conf
launch kube-scheduler --kubeconfig="$sched_conf" --authentication-kubeconfig="$sched_conf" \
    --authorization-kubeconfig="$sched_conf" --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" \
    --cert-dir="$work/scheduler-certs" --leader-elect=false
healthz() { "$bindir/kubectl" --kubeconfig="$work/admin.conf" --insecure-skip-tls-verify=true \
    --server="https://127.0.0.1:$1" get --raw /healthz; }
wait_for "kube-controller-manager /healthz" "$STEP_TIMEOUT_S" healthz "$KCM_PORT"
wait_for "kube-scheduler /healthz" "$STEP_TIMEOUT_S" healthz "$SCHED_PORT"
log "kube-controller-manager and kube-scheduler healthy"

# ---- what the real API answers
echo "== kubectl get --raw /version"
k get --raw /version
echo
echo "== kubectl version"
k version
echo "== kubectl get ns"
k get ns
# The service-account controller must have made the default ServiceAccount before a Pod can be.
wait_for "the default ServiceAccount" "$STEP_TIMEOUT_S" k -n default get serviceaccount default
echo "== kubectl create deployment smoke --image=registry.k8s.io/pause:3.10 --replicas=2"
k -n default create deployment smoke --image=registry.k8s.io/pause:3.10 --replicas=2
rs_made() { [ -n "$(k -n default get rs -l app=smoke -o name)" ]; }
wait_for "the Deployment's ReplicaSet (deployment controller)" "$STEP_TIMEOUT_S" rs_made
pods_made() { [ "$(k -n default get pods -l app=smoke -o name | wc -l)" -eq 2 ]; }
wait_for "the ReplicaSet's Pods (replicaset controller)" "$STEP_TIMEOUT_S" pods_made
unschedulable() {
    local reasons
    reasons=$(k -n default get pods -l app=smoke \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}')
    [ "$(grep -c '^Unschedulable$' <<<"$reasons")" -eq 2 ]
}
wait_for "the scheduler to mark the Pods Unschedulable" "$STEP_TIMEOUT_S" unschedulable
echo "== kubectl get deployment,replicaset,pod -l app=smoke"
k -n default get deployment,replicaset,pod -l app=smoke -o wide
echo "== ownership and scheduling"
k -n default get rs -l app=smoke \
    -o jsonpath='{range .items[*]}replicaset {.metadata.name}: owner {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}{end}'
k -n default get pods -l app=smoke \
    -o jsonpath='{range .items[*]}pod {.metadata.name}: owner {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}, phase {.status.phase}, PodScheduled={.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}{end}'
echo "== events (scheduler)"
k -n default get events --field-selector reason=FailedScheduling -o custom-columns=SOURCE:.reportingComponent,OBJECT:.involvedObject.name,MESSAGE:.message | head -n 3
k -n default delete deployment smoke --wait=false >/dev/null

# ---- KWOK: Nodes and Pods. Below, the API, the controllers and the scheduler are real; kwok, a
# stand-in for each node's kubelet, plays the kubelet's part (no container runs).
timed() { # timed WHAT COMMAND...: run COMMAND, print how long it took
    local what=$1 t0=$SECONDS
    shift
    "$@" || die "$what failed"
    printf -- '-- %s: %d s\n' "$what" "$((SECONDS - t0))"
}
tfor() { # tfor WHAT TIMEOUT COMMAND...: wait_for, and print how long it took
    local t0=$SECONDS
    wait_for "$@"
    printf -- '-- %s: %d s\n' "$1" "$((SECONDS - t0))"
}
kn() { # kn NODE ARGS...: kubectl with that node's own credential
    local node=$1
    shift
    "$bindir/kubectl" --kubeconfig="$work/$node.conf" "$@"
}
# The two grants kwok needs beyond a kubelet's own, both read-only (the Node authorizer answers
# "no opinion" to what it does not allow, so RBAC may allow it; writes stay confined by the Node
# authorizer and NodeRestriction):
#   - its start-up check lists all Nodes (kwok v0.8.0 cmd/root.go waitForReady, limit 1), and
#     the Node authorizer lets a node read only its own Node object;
#   - it watches node Leases with an informer (list+watch, field selector metadata.name), and
#     the Node authorizer lets a node only get, create, update, patch or delete its Lease.
#     Without the grant kwok never sees that it holds the Lease, and leaves the node's Pods alone.
k create clusterrole kwok:list-nodes --verb=get,list,watch --resource=nodes >/dev/null
k create clusterrolebinding kwok:list-nodes --clusterrole=kwok:list-nodes --group=system:nodes >/dev/null
k -n kube-node-lease create role kwok:watch-node-leases --verb=get,list,watch \
    --resource=leases.coordination.k8s.io >/dev/null
k -n kube-node-lease create rolebinding kwok:watch-node-leases --role=kwok:watch-node-leases \
    --group=system:nodes >/dev/null
i=0
t0=$SECONDS
for node in "${NODES[@]}"; do
    i=$((i + 1))
    # kwok first, as a kubelet starts before it registers. It manages only its own node, with
    # only that node's credential.
    launch "kwok@$node" --kubeconfig="$work/$node.conf" --config="$bindir/kwok-stages.yaml" \
        --manage-single-node="$node" --node-ip="10.250.0.1$i" --node-lease-duration-seconds=40
    # The Node as a kubelet registers itself (its initial Node object), with its own credential:
    # the name, the labels a kubelet may set, addresses, capacity, allocatable and nodeInfo.
    kn "$node" create -f - >/dev/null <<EOF || die "registering $node with its own credential failed"
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$node",
   "labels": {"kubernetes.io/hostname": "$node", "kubernetes.io/os": "linux",
     "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"},
   "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
 "spec": {},
 "status": {
   "addresses": [{"type": "InternalIP", "address": "10.250.0.1$i"}, {"type": "Hostname", "address": "$node"}],
   "capacity": {"cpu": "2", "memory": "4026532Ki", "pods": "110", "ephemeral-storage": "20134592Ki"},
   "allocatable": {"cpu": "2", "memory": "3924132Ki", "pods": "110", "ephemeral-storage": "18556039957"},
   "nodeInfo": {"kubeletVersion": "v1.37.2", "containerRuntimeVersion": "containerd://2.1.4",
     "kernelVersion": "$(uname -r)", "osImage": "Ubuntu 24.04 LTS", "operatingSystem": "linux",
     "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""}}}
EOF
done
node_ready() { [ "$(k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
for node in "${NODES[@]}"; do
    tfor "node $node Ready (kwok's node-initialize stage)" "$STEP_TIMEOUT_S" node_ready "$node"
done
lease_renewed() { [ -n "$(k -n kube-node-lease get lease "$1" -o jsonpath='{.spec.renewTime}')" ]; }
for node in "${NODES[@]}"; do
    tfor "Lease kube-node-lease/$node renewed (kwok)" "$STEP_TIMEOUT_S" lease_renewed "$node"
done
cidr_set() { [ -n "$(k get node "$1" -o jsonpath='{.spec.podCIDR}')" ]; }
untainted() { [ -z "$(k get node "$1" -o jsonpath='{.spec.taints}')" ]; }
for node in "${NODES[@]}"; do
    wait_for "the podCIDR of $node (nodeipam controller)" "$STEP_TIMEOUT_S" cidr_set "$node"
    wait_for "$node's not-ready taint to go (node lifecycle controller)" "$STEP_TIMEOUT_S" untainted "$node"
done
echo "== nodes registered, Ready and untainted after $((SECONDS - t0)) s"
k get nodes -o wide
k get nodes -o jsonpath='{range .items[*]}{.metadata.name}: podCIDR {.spec.podCIDR}, addresses {.status.addresses}{"\n"}{end}'
k -n kube-node-lease get leases -o custom-columns=NAME:.metadata.name,HOLDER:.spec.holderIdentity,SECONDS:.spec.leaseDurationSeconds,OWNER:.metadata.ownerReferences[0].kind

echo "== a Deployment with 2 replicas"
k -n default create deployment web --image=registry.k8s.io/pause:3.10 --replicas=2 >/dev/null
timed "kubectl rollout status deployment/web" k -n default rollout status deployment/web --timeout="${STEP_TIMEOUT_S}s"
k -n default get pods -l app=web -o wide

echo "== a StatefulSet with a PVC bound to a hand-made hostPath PV"
k apply -f - >/dev/null <<EOF || die "creating the PV, the Service and the StatefulSet failed"
apiVersion: v1
kind: PersistentVolume
metadata: {name: smoke-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /var/lib/smoke-pv}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: db, image: registry.k8s.io/pause:3.10, volumeMounts: [{name: data, mountPath: /data}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], storageClassName: manual, resources: {requests: {storage: 1Gi}}}
EOF
timed "kubectl rollout status statefulset/db" k -n default rollout status statefulset/db --timeout="${STEP_TIMEOUT_S}s"
pvc_bound() { [ "$(k -n default get pvc data-db-0 -o jsonpath='{.status.phase}')" = Bound ]; }
wait_for "PVC data-db-0 Bound (persistentvolume-binder controller)" "$STEP_TIMEOUT_S" pvc_bound
k -n default get pvc,pod -l app=db -o wide
k get pv smoke-pv -o custom-columns=PV:.metadata.name,STATUS:.status.phase,CLAIM:.spec.claimRef.name

echo "== kubectl rollout restart deployment/web"
old=$(k -n default get pods -l app=web -o jsonpath='{.items[*].metadata.name}')
t0=$SECONDS
k -n default rollout restart deployment/web
k -n default rollout status deployment/web --timeout="${STEP_TIMEOUT_S}s" >/dev/null ||
    die "the restarted rollout did not complete"
old_gone() {
    local p
    for p in $old; do
        if k -n default get pod "$p" >/dev/null 2>&1; then return 1; fi
    done
}
wait_for "the old Pods to be removed (kwok's pod-delete stage)" "$STEP_TIMEOUT_S" old_gone
printf -- '-- rollout restart: new ReplicaSet ready and the old Pods gone: %d s\n' "$((SECONDS - t0))"
k -n default get rs -l app=web
echo "== deleting a Pod: grace period and finalizers"
k -n default run held --image=registry.k8s.io/pause:3.10 --restart=Never \
    --overrides='{"metadata":{"finalizers":["smoke.example/hold"]},"spec":{"terminationGracePeriodSeconds":30}}' >/dev/null
running() { [ "$(k -n default get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
wait_for "Pod held Running" "$STEP_TIMEOUT_S" running held
timed "kubectl delete pod held --wait=false (grace 30 s, a finalizer)" k -n default delete pod held --wait=false
zero_grace() { [ "$(k -n default get pod held -o jsonpath='{.metadata.deletionGracePeriodSeconds}')" = 0 ]; }
tfor "kwok's delete (grace 0, as a kubelet's final delete) before the grace period ends" 25 zero_grace
sleep 2
k -n default get pod held >/dev/null 2>&1 || die "Pod held is gone although its finalizer is still there"
echo "-- Pod held stays, Terminating, until its finalizer goes"
k -n default patch pod held --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
held_gone() { ! k -n default get pod held >/dev/null 2>&1; }
tfor "Pod held removed once its finalizer is gone" "$STEP_TIMEOUT_S" held_gone

echo "== a DaemonSet: one Pod per node"
k -n default apply -f - >/dev/null <<EOF || die "creating the DaemonSet failed"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: registry.k8s.io/pause:3.10}]}
EOF
timed "kubectl rollout status daemonset/agent" k -n default rollout status daemonset/agent --timeout="${STEP_TIMEOUT_S}s"
k -n default get ds agent
k -n default get pods -l app=agent -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,IP:.status.podIP

echo "== kubectl drain ${NODES[0]} --ignore-daemonsets"
timed "kubectl drain ${NODES[0]}" k drain "${NODES[0]}" --ignore-daemonsets --delete-emptydir-data \
    --timeout="${STEP_TIMEOUT_S}s"
only_ds_left() {
    ! k get pods -A --field-selector "spec.nodeName=${NODES[0]}" \
        -o jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind}{"\n"}{end}' | grep -qv '^DaemonSet$'
}
wait_for "only DaemonSet Pods on ${NODES[0]}" "$STEP_TIMEOUT_S" only_ds_left
timed "kubectl rollout status deployment/web, after the drain" \
    k -n default rollout status deployment/web --timeout="${STEP_TIMEOUT_S}s"
timed "kubectl rollout status statefulset/db, after the drain" \
    k -n default rollout status statefulset/db --timeout="${STEP_TIMEOUT_S}s"
k get pods -A -o wide

echo "== kubectl delete node ${NODES[0]}"
timed "kubectl delete node ${NODES[0]}" k delete node "${NODES[0]}"
orphans_gone() { [ -z "$(k get pods -A --field-selector "spec.nodeName=${NODES[0]}" -o name)" ]; }
tfor "its DaemonSet Pod removed (pod garbage collector)" "$STEP_TIMEOUT_S" orphans_gone
sleep 5
if k get node "${NODES[0]}" >/dev/null 2>&1; then die "${NODES[0]} came back: something re-created it"; fi
echo "-- ${NODES[0]} stays deleted (kwok re-creates no Node); nodes now: $(k get nodes -o name | tr '\n' ' ')"
k -n default get ds agent

echo "== peak memory (VmHWM) and current RSS of each process"
for n in etcd kube-apiserver kube-controller-manager kube-scheduler kwok@smoke-node1 kwok@smoke-node2; do
    printf '%-24s %s, %s\n' "$n" "$(awk '/^VmHWM/{print "peak " $2 " kB"}' "/proc/${pid[$n]}/status")" \
        "$(awk '/^VmRSS/{print "now " $2 " kB"}' "/proc/${pid[$n]}/status")"
done
stop_all
failed=0
echo "control-plane smoke test: passed in $((SECONDS - start_s)) s (ports $ETCD_PORT-$SCHED_PORT on 127.0.0.1)"
