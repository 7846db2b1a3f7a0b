"""Self-test of the OpenStack lab (scripts/openstack-lab.sh) and of tests/openstack/cloud.py:
bring a real Keystone and Neutron up, populate them as a tenant the way a VIM holds a VNF's
VMs, read everything back with exactly the calls the driver makes, check tenant isolation,
bring them down and check that nothing of ours is left running.

    python3 tests/openstack/selftest.py [--dir DIR] [--write-fixtures]

DIR defaults to target/openstack-lab-selftest. --write-fixtures saves one real response of
each call the driver makes under tests/data/openstack/ (token value replaced by a
placeholder) for the Rust client's unit tests. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cloud as oscloud  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.path.join(REPO, "scripts", "openstack-lab.sh")
FIXTURES = os.path.join(REPO, "tests", "data", "openstack")

# The lab's node network for this test (lab nets are 198.18.NET.0/24) and a documentation
# range for the floating IPs.
NODE_CIDR = "198.18.73.0/24"
VIP = "198.18.73.100"
MASTERS = {"vdu-master-0": "198.18.73.11", "vdu-master-1": "198.18.73.12"}
WORKER = ("vdu-worker-0", "198.18.73.21")
EXT_CIDR = "203.0.113.0/24"
FLOATING = "203.0.113.10"
TOKEN_PLACEHOLDER = "TOKEN-PLACEHOLDER"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def driver_token(auth_url, access):
    """What the driver does first: password auth scoped to the project, token from the
    X-Subject-Token header, Neutron from the catalogue's public `network` endpoint."""
    body = oscloud.password_auth_body(
        access["username"], access["password"], access["project"], access["userDomain"], access["projectDomain"]
    )
    status, headers, doc = oscloud.request("POST", auth_url + "/auth/tokens", body=body)
    check(status == 201, f"POST /v3/auth/tokens answered {status}, not 201")
    token = headers["X-Subject-Token"]
    return token, doc, oscloud.catalogue_url(doc, "network", access["region"]).rstrip("/")


def get(url, token):
    return oscloud.request("GET", url, token)[2]


def lab_pids(lab_dir):
    pids = {}
    pid_dir = os.path.join(lab_dir, "pids")
    for name in os.listdir(pid_dir) if os.path.isdir(pid_dir) else []:
        with open(os.path.join(pid_dir, name)) as f:
            pids[name] = int(f.read().strip())
    return pids


def processes_mentioning(text):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmd:
            found.append((int(pid), cmd.strip()))
    return found


def write_fixture(name, doc):
    os.makedirs(FIXTURES, exist_ok=True)
    with open(os.path.join(FIXTURES, name), "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")


def populate(c):
    """As tenant A: the node network, two masters carrying the VIP as an allowed address pair,
    a worker, the VIP's own port named like a CP, a router to an admin external network and a
    floating IP on the first master. Tenant B exists only to be kept out."""
    a = c.tenant("vnf-a", "tacker-a", "pw-tenant-a")
    b = c.tenant("vnf-b", "tacker-b", "pw-tenant-b")
    net = c.network("net73", NODE_CIDR, gateway="198.18.73.1", auth=a)
    ports = {}
    for i, (dev, ip) in enumerate(MASTERS.items()):
        ports[dev] = c.port(net, ip, name=f"master{i}_CP1", device_id=dev, allowed_address_pairs=[VIP], auth=a)
    ports[WORKER[0]] = c.port(net, WORKER[1], name="worker0_CP1", device_id=WORKER[0], auth=a)
    vip = c.port(net, VIP, name="vip_CP", device_owner=None, auth=a)
    ext = c.external_network(EXT_CIDR)
    c.router(ext, net, auth=a)
    fip = c.floating_ip(ext, ports["vdu-master-0"]["id"], FLOATING)
    # update_port and delete_port, on a port made for it.
    spare = c.port(net, "198.18.73.99", name="spare", device_id="vdu-spare", auth=a)
    check(c.update_port(spare["id"], auth=a, name="spare2")["name"] == "spare2", "update_port did not rename")
    # Neutron's default policy keeps tenants from deleting ports a compute service owns
    # (device_owner compute:*): Nova does that, here admin does.
    try:
        c.delete_port(spare["id"], auth=a)
        raise AssertionError("a tenant deleted a compute:nova port")
    except oscloud.ApiError as e:
        check(e.status == 403, f"tenant deleting a compute:nova port: {e}")
    c.delete_port(spare["id"])
    return a, b, ports, vip, fip


