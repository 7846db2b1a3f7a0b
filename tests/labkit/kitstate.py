#!/usr/bin/python3
# kitstate.py - LAB KIT shared state module. Part of the mgmt-driver lab kit
# (tests/labkit/): stand-ins for kubeadm, kubectl, apt-get, systemctl, ... that
# let the install scripts and the driver run on sshd lab nodes. Not part of any
# real tool.
#
# Two JSON stores, each guarded by an flock(2)ed lock file and written
# atomically (temp file + rename):
#   shared:     /var/lib/labkit/state.json      one cluster for all nodes of a lab
#                                               (the host's DIR/kit, bind-mounted)
#   node-local: /var/lib/labkit-node/state.json packages, units, sysctls, ... of
#                                               one node (in its overlay "disk")
# plus /var/lib/labkit/config.json (install_delay_s) and /var/lib/labkit/fail/<node>.
"""Lab kit: shared state, locking, node identity and small helpers."""

import contextlib
import fcntl
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time

KIT_DIR = os.environ.get("LABKIT_DIR") or "/var/lib/labkit"
NODE_DIR = "/var/lib/labkit-node"
IDENTITY_FILE = "/run/mdlab/labkit-node"
DEFAULT_PKG_VERSION = "1.31.4-1.1"
STATE_VERSION = 1
MAX_EVENTS = 2000


def die(msg, code=1):
    """Print msg on stderr and exit."""
    if msg:
        sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")
    sys.stdout.flush()
    sys.exit(code)


def out(text=""):
    sys.stdout.write(text + "\n")


def err(text=""):
    sys.stderr.write(text + "\n")


