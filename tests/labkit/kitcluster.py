#!/usr/bin/python3
# kitcluster.py - LAB KIT cluster model shared by the kubeadm/kubectl stand-ins
# and labkit-ctl: nodes, pods, etcd members, tokens, objects, certificates.
# Part of the mgmt-driver lab kit (tests/labkit/); not a real tool. No API
# server runs: the "cluster" is the JSON document state["cluster"].
"""Lab kit: the cluster model kept in the shared state."""

import base64
import copy
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time

import kitstate as ks

CP_TAINT = "node-role.kubernetes.io/control-plane"
DEFAULT_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
RUNTIME_VERSION = "containerd://1.7.22"
OWNERS_RECREATED = ("ReplicaSet", "StatefulSet", "ReplicationController", "Deployment")

# Kind, API group, namespaced, names kubectl accepts for it
_RES = [
    ("Node", "", False, "nodes node no"),
    ("Pod", "", True, "pods pod po"),
    ("Namespace", "", False, "namespaces namespace ns"),
    ("Secret", "", True, "secrets secret"),
    ("ServiceAccount", "", True, "serviceaccounts serviceaccount sa"),
    ("ConfigMap", "", True, "configmaps configmap cm"),
    ("Service", "", True, "services service svc"),
    ("PersistentVolume", "", False, "persistentvolumes persistentvolume pv"),
    ("PersistentVolumeClaim", "", True, "persistentvolumeclaims persistentvolumeclaim pvc"),
    ("ClusterRoleBinding", "rbac.authorization.k8s.io", False, "clusterrolebindings clusterrolebinding"),
    ("ClusterRole", "rbac.authorization.k8s.io", False, "clusterroles clusterrole"),
    ("RoleBinding", "rbac.authorization.k8s.io", True, "rolebindings rolebinding"),
    ("Role", "rbac.authorization.k8s.io", True, "roles role"),
    ("Deployment", "apps", True, "deployments deployment deploy"),
    ("DaemonSet", "apps", True, "daemonsets daemonset ds"),
    ("ReplicaSet", "apps", True, "replicasets replicaset rs"),
    ("StatefulSet", "apps", True, "statefulsets statefulset sts"),
    ("StorageClass", "storage.k8s.io", False, "storageclasses storageclass sc"),
    ("CustomResourceDefinition", "apiextensions.k8s.io", False,
     "customresourcedefinitions customresourcedefinition crd crds"),
    ("PodDisruptionBudget", "policy", True, "poddisruptionbudgets poddisruptionbudget pdb"),
]
RESOURCES = {}
KINDS = {}
for _k, _g, _ns, _names in _RES:
    KINDS[_k] = (_g, _ns, _names.split()[0])
    for _n in _names.split():
        RESOURCES[_n] = _k
        if _g:
            RESOURCES[_n + "." + _g] = _k
CLUSTER_SCOPED = {k for k, v in KINDS.items() if not v[1]}


def kind_group(kind, api_version=None):
    if api_version is not None:
        return api_version.split("/")[0] if "/" in api_version else ""
    return KINDS.get(kind, ("", True, ""))[0]


def qualified(kind, api_version=None):
    """'ClusterRoleBinding' -> 'clusterrolebinding.rbac.authorization.k8s.io' (kubectl output)."""
    g = kind_group(kind, api_version)
    return kind.lower() + ("." + g if g else "")


def namespaced(kind):
    return kind not in CLUSTER_SCOPED


# ---------------------------------------------------------------- certificates
def _openssl(args, stdin=None):
    res = subprocess.run(["openssl"] + args, input=stdin, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        ks.die("lab kit: openssl %s failed: %s" % (args[0], res.stderr.strip()))
    return res.stdout


def make_ca(crt, key, cn="kubernetes", days=3650):
    _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", key, "-out", crt,
              "-days", str(days), "-subj", "/CN=" + cn,
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"])
    os.chmod(key, 0o600)


def make_leaf(ca_crt, ca_key, subj, crt, key, sans=None, client=True, days=365):
    """EC P-256 leaf certificate signed by the CA (one openssl run)."""
    args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-sha256", "-keyout", key, "-out", crt, "-CA", ca_crt, "-CAkey", ca_key,
            "-days", str(days), "-subj", subj,
            "-addext", "basicConstraints=critical,CA:FALSE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
            "-addext", "extendedKeyUsage=" + ("clientAuth" if client else "serverAuth,clientAuth")]
    if sans:
        args += ["-addext", "subjectAltName=" + ",".join(sans)]
    _openssl(args)
    os.chmod(key, 0o600)


