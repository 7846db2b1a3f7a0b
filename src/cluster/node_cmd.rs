//! The exact shell text each cluster step sends to a node (pure; the node contract is in
//! docs/cluster-contract.md). Every value is quoted; secrets never appear here — they travel in
//! a 0600 env file the command sources and deletes, or on stdin.

use crate::cluster::topology::{ClusterNode, Topology};
use crate::error::Result;
use crate::quote::{join, quote};

/// Private per-instance run directory, relative to the login user's home.
pub fn run_dir(instance: &str) -> String {
    format!(".mgmt-driver/run/{instance}")
}

pub const INSTALL_SCRIPT: &str = "install_k8s_cluster.sh";
pub const HELM_SCRIPT: &str = "install_helm.sh";
pub const OFFLINE_DIR: &str = "offline";
pub const ADMIN_TOKEN_FILE: &str = "admin-token.json";
const KUBECONFIG: &str = "export KUBECONFIG=/etc/kubernetes/admin.conf; ";

/// `KEY='value'` lines for an env file (sourced with `set -a`).
pub fn env_file(vars: &[(String, String)]) -> Result<String> {
    let mut s = String::new();
    for (k, v) in vars {
        s.push_str(&format!("{k}={}\n", quote(v)?));
    }
    Ok(s)
}

/// Enter the run dir, load and delete the env file `env_name`, then run `body`.
fn with_env(run_dir: &str, env_name: &str, body: &str) -> Result<String> {
    Ok(format!("cd {} && set -a && . ./{env_name} && set +a && rm -f ./{env_name} && {body}", quote(run_dir)?))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallMode {
    MainMaster,
    /// A master joining the main one: `-t -s -k` (token and key from the env file).
    JoinMaster,
    Worker,
}

/// The networks a master is installed with: `-p` (pod CIDR) and `-a` (service CIDR).
#[derive(Clone, Copy, Debug)]
pub struct Networks<'a> {
    pub pod: &'a str,
    pub service: &'a str,
}

/// The install script's command line, Tacker's contract. The join token and certificate key
/// come from `$K8S_JOIN_TOKEN` / `$K8S_CERT_KEY`, set by the env file, so the SSH request and
/// every log line carry only the variable names.
pub fn install(
    run_dir: &str,
    env_name: &str,
    mode: InstallMode,
    t: &Topology,
    node: &ClusterNode,
    net: Networks,
    ca_hash: &str,
) -> Result<String> {
    let (pod, svc) = (net.pod, net.service);
    let mut args = vec!["bash".to_string(), format!("./{INSTALL_SCRIPT}")];
    match mode {
        InstallMode::MainMaster | InstallMode::JoinMaster => {
            args.extend([
                "-m".into(),
                t.master_ips(),
                "-i".into(),
                t.cluster_ip.clone(),
                "-p".into(),
                pod.into(),
                "-a".into(),
                svc.into(),
            ]);
        }
        InstallMode::Worker => args.extend(["-w".into(), node.nic_ip.clone(), "-i".into(), t.cluster_ip.clone()]),
    }
    let mut line = join(&args)?;
    if mode != InstallMode::MainMaster {
        line.push_str(&format!(" -t \"$K8S_JOIN_TOKEN\" -s {}", quote(ca_hash)?));
    }
    if mode == InstallMode::JoinMaster {
        line.push_str(" -k \"$K8S_CERT_KEY\"");
    }
    with_env(run_dir, env_name, &line)
}

pub fn helm_install(run_dir: &str, env_name: &str) -> Result<String> {
    with_env(run_dir, env_name, &format!("bash ./{HELM_SCRIPT}"))
}

/// `/etc/hosts`: drop every line whose address is one of ours (exact field match, unlike
/// Tacker's `sed '/10.0.0.1/d'` that also hits 10.0.0.10) or that we wrote for one of our names,
/// then append ours. Idempotent; the file is rewritten in place (keeps its inode and mode).
pub fn hosts_update(add: &[(String, String)], drop_ips: &[String]) -> Result<String> {
    let mut ips: Vec<&str> = add.iter().map(|(ip, _)| ip.as_str()).collect();
    ips.extend(drop_ips.iter().map(String::as_str));
    let names: Vec<&str> = add.iter().map(|(_, n)| n.as_str()).collect();
    let mut lines = String::new();
    for (ip, name) in add {
        lines.push_str(&format!("{ip} {name} # mgmt-driver\n"));
    }
    let awk = r#"BEGIN { n = split(ips, a, " "); for (i = 1; i <= n; i++) ip[a[i]] = 1; n = split(names, b, " "); for (i = 1; i <= n; i++) nm[b[i]] = 1 }
$1 in ip { next }
/# mgmt-driver$/ && ($2 in nm) { next }
{ print }"#;
    Ok(format!(
        "f=/etc/hosts; t=$(mktemp /etc/.hosts.mgmt-driver.XXXXXX) && awk -v ips={} -v names={} {} \"$f\" > \"$t\" && printf '%s' {} >> \"$t\" && cat \"$t\" > \"$f\" && rm -f \"$t\"",
        quote(&ips.join(" "))?,
        quote(&names.join(" "))?,
        quote(awk)?,
        quote(&lines)?
    ))
}