# ---------------------------------------------------------------- stores
class Store:
    """A JSON document at PATH, locked through PATH.lock."""

    def __init__(self, path, default, mode=0o666):
        self.path = path
        self.lock_path = path + ".lock"
        self.default = default
        self.mode = mode

    def _lock(self, how):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        old = os.umask(0)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, self.mode)
        finally:
            os.umask(old)
        fcntl.flock(fd, how)
        return fd

    def _load(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return self.default()

    def _write(self, doc):
        tmp = "%s.tmp.%d" % (self.path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        os.chmod(tmp, self.mode)
        os.replace(tmp, self.path)

    def read(self):
        fd = self._lock(fcntl.LOCK_SH)
        try:
            return self._load()
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def update(self):
        """Exclusive lock; yields the document; writes it back unless the block raised."""
        fd = self._lock(fcntl.LOCK_EX)
        try:
            doc = self._load()
            yield doc
            self._write(doc)
        finally:
            os.close(fd)


def default_shared():
    return {"version": STATE_VERSION, "cluster": None, "timing": {}, "events": []}


def default_node():
    return {"version": STATE_VERSION, "packages": {}, "holds": [], "units": {},
            "sysctl": {}, "modules": [], "swapoff": [], "log": []}


def shared_store(kit_dir=None):
    return Store(os.path.join(kit_dir or KIT_DIR, "state.json"), default_shared)


def node_store():
    return Store(os.path.join(NODE_DIR, "state.json"), default_node, mode=0o644)


def read_config(kit_dir=None):
    try:
        with open(os.path.join(kit_dir or KIT_DIR, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def add_event(state, node, ip, event, **extra):
    ev = {"t": time.time(), "node": node, "ip": ip, "event": event}
    ev.update(extra)
    state.setdefault("events", []).append(ev)
    del state["events"][:-MAX_EVENTS]


def node_log(doc, line):
    doc.setdefault("log", []).append("%.3f %s" % (time.time(), line))
    del doc["log"][:-500]


# ---------------------------------------------------------------- identity
def identity():
    """The lab node's identity written by lab.sh: {'name', 'ip', 'lab'} (may be empty)."""
    ident = {}
    try:
        with open(IDENTITY_FILE, encoding="utf-8") as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k:
                    ident[k] = v
    except OSError:
        pass
    return ident


def require_node(tool):
    """Refuse to run anywhere but inside a lab-kit node (never touch the host)."""
    if not os.path.exists(IDENTITY_FILE):
        die("%s: this is the lab kit stand-in, not the real %s; it only runs inside a "
            "lab node started with `scripts/lab.sh up N --kit` (%s is missing)"
            % (tool, tool, IDENTITY_FILE))


def is_root():
    return os.geteuid() == 0


def hostname():
    return socket.gethostname()


def ipv4_addrs(dev="eth0"):
    """Global primary IPv4 addresses of dev (secondaries, e.g. a VIP, come last)."""
    try:
        res = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", dev, "scope", "global"],
                             capture_output=True, text=True, check=False)
    except OSError:
        return []
    prim, sec = [], []
    for line in res.stdout.splitlines():
        m = re.search(r"\binet (\d+\.\d+\.\d+\.\d+)/\d+", line)
        if m:
            (sec if " secondary " in line else prim).append(m.group(1))
    return prim + sec


def node_ip():
    addrs = ipv4_addrs("eth0")
    if addrs:
        return addrs[0]
    return identity().get("ip", "127.0.0.1")


def fail_message(names):
    """Content of /var/lib/labkit/fail/<name> for the first of names that exists, else None."""
    for n in names:
        if not n or "/" in n:
            continue
        p = os.path.join(KIT_DIR, "fail", n)
        try:
            with open(p, encoding="utf-8") as f:
                msg = f.read().strip()
        except OSError:
            continue
        return msg or "lab kit: injected failure for %s (%s)" % (n, p)
    return None


# ---------------------------------------------------------------- random ids, time
TOKEN_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generated-name alphabet


def rand_str(n, alphabet=TOKEN_ALPHABET):
    return "".join(secrets.choice(alphabet) for _ in range(n))


def rand_hex(n):
    s = secrets.token_hex((n + 1) // 2)[:n]
    return ("8" + s[1:]) if s[0] == "0" else s


def bootstrap_token():
    return rand_str(6) + "." + rand_str(16)


def rand_suffix(n=5):
    return rand_str(n, SUFFIX_ALPHABET)


def generated_name(base):
    """The name the API server gives an object created with generateName BASE (a controller's
    Pods: `<owner>-`): BASE cut to 58 characters (63 - 5), then 5 random characters. A long
    owner name loses the end of its pod-template-hash, as on a real cluster."""
    return base[:58] + rand_suffix()


def rand_uid():
    h = secrets.token_hex(16)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


_DUR = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text):
    """Go time.ParseDuration: '2h', '1h30m', '30s', '0'. Returns seconds or raises ValueError."""
    s = text.strip()
    if s in ("0", "+0", "-0"):
        return 0.0
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if not s:
        raise ValueError('time: invalid duration "%s"' % text)
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DUR.match(s, pos)
        if not m:
            if re.match(r"\d", s[pos:]):
                raise ValueError('time: missing unit in duration "%s"' % text)
            raise ValueError('time: invalid duration "%s"' % text)
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def go_duration(seconds):
    """Format like Go's Duration.String() for whole seconds: 24h0m0s, 5m0s, 30s."""
    s = int(round(seconds))
    if s == 0:
        return "0s"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return "%dh%dm%ds" % (h, m, sec)
    if m:
        return "%dm%ds" % (m, sec)
    return "%ds" % sec


def human_duration(seconds):
    """kubectl's duration.HumanDuration (the AGE column)."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return "%ds" % secs
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return "%dm" % minutes if s == 0 else "%dm%ds" % (minutes, s)
    if minutes < 180:
        return "%dm" % minutes
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return "%dh" % hours if m == 0 else "%dh%dm" % (hours, m)
    if hours < 48:
        return "%dh" % hours
    if hours < 24 * 8:
        h = hours % 24
        return "%dd" % (hours // 24) if h == 0 else "%dd%dh" % (hours // 24, h)
    if hours < 24 * 365 * 2:
        return "%dd" % (hours // 24)
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return "%dy" % (hours // 24 // 365) if dy == 0 else "%dy%dd" % (hours // 24 // 365, dy)
    return "%dy" % (hours // 24 // 365)


def short_human_duration(seconds):
    """apimachinery's duration.ShortHumanDuration (kubeadm token list TTL)."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60:
        return "%ds" % secs
    if secs < 3600:
        return "%dm" % (secs // 60)
    if secs < 86400:
        return "%dh" % (secs // 3600)
    if secs < 86400 * 365:
        return "%dd" % (secs // 86400)
    return "%dy" % (secs // (86400 * 365))


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


# ---------------------------------------------------------------- packages
def pkg_version(name, default=DEFAULT_PKG_VERSION):
    """Installed version of a package in this node's state (or default)."""
    try:
        doc = node_store().read()
    except OSError:
        return default
    p = doc.get("packages", {}).get(name)
    return (p or {}).get("version") or default


def kube_version(pkg_ver):
    """'1.31.4-1.1' -> 'v1.31.4'; '1:1.26.0-00' -> 'v1.26.0'."""
    v = pkg_ver.split(":", 1)[-1]
    m = re.match(r"(\d+\.\d+\.\d+)", v)
    return "v" + (m.group(1) if m else "1.31.4")


# ---------------------------------------------------------------- command lines
class FlagError(ValueError):
    pass


def parse_flags(argv, values=(), bools=(), shorts=None, lenient=False):
    """Cobra/pflag-like parsing. values/bools: long names without dashes; shorts: {'n': 'namespace'}.
    Returns (opts: {name: [values]}, positionals, args after '--' or None). Unknown flags raise
    FlagError unless lenient (then they are kept as booleans or name=value)."""
    shorts = shorts or {}
    values, bools = set(values), set(bools)
    opts, pos, rest = {}, [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            rest = argv[i:]
            break
        if a.startswith("--") and len(a) > 2:
            name, eq, val = a[2:].partition("=")
            if name in values:
                if not eq:
                    if i >= len(argv):
                        raise FlagError("flag needs an argument: --%s" % name)
                    val = argv[i]
                    i += 1
                opts.setdefault(name, []).append(val)
            elif name in bools:
                opts.setdefault(name, []).append(val.lower() not in ("false", "0") if eq else True)
            elif lenient:
                opts.setdefault(name, []).append(val if eq else True)
            else:
                raise FlagError("unknown flag: --%s" % name)
        elif a.startswith("-") and len(a) > 1 and a != "-":
            j = 1
            while j < len(a):
                ch = a[j]
                name = shorts.get(ch)
                if name is None:
                    if lenient:
                        j += 1
                        continue
                    raise FlagError("unknown shorthand flag: '%s' in %s" % (ch, a))
                if name in values:
                    val = a[j + 1:]
                    if val.startswith("="):
                        val = val[1:]
                    if not val:
                        if i >= len(argv):
                            raise FlagError("flag needs an argument: '%s' in -%s" % (ch, ch))
                        val = argv[i]
                        i += 1
                    opts.setdefault(name, []).append(val)
                    break
                opts.setdefault(name, []).append(True)
                j += 1
        else:
            pos.append(a)
    return opts, pos, rest


def opt(opts, name, default=None):
    """Last value of a flag."""
    v = opts.get(name)
    return v[-1] if v else default
