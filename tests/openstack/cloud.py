"""A small client of the lab's real Keystone v3 and Neutron (scripts/openstack-lab.sh), to
populate them the way a VIM would have been before Tacker instantiates: tenants, the VMs'
networks, subnets and ports with the lab nodes' addresses, routers and floating IPs.

Standard library only (urllib, json) so that tests run by any python (the Tacker venv's, the
system's) can import it. Every non-2xx answer raises ApiError with the API's own message; the
request body (which may hold a password) is never part of an error.

    python3 tests/openstack/cloud.py register-network CLOUD_JSON
        registers the `network` service and its endpoints (RegionOne) in Keystone's catalogue;
        used by scripts/openstack-lab.sh before Neutron starts.
"""

import ipaddress
import json
import sys
import urllib.error
import urllib.request

TIMEOUT = 30


class ApiError(Exception):
    """A non-2xx answer: the method, the URL, the status and the API's message."""

    def __init__(self, method, url, status, message):
        super().__init__(f"{method} {url}: HTTP {status}: {message}")
        self.status = status
        self.message = message


def _message(raw):
    """The human part of an OpenStack error body (Keystone: error.message, Neutron:
    NeutronError.message), or the raw text when it is not one of those."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:500]
    if isinstance(doc, dict):
        for key in ("error", "NeutronError", "badRequest", "itemNotFound"):
            inner = doc.get(key)
            if isinstance(inner, dict) and inner.get("message"):
                return str(inner["message"])
    return json.dumps(doc)[:500]


def request(method, url, token=None, body=None):
    """One HTTP call; returns (status, headers, parsed JSON or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("X-Auth-Token", token)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            raw = resp.read()
            return resp.status, dict(resp.headers), (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raise ApiError(method, url, e.code, _message(e.read())) from None


def password_auth_body(username, password, project, user_domain="Default", project_domain="Default"):
    """Keystone v3 password authentication scoped to a project, all by name: what the driver
    sends from a Tacker accessInfo."""
    return {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": username, "domain": {"name": user_domain}, "password": password}
                },
            },
            "scope": {"project": {"name": project, "domain": {"name": project_domain}}},
        }
    }


def catalogue_url(token_body, service_type, region, interface="public"):
    """The endpoint of a service type for a region and interface in a token's catalogue."""
    for svc in token_body["token"].get("catalog", []):
        if svc["type"] != service_type:
            continue
        for ep in svc["endpoints"]:
            if ep["interface"] == interface and ep.get("region_id", ep.get("region")) == region:
                return ep["url"]
    raise LookupError(f"no {interface} {service_type} endpoint for region {region} in the catalogue")


