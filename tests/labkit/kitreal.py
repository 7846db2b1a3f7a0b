#!/usr/bin/python3
# kitreal.py - LAB KIT real-API mode. Part of the mgmt-driver lab kit (tests/labkit/, see
# docs/labkit.md, "Real-API mode"). Not part of any real tool.
#
# When the lab was brought up with `scripts/lab.sh up N --kit --control-plane BINDIR`, the
# kit's kubeadm stand-in does not simulate the cluster: it runs the REAL etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler (BINDIR, seen at /opt/control-plane in the nodes)
# as daemons in the master node's own namespaces, with kubeadm's file layout, and it does on
# the real API what kubeadm's phases do (bootstrap token, cluster-info, node bootstrap RBAC,
# kubeadm-certs). A worker joins through the real bootstrap-token discovery and CSR flow; a master
# joins with a real etcd member and its own API server (HA). The Node objects are written by
# the kit's kubelet stand-in with the node's own credentials.
# kubeadm itself, the kubelet, containerd, apt-get and systemctl stay stand-ins.
"""Lab kit: the real-API mode of the kubeadm and kubelet stand-ins."""

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import kitcluster as kc
import kitformat as kf
import kitstate as ks

CP_FILE = os.path.join(ks.KIT_DIR, "control-plane")
K8S = "/etc/kubernetes"
PKI = K8S + "/pki"
ADMIN_CONF = K8S + "/admin.conf"
SUPER_CONF = K8S + "/super-admin.conf"
KUBELET_CONF = K8S + "/kubelet.conf"
BOOTSTRAP_CONF = K8S + "/bootstrap-kubelet.conf"
KUBELET_PEM = "/var/lib/kubelet/pki/kubelet-client-current.pem"
ETCD_DATA = "/var/lib/etcd"
RUN_DIR = "/run/labkit"
LOG_DIR = "/var/log/labkit"
DAEMONS = ("kwok", "labkit-kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"
READY_TIMEOUT_S = 180


class RealError(Exception):
    """A step against the real control plane failed (the message says which, and why)."""


# ---------------------------------------------------------------- mode and binaries
def bindir():
    """The control-plane binaries' directory in this node, or None (kit-only mode)."""
    try:
        with open(CP_FILE, encoding="utf-8") as f:
            d = f.read().strip()
    except OSError:
        return None
    return d or None


def enabled():
    return bindir() is not None


def binary(name):
    return os.path.join(bindir() or "/nonexistent", name)


def version():
    """The control plane's Kubernetes version (VERSIONS of build-control-plane.sh)."""
    try:
        with open(binary("VERSIONS"), encoding="utf-8") as f:
            m = re.search(r"^kubernetes (v\d+\.\d+\.\d+)", f.read(), re.M)
            if m:
                return m.group(1)
    except OSError:
        pass
    return "v1.37.2"


def have_kwok():
    return os.access(binary("kwok"), os.X_OK)


# ---------------------------------------------------------------- kubectl
def kubectl(args, conf=ADMIN_CONF, stdin=None, check=True, timeout=60):
    """The REAL kubectl; returns stdout (raises RealError with its stderr when check)."""
    cmd = [binary("kubectl")] + (["--kubeconfig", conf] if conf else []) + list(args)
    try:
        res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RealError("kubectl %s: timed out after %ss" % (" ".join(args[:3]), timeout)) from e
    if check and res.returncode != 0:
        raise RealError("kubectl %s: %s" % (" ".join(args[:3]), res.stderr.strip()))
    return res.stdout if check else res


def apply(objs, conf=ADMIN_CONF):
    kubectl(["apply", "-f", "-"], conf, stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def wait_for(what, fn, timeout):
    end = time.time() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except RealError as e:
            last = e
        if time.time() > end:
            raise RealError("timed out after %ds waiting for %s%s" % (timeout, what, ": %s" % last if last else ""))
        time.sleep(0.5)


# ---------------------------------------------------------------- certificates (openssl)
def _ossl(args, stdin=None):
    res = subprocess.run(["openssl"] + args, input=stdin, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RealError("openssl %s failed: %s" % (args[0], res.stderr.strip()))
    return res.stdout


def make_ca(prefix, cn):
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    _ossl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", prefix + ".key",
           "-out", prefix + ".crt", "-days", "3650", "-subj", "/CN=" + cn,
           "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"])
    os.chmod(prefix + ".key", 0o600)


def make_cert(ca, prefix, subj, eku, sans=None):
    """A leaf (RSA 2048, as kubeadm's) signed by CA prefix `ca`."""
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", prefix + ".key",
            "-out", prefix + ".crt", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-days", "365",
            "-subj", subj, "-addext", "basicConstraints=critical,CA:FALSE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
            "-addext", "extendedKeyUsage=" + eku]
    if sans:
        args += ["-addext", "subjectAltName=" + ",".join(sans)]
    _ossl(args)
    os.chmod(prefix + ".key", 0o600)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def first_service_ip(cidr):
    return str(next(ipaddress.ip_network(cidr, strict=False).hosts()))


def ep_host(endpoint):
    return endpoint.rsplit(":", 1)[0].strip("[]")


def ip_or_dns(host):
    try:
        ipaddress.ip_address(host)
        return "IP:" + host
    except ValueError:
        return "DNS:" + host


def make_pki(name, ip, endpoint, svc_cidr):
    """kubeadm's /etc/kubernetes/pki for the first master: CAs, serving and client certificates."""
    os.makedirs(PKI + "/etcd", exist_ok=True)
    make_ca(PKI + "/ca", "kubernetes")
    make_ca(PKI + "/front-proxy-ca", "front-proxy-ca")
    make_ca(PKI + "/etcd/ca", "etcd-ca")
    _ossl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", PKI + "/sa.key"])
    os.chmod(PKI + "/sa.key", 0o600)
    _ossl(["pkey", "-in", PKI + "/sa.key", "-pubout", "-out", PKI + "/sa.pub"])
    make_node_certs(name, ip, endpoint, svc_cidr)


