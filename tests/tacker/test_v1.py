"""The Tacker v1 MgmtDriver (integrations/tacker-v1) called with Tacker's own v1 objects.

Run with the Tacker venv's python (tests/tacker/run-v1.sh installs the driver into it):

    target/tacker-venv/bin/python -m unittest tests/tacker/test_v1.py -v

- DryRun (no root): every hook with MGMT_DRIVER_HOOK_ARGS=--dry-run; the driver is
  loaded through Tacker's own stevedore manager and VnfLcmDriver._load_vnf_interface
  (hash check against the package's copy), as the v1 conductor does.
- Lab (root): a kit lab (scripts/lab.sh up 3 --kit --name tkv1 --net 72) where a wrong
  password fails with Tacker's MgmtDriverOtherError and no secret, instantiate_end builds a
  (kit) cluster from the VnfInstance's addresses (the kubernetes entry lands in
  vnf_instance.vim_connection_info; the README's VIM registration is checked with
  tackerclient's parser; a 0600 kubeconfig per cluster), scale_end/scale_start join and
  drain the workers Tacker names, heal_start/heal_end rebuild a worker, and terminate_end,
  called after Tacker has emptied the instance, forgets the cluster. Then a cluster from a
  package inventory that only instantiate's request names is healed with v1's param-less body.
  The VNFCs carry Tacker v1's vduIds (masterNode/workerNode) while the params name the guide's
  aspects (master_instance/worker_instance): the package's VNFD maps one to the other.
  Without root it is skipped loudly; under CI=true a missing root fails.

Each Tacker-side call's wall time is printed at the end.
"""

import copy
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock
import warnings

warnings.simplefilter('ignore')

from oslo_config import cfg  # noqa: E402

from tacker.common import driver_manager  # noqa: E402
from tacker.common import exceptions  # noqa: E402
from tacker import context as t_context  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.objects import fields  # noqa: E402

objects.register_all()

from tacker.tests.unit.vnflcm import fakes  # noqa: E402
from tacker.vnflcm import vnflcm_driver  # noqa: E402

import mgmt_driver_tacker_v1 as v1  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
LAB, NET = 'tkv1', 72
DRIVER = 'mgmt-driver'
PACKAGE_ID = 'b1bb0ce7-ebca-4fa7-95ed-4840d70a1177'
OPENSTACK_CONN = 'f8c35bd0-4d67-4436-9f11-14b8a84c92aa'
TIMINGS = []


def is_root():
    return os.geteuid() == 0


def binary():
    b = os.environ.get('MGMT_DRIVER_BIN') or os.path.join(REPO, 'target', 'debug', 'mgmt-driver')
    if not os.access(b, os.X_OK):
        raise unittest.SkipTest('no mgmt-driver binary at %s (cargo build first)' % b)
    return b


def make_package(root):
    """A v1 package dir as the conductor keeps it: our scripts, the lab kit's offline
    artifacts, and the driver's own file (Tacker hash-checks it against the installed one)."""
    pkg = os.path.join(root, PACKAGE_ID)
    os.makedirs(os.path.join(pkg, 'Scripts'))
    for f in ('install_k8s_cluster.sh', 'install_helm.sh'):
        shutil.copy(os.path.join(REPO, 'scripts', f), os.path.join(pkg, 'Scripts', f))
    shutil.copy(v1.__file__, os.path.join(pkg, 'Scripts', 'mgmt_driver_tacker_v1.py'))
    write_vnfd(pkg)
    subprocess.run(['bash', os.path.join(REPO, 'tests/labkit/make-offline-dir.sh'),
                    os.path.join(pkg, 'Files', 'offline')],
                   check=True, stdout=subprocess.DEVNULL)
    return pkg


# The scaling part of a v1 Kubernetes-cluster VNFD as the v1 guide writes it: the aspects
# master_instance / worker_instance scale the VDUs masterNode / workerNode (written here).
VNFD_DF = """tosca_definitions_version: tosca_simple_yaml_1_2
topology_template:
  substitution_mappings:
    node_type: company.provider.VNF
    properties: {flavour_id: simple}
  node_templates:
    masterNode: {type: tosca.nodes.nfv.Vdu.Compute}
    workerNode: {type: tosca.nodes.nfv.Vdu.Compute}
  policies:
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            master_instance: {name: master_instance, max_scale_level: 3, step_deltas: [delta_1]}
            worker_instance: {name: worker_instance, max_scale_level: 3, step_deltas: [delta_1]}
    - masterNode_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: master_instance, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [masterNode]
    - workerNode_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: worker_instance, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [workerNode]
"""


def write_vnfd(pkg):
    """TOSCA.meta and the definitions, where Tacker (and mgmt-driver) find the VNFD."""
    os.makedirs(os.path.join(pkg, 'TOSCA-Metadata'))
    os.makedirs(os.path.join(pkg, 'Definitions'))
    with open(os.path.join(pkg, 'TOSCA-Metadata', 'TOSCA.meta'), 'w') as f:
        f.write('TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\nCreated-by: test\n'
                'Entry-Definitions: Definitions/top.yaml\n')
    with open(os.path.join(pkg, 'Definitions', 'top.yaml'), 'w') as f:
        f.write('tosca_definitions_version: tosca_simple_yaml_1_2\n'
                'imports: [etsi_nfv_sol001_common_types.yaml, df_simple.yaml]\n')
    with open(os.path.join(pkg, 'Definitions', 'df_simple.yaml'), 'w') as f:
        f.write(VNFD_DF)


