//! What to ask Neutron for, and its answer as addresses: per VNFC and CP the port's fixed
//! address and floating IP, the cluster VIP and its floating IP. Which port is a VNFC's CP:
//! the port Tacker recorded for it (the CP's link port's `resourceHandle.resourceId`), else,
//! among the VM's ports (`device_id` = `computeResource.resourceId`), the one Heat named after
//! the CP (`<stack>-<cpdId>-<suffix>`), else the VM's only port.
//!
//! Precedence is the caller's (`cluster/topology.rs`): an inventory, then addresses the
//! instance carries, then these.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::request::{VnfInstance, VnfcResourceInfo};
use crate::vim::neutron::{id_ok, FloatingIp, Port};

/// One CP of one VNFC to find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpWant {
    pub cpd_id: String,
    /// The port Tacker recorded for it, when it did.
    pub port_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VnfcWant {
    pub vnfc_id: String,
    /// The VM (`computeResource.resourceId`).
    pub device_id: String,
    pub cps: Vec<CpWant>,
    pub master: bool,
}

/// The VIP: the port of `cluster_cp_name` no VNFC owns, when Tacker recorded one, else the
/// address every master's port on `master_cp` allows (`allowed_address_pairs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VipWant {
    pub cpd_id: String,
    pub port_id: Option<String>,
    pub master_cp: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Want {
    pub vnfcs: Vec<VnfcWant>,
    pub vip: Option<VipWant>,
}

impl Want {
    pub fn device_ids(&self) -> Vec<&str> {
        self.vnfcs.iter().map(|v| v.device_id.as_str()).collect()
    }
}

/// A CP's addresses as the cloud has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpAddress {
    pub port_id: String,
    pub fixed: IpAddr,
    pub floating: Option<IpAddr>,
}

/// The cloud's answer, by VNFC id and cpdId.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloudAddresses {
    pub cps: BTreeMap<(String, String), CpAddress>,
    pub vip: Option<IpAddr>,
    pub vip_floating: Option<IpAddr>,
}

impl CloudAddresses {
    pub fn cp(&self, vnfc_id: &str, cpd_id: &str) -> Option<&CpAddress> {
        self.cps.get(&(vnfc_id.to_string(), cpd_id.to_string()))
    }

    /// Where to log in through CP `cpd_id`: its floating IP, else its fixed address. Tacker's
    /// own sample params name `<CP>_floating_ip` (the Heat resource of the CP's floating IP):
    /// that is the CP `<CP>`'s floating IP here.
    pub fn ssh(&self, vnfc_id: &str, cpd_id: &str) -> Option<String> {
        let c = self.cp(vnfc_id, cpd_id).or_else(|| self.cp(vnfc_id, floating_stem(cpd_id)?))?;
        Some(c.floating.unwrap_or(c.fixed).to_string())
    }

    pub fn fixed(&self, vnfc_id: &str, cpd_id: &str) -> Option<String> {
        self.cp(vnfc_id, cpd_id).map(|c| c.fixed.to_string())
    }

    /// Any VNFC's fixed address on `cpd_id` (a single master's own CP as the cluster address).
    pub fn any_fixed(&self, cpd_id: &str) -> Option<String> {
        self.cps.iter().find(|((_, c), _)| c == cpd_id).map(|(_, a)| a.fixed.to_string())
    }

    pub fn is_empty(&self) -> bool {
        self.cps.is_empty() && self.vip.is_none()
    }

    /// Every port the answer names, for the floating IPs call.
    pub fn port_ids(&self, vip_port: Option<&str>) -> Vec<String> {
        let mut ids: Vec<String> = self.cps.values().map(|c| c.port_id.clone()).collect();
        ids.extend(vip_port.map(str::to_string));
        ids.sort();
        ids.dedup();
        ids
    }

    /// Fill in the floating IPs of the ports found.
    pub fn with_floating_ips(mut self, fips: &[FloatingIp], vip_port: Option<&str>) -> CloudAddresses {
        let of = |p: &str| fips.iter().find(|f| f.port_id == p).map(|f| f.address);
        for c in self.cps.values_mut() {
            c.floating = of(&c.port_id);
        }
        self.vip_floating = vip_port.and_then(of);
        self
    }

