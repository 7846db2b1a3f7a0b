"""Tacker v2 with a real Keystone v3 and a real Neutron (issue 22): what stock Tacker records for
dynamic addresses (`isDynamic: true`, no address) is enough. Tacker's own conductor
(`VnfLcmDriverV2._exec_mgmt_driver_script`) runs our shim with instances that carry no address,
and our hook asks the instance's VIM entry's Keystone and Neutron for the masters, the workers,
the VIP (the masters' allowed address pair) and the floating IPs.

- `Cloud`: dry runs (no node contacted): every address, the VIP and a floating IP, and the
  operator's allow-list (`MGMT_DRIVER_VIM_AUTH_URLS`).
- `CloudLab` (root): the cluster's whole life cycle on kit nodes (lab `tkc`, net 73), with
  Tacker's real id scheme: a scale-out's worker is a new server on a new port, a heal a new
  server id on the same port, a scale-in deletes the port.

The cloud is the OpenStack lab of scripts/openstack-lab.sh (docs/openstack-lab.md), populated
with tests/openstack/cloud.py: one for the module, a project of its own for each class.

    "$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2_cloud.py [-v] [Cloud|CloudLab]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_v2 as v2  # noqa: E402  (Tacker's objects, the shim's environment, our package)

REPO = v2.REPO

LAB_SH = os.path.join(REPO, "scripts", "openstack-lab.sh")
CLOUD_PY = os.path.join(REPO, "tests", "openstack")
VIM_PW = "vim-pw-cloud-7d1e"
NODE_PW = "node-pw-cloud-2b9a"


def dynamic(vm):
    """The external CP as stock Tacker records a dynamic address: no address."""
    cp = vm.ext_cp_info()
    cp["cpProtocolInfo"] = [{"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {
        "ipAddresses": [{"type": "IPV4", "isDynamic": True}]}}]
    cp["extLinkPortId"] = "elp-" + vm.port
    return cp


CLOUD = {}


def setUpModule():
    """One OpenStack lab for both classes (each has a project and user of its own), down at the
    end of the module. Skips loudly (fails under CI=true) when the lab is not in the tree."""
    if not (os.path.exists(LAB_SH) and os.path.exists(os.path.join(CLOUD_PY, "cloud.py"))):
        if os.environ.get("CI") == "true":
            raise AssertionError("scripts/openstack-lab.sh or tests/openstack/cloud.py missing")
        raise unittest.SkipTest("*** no OpenStack lab in this tree (scripts/openstack-lab.sh): SKIPPED ***")
    sys.path.insert(0, CLOUD_PY)
    import cloud  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="tkc-cloud-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    # MariaDB runs as `mysql` under root: it must reach its directory.
    os.chmod(tmp, 0o755)
    lab = os.path.join(tmp, "cloud")
    unittest.addModuleCleanup(subprocess.run, ["bash", LAB_SH, "down", lab], capture_output=True)
    start = time.monotonic()
    r = subprocess.run(["bash", LAB_SH, "up", lab], capture_output=True, text=True)
    v2.TIMINGS.append(("OpenStack lab up (Keystone, Neutron, MariaDB; not Tacker)", time.monotonic() - start))
    if r.returncode != 0:
        raise AssertionError("openstack-lab.sh up failed:\n" + r.stdout + r.stderr)
    CLOUD["c"] = cloud.Cloud(os.path.join(lab, "cloud.json"))


def stock_instance(inst_id, vms, vim, ports, recorded):
    """What Tacker's OpenStack infra driver records: no address anywhere (every CP dynamic); the
    ports of the VMs in RECORDED as external link ports (their Neutron ids), the others' not
    recorded (the driver finds them by the VM, Neutron's device_id)."""
    d = v2.instance_dict(inst_id, "simple", vms, vim)
    d["instantiatedVnfInfo"]["extCpInfo"] = [dynamic(vm) for vm in vms]
    d["instantiatedVnfInfo"]["extVirtualLinkInfo"] = [{
        "id": "ext-vl", "resourceHandle": {"resourceId": "ext-vl-net"},
        "extLinkPorts": [{"id": "elp-" + vm.port, "cpInstanceId": vm.ext_cp,
                          "resourceHandle": {"resourceId": ports[vm.port],
                                             "vimLevelResourceType": "OS::Neutron::Port"}}
                         for vm in vms if vm in recorded]}]
    return v2.objects.VnfInstanceV2.from_dict(d)


class Cloud(unittest.TestCase):
    """Dry runs (no node contacted): the addresses, the VIP and a floating IP from the cloud, and
    the operator's allow-list."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tkc-cloud-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        c = CLOUD["c"]
        cls.auth_url = c.auth_url
        acc = c.tenant("tkc", "tkc_user", VIM_PW)
        net = c.network("tkc-net", "10.73.0.0/24", auth=acc)
        ext = c.external_network("203.0.113.0/24")
        c.router(ext, net["subnet"], auth=acc)
        cls.masters = [v2.Vm("masterNode", n, "10.73.0.1%d" % n) for n in range(3)]
        cls.worker = v2.Vm("workerNode", 0, "10.73.0.20")
        cls.ports = {}
        for vm in cls.masters + [cls.worker]:
            pairs = ["10.73.0.100"] if vm.vdu == "masterNode" else None
            p = c.port(net, vm.address, name="stk-%s-x" % vm.cpd, device_id=vm.server,
                       allowed_address_pairs=pairs, auth=acc)
            cls.ports[vm.port] = p["id"]
        c.floating_ip(ext, cls.ports[cls.masters[0].port], "203.0.113.10")
        cls.vim = {"vim1": {"vimId": "d82ee798-a1d2-4854-8f74-4892ad706751",
                            "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
                            "interfaceInfo": {"endpoint": c.auth_url}, "accessInfo": acc}}
        cls.pkg = v2.build_package(os.path.join(cls.tmp, "pkg"))
        cls.tacker = v2.TackerSide(cls.pkg)

    def instance(self):
        vms = self.masters + [self.worker]
        return stock_instance("tkc-cluster", vms, self.vim, self.ports, self.masters)

    def test_an_address_tacker_copied_to_every_port_of_a_cp_comes_from_the_cloud(self):
        """Fixed addresses on a CP with several VNFCs: Tacker's infra driver records the CP's
        first cpConfig on every port, so all three masters' external CPs carry master 0's
        address. The driver trusts none of the copies and asks Neutron."""
        node = {"username": "ubuntu", "password": NODE_PW}
        params = {"script_path": "Scripts/install_k8s_cluster.sh", "vim_name": "kubernetes_vim",
                  "master_node": dict(node, vdu_id="masterNode", ssh_cp_name="masterNode_CP1",
                                      nic_cp_name="masterNode_CP1", cluster_cp_name="vip_CP"),
                  "worker_node": dict(node, vdu_id="workerNode", ssh_cp_name="workerNode_CP1",
                                      nic_cp_name="workerNode_CP1")}
        req = v2.objects.InstantiateVnfRequest.from_dict(
            {"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": params}})
        vms = self.masters + [self.worker]
        d = stock_instance("tkc-copied", vms, self.vim, self.ports, self.masters).to_dict()
        for cp in d["instantiatedVnfInfo"]["extCpInfo"]:
            if cp["cpdId"] == "masterNode_CP1":
                cp["cpProtocolInfo"] = v2.ip_info(self.masters[0].address)
        inst = v2.objects.VnfInstanceV2.from_dict(d)
        grant_req, grant = v2.grant_pair(inst, "INSTANTIATE", add=vms)
        env = v2.Env(os.path.join(self.tmp, "state-copied"), "--dry-run")
        env.vars["MGMT_DRIVER_VIM_AUTH_URLS"] = self.auth_url
        log = os.path.join(self.tmp, "copied.log")
        env.vars["MGMT_DRIVER_HOOK_LOG"] = log  # the shim keeps the hook's progress there
        with env:
            self.tacker.call("cloud: instantiate_end (copied fixed addresses)", "instantiate_end", "simple",
                             req, inst, grant_req, grant)
        self.assertIsNotNone(v2.k8s_entry(inst), inst.vimConnectionInfo)
        with open(log) as f:
            raw = f.read()
        # The dry run's plan: every master installs with the masters' list (`-m a,b,c`).
        lists = set(re.findall(r"install_k8s_cluster\.sh -m (\S+)", raw))
        want = ",".join(m.address for m in self.masters)
        self.assertEqual(lists, {want}, "each master's own port's address, from Neutron:\n" + raw[-2000:])

    def test_instantiate_end_finds_every_address_in_the_cloud(self):
        params = {"script_path": "Scripts/install_k8s_cluster.sh", "vim_name": "kubernetes_vim",
                  "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1_floating_ip",
                                  "nic_cp_name": "masterNode_CP1", "cluster_cp_name": "vip_CP",
                                  "username": "ubuntu", "password": NODE_PW},
                  "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP1",
                                  "nic_cp_name": "workerNode_CP1", "username": "ubuntu", "password": NODE_PW}}
        req = v2.objects.InstantiateVnfRequest.from_dict(
            {"flavourId": "simple", "additionalParams": {"k8s_cluster_installation_param": params}})
        inst = self.instance()
        grant_req, grant = v2.grant_pair(inst, "INSTANTIATE", add=self.masters + [self.worker])
        env = v2.Env(os.path.join(self.tmp, "state"), "--dry-run")
        env.vars["MGMT_DRIVER_VIM_AUTH_URLS"] = self.auth_url
        with env:
            self.tacker.call("cloud: instantiate_end", "instantiate_end", "simple", req, inst, grant_req, grant)
        entry = v2.k8s_entry(inst)
        self.assertIsNotNone(entry, inst.vimConnectionInfo)
        self.assertEqual(entry.interfaceInfo["endpoint"], "https://10.73.0.100:6443", "the VIP from Neutron")
        # Without the operator's allow-list the tenant's endpoint is never used.
        env = v2.Env(os.path.join(self.tmp, "state2"), "--dry-run")
        with env, self.assertRaises(Exception) as e:
            self.tacker.call("cloud: not allowed", "instantiate_end", "simple", req, self.instance(),
                             grant_req, grant)
        text = str(e.exception)
        self.assertIn("interfaceInfo.endpoint", text)
        self.assertNotIn(VIM_PW, text)


LAB_NAME, LAB_NET = "tkc", 73


@unittest.skipUnless(v2.is_root(), "the lab needs root")
class CloudLab(unittest.TestCase):
    """The cluster's life cycle on kit nodes (lab tkc, net 73) with Tacker's real id scheme and
    only what stock Tacker records: every address dynamic, the masters' ports recorded as
    external link ports, the workers' not; a scale-out's worker is a new server on a new port;
    a heal is a new server (new id) on the same port. Every address comes from the real
    Keystone and Neutron, where the ports hold the lab nodes' addresses."""

    N = 5

    @classmethod
    def setUpClass(cls):
        if not os.access(v2.BIN, os.X_OK):
            raise AssertionError("%s is missing: run cargo build first" % v2.BIN)
        cls.tmp = tempfile.mkdtemp(prefix="tkc-lab-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.c = CLOUD["c"]
        cls.addClassCleanup(v2.lab_sh, "down", "--name", LAB_NAME, check=False)
        cls.pkg = v2.lab_package(cls.tmp)
        cls.tacker = v2.TackerSide(cls.pkg)
        start = time.monotonic()
        v2.lab_sh("up", str(cls.N), "--kit", "--name", LAB_NAME, "--net", str(LAB_NET))
        v2.TIMINGS.append(("lab up (%d kit nodes; not Tacker)" % cls.N, time.monotonic() - start))
        with open(os.path.join(v2.REPO, "target", "lab", LAB_NAME, "password")) as f:
            cls.password = f.read().strip()
        ip = lambda i: "198.18.%d.%d" % (LAB_NET, 10 + i)  # noqa: E731
        cls.vip = ip(90)
        cls.masters = [v2.Vm("masterNode", i, ip(i + 1)) for i in range(3)]
        cls.workers = [v2.Vm("workerNode", 0, ip(4)), v2.Vm("workerNode", 1, ip(5))]
        cls.node_of = {vm.server: i + 1 for i, vm in enumerate(cls.masters + cls.workers)}
        cls.acc = cls.c.tenant("tkclab", "tkclab_user", VIM_PW)
        cls.net = cls.c.network("tkc-lab", "198.18.%d.0/24" % LAB_NET, auth=cls.acc)
        cls.ports = {}
        for vm in cls.masters + cls.workers[:1]:
            cls.add_port(vm)
        cls.vim = {"vim1": {"vimId": "0b7d3a55-8f3e-4c61-9d53-2b1c47c6a9e1",
                            "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
                            "interfaceInfo": {"endpoint": cls.c.auth_url}, "accessInfo": cls.acc}}
        cls.state = os.path.join(cls.tmp, "state")

    @classmethod
    def add_port(cls, vm):
        """The port Heat makes for VM's CP (named `<stack>-<CP>-<suffix>`), bound to its server;
        the masters allow the VIP (keepalived moves it between them)."""
        pairs = [cls.vip] if vm.vdu == "masterNode" else None
        p = cls.c.port(cls.net, vm.address, name="stk-%s-%s" % (vm.cpd, vm.n), device_id=vm.server,
                       allowed_address_pairs=pairs, auth=cls.acc)
        cls.ports[vm.port] = p["id"]

    def params(self):
        node = {"username": "mduser", "password": self.password}
        return {"k8s_cluster_installation_param": {
            "script_path": "Scripts/install_k8s_cluster.sh",
            "helm_installation_script_path": "Scripts/install_helm.sh",
            "vim_name": "kubernetes_vim",
            "master_node": dict(node, vdu_id="masterNode", ssh_cp_name="masterNode_CP1",
                                nic_cp_name="masterNode_CP1", cluster_cp_name="vip_CP",
                                pod_cidr="192.168.0.0/16", cluster_cidr="10.199.187.0/24"),
            "worker_node": dict(node, vdu_id="workerNode", ssh_cp_name="workerNode_CP1",
                                nic_cp_name="workerNode_CP1"),
            "offline_artifacts_path": "Files/offline",
            "script_environment": {"K8S_ALLOW_ANY_OS": "1"}}}

    def env(self):
        e = v2.Env(self.state)
        e.vars["MGMT_DRIVER_VIM_AUTH_URLS"] = self.c.auth_url
        return e

    def on(self, i, cmd):
        return v2.lab_sh("exec", str(i), "--name", LAB_NAME, "--", "sh", "-c", cmd).stdout

    def k8s_nodes(self):
        out = self.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes -o name")
        return sorted(line.split("/", 1)[1] for line in out.split() if "/" in line)

    @staticmethod
    def hostnames(vms):
        role = {"masterNode": "master", "workerNode": "worker"}
        return sorted("%s%s" % (role[vm.vdu], vm.address.rsplit(".", 1)[1]) for vm in vms)

    def instance(self, vms):
        return stock_instance("tkc-cluster", vms, self.vim, self.ports, self.masters)

    def test_lifecycle_with_addresses_from_neutron(self):
        req = v2.objects.InstantiateVnfRequest.from_dict({
            "flavourId": "simple", "vimConnectionInfo": self.vim, "additionalParams": self.params()})
        first = self.masters + self.workers[:1]
        inst = self.instance(first)
        self.assertNotIn(self.masters[0].address, json.dumps(inst.to_dict()),
                         "the instance carries no address: they must come from the cloud")
        grant_req, grant = v2.grant_pair(inst, "INSTANTIATE", add=first)
        with self.env():
            self.tacker.call("cloud lab: instantiate_start", "instantiate_start", "simple", req, inst,
                             grant_req, grant)
            self.tacker.call("cloud lab: instantiate_end (3 masters + 1 worker, addresses from Neutron)",
                             "instantiate_end", "simple", req, inst, grant_req, grant)
        entry = v2.k8s_entry(inst)
        self.assertIsNotNone(entry, "Tacker's instance has no kubernetes_vim entry")
        self.assertEqual(entry.interfaceInfo["endpoint"], "https://%s:16443" % self.vip,
                         "the VIP is the address every master's Neutron port allows")
        self.assertEqual(sorted(entry.extra["helm_info"]["masternode_ip"]),
                         sorted(m.address for m in self.masters))
        self.assertEqual(self.k8s_nodes(), self.hostnames(first))

        # SCALE_OUT: Tacker's Heat made a new server with a new port; Tacker records neither
        # its address nor (for a worker) its port.
        new = self.workers[1]
        self.add_port(new)
        out_req = v2.objects.ScaleVnfRequest.from_dict({"type": "SCALE_OUT", "aspectId": "worker_instance",
                                                        "numberOfSteps": 1})
        grant_req, grant = v2.grant_pair(inst, "SCALE", add=[new])
        with self.env():
            self.tacker.call("cloud lab: scale_start (SCALE_OUT)", "scale_start", "simple", out_req, inst,
                             grant_req, grant)
            cluster = first + [new]
            inst.instantiatedVnfInfo = self.instance(cluster).instantiatedVnfInfo
            self.tacker.call("cloud lab: scale_end (SCALE_OUT, +1 worker from Neutron)", "scale_end",
                             "simple", out_req, inst, grant_req, grant)
        self.assertEqual(self.k8s_nodes(), self.hostnames(cluster))

        # HEAL a worker and a master as Tacker v2 does: a new server (new id) on the same port;
        # Nova binds the port to the new server, so Neutron's device_id changes between the hooks.
        for label, vm in (("worker", self.workers[1]), ("master", self.masters[2])):
            heal_req = v2.objects.HealVnfRequest.from_dict({"vnfcInstanceId": [vm.vnfc_info_id]})
            grant_req, grant = v2.grant_pair(inst, "HEAL", remove=[vm], add=[vm])
            healed = vm.replaced()
            with self.env():
                self.tacker.call("cloud lab: heal_start (%s)" % label, "heal_start", "simple", heal_req,
                                 inst, grant_req, grant)
                self.on(self.node_of[vm.server], v2.FRESH_VM)
                self.c.update_port(self.ports[vm.port], auth=self.acc, device_id=healed.server)
                self.node_of[healed.server] = self.node_of[vm.server]
                cluster = [healed if c is vm else c for c in cluster]
                if vm in self.masters:
                    self.masters = [healed if m is vm else m for m in self.masters]
                inst.instantiatedVnfInfo = self.instance(cluster).instantiatedVnfInfo
                self.tacker.call("cloud lab: heal_end (%s, new server id)" % label, "heal_end", "simple",
                                 heal_req, inst, grant_req, grant)
            self.assertEqual(self.k8s_nodes(), self.hostnames(cluster), label)

        # SCALE_IN: the grant names the first worker; Tacker deletes its server and port after
        # scale_start has drained it.
        gone = self.workers[0]
        in_req = v2.objects.ScaleVnfRequest.from_dict({"type": "SCALE_IN", "aspectId": "worker_instance",
                                                       "numberOfSteps": 1})
        grant_req, grant = v2.grant_pair(inst, "SCALE", remove=[gone])
        with self.env():
            self.tacker.call("cloud lab: scale_start (SCALE_IN)", "scale_start", "simple", in_req, inst,
                             grant_req, grant)
            self.c.delete_port(self.ports.pop(gone.port))
            cluster = [c for c in cluster if c is not gone]
            inst.instantiatedVnfInfo = self.instance(cluster).instantiatedVnfInfo
            self.tacker.call("cloud lab: scale_end (SCALE_IN)", "scale_end", "simple", in_req, inst,
                             grant_req, grant)
        self.assertEqual(self.k8s_nodes(), self.hostnames(cluster))

        term_req = v2.objects.TerminateVnfRequest.from_dict({"terminationType": "FORCEFUL"})
        grant_req, grant = v2.grant_pair(inst, "TERMINATE", remove=cluster)
        with self.env():
            self.tacker.call("cloud lab: terminate_end", "terminate_end", "simple", term_req, inst,
                             grant_req, grant)
        self.assertIsNone(v2.k8s_entry(inst), "terminate_end removes the VIM entry")


if __name__ == "__main__":
    if not v2.is_root():
        if os.environ.get("CI") == "true":
            sys.stderr.write("test_v2_cloud.py: the CloudLab tests need root, and CI=true: failing\n")
            sys.exit(1)
        sys.stderr.write("*** test_v2_cloud.py: CloudLab SKIPPED: needs root (the dry runs still run) ***\n")
    prog = unittest.main(exit=False, verbosity=2)
    v2.print_timings()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