def leaf_pems(ca_crt_pem, ca_key_pem, subj, sans=None, client=True):
    """(cert PEM, key PEM) of a new leaf signed by the given CA."""
    d = tempfile.mkdtemp(prefix="labkit-")
    try:
        with open(os.path.join(d, "ca.crt"), "w", encoding="utf-8") as f:
            f.write(ca_crt_pem)
        with open(os.open(os.path.join(d, "ca.key"), os.O_WRONLY | os.O_CREAT, 0o600), "w",
                  encoding="utf-8") as f:
            f.write(ca_key_pem)
        make_leaf(os.path.join(d, "ca.crt"), os.path.join(d, "ca.key"), subj,
                  os.path.join(d, "l.crt"), os.path.join(d, "l.key"), sans, client)
        with open(os.path.join(d, "l.crt"), encoding="utf-8") as f:
            c = f.read()
        with open(os.path.join(d, "l.key"), encoding="utf-8") as f:
            k = f.read()
        return c, k
    finally:
        shutil.rmtree(d, ignore_errors=True)


def ca_hash(ca_pem):
    """sha256 of the DER SubjectPublicKeyInfo: the same as
    `openssl x509 -pubkey -noout -in ca.crt | openssl pkey -pubin -outform der | sha256sum`."""
    pub = _openssl(["x509", "-pubkey", "-noout"], stdin=ca_pem)
    body = "".join(l for l in pub.splitlines() if l and not l.startswith("-----"))
    return hashlib.sha256(base64.b64decode(body)).hexdigest()


def b64(text):
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def write_file(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".labkit-tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def kubeconfig(server, ca_pem, user, cert_pem=None, key_pem=None, cert_file=None, key_file=None,
               cluster_name="kubernetes"):
    """A kubeconfig in kubeadm's layout."""
    ctx = "%s@%s" % (user, cluster_name)
    lines = ["apiVersion: v1", "clusters:", "- cluster:",
             "    certificate-authority-data: " + b64(ca_pem),
             "    server: " + server, "  name: " + cluster_name,
             "contexts:", "- context:", "    cluster: " + cluster_name, "    user: " + user,
             "  name: " + ctx, "current-context: " + ctx, "kind: Config", "preferences: {}",
             "users:", "- name: " + user, "  user:"]
    if cert_file:
        lines += ["    client-certificate: " + cert_file, "    client-key: " + key_file]
    else:
        lines += ["    client-certificate-data: " + b64(cert_pem), "    client-key-data: " + b64(key_pem)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- cluster
def endpoint_norm(ep):
    ep = ep.strip()
    if ep.startswith("https://"):
        ep = ep[8:]
    ep = ep.rstrip("/")
    if ep.startswith("["):
        return ep if "]:" in ep else ep + ":6443"
    return ep if ":" in ep else ep + ":6443"


def new_cluster(endpoint, pod_cidr, service_cidr, version, ca_crt, ca_key):
    now = time.time()
    c = {
        "uid": ks.rand_uid(), "created": now, "endpoint": endpoint_norm(endpoint),
        "pod_cidr": pod_cidr, "service_cidr": service_cidr, "version": version,
        "ca_crt": ca_crt, "ca_key": ca_key, "ca_hash": ca_hash(ca_crt),
        "etcd_cluster_id": ks.rand_hex(16), "tokens": {}, "certificate_key": None,
        "nodes": {}, "etcd_members": {}, "pods": {}, "objects": {}, "daemonsets": {},
        "cni": None, "manifests": {}, "resource_version": 1000,
    }
    for ns in DEFAULT_NAMESPACES:
        put_object(c, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    add_daemonset(c, "kube-system", "kube-proxy", {"k8s-app": "kube-proxy"},
                  "registry.k8s.io/kube-proxy:" + version, host_network=True, needs_cni=False)
    put_object(c, {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "coredns", "namespace": "kube-system",
                                "labels": {"k8s-app": "kube-dns"}},
                   "spec": {"replicas": 2}})
    rs = "coredns-" + ks.rand_str(10, ks.SUFFIX_ALPHABET)
    for _ in range(2):
        new_pod(c, "kube-system", ks.generated_name(rs + "-"), None, owner=("ReplicaSet", rs),
                labels={"k8s-app": "kube-dns"}, tolerate_cp=True, container="coredns",
                image="registry.k8s.io/coredns/coredns:v1.11.3")
    return c


def next_rv(c):
    c["resource_version"] = c.get("resource_version", 1000) + 1
    return str(c["resource_version"])


def token_valid(c, token, now=None):
    t = c["tokens"].get(token)
    if not t:
        return False
    return t.get("expires") is None or t["expires"] > (now or time.time())


def add_token(c, ttl_s=86400.0, description="", token=None):
    token = token or ks.bootstrap_token()
    now = time.time()
    c["tokens"][token] = {"created": now, "expires": (now + ttl_s) if ttl_s > 0 else None,
                          "description": description,
                          "usages": ["authentication", "signing"],
                          "groups": ["system:bootstrappers:kubeadm:default-node-token"]}
    return token


def upload_certs(c):
    key = ks.rand_hex(64)
    c["certificate_key"] = {"key": key, "expires": time.time() + 7200}
    return key


# ---------------------------------------------------------------- nodes
def os_image():
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "Linux"


def register_node(c, name, ip, control_plane, kubelet_version):
    old = c["nodes"].get(name)
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    taints = []
    if control_plane:
        labels[CP_TAINT] = ""
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
        taints.append({"key": CP_TAINT, "effect": "NoSchedule"})
    n = {"name": name, "ip": ip, "uid": ks.rand_uid(), "created": time.time(), "labels": labels,
         "taints": taints, "unschedulable": False, "kubelet_up": True,
         "kubelet_version": kubelet_version, "os_image": os_image(), "kernel": os.uname().release,
         "runtime": RUNTIME_VERSION, "lab_node": ks.identity().get("name", "")}
    if old:  # re-registration of a NotReady node object keeps identity, labels and cordon
        n["uid"], n["created"] = old["uid"], old["created"]
        for k, v in old.get("labels", {}).items():
            n["labels"].setdefault(k, v)
        n["unschedulable"] = old.get("unschedulable", False)
    c["nodes"][name] = n
    return n


def node_ready(c, n):
    return bool(n.get("kubelet_up")) and bool(c.get("cni"))


def node_roles(n):
    roles = sorted(k.split("/", 1)[1] for k in n.get("labels", {})
                   if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1])
    return ",".join(roles) or "<none>"