def make_node_certs(name, ip, endpoint, svc_cidr):
    """The certificates each master makes for itself from the shared CAs (kubeadm's join does the
    same after download-certs)."""
    sans = ["DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local", "DNS:" + name, "DNS:localhost",
            "IP:" + first_service_ip(svc_cidr), "IP:" + ip, "IP:127.0.0.1", ip_or_dns(ep_host(endpoint))]
    make_cert(PKI + "/ca", PKI + "/apiserver", "/CN=kube-apiserver", "serverAuth", list(dict.fromkeys(sans)))
    make_cert(PKI + "/ca", PKI + "/apiserver-kubelet-client",
              "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client", "clientAuth")
    make_cert(PKI + "/front-proxy-ca", PKI + "/front-proxy-client", "/CN=front-proxy-client", "clientAuth")
    esans = ["DNS:" + name, "DNS:localhost", "IP:" + ip, "IP:127.0.0.1", "IP:0:0:0:0:0:0:0:1"]
    make_cert(PKI + "/etcd/ca", PKI + "/etcd/server", "/CN=" + name, "serverAuth,clientAuth", esans)
    make_cert(PKI + "/etcd/ca", PKI + "/etcd/peer", "/CN=" + name, "serverAuth,clientAuth", esans)
    make_cert(PKI + "/etcd/ca", PKI + "/etcd/healthcheck-client", "/CN=kube-etcd-healthcheck-client", "clientAuth")
    make_cert(PKI + "/etcd/ca", PKI + "/apiserver-etcd-client", "/CN=kube-apiserver-etcd-client", "clientAuth")


def ca_hash():
    return kc.ca_hash(read(PKI + "/ca.crt"))


def client_kubeconfig(path, server, subj, user):
    """A kubeconfig with an embedded client certificate signed by the cluster CA."""
    d = tempfile.mkdtemp(prefix="labkit-")
    try:
        make_cert(PKI + "/ca", d + "/c", subj, "clientAuth")
        kc.write_file(path, kc.kubeconfig(server, read(PKI + "/ca.crt"), user, cert_pem=read(d + "/c.crt"),
                                          key_pem=read(d + "/c.key")), 0o600)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def write_kubeconfigs(name, ip, endpoint, joining=False):
    """admin.conf (and, on init, super-admin.conf and the kubelet's), controller-manager.conf and
    scheduler.conf (these two talk to this master's own API server, as kubeadm's do)."""
    local = "https://%s:6443" % ip
    client_kubeconfig(ADMIN_CONF, "https://" + endpoint, "/O=kubeadm:cluster-admins/CN=kubernetes-admin",
                      "kubernetes-admin")
    client_kubeconfig(K8S + "/controller-manager.conf", local, "/CN=system:kube-controller-manager",
                      "system:kube-controller-manager")
    client_kubeconfig(K8S + "/scheduler.conf", local, "/CN=system:kube-scheduler", "system:kube-scheduler")
    if joining:  # kubeadm join writes no super-admin.conf; the kubelet bootstraps through a CSR
        return
    client_kubeconfig(SUPER_CONF, "https://" + endpoint, "/O=system:masters/CN=kubernetes-super-admin",
                      "kubernetes-super-admin")
    # The kubelet's client certificate of a master is signed directly, as kubeadm init does.
    d = tempfile.mkdtemp(prefix="labkit-")
    try:
        make_cert(PKI + "/ca", d + "/k", "/O=system:nodes/CN=system:node:" + name, "clientAuth")
        kc.write_file(KUBELET_PEM, read(d + "/k.crt") + read(d + "/k.key"), 0o600)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    write_kubelet_conf(name, "https://" + endpoint)


def write_kubelet_conf(name, server):
    kc.write_file(KUBELET_CONF, kc.kubeconfig(server, read(PKI + "/ca.crt"), "system:node:" + name,
                                              cert_file=KUBELET_PEM, key_file=KUBELET_PEM), 0o600)
    kc.write_file("/var/lib/kubelet/config.yaml",
                  "# lab kit stand-in (real-API mode): the kubelet does not run, see docs/labkit.md\n"
                  "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                  "cgroupDriver: systemd\nclusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\n")


# ---------------------------------------------------------------- daemons
def pid_of(name):
    try:
        pid = int(read("%s/%s.pid" % (RUN_DIR, name)).strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except OSError:
        return None
    return pid


def launch(name, argv):
    """Start argv as a daemon that outlives the ssh session: its own session, stdin /dev/null,
    output to /var/log/labkit/NAME.log, pid in /run/labkit/NAME.pid."""
    os.makedirs(RUN_DIR, exist_ok=True)
    os.makedirs(LOG_DIR, exist_ok=True)
    if pid_of(name):
        raise RealError("%s is already running (pid %s)" % (name, pid_of(name)))
    with open("%s/%s.log" % (LOG_DIR, name), "ab") as log:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True, cwd="/")
    with open("%s/%s.pid" % (RUN_DIR, name), "w", encoding="utf-8") as f:
        f.write("%d\n" % p.pid)
    return p.pid


def alive_or_raise(names):
    for n in names:
        if not pid_of(n):
            tail = ""
            try:
                tail = "\n".join(read("%s/%s.log" % (LOG_DIR, n)).splitlines()[-8:])
            except OSError:
                pass
            raise RealError("%s exited (log %s/%s.log):\n%s" % (n, LOG_DIR, n, tail))


def stop(name):
    pid = pid_of(name)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        for _ in range(100):
            if not pid_of(name):
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    try:
        os.unlink("%s/%s.pid" % (RUN_DIR, name))
    except OSError:
        pass


def stop_all():
    for n in DAEMONS:
        stop(n)


# ---------------------------------------------------------------- haproxy's data path (stand-in)
LB = "labkit-lb"


def lb_start(cfg, restart=False):
    """The kit's TCP forwarder (tests/labkit/labkit-lb) for haproxy.cfg's frontend: started with the
    haproxy unit in real-API mode, so that the VIP's load-balancer port reaches the API servers."""
    if restart:
        stop(LB)
    if pid_of(LB):
        return None
    launch(LB, ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.realpath(__file__)), LB), cfg])
    time.sleep(0.3)
    if not pid_of(LB):
        try:
            return "\n".join(read("%s/%s.log" % (LOG_DIR, LB)).splitlines()[-3:])
        except OSError:
            return "labkit-lb exited"
    return None


