//! Which VMs are masters and workers, how to reach them, and the cluster's address. Tacker asks
//! Heat; we read the inventory (groups named after the VNFD's `aspect_id` / `vdu_id`, `cps` for
//! `cluster_cp_name` / `cluster_fip_name`) or the VnfInstance's `vnfcResourceInfo` when the VNFM
//! passes addresses.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::cluster::params::{ClusterParams, GroupKey, RoleParams};
use crate::cluster::state::InstanceState;
use crate::cnf::vnfd::Scaling;
use crate::error::{Error, Result};
use crate::inventory::{Auth, Host, HostKeyCheck, Inventory};
use crate::request::{VnfInstance, VnfcResourceInfo};
use crate::target::{Node, Role};
use crate::vim::addresses::{CloudAddresses, Want};

#[derive(Clone, Debug)]
pub struct ClusterNode {
    pub host: Host,
    pub role: Role,
    /// The address on the cluster network (`nic_cp_name`).
    pub nic_ip: String,
    /// The Kubernetes node name the Tacker-contract script gives it: `master<last octet>`.
    pub k8s_name: String,
    /// Where the VM runs (inventory `placement`, or the VnfInstance): a worker's labels.
    pub placement: crate::inventory::placement::Placement,
}

impl ClusterNode {
    pub fn name(&self) -> &str {
        &self.host.name
    }
}

impl Node for ClusterNode {
    fn host(&self) -> &Host {
        &self.host
    }

    fn role(&self) -> Role {
        self.role
    }
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub masters: Vec<ClusterNode>,
    pub workers: Vec<ClusterNode>,
    /// VIP (HA) or the single master's address: `-i` of the install script.
    pub cluster_ip: String,
    /// The VIP's floating IP, used in the VIM's URL when set.
    pub cluster_fip: Option<String>,
}

impl Topology {
    pub fn all(&self) -> impl Iterator<Item = &ClusterNode> {
        self.masters.iter().chain(self.workers.iter())
    }

    pub fn ha(&self) -> bool {
        self.masters.len() > 1
    }

    pub fn find(&self, name: &str) -> Option<&ClusterNode> {
        self.all().find(|n| n.host.name == name)
    }

    /// `/etc/hosts` entries: every node by its Kubernetes name. (Registry `hosts_string` lines
    /// are the registry step's, see `registry_apply.rs`.)
    pub fn hosts_entries(&self) -> Vec<(String, String)> {
        self.all().map(|n| (n.nic_ip.clone(), n.k8s_name.clone())).collect()
    }

    /// `-m`: every master's cluster-NIC address, the main master first.
    pub fn master_ips(&self) -> String {
        self.masters.iter().map(|m| m.nic_ip.as_str()).collect::<Vec<_>>().join(",")
    }
}

/// `master<last octet>` / `worker<last octet>`: the hostname Tacker's script contract sets.
pub fn k8s_name(role: Role, nic_ip: &str) -> String {
    let last = nic_ip.rsplit(['.', ':']).next().unwrap_or(nic_ip);
    format!("{}{last}", if role == Role::Master { "master" } else { "worker" })
}

/// Where a role's VMs are listed: the aspect or VDU group, else the `ssh_cp_name` group.
fn group_name(r: &RoleParams) -> (&str, &'static str) {
    match &r.group {
        Some(crate::cluster::params::GroupKey::AspectId(a)) => (a, "aspect_id"),
        Some(crate::cluster::params::GroupKey::VduId(v)) => (v, "vdu_id"),
        None => (&r.ssh_cp_name, "ssh_cp_name"),
    }
}

/// Tacker logs in with the request's username and password. An inventory host that has its own
/// credentials (a key, say) keeps them; one with none gets the request's.
pub(crate) fn with_request_credentials(mut h: Host, r: &RoleParams) -> Host {
    if h.auth.agent && h.auth.password.is_none() && h.auth.identity_file.is_none() {
        h.user = r.username.clone();
        h.auth = Auth { password: Some(r.password.clone()), ..Auth::default() };
    }
    if h.become_password.is_none() && h.user != "root" {
        h.become_password = h.auth.password.clone().or_else(|| Some(r.password.clone()));
    }
    h
}

