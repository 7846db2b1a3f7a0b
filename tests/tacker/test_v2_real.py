"""Tacker 16's OWN v2 Helm infra driver deploys a chart on the cluster our hook recorded, on a
REAL Kubernetes API (issue 21, "Tacker 16"): the proof that a Tacker operator can use the
vimConnectionInfo entry mgmt-driver returns.

Run with the Tacker venv's python, as root, after scripts/build-control-plane.sh:

    "$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2_real.py [-v]

1. A real-API kit lab (docs/labkit.md "Real-API mode"; lab `rt`, net 99, 1 master + 1 worker):
   Tacker's `VnfLcmDriverV2._exec_mgmt_driver_script` runs our package's shim for
   instantiate_start/instantiate_end, as in test_v2.py, and Tacker applies the returned instance.
2. The `kubernetes_vim` entry of that instance goes, unchanged, into an InstantiateVnfRequest for
   flavour cnf of the same package. Tacker's own conductor steps run it: `instantiate_grant`
   (the grant request from the VNFD), `instantiate_post_grant` (its checks of a Helm VIM) and
   `instantiate_process`, which picks `infra_drivers.kubernetes.helm.Helm`. That driver writes
   the entry's CA to a file and runs the `helm` CLI on this host (a real helm 3 on PATH) with
   `--kube-apiserver/--kube-ca-file/--kube-token`, and reads the API with the kubernetes Python
   client. Nothing on that path is mocked; only the NFVO (no grant is asked for: an empty
   GrantV1, as Tacker's local NFVO answers for a CNF) and the database are absent.
3. The real kubectl (admin.conf on the master) sees the release's Deployment and its pods
   Running (KWOK moves them, the real controllers made them); the real helm lists the release.
4. Tacker's `terminate_process` (helm uninstall) removes it again.

Without root or without the control plane built the test is skipped with a loud message.
Other real-API labs run at the same time (nets 95-98); this one holds about 0.6 GB.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.dont_write_bytecode = True  # importing test_v2 leaves no __pycache__ in the clone
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_v2 as v2  # noqa: E402  (imports and registers Tacker's objects)
from test_v2 import objects, vnflcm_driver_v2  # noqa: E402

REPO = v2.REPO
LAB_NAME, LAB_NET = "rt", 99
LAB_DIR = os.path.join(REPO, "target", "lab", LAB_NAME)
CHART = "Files/kubernetes/samplecnf-0.1.0.tgz"
NAMESPACE = "tacker-helm"
NEEDED = ("etcd", "etcdctl", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
          "kubectl", "kwok")


def control_plane():
    """The bin dir scripts/build-control-plane.sh builds into (it builds nothing with
    --print-key), or (None, why) when a binary the real-API mode needs is missing."""
    r = subprocess.run(["bash", os.path.join(REPO, "scripts/build-control-plane.sh"),
                        "--print-key"], capture_output=True, text=True)
    lines = r.stdout.split()
    bindir = lines[-1] if lines else ""
    missing = [b for b in NEEDED if not os.access(os.path.join(bindir, b), os.X_OK)]
    if r.returncode != 0 or not bindir or missing:
        return None, "the control plane is not built (%s missing in %r): run " \
                     "scripts/build-control-plane.sh once (~10 min)" % (", ".join(missing), bindir)
    return bindir, ""


BINDIR, WHY_NOT = control_plane() if v2.is_root() else (None, "needs root")


def lab_sh(*args, check=True):
    return v2.lab_sh(*args, check=check)


@unittest.skipUnless(BINDIR, "real-API lab: " + WHY_NOT)
class TackerHelmOnTheRealApi(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(v2.BIN, os.X_OK):
            raise AssertionError("%s is missing: run cargo build first" % v2.BIN)
        helm = os.path.join(REPO, "target", "helm")
        r = subprocess.run(["bash", os.path.join(REPO, "tests/labkit/fetch-helm.sh"), helm],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("fetch-helm.sh: %s%s" % (r.stdout, r.stderr))
        cls.helm = os.path.join(helm, "helm3", "helm")
        cls.tmp = tempfile.mkdtemp(prefix="tkv2-real-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.addClassCleanup(lab_sh, "down", "--name", LAB_NAME, check=False)
        offline = os.path.join(cls.tmp, "offline")
        tarball = [f for f in os.listdir(os.path.join(helm, "helm3"))
                   if f.endswith("-linux-amd64.tar.gz")][0]
        r = subprocess.run(["bash", os.path.join(REPO, "tests/labkit/make-offline-dir.sh"),
                            offline, os.path.join(helm, "helm3", tarball)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("make-offline-dir.sh: %s" % r.stderr)
        cls.pkg = v2.build_package(os.path.join(cls.tmp, "pkg"), helm=cls.helm, offline=offline)
        cls.tacker = v2.TackerSide(cls.pkg)
        # Tacker's helm client runs `helm` from PATH on the conductor: the real helm 3, with a
        # home of its own so that nothing of this host's helm config is read or written.
        cls.path_dir = os.path.join(cls.tmp, "path")
        os.makedirs(cls.path_dir)
        os.symlink(cls.helm, os.path.join(cls.path_dir, "helm"))
        cls.helm_env = {"PATH": cls.path_dir + os.pathsep + os.environ.get("PATH", ""),
                        "HELM_CONFIG_HOME": os.path.join(cls.tmp, "helm", "config"),
                        "HELM_CACHE_HOME": os.path.join(cls.tmp, "helm", "cache"),
                        "HELM_DATA_HOME": os.path.join(cls.tmp, "helm", "data"),
                        "KUBECONFIG": os.path.join(cls.tmp, "no-kubeconfig")}
        lab_sh("down", "--name", LAB_NAME, check=False)
        start = time.monotonic()
        lab_sh("up", "2", "--kit", "--control-plane", BINDIR, "--name", LAB_NAME,
               "--net", str(LAB_NET))
        v2.TIMINGS.append(("lab up (2 real-API kit nodes; not Tacker)", time.monotonic() - start))
        with open(os.path.join(LAB_DIR, "password")) as f:
            cls.password = f.read().strip()
        ip = lambda i: "198.18.%d.%d" % (LAB_NET, 10 + i)  # noqa: E731
        cls.master = v2.Vm("masterNode", 0, ip(1))
        cls.worker = v2.Vm("workerNode", 0, ip(2))
        cls.state = os.path.join(cls.tmp, "state")

    def on(self, i, cmd):
        return lab_sh("exec", str(i), "--name", LAB_NAME, "--", "sh", "-c", cmd).stdout

    def kubectl(self, args):
        return self.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl %s 2>&1" % args)

    def params(self):
        node = {"username": "mduser", "password": self.password}
        return {"k8s_cluster_installation_param": {
            "script_path": "Scripts/install_k8s_cluster.sh",
            "helm_installation_script_path": "Scripts/install_helm.sh",
            "vim_name": "kubernetes_vim",
            "master_node": dict(node, vdu_id="masterNode", ssh_cp_name="masterNode_CP1",
                                nic_cp_name="masterNode_CP1", cluster_cp_name="masterNode_CP1",
                                pod_cidr="192.168.0.0/16",
                                cluster_cidr="10.199.187.0/24"),
            "worker_node": dict(node, vdu_id="workerNode", ssh_cp_name="workerNode_CP1",
                                nic_cp_name="workerNode_CP1"),
            "offline_artifacts_path": "Files/offline",
            "script_environment": {"K8S_ALLOW_ANY_OS": "1"}}}

    def cluster_entry(self):
        """Step 1: Tacker v2 runs our hook; its instance then holds our kubernetes_vim entry."""
        vms = [self.master, self.worker]
        req = objects.InstantiateVnfRequest.from_dict({
            "flavourId": "simple", "vimConnectionInfo": v2.OPENSTACK_VIM,
            "additionalParams": self.params()})
        inst = objects.VnfInstanceV2.from_dict(v2.instance_dict(
            "rt-cluster", "simple", vms, v2.OPENSTACK_VIM))
        grant_req, grant = v2.grant_pair(inst, "INSTANTIATE", add=vms)
        with v2.Env(self.state):
            self.tacker.call("instantiate_start (real API)", "instantiate_start", "simple", req,
                             inst, grant_req, grant)
            self.tacker.call("instantiate_end (real API, 1 master + 1 worker)",
                             "instantiate_end", "simple", req, inst, grant_req, grant)
        entry = v2.k8s_entry(inst)
        self.assertIsNotNone(entry, "Tacker's instance has no kubernetes_vim entry")
        return entry

    def lcm(self, label, operation, req, inst):
        """One LCM operation as Tacker's conductor runs it, minus the database and the NFVO:
        the grant request from the driver's own `<op>_grant` (as VnfLcmDriverV2.grant makes
        it), an empty GrantV1 (Tacker's local NFVO asks nothing of a CNF), then `post_grant`
        and `<op>_process`, which pick the Helm infra driver from the instance's VIM."""
        driver = vnflcm_driver_v2.VnfLcmDriverV2()
        lcmocc = objects.VnfLcmOpOccV2(id=str(uuid.uuid4()), operation=operation,
                                       operationState="STARTING", isAutomaticInvocation=False,
                                       operationParams=req)
        grant_req = objects.GrantRequestV1(vnfInstanceId=inst.id, vnfLcmOpOccId=lcmocc.id,
                                           vnfdId=inst.vnfdId, operation=operation,
                                           isAutomaticInvocation=False)
        getattr(driver, operation.lower() + "_grant")(grant_req, req, inst, self.tacker.vnfd)
        grant = objects.GrantV1(id=str(uuid.uuid4()), vnfInstanceId=inst.id,
                                vnfLcmOpOccId=lcmocc.id)
        driver.post_grant(None, lcmocc, inst, grant_req, grant, self.tacker.vnfd)
        with HostEnv(self.helm_env):
            v2.timed(label, getattr(driver, operation.lower() + "_process"), None, lcmocc,
                     inst, grant_req, grant, self.tacker.vnfd)
        return grant_req

    def running(self, inst, deployment):
        """Tacker's VNFCs and the Running pods of the Deployment in the real API."""
        tacker = sorted(v.computeResource.resourceId
                        for v in inst.instantiatedVnfInfo.vnfcResourceInfo)
        out = self.kubectl("get pods -n %s -o jsonpath='{range .items[*]}{.metadata.name} "
                           "{.status.phase} {.spec.nodeName}{\"\\n\"}{end}'" % NAMESPACE)
        real = sorted(f[0] for f in map(str.split, out.splitlines())
                      if f[0].startswith(deployment + "-") and f[1:] == ["Running", "worker12"])
        return tacker, real

    def test_tackers_helm_driver_deploys_a_chart_with_our_entry(self):
        entry = self.cluster_entry()
        self.assertEqual(entry.vimType, "ETSINFV.HELM.V_3")
        self.assertEqual(entry.interfaceInfo["endpoint"], "https://%s:6443" % self.master.address)
        self.assertIn("helm_info", entry.extra)
        nodes = self.kubectl("get nodes -o name").split()
        self.assertEqual(sorted(nodes), ["node/master11", "node/worker12"], nodes)

        # Step 2: the entry, unchanged, is the CNF's VIM in Tacker's own instantiate.
        inst = objects.VnfInstanceV2(id=str(uuid.uuid4()), vnfdId=self.tacker.vnfd.vnfd_id,
                                     vnfProvider="mgmt-driver",
                                     vnfProductName="mgmt-driver sample VNF",
                                     vnfSoftwareVersion="1.0", vnfdVersion="1.0",
                                     instantiationState="NOT_INSTANTIATED")
        # Tacker names the release `vnf<instance id without dashes>`, and maps a VDU to the
        # resource whose name is `<VDU name>-<a string without '-'>` (helm.py,
        # _select_vdu_reses); the sample chart lets the operator name its Deployment so.
        # Not `vdu1-samplecnf-<release>`: the real API cuts a generated Pod name's base to 58
        # characters, which cut that Deployment's pod-template-hash, so Tacker's pattern
        # `<deployment>-<hash>-<5 chars>` matched no Pod and its vnfcResourceInfo stayed empty.
        release = "vnf" + inst.id.replace("-", "")
        deployment = "vdu1-samplecnf-" + inst.id.split("-")[0]
        req = objects.InstantiateVnfRequest.from_dict({
            "flavourId": "cnf", "vimConnectionInfo": {"kubernetes_vim": entry.to_dict()},
            "additionalParams": {"helm_chart_path": CHART, "namespace": NAMESPACE,
                                 "helm_value_names": {"VDU1": {"replica": "replicaCount"}},
                                 "helm_parameters": {"fullnameOverride": deployment}}})
        grant_req = self.lcm("Tacker instantiate: Helm.instantiate (helm install, wait Ready)",
                             "INSTANTIATE", req, inst)
        self.assertEqual([(r.type, r.resourceTemplateId) for r in grant_req.addResources],
                         [("COMPUTE", "VDU1")])
        self.assertEqual(inst.vimConnectionInfo["kubernetes_vim"].to_dict(), entry.to_dict())
        info = inst.instantiatedVnfInfo
        self.assertEqual(inst.instantiationState, "INSTANTIATED")
        self.assertEqual(info.metadata["release_name"], release)
        self.assertEqual(info.metadata["namespace"], NAMESPACE)
        self.assertEqual(list(info.metadata["vdu_reses"]), ["VDU1"])
        self.assertEqual(info.metadata["vdu_reses"]["VDU1"]["metadata"]["name"], deployment)
        self.assertEqual([v.vduId for v in info.vnfcResourceInfo], ["VDU1"])

        # Step 3: the real kubectl and the real helm on the master see what Tacker made.
        tacker, real = self.running(inst, deployment)
        self.assertEqual((len(tacker), tacker), (1, real), self.kubectl(
            "get deploy,rs,pods -n %s -o wide" % NAMESPACE))
        got = self.kubectl("get deployment %s -n %s -o jsonpath='{.status.readyReplicas}'"
                           % (deployment, NAMESPACE))
        self.assertEqual(got.strip(), "1", got)
        releases = self.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n %s -q"
                              % NAMESPACE)
        self.assertEqual(releases.split(), [release], releases)

        # Scale out one step: `helm upgrade --reuse-values --set replicaCount=2`, and Tacker
        # waits until the real ReplicaSet's second pod runs (KWOK).
        scale = objects.ScaleVnfRequest.from_dict({"type": "SCALE_OUT", "aspectId": "vdu1_aspect",
                                                   "numberOfSteps": 1})
        self.lcm("Tacker scale out: Helm.scale (helm upgrade, wait 2 pods)", "SCALE", scale, inst)
        tacker, real = self.running(inst, deployment)
        self.assertEqual((len(tacker), tacker), (2, real))
        self.assertEqual(inst.instantiatedVnfInfo.metadata["revision"], "2")

        # Heal one VNFC (SOL002): Tacker deletes the pod through the API with our token and
        # waits for the one the real ReplicaSet controller makes instead.
        old = tacker[0]
        vnfc = [v.id for v in inst.instantiatedVnfInfo.vnfcInfo if v.vnfcResourceInfoId == old]
        heal = objects.HealVnfRequest.from_dict({"vnfcInstanceId": vnfc})
        self.lcm("Tacker heal: delete 1 pod, wait for its replacement", "HEAL", heal, inst)
        tacker, real = self.running(inst, deployment)
        self.assertEqual((len(tacker), tacker), (2, real))
        self.assertNotIn(old, tacker)

        # Step 4: Tacker's terminate (helm uninstall, then it waits until the objects are gone).
        term_req = objects.TerminateVnfRequest.from_dict({"terminationType": "FORCEFUL"})
        self.lcm("Tacker terminate: Helm.terminate (helm uninstall, wait gone)", "TERMINATE",
                 term_req, inst)
        releases = self.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf helm list -n %s -q"
                              % NAMESPACE)
        self.assertEqual(releases.split(), [], releases)
        # Tacker waits for the chart's objects (the Deployment) to go; the Pods follow through
        # the real garbage collector, and KWOK deletes them at once when asked.
        self.assertEqual(self.kubectl("get deployments -n %s -o name" % NAMESPACE).split(), [])
        gone = self.kubectl("wait --for=delete pods --all -n %s --timeout=60s; echo rc=$?"
                            % NAMESPACE)
        self.assertIn("rc=0", gone)


class HostEnv:
    """Environment variables for the Tacker-side calls, restored afterwards."""

    def __init__(self, env):
        self.env, self.saved = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":
    if not BINDIR:
        sys.stderr.write("*** test_v2_real.py SKIPPED: %s ***\n" % WHY_NOT)
    prog = unittest.main(exit=False, verbosity=2)
    v2.print_timings()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