def node_status_text(c, n):
    s = "Ready" if node_ready(c, n) else "NotReady"
    return s + (",SchedulingDisabled" if n.get("unschedulable") else "")


def node_object(c, n):
    ready = node_ready(c, n)
    taints = list(n.get("taints", []))
    if n.get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": ks.iso(time.time())})
    if not ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    spec = {"taints": taints} if taints else {}
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n["name"], "uid": n["uid"], "labels": dict(n["labels"]),
                     "creationTimestamp": ks.iso(n["created"]), "resourceVersion": str(c["resource_version"]),
                     "annotations": {"kubeadm.alpha.kubernetes.io/cri-socket":
                                     "unix:///var/run/containerd/containerd.sock",
                                     "node.alpha.kubernetes.io/ttl": "0",
                                     "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": spec,
        "status": {
            "addresses": [{"address": n["ip"], "type": "InternalIP"},
                          {"address": n["name"], "type": "Hostname"}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else
                            ("KubeletNotReady" if n.get("kubelet_up") else "NodeStatusUnknown"),
                            "message": "kubelet is posting ready status" if ready else
                            ("container runtime network not ready: NetworkReady=false reason:"
                             "NetworkPluginNotReady message:Network plugin returns error: cni plugin "
                             "not initialized" if n.get("kubelet_up") else
                             "Kubelet stopped posting node status."),
                            "lastTransitionTime": ks.iso(n["created"])}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                         "kubeletVersion": n["kubelet_version"], "kubeProxyVersion": n["kubelet_version"],
                         "osImage": n.get("os_image", ""), "kernelVersion": n.get("kernel", ""),
                         "containerRuntimeVersion": n.get("runtime", RUNTIME_VERSION)},
        },
    }


def find_node(c, name_or_ip):
    if name_or_ip in c["nodes"]:
        return c["nodes"][name_or_ip]
    for n in c["nodes"].values():
        if n["ip"] == name_or_ip or n.get("lab_node") == name_or_ip:
            return n
    return None


def delete_node(c, name):
    c["nodes"].pop(name, None)
    for key, p in list(c["pods"].items()):
        if p.get("node") == name:
            remove_pod(c, key, recreate=True)


# ---------------------------------------------------------------- etcd
def add_etcd_member(c, name, ip):
    for mid, m in list(c["etcd_members"].items()):
        if m["name"] == name:
            del c["etcd_members"][mid]
    mid = ks.rand_hex(16)
    c["etcd_members"][mid] = {"name": name, "ip": ip, "added": time.time()}
    return mid


def etcd_member_lines(c):
    out = []
    for mid in sorted(c["etcd_members"]):
        m = c["etcd_members"][mid]
        out.append("%s, started, %s, https://%s:2380, https://%s:2379, false" % (mid, m["name"], m["ip"], m["ip"]))
    return out


# ---------------------------------------------------------------- pods
def pod_ip(c, node):
    if node is None:
        return None
    try:
        net = ipaddress.ip_network(c.get("pod_cidr") or "10.244.0.0/16", strict=False)
    except ValueError:
        net = ipaddress.ip_network("10.244.0.0/16")
    size = max(net.num_addresses - 2, 1)
    return str(net.network_address + 1 + int.from_bytes(os.urandom(4), "big") % size)