/// `s` must be an IP address: it reaches root commands on every node (the install script's
/// `-i`, keepalived, /etc/hosts) and the VIM's URL.
fn ip(s: &str, file: &str, field: &str, what: &str) -> Result<()> {
    s.parse::<std::net::IpAddr>()
        .map(|_| ())
        .map_err(|_| Error::input(file, field, format!("{what} '{}' is not an IP address", crate::error::excerpt(s))))
}

fn check(t: Topology, file: &str) -> Result<Topology> {
    if t.masters.is_empty() {
        return Err(Error::input(file, "master_node", "no master node found"));
    }
    ip(&t.cluster_ip, file, "cluster_cp_name", "the cluster address (VIP)")?;
    if let Some(f) = &t.cluster_fip {
        ip(f, file, "cluster_fip_name", "the cluster's floating IP")?;
    }
    let mut seen = BTreeSet::new();
    for n in t.all() {
        ip(&n.nic_ip, file, n.name(), "cluster address")?;
        if !seen.insert(n.nic_ip.clone()) {
            return Err(Error::input(file, n.name(), format!("cluster address {} is used by two nodes", n.nic_ip)));
        }
    }
    Ok(t)
}

pub fn from_inventory(inv: &Inventory, p: &ClusterParams, inv_file: &str, req_file: &str) -> Result<Topology> {
    let role_nodes = |r: &RoleParams, role: Role, param: &str| -> Result<Vec<ClusterNode>> {
        let (group, key) = group_name(r);
        let Some((_, idx)) = inv.groups.iter().find(|(g, _)| g == group) else {
            let known: Vec<&str> = inv.groups.iter().map(|(g, _)| g.as_str()).collect();
            return Err(Error::input(
                req_file,
                format!("additionalParams.k8s_cluster_installation_param.{param}.{key}"),
                format!("'{group}' is not a group of the inventory {inv_file} (groups: {})", known.join(", ")),
            ));
        };
        Ok(idx
            .iter()
            .map(|&i| {
                let h = with_request_credentials(inv.hosts[i].clone(), r);
                let nic_ip = h.nic_ip.clone().unwrap_or_else(|| h.addr.clone());
                let placement = inv.placement.get(&h.name).cloned().unwrap_or_default();
                ClusterNode { k8s_name: k8s_name(role, &nic_ip), nic_ip, role, host: h, placement }
            })
            .collect())
    };
    let masters = role_nodes(&p.master, Role::Master, "master_node")?;
    let workers = role_nodes(&p.worker, Role::Worker, "worker_node")?;
    let cluster_ip = match inv.cps.get(&p.cluster_cp_name) {
        Some(ip) => ip.clone(),
        None if masters.len() == 1 => masters[0].nic_ip.clone(),
        None => {
            return Err(Error::input(
                inv_file,
                format!("cps.{}", p.cluster_cp_name),
                format!("{} masters need the cluster VIP: add `cps: {{{}: <VIP>}}`", masters.len(), p.cluster_cp_name),
            ));
        }
    };
    let cluster_fip = match &p.cluster_fip_name {
        None => None,
        Some(n) => Some(inv.cps.get(n).cloned().ok_or_else(|| {
            Error::input(inv_file, format!("cps.{n}"), "named by master_node.cluster_fip_name but missing")
        })?),
    };
    check(Topology { masters, workers, cluster_ip, cluster_fip }, inv_file)
}

/// How to log in to VMs found in a VnfInstance (no inventory).
#[derive(Clone, Debug)]
pub struct NodeDefaults {
    pub known_hosts: PathBuf,
    pub host_key_check: HostKeyCheck,
}

