//! The exact shell text each cluster step sends to a node (pure; the node contract is in
//! docs/cluster-contract.md). Every value is quoted; secrets never appear here — they travel in
//! a 0600 env file the command sources and deletes, or on stdin. Anything longer than one
//! command is a program in `src/remote/` that gets its values as arguments.

use crate::cluster::hostname::parse_hostname;
use crate::cluster::topology::{ClusterNode, Topology};
use crate::error::{Error, Result};
use crate::kube::kubectl::Kubectl;
use crate::quote::quote;
use crate::remote;
use crate::url_mask::mask_userinfo;

/// Private per-instance run directory, relative to the login user's home.
pub fn run_dir(instance: &str) -> String {
    format!(".mgmt-driver/run/{instance}")
}

pub const INSTALL_SCRIPT: &str = "install_k8s_cluster.sh";
pub const HELM_SCRIPT: &str = "install_helm.sh";
pub const OFFLINE_DIR: &str = "offline";
pub const ADMIN_TOKEN_FILE: &str = "admin-token.json";

/// `KEY='value'` lines for an env file (sourced with `set -a`).
pub fn env_file(vars: &[(String, String)]) -> Result<String> {
    let mut s = String::new();
    for (k, v) in vars {
        s.push_str(&format!("{k}={}\n", quote(v)?));
    }
    Ok(s)
}

/// In the run dir, load and delete the env file `env_name`, then run `command`
/// (`src/remote/run_with_env.sh`).
fn with_env(run_dir: &str, env_name: &str, command: &[String]) -> Result<String> {
    let mut args = vec![run_dir.to_string(), env_name.to_string()];
    args.extend_from_slice(command);
    remote::RUN_WITH_ENV.command(&args)
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

/// What a joining node is told besides the addresses: the CA hash (`-s`, not a secret), and
/// whether the script reads the token and key from its environment (`script_marker.rs`).
#[derive(Clone, Copy, Debug)]
pub struct Join<'a> {
    pub ca_hash: &'a str,
    pub secrets_from_env: bool,
}

/// The install script's command line, Tacker's contract. The join token and certificate key
/// are in the env file as `K8S_JOIN_TOKEN` / `K8S_CERT_KEY`, which run_with_env.sh exports to
/// the script. A script that says it reads them from there gets no `-t`/`-k` at all, so they are
/// never in its argv; any other script gets `-t '$K8S_JOIN_TOKEN'` / `-k '$K8S_CERT_KEY'`, words
/// run_with_env.sh replaces with the values (in that script's argv, as Tacker's contract wants),
/// so the SSH request and every log line carry only the names.
pub fn install(
    run_dir: &str,
    env_name: &str,
    mode: InstallMode,
    t: &Topology,
    node: &ClusterNode,
    net: Networks,
    join: Join,
) -> Result<String> {
    let (ca_hash, in_argv) = (join.ca_hash, !join.secrets_from_env);
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
    if mode != InstallMode::MainMaster {
        if in_argv {
            args.extend(["-t".into(), "$K8S_JOIN_TOKEN".into()]);
        }
        args.extend(["-s".into(), ca_hash.into()]);
    }
    if mode == InstallMode::JoinMaster && in_argv {
        args.extend(["-k".into(), "$K8S_CERT_KEY".into()]);
    }
    with_env(run_dir, env_name, &args)
}

pub fn helm_install(run_dir: &str, env_name: &str) -> Result<String> {
    with_env(run_dir, env_name, &["bash".into(), format!("./{HELM_SCRIPT}")])
}

/// `/etc/hosts`: drop every line whose address is one of ours (exact field match, unlike
/// Tacker's `sed '/10.0.0.1/d'` that also hits 10.0.0.10) or that we wrote for one of our names,
/// then append ours (`src/remote/hosts_update.sh`). Idempotent; the new file replaces the old
/// one by a rename and keeps its mode and owner. Every address and name is checked here (and
/// again on the node): a value that could add a line or a field is refused before anything runs.
pub fn hosts_update(add: &[(String, String)], drop_ips: &[String]) -> Result<String> {
    let mut args = Vec::with_capacity(2 * drop_ips.len() + add.len());
    for ip in drop_ips {
        check_hosts_ip(ip)?;
        args.extend(["-d".to_string(), ip.clone()]);
    }
    for (ip, names) in add {
        check_hosts_ip(ip)?;
        let ok = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if names.is_empty() || !names.split(' ').all(ok) {
            return Err(refused(
                "/etc/hosts entry",
                names,
                "names are letters, digits, '.', '_', '-', one space apart",
            ));
        }
        args.push(format!("{ip} {names}"));
    }
    remote::HOSTS_UPDATE.command(&args)
}

