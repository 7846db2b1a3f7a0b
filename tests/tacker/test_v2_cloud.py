"""Tacker v2 with a real Keystone v3 and a real Neutron (issue 22): what stock Tacker records for
dynamic addresses (`isDynamic: true`, no address) is enough. Tacker's own conductor
(`VnfLcmDriverV2._exec_mgmt_driver_script`) runs our shim for instantiate_end with an instance of
three masters and a worker that carries no address, and our hook asks the instance's VIM entry's
Keystone and Neutron for the masters, the worker, the VIP (the masters' allowed address pair)
and the floating IPs. It runs the hook with `--dry-run`: no node is contacted, so no kit lab is
needed (the lab run of the same instance is the lead's, on lab `tkc`, net 73).

The cloud is the OpenStack lab of scripts/openstack-lab.sh, populated with
tests/openstack/cloud.py (both from the s27-cloudlab branch). When they are not in this tree the
test is SKIPPED loudly (under CI=true it fails).

    "$(bash scripts/tacker-venv.sh)" tests/tacker/test_v2_cloud.py [-v]
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_v2 as v2  # noqa: E402  (Tacker's objects, the shim's environment, our package)

REPO = v2.REPO
# The tree that holds the OpenStack lab: this one (after the merge), or OPENSTACK_LAB_REPO.
LAB_REPO = os.environ.get("OPENSTACK_LAB_REPO", REPO)
LAB_SH = os.path.join(LAB_REPO, "scripts", "openstack-lab.sh")
CLOUD_PY = os.path.join(LAB_REPO, "tests", "openstack")
VIM_PW = "vim-pw-cloud-7d1e"
NODE_PW = "node-pw-cloud-2b9a"


def dynamic(vm):
    """The external CP as stock Tacker records a dynamic address: no address."""
    cp = vm.ext_cp_info()
    cp["cpProtocolInfo"] = [{"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {
        "ipAddresses": [{"type": "IPV4", "isDynamic": True}]}}]
    cp["extLinkPortId"] = "elp-" + vm.port
    return cp


class Cloud(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (os.path.exists(LAB_SH) and os.path.exists(os.path.join(CLOUD_PY, "cloud.py"))):
            if os.environ.get("CI") == "true":
                raise AssertionError("scripts/openstack-lab.sh or tests/openstack/cloud.py missing")
            raise unittest.SkipTest("*** no OpenStack lab in this tree (scripts/openstack-lab.sh): SKIPPED ***")
        sys.path.insert(0, CLOUD_PY)
        import cloud  # noqa: E402
        cls.tmp = tempfile.mkdtemp(prefix="tkc-cloud-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        # MariaDB runs as `mysql` under root: it must reach its directory.
        os.chmod(cls.tmp, 0o755)
        lab = os.path.join(cls.tmp, "lab")
        r = subprocess.run(["bash", LAB_SH, "up", lab], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("openstack-lab.sh up failed:\n" + r.stdout + r.stderr)
        cls.addClassCleanup(subprocess.run, ["bash", LAB_SH, "down", lab], capture_output=True)
        c = cloud.Cloud(os.path.join(lab, "cloud.json"))
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
            cls.ports[vm.server] = p["id"]
        c.floating_ip(ext, cls.ports[cls.masters[0].server], "203.0.113.10")
        cls.vim = {"vim1": {"vimId": "d82ee798-a1d2-4854-8f74-4892ad706751",
                            "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
                            "interfaceInfo": {"endpoint": c.auth_url}, "accessInfo": acc}}
        cls.pkg = v2.build_package(os.path.join(cls.tmp, "pkg"))
        cls.tacker = v2.TackerSide(cls.pkg)

    def instance(self):
        """What Tacker's OpenStack infra driver records: masters' ports as external link ports
        (their Neutron ids), the worker's not recorded (found by its VM), no address anywhere."""
        vms = self.masters + [self.worker]
        d = v2.instance_dict("tkc-cluster", "simple", vms, self.vim)
        d["instantiatedVnfInfo"]["extCpInfo"] = [dynamic(vm) for vm in vms]
        d["instantiatedVnfInfo"]["extVirtualLinkInfo"] = [{
            "id": "tkc-net", "resourceHandle": {"resourceId": "tkc-net"},
            "extLinkPorts": [{"id": "elp-" + vm.port, "cpInstanceId": vm.ext_cp,
                              "resourceHandle": {"resourceId": self.ports[vm.server],
                                                 "vimLevelResourceType": "OS::Neutron::Port"}}
                             for vm in self.masters]}]
        return v2.objects.VnfInstanceV2.from_dict(d)

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


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=2)
    v2.print_timings()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