impl NodeDefaults {
    /// A VM without an inventory entry: Tacker's way, the params' username and password (also
    /// for sudo when not root), port 22, these host-key settings.
    pub(crate) fn request_login(&self, name: &str, addr: &str, nic: &str, r: &RoleParams, groups: Vec<String>) -> Host {
        Host {
            name: name.to_string(),
            addr: addr.to_string(),
            port: 22,
            nic_ip: Some(nic.to_string()),
            user: r.username.clone(),
            auth: Auth { password: Some(r.password.clone()), ..Auth::default() },
            known_hosts: self.known_hosts.clone(),
            host_key_check: self.host_key_check,
            jump: vec![],
            become_password: (r.username != "root").then(|| r.password.clone()),
            groups,
        }
    }
}

/// Whether a VNFC of VDU `vdu_id` belongs to a role's group. Tacker v1's params name a scaling
/// aspect (`aspect_id: master_instance`) while its instance records the VDU (`vduId:
/// masterNode`): the VNFD's `VduScalingAspectDeltas` (`vnfd`, from the package) say which VDUs
/// an aspect scales. A VDU named like the group still matches (packages whose aspect and VDU
/// share a name, and VNFMs that record the aspect).
fn in_group(r: &RoleParams, vdu_id: &str, vnfd: &Scaling) -> bool {
    let (group, _) = group_name(r);
    vdu_id == group
        || matches!(&r.group, Some(GroupKey::AspectId(a))
            if vnfd.aspects.get(a).is_some_and(|x| x.vdu_deltas.contains_key(vdu_id)))
}

/// The nodes the VNF instance lists, by role. `vnfd` is the package's scaling data (empty when
/// there is none): with it an `aspect_id` finds the VNFCs of the VDUs that aspect scales.
#[cfg(test)]
pub fn from_vnf_instance(
    inst: &VnfInstance,
    p: &ClusterParams,
    file: &str,
    d: &NodeDefaults,
    vnfd: &Scaling,
) -> Result<Topology> {
    from_vnf_instance_and_cloud(inst, p, file, d, vnfd, &CloudAddresses::default())
}

/// The VNFCs of a role, as the instance lists them.
fn role_vnfcs<'a>(
    inst: &'a VnfInstance,
    r: &'a RoleParams,
    vnfd: &'a Scaling,
) -> impl Iterator<Item = &'a VnfcResourceInfo> {
    let vnfcs = inst.instantiated_vnf_info.as_ref().map(|i| i.vnfc_resource_info.as_slice()).unwrap_or_default();
    vnfcs.iter().filter(move |v| in_group(r, &v.vdu_id, vnfd))
}

/// What the cloud must be asked (`vim/addresses.rs`), or None when the instance carries every
/// address the cluster cannot do without: each node's login address (`ssh_cp_name`) and the
/// cluster address (`cluster_cp_name`). When the cloud is asked, it is also asked for the
/// cluster-network addresses (`nic_cp_name`) and the floating IPs the instance lacks; an
/// address the instance carries is never replaced.
pub fn cloud_want(inst: &VnfInstance, p: &ClusterParams, file: &str, vnfd: &Scaling) -> Result<Option<Want>> {
    let roles = [(&p.master, true), (&p.worker, false)];
    let lacking =
        roles.iter().any(|(r, _)| role_vnfcs(inst, r, vnfd).any(|v| inst.address_of(v, &r.ssh_cp_name).is_none()))
            || inst.any_address_of(&p.cluster_cp_name).is_none();
    if !lacking {
        return Ok(None);
    }
    let mut vnfcs = Vec::new();
    for (r, master) in roles {
        for v in role_vnfcs(inst, r, vnfd) {
            let cps: Vec<&str> = [r.ssh_cp_name.as_str(), r.nic_cp_name.as_str()]
                .into_iter()
                .filter(|cp| inst.address_of(v, cp).is_none())
                .collect();
            let needs_vip_pairs = master && !cps.contains(&r.nic_cp_name.as_str());
            // A master's port on the cluster network carries the VIP's allowed address pair.
            let cps = if needs_vip_pairs { [cps, vec![r.nic_cp_name.as_str()]].concat() } else { cps };
            if !cps.is_empty() {
                vnfcs.push((v, cps, master));
            }
        }
    }
    let vip = inst
        .any_address_of(&p.cluster_cp_name)
        .is_none()
        .then_some((p.cluster_cp_name.as_str(), p.master.nic_cp_name.as_str()));
    crate::vim::addresses::want(inst, &vnfcs, vip, file).map(Some)
}