def new_pod(c, ns, name, node, owner=None, labels=None, stuck=False, emptydir=False, host_network=False,
            tolerate_cp=False, needs_cni=True, image="registry.k8s.io/pause:3.10", daemonset=None, container=None):
    p = {"namespace": ns, "name": name, "node": node, "uid": ks.rand_uid(), "created": time.time(),
         "container": container or (owner[1] if owner and owner[0] in ("DaemonSet", "StatefulSet") else name),
         "owner": {"kind": owner[0], "name": owner[1]} if owner else None, "labels": labels or {},
         "stuck": stuck, "emptydir": emptydir, "host_network": host_network, "tolerate_cp": tolerate_cp,
         "needs_cni": needs_cni, "image": image, "daemonset": daemonset, "ip": None}
    c["pods"]["%s/%s" % (ns, name)] = p
    if node is None:
        schedule(c, p)
    else:
        p["ip"] = c["nodes"][node]["ip"] if host_network and node in c["nodes"] else pod_ip(c, node)
    return p


def tolerates(p, n):
    for t in n.get("taints", []):
        if t.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if t["key"] == CP_TAINT and p.get("tolerate_cp"):
            continue
        return False
    return True


def schedule(c, p, exclude=()):
    """Bind a pending pod to the least-loaded schedulable node (or leave it Pending)."""
    cands = [n for n in c["nodes"].values()
             if n.get("kubelet_up") and not n.get("unschedulable") and n["name"] not in exclude
             and tolerates(p, n)]
    if not cands:
        p["node"], p["ip"] = None, None
        return None
    load = {n["name"]: 0 for n in cands}
    for q in c["pods"].values():
        if q.get("node") in load:
            load[q["node"]] += 1
    best = min(cands, key=lambda n: (load[n["name"]], n["name"]))
    p["node"] = best["name"]
    p["ip"] = best["ip"] if p.get("host_network") else pod_ip(c, best["name"])
    return best["name"]


def remove_pod(c, key, recreate=True, exclude=()):
    """Delete a pod; a controller-owned one gets a replacement scheduled elsewhere."""
    p = c["pods"].pop(key, None)
    if not p or not recreate:
        return p
    owner = p.get("owner") or {}
    if owner.get("kind") in OWNERS_RECREATED:
        name = p["name"] if owner["kind"] == "StatefulSet" else ks.generated_name(owner["name"] + "-")
        q = dict(p, name=name, uid=ks.rand_uid(), created=time.time(), node=None, ip=None)
        c["pods"]["%s/%s" % (q["namespace"], name)] = q
        schedule(c, q, exclude)
    return p


def add_daemonset(c, ns, name, labels, image, host_network=True, needs_cni=False):
    c["daemonsets"]["%s/%s" % (ns, name)] = {"namespace": ns, "name": name, "labels": labels,
                                              "image": image, "host_network": host_network,
                                              "needs_cni": needs_cni}
    put_object(c, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                   "metadata": {"name": name, "namespace": ns, "labels": dict(labels)}, "spec": {}})


def pod_phase(c, p):
    if not p.get("node"):
        return "Pending"
    if p.get("needs_cni") and not c.get("cni"):
        return "Pending"
    if p.get("ready_at") and time.time() < p["ready_at"]:  # a helm release still rolling out
        return "Pending"
    return "Running"