    /// What came from the cloud, one phrase each, for the event that says so.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .cps
            .iter()
            .map(|((v, c), a)| match a.floating {
                Some(f) => format!("{v} {c} {} (floating {f})", a.fixed),
                None => format!("{v} {c} {}", a.fixed),
            })
            .collect();
        if let Some(v) = self.vip {
            parts.push(format!("VIP {v}"));
        }
        if let Some(f) = self.vip_floating {
            parts.push(format!("VIP floating {f}"));
        }
        parts.join(", ")
    }
}

/// `<CP>` of a name `<CP>_floating_ip` (Tacker's sample params' `ssh_cp_name`).
pub fn floating_stem(name: &str) -> Option<&str> {
    name.strip_suffix("_floating_ip").filter(|s| !s.is_empty())
}

fn port_of_handle(v: &Value) -> Option<String> {
    v.pointer("/resourceHandle/resourceId")?.as_str().map(str::to_string)
}

/// The Neutron port Tacker recorded for a VNFC's CP: through `vnfExtCpId` (the external link
/// port whose `cpInstanceId` it is) or `vnfLinkPortId` (a VNF-internal or externally managed
/// link port).
pub fn recorded_port(inst: &VnfInstance, v: &VnfcResourceInfo, cpd_id: &str) -> Option<String> {
    let info = inst.instantiated_vnf_info.as_ref()?;
    let cp = v.vnfc_cp_info.iter().find(|c| c.cpd_id == cpd_id)?;
    let arr = |k: &str| info.rest.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(ext) = cp.vnf_ext_cp_id.as_deref() {
        let found = arr("extVirtualLinkInfo").iter().find_map(|vl| {
            vl.get("extLinkPorts")?
                .as_array()?
                .iter()
                .find(|p| p.get("cpInstanceId").and_then(Value::as_str) == Some(ext))
                .and_then(port_of_handle)
        });
        if found.is_some() {
            return found;
        }
    }
    let link = cp.vnf_link_port_id.clone()?;
    ["vnfVirtualLinkResourceInfo", "extManagedVirtualLinkInfo"].iter().find_map(|k| {
        arr(k).iter().find_map(|vl| {
            vl.get("vnfLinkPorts")?
                .as_array()?
                .iter()
                .find(|p| p.get("id").and_then(Value::as_str) == Some(link.as_str()))
                .and_then(port_of_handle)
        })
    })
}

/// The VIP's port Tacker recorded: an external CP of `cpd_id` no VNFC CP is associated with,
/// through its `extLinkPortId`.
pub fn recorded_vip_port(inst: &VnfInstance, cpd_id: &str) -> Option<String> {
    let info = inst.instantiated_vnf_info.as_ref()?;
    let ext =
        info.ext_cp_info.iter().find(|e| e.cpd_id.as_deref() == Some(cpd_id) && e.associated_vnfc_cp_id.is_none())?;
    let link = ext.ext_link_port_id.as_deref()?;
    info.rest.get("extVirtualLinkInfo")?.as_array()?.iter().find_map(|vl| {
        vl.get("extLinkPorts")?
            .as_array()?
            .iter()
            .find(|p| p.get("id").and_then(Value::as_str) == Some(link))
            .and_then(port_of_handle)
    })
}

/// What to ask for `vnfcs` (each with the CPs it needs and whether it is a master), checked:
/// every id that goes into a URL is an OpenStack id.
pub fn want(
    inst: &VnfInstance,
    vnfcs: &[(&VnfcResourceInfo, Vec<&str>, bool)],
    vip: Option<(&str, &str)>,
    file: &str,
) -> Result<Want> {
    let mut out = Want::default();
    for (v, cps, master) in vnfcs {
        let at = format!("instantiatedVnfInfo.vnfcResourceInfo[id={}]", crate::error::excerpt(&v.id));
        let device_id = v.resource_id().ok_or_else(|| {
            Error::input(
                file,
                format!("{at}.computeResource.resourceId"),
                "is needed to ask the VIM for the VNFC's ports",
            )
        })?;
        if !id_ok(device_id) {
            return Err(Error::input(
                file,
                format!("{at}.computeResource.resourceId"),
                "is not an OpenStack id (letters, digits, '-', '_')",
            ));
        }
        let mut wants = Vec::new();
        for cp in cps {
            let has = |c: &str| v.vnfc_cp_info.iter().any(|x| x.cpd_id == c);
            let cp = match floating_stem(cp) {
                Some(stem) if !has(cp) && has(stem) => stem,
                _ => *cp,
            };
            let port_id = recorded_port(inst, v, cp);
            if let Some(p) = &port_id {
                if !id_ok(p) {
                    return Err(Error::input(
                        file,
                        format!("{at}.{cp}"),
                        "its link port's resourceHandle.resourceId is not an OpenStack id",
                    ));
                }
            }
            if !wants.iter().any(|w: &CpWant| w.cpd_id == cp) {
                wants.push(CpWant { cpd_id: cp.to_string(), port_id });
            }
        }
        out.vnfcs.push(VnfcWant {
            vnfc_id: v.id.clone(),
            device_id: device_id.to_string(),
            cps: wants,
            master: *master,
        });
    }
    if let Some((cpd, master_cp)) = vip {
        let port_id = recorded_vip_port(inst, cpd);
        if port_id.as_deref().is_some_and(|p| !id_ok(p)) {
            return Err(Error::input(
                file,
                format!("instantiatedVnfInfo.extCpInfo[cpdId={}]", crate::error::excerpt(cpd)),
                "its port's resourceId is not an OpenStack id",
            ));
        }
        out.vip = Some(VipWant { cpd_id: cpd.to_string(), port_id, master_cp: master_cp.to_string() });
    }
    Ok(out)
}