/// [`from_vnf_instance`] with the cloud's addresses (`cloud`) for what the instance lacks: the
/// instance's own addresses come first, then the cloud's.
pub fn from_vnf_instance_and_cloud(
    inst: &VnfInstance,
    p: &ClusterParams,
    file: &str,
    d: &NodeDefaults,
    vnfd: &Scaling,
    cloud: &CloudAddresses,
) -> Result<Topology> {
    let vnfcs = inst.instantiated_vnf_info.as_ref().map(|i| i.vnfc_resource_info.as_slice()).unwrap_or_default();
    let role_nodes = |r: &RoleParams, role: Role, param: &str| -> Result<Vec<ClusterNode>> {
        let (group, _) = group_name(r);
        let mut out = Vec::new();
        for v in vnfcs.iter().filter(|v| in_group(r, &v.vdu_id, vnfd)) {
            let at = format!("instantiatedVnfInfo.vnfcResourceInfo[id={}]", crate::error::excerpt(&v.id));
            // The id becomes the node's name (in logs, the state, the result): an identifier.
            let id_ok = !v.id.is_empty()
                && v.id.len() <= 253
                && v.id.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
            if !id_ok {
                return Err(Error::input(file, format!("{at}.id"), "a VNFC id is letters, digits, '-', '_', '.'"));
            }
            let ssh =
                inst.address_of(v, &r.ssh_cp_name).or_else(|| cloud.ssh(&v.id, &r.ssh_cp_name)).ok_or_else(|| {
                    Error::input(file, &at, format!("no address for {param}.ssh_cp_name '{}'", r.ssh_cp_name))
                })?;
            ip(&ssh, file, &format!("{at}.{}", r.ssh_cp_name), "the VNFC's address")?;
            let nic = inst
                .address_of(v, &r.nic_cp_name)
                .or_else(|| cloud.fixed(&v.id, &r.nic_cp_name))
                .unwrap_or_else(|| ssh.clone());
            ip(&nic, file, &format!("{at}.{}", r.nic_cp_name), "the VNFC's address")?;
            let host = d.request_login(&v.id, &ssh, &nic, r, vec![group.to_string()]);
            let placement = crate::cluster::labels::placement_of(v, file, &at)?;
            out.push(ClusterNode { k8s_name: k8s_name(role, &nic), nic_ip: nic, role, host, placement });
        }
        Ok(out)
    };
    let masters = role_nodes(&p.master, Role::Master, "master_node")?;
    if masters.is_empty() {
        let (g, key) = group_name(&p.master);
        return Err(Error::input(
            file,
            format!("additionalParams.k8s_cluster_installation_param.master_node.{key}"),
            match &p.master.group {
                Some(GroupKey::AspectId(_)) => format!(
                    "no vnfcResourceInfo with vduId '{g}' or a VDU the VNFD's VduScalingAspectDeltas \
                     scale by aspect '{g}' in the VNF instance"
                ),
                _ => format!("no vnfcResourceInfo with vduId '{g}' in the VNF instance"),
            },
        ));
    }
    let workers = role_nodes(&p.worker, Role::Worker, "worker_node")?;
    // The cluster CP is a master's own port (single master) or a VIP the VNFM must list in
    // the first master's vnfcCpInfo.
    let cluster_ip = inst
        .any_address_of(&p.cluster_cp_name)
        .or_else(|| cloud.any_fixed(&p.cluster_cp_name))
        .or_else(|| cloud.vip.map(|v| v.to_string()))
        .ok_or_else(|| {
            Error::input(file, "master_node.cluster_cp_name", format!("no address for '{}'", p.cluster_cp_name))
        })?;
    let cluster_fip = p
        .cluster_fip_name
        .as_ref()
        .and_then(|n| inst.any_address_of(n).or_else(|| cloud.vip_floating.map(|f| f.to_string())));
    check(Topology { masters, workers, cluster_ip, cluster_fip }, file)
}

