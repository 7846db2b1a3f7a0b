#!/usr/bin/env bash
# helm-selftest.sh - end-to-end self-test of the lab kit's helm WRAPPER with the REAL
# Helm 3 and Helm 4 (tests/labkit/, docs/labkit.md section "Helm").
#
# Fetches the real helm binaries (fetch-helm.sh, cached in target/helm), builds the test
# charts and the chart repository with them (make-chart-repo.sh) and serves the repository
# on the lab bridge (serve-repo.py, on 198.18.NET.1, plus a second copy behind basic auth).
# Brings up a 2-node kit lab (scripts/lab.sh up 2 --kit --name khs --net 62), builds a
# cluster with the kit's kubeadm, then, for Helm 3 and then Helm 4 installed with
# scripts/install_helm.sh in offline mode: repo add/update/search, install of the local
# chart and of the repo chart, status/list/history JSON, upgrade to nginxlab 0.2.0 and
# rollback to 1, a hostile --set value, pods that are re-created after `kubectl delete pod`
# and `kubectl rollout restart` (waited for by `kubectl rollout status`, and its timeout),
# helm's own errors, a stuck pending-install left by a killed --wait install, an injected
# failure with --atomic / --rollback-on-failure, uninstall. Finally checks that nothing
# reached the host. Always tears the lab and the servers down. Needs root and npm.
set -uo pipefail
export LC_ALL=C

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd -- "$HERE/../.." && pwd -P)
LAB=$REPO/scripts/lab.sh
CTL=$HERE/labkit-ctl
NAME=khs
NET=62
DIR=$REPO/target/lab/$NAME
KIT=$DIR/kit
HOST=198.18.$NET.1
IP1=198.18.$NET.11
IP2=198.18.$NET.12
HELMS=${HELM_DIR:-$REPO/target/helm}
ADMIN='export KUBECONFIG=/etc/kubernetes/admin.conf;'

PASS=0 FAIL=0
TMP=$(mktemp -d)
OUT='' RC=0
SRV_PIDS=()

if [ "$(id -u)" != 0 ]; then
    echo "helm-selftest.sh: must run as root (scripts/lab.sh creates namespaces and mounts)" >&2
    exit 2
fi

cleanup() {
    local p
    for p in "${SRV_PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    "$LAB" down --name "$NAME" >/dev/null 2>&1 || true
    rm -rf -- "$TMP"
}
trap cleanup EXIT

# shellcheck source=tests/labkit/selftest-lib.sh
. "$HERE/selftest-lib.sh"
# on_out IP CMD: like on, but OUT is stdout only (stderr goes to ERR)
on_out() {
    local ip=$1
    shift
    OUT=$(ssh -F "$DIR/ssh_config" -n -o BatchMode=yes "root@$ip" "$*" 2>"$TMP/stderr")
    RC=$?
}
has() { [[ $OUT == *"$1"* ]]; }
rc_is() { [ "$RC" -eq "$1" ]; }
ok_has() { rc_is 0 && has "$1"; }
fail_has() { [ "$RC" -ne 0 ] && has "$1"; }
# json PYEXPR: evaluate a Python expression on d = json.loads(OUT); true when it is truthy
json() {
    python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" \
        <<<"$OUT" 2>/dev/null
}

host_state() {
    local f
    hostname
    for f in /usr/local/bin/helm /usr/local/sbin/helm /tmp/pwned /var/lib/labkit /opt/labkit /etc/kubernetes \
        "$HOME/.config/helm/repositories.yaml" /var/tacker; do
        if [ -e "$f" ] || [ -L "$f" ]; then echo "present $f $(stat -c %Y "$f")"; else echo "absent $f"; fi
    done
}
host_state >"$TMP/host.before"