def read_back(c, a, b, ports, vip, fip, fixtures):
    """Exactly the driver's calls, as tenant A, then tenant B's view of the same ids."""
    token, token_doc, neutron = driver_token(c.auth_url, a)
    check(neutron == c.neutron_url, f"catalogue network endpoint {neutron} is not {c.neutron_url}")
    check(token_doc["token"]["project"]["name"] == "vnf-a", "token is not scoped to vnf-a")

    q = urllib.parse.urlencode([("device_id", "vdu-master-0"), ("device_id", WORKER[0])])
    listed = get(f"{neutron}/v2.0/ports?{q}", token)
    got = {p["device_id"]: [ip["ip_address"] for ip in p["fixed_ips"]] for p in listed["ports"]}
    check(got == {"vdu-master-0": [MASTERS["vdu-master-0"]], WORKER[0]: [WORKER[1]]}, f"ports by device_id: {got}")
    master = next(p for p in listed["ports"] if p["device_id"] == "vdu-master-0")
    check(master["allowed_address_pairs"][0]["ip_address"] == VIP, f"allowed_address_pairs: {master}")

    one = get(f"{neutron}/v2.0/ports/{vip['id']}", token)
    check(one["port"]["name"] == "vip_CP", f"port {vip['id']}: {one}")
    check(one["port"]["fixed_ips"][0]["ip_address"] == VIP, f"VIP port address: {one}")

    fips = get(f"{neutron}/v2.0/floatingips?port_id={ports['vdu-master-0']['id']}", token)
    check(len(fips["floatingips"]) == 1, f"floating IPs: {fips}")
    f = fips["floatingips"][0]
    check(
        (f["floating_ip_address"], f["fixed_ip_address"]) == (FLOATING, MASTERS["vdu-master-0"]),
        f"floating IP: {f}",
    )
    check(f["id"] == fip["id"], "the floating IP read back is not the one created")

    token_b, _, neutron_b = driver_token(c.auth_url, b)
    seen = get(f"{neutron_b}/v2.0/ports?{q}", token_b)["ports"]
    check(seen == [], f"tenant B sees tenant A's ports: {seen}")
    try:
        get(f"{neutron_b}/v2.0/ports/{vip['id']}", token_b)
        raise AssertionError("tenant B read tenant A's port by id")
    except oscloud.ApiError as e:
        check(e.status == 404, f"tenant B reading A's port: {e}")
    check(get(f"{neutron_b}/v2.0/floatingips?port_id={ports['vdu-master-0']['id']}", token_b)["floatingips"] == [],
          "tenant B sees tenant A's floating IP")

    if fixtures:
        request_body = oscloud.password_auth_body("tacker-a", "PASSWORD-PLACEHOLDER", "vnf-a")
        write_fixture("keystone-auth-request.json", request_body)
        write_fixture(
            "keystone-token.json",
            {"status": 201, "headers": {"X-Subject-Token": TOKEN_PLACEHOLDER}, "body": token_doc},
        )
        write_fixture("neutron-ports-by-device-id.json", listed)
        write_fixture("neutron-port.json", one)
        write_fixture("neutron-floatingips-by-port-id.json", fips)
        check(token not in json.dumps(token_doc), "the token value is in the token response body")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(REPO, "target", "openstack-lab-selftest"))
    ap.add_argument("--write-fixtures", action="store_true")
    args = ap.parse_args()
    lab_dir = os.path.abspath(args.dir)
    times = {}
    t = time.monotonic()
    up = subprocess.run([LAB, "up", lab_dir], stdout=subprocess.PIPE, text=True)
    times["up"] = time.monotonic() - t
    if up.returncode != 0:
        print(f"selftest: {LAB} up {lab_dir} failed ({up.returncode})", file=sys.stderr)
        return 1
    cloud_json = up.stdout.strip().splitlines()[-1]
    pids = lab_pids(lab_dir)
    ok = False
    try:
        c = oscloud.Cloud(cloud_json)
        t = time.monotonic()
        state = populate(c)
        times["populate"] = time.monotonic() - t
        t = time.monotonic()
        read_back(c, *state, fixtures=args.write_fixtures)
        times["read back"] = time.monotonic() - t
        ok = True
    finally:
        t = time.monotonic()
        down = subprocess.run([LAB, "down", lab_dir])
        times["down"] = time.monotonic() - t
    check(down.returncode == 0, f"{LAB} down failed ({down.returncode})")
    check(set(pids) == {"mariadb", "keystone", "neutron"}, f"up recorded pids for {sorted(pids)}")
    alive = [n for n, p in pids.items() if os.path.exists(f"/proc/{p}")]
    check(not alive, f"still running after down: {alive}")
    left = processes_mentioning(lab_dir + "/")
    check(not left, f"processes still mentioning {lab_dir}: {left}")
    print("selftest: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
    print("selftest: ok" if ok else "selftest: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