/// The nodes `instantiate_end` recorded, for a VNFM that no longer lists them: Tacker v1 calls
/// `terminate_end` with the instance's resources already emptied. Logins are the params'.
pub fn from_state(st: &InstanceState, p: &ClusterParams, file: &str, d: &NodeDefaults) -> Result<Topology> {
    let facts = st.facts.as_ref();
    let main = facts.map(|f| f.main_master.as_str()).unwrap_or_default();
    let mut masters = Vec::new();
    let mut workers = Vec::new();
    for (name, n) in &st.nodes {
        let (r, role) = match n.role {
            Some(Role::Master) => (&p.master, Role::Master),
            Some(Role::Worker) => (&p.worker, Role::Worker),
            _ => continue,
        };
        let at = format!("nodes.{}", crate::error::excerpt(name));
        ip(&n.ssh_addr, file, &format!("{at}.ssh_addr"), "the recorded address")?;
        ip(&n.nic_ip, file, &format!("{at}.nic_ip"), "the recorded address")?;
        let host = d.request_login(name, &n.ssh_addr, &n.nic_ip, r, vec![]);
        let k8s = if n.k8s_name.is_empty() { k8s_name(role, &n.nic_ip) } else { n.k8s_name.clone() };
        let node = ClusterNode { k8s_name: k8s, nic_ip: n.nic_ip.clone(), role, host, placement: Default::default() };
        match role {
            Role::Master if name == main => masters.insert(0, node),
            Role::Master => masters.push(node),
            _ => workers.push(node),
        }
    }
    let cluster_ip = facts.map(|f| f.cluster_ip.clone()).unwrap_or_default();
    check(Topology { masters, workers, cluster_ip, cluster_fip: None }, file)
}