# ---------------------------------------------------------------- real helm, charts, repository
t0=$SECONDS
if ! "$HERE/fetch-helm.sh" "$HELMS" >"$TMP/fetch.log" 2>&1; then
    cat "$TMP/fetch.log" >&2
    echo "helm-selftest.sh: fetch-helm.sh failed" >&2
    exit 1
fi
OUT=$(cat "$TMP/fetch.log")
expect "fetch-helm.sh: helm3 v3.17.3 and helm4 v4.1.4 ($((SECONDS - t0)) s)" \
    test -x "$HELMS/helm3/helm" -a -x "$HELMS/helm4/helm" -a -f "$HELMS/helm3/helm-v3.17.3-linux-amd64.tar.gz" \
    -a -f "$HELMS/helm4/helm-v4.1.4-linux-amd64.tar.gz"
OUT=$("$HERE/make-chart-repo.sh" "$TMP/charts" "$HELMS/helm3/helm" 2>&1)
RC=$?
expect "make-chart-repo.sh: local chart and repo (nginxlab 0.1.0, 0.2.0)" \
    test "$RC" = 0 -a -f "$TMP/charts/local/localhelm-0.1.0.tgz" -a -f "$TMP/charts/repo/index.yaml" \
    -a -f "$TMP/charts/repo/nginxlab-0.2.0.tgz"
cp -a "$TMP/charts/repo" "$TMP/authrepo"

if ! "$LAB" up 2 --kit --name "$NAME" --net "$NET" >"$TMP/up.log" 2>&1; then
    cat "$TMP/up.log" >&2
    echo "helm-selftest.sh: lab.sh up failed" >&2
    exit 1
fi

