#!/usr/bin/env bash
# selftest.sh - end-to-end self-test of the mgmt-driver LAB KIT (tests/labkit/,
# docs/labkit.md). Brings up a 3-node kit lab (scripts/lab.sh up 3 --kit --name
# kst --net 60) and drives the stand-ins over real ssh: apt-get, hostnamectl,
# kubeadm init/join/token/reset, kubectl get/apply/drain/delete/exec etcdctl, workloads,
# helm from the kit's tarball, fault injection and timing through labkit-ctl.
# Finally checks that nothing reached the host. Always tears the lab down.
# Exits non-zero if any check fails. Needs root (like scripts/lab.sh).
set -uo pipefail
export LC_ALL=C

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd -- "$HERE/../.." && pwd -P)
LAB=$REPO/scripts/lab.sh
CTL=$HERE/labkit-ctl
NAME=kst
NET=60
DIR=$REPO/target/lab/$NAME
KIT=$DIR/kit
IP1=198.18.$NET.11
IP2=198.18.$NET.12
IP3=198.18.$NET.13
ADMIN='export KUBECONFIG=/etc/kubernetes/admin.conf;'
ETCDCTL='etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key'

PASS=0 FAIL=0
TMP=$(mktemp -d)
OUT='' RC=0

if [ "$(id -u)" != 0 ]; then
    echo "selftest.sh: must run as root (scripts/lab.sh creates namespaces and mounts)" >&2
    exit 2
fi

cleanup() {
    "$LAB" down --name "$NAME" >/dev/null 2>&1 || true
    rm -rf -- "$TMP"
}
trap cleanup EXIT

# shellcheck source=tests/labkit/selftest-lib.sh
. "$HERE/selftest-lib.sh"
# put IP PATH < data: write a file on a node
put() {
    ssh -F "$DIR/ssh_config" -o BatchMode=yes "root@$1" "cat > '$2'"
}
has() { [[ $OUT == *"$1"* ]]; }
no_line() { ! grep -qxF -- "$1" <<<"$OUT"; }
rc_is() { [ "$RC" -eq "$1" ]; }
rc_not0() { [ "$RC" -ne 0 ]; }
ok_has() { rc_is 0 && has "$1"; }
fail_has() { rc_not0 && has "$1"; }

# ---------------------------------------------------------------- host snapshot
host_state() {
    local f
    hostname
    for f in /usr/bin/kubeadm /usr/bin/kubectl /usr/bin/kubelet /usr/bin/containerd /usr/local/bin/helm \
        /etc/kubernetes /etc/haproxy /etc/keepalived /var/lib/labkit /var/lib/labkit-node /opt/labkit; do
        if [ -e "$f" ] || [ -L "$f" ]; then echo "present $f"; else echo "absent $f"; fi
    done
    cat /proc/sys/vm/swappiness /proc/sys/net/ipv4/ip_forward
    swapon --show --noheadings 2>/dev/null || true
    if [ -r /proc/modules ]; then grep -c -E '^(br_netfilter|overlay) ' /proc/modules || true; fi
}
host_state >"$TMP/host.before"

# ---------------------------------------------------------------- lab
if ! "$LAB" up 3 --kit --name "$NAME" --net "$NET" >"$TMP/up.log" 2>&1; then
    cat "$TMP/up.log" >&2
    echo "selftest.sh: lab.sh up failed" >&2
    exit 1
fi
OUT=$(cat "$TMP/up.log")
expect "lab up with --kit: $KIT exists and is empty" test -d "$KIT" -a -z "$(ls -A "$KIT")"

on "$IP1" 'command -v kubeadm || echo none; command -v apt-get; cat /run/mdlab/labkit-node'
expect "kubeadm not on PATH before install; apt-get is the kit's" \
    ok_has $'none\n/usr/local/sbin/apt-get'
# shellcheck disable=SC2016 # expanded on the node
on "$IP1" 'readlink -f "$(command -v systemctl)" "$(command -v sysctl)" /usr/sbin/modprobe /usr/sbin/swapoff'
expect "systemctl/sysctl shadowed, host-wide modprobe/swapoff masked" \
    ok_has $'/opt/labkit/systemctl\n/opt/labkit/sysctl\n/opt/labkit/modprobe\n/opt/labkit/swapoff'
on "$IP1" 'apt-get --help'
expect "apt-get --help says it is a lab kit stand-in" ok_has "LAB KIT STAND-IN"