def etcd_argv(name, ip, initial_cluster, state):
    return [binary("etcd"), "--name=" + name, "--data-dir=" + ETCD_DATA,
            "--listen-client-urls=https://127.0.0.1:2379,https://%s:2379" % ip,
            "--advertise-client-urls=https://%s:2379" % ip,
            "--listen-peer-urls=https://%s:2380" % ip, "--initial-advertise-peer-urls=https://%s:2380" % ip,
            "--initial-cluster=" + initial_cluster, "--initial-cluster-state=" + state,
            "--listen-metrics-urls=http://127.0.0.1:2381",
            "--cert-file=%s/etcd/server.crt" % PKI, "--key-file=%s/etcd/server.key" % PKI,
            "--client-cert-auth=true", "--trusted-ca-file=%s/etcd/ca.crt" % PKI,
            "--peer-cert-file=%s/etcd/peer.crt" % PKI, "--peer-key-file=%s/etcd/peer.key" % PKI,
            "--peer-client-cert-auth=true", "--peer-trusted-ca-file=%s/etcd/ca.crt" % PKI,
            "--snapshot-count=10000"]


def etcdctl(args, endpoint="https://127.0.0.1:2379", check=True):
    cmd = [binary("etcdctl"), "--endpoints=" + endpoint, "--cacert=%s/etcd/ca.crt" % PKI,
           "--cert=%s/etcd/healthcheck-client.crt" % PKI, "--key=%s/etcd/healthcheck-client.key" % PKI,
           "--dial-timeout=5s", "--command-timeout=10s"] + args
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise RealError("etcdctl %s: %s" % (" ".join(args), res.stderr.strip()))
    return res.stdout


def apiserver_argv(ip, svc_cidr):
    return [binary("kube-apiserver"), "--advertise-address=" + ip, "--secure-port=6443",
            "--allow-privileged=true", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--client-ca-file=%s/ca.crt" % PKI,
            "--enable-bootstrap-token-auth=true", "--etcd-servers=https://127.0.0.1:2379",
            "--etcd-cafile=%s/etcd/ca.crt" % PKI, "--etcd-certfile=%s/apiserver-etcd-client.crt" % PKI,
            "--etcd-keyfile=%s/apiserver-etcd-client.key" % PKI,
            "--kubelet-client-certificate=%s/apiserver-kubelet-client.crt" % PKI,
            "--kubelet-client-key=%s/apiserver-kubelet-client.key" % PKI,
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--proxy-client-cert-file=%s/front-proxy-client.crt" % PKI,
            "--proxy-client-key-file=%s/front-proxy-client.key" % PKI,
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-client-ca-file=%s/front-proxy-ca.crt" % PKI,
            "--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file=%s/sa.pub" % PKI, "--service-account-signing-key-file=%s/sa.key" % PKI,
            "--service-cluster-ip-range=" + svc_cidr, "--tls-cert-file=%s/apiserver.crt" % PKI,
            "--tls-private-key-file=%s/apiserver.key" % PKI, "--cert-dir=/var/lib/labkit-node/apiserver-certs"]


def kcm_argv(pod_cidr, svc_cidr):
    conf = K8S + "/controller-manager.conf"
    a = [binary("kube-controller-manager"), "--kubeconfig=" + conf, "--authentication-kubeconfig=" + conf,
         "--authorization-kubeconfig=" + conf, "--bind-address=127.0.0.1", "--client-ca-file=%s/ca.crt" % PKI,
         "--cluster-name=kubernetes", "--cluster-signing-cert-file=%s/ca.crt" % PKI,
         "--cluster-signing-key-file=%s/ca.key" % PKI, "--controllers=*,bootstrapsigner,tokencleaner",
         "--leader-elect=true", "--requestheader-client-ca-file=%s/front-proxy-ca.crt" % PKI,
         "--root-ca-file=%s/ca.crt" % PKI, "--service-account-private-key-file=%s/sa.key" % PKI,
         "--service-cluster-ip-range=" + svc_cidr, "--use-service-account-credentials=true",
         "--cert-dir=/var/lib/labkit-node/kcm-certs"]
    if pod_cidr:
        a += ["--allocate-node-cidrs=true", "--cluster-cidr=" + pod_cidr]
    return a


def scheduler_argv():
    conf = K8S + "/scheduler.conf"
    return [binary("kube-scheduler"), "--kubeconfig=" + conf, "--authentication-kubeconfig=" + conf,
            "--authorization-kubeconfig=" + conf, "--bind-address=127.0.0.1", "--leader-elect=true",
            "--cert-dir=/var/lib/labkit-node/scheduler-certs"]


def start_etcd(name, ip, initial_cluster, state):
    os.makedirs(ETCD_DATA, mode=0o700, exist_ok=True)
    launch("etcd", etcd_argv(name, ip, initial_cluster, state))


def wait_etcd_healthy():
    wait_for("etcd to be healthy", lambda: (alive_or_raise(["etcd"]), etcdctl(["endpoint", "health"]))[1],
             READY_TIMEOUT_S)


def start_control_plane(name, ip, pod_cidr, svc_cidr, initial_cluster, state):
    """etcd, then the API server (waits for /readyz), then the controller manager and scheduler."""
    start_etcd(name, ip, initial_cluster, state)
    wait_etcd_healthy()
    return start_api_and_controllers(ip, pod_cidr, svc_cidr, SUPER_CONF)