/// Whether Heat named `port` after CP `cpd_id`: `<stack>-<cpdId>-<suffix>`, or the CP's name.
fn named_after(port: &Port, cpd_id: &str) -> bool {
    port.name == cpd_id || port.name.contains(&format!("-{cpd_id}-"))
}

fn cloud_error(what: &str, message: String) -> Error {
    Error::Unreadable { node: "neutron".into(), command: "GET /v2.0/ports".into(), what: what.into(), message }
}

/// The first fixed address of a port, IPv4 first (the cluster network's address family the
/// install script expects).
fn first_fixed(p: &Port) -> Option<IpAddr> {
    p.fixed_ips.iter().find(|a| a.is_ipv4()).or(p.fixed_ips.first()).copied()
}

/// The ports of `want` (the VMs' and the VIP's) as addresses. A recorded port must belong to
/// its VM; a CP the cloud has no port for is left out (the topology then says it is missing).
pub fn resolve(want: &Want, ports: &[Port]) -> Result<CloudAddresses> {
    let mut out = CloudAddresses::default();
    let mut master_ports: Vec<&Port> = Vec::new();
    for v in &want.vnfcs {
        let own: Vec<&Port> = ports.iter().filter(|p| p.device_id == v.device_id).collect();
        for cp in &v.cps {
            let port = match &cp.port_id {
                Some(id) => match ports.iter().find(|p| &p.id == id) {
                    Some(p) if p.device_id != v.device_id => {
                        return Err(cloud_error(
                            "ports",
                            format!("port {} of VNFC {}'s CP {} is attached to another VM", p.id, v.vnfc_id, cp.cpd_id),
                        ))
                    }
                    found => found,
                },
                None => {
                    let named: Vec<&&Port> = own.iter().filter(|p| named_after(p, &cp.cpd_id)).collect();
                    match (named.as_slice(), own.as_slice()) {
                        ([one], _) => Some(**one),
                        ([], [only]) => Some(*only),
                        _ => None,
                    }
                }
            };
            let Some(port) = port else { continue };
            if v.master && want.vip.as_ref().is_some_and(|w| w.master_cp == cp.cpd_id) {
                master_ports.push(port);
            }
            if let Some(fixed) = first_fixed(port) {
                out.cps.insert(
                    (v.vnfc_id.clone(), cp.cpd_id.clone()),
                    CpAddress { port_id: port.id.clone(), fixed, floating: None },
                );
            }
        }
    }
    if let Some(w) = &want.vip {
        out.vip = match &w.port_id {
            Some(id) => ports.iter().find(|p| &p.id == id).and_then(first_fixed),
            None => {
                // The address every master's port allows: keepalived moves it among them.
                let first = master_ports.first().map(|p| p.allowed_ips.clone()).unwrap_or_default();
                first.into_iter().find(|a| master_ports.iter().all(|p| p.allowed_ips.contains(a)))
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What stock Tacker v2 records for a dynamic address: the VNFC, its CP linked to an
    /// external link port, `isDynamic` and no address.
    fn instance() -> VnfInstance {
        let dynamic = json!([{"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "isDynamic": true}]}}]);
        serde_json::from_value(json!({"id": "i", "instantiatedVnfInfo": {
            "vnfcResourceInfo": [
                {"id": "m1", "vduId": "masterNode", "computeResource": {"resourceId": "vm-m1", "vimConnectionId": "vim1"},
                 "vnfcCpInfo": [{"id": "m1-cp", "cpdId": "masterNode_CP1", "vnfExtCpId": "ecp-m1"}]},
                {"id": "m2", "vduId": "masterNode", "computeResource": {"resourceId": "vm-m2"},
                 "vnfcCpInfo": [{"id": "m2-cp", "cpdId": "masterNode_CP1", "vnfLinkPortId": "lp-m2"}]},
                {"id": "w1", "vduId": "workerNode", "computeResource": {"resourceId": "vm-w1"},
                 "vnfcCpInfo": [{"id": "w1-cp", "cpdId": "workerNode_CP1"}]}],
            "extCpInfo": [{"id": "ecp-m1", "cpdId": "masterNode_CP1", "associatedVnfcCpId": "m1-cp", "cpProtocolInfo": dynamic},
                          {"id": "ecp-vip", "cpdId": "vip_CP", "extLinkPortId": "elp-vip", "cpProtocolInfo": dynamic}],
            "extVirtualLinkInfo": [{"id": "net0", "resourceHandle": {"resourceId": "net-0"}, "extLinkPorts": [
                {"id": "elp-m1", "cpInstanceId": "ecp-m1", "resourceHandle": {"resourceId": "port-m1"}},
                {"id": "elp-vip", "cpInstanceId": "ecp-vip", "resourceHandle": {"resourceId": "port-vip"}}]}],
            "vnfVirtualLinkResourceInfo": [{"id": "vl", "vnfLinkPorts": [{"id": "lp-m2", "resourceHandle": {"resourceId": "port-m2"}}]}]}}))
        .unwrap()
    }

    fn port(id: &str, dev: &str, name: &str, ip: &str, allowed: &[&str]) -> Port {
        Port {
            id: id.into(),
            device_id: dev.into(),
            name: name.into(),
            network_id: "net-0".into(),
            fixed_ips: vec![ip.parse().unwrap()],
            allowed_ips: allowed.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn vnfcs(i: &VnfInstance) -> Vec<(&VnfcResourceInfo, Vec<&str>, bool)> {
        let v = &i.instantiated_vnf_info.as_ref().unwrap().vnfc_resource_info;
        vec![
            (&v[0], vec!["masterNode_CP1"], true),
            (&v[1], vec!["masterNode_CP1"], true),
            (&v[2], vec!["workerNode_CP1"], false),
        ]
    }

    #[test]
    fn recorded_ports_then_heat_names_then_the_only_port() {
        let i = instance();
        let w = want(&i, &vnfcs(&i), Some(("vip_CP", "masterNode_CP1")), "inst").unwrap();
        assert_eq!(w.vnfcs[0].cps[0].port_id.as_deref(), Some("port-m1"), "through vnfExtCpId");
        assert_eq!(w.vnfcs[1].cps[0].port_id.as_deref(), Some("port-m2"), "through vnfLinkPortId");
        assert_eq!(w.vnfcs[2].cps[0].port_id, None);
        assert_eq!(w.vip.as_ref().unwrap().port_id.as_deref(), Some("port-vip"));
        assert_eq!(w.device_ids(), ["vm-m1", "vm-m2", "vm-w1"]);
        let ports = [
            port("port-m1", "vm-m1", "", "10.0.0.11", &["10.0.0.100"]),
            port("port-m2", "vm-m2", "", "10.0.0.12", &["10.0.0.100"]),
            port("port-w1b", "vm-w1", "stk-other_CP-x", "10.9.0.21", &[]),
            port("port-w1", "vm-w1", "stk-workerNode_CP1-abc", "10.0.0.21", &[]),
            port("port-vip", "", "", "10.0.0.100", &[]),
        ];
        let c = resolve(&w, &ports).unwrap();
        assert_eq!(c.fixed("m1", "masterNode_CP1").as_deref(), Some("10.0.0.11"));
        assert_eq!(c.fixed("w1", "workerNode_CP1").as_deref(), Some("10.0.0.21"), "the port Heat named after the CP");
        assert_eq!(c.vip, Some("10.0.0.100".parse().unwrap()));
        let fips = [
            FloatingIp { port_id: "port-m1".into(), address: "192.0.2.11".parse().unwrap() },
            FloatingIp { port_id: "port-vip".into(), address: "192.0.2.100".parse().unwrap() },
        ];
        assert_eq!(c.port_ids(Some("port-vip")), ["port-m1", "port-m2", "port-vip", "port-w1"]);
        let c = c.with_floating_ips(&fips, Some("port-vip"));
        assert_eq!(c.ssh("m1", "masterNode_CP1").as_deref(), Some("192.0.2.11"), "a floating IP is where to log in");
        assert_eq!(c.ssh("m2", "masterNode_CP1").as_deref(), Some("10.0.0.12"));
        assert_eq!(c.vip_floating, Some("192.0.2.100".parse().unwrap()));
        assert!(c.describe().contains("m1 masterNode_CP1 10.0.0.11 (floating 192.0.2.11)"), "{}", c.describe());
    }

    #[test]
    fn the_vip_from_the_masters_allowed_address_pairs() {
        let i = instance();
        let mut w = want(&i, &vnfcs(&i), Some(("vip_CP", "masterNode_CP1")), "inst").unwrap();
        w.vip.as_mut().unwrap().port_id = None;
        let ports = [
            port("port-m1", "vm-m1", "", "10.0.0.11", &["10.0.0.99", "10.0.0.100"]),
            port("port-m2", "vm-m2", "", "10.0.0.12", &["10.0.0.100"]),
        ];
        assert_eq!(
            resolve(&w, &ports).unwrap().vip,
            Some("10.0.0.100".parse().unwrap()),
            "the address all masters allow"
        );
    }

    #[test]
    fn a_recorded_port_on_another_vm_and_bad_ids_are_refused() {
        let i = instance();
        let w = want(&i, &vnfcs(&i), None, "inst").unwrap();
        let ports = [port("port-m1", "vm-w1", "", "10.0.0.11", &[])];
        let e = resolve(&w, &ports).unwrap_err().to_string();
        assert!(e.contains("port port-m1 of VNFC m1's CP masterNode_CP1 is attached to another VM"), "{e}");
        let mut bad = serde_json::to_value(&i).unwrap();
        bad["instantiatedVnfInfo"]["vnfcResourceInfo"][0]["computeResource"]["resourceId"] = json!("vm&device_id=x");
        let bad: VnfInstance = serde_json::from_value(bad).unwrap();
        let e = want(&bad, &vnfcs(&bad), None, "inst").unwrap_err().to_string();
        assert!(e.contains("vnfcResourceInfo[id=m1].computeResource.resourceId: is not an OpenStack id"), "{e}");
        // Two ports on the VM, none named after the CP: no guess.
        let ports = [port("a", "vm-w1", "x", "10.0.0.1", &[]), port("b", "vm-w1", "y", "10.0.0.2", &[])];
        assert_eq!(resolve(&w, &ports).unwrap().fixed("w1", "workerNode_CP1"), None);
    }

    /// Tacker's sample params log in through `masterNode_CP1_floating_ip`, a Heat resource no
    /// VNFC CP is named after: the floating IP of `masterNode_CP1`'s port.
    #[test]
    fn a_floating_ip_cp_name_is_its_cps_floating_ip() {
        let i = instance();
        let v = &i.instantiated_vnf_info.as_ref().unwrap().vnfc_resource_info;
        let w = want(&i, &[(&v[0], vec!["masterNode_CP1_floating_ip", "masterNode_CP1"], true)], None, "inst").unwrap();
        assert_eq!(w.vnfcs[0].cps.len(), 1, "{w:?}");
        assert_eq!(w.vnfcs[0].cps[0].cpd_id, "masterNode_CP1");
        let c = resolve(&w, &[port("port-m1", "vm-m1", "", "10.0.0.11", &[])]).unwrap();
        let c = c.with_floating_ips(
            &[FloatingIp { port_id: "port-m1".into(), address: "192.0.2.11".parse().unwrap() }],
            None,
        );
        assert_eq!(c.ssh("m1", "masterNode_CP1_floating_ip").as_deref(), Some("192.0.2.11"));
        assert_eq!(c.fixed("m1", "masterNode_CP1").as_deref(), Some("10.0.0.11"));
        assert_eq!(floating_stem("_floating_ip"), None);
    }
}