# ---------------------------------------------------------------- install, hostnames
for ip in "$IP1" "$IP2" "$IP3"; do
    on "$ip" 'apt-get update && apt-get install -y kubeadm kubelet kubectl && command -v kubeadm kubectl kubelet && kubeadm version -o short && kubelet --version'
    expect "apt-get install kubeadm kubelet kubectl on $ip" \
        ok_has $'/usr/bin/kubeadm\n/usr/bin/kubectl\n/usr/bin/kubelet\nv1.31.4\nKubernetes v1.31.4'
done
on "$IP1" 'apt-get install -y kubeadm; apt-mark hold kubeadm kubelet; swapoff -a; modprobe br_netfilter; sysctl -w net.ipv4.ip_forward=1 vm.swappiness=1; sysctl -n net.ipv4.ip_forward; cat /proc/sys/net/ipv4/ip_forward'
expect "re-install is a no-op; apt-mark/swapoff/modprobe/sysctl record only" \
    ok_has $'kubeadm is already the newest version (1.31.4-1.1).'
expect "sysctl net.ipv4.ip_forward: recorded 1, the node's real value stays 0" has $'\n1\n0'
on "$IP1" 'systemctl reload haproxy; echo rc=$?; apt-get install -y haproxy >/dev/null; systemctl reload haproxy; echo rc=$?'
has "rc=5" && has "rc=1"
check $? "systemctl reload haproxy fails without the unit, then without haproxy.cfg"

i=0
for ip in "$IP1" "$IP2" "$IP3"; do
    i=$((i + 1))
    role=worker
    [ $i = 1 ] && role=master
    on "$ip" "hostnamectl set-hostname $role$((10 + i)) && hostname && cat /etc/hostname"
    expect "hostnamectl set-hostname $role$((10 + i))" ok_has "$role$((10 + i))"$'\n'"$role$((10 + i))"
done

# ---------------------------------------------------------------- init
on "$IP1" "kubeadm init --pod-network-cidr 192.168.0.0/16 --service-cidr 10.96.0.0/12 --control-plane-endpoint $IP1:6443 --upload-certs"
INIT=$OUT
expect "kubeadm init succeeds" ok_has "Your Kubernetes control-plane has initialized successfully!"
TOKEN=$(grep -oE -- '--token [a-z0-9]{6}\.[a-z0-9]{16}' <<<"$INIT" | tail -n1 | cut -d' ' -f2)
HASH=$(grep -oE 'sha256:[0-9a-f]{64}' <<<"$INIT" | tail -n1)
CERTKEY=$(grep -A1 'Using certificate key:' <<<"$INIT" | tail -n1)
expect "init printed token, CA hash and certificate key" \
    test -n "$TOKEN" -a -n "$HASH" -a "${#CERTKEY}" = 64
expect "the last line is the worker join command" \
    test "$(tail -n1 <<<"$INIT")" = $'\t'"--discovery-token-ca-cert-hash $HASH "
on "$IP1" 'openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d" " -f1'
expect "CA hash equals the openssl pipeline on the node" test "sha256:$OUT" = "$HASH"
on "$IP1" 'openssl verify -CAfile /etc/kubernetes/pki/ca.crt /etc/kubernetes/pki/etcd/server.crt'
expect "etcd/server.crt is signed by the cluster CA" ok_has ": OK"
on "$IP1" "kubeadm init --control-plane-endpoint $IP1:6443"
expect "second kubeadm init is refused by preflight" fail_has "[ERROR "

# ---------------------------------------------------------------- joins
on "$IP3" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash sha256:$(printf '%064d' 0)"
expect "join with a wrong CA hash fails" fail_has "none of the public keys"
on "$IP3" "kubeadm join $IP1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash $HASH"
expect "join with an unknown token fails" fail_has 'could not find a JWS signature in the cluster-info ConfigMap for token ID "abcdef"'
on "$IP3" "kubeadm join 198.18.$NET.99:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "join to an address without API server fails" fail_has "couldn't validate the identity of the API Server"
on "$IP3" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH --control-plane --certificate-key $(printf '%064d' 1)"
expect "control-plane join with a wrong certificate key fails" fail_has "message authentication failed"
# join --config: a JoinConfiguration file (YAML, or JSON as our install script writes it).
put "$IP3" /root/join-badkey.json <<EOF
{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "JoinConfiguration",
 "discovery": {"bootstrapToken": {"apiServerEndpoint": "$IP1:6443", "token": "$TOKEN", "caCertHashes": ["$HASH"]}},
 "controlPlane": {"certificateKey": "$(printf '%064d' 1)", "localAPIEndpoint": {"advertiseAddress": "$IP3"}}}