def start_api_and_controllers(ip, pod_cidr, svc_cidr, conf):
    """The API server on the local etcd member (waits for its /readyz), then the controller manager
    and the scheduler, both with leader election (one of each acts in an HA cluster)."""
    launch("kube-apiserver", apiserver_argv(ip, svc_cidr))
    local = "https://%s:6443" % ip

    def ready():
        alive_or_raise(["etcd", "kube-apiserver"])
        return kubectl(["--server", local, "get", "--raw", "/readyz"], conf, timeout=15).strip() == "ok"
    t0 = time.time()
    wait_for("the API server's /readyz", ready, READY_TIMEOUT_S)
    launch("kube-controller-manager", kcm_argv(pod_cidr, svc_cidr))
    launch("kube-scheduler", scheduler_argv())
    return time.time() - t0


def start_kwok():
    """KWOK, when the bin dir has it (one per cluster, on the first master): it keeps the nodes
    and pods going as kubelets would. Without it, the kit's kubelet agent does the nodes' part."""
    if not have_kwok():
        return False
    argv = [binary("kwok"), "--kubeconfig=" + ADMIN_CONF, "--manage-all-nodes=true"]
    stages = binary("kwok-stages.yaml")
    if os.path.exists(stages):
        argv.append("--config=" + stages)
    launch("kwok", argv)
    return True


# ---------------------------------------------------------------- what kubeadm's phases put on the API
def meta(name, ns=None, **extra):
    m = {"name": name}
    if ns:
        m["namespace"] = ns
    m.update(extra)
    return m


def crb(name, role, kind, subject):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}]}


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def token_secret(token, ttl_s, description, usages=("authentication", "signing"), groups=(NODE_GROUP,)):
    tid, tsec = token.split(".")
    data = {"token-id": tid, "token-secret": tsec, "description": description}
    if ttl_s:
        data["expiration"] = rfc3339(time.time() + ttl_s)
    for u in usages:
        data["usage-bootstrap-" + u] = "true"
    if groups:
        data["auth-extra-groups"] = ",".join(groups)
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": meta("bootstrap-token-" + tid, "kube-system"), "stringData": data}


def cluster_info_kubeconfig(endpoint):
    return ("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: %s\n    server: https://%s\n"
            "  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {}\nusers: null\n"
            % (kc.b64(read(PKI + "/ca.crt")), endpoint))


def bootstrap_objects(endpoint, token, ttl_s, name, pod_cidr, svc_cidr):
    v = version()
    cluster_cfg = ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: kubernetes\n"
                   "controlPlaneEndpoint: %s\nkubernetesVersion: %s\nnetworking:\n  dnsDomain: cluster.local\n"
                   "  podSubnet: %s\n  serviceSubnet: %s\ncertificatesDir: %s\netcd:\n  local:\n    dataDir: %s\n"
                   % (endpoint, v, pod_cidr or "\"\"", svc_cidr, PKI, ETCD_DATA))
    role_get_cm = lambda rname, cm, ns="kube-system": {  # noqa: E731
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(rname, ns),
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [cm], "verbs": ["get"]}]}

    def rb(rname, ns, subjects):
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(rname, ns),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": rname},
                "subjects": subjects}
    grp = lambda g: {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}  # noqa: E731
    return [
        token_secret(token, ttl_s, "The default bootstrap token generated by 'kubeadm init'."),
        crb("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "Group", NODE_GROUP),
        crb("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "Group", NODE_GROUP),
        crb("kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "Group", "system:nodes"),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta("kubeadm:get-nodes"),
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]},
        crb("kubeadm:get-nodes", "kubeadm:get-nodes", "Group", NODE_GROUP),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cluster-info", "kube-public"),
         "data": {"kubeconfig": cluster_info_kubeconfig(endpoint)}},
        role_get_cm("kubeadm:bootstrap-signer-clusterinfo", "cluster-info", "kube-public"),
        rb("kubeadm:bootstrap-signer-clusterinfo", "kube-public",
           [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kubeadm-config", "kube-system"),
         "data": {"ClusterConfiguration": cluster_cfg}},
        role_get_cm("kubeadm:nodes-kubeadm-config", "kubeadm-config"),
        rb("kubeadm:nodes-kubeadm-config", "kube-system", [grp(NODE_GROUP), grp("system:nodes")]),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kubelet-config", "kube-system"),
         "data": {"kubelet": read("/var/lib/kubelet/config.yaml")}},
        role_get_cm("kubeadm:kubelet-config", "kubelet-config"),
        rb("kubeadm:kubelet-config", "kube-system", [grp(NODE_GROUP), grp("system:nodes")]),
    ]


def mark_control_plane(name):
    kubectl(["label", "node", name, "--overwrite", "node-role.kubernetes.io/control-plane=",
             "node.kubernetes.io/exclude-from-external-load-balancers="])
    kubectl(["taint", "node", name, "--overwrite", "node-role.kubernetes.io/control-plane:NoSchedule"])


# ---------------------------------------------------------------- upload-certs (kubeadm-certs)
CERT_FILES = ["ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt", "front-proxy-ca.key",
              "etcd/ca.crt", "etcd/ca.key"]


def _keystream_xor(key, nonce, data):
    """AES is not in Python's stdlib: openssl's aes-256-ctr does the encryption."""
    res = subprocess.run(["openssl", "enc", "-aes-256-ctr", "-nosalt", "-K", key.hex(), "-iv", nonce.hex()],
                         input=data, capture_output=True, check=False)
    if res.returncode != 0:
        raise RealError("openssl enc failed: %s" % res.stderr.decode(errors="replace").strip())
    return res.stdout