/// The error for a value refused before it reaches a node-side file.
fn refused(what: &str, value: &str, rule: &str) -> Error {
    Error::input(what, format!("{:?}", value.chars().take(80).collect::<String>()), format!("refused: {rule}"))
}

fn check_hosts_ip(ip: &str) -> Result<()> {
    if ip.parse::<std::net::IpAddr>().is_ok() {
        Ok(())
    } else {
        Err(refused("/etc/hosts entry", ip, "not an IP address"))
    }
}

/// haproxy on a surviving master: remove the backend line of `name`, optionally add it back with
/// `ip` after the last `server` line (Tacker's `sed '/server * check/a'` never matched the real
/// two-space lines, and it never reloaded), then reload (`src/remote/haproxy_backend.sh`). A node
/// without haproxy (single master) has nothing to do. `name` must be a DNS name and `ip` an
/// address (checked here and on the node), so neither can add a line to the configuration.
pub fn haproxy_backend(name: &str, add_ip: Option<&str>) -> Result<String> {
    if !parse_hostname(name).is_ok_and(|h| h.eq_ignore_ascii_case(name)) {
        return Err(refused("haproxy backend", name, "not a DNS name"));
    }
    match add_ip {
        Some(ip) if ip.parse::<std::net::IpAddr>().is_err() => Err(refused("haproxy backend", ip, "not an IP address")),
        Some(ip) => remote::HAPROXY_BACKEND.command(&[name, ip]),
        None => remote::HAPROXY_BACKEND.command(&[name]),
    }
}

/// Delete the env files an earlier step of this instance left in its run directory because the
/// command that would have consumed them never started (`src/remote/clean_env.sh`), but not
/// `keep`: the env files a node program uploaded just before it sweeps
/// (`node_program.rs`). Runs as the login user, who owns them, or as root in a node program.
pub fn clean_env(run_dir: &str, keep: &[&str]) -> Result<String> {
    let mut args = vec![run_dir];
    args.extend_from_slice(keep);
    remote::CLEAN_ENV.command(&args)
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
    Kubectl::admin()
        .jsonpath(&["config", "view", "--raw"], "{.clusters[0].cluster.server}")
        .expect("constant words have no NUL")
}

/// The VIM's bearer token, the Kubernetes ≥ 1.24 way: a ServiceAccount bound to cluster-admin
/// and a `kubernetes.io/service-account-token` Secret the token controller fills. Re-applying
/// is a no-op, so re-runs get the same token. Prints the decoded token (a secret: the caller
/// hides the output). `src/remote/admin_token.sh`.
pub fn admin_token(run_dir: &str) -> Result<String> {
    Kubectl::admin().program(&remote::ADMIN_TOKEN, &[format!("{run_dir}/{ADMIN_TOKEN_FILE}")])
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
    let timeout = format!("--timeout={timeout_s}s");
    Kubectl::admin().args(&["drain", k8s_name, "--ignore-daemonsets", "--delete-emptydir-data", &timeout])
}

pub fn pods_on(k8s_name: &str) -> Result<String> {
    let selector = format!("spec.nodeName={k8s_name}");
    Kubectl::admin().args(&["get", "pods", "-A", "--field-selector", &selector, "-o", "json"])
}

/// Delete the Node object; one that is already gone is fine (re-runs). `src/remote/delete_node.sh`.
pub fn delete_node(k8s_name: &str) -> Result<String> {
    Kubectl::admin().program(&remote::DELETE_NODE, &[k8s_name])
}

/// etcdctl against the local member, with kubeadm's client certificate of that member.
const ETCDCTL: [&str; 5] = [
    "etcdctl",
    "--endpoints=https://127.0.0.1:2379",
    "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
    "--cert=/etc/kubernetes/pki/etcd/server.crt",
    "--key=/etc/kubernetes/pki/etcd/server.key",
];