EOF
on "$IP3" "kubeadm join --config /root/join-badkey.json"
expect "join --config: a wrong controlPlane.certificateKey fails" fail_has "message authentication failed"
put "$IP3" /root/join-badhash.yaml <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "$IP1:6443"
    token: "$TOKEN"
    caCertHashes:
      - "sha256:$(printf '%064d' 0)"
EOF
on "$IP3" "kubeadm join --config /root/join-badhash.yaml"
expect "join --config: a wrong caCertHashes fails" fail_has "none of the public keys"
put "$IP3" /root/join.yaml <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "$IP1:6443"
    token: "$TOKEN"
    caCertHashes:
      - "$HASH"
EOF
on "$IP3" "kubeadm join --config /root/join.yaml --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "join --config with --token is refused like kubeadm" \
    fail_has "can not mix '--config' with arguments [discovery-token-ca-cert-hash token]"
on "$IP3" "kubeadm join --config /root/join.yaml --control-plane"
expect "join --config with --control-plane is refused like kubeadm" \
    fail_has "can not mix '--config' with arguments [control-plane]"
on "$IP3" "kubeadm join --config /root/nonexistent.yaml"
expect "join --config with a missing file fails" fail_has "unable to read config from"
on "$IP2" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "worker join on $IP2 (flags)" ok_has "This node has joined the cluster:"
on "$IP3" "kubeadm join --config /root/join.yaml --v=1"
expect "worker join on $IP3 (--config)" ok_has "This node has joined the cluster:"
on "$IP1" "$ADMIN kubectl get node worker13 -o name"
expect "the --config worker is a node of the cluster" ok_has "node/worker13"
on "$IP2" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "joining again is refused by preflight" fail_has "/etc/kubernetes/kubelet.conf already exists"

# ---------------------------------------------------------------- kubectl basics
on "$IP1" "$ADMIN kubectl get nodes -o name"
expect "kubectl get nodes -o name lists all three" ok_has $'node/master11\nnode/worker12\nnode/worker13'
on "$IP2" 'kubectl get nodes'
expect "kubectl without a kubeconfig: localhost:8080 refused" \
    fail_has "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
on "$IP1" "$ADMIN kubeadm token create --ttl 2h | tail -n1"
[[ $OUT =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]]
check $? "kubeadm token create --ttl 2h: last line is a token"
on "$IP1" "kubeadm init phase upload-certs --upload-certs | tail -n1"
[[ $OUT =~ ^[0-9a-f]{64}$ ]]
check $? "upload-certs: last line is a 64-hex key"
on "$IP1" "$ADMIN kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}'"
expect "config view --raw jsonpath server" test "$OUT" = "https://$IP1:6443"
on "$IP1" "$ADMIN kubectl cluster-info"
expect "cluster-info" ok_has "Kubernetes control plane is running at https://$IP1:6443"

cat >"$TMP/admin-token.json" <<'EOF'
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "ServiceAccount",
   "metadata": {"name": "mgmt-driver-admin", "namespace": "kube-system"}},
  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
   "metadata": {"name": "mgmt-driver-admin"},
   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
   "subjects": [{"kind": "ServiceAccount", "name": "mgmt-driver-admin", "namespace": "kube-system"}]},
  {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
   "metadata": {"name": "mgmt-driver-admin-token", "namespace": "kube-system",
                "annotations": {"kubernetes.io/service-account.name": "mgmt-driver-admin"}}}
]}
EOF
put "$IP1" /root/admin-token.json <"$TMP/admin-token.json"
on "$IP1" "$ADMIN kubectl apply -f /root/admin-token.json"
expect "apply the admin-token List" ok_has $'serviceaccount/mgmt-driver-admin created\nclusterrolebinding.rbac.authorization.k8s.io/mgmt-driver-admin created\nsecret/mgmt-driver-admin-token created'
on "$IP1" "$ADMIN kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{.data.token}'"
TOK1=$OUT
on "$IP1" "$ADMIN kubectl apply -f /root/admin-token.json >/dev/null && kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{.data.token}'"
rc_is 0 && [ -n "$TOK1" ] && [ "$OUT" = "$TOK1" ] && [[ $(base64 -d <<<"$TOK1") =~ ^eyJ[^.]+\.[^.]+\.[^.]+$ ]]
check $? "service-account token filled in, stable on re-apply"