/// haproxy on a surviving master: remove the backend line of `name`, optionally add it back with
/// `ip` after the last `server` line (Tacker's `sed '/server * check/a'` never matched the real
/// two-space lines, and it never reloaded), then reload. A node without haproxy (single master)
/// has nothing to do.
pub fn haproxy_backend(name: &str, add_ip: Option<&str>) -> Result<String> {
    let awk = r#"$1 == "server" && $2 == name { next }
{ l[++n] = $0; if ($1 == "server") last = n }
END { for (i = 1; i <= n; i++) { print l[i]; if (i == last && ip != "") printf "    server  %s  %s:6443 check\n", name, ip } }"#;
    Ok(format!(
        "f=/etc/haproxy/haproxy.cfg; [ -f \"$f\" ] || {{ echo 'no haproxy on this node'; exit 0; }}; t=$(mktemp /etc/haproxy/.cfg.XXXXXX) && awk -v name={} -v ip={} {} \"$f\" > \"$t\" && cat \"$t\" > \"$f\" && rm -f \"$t\" && systemctl reload haproxy",
        quote(name)?,
        quote(add_ip.unwrap_or(""))?,
        quote(awk)?
    ))
}

pub fn hostname() -> String {
    "hostname".into()
}

pub fn token_create() -> String {
    "kubeadm token create --ttl 2h".into()
}

pub fn ca_hash() -> String {
    "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1".into()
}

pub fn ca_pem() -> String {
    "cat /etc/kubernetes/pki/ca.crt".into()
}

pub fn certificate_key() -> String {
    "kubeadm init phase upload-certs --upload-certs".into()
}

pub fn server_url() -> String {
    format!("{KUBECONFIG}kubectl config view --raw -o jsonpath='{{.clusters[0].cluster.server}}'")
}

/// The VIM's bearer token, the Kubernetes ≥ 1.24 way: a ServiceAccount bound to cluster-admin
/// and a `kubernetes.io/service-account-token` Secret the token controller fills. Re-applying
/// is a no-op, so re-runs get the same token. Prints the decoded token (a secret: the caller
/// hides the output).
pub fn admin_token(run_dir: &str) -> Result<String> {
    Ok(format!(
        "{KUBECONFIG}kubectl apply -f {} >&2 && i=0; while [ $i -lt 60 ]; do t=$(kubectl -n kube-system get secret mgmt-driver-admin-token -o jsonpath='{{.data.token}}') && [ -n \"$t\" ] && {{ printf '%s' \"$t\" | base64 -d; exit 0; }}; i=$((i + 1)); sleep 1; done; echo 'the token controller did not fill secret kube-system/mgmt-driver-admin-token within 60s' >&2; exit 1",
        quote(&format!("{run_dir}/{ADMIN_TOKEN_FILE}"))?
    ))
}

/// The manifest [`admin_token`] applies.
pub fn admin_token_manifest() -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mgmt-driver-admin", "namespace": "kube-system"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "mgmt-driver-admin"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"kind": "ServiceAccount", "name": "mgmt-driver-admin", "namespace": "kube-system"}]},
            {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "mgmt-driver-admin-token", "namespace": "kube-system",
                          "annotations": {"kubernetes.io/service-account.name": "mgmt-driver-admin"}}}
        ]
    })
    .to_string()
}

/// Drain with a real, bounded wait: `kubectl drain --timeout` fails when pods do not leave.
pub fn drain(k8s_name: &str, timeout_s: u32) -> Result<String> {
    Ok(format!(
        "{KUBECONFIG}kubectl drain {} --ignore-daemonsets --delete-emptydir-data --timeout={timeout_s}s",
        quote(k8s_name)?
    ))
}

pub fn pods_on(k8s_name: &str) -> Result<String> {
    Ok(format!(
        "{KUBECONFIG}kubectl get pods -A --field-selector {} -o json",
        quote(&format!("spec.nodeName={k8s_name}"))?
    ))
}

/// Delete the Node object; one that is already gone is fine (re-runs).
pub fn delete_node(k8s_name: &str) -> Result<String> {
    let n = quote(k8s_name)?;
    Ok(format!(
        "{KUBECONFIG}out=$(kubectl delete node {n} 2>&1) && echo \"$out\" || case $out in *NotFound*) echo \"node {k8s_name} already deleted\" ;; *) echo \"$out\" >&2; exit 1 ;; esac"
    ))
}

