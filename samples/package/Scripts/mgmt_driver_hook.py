#!/usr/bin/env python3
"""Tacker v2 management script that hands every lifecycle hook to `mgmt-driver hook`.

Tacker's conductor runs this file with its own Python, a pickled dict on stdin (operation,
request, vnf_instance, grant_request, grant_response, tmp_csar_dir,
user_script_err_handling_data) and reads a pickled dict from stdout. This shim only translates:
pickle -> one JSON document (docs/hook-protocol.md, mgmt-driver.hook/v1) -> `mgmt-driver hook`
-> pickle. Every decision is taken by mgmt-driver, so this file stays small and stdlib-only.

Environment:
  MGMT_DRIVER_BIN        the mgmt-driver binary (default: `mgmt-driver` on PATH)
  MGMT_DRIVER_HOOK_ARGS  extra arguments for `mgmt-driver hook`, shell-split (e.g. --dry-run)
Anything else (MGMT_DRIVER_STATE_DIR, ...) reaches mgmt-driver as the conductor set it.

Stdout carries only the pickle: the returned vnf_instance holds the cluster's bearer token,
which Tacker stores, so it must never reach stderr, where Tacker copies text into its errors.

Tacker stores the whole of this script's stderr as the operation's error detail
(lcmocc.error.detail) when it exits non-zero, and only logs it at debug level otherwise. So
mgmt-driver's stderr (progress events) is kept here, not passed on: on failure the shim writes
the response's error lines once each, at most MAX_ERROR_LINES of them and MAX_DETAIL characters
in all. MGMT_DRIVER_HOOK_LOG, when set, is a file the progress is appended to.
"""

import base64
import datetime
import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys

API_VERSION = "mgmt-driver.hook/v1"
PROG = "mgmt_driver_hook.py"
# What Tacker stores per failed operation: enough for the errors of a large cluster's nodes.
MAX_ERROR_LINES = 20
MAX_DETAIL = 4000


class HookError(Exception):
    """A failure of the shim itself (not of mgmt-driver): reported on stderr, exit 1."""


def jsonable(value):
    """Tacker's dict as JSON can carry it: datetimes as ISO 8601, bytes as text (base64 when
    not UTF-8), sets as sorted lists, Tacker objects through their own to_dict()."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    # Only the type is named: the value may be a secret.
    raise TypeError("a value of type %s has no JSON form" % type(value).__name__)


def request_document(script_dict):
    if not isinstance(script_dict, dict):
        raise HookError("stdin is not Tacker's script dict (got %s)" % type(script_dict).__name__)
    doc = dict(script_dict)
    doc["apiVersion"] = API_VERSION
    doc.setdefault("vnfm", "tacker-v2")
    try:
        return json.dumps(doc, default=jsonable).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise HookError("cannot convert Tacker's data to JSON: %s" % e) from None


def command():
    binary = os.environ.get("MGMT_DRIVER_BIN") or "mgmt-driver"
    if os.sep not in binary:
        # A bare name is looked up on PATH, as the shell would.
        binary = shutil.which(binary) or ""
    if not binary:
        raise HookError("mgmt-driver not found: set MGMT_DRIVER_BIN or put mgmt-driver on the "
                        "conductor's PATH")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise HookError("MGMT_DRIVER_BIN=%s is not an executable file" % binary)
    try:
        extra = shlex.split(os.environ.get("MGMT_DRIVER_HOOK_ARGS", ""))
    except ValueError as e:
        raise HookError("MGMT_DRIVER_HOOK_ARGS: %s" % e) from None
    return [binary, "hook"] + extra


def keep_progress(stderr):
    """Append mgmt-driver's progress (secret-free by contract) to MGMT_DRIVER_HOOK_LOG, if set."""
    path = os.environ.get("MGMT_DRIVER_HOOK_LOG")
    if not path or not stderr:
        return
    try:
        with open(path, "ab") as f:
            f.write(stderr)
    except OSError:
        pass  # progress is a convenience; the operation's outcome does not depend on it


def last_error(stderr):
    """mgmt-driver's last `error: ...` line (else its last line), for a run without a response."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    errors = [ln[len("error: "):] for ln in lines if ln.startswith("error: ")]
    return (errors or lines or ["no output"])[-1][:MAX_DETAIL // 2]


def run(argv, document):
    """Run mgmt-driver; its stderr (progress, warnings) is kept apart from Tacker's error."""
    try:
        child = subprocess.run(argv, input=document, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise HookError("cannot run %s: %s" % (argv[0], e.strerror)) from None
    keep_progress(child.stderr)
    code = child.returncode if child.returncode >= 0 else 128 - child.returncode
    try:
        response = json.loads(child.stdout.decode("utf-8"))
        if not isinstance(response, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise HookError("mgmt-driver hook exited %d without a readable response (%s): %s"
                        % (code, e, last_error(child.stderr))) from None
    return code, response


def answer(response):
    """What Tacker applies: the updated instance and the error-handling data, when present."""
    return {k: response[k] for k in ("vnf_instance", "user_script_err_handling_data")
            if response.get(k) is not None}


def error_lines(response, code):
    """The response's errors, each once, bounded: what Tacker stores as the error detail."""
    lines = []
    for e in response.get("errors") or []:
        msg = e.get("message") if isinstance(e, dict) else e
        if msg and str(msg) not in lines:
            lines.append(str(msg))
    if not lines:
        lines.append("exit %d" % code)
    prefix = "mgmt-driver hook %s: " % response.get("operation", "?")
    more = len(lines) - MAX_ERROR_LINES
    out = "".join(prefix + m + "\n" for m in lines[:MAX_ERROR_LINES])
    if more > 0:
        out += "%s... and %d more errors\n" % (prefix, more)
    if len(out) > MAX_DETAIL:
        out = out[:MAX_DETAIL - 20] + "... (cut)\n"
    return out


def main():
    try:
        script_dict = pickle.load(sys.stdin.buffer)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the same thing here
        sys.stderr.write("%s: cannot read Tacker's pickled input: %s\n" % (PROG, type(e).__name__))
        return 1
    try:
        document = request_document(script_dict)
        code, response = run(command(), document)
    except HookError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    sys.stdout.buffer.write(pickle.dumps(answer(response)))
    sys.stdout.flush()
    if code != 0:
        sys.stderr.write(error_lines(response, code))
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
