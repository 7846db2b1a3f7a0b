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
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$bindir/$b" ] || die "$bindir/$b is missing (run scripts/build-control-plane.sh)"
done
start_s=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/mgmt-driver-cp-smoke.XXXXXX")
declare -A pid=()
# Stops only the processes this script started, by their pid.
stop_all() {
    local n p i
    for n in kube-scheduler kube-controller-manager kube-apiserver etcd; do
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
k() { "$bindir/kubectl" --kubeconfig="$work/admin.conf" "$@"; }

launch() { # launch NAME ARGS...: start $bindir/NAME in the background, log to $work/NAME.log
    local n=$1
    shift
    "$bindir/$n" "$@" >"$work/$n.log" 2>&1 &
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

echo "== peak memory (VmHWM) and current RSS of each process"
for n in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    printf '%-24s %s, %s\n' "$n" "$(awk '/^VmHWM/{print "peak " $2 " kB"}' "/proc/${pid[$n]}/status")" \
        "$(awk '/^VmRSS/{print "now " $2 " kB"}' "/proc/${pid[$n]}/status")"
done
stop_all
failed=0
echo "control-plane smoke test: passed in $((SECONDS - start_s)) s (ports $ETCD_PORT-$SCHED_PORT on 127.0.0.1)"