def seal(key_hex, data):
    """AES-256-CTR + HMAC-SHA256 with the certificate key (kubeadm uses AES-256-GCM; see
    docs/labkit.md): nonce || ciphertext || tag."""
    key = bytes.fromhex(key_hex)
    nonce = os.urandom(16)
    ct = _keystream_xor(key, nonce, data)
    return nonce + ct + hmac.new(key, nonce + ct, hashlib.sha256).digest()


def unseal(key_hex, blob):
    key = bytes.fromhex(key_hex)
    nonce, ct, tag = blob[:16], blob[16:-32], blob[-32:]
    if not hmac.compare_digest(tag, hmac.new(key, nonce + ct, hashlib.sha256).digest()):
        raise RealError("error decrypting certificate: cipher: message authentication failed")
    return _keystream_xor(key, nonce, ct)


def upload_certs(key_hex, conf=ADMIN_CONF):
    """The kubeadm-certs Secret, owned by a 2 h bootstrap token so that the garbage collector removes
    it when the token controller removes the expired token (as kubeadm does)."""
    tok = ks.bootstrap_token()
    ts = token_secret(tok, 7200, "Proxy for managing TTL for the kubeadm-certs secret", usages=(), groups=())
    apply([ts], conf)
    uid = kubectl(["-n", "kube-system", "get", "secret", ts["metadata"]["name"], "-o",
                   "jsonpath={.metadata.uid}"], conf).strip()
    data = {}
    for f in CERT_FILES:
        with open(os.path.join(PKI, f), "rb") as fh:
            data[f.replace("/", "-")] = base64.b64encode(seal(key_hex, fh.read())).decode()
    owner = {"apiVersion": "v1", "kind": "Secret", "name": ts["metadata"]["name"], "uid": uid,
             "blockOwnerDeletion": True, "controller": True}
    sec = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": meta("kubeadm-certs", "kube-system", ownerReferences=[owner]), "data": data}
    kubectl(["-n", "kube-system", "delete", "secret", "kubeadm-certs", "--ignore-not-found"], conf)
    # As kubeadm's upload-certs phase: a joining control plane reads the Secret with its bootstrap token.
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta("kubeadm:kubeadm-certs", "kube-system"),
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kubeadm-certs"],
                       "verbs": ["get"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": meta("kubeadm:kubeadm-certs", "kube-system"),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubeadm:kubeadm-certs"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NODE_GROUP}]}
    apply([sec, role, binding], conf)


def download_certs(key_hex, conf):
    try:
        sec = json.loads(kubectl(["-n", "kube-system", "get", "secret", "kubeadm-certs", "-o", "json"], conf))
    except RealError as e:
        raise RealError('error downloading the secret: Secret "kubeadm-certs" was not found in the "kube-system" '
                        'Namespace. This Secret might have expired. Please, run `kubeadm init phase upload-certs '
                        '--upload-certs` on a control plane to generate a new one (%s)' % e) from e
    for f in CERT_FILES:
        blob = base64.b64decode((sec.get("data") or {}).get(f.replace("/", "-"), ""))
        kc.write_file(os.path.join(PKI, f), unseal(key_hex, blob).decode(), 0o600 if f.endswith(".key") else 0o644)


# ---------------------------------------------------------------- init
def init(name, ip, endpoint, pod_cidr, svc_cidr, token, ttl_s, cert_key, say):
    """Everything kubeadm init does, for real. Returns {'endpoint', 'ca_hash'}."""
    make_pki(name, ip, endpoint, svc_cidr)
    write_kubeconfigs(name, ip, endpoint)
    say("[etcd] Starting etcd (lab kit: the real etcd %s as a daemon, log %s/etcd.log)" % (binary("etcd"), LOG_DIR))
    took = start_control_plane(name, ip, pod_cidr, svc_cidr, "%s=https://%s:2380" % (name, ip), "new")
    say("[api-check] The API server is healthy after %.3fs" % took)
    # kubeadm 1.29+: admin.conf's group is bound to cluster-admin by the super-admin.
    apply([crb("kubeadm:cluster-admins", "cluster-admin", "Group", "kubeadm:cluster-admins")], SUPER_CONF)
    wait_for("admin.conf to be authorized", lambda: kubectl(["auth", "can-i", "*", "*"], check=False).returncode == 0,
             60)
    apply(bootstrap_objects(endpoint, token, ttl_s, name, pod_cidr, svc_cidr))
    if cert_key:
        upload_certs(cert_key)
    register_node(name, ip)
    mark_control_plane(name)
    if start_kwok():
        say("[kwok] Started KWOK (%s) for the nodes and pods (log %s/kwok.log)" % (binary("kwok"), LOG_DIR))
    else:
        start_agent(name)
    return {"endpoint": endpoint, "ca_hash": ca_hash()}


# ---------------------------------------------------------------- join
def _insecure_get(url, token=None, timeout=10):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
        return json.loads(r.read().decode())


def _b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def discover(endpoint, token, hashes, unsafe):
    """Token discovery as kubeadm does it: the cluster-info ConfigMap, read anonymously over TLS
    without verification, must carry a JWS signed with this token (the bootstrap signer controller
    adds it), and its CA must be pinned by one of hashes. Returns (server, CA PEM)."""
    tid = token.split(".")[0]
    url = "https://%s/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s" % endpoint
    ident = "couldn't validate the identity of the API Server"

    def signed():
        try:
            cm = _insecure_get(url)
        except (urllib.error.URLError, OSError) as e:
            raise RealError('%s: Get "%s": %s' % (ident, url, getattr(e, "reason", e))) from e
        data = cm.get("data") or {}
        return (data["kubeconfig"], data["jws-kubeconfig-" + tid]) if "jws-kubeconfig-" + tid in data else None
    try:
        conf, jws = wait_for("a JWS signature for token ID %r in the cluster-info ConfigMap" % tid, signed, 60)
    except RealError as e:
        raise RealError("%s: could not find a JWS signature in the cluster-info ConfigMap for token ID \"%s\" (%s)"
                        % (ident, tid, e)) from e
    header, _, sig = jws.partition("..")
    # The key is the token's secret part (k8s.io/cluster-bootstrap's detached JWS, HS256).
    signing_input = (header + "." + _b64url(conf.encode())).encode()
    want = _b64url(hmac.new(token.split(".")[1].encode(), signing_input, hashlib.sha256).digest())
    if not hmac.compare_digest(want, sig):
        raise RealError("%s: failed to verify JWS signature of received cluster info object, can't trust this API "
                        "Server" % ident)
    doc = kf.yaml_load(conf)
    cl = doc["clusters"][0]["cluster"]
    ca_pem = base64.b64decode(cl["certificate-authority-data"]).decode()
    if not unsafe:
        h = kc.ca_hash(ca_pem)
        if "sha256:" + h not in [x.lower() for x in hashes]:
            raise RealError('%s: cluster CA found in cluster-info ConfigMap is invalid: none of the public keys '
                            '"sha256:%s" are pinned' % (ident, h))
    return cl["server"], ca_pem