# serve VAR DIR [user password]: start serve-repo.py on the lab bridge (in this shell, so that
# cleanup can stop it); sets VAR to its URL
serve() {
    local var=$1 dir=$2 log=$TMP/serve.$RANDOM.out url='' _
    if [ $# -eq 4 ]; then
        REPO_USER=$3 REPO_PASSWORD=$4 "$HERE/serve-repo.py" "$dir" "$HOST" 0 "$dir.log" >"$log" 2>&1 &
    else
        "$HERE/serve-repo.py" "$dir" "$HOST" 0 "$dir.log" >"$log" 2>&1 &
    fi
    SRV_PIDS+=($!)
    for _ in $(seq 50); do
        url=$(sed -n 's/^serving .* on //p' "$log")
        [ -n "$url" ] && break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        cat "$log" >&2
        echo "helm-selftest.sh: serve-repo.py did not start" >&2
        exit 1
    fi
    printf -v "$var" '%s' "$url"
}
URL='' AUTH_URL=''
serve URL "$TMP/charts/repo"
serve AUTH_URL "$TMP/authrepo" labuser 's3cret pass'

# ---------------------------------------------------------------- cluster
on "$IP1" "apt-get install -y kubeadm kubelet kubectl >/dev/null && kubeadm init --control-plane-endpoint $IP1:6443 --pod-network-cidr 10.244.0.0/16"
INIT=$OUT
TOKEN=$(grep -oE -- '--token [a-z0-9]{6}\.[a-z0-9]{16}' <<<"$INIT" | tail -n1 | cut -d' ' -f2)
HASH=$(grep -oE 'sha256:[0-9a-f]{64}' <<<"$INIT" | tail -n1)
on "$IP2" "apt-get install -y kubeadm kubelet kubectl >/dev/null && kubeadm join $IP1:6443 --token $TOKEN --discovery-token-ca-cert-hash $HASH"
on "$IP1" "$ADMIN printf '# calico\n' >/tmp/cni.yaml && kubectl apply -f /tmp/cni.yaml >/dev/null && kubectl get nodes --no-headers | grep -c ' Ready '"
expect "kit cluster: master + worker Ready" test "$OUT" = 2

scp -F "$DIR/ssh_config" -q "$TMP/charts/local/localhelm-0.1.0.tgz" "$REPO/scripts/install_helm.sh" "root@$IP1:/root/"

on "$IP1" 'command -v helm; helm version; echo "rc=$?"'
expect "no real helm yet: the kit's wrapper says 'helm: command not found' (127)" \
    has $'/usr/local/sbin/helm\nhelm: command not found\nrc=127'
on "$IP1" "curl -fsS $URL/index.yaml | head -n 3"
expect "a lab node reaches the repository on the bridge ($URL)" ok_has "nginxlab:"

# ---------------------------------------------------------------- per helm version
suite() {
    local v=$1 ver=$2 ns=cnf$1 rb=--atomic rbname=atomic reuse="cannot re-use a name that is still in use"
    if [ "$v" = 4 ]; then rb=--rollback-on-failure rbname=rollback-on-failure reuse="cannot reuse a name that is still in use"; fi
    local H="$ADMIN cd /root &&"
    echo "---- helm $v ($ver)"

    on "$IP1" "mkdir -p /root/off$v"
    scp -F "$DIR/ssh_config" -q "$HELMS/helm$v/helm-$ver-linux-amd64.tar.gz" "$HELMS/helm$v/SHA256SUMS" "root@$IP1:/root/off$v/"
    on "$IP1" "K8S_OFFLINE_DIR=/root/off$v K8S_ALLOW_ANY_OS=1 bash /root/install_helm.sh 2>/dev/null; readlink -f /usr/local/bin/helm; helm version --short"
    expect "helm $v: install_helm.sh (offline) installs the real $ver; the wrapper runs it" \
        ok_has $'/usr/local/bin/helm\n'"$ver+"

    on_out "$IP1" "helm repo add lab $URL >/dev/null && helm repo update >/dev/null && helm search repo lab/nginxlab -l -o json"
    rc_is 0 && json 'sorted(x["version"] for x in d) == ["0.1.0", "0.2.0"]'
    check $? "helm $v: repo add + update + search (real helm over HTTP)"
    on "$IP1" "helm repo add authlab $AUTH_URL 2>&1; echo; printf '%s' 's3cret pass' | helm repo add authlab $AUTH_URL --username labuser --password-stdin"
    has "401" && has '"authlab" has been added to your repositories'
    check $? "helm $v: repo behind basic auth: refused without, added with --password-stdin"

    on "$IP1" "$H helm install lh ./localhelm-0.1.0.tgz -n $ns --create-namespace --set replicaCount=2"
    expect "helm $v: install the local chart" ok_has "STATUS: deployed"
    on "$IP1" "$H helm install web lab/nginxlab --version 0.1.0 -n $ns"
    expect "helm $v: install the repo chart" ok_has "STATUS: deployed"
    on "$IP1" "$H helm install lh ./localhelm-0.1.0.tgz -n $ns"
    expect "helm $v: install again: $reuse" fail_has "Error: INSTALLATION FAILED: $reuse"
    on "$IP1" "$H helm install nsx ./localhelm-0.1.0.tgz -n nowhere"
    expect "helm $v: install into a missing namespace fails" \
        fail_has 'Error: INSTALLATION FAILED: create: failed to create: namespaces "nowhere" not found'

    on_out "$IP1" "$H helm status web -n $ns -o json"
    rc_is 0 && json 'd["name"] == "web" and d["namespace"] == "'"$ns"'" and d["version"] == 1 and d["info"]["status"] == "deployed" and d["info"]["description"] == "Install complete" and d["info"]["first_deployed"] and d["info"]["last_deployed"] and d["info"]["notes"].startswith("1. Get the application URL") and "chart" not in d and "nginxlab-greeting" in d["manifest"] and ("apply_method" in d) == ('"$v"' == 4)'
    check $? "helm $v: status -o json (name, namespace, version, info.*, manifest; no chart)"
    on_out "$IP1" "$H helm list -n $ns -o json"
    rc_is 0 && json 'sorted((x["name"], x["revision"], x["status"], x["chart"], x["app_version"]) for x in d) == [("lh", "1", "deployed", "localhelm-0.1.0", "1.16.0"), ("web", "1", "deployed", "nginxlab-0.1.0", "1.26.0")] and all(set(x) == {"name", "namespace", "revision", "updated", "status", "chart", "app_version"} for x in d)'
    check $? "helm $v: list -o json"
    on_out "$IP1" "$H kubectl get pods -n $ns -l app.kubernetes.io/instance=lh -o json"
    rc_is 0 && json 'len(d["items"]) == 2 and all(p["status"]["phase"] == "Running" and p["metadata"]["name"].startswith("lh-localhelm-") and p["spec"]["nodeName"] != "master11" for p in d["items"])'
    check $? "helm $v: the Deployment's 2 pods run on a worker (kubectl -l app.kubernetes.io/instance=lh)"
    local pod
    pod=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["items"][0]["metadata"]["name"])' <<<"$OUT" 2>/dev/null)
    on_out "$IP1" "$H kubectl delete pod -n $ns $pod >/dev/null && kubectl get pods -n $ns -l app.kubernetes.io/instance=lh -o json"
    rc_is 0 && json 'len(d["items"]) == 2 and "'"$pod"'" not in [p["metadata"]["name"] for p in d["items"]]'
    check $? "helm $v: kubectl delete pod: a new pod with a new name replaces it"
    local uids
    uids=$(python3 -c 'import json,sys; print(" ".join(p["metadata"]["uid"] for p in json.loads(sys.stdin.read())["items"]))' <<<"$OUT" 2>/dev/null)
    "$CTL" set-helm-delay "$KIT" 1
    on "$IP1" "$H kubectl rollout restart deployment/lh-localhelm -n $ns && kubectl rollout status deployment/lh-localhelm -n $ns --timeout=30s"
    ok_has 'deployment.apps/lh-localhelm restarted' && has 'Waiting for deployment "lh-localhelm" rollout to finish: 0 of 2 updated replicas are available...' &&
        has 'deployment "lh-localhelm" successfully rolled out'
    check $? "helm $v: kubectl rollout restart, then rollout status waits until the new pods are Ready"
    on_out "$IP1" "$H kubectl get pods -n $ns -l app.kubernetes.io/instance=lh -o json"
    rc_is 0 && json 'len(d["items"]) == 2 and not set(p["metadata"]["uid"] for p in d["items"]) & set("'"$uids"'".split()) and all(c["status"] == "True" for p in d["items"] for c in p["status"]["conditions"] if c["type"] == "Ready")'
    check $? "helm $v: rollout restart re-created both pods (new uids), all Ready"
    "$CTL" set-helm-delay "$KIT" 3600
    on "$IP1" "$H kubectl rollout restart deployment/lh-localhelm -n $ns >/dev/null && kubectl rollout status deployment/lh-localhelm -n $ns --timeout=1s"
    "$CTL" set-helm-delay "$KIT" 0
    expect "helm $v: rollout status past --timeout: kubectl's error, exit 1" rc_is 1
    expect "helm $v: ... with kubectl's words" has 'error: timed out waiting for the condition'
    on "$IP1" "$H kubectl rollout restart deployment/lh-localhelm -n $ns >/dev/null && kubectl rollout status deployment/lh-localhelm -n $ns --timeout=30s"
    expect "helm $v: a new restart brings the pods back" ok_has 'successfully rolled out'
    on "$IP1" "$H kubectl rollout status deployment/nope -n $ns"
    expect "helm $v: rollout status of an absent Deployment: NotFound" has 'Error from server (NotFound): deployments.apps "nope" not found'

    on "$IP1" "$H helm upgrade web lab/nginxlab --version 0.2.0 -n $ns && helm get manifest web -n $ns | grep 'greeting:'"
    ok_has 'Release "web" has been upgraded. Happy Helming!' && has 'greeting: "hello from 0.2.0"'
    check $? "helm $v: upgrade to nginxlab 0.2.0 (greeting changes)"
    on "$IP1" "$H helm rollback web 1 -n $ns && helm get manifest web -n $ns | grep 'greeting:' && $ADMIN kubectl get configmap web-nginxlab-greeting -n $ns -o jsonpath='{.data.greeting}'"
    expect "helm $v: rollback to 1: the manifest and the ConfigMap are 0.1.0's again" \
        ok_has $'Rollback was a success! Happy Helming!\n  greeting: "hello from 0.1.0"\nhello from 0.1.0'
    on_out "$IP1" "$H helm history web -n $ns -o json"
    rc_is 0 && json '[(x["revision"], x["status"], x["chart"], x["description"]) for x in d] == [(1, "superseded", "nginxlab-0.1.0", "Install complete"), (2, "superseded", "nginxlab-0.2.0", "Upgrade complete"), (3, "deployed", "nginxlab-0.1.0", "Rollback to 1")] and all(set(x) == {"revision", "updated", "status", "chart", "app_version", "description"} for x in d)'
    check $? "helm $v: history -o json after upgrade + rollback"

    on_out "$IP1" "$H helm install evil lab/nginxlab --version 0.1.0 -n $ns --set 'a=b; touch /tmp/pwned' >/dev/null && helm get values evil -n $ns -o json; ls /tmp/pwned 2>&1"
    [[ $OUT == $'{"a":"b; touch /tmp/pwned"}\nls: cannot access \'/tmp/pwned\': No such file or directory' ]]
    check $? "helm $v: a hostile --set stays one literal value; nothing ran"
    on_out "$IP1" "$H helm get values lh -n $ns && helm get values web -n $ns -a -o json"
    [[ $OUT == $'USER-SUPPLIED VALUES:\nreplicaCount: 2\n{'* ]] && [[ $OUT == *'"greeting":"hello from 0.1.0"'* ]]
    check $? "helm $v: get values (user-supplied) and --all (computed)"

    on "$IP1" "$H helm status nosuch -n $ns; helm uninstall nosuch -n $ns; helm install x ./localhelm-0.1.0.tgz -n $ns --bogus; helm list --kubeconfig /nonexistent"
    has "Error: release: not found" && has "Error: uninstall: Release not loaded: nosuch: release: not found" &&
        has "Error: unknown flag: --bogus" && has "luster unreachable"
    check $? "helm $v: helm's own errors (not found, unknown flag, unreachable)"
    if [ "$v" = 3 ]; then
        on "$IP1" "$H helm install x ./localhelm-0.1.0.tgz -n $ns --rollback-on-failure"
        expect "helm 3: --rollback-on-failure is an unknown flag" fail_has "Error: unknown flag: --rollback-on-failure"
    else
        on "$IP1" "$H helm install x4 ./localhelm-0.1.0.tgz -n $ns --atomic >/dev/null; helm uninstall x4 -n $ns"
        expect "helm 4: --atomic works with helm 4's deprecation warning" \
            ok_has $'Flag --atomic has been deprecated, use --rollback-on-failure instead\nrelease "x4" uninstalled'
    fi

    # a killed --wait install leaves a stuck pending-install release
    "$CTL" set-helm-delay "$KIT" 30
    on "$IP1" "$H (setsid helm install stuck ./localhelm-0.1.0.tgz -n $ns --wait --timeout 60s >/tmp/stuck.log 2>&1 & echo \$! >/tmp/stuck.pid); sleep 2; helm status stuck -n $ns | grep STATUS; kill -9 -\$(cat /tmp/stuck.pid); sleep 0.5; helm list -n $ns --pending -q; helm upgrade stuck ./localhelm-0.1.0.tgz -n $ns"
    has "STATUS: pending-install" && has $'\nstuck\n' &&
        has "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress"
    check $? "helm $v: a killed --wait install stays pending-install; upgrade: another operation is in progress"
    "$CTL" set-helm-delay "$KIT" 1.5
    on "$IP1" "$H time -p helm install slow ./localhelm-0.1.0.tgz -n $ns --wait --timeout 10s | grep STATUS"
    rc_is 0 && has "STATUS: deployed" && awk '/^real /{exit !($2 >= 1.4)}' <<<"$OUT"
    check $? "helm $v: --wait waits for the rollout (helm_install_delay_s 1.5)"
    on "$IP1" "$H helm install late ./localhelm-0.1.0.tgz -n $ns --wait --timeout 1s; echo rc=\$?; helm history late -n $ns -o json"
    has "Error: INSTALLATION FAILED: " && has "context deadline exceeded" && has "rc=1" && has '"status":"failed"'
    check $? "helm $v: --wait --timeout shorter than the rollout: failed release"
    "$CTL" set-helm-delay "$KIT" 0

    "$CTL" helm-fail "$KIT" web "lab kit selftest: image pull failed"
    on "$IP1" "$H helm upgrade web lab/nginxlab --version 0.2.0 -n $ns $rb; echo rc=\$?; helm history web -n $ns -o json"
    "$CTL" helm-unfail "$KIT" web
    has "rc=1" && has "Error: UPGRADE FAILED: release web failed, and has been rolled back due to $rbname being set: lab kit selftest: image pull failed" &&
        has '"revision":4,"updated":' && has '"status":"failed","chart":"nginxlab-0.2.0"' && has '"revision":5' &&
        has '"description":"Rollback to 3"'
    check $? "helm $v: injected failure + $rb: failed revision, then rolled back"
    "$CTL" helm-fail "$KIT" doomed
    on "$IP1" "$H helm install doomed ./localhelm-0.1.0.tgz -n $ns $rb; echo rc=\$?; helm status doomed -n $ns"
    "$CTL" helm-unfail "$KIT" doomed
    has "rc=1" && has "Error: INSTALLATION FAILED: release doomed failed, and has been uninstalled due to $rbname being set: lab kit: injected failure of release doomed" &&
        has "Error: release: not found"
    check $? "helm $v: injected install failure + $rb: uninstalled"

    on "$IP1" "$H helm uninstall lh web evil stuck slow late -n $ns && helm list -n $ns -o json"
    ok_has $'release "lh" uninstalled\nrelease "web" uninstalled\nrelease "evil" uninstalled\nrelease "stuck" uninstalled\nrelease "slow" uninstalled\nrelease "late" uninstalled\n[]'
    check $? "helm $v: uninstall: releases, pods and release secrets are gone"
    on "$IP1" "$ADMIN kubectl get pods -n $ns -o name | wc -l; kubectl get secrets -n $ns -o name | wc -l"
    expect "helm $v: no pods or release secrets left in $ns" test "$OUT" = $'0\n0'
    on "$IP1" "helm repo remove lab authlab >/dev/null; rm -rf /root/.cache/helm"
}

suite 3 v3.17.3
suite 4 v4.1.4

OUT=$(cat "$TMP/authrepo.log")
grep -qP '\tGET\t/index.yaml\t401\t-$' <<<"$OUT" && grep -qP '\tGET\t/index.yaml\t200\tlabuser$' <<<"$OUT" &&
    ! grep -q 's3cret' <<<"$OUT"
check $? "the repository with basic auth logged a 401 without and a 200 with credentials (no password logged)"

# ---------------------------------------------------------------- the host is untouched
host_state >"$TMP/host.after"
OUT=$(diff "$TMP/host.before" "$TMP/host.after")
expect "host unchanged: no /tmp/pwned, no helm, no kit state, no repositories.yaml" test -z "$OUT"

printf '%d passed, %d failed\n' "$PASS" "$FAIL"
[ "$FAIL" -eq 0 ]