class Cloud:
    """The lab cloud described by DIR/cloud.json. Calls are made as admin unless `auth` (an
    accessInfo dict from tenant()) says otherwise."""

    def __init__(self, cloud_json_path):
        with open(cloud_json_path) as f:
            doc = json.load(f)
        self.auth_url = doc["auth_url"].rstrip("/")
        self.region = doc["region"]
        self.neutron_url = doc["neutron_url"].rstrip("/")
        a = doc["admin"]
        self.admin = {
            "username": a["username"],
            "password": a["password"],
            "project": a["project_name"],
            "userDomain": a["user_domain_name"],
            "projectDomain": a["project_domain_name"],
            "region": doc["region"],
        }
        self._tokens = {}

    # --- Keystone ---

    def authenticate(self, auth=None):
        """POST /v3/auth/tokens for an accessInfo; returns (token, token response body)."""
        auth = auth or self.admin
        body = password_auth_body(
            auth["username"], auth["password"], auth["project"], auth["userDomain"], auth["projectDomain"]
        )
        _, headers, doc = request("POST", self.auth_url + "/auth/tokens", body=body)
        return headers["X-Subject-Token"], doc

    def token(self, auth=None):
        auth = auth or self.admin
        key = (auth["username"], auth["userDomain"], auth["project"], auth["projectDomain"])
        if key not in self._tokens:
            self._tokens[key] = self.authenticate(auth)[0]
        return self._tokens[key]

    @property
    def admin_token(self):
        return self.token()

    def keystone(self, method, path, body=None, auth=None):
        return request(method, self.auth_url + path, self.token(auth), body)[2]

    def _find_one(self, collection, name):
        items = self.keystone("GET", f"/{collection}?name={urllib.request.quote(name)}")[collection]
        return items[0] if items else None

    def _create_or_find(self, collection, singular, body):
        try:
            return self.keystone("POST", f"/{collection}", {singular: body})[singular]
        except ApiError as e:
            if e.status != 409:
                raise
            found = self._find_one(collection, body["name"])
            if found is None:
                raise
            return found

    def register_network(self):
        """The `network` service (Neutron) with public, internal and admin endpoints in this
        cloud's region, unless already there."""
        svc = None
        for s in self.keystone("GET", "/services?type=network")["services"]:
            svc = s
        if svc is None:
            svc = self.keystone(
                "POST", "/services", {"service": {"type": "network", "name": "neutron", "enabled": True}}
            )["service"]
        have = {
            e["interface"]
            for e in self.keystone("GET", f"/endpoints?service_id={svc['id']}")["endpoints"]
            if e["region_id"] == self.region
        }
        for interface in ("public", "internal", "admin"):
            if interface not in have:
                self.keystone(
                    "POST",
                    "/endpoints",
                    {
                        "endpoint": {
                            "service_id": svc["id"],
                            "interface": interface,
                            "region_id": self.region,
                            "url": self.neutron_url,
                            "enabled": True,
                        }
                    },
                )
        return svc

    def tenant(self, project, user, password):
        """A project and a user (domain Default) with the member and reader roles on it.
        Returns the accessInfo Tacker records for a VIM: username, password, project,
        projectDomain, userDomain, region."""
        p = self._create_or_find("projects", "project", {"name": project, "domain_id": "default"})
        u = self._create_or_find(
            "users",
            "user",
            {"name": user, "password": password, "domain_id": "default", "default_project_id": p["id"]},
        )
        for role in ("member", "reader"):
            r = self._find_one("roles", role)
            if r is None:
                raise LookupError(f"Keystone has no role named {role!r} (keystone-manage bootstrap makes it)")
            self.keystone("PUT", f"/projects/{p['id']}/users/{u['id']}/roles/{r['id']}")
        return {
            "username": user,
            "password": password,
            "project": project,
            "projectDomain": "Default",
            "userDomain": "Default",
            "region": self.region,
        }

    def project_id(self, name):
        p = self._find_one("projects", name)
        if p is None:
            raise LookupError(f"no Keystone project named {name!r}")
        return p["id"]

    # --- Neutron ---

    def neutron(self, method, path, body=None, auth=None):
        return request(method, self.neutron_url + path, self.token(auth), body)[2]

    def network(self, name, cidr, gateway=None, auth=None):
        """A network and one IPv4 subnet (no DHCP: addresses are fixed by the ports).
        Returns {"network": ..., "subnet": ...}."""
        net = self.neutron("POST", "/v2.0/networks", {"network": {"name": name}}, auth)["network"]
        sub = {"network_id": net["id"], "name": name + "-subnet", "ip_version": 4, "cidr": cidr, "enable_dhcp": False}
        if gateway is not None:
            sub["gateway_ip"] = gateway
        subnet = self.neutron("POST", "/v2.0/subnets", {"subnet": sub}, auth)["subnet"]
        return {"network": net, "subnet": subnet}

    def port(
        self,
        net,
        ip,
        name=None,
        device_id=None,
        device_owner="compute:nova",
        allowed_address_pairs=None,
        auth=None,
    ):
        """A port with one fixed address on the network's subnet (net: what network() returned)."""
        body = {
            "network_id": net["network"]["id"],
            "fixed_ips": [{"subnet_id": net["subnet"]["id"], "ip_address": ip}],
        }
        if name is not None:
            body["name"] = name
        if device_id is not None:
            body["device_id"] = device_id
        if device_owner is not None:
            body["device_owner"] = device_owner
        if allowed_address_pairs is not None:
            body["allowed_address_pairs"] = [
                p if isinstance(p, dict) else {"ip_address": p} for p in allowed_address_pairs
            ]
        return self.neutron("POST", "/v2.0/ports", {"port": body}, auth)["port"]

    def update_port(self, port_id, auth=None, **fields):
        return self.neutron("PUT", f"/v2.0/ports/{port_id}", {"port": fields}, auth)["port"]

    def delete_port(self, port_id, auth=None):
        """Deletes as admin by default: Neutron's policy lets only a service or admin delete
        ports owned by compute (device_owner compute:*)."""
        self.neutron("DELETE", f"/v2.0/ports/{port_id}", auth=auth)

    def external_network(self, cidr, name="public"):
        """An admin-owned flat external network with a subnet: where floating IPs come from.
        Neutron picks router gateway addresses from the allocation pool, which is kept to the
        subnet's last quarter so that floating IPs with chosen addresses below it never clash."""
        sub = ipaddress.ip_network(cidr)
        hosts = list(sub.hosts())
        pool = {"start": str(hosts[len(hosts) * 3 // 4]), "end": str(hosts[-1])}
        net = self.neutron(
            "POST",
            "/v2.0/networks",
            {
                "network": {
                    "name": name,
                    "router:external": True,
                    "provider:network_type": "flat",
                    "provider:physical_network": name,
                }
            },
        )["network"]
        subnet = self.neutron(
            "POST",
            "/v2.0/subnets",
            {
                "subnet": {
                    "network_id": net["id"],
                    "name": name + "-subnet",
                    "ip_version": 4,
                    "cidr": cidr,
                    "enable_dhcp": False,
                    "allocation_pools": [pool],
                }
            },
        )["subnet"]
        return {"network": net, "subnet": subnet}

    def router(self, ext_net, subnet, name="router", auth=None):
        """A router with its gateway on the external network and an interface on `subnet`
        (a subnet dict, or what network() returned), so floating IPs can reach that subnet."""
        if "subnet" in subnet:
            subnet = subnet["subnet"]
        r = self.neutron(
            "POST",
            "/v2.0/routers",
            {"router": {"name": name, "external_gateway_info": {"network_id": ext_net["network"]["id"]}}},
            auth,
        )["router"]
        self.neutron("PUT", f"/v2.0/routers/{r['id']}/add_router_interface", {"subnet_id": subnet["id"]}, auth)
        return r

    def floating_ip(self, ext_net, port_id, address):
        """A floating IP with a chosen address on the port, owned by the port's project.
        Made as admin: choosing the address is an admin-only policy in Neutron."""
        owner = self.neutron("GET", f"/v2.0/ports/{port_id}")["port"]["project_id"]
        return self.neutron(
            "POST",
            "/v2.0/floatingips",
            {
                "floatingip": {
                    "floating_network_id": ext_net["network"]["id"],
                    "floating_ip_address": address,
                    "port_id": port_id,
                    "project_id": owner,
                }
            },
        )["floatingip"]


def main(argv):
    if len(argv) == 3 and argv[1] == "register-network":
        svc = Cloud(argv[2]).register_network()
        print(f"network service {svc['id']} registered")
        return 0
    print("usage: cloud.py register-network CLOUD_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