printf '# lab kit selftest: an opaque CNI manifest (calico)\napiVersion: v1\nkind: ConfigMap\n' | put "$IP1" /root/cni.yaml
on "$IP1" "$ADMIN kubectl apply -f /root/cni.yaml && kubectl get nodes"
ok_has "daemonset.apps/calico-node created" && [ "$(grep -c " Ready " <<<"$OUT")" = 3 ]
check $? "apply an opaque YAML CNI manifest; nodes become Ready"

# ---------------------------------------------------------------- workloads (mgmt-driver workload ops)
# A Deployment applied as JSON gets pods and revisions; scale, set image, rollout undo|history,
# exec (sandboxed: nobody, the container's env, HOSTNAME=pod) and delete act like kubectl's.
printf '%s\n' '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"kw"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"kw"}},"template":{"metadata":{"labels":{"app":"kw"}},"spec":{"containers":[{"name":"c","image":"img:1","env":[{"name":"GREETING","value":"hi there"}]}]}}}}' |
    put "$IP1" /root/kw.json
on "$IP1" "$ADMIN kubectl apply -f /root/kw.json && kubectl get deployment kw --no-headers && kubectl get pods -l app=kw -o name"
ok_has "deployment.apps/kw created" && grep -qE '^kw +2/2 +2 +2 ' <<<"$OUT" && [ "$(grep -cE '^pod/kw-[a-z0-9]{10}-[a-z0-9]{5}$' <<<"$OUT")" = 2 ]
check $? "a Deployment applied as JSON: 2/2 ready, pods named <deploy>-<hash>-<rand>"
on "$IP1" "$ADMIN kubectl set image deployment/kw c=img:2 && kubectl rollout history deployment/kw"
ok_has "deployment.apps/kw image updated" && has $'REVISION  CHANGE-CAUSE\n1         <none>\n2         <none>'
check $? "set image makes revision 2; rollout history"
on "$IP1" "$ADMIN kubectl rollout undo deployment/kw --to-revision=9"
expect "rollout undo to a missing revision" fail_has "error: unable to find specified revision 9 in history"
on "$IP1" "$ADMIN kubectl rollout undo deployment/kw && kubectl get deployment kw -o jsonpath='{.spec.template.spec.containers[0].image}'"
expect "rollout undo: the previous image" ok_has $'deployment.apps/kw rolled back\nimg:1'
on "$IP1" "$ADMIN kubectl scale deployment/kw --replicas=3 && kubectl get pods -l app=kw -o name | wc -l"
expect "scale --replicas=3" ok_has $'deployment.apps/kw scaled\n3'
on "$IP1" "$ADMIN kubectl scale deployment/nope --replicas=1"
expect "scale a missing Deployment: NotFound" fail_has 'Error from server (NotFound): deployments.apps "nope" not found'
on "$IP1" "$ADMIN p=\$(kubectl get pods -l app=kw -o name | head -n 1) && kubectl exec \${p#pod/} -- sh -c 'echo \$HOSTNAME; echo \$GREETING; id -un; pwd; exit 3'"
rc_is 3 && [[ $OUT =~ kw-[a-z0-9]{10}-[a-z0-9]{5}$'\nhi there\nnobody\n/tmp/labkit-exec-' ]] && has "command terminated with exit code 3"
check $? "exec in a workload pod: sandboxed as nobody with the container's env; kubectl's exit contract"
on "$IP1" "$ADMIN kubectl delete deployment kw && kubectl get pods -l app=kw -o name"
ok_has 'deployment.apps "kw" deleted' && ! has "pod/kw-"
check $? "delete deployment: its pods go"

# ---------------------------------------------------------------- drain, delete, etcd
"$CTL" add-pod "$KIT" worker13 stuck-1 --stuck >/dev/null
"$CTL" add-pod "$KIT" worker12 web-1 >/dev/null
t0=$SECONDS
on "$IP1" "$ADMIN kubectl drain worker13 --ignore-daemonsets --delete-emptydir-data --timeout=6s"
fail_has 'error when evicting pods/"stuck-1" -n "default"' && has 'error: unable to drain node "worker13"' &&
    [ $((SECONDS - t0)) -ge 5 ]