def token_kubeconfig(server, ca_pem, user, token):
    ctx = user + "@kubernetes"
    return ("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: %s\n    server: %s\n"
            "  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: %s\n  name: %s\n"
            "current-context: %s\nkind: Config\npreferences: {}\nusers:\n- name: %s\n  user:\n    token: %s\n"
            % (kc.b64(ca_pem), server, user, ctx, ctx, user, token))


def tls_bootstrap(name, server, ca_pem, token):
    """The kubelet's TLS bootstrap: a key, a CSR for system:node:NAME (kube-apiserver-client-kubelet)
    created with the bootstrap token, approved and signed by the real controller manager."""
    kc.write_file(PKI + "/ca.crt", ca_pem)
    kc.write_file(BOOTSTRAP_CONF, token_kubeconfig(server, ca_pem, "tls-bootstrap-token-user", token), 0o600)
    d = tempfile.mkdtemp(prefix="labkit-")
    try:
        _ossl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d + "/k.key"])
        _ossl(["req", "-new", "-key", d + "/k.key", "-subj", "/O=system:nodes/CN=system:node:" + name,
               "-out", d + "/k.csr"])
        csr_name = "node-csr-" + ks.rand_str(11)
        obj = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": csr_name},
               "spec": {"request": kc.b64(read(d + "/k.csr")),
                        "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                        "usages": ["digital signature", "client auth"]}}
        kubectl(["create", "-f", "-"], BOOTSTRAP_CONF, stdin=json.dumps(obj))

        def issued():
            st = json.loads(kubectl(["get", "csr", csr_name, "-o", "json"], BOOTSTRAP_CONF)).get("status") or {}
            for c in st.get("conditions") or []:
                if c.get("type") in ("Denied", "Failed"):
                    raise RealError("certificate request %s %s: %s" % (csr_name, c["type"], c.get("message", "")))
            return st.get("certificate")
        cert = base64.b64decode(wait_for("the CSR %s to be approved and signed" % csr_name, issued, 60)).decode()
        kc.write_file(KUBELET_PEM, cert + read(d + "/k.key"), 0o600)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    write_kubelet_conf(name, server)
    os.unlink(BOOTSTRAP_CONF)
    return csr_name


def join(name, ip, endpoint, token, hashes, unsafe, cp, cert_key, say):
    server, ca_pem = discover(endpoint, token, hashes, unsafe)
    say("[preflight] lab kit: cluster-info of %s verified (JWS of token %s, CA pinned)" % (server, token.split(".")[0]))
    if cp:
        join_control_plane(name, ip, endpoint, token, ca_pem, cert_key, say)
    csr = tls_bootstrap(name, server, ca_pem, token)
    say("[kubelet-start] lab kit: CSR %s approved and signed by the cluster's controller manager" % csr)
    register_node(name, ip)
    if cp:
        mark_control_plane(name)
    if not have_kwok():
        start_agent(name)


def join_control_plane(name, ip, endpoint, token, ca_pem, cert_key, say):
    """What kubeadm join --control-plane does before the kubelet starts, on the real cluster:
    download-certs (kubeadm-certs, read with the bootstrap token, opened with the certificate key),
    this master's own certificates and kubeconfigs, a new etcd member added through a running one
    (as a learner, promoted once it has caught up, as kubeadm does by default since 1.29), then the
    API server on the local member and the controller manager and scheduler with leader election."""
    server = "https://" + endpoint
    kc.write_file(PKI + "/ca.crt", ca_pem)
    kc.write_file(BOOTSTRAP_CONF, token_kubeconfig(server, ca_pem, "tls-bootstrap-token-user", token), 0o600)
    try:
        download_certs(cert_key, BOOTSTRAP_CONF)
    finally:
        os.unlink(BOOTSTRAP_CONF)
    if kc.ca_hash(read(PKI + "/ca.crt")) != kc.ca_hash(ca_pem):
        raise RealError("the CA in kubeadm-certs is not the CA of cluster-info")
    say('[download-certs] lab kit: %d files of Secret "kubeadm-certs" opened with the certificate key'
        % len(CERT_FILES))
    write_kubeconfigs(name, ip, endpoint, joining=True)
    cfg = kf.yaml_load(json.loads(kubectl(["-n", "kube-system", "get", "cm", "kubeadm-config", "-o", "json"]))
                       ["data"]["ClusterConfiguration"])
    net = cfg.get("networking") or {}
    svc_cidr = net.get("serviceSubnet") or "10.96.0.0/12"
    pod_cidr = net.get("podSubnet") or ""
    make_node_certs(name, ip, endpoint, svc_cidr)
    initial = add_etcd_member(name, ip, say)
    start_etcd(name, ip, initial["cluster"], "existing")
    promote_etcd_member(initial, say)
    wait_etcd_healthy()
    took = start_api_and_controllers(ip, pod_cidr, svc_cidr, ADMIN_CONF)
    say("[control-plane-join] lab kit: the API server of %s is healthy after %.3fs" % (name, took))


def control_plane_ips():
    """The InternalIPs of the control-plane Nodes (kubeadm reads them from its etcd pods'
    annotations; here no pod runs, the Nodes say the same)."""
    out = json.loads(kubectl(["get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "json"]))
    ips = []
    for n in out.get("items") or []:
        for a in (n.get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP":
                ips.append(a["address"])
    return ips


def add_etcd_member(name, ip, say):
    """etcdctl member add NAME --learner through the first running member; a stale member with this
    node's peer URL (a rebuilt master whose member was not removed) is removed first. Returns
    {'via', 'id', 'cluster'} (the --initial-cluster the new member starts with)."""
    peer = "https://%s:2380" % ip
    last = None
    for other in control_plane_ips():
        if other == ip:
            continue
        via = "https://%s:2379" % other
        try:
            members = json.loads(etcdctl(["member", "list", "-w", "json"], via)).get("members") or []
        except (RealError, ValueError) as e:
            last = e
            continue
        for m in members:
            if peer in (m.get("peerURLs") or []) or (name and m.get("name") == name):
                etcdctl(["member", "remove", "%x" % m["ID"]], via)
                say("[etcd] lab kit: removed the stale etcd member %x (%s) of this node" % (m["ID"], m.get("name")))
        out = etcdctl(["member", "add", name, "--learner", "--peer-urls=" + peer], via)
        mid = re.search(r"Member\s+([0-9a-f]+)\s+added", out)
        cl = re.search(r'ETCD_INITIAL_CLUSTER="([^"]*)"', out)
        if not (mid and cl):
            raise RealError("etcdctl member add: unexpected output: %s" % out.strip())
        say("[etcd] lab kit: etcd member %s added as a learner through %s" % (mid.group(1), via))
        return {"via": via, "id": mid.group(1), "cluster": cl.group(1)}
    raise RealError("no running etcd member to add %s through%s" % (name, ": %s" % last if last else ""))


def promote_etcd_member(m, say):
    """member promote, retried while the learner catches up with the leader."""
    def promoted():
        alive_or_raise(["etcd"])
        try:
            etcdctl(["member", "promote", m["id"]], m["via"])
        except RealError as e:
            if "not a learner" not in str(e):
                raise
        return True
    wait_for("the etcd learner %s to be promoted" % m["id"], promoted, READY_TIMEOUT_S)
    say("[etcd] lab kit: etcd member %s promoted to a voting member" % m["id"])


# ---------------------------------------------------------------- the kubelet's part (stand-in)
def node_object(name, ip, ready):
    now = rfc3339(time.time())
    cap = {"cpu": "2", "memory": "4026532Ki", "pods": "110", "ephemeral-storage": "20Gi"}
    conds = [{"type": t, "status": "False", "reason": r, "message": m, "lastHeartbeatTime": now,
              "lastTransitionTime": now} for t, r, m in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))]
    if ready:
        conds.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                      "message": "lab kit kubelet stand-in is posting ready status", "lastHeartbeatTime": now,
                      "lastTransitionTime": now})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                                    "beta.kubernetes.io/arch": "amd64"},
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                         "kubeadm.alpha.kubernetes.io/cri-socket":
                                             "unix:///var/run/containerd/containerd.sock",
                                         "labkit/stand-in": "this Node is registered by the lab kit's kubelet "
                                                            "stand-in; no kubelet runs"}},
            "spec": {},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                       "capacity": cap, "allocatable": cap, "conditions": conds,
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"architecture": "amd64", "bootID": ks.rand_uid(), "machineID": ks.rand_hex(32),
                                    "systemUUID": ks.rand_uid(), "containerRuntimeVersion": "containerd://1.7.22",
                                    "kernelVersion": os.uname().release, "kubeletVersion": version(),
                                    "kubeProxyVersion": "", "operatingSystem": "linux",
                                    "osImage": kc.os_image()}}}


