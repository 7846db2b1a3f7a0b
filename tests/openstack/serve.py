"""Serve Keystone's or Neutron's WSGI application on 127.0.0.1 with the standard library's
threaded WSGI server, for scripts/openstack-lab.sh (run by the openstack venv's python).

    serve.py keystone|neutron PORT

Both applications read their configuration files from environment variables that the lab
script sets (OS_KEYSTONE_CONFIG_*, OS_NEUTRON_CONFIG_*). A launcher of our own, rather than a
WSGI server from PyPI, because Neutron's WSGI entry point hands sys.argv to oslo.config, which
rejects any server's own command line; here argv is emptied before the application loads.
"""

import socketserver
import sys
from wsgiref import simple_server


class ThreadingWSGIServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """One thread per request: Neutron validates each token by calling Keystone."""

    daemon_threads = True


class QuietHandler(simple_server.WSGIRequestHandler):
    """Access lines go to stderr (the service log) with no reverse DNS lookup."""

    def address_string(self):
        return self.client_address[0]


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("keystone", "neutron"):
        sys.exit("usage: serve.py keystone|neutron PORT")
    service, port = sys.argv[1], int(sys.argv[2])
    sys.argv = [sys.argv[0]]
    if service == "keystone":
        from keystone.server import wsgi

        app = wsgi.initialize_public_application()
    else:
        from neutron import server
        from neutron.server import api

        app = server.boot_server(api.api_server, prog="neutron-api")
    httpd = simple_server.make_server(
        "127.0.0.1", port, app, server_class=ThreadingWSGIServer, handler_class=QuietHandler
    )
    print(f"{service} listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
