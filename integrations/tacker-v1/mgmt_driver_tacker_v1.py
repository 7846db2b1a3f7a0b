"""A Tacker v1 MgmtDriver that runs `mgmt-driver hook` for every VNF LCM hook.

Tacker v1 calls a MgmtDriver class inside the conductor with its own objects
(`VnfInstance`, the request, `Grant`). This class only translates: it turns those
objects into the SOL003 JSON document of the hook protocol
(docs/hook-protocol.md, `apiVersion: mgmt-driver.hook/v1`, `vnfm: tacker-v1`),
runs `mgmt-driver hook`, and applies the answer back to Tacker's objects
(`vnf_instance.vim_connection_info`). Every decision (which nodes, what to run)
is taken by mgmt-driver, so this file stays small and is the same for every
VNF package.

Tacker compares the sha256 of this file with the copy the VNF package names in
its VNFD (`VnfLcmDriver._check_mgmt_driver`), so the whole driver is this one
module: copy it unchanged into the package (see README.md).

Configuration comes from the conductor's environment, not from tacker.conf:
`MGMT_DRIVER_BIN` (default `mgmt-driver` on PATH), `MGMT_DRIVER_HOOK_ARGS`
(extra arguments, shell-split, e.g. `--dry-run` or `--state-dir /var/lib/x`),
`MGMT_DRIVER_KUBECONFIG_DIR` (a kubeconfig per cluster there), and whatever
mgmt-driver itself reads (`MGMT_DRIVER_STATE_DIR`, ...).
"""

import datetime
import json
import os
import shlex
import shutil
import subprocess
import time

from oslo_log import log as logging

from tacker.common import exceptions
from tacker import objects
from tacker.vnflcm import utils as vnflcm_utils
from tacker.vnfm.mgmt_drivers import vnflcm_abstract_driver

LOG = logging.getLogger(__name__)

API_VERSION = 'mgmt-driver.hook/v1'
DRIVER_NAME = 'mgmt-driver'

# Field names whose SOL003 name is not the plain camelCase of Tacker's name.
_RENAMED = {'vnf_metadata': 'metadata'}
# Database bookkeeping of Tacker's persistent objects: not part of SOL003.
_SKIPPED = {'created_at', 'updated_at', 'deleted_at', 'deleted'}


def camel(name):
    """`vnfc_cp_info` -> `vnfcCpInfo`, with SOL003's own names where they differ."""
    if name in _RENAMED:
        return _RENAMED[name]
    head, *rest = name.split('_')
    return head + ''.join(p[:1].upper() + p[1:] for p in rest)