check $? "drain with a stuck pod fails after the timeout"
on "$IP1" "$ADMIN kubectl drain worker13 --delete-emptydir-data --timeout=6s"
expect "drain without --ignore-daemonsets refuses DaemonSet pods" \
    fail_has "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
on "$IP1" "$ADMIN kubectl drain worker12 --ignore-daemonsets --delete-emptydir-data --timeout=6s && kubectl get pods -A --field-selector spec.nodeName=worker12 -o name"
ok_has "node/worker12 drained" && has "pod/web-1 evicted" && no_line pod/web-1
check $? "drain without a stuck pod succeeds and evicts it"
on "$IP1" "$ADMIN kubectl get pods -A --field-selector spec.nodeName=worker13 -o json"
ok_has '"kind": "DaemonSet"' && has '"name": "stuck-1"'
check $? "pods of a node as JSON with ownerReferences"
on "$IP1" "$ADMIN kubectl delete node worker12"
expect "delete node" ok_has 'node "worker12" deleted'
on "$IP1" "$ADMIN kubectl delete node worker12"
rc_is 1 && has 'Error from server (NotFound): nodes "worker12" not found'
check $? "delete a missing node: NotFound"
on "$IP1" "$ADMIN kubectl -n kube-system get pods -l component=etcd -o name"
expect "etcd pods by label" test "$OUT" = "pod/etcd-master11"
on "$IP1" "$ADMIN kubectl -n kube-system exec etcd-master11 -- $ETCDCTL member list"
rc_is 0 && [[ $OUT =~ ^[0-9a-f]{16},\ started,\ master11,\ https://$IP1:2380,\ https://$IP1:2379,\ false$ ]]
check $? "etcdctl member list"
on "$IP1" "$ADMIN kubectl -n kube-system exec etcd-master11 -- $ETCDCTL member remove 1234abcd"
expect "etcdctl member remove of an unknown id fails" fail_has "Error: etcdserver: member not found"

# ---------------------------------------------------------------- reset, faults, timing
on "$IP3" 'kubeadm reset -f >/dev/null 2>&1 && find /etc/kubernetes /var/lib/kubelet -type f'
rc_is 0 && [ -z "$OUT" ]
check $? "kubeadm reset -f on a worker empties /etc/kubernetes"
on "$IP1" "$ADMIN kubectl get node worker13"
expect "reset does not delete the Node object (NotReady)" ok_has "NotReady"
"$CTL" set-delay "$KIT" 1.5
"$CTL" fail "$KIT" worker13 "lab kit selftest: injected join failure"
on "$IP3" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "injected failure: join fails with the file's message" fail_has "lab kit selftest: injected join failure"
"$CTL" unfail "$KIT" worker13
on "$IP3" "kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
expect "join after unfail (NotReady node object re-registers)" ok_has "This node has joined the cluster:"
OUT=$("$CTL" state "$KIT")
python3 -c '
import json, sys
t = json.load(sys.stdin)["timing"]["worker13"]
sys.exit(0 if t["joined_at"] - t["join_started"] >= 1.5 and t["join_failed"] > 0 else 1)' <<<"$OUT"
check $? "state records join_started/joined_at; joined_at - join_started >= delay"

# ---------------------------------------------------------------- helm from the kit's tarball
"$HERE/make-helm-tarball.sh" "$TMP" >/dev/null
put "$IP1" /tmp/helm.tgz <"$TMP/helm-v3.99.0-lab-linux-amd64.tar.gz"
on "$IP1" 'cd /tmp && tar -xzf helm.tgz && install -m 0755 linux-amd64/helm /usr/local/bin/helm && helm version --short && helm repo list -o json'
rc_not0 && has "v3.99.0-lab+labkit" && has "Error: no repositories to show"
check $? "helm from the tarball; no repos: error"
on "$IP1" 'helm repo add lab https://charts.example.invalid/lab && helm repo list -o json'
expect "helm repo add + list -o json" ok_has '[{"name":"lab","url":"https://charts.example.invalid/lab"}]'

# ---------------------------------------------------------------- the host is untouched
host_state >"$TMP/host.after"
OUT=$(diff "$TMP/host.before" "$TMP/host.after")
expect "host unchanged: hostname, /usr/bin/kubeadm & co absent, swap, sysctls, modules" test -z "$OUT"

printf '%d passed, %d failed\n' "$PASS" "$FAIL"
[ "$FAIL" -eq 0 ]
