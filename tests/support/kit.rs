//! A lab-kit cluster for the cluster and CNF tests: a lab with `--kit`, a VNF package built from
//! our scripts with an offline directory, an inventory, a state dir.

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::Failed;
use serde_json::{json, Value};

use super::{mgmt, repo, Lab};

pub type R = Result<(), Failed>;

pub fn check(cond: bool, msg: impl FnOnce() -> String) -> R {
    if cond {
        Ok(())
    } else {
        Err(msg().into())
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A VNF package as an operator would have it: our scripts under `Scripts/`, and (for the lab,
/// which has no internet) an offline artifacts directory of lab-kit stand-ins with a real
/// `SHA256SUMS` (tests/labkit/make-offline-dir.sh).
pub fn package(dir: &Path) -> PathBuf {
    let pkg = dir.join("pkg");
    let scripts = pkg.join("Scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    for f in ["install_k8s_cluster.sh", "install_helm.sh"] {
        std::fs::copy(repo().join("scripts").join(f), scripts.join(f)).unwrap();
    }
    let o = Command::new("bash")
        .arg(repo().join("tests/labkit/make-offline-dir.sh"))
        .arg(pkg.join("Files/offline"))
        .output()
        .unwrap();
    assert!(o.status.success(), "make-offline-dir: {}", String::from_utf8_lossy(&o.stderr));
    pkg
}

/// A Tacker-shaped instantiate request (v1 keys), adapted to the lab: offline artifacts, and
/// the OS check relaxed (lab nodes run the host's Debian).
pub fn request(masters_group: &str, workers_group: &str, user: &str, password: &str, vip_cp: &str) -> Value {
    json!({
        "flavourId": "simple",
        "vimConnectionInfo": [{"id": "3cc2c4ff-525c-48b4-94c9-29247223322f", "vimId": "05ef7ca5-7e32-4a6b-a03d-52f811f04496", "vimType": "openstack"}],
        "additionalParams": {"k8s_cluster_installation_param": {
            "script_path": "Scripts/install_k8s_cluster.sh",
            "vim_name": "kubernetes_vim",
            "master_node": {"aspect_id": masters_group, "ssh_cp_name": "masterNode_CP1", "nic_cp_name": "masterNode_CP1",
                            "username": user, "password": password, "pod_cidr": "192.168.0.0/16", "cluster_cidr": "10.199.187.0/24",
                            "cluster_cp_name": vip_cp},
            "worker_node": {"aspect_id": workers_group, "ssh_cp_name": "workerNode_CP2", "nic_cp_name": "workerNode_CP2",
                            "username": user, "password": password},
            "offline_artifacts_path": "Files/offline",
            "script_environment": {"K8S_ALLOW_ANY_OS": "1"}
        }}
    })
}

/// One lab cluster: the lab, a package, an inventory, a state dir.
pub struct Cluster {
    pub lab: Lab,
    pub dir: tempfile::TempDir,
    pub pkg: PathBuf,
    pub inv: PathBuf,
    pub state: PathBuf,
    pub id: String,
    pub ha: bool,
}

impl Cluster {
    /// `masters`/`workers`: lab node numbers. `creds`: inventory credentials (None = the
    /// request's username/password, Tacker's way).
    pub fn new(name: &str, net: u8, nodes: usize, masters: &[usize], workers: &[usize], root_key: bool) -> Cluster {
        Cluster::with_lab_args(name, net, nodes, masters, workers, root_key, &[])
    }

    /// As [`Cluster::new`], with more `lab.sh up` arguments (`--control-plane BINDIR`).
    pub fn with_lab_args(
        name: &str,
        net: u8,
        nodes: usize,
        masters: &[usize],
        workers: &[usize],
        root_key: bool,
        extra: &[&str],
    ) -> Cluster {
        let mut args = vec!["--kit"];
        args.extend_from_slice(extra);
        let lab = Lab::up(name, net, nodes, &args);
        let dir = tempfile::tempdir().unwrap();
        let pkg = package(dir.path());
        let c = Cluster {
            inv: dir.path().join("inv.yaml"),
            state: dir.path().join("state"),
            pkg,
            lab,
            dir,
            id: format!("inst-{name}"),
            ha: masters.len() > 1,
        };
        c.write_inventory(masters, workers, root_key);
        c
    }

    pub fn vip(&self) -> String {
        format!("198.18.{}.100", self.lab.net)
    }

    pub fn write_inventory(&self, masters: &[usize], workers: &[usize], root_key: bool) {
        let mut y =
            format!("defaults:\n  known_hosts: {}\n  host_key_check: strict\n", self.lab.file("known_hosts").display());
        if root_key {
            y.push_str(&format!("  user: root\n  identity_file: {}\n", self.lab.file("id_ed25519").display()));
        }
        y.push_str("groups:\n  master_instance:\n");
        for &i in masters {
            y.push_str(&format!("    - {{name: {}, ssh_ip: {}}}\n", self.lab.node(i), self.lab.ip(i)));
        }
        y.push_str("  worker_instance:\n");
        for &i in workers {
            y.push_str(&format!("    - {{name: {}, ssh_ip: {}}}\n", self.lab.node(i), self.lab.ip(i)));
        }
        y.push_str(&format!("cps:\n  vip_CP: {}\n", self.vip()));
        std::fs::write(&self.inv, y).unwrap();
    }

    pub fn write(&self, name: &str, v: &Value) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
        p
    }

    /// The default request: root keys from the inventory, single master or VIP.
    pub fn request(&self) -> Value {
        let cp = if self.ha { "vip_CP" } else { "masterNode_CP1" };
        request("master_instance", "worker_instance", "ubuntu", "unused-password", cp)
    }

    pub fn hook(&self, op: &str, req: Option<&Path>, extra: &[&str]) -> super::Run {
        let mut args = vec![
            op,
            "-o",
            "json",
            "-i",
            s(&self.inv),
            "--package-dir",
            s(&self.pkg),
            "--vnf-instance-id",
            &self.id,
            "--state-dir",
            s(&self.state),
            "--retry-for",
            "20",
        ];
        if let Some(r) = req {
            args.extend(["--request", s(r)]);
        }
        args.extend(extra);
        mgmt(&args, &[])
    }

    pub fn instantiate(&self, req: &Value) -> super::Run {
        let p = self.write("instantiate.json", req);
        self.hook("instantiate-end", Some(&p), &[])
    }

    /// The kit's shared cluster state (`{}` before any stand-in wrote it).
    pub fn kit(&self) -> Value {
        match std::fs::read_to_string(self.lab.file("kit/state.json")) {
            Ok(t) => serde_json::from_str(&t).unwrap(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
            Err(e) => panic!("kit state: {e}"),
        }
    }

    pub fn kit_ctl(&self, args: &[&str]) {
        let mut a: Vec<String> = vec![args[0].into(), s(&self.lab.file("kit")).into()];
        a.extend(args[1..].iter().map(|x| x.to_string()));
        let o = Command::new("python3").arg(repo().join("tests/labkit/labkit-ctl")).args(&a).output().unwrap();
        assert!(o.status.success(), "labkit-ctl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// Kubernetes node names the (stand-in) API server knows.
    pub fn k8s_nodes(&self) -> Vec<String> {
        let o = self.on(1, "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get nodes -o name");
        o.lines().map(|l| l.trim_start_matches("node/").to_string()).collect()
    }

    /// Run a shell command inside lab node `i` (out of band, not through mgmt-driver).
    pub fn on(&self, i: usize, cmd: &str) -> String {
        let o = self.lab.node_exec(&i.to_string(), &["sh", "-c", cmd]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Simulate the VNFM replacing VM `i` with a fresh one (heal): the kubeadm state is wiped.
    pub fn fresh_vm(&self, i: usize) {
        self.on(i, "kubeadm reset -f >/dev/null 2>&1; rm -rf /etc/kubernetes /var/lib/mgmt-driver /tmp/installed /root/.kube /usr/local/bin/helm /var/tacker /root/.config/helm");
    }

    pub fn state_doc(&self) -> Option<Value> {
        std::fs::read_to_string(self.state.join(format!("{}.json", self.id)))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap())
    }
}

pub fn doc(r: &super::Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}\n--- stderr\n{}", r.stdout, r.stderr))
}

pub fn k8s_conn(d: &Value) -> Value {
    d["result"]["vimConnectionInfo"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["vimType"] == "kubernetes")
        .cloned()
        .unwrap_or(Value::Null)
}

pub fn outcome(d: &Value, node: &str) -> String {
    d["result"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["node"] == node)
        .map(|n| n["outcome"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(",")
}