def to_sol(value):
    """Tacker's v1 objects as SOL003 JSON values.

    Object field names become camelCase; keys of plain dicts (additional
    params, metadata, extra) are data and stay as they are. Fields a Tacker
    object never had set are left out, as the REST API leaves them out.
    """
    if hasattr(value, 'fields') and hasattr(value, 'obj_attr_is_set'):
        out = {}
        for name in value.fields:
            if name in _SKIPPED or not value.obj_attr_is_set(name):
                continue
            out[camel(name)] = to_sol(getattr(value, name))
        return out
    if isinstance(value, dict):
        return {str(k): to_sol(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_sol(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode('utf-8', 'replace')
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def scale_in_grant_request(vnf_instance, stack_ids):
    """The `removeResources` Tacker v1 does not pass (its grant_request is None).

    At SCALE_IN, Tacker v1 hands the driver `scale_out_id_list`: the Heat
    stacks of the scaling group members it will delete, which its OpenStack
    infra driver records as `vnfcResourceInfo[].metadata.stack_id`. They are
    mapped to the VNFCs' compute resources, so mgmt-driver drains exactly the
    workers the VNFM removes. None when nothing matches (mgmt-driver then
    takes the last `numberOfSteps` workers, as Tacker's infra driver does).
    """
    info = getattr(vnf_instance, 'instantiated_vnf_info', None)
    if not stack_ids or info is None or not info.obj_attr_is_set('vnfc_resource_info'):
        return None
    wanted = set(stack_ids)
    removes = []
    for vnfc in info.vnfc_resource_info or []:
        meta = vnfc.metadata if vnfc.obj_attr_is_set('metadata') else {}
        if (meta or {}).get('stack_id') not in wanted:
            continue
        compute = vnfc.compute_resource if vnfc.obj_attr_is_set('compute_resource') else None
        resource_id = getattr(compute, 'resource_id', None) or vnfc.id
        removes.append({
            'id': vnfc.id,
            'type': 'COMPUTE',
            'resourceTemplateId': vnfc.vdu_id,
            'resource': {'resourceId': resource_id,
                         'vimLevelResourceType': getattr(compute, 'vim_level_resource_type', None)},
        })
    if not removes:
        return None
    return {'vnfInstanceId': vnf_instance.id, 'operation': 'SCALE', 'removeResources': removes}


# What Tacker stores per failed operation: enough for the errors of a large cluster's nodes.
MAX_ERRORS = 20
MAX_ERROR_TEXT = 4000


def error_text(response, rc, stderr):
    """What Tacker shows for a failed hook: the response's errors (which name the
    field, node and command and never hold a secret), each once and bounded, else
    mgmt-driver's last `error:` line (its progress lines are only logged)."""
    if isinstance(response, dict):
        msgs = []
        for e in response.get('errors') or []:
            m = e.get('message', '') if isinstance(e, dict) else ''
            if m and m not in msgs:
                msgs.append(m)
        if msgs:
            text = '; '.join(msgs[:MAX_ERRORS])
            if len(msgs) > MAX_ERRORS:
                text += '; ... and %d more errors' % (len(msgs) - MAX_ERRORS)
            return text[:MAX_ERROR_TEXT]
    lines = [ln.strip() for ln in (stderr or '').splitlines() if ln.strip()]
    errors = [ln[len('error: '):] for ln in lines if ln.startswith('error: ')]
    tail = (errors or lines or ['no output'])[-1][:MAX_ERROR_TEXT // 2]
    return 'mgmt-driver hook exited %s without a response document (%s)' % (rc, tail)


def vim_connections(entries):
    """The response's `vnf_instance.vimConnectionInfo` (v1: a list) as Tacker's objects."""
    if isinstance(entries, dict):  # a SOL003 v2-style map: keys are ids
        entries = [dict(v, id=v.get('id', k)) for k, v in entries.items()]
    out = []
    for e in entries or []:
        out.append(objects.VimConnectionInfo(
            id=e.get('id'),
            vim_id=e.get('vimId'),
            vim_type=e.get('vimType'),
            interface_info=e.get('interfaceInfo') or {},
            access_info=e.get('accessInfo') or {},
            extra=e.get('extra') or {}))
    return out


class MgmtDriverHook(vnflcm_abstract_driver.VnflcmMgmtAbstractDriver):
    """Every v1 LCM hook runs `mgmt-driver hook` with the operation's name."""

    def get_type(self):
        return DRIVER_NAME

    def get_name(self):
        return DRIVER_NAME

    def get_description(self):
        return 'Kubernetes cluster and Helm CNF lifecycle over SSH by mgmt-driver'

    # -- the hooks Tacker v1 calls ------------------------------------------

    def instantiate_start(self, context, vnf_instance, instantiate_vnf_request,
                          grant, grant_request, **kwargs):
        return self._hook('instantiate_start', context, vnf_instance,
                   instantiate_vnf_request, grant, grant_request)

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        return self._hook('instantiate_end', context, vnf_instance,
                   instantiate_vnf_request, grant, grant_request)

    def terminate_start(self, context, vnf_instance, terminate_vnf_request,
                        grant, grant_request, **kwargs):
        return self._hook('terminate_start', context, vnf_instance,
                   terminate_vnf_request, grant, grant_request)

    def terminate_end(self, context, vnf_instance, terminate_vnf_request,
                      grant, grant_request, **kwargs):
        return self._hook('terminate_end', context, vnf_instance,
                   terminate_vnf_request, grant, grant_request)

    def scale_start(self, context, vnf_instance, scale_vnf_request,
                    grant, grant_request, **kwargs):
        if grant_request is None and scale_vnf_request.type == 'SCALE_IN':
            grant_request = scale_in_grant_request(
                vnf_instance, kwargs.get('scale_out_id_list'))
        return self._hook('scale_start', context, vnf_instance,
                   scale_vnf_request, grant, grant_request)

    def scale_end(self, context, vnf_instance, scale_vnf_request,
                  grant, grant_request, **kwargs):
        return self._hook('scale_end', context, vnf_instance,
                   scale_vnf_request, grant, grant_request)

    def heal_start(self, context, vnf_instance, heal_vnf_request,
                   grant, grant_request, **kwargs):
        return self._hook('heal_start', context, vnf_instance,
                   heal_vnf_request, grant, grant_request)

    def heal_end(self, context, vnf_instance, heal_vnf_request,
                 grant, grant_request, **kwargs):
        return self._hook('heal_end', context, vnf_instance,
                   heal_vnf_request, grant, grant_request)

    def change_external_connectivity_start(self, context, vnf_instance,
                                           change_ext_conn_request, grant,
                                           grant_request, **kwargs):
        return self._hook('change_external_connectivity_start', context, vnf_instance,
                   change_ext_conn_request, grant, grant_request)

    def change_external_connectivity_end(self, context, vnf_instance,
                                         change_ext_conn_request, grant,
                                         grant_request, **kwargs):
        return self._hook('change_external_connectivity_end', context, vnf_instance,
                   change_ext_conn_request, grant, grant_request)

    def modify_information_start(self, context, vnf_instance,
                                 modify_vnf_request, **kwargs):
        return self._hook('modify_information_start', context, vnf_instance,
                   modify_vnf_request, None, None)

    def modify_information_end(self, context, vnf_instance,
                               modify_vnf_request, **kwargs):
        return self._hook('modify_information_end', context, vnf_instance,
                   modify_vnf_request, None, None)

    # -- the one way every hook goes ----------------------------------------

    def package_dir(self, context, vnf_instance):
        """Where the conductor keeps the unpacked v1 package (`vnf_package_csar_path/<package id>`)."""
        return vnflcm_utils.get_vnf_package_path(context, vnf_instance.vnfd_id)

    def request_document(self, operation, context, vnf_instance, request,
                         grant, grant_request):
        return {
            'apiVersion': API_VERSION,
            'vnfm': 'tacker-v1',
            'operation': operation,
            'request': to_sol(request) if request is not None else {},
            'vnf_instance': to_sol(vnf_instance),
            'grant_request': to_sol(grant_request),
            'grant_response': to_sol(grant),
            'tmp_csar_dir': self.package_dir(context, vnf_instance),
            'options': options(operation, vnf_instance.id),
        }

    def _hook(self, operation, context, vnf_instance, request, grant,
              grant_request):
        doc = self.request_document(operation, context, vnf_instance, request,
                                    grant, grant_request)
        response = run_hook(doc, vnf_instance.id)
        for w in response.get('warnings') or []:
            LOG.warning('mgmt-driver %s: %s', operation,
                        w.get('message', w) if isinstance(w, dict) else w)
        returned = response.get('vnf_instance')
        if isinstance(returned, dict) and 'vimConnectionInfo' in returned:
            vnf_instance.vim_connection_info = vim_connections(
                returned['vimConnectionInfo'])
        vim = (response.get('result') or {}).get('vim')
        if isinstance(vim, dict):
            log_vim_record(vnf_instance.id, vim)
        return response


def log_vim_record(instance_id, vim):
    """The cluster's VIM record (`result.vim`), for the operator who registers the VIM.

    Tacker v1 keeps nothing of a driver's answer but the instance, so the conductor
    log is where the operator finds it. The hook masks its secrets already; the
    token and any password are dropped here as well, whatever the hook sent.
    """
    shown = json.loads(json.dumps(vim))
    for parent, key in ((shown.get('auth_cred'), 'bearer_token'),
                        ((shown.get('extra') or {}).get('helm_info'), 'masternode_password')):
        if isinstance(parent, dict):
            parent.pop(key, None)
    LOG.info('mgmt-driver: VIM record of VNF instance %s (register it with '
             '`openstack vim register`, see the driver README): %s',
             instance_id, json.dumps(shown, sort_keys=True))


def options(operation, instance_id):
    """The operator's per-VNF options: with `$MGMT_DRIVER_KUBECONFIG_DIR`, a kubeconfig for
    each cluster at `<dir>/<vnf instance id>.kubeconfig` (0600), written by instantiate_end
    and heal_end. (A `--kubeconfig-out` flag in `$MGMT_DRIVER_HOOK_ARGS` would be one file
    for every VNF; the request body may not choose the path at all.)"""
    out = {}
    kube_dir = os.environ.get('MGMT_DRIVER_KUBECONFIG_DIR')
    if kube_dir and operation in ('instantiate_end', 'heal_end'):
        out['kubeconfig_out'] = os.path.join(kube_dir, '%s.kubeconfig' % instance_id)
    return out


def hook_command():
    """`mgmt-driver hook` plus `$MGMT_DRIVER_HOOK_ARGS`; the binary from `$MGMT_DRIVER_BIN` or PATH."""
    binary = os.environ.get('MGMT_DRIVER_BIN') or shutil.which('mgmt-driver')
    if not binary:
        raise exceptions.MgmtDriverOtherError(
            error_message='mgmt-driver not found: set MGMT_DRIVER_BIN or put it on PATH')
    return [binary, 'hook'] + shlex.split(os.environ.get('MGMT_DRIVER_HOOK_ARGS', ''))


def run_hook(doc, instance_id):
    """Run the hook; the response document, or MgmtDriverOtherError with its error.

    mgmt-driver's stderr (JSON event lines, secret-free by contract) goes to
    Tacker's log; its stdout (which may hold the bearer token in
    `vnf_instance`) is only parsed, never logged.
    """
    cmd = hook_command()
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, input=json.dumps(doc).encode(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              check=False)
    except OSError as e:
        raise exceptions.MgmtDriverOtherError(
            error_message='cannot run %s: %s' % (cmd[0], e.strerror))
    stderr = proc.stderr.decode('utf-8', 'replace')
    for line in stderr.splitlines():
        LOG.debug('mgmt-driver [%s]: %s', instance_id, line)
    try:
        response = json.loads(proc.stdout.decode('utf-8'))
    except ValueError:
        response = None
    LOG.info('mgmt-driver hook %s for %s: exit %s in %.1f s', doc['operation'],
             instance_id, proc.returncode, time.monotonic() - started)
    if proc.returncode != 0 or not isinstance(response, dict) or not response.get('ok'):
        raise exceptions.MgmtDriverOtherError(
            error_message=error_text(response, proc.returncode, stderr))
    return response