def register_node(name, ip):
    """The Node, created with the node's own credentials (kubelet.conf), as the kubelet registers."""
    obj = node_object(name, ip, ready=not have_kwok())
    res = kubectl(["create", "-f", "-"], KUBELET_CONF, stdin=json.dumps(obj), check=False)
    if res.returncode != 0 and "AlreadyExists" not in res.stderr:
        raise RealError("registering node %s: %s" % (name, res.stderr.strip()))


def start_agent(name):
    """The kit's kubelet stand-in as a daemon: heartbeats (Lease, Ready) and pods to Running."""
    ident = ks.identity()
    launch("labkit-kubelet", ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                                               "kubelet"), "--labkit-agent", name,
                              ks.node_ip() or ident.get("ip", "")])


def agent_loop(name, ip, period=10.0):
    """Keep node NAME Ready (status heartbeat and its Lease in kube-node-lease) and move the pods
    bound to it to Running and Ready, with the node's credentials. Re-creates nothing."""
    while True:
        try:
            agent_once(name, ip)
        except (RealError, ValueError, KeyError, OSError, ssl.SSLError) as e:
            ks.err("%s labkit-kubelet: %s" % (rfc3339(time.time()), e))
        time.sleep(period)


def micro(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int(t % 1 * 1e6)


def node_api(method, path, body=None, ctype="application/json"):
    """One request to the API server with the node's own credentials (kubelet.conf), as the
    kubelet makes it; kubectl would GET nodes/status before a patch, which a node may not."""
    doc = kf.yaml_load(read(KUBELET_CONF))
    server = doc["clusters"][0]["cluster"]["server"]
    ctx = ssl.create_default_context(cadata=base64.b64decode(doc["clusters"][0]["cluster"]
                                                             ["certificate-authority-data"]).decode())
    ctx.check_hostname = False  # the server is an IP; the CA still verifies the chain
    ctx.load_cert_chain(KUBELET_PEM)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.rstrip("/") + path, data=data, method=method)
    req.add_header("Content-Type", ctype)
    req.add_header("Accept", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=15, context=ctx) as r:
            return json.loads(r.read().decode() or "{}")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise RealError("%s %s: %s %s" % (method, path, e.code, e.read().decode(errors="replace")[:300])) from e
    except (urllib.error.URLError, OSError) as e:
        raise RealError("%s %s: %s" % (method, path, getattr(e, "reason", e))) from e