def vnfd_dict():
    """The part of a VNFD Tacker v1 reads to pick the MgmtDriver (see README.md)."""
    hooks = ['instantiate_start', 'instantiate_end', 'scale_start', 'scale_end',
             'heal_start', 'heal_end', 'terminate_start', 'terminate_end',
             'modify_information_start', 'modify_information_end']
    return {'topology_template': {'node_templates': {'VNF': {
        'type': 'company.provider.VNF',
        'interfaces': {'Vnflcm': {h: {'implementation': DRIVER} for h in hooks}},
        'artifacts': {DRIVER: {
            'description': 'mgmt-driver hook', 'type': 'tosca.artifacts.Implementation.Python',
            'file': 'Scripts/mgmt_driver_tacker_v1.py'}}}}}}


def vnfc(id_, vdu, cp, ip, stack_id):
    """A VnfcResourceInfo as Tacker v1's OpenStack infra driver records it, with the
    VNFC's address under vnfcCpInfo[].cpProtocolInfo[].ipOverEthernet.ipAddresses[]."""
    addr = objects.IpAddress(type='IPV4', addresses=[ip], is_dynamic=False)
    proto = objects.CpProtocolInfo(
        layer_protocol='IP_OVER_ETHERNET',
        ip_over_ethernet=objects.IpOverEthernetAddressInfo(ip_addresses=[addr]))
    return objects.VnfcResourceInfo(
        id=id_, vdu_id=vdu,
        compute_resource=objects.ResourceHandle(
            vim_connection_id=OPENSTACK_CONN, resource_id='server-' + id_,
            vim_level_resource_type='OS::Nova::Server'),
        storage_resource_ids=[],
        vnfc_cp_info=[objects.VnfcCpInfo(id='cp-' + id_, cpd_id=cp, cp_protocol_info=[proto])],
        metadata={'stack_id': stack_id})


def params(user, password, helm=False):
    p = {
        'script_path': 'Scripts/install_k8s_cluster.sh',
        'vim_name': 'kubernetes_vim',
        'master_node': {'aspect_id': 'master_instance', 'ssh_cp_name': 'masterNode_CP1',
                        'nic_cp_name': 'masterNode_CP1', 'username': user, 'password': password,
                        'pod_cidr': '192.168.0.0/16', 'cluster_cidr': '10.199.187.0/24',
                        'cluster_cp_name': 'masterNode_CP1'},
        'worker_node': {'aspect_id': 'worker_instance', 'ssh_cp_name': 'workerNode_CP2',
                        'nic_cp_name': 'workerNode_CP2', 'username': user, 'password': password},
        'offline_artifacts_path': 'Files/offline',
        'script_environment': {'K8S_ALLOW_ANY_OS': '1'},
    }
    if helm:
        p['helm_installation_script_path'] = 'Scripts/install_helm.sh'
    return {'k8s_cluster_installation_param': p}


def openstack_conn():
    return objects.VimConnectionInfo(
        id=OPENSTACK_CONN, vim_id='05ef7ca5-7e32-4a6b-a03d-52f811f04496',
        vim_type='openstack', interface_info={}, access_info={}, extra={})


def instance(ips, add_params, vdus=('masterNode', 'workerNode')):
    """Tacker's fake INSTANTIATED VnfInstance, with our VNFCs: ips[0] master, the rest workers.
    `vdus`: the vduId of each role's VNFCs (Tacker v1 records the VDU, masterNode/workerNode)."""
    inst = fakes.return_vnf_instance(fields.VnfInstanceState.INSTANTIATED)
    info = inst.instantiated_vnf_info
    info.vnfc_resource_info = [vnfc('vnfc-m1', vdus[0], 'masterNode_CP1', ips[0], 'stack-m1')]
    for n, ip in enumerate(ips[1:], start=1):
        info.vnfc_resource_info.append(
            vnfc('vnfc-w%d' % n, vdus[1], 'workerNode_CP2', ip, 'stack-w%d' % n))
    info.additional_params = copy.deepcopy(add_params)
    inst.vim_connection_info = [openstack_conn()]
    return inst


def instantiate_request(add_params):
    return objects.InstantiateVnfRequest(
        flavour_id='simple', instantiation_level_id='instantiation_level_1',
        vim_connection_info=[openstack_conn()], additional_params=copy.deepcopy(add_params))


class TackerV1(object):
    """Tacker v1's own way to a MgmtDriver: stevedore by entry point, the VNFD's Vnflcm
    interface and hash check (VnfLcmDriver._load_vnf_interface), then DriverManager.invoke."""

    def __init__(self, csar_root):
        # As README.md's tacker.conf: Tacker's default driver stays for packages naming none.
        cfg.CONF.set_override('vnflcm_mgmt_driver', ['vnflcm_noop', DRIVER], 'tacker')
        cfg.CONF.set_override('vnf_package_csar_path', csar_root, 'vnf_package')
        self.lcm = vnflcm_driver.VnfLcmDriver.__new__(vnflcm_driver.VnfLcmDriver)
        self.lcm._mgmt_manager = driver_manager.DriverManager(
            'tacker.tacker.mgmt.drivers', cfg.CONF.tacker.vnflcm_mgmt_driver)
        self.lcm._mgmt_driver_hash = self.lcm._init_mgmt_driver_hash()
        self.context = t_context.get_admin_context()
        # The one database read on this path: vnfd id -> package id (the package dir's name).
        self._pkg = mock.patch.object(
            objects.VnfPackageVnfd, 'get_by_id',
            return_value=objects.VnfPackageVnfd(package_uuid=PACKAGE_ID))

    def call(self, method, vnf_instance, **kwargs):
        with self._pkg:
            name = self.lcm._load_vnf_interface(self.context, method, vnf_instance, vnfd_dict())
            started = time.monotonic()
            label = method + ' (raised)'
            try:
                out = self.lcm._mgmt_manager.invoke(
                    name, method, context=self.context, vnf_instance=vnf_instance, **kwargs)
                label = method
                return out
            finally:
                TIMINGS.append((label, time.monotonic() - started))