/// `t` with the recorded workers among `names` that it lacks: a rolled-back scale-out takes out
/// the workers scale_end joined, but Tacker's rollback passes the instance as it was before the
/// scale, without them. Their addresses are the ones recorded when they joined; logins are the
/// params'. Names that are neither in `t` nor recorded workers are left for the caller to refuse.
pub fn with_recorded_workers(
    mut t: Topology,
    st: &InstanceState,
    names: &[String],
    p: &ClusterParams,
    file: &str,
    d: &NodeDefaults,
) -> Result<Topology> {
    let recorded_worker = |n: &String| st.nodes.get(n).is_some_and(|r| r.role == Some(Role::Worker));
    let missing: Vec<&String> = names.iter().filter(|n| t.find(n).is_none() && recorded_worker(n)).collect();
    if missing.is_empty() {
        return Ok(t);
    }
    for n in &missing {
        let (name, r) = (n.as_str(), &st.nodes[n.as_str()]);
        let at = format!("nodes.{}", crate::error::excerpt(name));
        ip(&r.ssh_addr, file, &format!("{at}.ssh_addr"), "the recorded address")?;
        ip(&r.nic_ip, file, &format!("{at}.nic_ip"), "the recorded address")?;
        let host = d.request_login(name, &r.ssh_addr, &r.nic_ip, &p.worker, vec![]);
        let k8s = if r.k8s_name.is_empty() { k8s_name(Role::Worker, &r.nic_ip) } else { r.k8s_name.clone() };
        t.workers.push(ClusterNode {
            k8s_name: k8s,
            nic_ip: r.nic_ip.clone(),
            role: Role::Worker,
            host,
            placement: Default::default(),
        });
    }
    check(t, file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::LoadOptions;

    const INV: &str = "
defaults: {user: root, password: rootpw, known_hosts: /dev/null}
groups:
  master_instance:
    - {name: m1, ssh_ip: 198.18.0.11, nic_ip: 10.0.0.11}
    - {name: m2, ssh_ip: 198.18.0.12, nic_ip: 10.0.0.12}
  worker_instance:
    - {name: w1, ssh_ip: 198.18.0.21}
cps: {vip_CP: 10.0.0.100}
";

    fn params(cp: &str) -> ClusterParams {
        let ap = serde_json::json!({"k8s_cluster_installation_param": {
            "script_path": "s.sh",
            "master_node": {"aspect_id": "master_instance", "ssh_cp_name": "m", "username": "ubuntu", "password": "pw", "cluster_cp_name": cp},
            "worker_node": {"aspect_id": "worker_instance", "ssh_cp_name": "w", "username": "ubuntu", "password": "pw"}}});
        ClusterParams::from_additional_params(
            ap.as_object().unwrap(),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap()
    }

    fn inv(text: &str) -> Inventory {
        Inventory::parse(
            text,
            "inv.yaml",
            std::path::Path::new("/"),
            &|_| None,
            &LoadOptions { credentials_from_request: true, ..Default::default() },
        )
        .unwrap()
    }

    #[test]
    fn groups_by_aspect_and_vip_from_cps() {
        let t = from_inventory(&inv(INV), &params("vip_CP"), "inv.yaml", "req.json").unwrap();
        assert_eq!(t.master_ips(), "10.0.0.11,10.0.0.12");
        assert_eq!(t.cluster_ip, "10.0.0.100");
        assert_eq!(t.workers[0].nic_ip, "198.18.0.21", "no nic_ip: the ssh address");
        assert_eq!(t.workers[0].k8s_name, "worker21");
        assert_eq!(t.masters[1].k8s_name, "master12");
        assert!(t.ha());
        // Inventory credentials win over the request's.
        assert_eq!(t.masters[0].host.user, "root");
    }

    #[test]
    fn ha_without_a_vip_and_unknown_aspects_are_input_errors() {
        let e = from_inventory(&inv(INV), &params("other_CP"), "inv.yaml", "req.json").unwrap_err().to_string();
        assert!(e.contains("inv.yaml: cps.other_CP: 2 masters need the cluster VIP"), "{e}");
        let e = from_inventory(
            &inv(&INV.replace("worker_instance:", "workers:")),
            &params("vip_CP"),
            "inv.yaml",
            "req.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("worker_node.aspect_id: 'worker_instance' is not a group"), "{e}");
    }

    #[test]
    fn nodes_from_a_vnf_instance_use_its_cp_addresses() {
        let ap = serde_json::json!({"k8s_cluster_installation_param": {
            "script_path": "s.sh",
            "master_node": {"vdu_id": "masterNode", "ssh_cp_name": "masterNode_CP1_floating_ip", "nic_cp_name": "masterNode_CP1",
                            "username": "ubuntu", "password": "pw", "cluster_cp_name": "masterNode_CP1"},
            "worker_node": {"vdu_id": "workerNode", "ssh_cp_name": "workerNode_CP1_floating_ip", "nic_cp_name": "workerNode_CP1",
                            "username": "ubuntu", "password": "pw"}}});
        let p = ClusterParams::from_additional_params(
            ap.as_object().unwrap(),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        let cp = |id: &str, ip: &str| {
            serde_json::json!({"cpdId": id, "cpProtocolInfo": [{"layerProtocol": "IP_OVER_ETHERNET",
            "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "addresses": [ip]}]}}]})
        };
        let inst: VnfInstance = serde_json::from_value(serde_json::json!({"id": "i", "instantiatedVnfInfo": {"vnfcResourceInfo": [
            {"id": "vnfc-m", "vduId": "masterNode", "vnfcCpInfo": [cp("masterNode_CP1_floating_ip", "192.0.2.5"), cp("masterNode_CP1", "10.0.0.5")]},
            {"id": "vnfc-w", "vduId": "workerNode", "vnfcCpInfo": [cp("workerNode_CP1_floating_ip", "192.0.2.6"), cp("workerNode_CP1", "10.0.0.6")]}]}}))
        .unwrap();
        let d = NodeDefaults { known_hosts: "/tmp/kh".into(), host_key_check: HostKeyCheck::AcceptNew };
        let t = from_vnf_instance(&inst, &p, "inst.json", &d, &Scaling::default()).unwrap();
        assert_eq!((t.masters[0].host.addr.as_str(), t.masters[0].nic_ip.as_str()), ("192.0.2.5", "10.0.0.5"));
        assert_eq!(t.cluster_ip, "10.0.0.5");
        assert_eq!(t.workers[0].k8s_name, "worker6");
        assert_eq!(t.workers[0].host.user, "ubuntu");
        let empty: VnfInstance = serde_json::from_value(serde_json::json!({"id": "i"})).unwrap();
        let e = from_vnf_instance(&empty, &p, "inst.json", &d, &Scaling::default()).unwrap_err().to_string();
        assert!(e.contains("master_node.vdu_id: no vnfcResourceInfo with vduId 'masterNode'"), "{e}");
    }

    /// Tacker v1's guide names the aspect (`master_instance`); its OpenStack infra driver
    /// records the VDU (`masterNode`). The package's VduScalingAspectDeltas join them.
    #[test]
    fn an_aspect_finds_the_vnfcs_of_the_vdus_the_vnfd_scales_by_it() {
        const VNFD: &str = "
topology_template:
  node_templates:
    masterNode: {type: tosca.nodes.nfv.Vdu.Compute}
    workerNode: {type: tosca.nodes.nfv.Vdu.Compute}
  policies:
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties: {aspects: {master_instance: {max_scale_level: 3, step_deltas: [delta_1]},
                               worker_instance: {max_scale_level: 3, step_deltas: [delta_1]}}}
    - masterNode_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: master_instance, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [masterNode]
    - workerNode_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: worker_instance, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [workerNode]
";
        let read = |p: &str| (p == "d.yaml").then(|| VNFD.to_string());
        let vnfd = crate::cnf::vnfd::scaling(&crate::cnf::vnfd::load("d.yaml", &read).unwrap(), None);
        let mut p = params("m_CP");
        p.master.ssh_cp_name = "masterNode_CP1".into();
        p.master.nic_cp_name = "masterNode_CP1".into();
        p.cluster_cp_name = "masterNode_CP1".into();
        p.worker.ssh_cp_name = "workerNode_CP2".into();
        p.worker.nic_cp_name = "workerNode_CP2".into();
        let cp = |id: &str, ip: &str| serde_json::json!({"cpdId": id, "cpProtocolInfo": [{"ipOverEthernet": {"ipAddresses": [{"addresses": [ip]}]}}]});
        let inst: VnfInstance =
            serde_json::from_value(serde_json::json!({"id": "i", "instantiatedVnfInfo": {"vnfcResourceInfo": [
            {"id": "vnfc-m1", "vduId": "masterNode", "vnfcCpInfo": [cp("masterNode_CP1", "10.0.0.11")]},
            {"id": "vnfc-w1", "vduId": "workerNode", "vnfcCpInfo": [cp("workerNode_CP2", "10.0.0.21")]}]}}))
            .unwrap();
        let d = NodeDefaults { known_hosts: "/tmp/kh".into(), host_key_check: HostKeyCheck::AcceptNew };
        let t = from_vnf_instance(&inst, &p, "inst.json", &d, &vnfd).unwrap();
        let names: Vec<&str> = t.all().map(|n| n.name()).collect();
        assert_eq!(names, ["vnfc-m1", "vnfc-w1"]);
        assert_eq!((t.masters[0].nic_ip.as_str(), t.workers[0].nic_ip.as_str()), ("10.0.0.11", "10.0.0.21"));
        // Without the VNFD the aspect names no VDU: the error says where the join comes from.
        let e = from_vnf_instance(&inst, &p, "inst.json", &d, &Scaling::default()).unwrap_err().to_string();
        assert!(e.contains("master_node.aspect_id: no vnfcResourceInfo with vduId 'master_instance' or a VDU"), "{e}");
    }

    #[test]
    fn the_vip_and_vnf_instance_addresses_must_be_ips() {
        let e = from_inventory(&inv(&INV.replace("10.0.0.100", "vip.example.com")), &params("vip_CP"), "inv.yaml", "r")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("inv.yaml: cluster_cp_name: the cluster address (VIP) 'vip.example.com' is not an IP"),
            "{e}"
        );
        let ap = serde_json::json!({"k8s_cluster_installation_param": {"script_path": "s.sh",
            "master_node": {"vdu_id": "m", "ssh_cp_name": "m_CP", "username": "u", "password": "pw", "cluster_cp_name": "vip"},
            "worker_node": {"vdu_id": "w", "ssh_cp_name": "w_CP", "username": "u", "password": "pw"}}});
        let p = ClusterParams::from_additional_params(
            ap.as_object().unwrap(),
            "req.json",
            "i",
            &crate::secret_ref::Policy::Tenant,
        )
        .unwrap();
        let cp = |id: &str, ip: &str| serde_json::json!({"cpdId": id, "cpProtocolInfo": [{"ipOverEthernet": {"ipAddresses": [{"addresses": [ip]}]}}]});
        let d = NodeDefaults { known_hosts: "/tmp/kh".into(), host_key_check: HostKeyCheck::AcceptNew };
        for (vnfc, ssh, vip, needle) in [
            ("m1", "10.0.0.5; reboot", "10.0.0.9", "m_CP: the VNFC's address '10.0.0.5; reboot' is not an IP"),
            ("m1", "-oProxyCommand=sh", "10.0.0.9", "is not an IP"),
            ("m1", "10.0.0.5", "10.0.0.9\nx", "cluster_cp_name: the cluster address (VIP) '10.0.0.9\\nx' is not"),
            ("m 1", "10.0.0.5", "10.0.0.9", "vnfcResourceInfo[id=m 1].id"),
        ] {
            let inst: VnfInstance =
                serde_json::from_value(serde_json::json!({"id": "i", "instantiatedVnfInfo": {"vnfcResourceInfo": [
                {"id": vnfc, "vduId": "m", "vnfcCpInfo": [cp("m_CP", ssh), cp("vip", vip)]}]}}))
                .unwrap();
            let e = from_vnf_instance(&inst, &p, "inst.json", &d, &Scaling::default()).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn recorded_nodes_stand_in_for_an_emptied_instance() {
        use crate::cluster::state::{ClusterFacts, NodeState};
        let mut st = InstanceState::new("i");
        let node = |role, ip: &str, k8s: &str| NodeState {
            role: Some(role),
            ssh_addr: ip.into(),
            nic_ip: ip.into(),
            k8s_name: k8s.into(),
            installed: true,
            helm_installed: false,
            prepared_secret_digest: None,
        };
        st.nodes.insert("a-master".into(), node(Role::Master, "10.0.0.2", "master2"));
        st.nodes.insert("b-main".into(), node(Role::Master, "10.0.0.1", "master1"));
        st.nodes.insert("w".into(), node(Role::Worker, "10.0.0.3", "worker3"));
        st.facts =
            Some(ClusterFacts { cluster_ip: "10.0.0.100".into(), main_master: "b-main".into(), ..Default::default() });
        let d = NodeDefaults { known_hosts: "/dev/null".into(), host_key_check: HostKeyCheck::AcceptNew };
        let t = from_state(&st, &params("vip_CP"), "state.json", &d).unwrap();
        let names: Vec<&str> = t.masters.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["b-main", "a-master"], "the main master comes first");
        assert_eq!((t.workers[0].k8s_name.as_str(), t.workers[0].host.user.as_str()), ("worker3", "ubuntu"));
        assert_eq!(t.cluster_ip, "10.0.0.100");
        st.nodes.get_mut("w").unwrap().ssh_addr = "10.0.0.3; reboot".into();
        let e = from_state(&st, &params("vip_CP"), "state.json", &d).unwrap_err().to_string();
        assert!(e.starts_with("state.json: nodes.w.ssh_addr"), "{e}");
    }

    #[test]
    fn hosts_without_credentials_use_the_requests() {
        let text = INV.replace(
            "defaults: {user: root, password: rootpw, known_hosts: /dev/null}",
            "defaults: {known_hosts: /dev/null}",
        );
        let t = from_inventory(&inv(&text), &params("vip_CP"), "inv.yaml", "req.json").unwrap();
        let h = &t.masters[0].host;
        assert_eq!(h.user, "ubuntu");
        assert_eq!(h.auth.password.as_ref().unwrap().expose(), "pw");
        assert_eq!(h.become_password.as_ref().unwrap().expose(), "pw");
    }
}
