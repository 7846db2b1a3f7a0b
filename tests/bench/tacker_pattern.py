#!/usr/bin/env python3
"""A stand-in for Tacker's SSH pattern, for scripts/bench-wan.sh: what Tacker's sample Kubernetes
MgmtDriver (instantiate_end) and its v1 HelmClient (CNF instantiate) do over SSH, step by step,
one node after another and one SSH command per step, so that its cost in round trips can be
measured beside mgmt-driver's on the same lab and the same links.

Our own code (paramiko, as Tacker uses). It follows the published behaviour of Tacker's sample
(docs/benchmarks.md, "WAN-like links", says which steps and where it is kinder than Tacker): it
is not Tacker, and it checks host keys strictly where Tacker accepts any key.

    tacker_pattern.py cluster --key K --known-hosts KH --masters IP=NIC,... --workers IP=NIC,...
                              --cluster-ip VIP --script install_k8s_cluster.sh
    tacker_pattern.py cnf     --key K --known-hosts KH --masters IP,... --vnf-instance-id ID
                              --releases releases.json --namespace NS
    tacker_pattern.py cnf-clean (same arguments as cnf): uninstall what `cnf` installed; untimed

Prints one JSON line on stdout: {"connections": C, "execs": E, "uploads": U, "failed_aux": F,
"round_trips": execs + uploads, "max_per_host": the most of them on one node}.
An install step that fails ends the run with exit status 1; an auxiliary step that fails
(a label, a token lookup) is counted in failed_aux, as Tacker's "any stderr" rule would not
stop the lab's stand-ins either.
"""
import argparse
import json
import os
import shlex
import sys
import tempfile

import paramiko

COUNT = {"connections": 0, "execs": 0, "uploads": 0, "failed_aux": 0}
# Round trips per node address: each exec_command and each SFTP put is one (handshakes apart),
# as mgmt-driver's own round_trips events count them.
PER_HOST = {}
KUBECONFIG = "export KUBECONFIG=/etc/kubernetes/admin.conf; "


class Node:
    """One SSH connection, opened when made (as Tacker's RemoteCommandExecutor does)."""

    def __init__(self, args, ip):
        self.ip = ip
        self.client = paramiko.SSHClient()
        self.client.load_host_keys(args.known_hosts)
        self.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        self.client.connect(ip, username=args.user, key_filename=args.key, look_for_keys=False,
                            allow_agent=False, timeout=30)
        COUNT["connections"] += 1

    def run(self, cmd, aux=False, timeout=300):
        """One exec_command: the command, its whole stdout, its exit status."""
        COUNT["execs"] += 1
        PER_HOST[self.ip] = PER_HOST.get(self.ip, 0) + 1
        _, out, err = self.client.exec_command(cmd, timeout=timeout)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        rc = out.channel.recv_exit_status()
        if rc != 0:
            if aux:
                COUNT["failed_aux"] += 1
            else:
                sys.stderr.write(f"{self.ip}: '{cmd}' exited {rc}: {stderr[-2000:]}\n")
                sys.exit(1)
        return stdout

    def close(self):
        self.client.close()


def sftp_put(args, ip, files):
    """Tacker opens a connection of its own for the file transfer (a paramiko Transport)."""
    n = Node(args, ip)
    sftp = n.client.open_sftp()
    for local, remote in files:
        sftp.put(local, remote)
        COUNT["uploads"] += 1
        PER_HOST[ip] = PER_HOST.get(ip, 0) + 1
    sftp.close()
    n.close()


def pairs(text):
    out = []
    for item in filter(None, text.split(",")):
        ssh_ip, _, nic = item.partition("=")
        out.append((ssh_ip, nic or ssh_ip))
    return out