def agent_once(name, ip):
    if not os.path.exists(KUBELET_CONF):
        return
    now = time.time()
    lpath = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name
    spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro(now)}
    if node_api("GET", lpath) is None:
        node_api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                 {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec})
    else:
        node_api("PATCH", lpath, {"spec": spec}, "application/merge-patch+json")
    node = node_object(name, ip, ready=True)
    n = node_api("PATCH", "/api/v1/nodes/%s/status" % name, {"status": {"conditions": node["status"]["conditions"]}},
                 "application/strategic-merge-patch+json") or {}
    cidr = (n.get("spec") or {}).get("podCIDR")
    pods = node_api("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D" + name) or {}
    for p in pods.get("items") or []:
        md, st, spec = p["metadata"], p.get("status") or {}, p["spec"]
        path = "/api/v1/namespaces/%s/pods/%s" % (md["namespace"], md["name"])
        if md.get("deletionTimestamp"):
            node_api("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
            continue
        if st.get("phase") in ("Running", "Succeeded", "Failed"):
            continue
        pod_ip = ip
        if not spec.get("hostNetwork") and cidr:
            net = ipaddress.ip_network(cidr, strict=False)
            pod_ip = str(net.network_address + 2 + (int(hashlib.sha256(md["uid"].encode()).hexdigest(), 16)
                                                    % max(1, net.num_addresses - 4)))
        t = rfc3339(now)
        conds = [{"type": c, "status": "True", "lastTransitionTime": t} for c in
                 ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
        cs = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
               "restartCount": 0, "containerID": "containerd://" + ks.rand_hex(64),
               "state": {"running": {"startedAt": t}}} for c in spec.get("containers") or []]
        status = {"phase": "Running", "conditions": conds, "hostIP": ip, "hostIPs": [{"ip": ip}], "podIP": pod_ip,
                  "podIPs": [{"ip": pod_ip}], "startTime": t, "containerStatuses": cs}
        node_api("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")


# ---------------------------------------------------------------- token, reset
def admin_server(conf):
    doc = kf.yaml_load(read(conf))
    return doc["clusters"][0]["cluster"]["server"]


def create_token(token, ttl_s, description, conf=ADMIN_CONF):
    apply([token_secret(token, ttl_s, description)], conf)


def list_tokens(conf=ADMIN_CONF):
    out = json.loads(kubectl(["-n", "kube-system", "get", "secrets", "--field-selector",
                              "type=bootstrap.kubernetes.io/token", "-o", "json"], conf))
    toks = []
    for s in out.get("items") or []:
        d = {k: base64.b64decode(v).decode() for k, v in (s.get("data") or {}).items()}
        if "token-id" in d:
            toks.append(d)
    return toks


def delete_token(tid, conf=ADMIN_CONF):
    res = kubectl(["-n", "kube-system", "delete", "secret", "bootstrap-token-" + tid], conf, check=False)
    if res.returncode != 0:
        raise RealError('failed to delete bootstrap token with name "bootstrap-token-%s": secrets '
                        '"bootstrap-token-%s" not found' % (tid, tid))


def etcd_endpoints():
    """This node's etcd first, then the other masters' (a member that has just rejoined may not
    answer its own clients yet, while the others do)."""
    eps = ["https://127.0.0.1:2379"]
    try:
        eps += ["https://%s:2379" % ip for ip in control_plane_ips()]
    except (RealError, ValueError, OSError):
        pass
    return eps


def remove_own_member(name, say):
    """etcdctl member remove of the member named NAME, through whichever member answers. etcd
    refuses to remove a member while the others have not been connected for its health interval
    (5 s), e.g. just after this member joined, and a freshly rejoined member may time out its own
    clients: retry over every endpoint, as kubeadm's etcd client does, for a bounded time."""
    said = {}

    def removed():
        for via in etcd_endpoints():
            try:
                members = json.loads(etcdctl(["member", "list", "-w", "json"], via)).get("members") or []
            except (RealError, ValueError):
                continue
            mine = [m for m in members if m.get("name") == name]
            if not mine or len(members) < 2:
                return True  # gone already (an earlier try went through), or the last member
            try:
                etcdctl(["member", "remove", "%x" % mine[0]["ID"]], via)
            except RealError as e:
                if "member not found" in str(e):
                    return True
                if "unhealthy cluster" in str(e) or "deadline exceeded" in str(e):
                    continue
                raise
            said["id"] = mine[0]["ID"]
            return True
        raise RealError("no etcd endpoint removed the member of %s yet" % name)
    wait_for("etcd to accept removing the member of %s" % name, removed, 45)
    if "id" in said:
        say("[reset] Removed the etcd member of %s (id %x)" % (name, said["id"]))


def reset(name, cp, say):
    """Remove this master's etcd member (when others remain), stop the daemons, wipe the files."""
    if cp and pid_of("etcd"):
        try:
            remove_own_member(name, say)
        except (RealError, ValueError) as e:
            say("[reset] lab kit: could not remove the etcd member of %s: %s" % (name, e))
    stop_all()
    stop(LB)
    if os.path.isdir(ETCD_DATA):  # kubeadm empties the data directory and keeps it
        for e in os.listdir(ETCD_DATA):
            p = os.path.join(ETCD_DATA, e)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
    for d in ("/var/lib/labkit-node/apiserver-certs", "/var/lib/labkit-node/kcm-certs",
              "/var/lib/labkit-node/scheduler-certs"):
        shutil.rmtree(d, ignore_errors=True)