def k8s_entry(vnf_instance):
    found = [c for c in vnf_instance.vim_connection_info if c.vim_type != 'openstack']
    return found[0] if found else None


class Conversion(unittest.TestCase):
    """Tacker's v1 objects as SOL003 camelCase JSON: where mgmt-driver looks for nodes."""

    def test_instance_becomes_sol003_with_addresses_where_the_protocol_reads_them(self):
        add = params('mduser', 'Pw-Conv-1')
        doc = v1.to_sol(instance(['192.0.2.11', '192.0.2.12'], add))
        self.assertEqual(doc['metadata'], {'key': 'value'})  # vnf_metadata -> metadata
        self.assertNotIn('vnfMetadata', doc)
        info = doc['instantiatedVnfInfo']
        cp = info['vnfcResourceInfo'][1]['vnfcCpInfo'][0]
        self.assertEqual(cp['cpdId'], 'workerNode_CP2')
        self.assertEqual(cp['cpProtocolInfo'][0]['ipOverEthernet']['ipAddresses'][0]['addresses'],
                         ['192.0.2.12'])
        self.assertEqual(info['vnfcResourceInfo'][1]['computeResource']['resourceId'], 'server-vnfc-w1')
        # Data keys stay as the VNFM wrote them.
        self.assertIn('k8s_cluster_installation_param', info['additionalParams'])
        self.assertEqual(info['additionalParams']['k8s_cluster_installation_param']['master_node']
                         ['ssh_cp_name'], 'masterNode_CP1')
        self.assertEqual(doc['vimConnectionInfo'][0]['vimType'], 'openstack')
        json.dumps(doc)  # all of it is JSON

    def test_requests_and_datetimes(self):
        req = v1.to_sol(objects.HealVnfRequest(vnfc_instance_id=['vnfc-w1'], cause='c'))
        self.assertEqual(req['vnfcInstanceId'], ['vnfc-w1'])
        req = v1.to_sol(fakes.scale_request('SCALE_IN', 'worker_instance', 1, 'False'))
        self.assertEqual((req['type'], req['aspectId'], req['numberOfSteps']),
                         ('SCALE_IN', 'worker_instance', 1))
        when = datetime.datetime(2020, 1, 1, 1, 1, 1, tzinfo=datetime.timezone.utc)
        self.assertEqual(v1.to_sol({'at': when, 'ids': ('a', 'b')}),
                         {'at': '2020-01-01T01:01:01+00:00', 'ids': ['a', 'b']})
        # Tacker's database bookkeeping is not SOL003: left out.
        inst = fakes.return_vnf_instance_delete()
        self.assertTrue(inst.obj_attr_is_set('created_at'))
        self.assertNotIn('createdAt', v1.to_sol(inst))

    def test_grant_as_sol003(self):
        g = objects.Grant(id='g1', vnf_instance_id='i1', vnf_lcm_op_occ_id='o1',
                          vim_connections=[openstack_conn()],
                          add_resources=[objects.GrantInfo(resource_definition_id='vnfc-w2', zone_id='z1')])
        doc = v1.to_sol(g)
        self.assertEqual(doc['vnfLcmOpOccId'], 'o1')
        self.assertEqual(doc['addResources'], [{'resourceDefinitionId': 'vnfc-w2', 'zoneId': 'z1'}])
        self.assertEqual(doc['vimConnections'][0]['vimType'], 'openstack')

    def test_scale_in_grant_request_from_tackers_stack_ids(self):
        inst = instance(['192.0.2.11', '192.0.2.12', '192.0.2.13'], params('u', 'p'))
        g = v1.scale_in_grant_request(inst, ['stack-w2'])
        self.assertEqual([r['resource']['resourceId'] for r in g['removeResources']], ['server-vnfc-w2'])
        self.assertEqual(g['removeResources'][0]['type'], 'COMPUTE')
        self.assertIsNone(v1.scale_in_grant_request(inst, ['stack-unknown']))
        self.assertIsNone(v1.scale_in_grant_request(inst, []))

    def test_error_text_prefers_the_response_errors(self):
        self.assertEqual(v1.error_text({'errors': [{'message': 'a'}, {'message': 'b'}]}, 1, 'x'), 'a; b')
        self.assertIn('exited 3', v1.error_text(None, 3, 'first\nlast line\n'))
        self.assertIn('last line', v1.error_text(None, 3, 'first\nlast line\n'))
        # Each error once, bounded; without a response, mgmt-driver's error line, not progress.
        errs = [{'message': 'w%d: join failed' % i} for i in range(50)]
        text = v1.error_text({'errors': errs + errs[:3]}, 1, '')
        self.assertEqual(text.count('w1: join failed;'), 1)
        self.assertTrue(text.endswith('; ... and 30 more errors'), text)
        self.assertLessEqual(len(v1.error_text({'errors': [{'message': 'y' * 9000}]}, 1, '')),
                             v1.MAX_ERROR_TEXT)
        text = v1.error_text(None, 2, 'error: the reason\n{"event": "phase"}\n')
        self.assertIn('(the reason)', text)
        self.assertNotIn('event', text)