def cluster(args):
    masters, workers = pairs(args.masters), pairs(args.workers)
    hosts = "\\n".join([f"{nic} master{nic.split('.')[-1]}" for _, nic in masters]
                       + [f"{nic} worker{nic.split('.')[-1]}" for _, nic in workers])
    token_yaml = os.path.join(tempfile.mkdtemp(), "create_admin_token.yaml")
    with open(token_yaml, "w") as f:
        f.write("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: admin\n  namespace: kube-system\n")
    nics = ",".join(nic for _, nic in masters)
    first = masters[0][0]
    token = hash_ = ""

    def etc_hosts(node):
        # Four commands, as the sample edits /etc/hosts.
        node.run("> /tmp/tmp_hosts")
        node.run("cp /etc/hosts /tmp/tmp_hosts")
        node.run(f"sed -i '$a{hosts}' /tmp/tmp_hosts")
        node.run("sudo mv /tmp/tmp_hosts /etc/hosts;")

    for i, (ip, nic) in enumerate(masters):
        # Is it installed already? (kubectl get node | grep) on the first master.
        probe = Node(args, first)
        probe.run(KUBECONFIG + f"kubectl get node | grep master{nic.split('.')[-1]}", aux=True)
        probe.close()
        cert_key = ""
        if i > 0:
            m0 = Node(args, first)
            cert_key = m0.run(KUBECONFIG + "sudo kubeadm init phase upload-certs --upload-certs").strip().splitlines()[-1]
            m0.close()
        sftp_put(args, ip, [(args.script, "/tmp/install_k8s_cluster.sh"),
                            (token_yaml, "/tmp/create_admin_token.yaml")])
        node = Node(args, ip)
        etc_hosts(node)
        cmd = f"bash /tmp/install_k8s_cluster.sh -m {nics} -i {args.cluster_ip} -p 192.168.0.0/16 -a 10.96.0.0/12"
        if i > 0:
            cmd += f" -t {token} -s {hash_} -k {cert_key}"
        out = node.run(cmd)
        node.close()
        if i == 0:
            for line in out.splitlines():
                if line.startswith("token:"):
                    token = line[6:]
                elif line.startswith("ssl_ca_cert_hash:"):
                    hash_ = line[17:]
            if not token or not hash_:
                sys.stderr.write(f"{ip}: the install script printed no token:/ssl_ca_cert_hash: line\n")
                sys.exit(1)
            # The bearer token, over a new session. (Tacker then sleeps 30 s after creating the
            # ServiceAccount; the stand-in does not.)
            s = Node(args, ip)
            if not s.run(KUBECONFIG + "kubectl get secret -n kube-system | grep '^admin-token'", aux=True).strip():
                s.run(KUBECONFIG + "kubectl create -f /tmp/create_admin_token.yaml", aux=True)
            s.run(KUBECONFIG + "kubectl get secret -n kube-system | grep '^admin-token' | awk '{print $1}' | "
                  "xargs -i kubectl describe secret {} -n kube-system| grep 'token:' | awk '{print $2}'", aux=True)
            s.close()
    for ip, nic in workers:
        sftp_put(args, ip, [(args.script, "/tmp/install_k8s_cluster.sh")])
        node = Node(args, ip)
        etc_hosts(node)
        node.run(f"export ha_flag={'True' if len(masters) > 1 else 'False'};bash /tmp/install_k8s_cluster.sh "
                 f"-w {nic} -i {args.cluster_ip} -t {token} -s {hash_}")
        node.close()
        # The worker's label, on the first master, over a session of its own.
        m0 = Node(args, first)
        m0.run(KUBECONFIG + f"kubectl label nodes worker{nic.split('.')[-1]} CIS-node=lab --overwrite", aux=True)
        m0.close()


def cnf(args, clean=False):
    masters = [ip for ip, _ in pairs(args.masters)]
    with open(args.releases) as f:
        releases = json.load(f)
    d = f"/var/tacker/helm/{args.vnf_instance_id}"
    ns = f" --namespace {shlex.quote(args.namespace)}" if args.namespace else ""
    sessions = [Node(args, ip) for ip in masters]
    if clean:
        for r in releases:
            sessions[0].run(KUBECONFIG + f"helm uninstall {r['name']}{ns}", aux=True)
        for s in sessions:
            for r in releases:
                if r.get("repo"):
                    s.run(KUBECONFIG + f"helm repo remove {r['repo']}", aux=True)
            s.run(f"sudo rm -rf {d}", aux=True)
        return
    # Repositories and charts to every master, one after another, release by release.
    for ip, s in zip(masters, sessions):
        for r in releases:
            if r.get("repo"):
                s.run(KUBECONFIG + f"helm repo add {r['repo']} {r['url']}")
            else:
                s.run(f"if [ ! -d {d} ]; then `sudo mkdir -p {d}; sudo chown -R {args.user} {d};`; fi")
                name = os.path.basename(r["chart_file"])
                sftp_put(args, ip, [(r["chart_file"], f"{d}/{name}")])
                s.run(f"tar -zxf {d}/{name} -C {d}")
    # Install and read the manifest on the first master only, release after release; the
    # manifest is read again after instantiation (post_instantiation).
    m0 = sessions[0]
    for r in releases:
        chart = f"{r['repo']}/{r['chart']}" if r.get("repo") else f"{d}/{r['chart']}"
        sets = "".join(f" --set {p}" for p in r.get("set", []))
        m0.run(KUBECONFIG + f"helm install {r['name']} {chart}{ns}{sets}")
        m0.run(KUBECONFIG + f"helm get manifest {r['name']}{ns}")
    for r in releases:
        m0.run(KUBECONFIG + f"helm get manifest {r['name']}{ns}")
    for s in sessions:
        s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["cluster", "cnf", "cnf-clean"])
    p.add_argument("--key", required=True)
    p.add_argument("--known-hosts", required=True)
    p.add_argument("--user", default="root")
    p.add_argument("--masters", required=True, help="SSH_IP=NIC_IP,... (cnf: SSH_IP,...)")
    p.add_argument("--workers", default="")
    p.add_argument("--cluster-ip", default="")
    p.add_argument("--script", default="")
    p.add_argument("--vnf-instance-id", default="")
    p.add_argument("--releases", default="", help="JSON list of {name, chart_file | repo+url+chart, set}")
    p.add_argument("--namespace", default="")
    args = p.parse_args()
    if args.what == "cluster":
        cluster(args)
    else:
        cnf(args, clean=args.what == "cnf-clean")
    COUNT["round_trips"] = sum(PER_HOST.values())
    COUNT["max_per_host"] = max(PER_HOST.values(), default=0)
    print(json.dumps(COUNT))


if __name__ == "__main__":
    main()