/// `etcdctl ARGS...` against the local etcd member of the surviving master `survivor_k8s_name`,
/// run on that master: by its own `etcdctl` when it has one, else in its etcd pod through the
/// API (kubeadm's static pod, Tacker's way). A pod can only be exec'd into where a kubelet runs
/// it; an etcd that runs beside the kubelet (or a master where the operator installed
/// `etcdctl`) is reached directly, with the same certificate. One round trip either way.
fn etcdctl(survivor_k8s_name: &str, args: &[&str]) -> Result<String> {
    let pod = format!("etcd-{survivor_k8s_name}");
    let mut words = vec!["-n", "kube-system", "exec", pod.as_str(), "--"];
    words.extend(ETCDCTL);
    words.extend(args);
    let in_pod = Kubectl::admin().args(&words)?;
    let direct = ETCDCTL.iter().chain(args).map(|w| quote(w)).collect::<Result<Vec<_>>>()?.join(" ");
    Ok(format!("if command -v etcdctl >/dev/null 2>&1; then {direct}; else {in_pod}; fi"))
}

pub fn etcd_members(survivor_k8s_name: &str) -> Result<String> {
    etcdctl(survivor_k8s_name, &["member", "list"])
}

/// Remove member `member_id`. A real etcd refuses a removal ("unhealthy cluster") until every
/// other member has been connected for a few seconds, as right after a master joined: retried
/// every 2 s for up to 30 s, in the same round trip. A member that is already gone (a re-run,
/// or another run removed it) is done.
pub fn etcd_remove(survivor_k8s_name: &str, member_id: &str) -> Result<String> {
    let once = etcdctl(survivor_k8s_name, &["member", "remove", member_id])?;
    Ok(format!(
        "i=0; while :; do out=$({once} 2>&1) && {{ printf '%s\\n' \"$out\"; exit 0; }}; \
         case $out in *'member not found'*) printf '%s\\n' \"$out\"; exit 0 ;; \
         *'unhealthy cluster'*) [ $i -lt 15 ] || break; i=$((i + 1)); sleep 2 ;; *) break ;; esac; done; \
         printf '%s\\n' \"$out\" >&2; exit 1"
    ))
}

/// The member id of `name` in `etcdctl member list` output (`id, started, name, peer, client, learner`):
/// `None` when no line names it. A line that names it with an id that is not 1 to 16 hex digits
/// (a 64-bit member id) is an error, not a miss: the id is used in the next command.
pub fn parse_member_id(list: &str, name: &str) -> std::result::Result<Option<String>, String> {
    for l in list.lines() {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() >= 3 && f[2] == name {
            let id = f[0];
            if id.is_empty() || id.len() > 16 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
                let shown: String = id.chars().take(40).collect();
                return Err(format!("the member id of {name} is {shown:?}, not 1 to 16 hex digits"));
            }
            return Ok(Some(id.to_ascii_lowercase()));
        }
    }
    Ok(None)
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
            // Shown in an error only, escaped.
            let shown = |v: Option<&str>, default: &str| crate::error::excerpt(v.unwrap_or(default));
            let ns = shown(p.pointer("/metadata/namespace").and_then(|x| x.as_str()), "default");
            let n = shown(p.pointer("/metadata/name").and_then(|x| x.as_str()), "?");
            format!("{ns}/{n}")
        })
        .collect())
}

pub fn kubeadm_reset() -> String {
    "kubeadm reset -f".into()
}

/// After `kubeadm reset` on a kept VM: the proxy settings our install scripts wrote (marked
/// ones only: `src/remote/proxy_cleanup.sh`).
pub fn proxy_cleanup() -> Result<String> {
    remote::PROXY_CLEANUP.command::<&str>(&[])
}

/// The archive [`pack_charts`] writes and [`unpack_charts`] reads, in the run directory.
pub fn charts_archive(run_dir: &str) -> String {
    format!("{run_dir}/helm-charts.tgz")
}

/// Pack the chart root on a surviving master so a healed one gets the same charts: prints
/// `packed` or `none` (`src/remote/pack_charts.sh`).
pub fn pack_charts(run_dir: &str) -> Result<String> {
    remote::PACK_CHARTS.command(&[charts_archive(run_dir)])
}

/// What [`pack_charts`] printed: `Ok(true)` packed, `Ok(false)` no chart root; anything else is
/// refused.
pub fn parse_packed(out: &str) -> std::result::Result<bool, String> {
    match out.trim() {
        "packed" => Ok(true),
        "none" => Ok(false),
        o => Err(format!("{:?} is neither 'packed' nor 'none'", o.chars().take(80).collect::<String>())),
    }
}

/// Delete the survivor's copy of the archive once it was downloaded.
pub fn discard_charts_archive(run_dir: &str) -> Result<String> {
    Ok(format!("rm -f -- {}", quote(&charts_archive(run_dir))?))
}