const ETCDCTL: &str = "etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key";

pub fn etcd_members(survivor_k8s_name: &str) -> Result<String> {
    Ok(format!(
        "{KUBECONFIG}kubectl -n kube-system exec {} -- {ETCDCTL} member list",
        quote(&format!("etcd-{survivor_k8s_name}"))?
    ))
}

pub fn etcd_remove(survivor_k8s_name: &str, member_id: &str) -> Result<String> {
    Ok(format!(
        "{KUBECONFIG}kubectl -n kube-system exec {} -- {ETCDCTL} member remove {}",
        quote(&format!("etcd-{survivor_k8s_name}"))?,
        quote(member_id)?
    ))
}

/// The member id of `name` in `etcdctl member list` output (`id, started, name, peer, client, learner`).
pub fn parse_member_id(list: &str, name: &str) -> Option<String> {
    list.lines().find_map(|l| {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        (f.len() >= 3 && f[2] == name && f[0].chars().all(|c| c.is_ascii_hexdigit())).then(|| f[0].to_string())
    })
}

/// Names of pods on a node that a drain must evict (not DaemonSet pods, not static mirror pods).
pub fn evictable_pods(pods_json: &str) -> std::result::Result<Vec<String>, String> {
    let v: serde_json::Value =
        serde_json::from_str(pods_json).map_err(|e| format!("kubectl output is not JSON: {e}"))?;
    let items = v.get("items").and_then(|i| i.as_array()).ok_or("kubectl output has no items")?;
    Ok(items
        .iter()
        .filter(|p| {
            let owners = p.pointer("/metadata/ownerReferences").and_then(|o| o.as_array());
            !owners.is_some_and(|o| {
                o.iter().any(|r| matches!(r.get("kind").and_then(|k| k.as_str()), Some("DaemonSet" | "Node")))
            })
        })
        .map(|p| {
            let ns = p.pointer("/metadata/namespace").and_then(|x| x.as_str()).unwrap_or("default");
            let n = p.pointer("/metadata/name").and_then(|x| x.as_str()).unwrap_or("?");
            format!("{ns}/{n}")
        })
        .collect())
}

pub fn kubeadm_reset() -> String {
    "kubeadm reset -f".into()
}

/// Pack the chart root on a surviving master so a healed one gets the same charts.
pub fn pack_charts(run_dir: &str) -> Result<String> {
    Ok(format!(
        "if [ -d /var/tacker/helm ]; then tar -czf {} -C / var/tacker/helm && echo packed; else echo none; fi",
        quote(&format!("{run_dir}/helm-charts.tgz"))?
    ))
}

pub fn unpack_charts(run_dir: &str) -> Result<String> {
    let f = quote(&format!("{run_dir}/helm-charts.tgz"))?;
    Ok(format!("tar -xzf {f} -C / && rm -f {f}"))
}

pub fn helm_repo_list() -> String {
    "out=$(helm repo list -o json 2>&1) && printf '%s\\n' \"$out\" || case $out in *'no repositories'*) echo '[]' ;; *) echo \"$out\" >&2; exit 1 ;; esac".into()
}