def stable_uid(seed):
    h = hashlib.sha256(seed.encode()).hexdigest()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def pod_object(c, p):
    owner = p.get("owner")
    meta = {"name": p["name"], "namespace": p["namespace"], "uid": p["uid"],
            "creationTimestamp": ks.iso(p["created"]), "labels": dict(p.get("labels") or {}),
            "resourceVersion": str(c["resource_version"])}
    if owner:
        api = {"Node": "v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1",
               "StatefulSet": "apps/v1"}.get(owner["kind"], "v1")
        meta["ownerReferences"] = [{"apiVersion": api, "kind": owner["kind"], "name": owner["name"],
                                    "uid": stable_uid("%s/%s/%s" % (owner["kind"], p["namespace"], owner["name"]))
                                    if owner["kind"] != "Node" else
                                    c["nodes"].get(p.get("node") or "", {}).get("uid", ""),
                                    "controller": True, "blockOwnerDeletion": True}]
    spec = {"containers": [{"name": p.get("container") or p["name"], "image": p.get("image", "")}],
            "restartPolicy": "Always", "schedulerName": "default-scheduler"}
    if p.get("node"):
        spec["nodeName"] = p["node"]
    if p.get("host_network"):
        spec["hostNetwork"] = True
    if p.get("emptydir"):
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    phase = pod_phase(c, p)
    status = {"phase": phase}
    if p.get("node") and p["node"] in c["nodes"]:
        status["hostIP"] = c["nodes"][p["node"]]["ip"]
    if phase == "Running":
        status["podIP"] = p.get("ip")
        status["startTime"] = ks.iso(p["created"])
    if p.get("node"):
        status["conditions"] = [{"type": "Ready", "status": "True" if phase == "Running" else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


# ---------------------------------------------------------------- objects
def obj_key(kind, ns, name):
    return "%s/%s/%s" % (kind, ns if namespaced(kind) else "", name)


def put_object(c, obj):
    meta = obj.setdefault("metadata", {})
    kind = obj["kind"]
    if namespaced(kind):
        meta.setdefault("namespace", "default")
    else:
        meta.pop("namespace", None)
    key = obj_key(kind, meta.get("namespace", ""), meta["name"])
    old = c["objects"].get(key)
    if kind == "Service":
        service_allocate(c, obj, old)
    meta["uid"] = old["metadata"]["uid"] if old else ks.rand_uid()
    meta["creationTimestamp"] = old["metadata"]["creationTimestamp"] if old else ks.iso(time.time())
    meta["resourceVersion"] = next_rv(c)
    c["objects"][key] = obj
    return obj


def get_object(c, kind, ns, name):
    return c["objects"].get(obj_key(kind, ns, name))


def list_objects(c, kind, ns=None):
    res = []
    for key in sorted(c["objects"]):
        o = c["objects"][key]
        if o["kind"] != kind:
            continue
        if ns is not None and namespaced(kind) and o["metadata"].get("namespace") != ns:
            continue
        res.append(o)
    return res


def jwt_like(ns, secret, sa, sa_uid):
    def enc(d):
        raw = json.dumps(d, separators=(",", ":")).encode() if isinstance(d, dict) else d
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    header = {"alg": "RS256", "kid": ks.rand_str(43, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")}
    payload = {"iss": "kubernetes/serviceaccount",
               "kubernetes.io/serviceaccount/namespace": ns,
               "kubernetes.io/serviceaccount/secret.name": secret,
               "kubernetes.io/serviceaccount/service-account.name": sa,
               "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
               "sub": "system:serviceaccount:%s:%s" % (ns, sa)}
    return "%s.%s.%s" % (enc(header), enc(payload), enc(os.urandom(256)))


def reconcile(c):
    """What the controllers would do: DaemonSet pods, scheduling, service-account tokens."""
    reconcile_workloads(c)  # Deployments/StatefulSets applied with kubectl (see below)
    for dsk, ds in c.get("daemonsets", {}).items():
        have = {p["node"] for p in c["pods"].values() if p.get("daemonset") == dsk}
        for n in sorted(c["nodes"]):
            if n not in have and c["nodes"][n].get("kubelet_up"):
                new_pod(c, ds["namespace"], ks.generated_name(ds["name"] + "-"), n,
                        owner=("DaemonSet", ds["name"]), labels=dict(ds["labels"]),
                        host_network=ds.get("host_network", True), needs_cni=ds.get("needs_cni", False),
                        image=ds.get("image", ""), daemonset=dsk)
    for p in c["pods"].values():
        if not p.get("node"):
            schedule(c, p)
    for o in c["objects"].values():
        if o["kind"] != "Secret" or o.get("type") != "kubernetes.io/service-account-token":
            continue
        meta = o["metadata"]
        ann = meta.setdefault("annotations", {})
        sa_name = ann.get("kubernetes.io/service-account.name", "")
        sa = get_object(c, "ServiceAccount", meta["namespace"], sa_name)
        data = o.setdefault("data", {})
        if sa and not data.get("token"):
            ann["kubernetes.io/service-account.uid"] = sa["metadata"]["uid"]
            data["token"] = b64(jwt_like(meta["namespace"], meta["name"], sa_name, sa["metadata"]["uid"]))
            data["ca.crt"] = b64(c["ca_crt"])
            data["namespace"] = b64(meta["namespace"])


# ---------------------------------------------------------------- rollout (kubectl rollout restart|status)
ROLLOUT_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def workload_pods(c, kind, ns, name):
    """The pods of a workload: those the helm wrapper made for it (their 'workload' key)."""
    wl = "%s/%s/%s" % (kind, ns, name)
    return [(k, p) for k, p in sorted(c["pods"].items()) if p.get("workload") == wl]


def restart_workload(c, obj, delay_s):
    """What `kubectl rollout restart` sets off: the pod template gets the restartedAt
    annotation, and the controller replaces every pod (new name, new uid; a StatefulSet's keep
    their names), each Ready after delay_s (the kit's helm_install_delay_s)."""
    kind, meta = obj["kind"], obj["metadata"]
    ns, name = meta.get("namespace", "default"), meta["name"]
    tmpl = obj.setdefault("spec", {}).setdefault("template", {})
    now = time.time()
    tmpl.setdefault("metadata", {}).setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = ks.iso(now)
    put_object(c, obj)
    h = hashlib.sha256(json.dumps(tmpl, sort_keys=True).encode()).digest()
    rs_hash = "".join(ks.SUFFIX_ALPHABET[b % len(ks.SUFFIX_ALPHABET)] for b in h[:10])
    for key, p in workload_pods(c, kind, ns, name):
        del c["pods"][key]
        labels = dict(p.get("labels") or {})
        owner = p.get("owner")
        if kind == "StatefulSet":
            pn = p["name"]
        elif kind == "Deployment":
            labels["pod-template-hash"] = rs_hash
            owner = {"kind": "ReplicaSet", "name": "%s-%s" % (name, rs_hash)}
            pn = ks.generated_name("%s-%s-" % (name, rs_hash))
        else:
            pn = ks.generated_name(name + "-")
        q = dict(p, name=pn, uid=ks.rand_uid(), created=now, node=None, ip=None, labels=labels, owner=owner,
                 ready_at=now + delay_s)
        c["pods"]["%s/%s" % (ns, pn)] = q
        schedule(c, q)


def rollout_progress(c, obj):
    """(desired, current, ready) pods of a workload, as `kubectl rollout status` counts them."""
    kind, meta = obj["kind"], obj["metadata"]
    pods = [p for _, p in workload_pods(c, kind, meta.get("namespace", "default"), meta["name"])]
    if kind == "DaemonSet":
        desired = len(pods)
    else:
        try:
            desired = int((obj.get("spec") or {}).get("replicas", 1))
        except (TypeError, ValueError):
            desired = 1
    return desired, len(pods), sum(1 for p in pods if pod_phase(c, p) == "Running")


# ---------------------------------------------------------------- services (cluster IPs, node ports)
# What the API server fills in when a Service is created or replaced, as `kubectl get service -o
# json` then shows it: spec.clusterIP/clusterIPs from the service CIDR (kept across updates; none
# for `clusterIP: None` or an ExternalName), ipFamilies, ipFamilyPolicy, sessionAffinity,
# internalTrafficPolicy, per port protocol TCP and targetPort = port when unset, nodePorts from
# 30000-32767 for NodePort and LoadBalancer (kept across updates), externalTrafficPolicy, and a
# LoadBalancer's status.loadBalancer: empty (no cloud load balancer in a lab: kubectl shows
# EXTERNAL-IP <pending>) unless spec.loadBalancerIP asks for an address, which a bare-metal
# load-balancer controller (MetalLB) would then announce in status.loadBalancer.ingress.
NODE_PORTS = (30000, 32767)


def service_allocate(c, obj, old):
    spec = obj.setdefault("spec", {})
    kind = spec.setdefault("type", "ClusterIP")
    old_spec = (old or {}).get("spec") or {}
    if kind != "ExternalName" and spec.get("clusterIP") != "None":
        ip = spec.get("clusterIP") or old_spec.get("clusterIP") or free_cluster_ip(c)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    elif spec.get("clusterIP") == "None":
        spec["clusterIPs"] = ["None"]
    spec.setdefault("sessionAffinity", "None")
    if kind != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in old_spec.get("ports") or []}
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
        if kind in ("NodePort", "LoadBalancer"):
            was = old_ports.get((p.get("port"), p["protocol"]), {}).get("nodePort")
            p["nodePort"] = p.get("nodePort") or was or free_node_port(c)
        else:
            p.pop("nodePort", None)
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    status = {}
    if kind == "LoadBalancer":
        lb = spec.get("loadBalancerIP")
        status["loadBalancer"] = {"ingress": [{"ip": lb, "ipMode": "VIP"}]} if lb else {}
    obj["status"] = status


def free_cluster_ip(c):
    net = ipaddress.ip_network(c.get("service_cidr") or "10.96.0.0/12", strict=False)
    used = {((o.get("spec") or {}).get("clusterIP")) for o in c["objects"].values() if o["kind"] == "Service"}
    # .1 is the `kubernetes` Service's and .10 kube-dns's; dynamic addresses come from above 16.
    for i in range(16, min(net.num_addresses - 1, 65536)):
        ip = str(net.network_address + i)
        if ip not in used:
            return ip
    raise RuntimeError("service CIDR %s is full" % net)


def free_node_port(c):
    used = set()
    for o in c["objects"].values():
        if o["kind"] == "Service":
            used.update(p.get("nodePort") for p in (o.get("spec") or {}).get("ports") or [])
    for port in range(NODE_PORTS[0], NODE_PORTS[1] + 1):
        if port not in used:
            return port
    raise RuntimeError("no free node port")


# ---------------------------------------------------------------- API reachability
def api_endpoints(c):
    eps = {c["endpoint"]}
    for n in c["nodes"].values():
        if CP_TAINT in n.get("labels", {}) and n.get("kubelet_up"):
            eps.add("%s:6443" % n["ip"])
            eps.add("%s:6443" % n["name"])
    return eps


def check_api(state, server):
    """(cluster, None) when an API server answers at server, else (None, kubectl-like error)."""
    hostport = endpoint_norm(server) if server else "localhost:8080"
    c = state.get("cluster")
    if not c or hostport not in api_endpoints(c) or not c.get("etcd_members"):
        return None, ("The connection to the server %s was refused - did you specify the right "
                      "host or port?" % hostport)
    return c, None


# ---------------------------------------------------------------- workloads applied with kubectl
# (mgmt-driver `workload` ops). A Deployment or StatefulSet applied with a pod template gets what
# its controller would do: a revision per distinct pod template (a template seen before becomes
# the newest revision again, as Kubernetes does on `rollout undo`), pods on Ready nodes named
# `<deploy>-<template hash>-<rand>` (owned by ReplicaSet `<deploy>-<hash>`) or `<sts>-<ordinal>`,
# an instant rollout (old-template pods replaced at once), and status counts. Services get a
# cluster IP and their node ports checked for collisions. Kept apart from the Helm stand-in's
# objects: only what is recorded in c["workloads"] is reconciled here.
WL_KINDS = ("Deployment", "StatefulSet")


def template_hash(tpl):
    h = hashlib.sha256(json.dumps(tpl, sort_keys=True).encode()).digest()
    return "".join(ks.SUFFIX_ALPHABET[b % len(ks.SUFFIX_ALPHABET)] for b in h[:10])


def wl_key(kind, ns, name):
    return "%s/%s/%s" % (kind, ns, name)


def workload_record(c, kind, ns, name):
    return c.get("workloads", {}).get(wl_key(kind, ns, name))


def workload_admit(c, obj, old):
    """The API server's checks of an applied Deployment/StatefulSet: an error text, or None."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not sel:
        return 'The %s "%s" is invalid: spec.selector: Required value' % (kind, name)
    if any(labels.get(k) != v for k, v in sel.items()):
        return ('The %s "%s" is invalid: spec.template.metadata.labels: Invalid value: %s: `selector` does not '
                'match template `labels`' % (kind, name, json.dumps(labels, sort_keys=True)))
    if not ((spec.get("template") or {}).get("spec") or {}).get("containers"):
        return 'The %s "%s" is invalid: spec.template.spec.containers: Required value' % (kind, name)
    if old is not None and ((old.get("spec") or {}).get("selector") or {}) != (spec.get("selector") or {}):
        return ('The %s "%s" is invalid: spec.selector: Invalid value: %s: field is immutable'
                % (kind, name, json.dumps(spec.get("selector"), sort_keys=True)))
    return None


def set_template(w, tpl):
    """Make `tpl` the current pod template, as a new revision unless it already is the current one."""
    h = template_hash(tpl)
    if w.get("current") == h:
        return
    top = max([r["revision"] for r in w["revisions"]] or [0]) + 1
    w["revisions"] = [r for r in w["revisions"] if r["hash"] != h]
    w["revisions"].append({"revision": top, "hash": h, "template": copy.deepcopy(tpl)})
    w["current"] = h


def current_revision(w):
    return next(r for r in w["revisions"] if r["hash"] == w["current"])


def workload_applied(c, obj, old):
    """Record an applied Deployment/StatefulSet: generation, revision, then reconcile."""
    meta = obj["metadata"]
    key = wl_key(obj["kind"], meta["namespace"], meta["name"])
    w = c.setdefault("workloads", {}).get(key) or {"kind": obj["kind"], "namespace": meta["namespace"],
                                                   "name": meta["name"], "revisions": [], "current": None}
    gen = ((old or {}).get("metadata") or {}).get("generation", 0)
    if old is None or old.get("spec") != obj.get("spec"):
        gen += 1
    meta["generation"] = gen
    set_template(w, obj["spec"]["template"])
    c["workloads"][key] = w
    mark_revision(obj, w)
    reconcile_workloads(c)


def mark_revision(obj, w):
    if obj["kind"] == "Deployment":
        obj["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/revision"] = \
            str(current_revision(w)["revision"])


def workload_changed(c, obj, w):
    """The spec of a recorded workload was changed in place (scale, set image, rollout undo)."""
    obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
    obj["metadata"]["resourceVersion"] = next_rv(c)
    set_template(w, obj["spec"]["template"])
    mark_revision(obj, w)
    reconcile_workloads(c)


def workload_deleted(c, kind, ns, name):
    key = wl_key(kind, ns, name)
    c.get("workloads", {}).pop(key, None)
    for pk in [k for k, p in c["pods"].items() if p.get("workload") == key]:
        remove_pod(c, pk, recreate=False)


def _wl_pod(c, w, name, owner, tpl, h):
    containers = tpl["spec"]["containers"]
    labels = dict((tpl.get("metadata") or {}).get("labels") or {})
    if w["kind"] == "Deployment":
        labels["pod-template-hash"] = h
    else:
        labels["controller-revision-hash"] = "%s-%s" % (w["name"], h)
        labels["statefulset.kubernetes.io/pod-name"] = name
    p = new_pod(c, w["namespace"], name, None, owner=owner, labels=labels,
                container=containers[0].get("name"), image=containers[0].get("image", ""))
    p["workload"] = wl_key(w["kind"], w["namespace"], w["name"])
    p["tpl_hash"] = h
    p["containers"] = [x.get("name") for x in containers]
    p["env"] = {e["name"]: str(e.get("value", "")) for e in containers[0].get("env") or [] if "name" in e}
    return p


def reconcile_workloads(c):
    for key, w in list(c.get("workloads", {}).items()):
        obj = get_object(c, w["kind"], w["namespace"], w["name"])
        owned = {k: p for k, p in c["pods"].items() if p.get("workload") == key}
        if obj is None:
            workload_deleted(c, w["kind"], w["namespace"], w["name"])
            continue
        h, tpl = w["current"], current_revision(w)["template"]
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        if w["kind"] == "Deployment":
            for k, p in owned.items():
                if p.get("tpl_hash") != h:
                    remove_pod(c, k, recreate=False)
            cur = sorted((k for k, p in owned.items() if p.get("tpl_hash") == h),
                         key=lambda k: c["pods"][k]["created"])
            for k in cur[replicas:]:
                remove_pod(c, k, recreate=False)
            for _ in range(replicas - len(cur)):
                _wl_pod(c, w, ks.generated_name("%s-%s-" % (w["name"], h)), ("ReplicaSet", "%s-%s" % (w["name"], h)),
                        tpl, h)
        else:
            for k, p in owned.items():
                ordinal = p["name"].rsplit("-", 1)[-1]
                if not ordinal.isdigit() or int(ordinal) >= replicas or p.get("tpl_hash") != h:
                    remove_pod(c, k, recreate=False)
            for i in range(replicas):
                pname = "%s-%d" % (w["name"], i)
                if "%s/%s" % (w["namespace"], pname) not in c["pods"]:
                    _wl_pod(c, w, pname, ("StatefulSet", w["name"]), tpl, h)
        mine = [p for p in c["pods"].values() if p.get("workload") == key]
        current = [p for p in mine if p.get("tpl_hash") == h]
        running = sum(1 for p in current if pod_phase(c, p) == "Running")
        counts = {"replicas": len(mine), "updatedReplicas": len(current), "readyReplicas": running,
                  "availableReplicas": running}
        st = {k: v for k, v in counts.items() if v}  # the API leaves zero counts out
        st["observedGeneration"] = obj["metadata"].get("generation", 1)
        if w["kind"] == "StatefulSet":
            st["currentRevision"] = st["updateRevision"] = "%s-%s" % (w["name"], h)
            st["currentReplicas"] = len(current)
        obj["status"] = st


def service_admit(c, obj, old):
    """Check a Service's node ports as the API server does; an error text when one is outside the
    range, taken by another Service, or set on a ClusterIP Service, else None. The cluster IP and
    the node ports left unset are allocated by `service_allocate` when the object is stored."""
    spec = obj.setdefault("spec", {})
    name = obj["metadata"]["name"]
    kind = spec.get("type", "ClusterIP")
    taken = {}
    for o in list_objects(c, "Service"):
        if o["metadata"]["namespace"] == obj["metadata"]["namespace"] and o["metadata"]["name"] == name:
            continue
        for p in (o.get("spec") or {}).get("ports") or []:
            if p.get("nodePort"):
                taken[p["nodePort"]] = o["metadata"]["name"]
    for i, p in enumerate(spec.get("ports") or []):
        np = p.get("nodePort")
        if np is None:
            continue
        if kind not in ("NodePort", "LoadBalancer"):
            return ('The Service "%s" is invalid: spec.ports[%d].nodePort: Forbidden: may not be used when '
                    '`type` is \'ClusterIP\'' % (name, i))
        if not 30000 <= np <= 32767:
            return ('The Service "%s" is invalid: spec.ports[%d].nodePort: Invalid value: %d: provided port is not '
                    'in the valid range. The range of valid ports is 30000-32767' % (name, i, np))
        if np in taken:
            return ('The Service "%s" is invalid: spec.ports[%d].nodePort: Invalid value: %d: provided port is '
                    'already allocated' % (name, i, np))
        taken[np] = name
    return None