/// Put what [`pack_charts`] packed in place, only under /var/tacker/helm and only plain files and
/// directories, then delete the archive (`src/remote/unpack_charts.sh`).
pub fn unpack_charts(run_dir: &str) -> Result<String> {
    remote::UNPACK_CHARTS.command(&[charts_archive(run_dir)])
}

/// Helm's repositories as JSON, `[]` when there are none (`src/remote/helm_repo_list.sh`).
pub fn helm_repo_list() -> String {
    remote::HELM_REPO_LIST.command::<&str>(&[]).expect("a program text has no NUL byte")
}

/// The `(name, url)` pairs of [`helm_repo_list`]'s JSON, each checked before it is used in a
/// `helm repo add` on another node: a name is letters, digits, `.`, `_`, `-` (at most 100); a URL
/// is `http://` or `https://` with no whitespace or control character (at most 2048). Anything
/// else (not an array of objects with string `name` and `url`, or one bad entry) is refused as a
/// whole: a repository list copied in part would hide the gap.
pub fn parse_repo_list(out: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let v: serde_json::Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let items = v.as_array().ok_or("not a JSON array")?;
    let show = |s: &str| format!("{:?}", s.chars().take(80).collect::<String>());
    let mut repos = Vec::with_capacity(items.len());
    for (i, r) in items.iter().enumerate() {
        let field = |k: &str| r.get(k).and_then(|x| x.as_str()).ok_or_else(|| format!("entry {i} has no string {k:?}"));
        let (name, url) = (field("name")?, field("url")?);
        // A CNF's repositories are named `<instance>@<name>` (see cnf/names.rs): each part a name.
        let part_ok = |p: &str| {
            !p.is_empty()
                && !p.starts_with(['-', '.'])
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        let name_ok = name.len() <= 100 && name.split('@').count() <= 2 && name.split('@').all(part_ok);
        if !name_ok {
            return Err(format!("entry {i}: the repository name {} is refused", show(name)));
        }
        let url_ok = (url.starts_with("https://") || url.starts_with("http://"))
            && url.len() <= 2048
            && !url.chars().any(|c| c.is_whitespace() || c.is_control());
        if !url_ok {
            return Err(format!("entry {i} ({name}): the URL {} is refused", show(&mask_userinfo(url))));
        }
        // Credentials in the URL would be on the healed master's `helm repo add` command line.
        if mask_userinfo(url) != url {
            return Err(format!(
                "entry {i} ({name}): the URL {} carries credentials; give them to Helm with --username/--password-stdin instead",
                show(&mask_userinfo(url))
            ));
        }
        repos.push((name.to_string(), url.to_string()));
    }
    Ok(repos)
}

pub fn helm_repo_add(name: &str, url: &str) -> Result<String> {
    Ok(format!("helm repo add --force-update -- {} {}", quote(name)?, quote(url)?))
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
        ClusterNode { k8s_name: k8s_name(role, ip), nic_ip: ip.into(), role, host, placement: Default::default() }
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
            Join { ca_hash: "h", secrets_from_env: false },
        )
        .unwrap();
        assert!(
            m.ends_with(
                "bash ./install_k8s_cluster.sh -m 10.0.0.1,10.0.0.2 -i 10.0.0.100 -p 192.168.0.0/16 -a 10.96.0.0/12"
            ),
            "{m}"
        );
        assert_eq!(
            crate::remote::label(&m),
            Some(
                "run_with_env.sh r env.x bash ./install_k8s_cluster.sh -m 10.0.0.1,10.0.0.2 -i 10.0.0.100 \
                 -p 192.168.0.0/16 -a 10.96.0.0/12"
            ),
            "{m}"
        );
        let net = Networks { pod: "p", service: "a" };
        let tacker = Join { ca_hash: "abc", secrets_from_env: false };
        let j = install("r", "e", InstallMode::JoinMaster, &t, &t.masters[1], net, tacker).unwrap();
        assert!(j.ends_with("-t '$K8S_JOIN_TOKEN' -s abc -k '$K8S_CERT_KEY'"), "{j}");
        let w = install("r", "e", InstallMode::Worker, &t, &t.workers[0], net, tacker).unwrap();
        assert!(
            w.ends_with("bash ./install_k8s_cluster.sh -w 10.0.0.10 -i 10.0.0.100 -t '$K8S_JOIN_TOKEN' -s abc"),
            "{w}"
        );
        // A script with the marker: no -t/-k at all (it reads the env file's variables).
        let ours = Join { ca_hash: "abc", secrets_from_env: true };
        let j2 = install("r", "e", InstallMode::JoinMaster, &t, &t.masters[1], net, ours).unwrap();
        assert!(j2.ends_with("-p p -a a -s abc") && !crate::remote::label(&j2).unwrap().contains("K8S_"), "{j2}");
        let w2 = install("r", "e", InstallMode::Worker, &t, &t.workers[0], net, ours).unwrap();
        assert!(
            w2.ends_with("-w 10.0.0.10 -i 10.0.0.100 -s abc") && !crate::remote::label(&w2).unwrap().contains("K8S_"),
            "{w2}"
        );

        // On a node: run dir entered, env file loaded and gone before the script runs, and the
        // secrets from it in place of their names, every other word as it was.
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("r");
        std::fs::create_dir(&run).unwrap();
        let script = "printf '[%s]' \"${PWD##*/}\" \"$(ls -A)\" \"$@\"\n";
        std::fs::write(run.join(INSTALL_SCRIPT), script).unwrap();
        let env = env_file(&[("K8S_JOIN_TOKEN".into(), "tok en".into()), ("K8S_CERT_KEY".into(), "k'ey".into())]);
        let go = |cmd: &str| {
            std::fs::write(run.join("e"), env.as_ref().unwrap()).unwrap();
            let o = Command::new("sh").arg("-c").arg(cmd).current_dir(d.path()).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        assert_eq!(
            go(&j),
            "[r][install_k8s_cluster.sh][-m][10.0.0.1,10.0.0.2][-i][10.0.0.100][-p][p][-a][a]\
             [-t][tok en][-s][abc][-k][k'ey]"
        );
        assert_eq!(go(&w), "[r][install_k8s_cluster.sh][-w][10.0.0.10][-i][10.0.0.100][-t][tok en][-s][abc]");
        // A script with the marker finds them in its environment instead.
        std::fs::write(run.join(INSTALL_SCRIPT), "printf '[%s]' \"$@\" \"$K8S_JOIN_TOKEN\" \"$K8S_CERT_KEY\"\n")
            .unwrap();
        assert_eq!(go(&j2), "[-m][10.0.0.1,10.0.0.2][-i][10.0.0.100][-p][p][-a][a][-s][abc][tok en][k'ey]");
        assert_eq!(go(&w2), "[-w][10.0.0.10][-i][10.0.0.100][-s][abc][tok en][k'ey]");
        std::fs::write(run.join(HELM_SCRIPT), "echo \"helm $K8S_CERT_KEY\"\n").unwrap();
        assert_eq!(go(&helm_install("r", "e").unwrap()), "helm k'ey\n");
        assert!(!run.join("e").exists());
    }

    #[test]
    fn proxy_cleanup_removes_what_our_scripts_wrote_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let w = |rel: &str, text: &str| {
            let p = r.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let operator = "PATH=\"/usr/local/sbin:/usr/bin\"\nhttp_proxy=http://operator:3128\n";
        let block = "# BEGIN mgmt-driver proxy (managed by install scripts, do not edit)\nhttp_proxy=http://p:1\nHTTP_PROXY=http://p:1\n# END mgmt-driver proxy\n";
        w("etc/environment", &format!("{operator}{block}LANG=C.UTF-8\n"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(r.join("etc/environment"), std::fs::Permissions::from_mode(0o640)).unwrap();
        w("etc/apt/apt.conf.d/95mgmt-driver-proxy", "// managed by install_k8s_cluster.sh; may hold proxy credentials (root-only)\nAcquire::http::Proxy \"http://p:1\";\n");
        w(
            "etc/systemd/system/containerd.service.d/http-proxy.conf",
            "# managed by install_k8s_cluster.sh; x\n[Service]\n",
        );
        w("etc/systemd/system/containerd.service.d/operator.conf", "[Service]\n");
        // An operator's own file with our name: not ours, kept.
        w("etc/systemd/system/kubelet.service.d/http-proxy.conf", "[Service]\nEnvironment=HTTP_PROXY=http://mine:1\n");
        let cmd = format!("{} {}", proxy_cleanup().unwrap(), crate::quote::quote(&r.display().to_string()).unwrap());
        let o = sh(&cmd);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("removed /etc/apt/apt.conf.d/95mgmt-driver-proxy"), "{out}");
        assert_eq!(std::fs::read_to_string(r.join("etc/environment")).unwrap(), format!("{operator}LANG=C.UTF-8\n"));
        let mode = std::fs::metadata(r.join("etc/environment")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "mode kept");
        assert!(!r.join("etc/apt/apt.conf.d/95mgmt-driver-proxy").exists());
        assert!(!r.join("etc/systemd/system/containerd.service.d/http-proxy.conf").exists());
        assert!(r.join("etc/systemd/system/containerd.service.d/operator.conf").exists(), "not empty: dir kept");
        assert!(r.join("etc/systemd/system/kubelet.service.d/http-proxy.conf").exists(), "the operator's file");
        // A second run: nothing left to do, nothing changed.
        let o = sh(&cmd);
        assert!(o.status.success() && o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(std::fs::read_to_string(r.join("etc/environment")).unwrap(), format!("{operator}LANG=C.UTF-8\n"));
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

    /// A real etcd refuses a removal while the cluster is settling: the removal waits it out,
    /// takes "already gone" as done, and fails at once on anything else.
    #[test]
    fn etcd_member_removal_waits_for_a_settling_cluster() {
        let d = tempfile::tempdir().unwrap();
        let stub = |body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = d.path().join("etcdctl");
            std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let path = format!("{}:{}", d.path().display(), std::env::var("PATH").unwrap());
        let run = || {
            let o = Command::new("sh")
                .arg("-c")
                .arg(etcd_remove("m1", "8e9e").unwrap())
                .env("PATH", &path)
                .output()
                .unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        let count = d.path().join("n");
        stub(&format!(
            "n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) > {c}\n\
             [ $n -ge 1 ] && {{ echo 'Member 8e9e removed from cluster 1'; exit 0; }}\n\
             echo '{{\"level\":\"warn\"}} Error: etcdserver: unhealthy cluster' >&2; exit 1\n",
            c = count.display()
        ));
        assert_eq!(run(), (Some(0), "Member 8e9e removed from cluster 1\n".into(), String::new()));
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "2\n", "refused once, then removed");
        stub("echo 'Error: etcdserver: member not found' >&2; exit 1\n");
        assert_eq!(run().0, Some(0), "already gone is done");
        stub("echo 'Error: context deadline exceeded' >&2; exit 1\n");
        assert_eq!(run(), (Some(1), String::new(), "Error: context deadline exceeded\n".into()));
    }

    /// The kubectl and helm programs against stand-ins: known failures become answers, others fail.
    #[test]
    fn kubectl_and_helm_programs_handle_their_known_failures() {
        let d = tempfile::tempdir().unwrap();
        let stub = |name: &str, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = d.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{text}")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        stub(
            "kubectl",
            r#"case "$1 $3" in
"delete gone") echo 'Error from server (NotFound): nodes "gone" not found' >&2; exit 1 ;;
"delete bad") echo 'Unable to connect to the server' >&2; exit 1 ;;
"delete "*) echo "node/$3 deleted" ;;
"apply "*) [ -f "$3" ] || exit 1; echo applied ;;
*) printf '%s' dG9r ;;
esac
"#,
        );
        stub("helm", "echo 'Error: no repositories to show' >&2; exit 1\n");
        stub("base64", "[ \"$1\" = -d ] && [ \"$(cat)\" = dG9r ] && printf tok\n");
        let path = format!("{}:{}", d.path().display(), std::env::var("PATH").unwrap());
        let run = |cmd: String| {
            let o = Command::new("sh").arg("-c").arg(cmd).env("PATH", &path).output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        assert_eq!(run(delete_node("it's").unwrap()).1, "node/it's deleted\n");
        assert_eq!(run(delete_node("gone").unwrap()), (Some(0), "node gone already deleted\n".into(), String::new()));
        let (code, out, err) = run(delete_node("bad").unwrap());
        assert_eq!((code, out.as_str(), err.as_str()), (Some(1), "", "Unable to connect to the server\n"));
        assert_eq!(run(helm_repo_list()), (Some(0), "[]\n".into(), String::new()));
        let manifest = d.path().join(ADMIN_TOKEN_FILE);
        std::fs::write(&manifest, "{}").unwrap();
        let (code, out, _) = run(admin_token(&d.path().display().to_string()).unwrap());
        assert_eq!((code, out.as_str()), (Some(0), "tok"));
        assert_eq!(run(admin_token("/nonexistent").unwrap()).0, Some(1));
        // Without the caller's KUBECONFIG the programs stop before kubectl (which would fall back
        // to another kubeconfig).
        for p in [&remote::DELETE_NODE, &remote::ADMIN_TOKEN] {
            let o = Command::new("sh")
                .arg("-c")
                .arg(p.command(&["x"]).unwrap())
                .env("PATH", &path)
                .env_remove("KUBECONFIG")
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(1), "{}", p.name);
            assert!(String::from_utf8_lossy(&o.stderr).contains("KUBECONFIG is not set"), "{}", p.name);
        }
    }

    /// The exact kubectl lines the admin steps send (built by `kube::kubectl`).
    #[test]
    fn kubectl_lines_run_as_the_cluster_admin() {
        let admin = "export KUBECONFIG=/etc/kubernetes/admin.conf; ";
        let etcd = "etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
                    --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key";
        assert_eq!(
            server_url(),
            format!("{admin}kubectl config view --raw -o jsonpath='{{.clusters[0].cluster.server}}'")
        );
        assert_eq!(
            drain("w 1", 30).unwrap(),
            format!("{admin}kubectl drain 'w 1' --ignore-daemonsets --delete-emptydir-data --timeout=30s")
        );
        assert_eq!(
            pods_on("w1").unwrap(),
            format!("{admin}kubectl get pods -A --field-selector spec.nodeName=w1 -o json")
        );
        let either = |args: &str| {
            format!(
                "if command -v etcdctl >/dev/null 2>&1; then {etcd} {args}; \
                 else {admin}kubectl -n kube-system exec etcd-m1 -- {etcd} {args}; fi"
            )
        };
        assert_eq!(etcd_members("m1").unwrap(), either("member list"));
        assert!(etcd_remove("m1", "8e9e05c52164694d").unwrap().contains(&either("member remove 8e9e05c52164694d")));
        // The programs that run kubectl get the same kubeconfig from their caller.
        for c in [delete_node("w1").unwrap(), admin_token("r").unwrap()] {
            assert!(c.starts_with(&format!("{admin}sh -c '")), "{c}");
        }
        assert_eq!(crate::remote::label(&delete_node("w1").unwrap()), Some("delete_node.sh w1"));
        assert_eq!(crate::remote::label(&admin_token("r").unwrap()), Some("admin_token.sh r/admin-token.json"));
    }

    #[test]
    fn programs_are_shown_by_name_and_arguments() {
        let l = |c: Result<String>| crate::remote::label(&c.unwrap()).map(str::to_string);
        assert_eq!(l(pack_charts("r")).as_deref(), Some("pack_charts.sh r/helm-charts.tgz"));
        assert_eq!(l(unpack_charts("r")).as_deref(), Some("unpack_charts.sh r/helm-charts.tgz"));
        assert_eq!(l(haproxy_backend("m1", Some("10.0.0.5"))).as_deref(), Some("haproxy_backend.sh m1 10.0.0.5"));
        assert_eq!(l(clean_env("r", &[])).as_deref(), Some("clean_env.sh r"));
        assert_eq!(
            l(hosts_update(&[("10.0.0.1".into(), "master1".into())], &["10.0.0.9".into()])).as_deref(),
            Some("hosts_update.sh -d 10.0.0.9 '10.0.0.1 master1'")
        );
    }

    #[test]
    fn etcd_and_pod_parsing() {
        let list = "8e9e05c52164694d, started, master11, https://10.0.0.11:2380, https://10.0.0.11:2379, false\n\
                    91bc3c398fb3c146, started, master111, https://10.0.0.111:2380, https://10.0.0.111:2379, false\n";
        assert_eq!(parse_member_id(list, "master11"), Ok(Some("8e9e05c52164694d".into())));
        assert_eq!(parse_member_id(list, "master1"), Ok(None), "exact name, not a prefix (Tacker grepped)");
        // An id that is not a member id is refused, not used in `member remove`.
        for bad in ["8e9e; reboot", "", "8e9e05c52164694d0", "-1"] {
            let e = parse_member_id(&format!("{bad}, started, master11, https://x\n"), "master11").unwrap_err();
            assert!(e.contains("not 1 to 16 hex digits"), "{bad:?}: {e}");
        }
        let pods = r#"{"items":[{"metadata":{"name":"calico-node-x","namespace":"kube-system","ownerReferences":[{"kind":"DaemonSet"}]}},
                                 {"metadata":{"name":"web-1","namespace":"default","ownerReferences":[{"kind":"ReplicaSet"}]}}]}"#;
        assert_eq!(evictable_pods(pods).unwrap(), vec!["default/web-1"]);
        let odd = r#"{"items":[{"metadata":{"name":"x\u001b[2J\nline","namespace":"default"}}]}"#;
        assert_eq!(evictable_pods(odd).unwrap(), vec!["default/x\\u{1b}[2J\\nline"]);
    }

    #[test]
    fn values_read_back_from_a_node_are_checked_before_reuse() {
        assert_eq!(parse_packed("packed\n"), Ok(true));
        assert_eq!(parse_packed("none"), Ok(false));
        assert!(parse_packed("packed\nand more").unwrap_err().contains("neither"));
        let repos = r#"[{"name":"bitnami","url":"https://charts.bitnami.com/bitnami"},{"name":"loc_al-1.x","url":"http://10.0.0.5:8080/charts"},{"name":"cnf1@labrepo","url":"http://10.0.0.5/c"}]"#;
        assert_eq!(
            parse_repo_list(repos).unwrap(),
            vec![
                ("bitnami".to_string(), "https://charts.bitnami.com/bitnami".to_string()),
                ("loc_al-1.x".to_string(), "http://10.0.0.5:8080/charts".to_string()),
                ("cnf1@labrepo".to_string(), "http://10.0.0.5/c".to_string())
            ],
            "a CNF's per-instance repository (<instance>@<name>) is copied too"
        );
        assert_eq!(parse_repo_list("[]\n").unwrap(), vec![]);
        for (bad, why) in [
            (r#"{"name":"a"}"#, "not a JSON array"),
            ("nope", "not JSON"),
            (r#"[{"name":"a"}]"#, "no string \"url\""),
            (r#"[{"name":"--debug","url":"https://h"}]"#, "name \"--debug\" is refused"),
            (r#"[{"name":"a b","url":"https://h"}]"#, "name \"a b\" is refused"),
            (r#"[{"name":"a","url":"file:///etc/shadow"}]"#, "URL \"file:///etc/shadow\" is refused"),
            (r#"[{"name":"a","url":"https://h\nx"}]"#, "is refused"),
            (r#"[{"name":"a","url":"https://h/ --insecure-skip-tls-verify"}]"#, "is refused"),
            (r#"[{"name":"a@b@c","url":"https://h"}]"#, "name \"a@b@c\" is refused"),
            (r#"[{"name":"@b","url":"https://h"}]"#, "name \"@b\" is refused"),
            (r#"[{"name":"a","url":"https://u:pw-in-url@h/"}]"#, "carries credentials"),
        ] {
            let e = parse_repo_list(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("pw-in-url"), "{e}");
        }
    }

    #[test]
    fn builders_refuse_values_that_could_add_a_line_to_a_node_file() {
        let ok = hosts_update(&[("fd00::1".into(), "master1 reg.example reg_2".into())], &["10.0.0.9".into()]);
        assert!(ok.is_ok(), "{ok:?}");
        for (add, drop) in [
            (("10.0.0.1", "m1\n10.6.6.6 evil"), "10.0.0.9"),
            (("10.0.0.1", "m1 # c"), "10.0.0.9"),
            (("10.0.0.1", ""), "10.0.0.9"),
            (("10.0.0.1", "m1  m2"), "10.0.0.9"),
            (("10.0.0.1 x", "m1"), "10.0.0.9"),
            (("10.0.0.1", "m1"), "10.0.0.9\n1.2.3.4"),
            (("10.0.0.1", "m1"), ""),
        ] {
            let e = hosts_update(&[(add.0.into(), add.1.into())], &[drop.into()]).unwrap_err();
            assert_eq!(e.kind(), "input", "{add:?} {drop:?}");
            assert!(e.to_string().contains("refused"), "{e}");
        }
        assert!(haproxy_backend("master-1.example", Some("fd00::5")).is_ok());
        for (name, ip) in
            [("m\n    server evil 6.6.6.6:6443", None), ("-x", None), ("m", Some("1.2.3.4 backup")), ("m 1", None)]
        {
            let e = haproxy_backend(name, ip).unwrap_err();
            assert!(e.to_string().contains("refused"), "{name:?}: {e}");
        }
    }

    #[test]
    fn env_file_quotes_values() {
        let e = env_file(&[("http_proxy".into(), "http://u:p'w@h:1".into())]).unwrap();
        assert_eq!(e, "http_proxy='http://u:p'\\''w@h:1'\n");
        let o = sh(&format!("{e}printf '%s' \"$http_proxy\""));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "http://u:p'w@h:1");
    }
}
