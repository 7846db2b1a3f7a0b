#!/usr/bin/python3
# serve-repo.py - a tiny HTTP server for a lab chart repository. Part of the
# mgmt-driver LAB KIT (tests/labkit/, see docs/labkit.md, section "Helm"); test
# tooling, not a production server. Python 3 stdlib only.
#
#   serve-repo.py DIR ADDR PORT [LOGFILE]
#
# Serves the files of DIR (read-only, GET/HEAD; no directory listings) on
# ADDR:PORT, e.g. the host side of a lab bridge (198.18.K.1), which lab nodes
# reach. PORT 0 picks a free port. Once listening it prints one line on stdout:
#   serving DIR on http://ADDR:PORT
# Each request is appended to LOGFILE (default: DIR.log, next to DIR) as one
# tab-separated line: time, client, method, path, status, user ("-" when no
# credentials were sent). Passwords are never logged.
# With REPO_USER and REPO_PASSWORD in the environment every request needs HTTP
# basic auth with them (401 otherwise), so a test can check that a client sent
# the repository's credentials. Exits 0 on SIGTERM or SIGINT.
"""Serve a directory over HTTP for lab chart-repository tests."""

import base64
import binascii
import functools
import hmac
import http.server
import os
import signal
import sys
import threading
import time

USAGE = "usage: serve-repo.py DIR ADDR PORT [LOGFILE]   (env REPO_USER/REPO_PASSWORD: basic auth)"


class Handler(http.server.SimpleHTTPRequestHandler):
    server_version = "labkit-serve-repo/1"
    sys_version = ""
    auth = None  # (user, password) or None
    log_lock = threading.Lock()
    log_file = None

    def _user(self):
        """(user sent or None, authorised?)"""
        hdr = self.headers.get("Authorization", "")
        user = None
        ok = self.auth is None
        if hdr.startswith("Basic "):
            try:
                raw = base64.b64decode(hdr[6:].strip(), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                raw = ""
            u, _, p = raw.partition(":")
            user = u or None
            if self.auth is not None:
                ok = hmac.compare_digest(u.encode(), self.auth[0].encode()) and \
                    hmac.compare_digest(p.encode(), self.auth[1].encode())
        return user, ok

    def _gate(self):
        user, ok = self._user()
        self._req_user = user
        if ok:
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="lab chart repository"')
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        body = b"401 Unauthorized\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return False

    def do_GET(self):
        if self._gate():
            super().do_GET()

    def do_HEAD(self):
        if self._gate():
            super().do_HEAD()

    def list_directory(self, path):
        self.send_error(404, "File not found")
        return None

    def log_request(self, code="-", size="-"):
        if isinstance(code, http.HTTPStatus):
            code = code.value
        line = "%s\t%s\t%s\t%s\t%s\t%s\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), self.client_address[0], self.command,
            self.path, code, getattr(self, "_req_user", None) or "-")
        with self.log_lock:
            self.log_file.write(line)
            self.log_file.flush()

    def log_message(self, fmt, *args):
        pass


def main(argv):
    if len(argv) in (1,) and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if len(argv) not in (3, 4):
        sys.stderr.write(USAGE + "\n")
        return 2
    root, addr, port = argv[0], argv[1], argv[2]
    if not os.path.isdir(root):
        sys.stderr.write("serve-repo.py: %s is not a directory\n" % root)
        return 1
    try:
        port = int(port)
    except ValueError:
        sys.stderr.write("serve-repo.py: PORT must be a number\n")
        return 2
    root = os.path.realpath(root)
    logpath = argv[3] if len(argv) == 4 else root.rstrip("/") + ".log"
    user, password = os.environ.get("REPO_USER"), os.environ.get("REPO_PASSWORD")
    if (user is None) != (password is None):
        sys.stderr.write("serve-repo.py: set both REPO_USER and REPO_PASSWORD, or neither\n")
        return 2
    Handler.auth = (user, password) if user is not None else None
    Handler.log_file = open(logpath, "a", encoding="utf-8")  # pylint: disable=consider-using-with

    def stop(_sig, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    http.server.ThreadingHTTPServer.daemon_threads = True
    try:
        srv = http.server.ThreadingHTTPServer((addr, port), functools.partial(Handler, directory=root))
    except OSError as e:
        sys.stderr.write("serve-repo.py: cannot listen on %s:%d: %s\n" % (addr, port, e.strerror or e))
        return 1
    host = "[%s]" % addr if ":" in addr else addr
    sys.stdout.write("serving %s on http://%s:%d\n" % (root, host, srv.server_address[1]))
    sys.stdout.flush()
    try:
        srv.serve_forever(poll_interval=0.2)
    except SystemExit:
        pass
    finally:
        srv.server_close()
        Handler.log_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