pub fn helm_repo_add(name: &str, url: &str) -> Result<String> {
    Ok(format!("helm repo add --force-update {} {}", quote(name)?, quote(url)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::topology::k8s_name;
    use crate::inventory::Host;
    use crate::lifecycle::Role;
    use std::process::Command;

    fn node(role: Role, ip: &str) -> ClusterNode {
        let host = Host::for_test(ip, ip);
        ClusterNode { k8s_name: k8s_name(role, ip), nic_ip: ip.into(), role, host }
    }

    fn topo() -> Topology {
        Topology {
            masters: vec![node(Role::Master, "10.0.0.1"), node(Role::Master, "10.0.0.2")],
            workers: vec![node(Role::Worker, "10.0.0.10")],
            cluster_ip: "10.0.0.100".into(),
            cluster_fip: None,
        }
    }

    #[test]
    fn install_lines_follow_tackers_contract_without_secrets() {
        let t = topo();
        let m = install(
            "r",
            "env.x",
            InstallMode::MainMaster,
            &t,
            &t.masters[0],
            Networks { pod: "192.168.0.0/16", service: "10.96.0.0/12" },
            "h",
        )
        .unwrap();
        assert!(
            m.ends_with(
                "bash ./install_k8s_cluster.sh -m 10.0.0.1,10.0.0.2 -i 10.0.0.100 -p 192.168.0.0/16 -a 10.96.0.0/12"
            ),
            "{m}"
        );
        assert!(m.starts_with("cd r && set -a && . ./env.x && set +a && rm -f ./env.x && "), "{m}");
        let j =
            install("r", "e", InstallMode::JoinMaster, &t, &t.masters[1], Networks { pod: "p", service: "a" }, "abc")
                .unwrap();
        assert!(j.ends_with("-t \"$K8S_JOIN_TOKEN\" -s abc -k \"$K8S_CERT_KEY\""), "{j}");
        let w = install("r", "e", InstallMode::Worker, &t, &t.workers[0], Networks { pod: "p", service: "a" }, "abc")
            .unwrap();
        assert!(
            w.ends_with("bash ./install_k8s_cluster.sh -w 10.0.0.10 -i 10.0.0.100 -t \"$K8S_JOIN_TOKEN\" -s abc"),
            "{w}"
        );
    }

    fn sh(script: &str) -> std::process::Output {
        Command::new("sh").arg("-c").arg(script).output().unwrap()
    }

    #[test]
    fn hosts_edit_is_exact_and_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("hosts");
        std::fs::write(&f, "127.0.0.1 localhost\n10.0.0.10 keepme\n10.0.0.1 old-name\n").unwrap();
        let add =
            vec![("10.0.0.1".to_string(), "master1".to_string()), ("10.0.0.2".to_string(), "master2".to_string())];
        let cmd = hosts_update(&add, &[])
            .unwrap()
            .replace("/etc/hosts", &f.display().to_string())
            .replace("/etc/.hosts", &d.path().join(".hosts").display().to_string());
        for _ in 0..2 {
            let o = sh(&cmd);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(
            text,
            "127.0.0.1 localhost\n10.0.0.10 keepme\n10.0.0.1 master1 # mgmt-driver\n10.0.0.2 master2 # mgmt-driver\n"
        );
        // Scale-in: drop 10.0.0.2 only.
        let cmd = hosts_update(&add[..1], &["10.0.0.2".into()])
            .unwrap()
            .replace("/etc/hosts", &f.display().to_string())
            .replace("/etc/.hosts", &d.path().join(".hosts").display().to_string());
        assert!(sh(&cmd).status.success());
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "127.0.0.1 localhost\n10.0.0.10 keepme\n10.0.0.1 master1 # mgmt-driver\n"
        );
    }

    #[test]
    fn haproxy_backend_is_replaced_after_the_last_server_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("haproxy.cfg");
        let cfg = "frontend k8s\n    bind *:16443\n    default_backend masters\nbackend masters\n    balance roundrobin\n    server  master1  10.0.0.1:6443 check\n    server  master2  10.0.0.2:6443 check\n    server  master3  10.0.0.3:6443 check\n";
        std::fs::write(&f, cfg).unwrap();
        let fix = |s: String| {
            s.replace("/etc/haproxy/haproxy.cfg", &f.display().to_string())
                .replace("/etc/haproxy/.cfg", &d.path().join(".cfg").display().to_string())
                .replace("systemctl reload haproxy", "true")
        };
        assert!(sh(&fix(haproxy_backend("master2", None).unwrap())).status.success());
        assert!(!std::fs::read_to_string(&f).unwrap().contains("master2"));
        assert!(sh(&fix(haproxy_backend("master2", Some("10.0.0.22")).unwrap())).status.success());
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            text.ends_with("    server  master3  10.0.0.3:6443 check\n    server  master2  10.0.0.22:6443 check\n"),
            "{text}"
        );
        assert_eq!(text.matches("master2").count(), 1);
    }

    #[test]
    fn etcd_and_pod_parsing() {
        let list = "8e9e05c52164694d, started, master11, https://10.0.0.11:2380, https://10.0.0.11:2379, false\n\
                    91bc3c398fb3c146, started, master111, https://10.0.0.111:2380, https://10.0.0.111:2379, false\n";
        assert_eq!(parse_member_id(list, "master11").as_deref(), Some("8e9e05c52164694d"));
        assert_eq!(parse_member_id(list, "master1"), None, "exact name, not a prefix (Tacker grepped)");
        let pods = r#"{"items":[{"metadata":{"name":"calico-node-x","namespace":"kube-system","ownerReferences":[{"kind":"DaemonSet"}]}},
                                 {"metadata":{"name":"web-1","namespace":"default","ownerReferences":[{"kind":"ReplicaSet"}]}}]}"#;
        assert_eq!(evictable_pods(pods).unwrap(), vec!["default/web-1"]);
    }

    #[test]
    fn env_file_quotes_values() {
        let e = env_file(&[("http_proxy".into(), "http://u:p'w@h:1".into())]).unwrap();
        assert_eq!(e, "http_proxy='http://u:p'\\''w@h:1'\n");
        let o = sh(&format!("{e}printf '%s' \"$http_proxy\""));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "http://u:p'w@h:1");
    }
}