class DryRun(unittest.TestCase):
    """Every hook through Tacker's own loader, with `--dry-run`: nothing connects."""

    @classmethod
    def setUpClass(cls):
        cls.bin = binary()
        cls.tmp = tempfile.mkdtemp(prefix='tkv1-dry-')
        cls.pkg = make_package(cls.tmp)
        cls.env = mock.patch.dict(os.environ, {
            'MGMT_DRIVER_BIN': cls.bin,
            'MGMT_DRIVER_HOOK_ARGS': '--dry-run --state-dir %s' % os.path.join(cls.tmp, 'state'),
            'MGMT_DRIVER_STATE_KEY_FILE': os.path.join(cls.tmp, 'state.key'),
            'MGMT_DRIVER_SSH_CONFIG': 'none'})
        cls.env.start()
        cls.tacker = TackerV1(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.env.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.add = params('mduser', 'Dry-Pw-42', helm=True)
        self.inst = instance(['192.0.2.11', '192.0.2.12', '192.0.2.13'], self.add)

    def test_tacker_loads_our_driver_by_entry_point_and_hash(self):
        drv = self.tacker.lcm._mgmt_manager[DRIVER]
        self.assertIsInstance(drv, v1.MgmtDriverHook)
        with self.tacker._pkg:
            self.assertEqual(self.tacker.lcm._load_vnf_interface(
                self.tacker.context, 'instantiate_end', self.inst, vnfd_dict()), DRIVER)
            # A package whose copy differs is refused by Tacker, before any hook runs.
            copy_path = os.path.join(self.pkg, 'Scripts', 'mgmt_driver_tacker_v1.py')
            with open(copy_path) as f:
                saved = f.read()
            try:
                with open(copy_path, 'a') as f:
                    f.write('# changed\n')
                with self.assertRaises(exceptions.MgmtDriverHashMatchFailure):
                    self.tacker.lcm._load_vnf_interface(
                        self.tacker.context, 'instantiate_end', self.inst, vnfd_dict())
            finally:
                with open(copy_path, 'w') as f:
                    f.write(saved)

    def test_instantiate_end_appends_the_kubernetes_entry_as_tackers_object(self):
        resp = self.tacker.call('instantiate_end', self.inst,
                                instantiate_vnf_request=instantiate_request(self.add),
                                grant=None, grant_request=None, vnf={})
        self.assertTrue(resp['dryRun'])
        conns = self.inst.vim_connection_info
        self.assertEqual(len(conns), 2, conns)
        self.assertIsInstance(conns[1], objects.VimConnectionInfo)
        self.assertEqual((conns[0].id, conns[0].vim_type), (OPENSTACK_CONN, 'openstack'))
        k8s = conns[1]
        self.assertEqual(k8s.vim_type, 'kubernetes')
        self.assertEqual(k8s.extra['vim_name'], 'kubernetes_vim')
        self.assertTrue(k8s.access_info['authUrl'].startswith('https://192.0.2.11:'), k8s.access_info)
        self.assertEqual(k8s.extra['helm_info']['masternode_ip'], ['192.0.2.11'])
        self.assertNotIn('Dry-Pw-42', json.dumps(resp.get('result')))
        with self.assertLogs('mgmt_driver_tacker_v1', 'INFO') as logs:
            v1.log_vim_record(self.inst.id, {'name': 'kubernetes_vim', 'auth_url': 'https://a:6443',
                                             'auth_cred': {'bearer_token': 'Tok-9', 'ssl_ca_cert': 'PEM'},
                                             'extra': {'helm_info': {'masternode_password': 'Pw-8'}}})
        self.assertIn('"auth_url": "https://a:6443"', logs.output[0])
        self.assertNotIn('Tok-9', logs.output[0])
        self.assertNotIn('Pw-8', logs.output[0])
        # Tacker can store it: its own primitive round trip.
        back = objects.VimConnectionInfo.obj_from_primitive(k8s.obj_to_primitive(), None)
        self.assertEqual(back.extra['vim_name'], 'kubernetes_vim')

    def test_the_guides_aspect_ids_find_the_vdus_tacker_records(self):
        """The v1 guide's params name aspects (master_instance); Tacker v1 records each VNFC's
        VDU (masterNode). The package's VduScalingAspectDeltas map one to the other."""
        inst = instance(['192.0.2.21', '192.0.2.22'], self.add, vdus=('masterNode', 'workerNode'))
        self.assertEqual(inst.instantiated_vnf_info.flavour_id, 'simple')
        resp = self.tacker.call('instantiate_end', inst,
                                instantiate_vnf_request=instantiate_request(self.add),
                                grant=None, grant_request=None, vnf={})
        self.assertTrue(resp['ok'] and resp['dryRun'], resp)
        k8s = k8s_entry(inst)
        self.assertTrue(k8s.access_info['authUrl'].startswith('https://192.0.2.21:'), k8s.access_info)
        self.assertEqual(k8s.extra['helm_info']['masternode_ip'], ['192.0.2.21'])

    def test_scale_heal_terminate_hooks(self):
        """The hooks after instantiate, on an instance whose additionalParams Tacker kept.
        A dry run records no cluster, so the plans name the nodes but find none in it."""
        k8s = objects.VimConnectionInfo(
            id='k8s-conn', vim_id='k8s-vim', vim_type='kubernetes', interface_info={},
            access_info={'authUrl': 'https://192.0.2.11:6443'},
            extra={'vim_name': 'kubernetes_vim'})
        self.inst.vim_connection_info.append(k8s)

        # SCALE_IN: the Heat stack Tacker deletes names the node the plan drains.
        resp = self.tacker.call(
            'scale_start', self.inst, grant=None, grant_request=None, vnf={},
            scale_vnf_request=fakes.scale_request('SCALE_IN', 'worker_instance', 1, 'False'),
            scale_out_id_list=['stack-w2'], scale_name_list=['w2'])
        self.assertTrue(resp['ok'] and resp['dryRun'], resp)
        self.assertEqual([n['node'] for n in resp['result']['nodes']], ['vnfc-w2'])
        # Heal: v1's vnfcInstanceId is the vnfcResourceInfo id.
        resp = self.tacker.call(
            'heal_start', self.inst, grant=None, grant_request=None, vnf={},
            heal_vnf_request=objects.HealVnfRequest(vnfc_instance_id=['vnfc-w1'], cause='x'))
        self.assertEqual([n['node'] for n in resp['result']['nodes']], ['vnfc-w1'])
        self.assertEqual([c.vim_type for c in self.inst.vim_connection_info], ['openstack', 'kubernetes'])

        # scale_end / heal_end join nodes, which needs a cluster's facts: whatever the hook
        # answers, a failure is Tacker's error without the password and the objects stay.
        for method, kw in (
                ('scale_end', dict(scale_vnf_request=fakes.scale_request('SCALE_OUT', 'worker_instance', 1, 'False'),
                                   scale_out_id_list=['stack-w2'])),
                ('heal_end', dict(heal_vnf_request=objects.HealVnfRequest(vnfc_instance_id=['vnfc-w1'])))):
            before = [c.obj_to_primitive() for c in self.inst.vim_connection_info]
            try:
                resp = self.tacker.call(method, self.inst, grant=None, grant_request=None, vnf={}, **kw)
                self.assertTrue(resp['ok'], resp)
            except exceptions.MgmtDriverOtherError as e:
                self.assertNotIn('Dry-Pw-42', str(e))
                self.assertEqual([c.obj_to_primitive() for c in self.inst.vim_connection_info], before)

        # terminate_end takes the cluster's entry out of Tacker's list; the VNF's own VIM stays.
        resp = self.tacker.call(
            'terminate_end', self.inst, grant=None, grant_request=None,
            terminate_vnf_request=objects.TerminateVnfRequest(termination_type='GRACEFUL'))
        self.assertTrue(resp['ok'], resp)
        self.assertEqual([(c.id, c.vim_type) for c in self.inst.vim_connection_info],
                         [(OPENSTACK_CONN, 'openstack')])

    def test_hooks_for_an_instance_nothing_was_recorded_for(self):
        """No cluster params anywhere and nothing recorded: each hook says so and does nothing."""
        inst = instance(['192.0.2.11', '192.0.2.12'], {})
        for method, kw in (
                ('scale_end', dict(scale_vnf_request=fakes.scale_request('SCALE_OUT', 'worker_instance', 1, 'False'))),
                ('heal_end', dict(heal_vnf_request=objects.HealVnfRequest(vnfc_instance_id=['vnfc-w1']))),
                ('terminate_end', dict(terminate_vnf_request=objects.TerminateVnfRequest(termination_type='GRACEFUL')))):
            resp = self.tacker.call(method, inst, grant=None, grant_request=None, vnf={}, **kw)
            self.assertTrue(resp['ok'], resp)
            self.assertIn('nothing is recorded for VNF instance %s' % inst.id, json.dumps(resp['warnings']))
            self.assertEqual([c.vim_type for c in inst.vim_connection_info], ['openstack'])

    def test_bad_input_is_tackers_error_naming_the_field_without_the_password(self):
        del self.add['k8s_cluster_installation_param']['master_node']['username']
        with self.assertRaises(exceptions.MgmtDriverOtherError) as cm:
            self.tacker.call('instantiate_end', self.inst,
                             instantiate_vnf_request=instantiate_request(self.add),
                             grant=None, grant_request=None, vnf={})
        msg = str(cm.exception)
        self.assertIn('master_node.username', msg)
        self.assertNotIn('Dry-Pw-42', msg)
        self.assertEqual(len(self.inst.vim_connection_info), 1)

    def test_tacker_compat_is_the_operators_flag_not_the_requests(self):
        """The request body is the VNFM API user's: it may not turn on tacker_compat (the
        operator's node password into helm_info); the operator does, with --tacker-compat in
        MGMT_DRIVER_HOOK_ARGS on the conductor."""
        self.add['mgmt_driver'] = {'tacker_compat': True}
        with self.assertRaises(exceptions.MgmtDriverOtherError) as cm:
            self.tacker.call('instantiate_end', self.inst,
                             instantiate_vnf_request=instantiate_request(self.add),
                             grant=None, grant_request=None, vnf={})
        self.assertIn('additionalParams.mgmt_driver.tacker_compat', str(cm.exception))
        self.assertNotIn('Dry-Pw-42', str(cm.exception))
        self.assertEqual(len(self.inst.vim_connection_info), 1)
        del self.add['mgmt_driver']
        args = os.environ['MGMT_DRIVER_HOOK_ARGS'] + ' --tacker-compat'
        with mock.patch.dict(os.environ, {'MGMT_DRIVER_HOOK_ARGS': args}):
            self.tacker.call('instantiate_end', self.inst,
                             instantiate_vnf_request=instantiate_request(self.add),
                             grant=None, grant_request=None, vnf={})
        helm = self.inst.vim_connection_info[1].extra['helm_info']
        self.assertTrue(helm.get('masternode_password') == 'Dry-Pw-42',
                        'with --tacker-compat, helm_info has not the login password')

    def test_instantiate_start_checks_the_package_before_the_vms_exist(self):
        resp = self.tacker.call('instantiate_start', self.inst,
                                instantiate_vnf_request=instantiate_request(self.add),
                                grant=None, grant_request=None)
        self.assertTrue(resp['ok'], resp)
        self.add['k8s_cluster_installation_param']['script_path'] = 'Scripts/missing.sh'
        with self.assertRaises(exceptions.MgmtDriverOtherError) as cm:
            self.tacker.call('instantiate_start', self.inst,
                             instantiate_vnf_request=instantiate_request(self.add),
                             grant=None, grant_request=None)
        self.assertIn('script_path', str(cm.exception))
        self.assertNotIn('Dry-Pw-42', str(cm.exception))

    def test_hooks_with_nothing_to_do_say_so(self):
        # As Tacker v1's modify_vnf calls them: no grant arguments, modify_vnf_request=None.
        for method in ('modify_information_start', 'modify_information_end'):
            resp = self.tacker.call(method, self.inst, modify_vnf_request=None)
            self.assertTrue(resp['ok'], resp)
            self.assertIn(method, json.dumps(resp['warnings']))
        self.assertEqual(len(self.inst.vim_connection_info), 1)

    def test_a_missing_binary_is_a_clear_error(self):
        with mock.patch.dict(os.environ, {'MGMT_DRIVER_BIN': os.path.join(self.tmp, 'nope')}):
            with self.assertRaises(exceptions.MgmtDriverOtherError) as cm:
                self.tacker.call('instantiate_start', self.inst,
                                 instantiate_vnf_request=instantiate_request(self.add),
                                 grant=None, grant_request=None)
        self.assertIn('cannot run', str(cm.exception))


class Lab(unittest.TestCase):
    """A kit lab: the cluster is built and changed by Tacker's calls of our driver."""

    @classmethod
    def setUpClass(cls):
        if not is_root():
            if os.environ.get('CI') == 'true':
                raise AssertionError('CI=true: the Tacker v1 lab test needs root')
            sys.stderr.write('\n*** Tacker v1 lab test SKIPPED: needs root ***\n')
            raise unittest.SkipTest('needs root')
        cls.bin = binary()
        cls.tmp = tempfile.mkdtemp(prefix='tkv1-lab-')
        cls.pkg = make_package(cls.tmp)
        started = time.monotonic()
        subprocess.run(['bash', os.path.join(REPO, 'scripts/lab.sh'), 'up', '3', '--kit',
                        '--name', LAB, '--net', str(NET)], check=True, stdout=subprocess.DEVNULL)
        TIMINGS.append(('lab up 3 --kit', time.monotonic() - started))
        labdir = os.path.join(REPO, 'target', 'lab', LAB)
        with open(os.path.join(labdir, 'password')) as f:
            cls.password = f.read()
        cls.labdir = labdir
        cls.state = os.path.join(cls.tmp, 'state')
        cls.env = mock.patch.dict(os.environ, {
            'MGMT_DRIVER_BIN': cls.bin,
            # --tacker-compat: Tacker v1's Helm client needs the password in helm_info. It is the
            # operator's setting (a request's additionalParams.mgmt_driver may not turn it on).
            'MGMT_DRIVER_HOOK_ARGS': '--state-dir %s --retry-for 20 --tacker-compat' % cls.state,
            'MGMT_DRIVER_KUBECONFIG_DIR': cls.tmp,
            'MGMT_DRIVER_STATE_KEY_FILE': os.path.join(cls.tmp, 'state.key'),
            'MGMT_DRIVER_SSH_CONFIG': 'none'})
        cls.env.start()
        os.environ.pop('SSH_AUTH_SOCK', None)
        os.environ.pop('MGMT_DRIVER_INVENTORY', None)
        cls.tacker = TackerV1(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.env.stop()
        subprocess.run(['bash', os.path.join(REPO, 'scripts/lab.sh'), 'down', '--name', LAB],
                       check=False, stdout=subprocess.DEVNULL)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ip(self, i):
        return '198.18.%d.%d' % (NET, 10 + i)

    def on(self, node, cmd):
        """A shell command inside lab node `node`, out of band (nsenter, not SSH)."""
        return subprocess.run(
            ['bash', os.path.join(REPO, 'scripts/lab.sh'), 'exec', str(node), '--name', LAB, '--',
             'sh', '-c', cmd], check=False, stdout=subprocess.PIPE).stdout.decode()

    def k8s_nodes(self):
        out = self.on(1, 'KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes -o name')
        return sorted(ln.split('/', 1)[1] for ln in out.split())

    def register_vim_as_the_readme_says(self, vim):
        """README, "The Kubernetes VIM": result.vim plus the token read on a master make the
        config file of `openstack vim register`, parsed here by tackerclient's own code."""
        from tackerclient.tacker.v1_0.nfvo import vim_utils
        get = ('kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get secret '
               'mgmt-driver-admin-token -o \'jsonpath={.data.%s}\' | base64 -d')
        token = self.on(1, get % 'token')
        ca = self.on(1, get % 'ca\\.crt')
        # Failure messages never show a token.
        self.assertTrue(token, 'no token in the cluster\'s mgmt-driver-admin-token secret')
        self.assertTrue(ca.startswith('-----BEGIN CERTIFICATE-----'), ca[:40])
        self.assertEqual(ca.strip(), vim['auth_cred']['ssl_ca_cert'].strip())
        # MGMT_DRIVER_KUBECONFIG_DIR: the same token and server in a 0600 kubeconfig.
        kc = os.path.join(self.tmp, Lab.inst.id + '.kubeconfig')
        self.assertEqual(os.stat(kc).st_mode & 0o777, 0o600)
        with open(kc) as f:
            text = f.read()
        self.assertTrue('token: %s' % token in text, 'the kubeconfig has not the cluster\'s token')
        self.assertIn('server: %s' % vim['auth_url'], text)
        config = {'auth_url': vim['auth_url'], 'project_name': 'default', 'type': 'kubernetes',
                  'bearer_token': token, 'ssl_ca_cert': vim['auth_cred']['ssl_ca_cert'],
                  'extra': {'helm_info': str(vim['extra']['helm_info'])}}
        body = {}
        vim_utils.args2body_vim(dict(config), body)
        vim_utils.validate_auth_url(config['auth_url'])
        self.assertEqual(body['type'], 'kubernetes')
        self.assertTrue(body['auth_cred']['bearer_token'] == token, 'tackerclient lost the token')
        self.assertEqual(body['auth_cred']['ssl_ca_cert'], vim['auth_cred']['ssl_ca_cert'])
        self.assertEqual(config['auth_url'], 'https://%s:6443' % self.ip(1))

    def test_1_cluster_lifecycle_through_tackers_calls(self):
        add = params('mduser', self.password, helm=True)
        inst = Lab.inst = instance([self.ip(1), self.ip(2)], add)

        # A wrong password: Tacker's error, naming the node, never the password.
        bad = params('mduser', 'Wrong-Pw-77', helm=True)
        with self.assertRaises(exceptions.MgmtDriverOtherError) as cm:
            self.tacker.call('instantiate_end', instance([self.ip(1), self.ip(2)], bad),
                             instantiate_vnf_request=instantiate_request(bad),
                             grant=None, grant_request=None, vnf={})
        sys.stderr.write('\nwrong password -> %s\n' % cm.exception)
        self.assertNotIn('Wrong-Pw-77', str(cm.exception))
        self.assertTrue(self.password not in str(cm.exception), 'the login password is in the error')
        self.assertRegex(str(cm.exception), r'vnfc-m1|%s' % self.ip(1).replace('.', r'\.'))

        resp = self.tacker.call('instantiate_end', inst,
                                instantiate_vnf_request=instantiate_request(add),
                                grant=None, grant_request=None, vnf={})
        k8s = k8s_entry(inst)
        self.assertIsNotNone(k8s, inst.vim_connection_info)
        self.assertEqual(inst.vim_connection_info[0].id, OPENSTACK_CONN)
        self.assertEqual(k8s.vim_type, 'kubernetes')
        self.assertEqual(k8s.access_info['authUrl'], 'https://%s:6443' % self.ip(1))
        helm = k8s.extra['helm_info']
        self.assertEqual(helm['masternode_ip'], [self.ip(1)])
        self.assertEqual(helm['masternode_username'], 'mduser')
        self.assertTrue(helm['masternode_password'] == self.password, 'helm_info has not the login used')
        # Kubernetes node names are Tacker's (role + last octet), set by the install script.
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker12'])
        Lab.vim = resp['result']['vim']
        self.register_vim_as_the_readme_says(resp['result']['vim'])

        # SCALE_OUT: Tacker's infra driver has added the VNFC; scale_end joins it.
        inst.instantiated_vnf_info.vnfc_resource_info.append(
            vnfc('vnfc-w2', 'workerNode', 'workerNode_CP2', self.ip(3), 'stack-w2'))
        self.tacker.call('scale_end', inst,
                         scale_vnf_request=fakes.scale_request('SCALE_OUT', 'worker_instance', 1, 'False'),
                         grant=None, grant_request=None, scale_out_id_list=['stack-w2'], vnf={})
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker12', 'worker13'])

        # SCALE_IN: Tacker names the Heat stack it deletes; that worker (not the last
        # joined by name order) is drained and deleted.
        self.tacker.call('scale_start', inst,
                         scale_vnf_request=fakes.scale_request('SCALE_IN', 'worker_instance', 1, 'False'),
                         grant=None, grant_request=None, scale_out_id_list=['stack-w1'],
                         scale_name_list=['w1'], vnf={})
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker13'])
        inst.instantiated_vnf_info.vnfc_resource_info = [
            v for v in inst.instantiated_vnf_info.vnfc_resource_info if v.id != 'vnfc-w1']
        self.assertIsNotNone(k8s_entry(inst))

        # Heal of a worker: heal_start takes it out of the cluster, Tacker rebuilds the VM
        # (a fresh disk here), heal_end joins it again. v1's vnfcInstanceId names the VNFC.
        heal = objects.HealVnfRequest(vnfc_instance_id=['vnfc-w2'], cause='lab')
        self.tacker.call('heal_start', inst, heal_vnf_request=heal, grant=None, grant_request=None)
        self.assertEqual(self.k8s_nodes(), ['master11'])
        self.on(3, 'kubeadm reset -f >/dev/null 2>&1; rm -rf /etc/kubernetes /var/lib/mgmt-driver '
                   '/tmp/installed /root/.kube /var/tacker')
        self.tacker.call('heal_end', inst, heal_vnf_request=heal, grant=None, grant_request=None, vnf={})
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker13'])
        self.assertEqual(self.on(3, 'test -s /etc/kubernetes/kubelet.conf && echo joined').strip(), 'joined')
        self.assertIsNotNone(k8s_entry(inst))

    def test_2_terminate_end_as_tacker_calls_it(self):
        inst = getattr(Lab, 'inst', None)
        self.assertIsNotNone(inst, 'needs the cluster of test_1')
        self.assertIsNotNone(k8s_entry(inst))
        state_file = os.path.join(self.state, inst.id + '.json')
        self.assertTrue(os.path.exists(state_file), os.listdir(self.state))
        # terminate_end, called as Tacker v1 calls it: after it has emptied
        # vim_connection_info and reinitialised the instantiated info.
        inst.instantiated_vnf_info.reinitialize()
        inst.vim_connection_info = []
        self.tacker.call('terminate_end', inst,
                         terminate_vnf_request=objects.TerminateVnfRequest(termination_type='GRACEFUL'),
                         grant=None, grant_request=None)
        self.assertIsNone(k8s_entry(inst))
        self.assertFalse(os.path.exists(state_file), os.listdir(self.state))


    def test_3_result_masks_the_token_and_password_with_tacker_compat(self):
        """docs/hook-protocol.md: the bearer token is masked in `result`; secrets never
        appear in results. Tacker v1 needs `tacker_compat` (its Helm client logs in with
        helm_info's password), so the hook's result must stay masked with it too."""
        vim = getattr(Lab, 'vim', None)
        self.assertIsNotNone(vim, 'needs the instantiate_end of test_1')
        # Failure messages never show the secret itself.
        self.assertTrue(vim['auth_cred']['bearer_token'] == '********',
                        'result.vim.auth_cred.bearer_token is not masked')
        self.assertTrue(self.password not in json.dumps(vim), 'the login password is in result.vim')

    def test_4_the_inventory_named_at_instantiate_holds_for_heal(self):
        """Where v1's instance has no addresses, the instantiate request names an inventory in
        the package (README, "Nodes"). Tacker v1's heal body carries no params: the heal reads
        the inventory instantiate named (issue 22)."""
        reset = ('kubeadm reset -f >/dev/null 2>&1; rm -rf /etc/kubernetes /var/lib/mgmt-driver '
                 '/tmp/installed /root/.kube /var/tacker')
        for n in (1, 2, 3):
            self.on(n, reset)
        with open(os.path.join(self.pkg, 'Files', 'inventory.yaml'), 'w') as f:
            f.write('groups:\n'
                    '  master_instance:\n    - {name: vnfc-m1, ssh_ip: %s}\n'
                    '  worker_instance:\n    - {name: vnfc-w1, ssh_ip: %s}\n' % (self.ip(1), self.ip(2)))
        add = params('mduser', self.password)
        add['mgmt_driver'] = {'inventory': 'Files/inventory.yaml'}
        inst = instance([self.ip(1), self.ip(2)], add)
        for v in inst.instantiated_vnf_info.vnfc_resource_info:
            v.vnfc_cp_info = []  # no addresses: the inventory has them
        self.tacker.call('instantiate_end', inst, instantiate_vnf_request=instantiate_request(add),
                         grant=None, grant_request=None, vnf={})
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker12'])

        heal = objects.HealVnfRequest(vnfc_instance_id=['vnfc-w1'], cause='lab')
        self.assertEqual(heal.additional_params, {})  # as Tacker sends it: no params
        self.tacker.call('heal_start', inst, heal_vnf_request=heal, grant=None, grant_request=None)
        self.assertEqual(self.k8s_nodes(), ['master11'])
        self.on(2, reset)
        self.tacker.call('heal_end', inst, heal_vnf_request=heal, grant=None, grant_request=None, vnf={})
        self.assertEqual(self.k8s_nodes(), ['master11', 'worker12'])

        inst.instantiated_vnf_info.reinitialize()
        inst.vim_connection_info = []
        self.tacker.call('terminate_end', inst,
                         terminate_vnf_request=objects.TerminateVnfRequest(termination_type='GRACEFUL'),
                         grant=None, grant_request=None)
        self.assertFalse(os.path.exists(os.path.join(self.state, inst.id + '.json')))


def tearDownModule():
    if TIMINGS:
        sys.stderr.write('\nTacker v1 calls (wall time):\n')
        for name, secs in TIMINGS:
            sys.stderr.write('  %-30s %6.2f s\n' % (name, secs))


if __name__ == '__main__':
    unittest.main()
