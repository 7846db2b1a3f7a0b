//! Neutron's ports and floating IPs, as data: the URLs of the two calls and their answers read
//! as strictly as a node's output. Ids are bounded and of UUID characters, addresses parse as
//! IP addresses, lists are bounded: nothing the cloud returns reaches a node's shell or the
//! state unchecked.

use std::net::IpAddr;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::vim::keystone::Classify;

/// The most ports or floating IPs one answer may hold.
pub const MAX_ITEMS: usize = 10_000;
/// The most addresses one port may list (fixed IPs, allowed address pairs).
pub const MAX_ADDRESSES: usize = 64;

/// An OpenStack id as we accept it (from the instance, to put in a URL, or from the cloud):
/// 1 to 64 letters, digits, `-` or `_`.
pub fn id_ok(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `<network>/v2.0/<path>`: the catalogue's URL may or may not end in `/v2.0`.
fn api(network_url: &str, path: &str) -> String {
    let base = crate::vim::access::normalize(network_url);
    if base.ends_with("/v2.0") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v2.0/{path}")
    }
}

/// The ports of the VMs `device_ids` (one call: Neutron ORs repeated filters of one field).
/// The ids are checked ([`id_ok`]) by the caller, so none needs escaping.
pub fn ports_url(network_url: &str, device_ids: &[&str]) -> String {
    let q: Vec<String> = device_ids.iter().map(|d| format!("device_id={d}")).collect();
    format!("{}?{}", api(network_url, "ports"), q.join("&"))
}

/// Ports by id (the VIP's, which no VM owns).
pub fn ports_by_id_url(network_url: &str, ids: &[&str]) -> String {
    let q: Vec<String> = ids.iter().map(|d| format!("id={d}")).collect();
    format!("{}?{}", api(network_url, "ports"), q.join("&"))
}

/// The floating IPs of `port_ids`.
pub fn floating_ips_url(network_url: &str, port_ids: &[&str]) -> String {
    let q: Vec<String> = port_ids.iter().map(|d| format!("port_id={d}")).collect();
    format!("{}?{}", api(network_url, "floatingips"), q.join("&"))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub id: String,
    /// The VM it is attached to (empty for a VIP port).
    pub device_id: String,
    pub name: String,
    pub network_id: String,
    pub fixed_ips: Vec<IpAddr>,
    /// `allowed_address_pairs[].ip_address` that are single addresses (a VIP), not prefixes.
    pub allowed_ips: Vec<IpAddr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloatingIp {
    pub port_id: String,
    pub address: IpAddr,
}

fn bad(url: &str, what: &str, message: impl Into<String>) -> Error {
    Error::Unreadable {
        node: "neutron".into(),
        command: format!("GET {}", crate::url_mask::mask_userinfo(url)),
        what: what.into(),
        message: message.into(),
    }
}

fn list<'a>(url: &str, status: u16, body: &'a [u8], key: &str, doc: &'a mut Value) -> Result<&'a Vec<Value>> {
    if status != 200 {
        return Err(crate::vim::keystone::status_error("neutron", "GET", url, status, body));
    }
    *doc = serde_json::from_slice(body).map_err(|e| bad(url, key, format!("not JSON: {}", e.classify_name())))?;
    let items = doc.get(key).and_then(Value::as_array).ok_or_else(|| bad(url, key, format!("no '{key}' list")))?;
    if items.len() > MAX_ITEMS {
        return Err(bad(url, key, format!("more than {MAX_ITEMS} items")));
    }
    Ok(items)
}

fn field<'a>(url: &str, what: &str, i: usize, item: &'a Value, k: &str) -> Result<&'a str> {
    item.get(k).and_then(Value::as_str).ok_or_else(|| bad(url, what, format!("item {i}: '{k}' is not a string")))
}

fn ident(url: &str, what: &str, i: usize, item: &Value, k: &str, may_be_empty: bool) -> Result<String> {
    let s = match item.get(k) {
        Some(Value::Null) | None if may_be_empty => "",
        _ => field(url, what, i, item, k)?,
    };
    if (s.is_empty() && may_be_empty) || id_ok(s) {
        Ok(s.to_string())
    } else {
        Err(bad(url, what, format!("item {i}: '{k}' '{}' is not an id", crate::error::excerpt(s))))
    }
}

fn address(url: &str, what: &str, i: usize, v: Option<&Value>, k: &str) -> Result<IpAddr> {
    let s = v.and_then(Value::as_str).ok_or_else(|| bad(url, what, format!("item {i}: '{k}' is not a string")))?;
    s.parse()
        .map_err(|_| bad(url, what, format!("item {i}: '{k}' '{}' is not an IP address", crate::error::excerpt(s))))
}

/// `GET /v2.0/ports`'s answer.
pub fn parse_ports(url: &str, status: u16, body: &[u8]) -> Result<Vec<Port>> {
    let mut doc = Value::Null;
    let items = list(url, status, body, "ports", &mut doc)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, p) in items.iter().enumerate() {
        let ips = p
            .get("fixed_ips")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(url, "ports", format!("item {i}: 'fixed_ips' is not a list")))?;
        let pairs = match p.get("allowed_address_pairs") {
            None | Some(Value::Null) => &[][..],
            Some(v) => v
                .as_array()
                .ok_or_else(|| bad(url, "ports", format!("item {i}: 'allowed_address_pairs' is not a list")))?,
        };
        if ips.len() > MAX_ADDRESSES || pairs.len() > MAX_ADDRESSES {
            return Err(bad(url, "ports", format!("item {i}: more than {MAX_ADDRESSES} addresses")));
        }
        let fixed_ips = ips
            .iter()
            .map(|x| address(url, "ports", i, x.get("ip_address"), "fixed_ips[].ip_address"))
            .collect::<Result<_>>()?;
        let mut allowed_ips = Vec::new();
        for x in pairs {
            let s = x.get("ip_address").and_then(Value::as_str).ok_or_else(|| {
                bad(url, "ports", format!("item {i}: 'allowed_address_pairs[].ip_address' is not a string"))
            })?;
            // A pair may be a prefix (10.0.0.0/24); only single addresses can be a VIP.
            let single = s.strip_suffix("/32").or_else(|| s.strip_suffix("/128")).unwrap_or(s);
            if !s.contains('/') || single != s {
                allowed_ips.push(address(
                    url,
                    "ports",
                    i,
                    Some(&Value::String(single.to_string())),
                    "allowed_address_pairs[].ip_address",
                )?);
            } else if s.parse::<ipnet::IpNet>().is_err() {
                return Err(bad(
                    url,
                    "ports",
                    format!(
                        "item {i}: 'allowed_address_pairs[].ip_address' '{}' is not an address",
                        crate::error::excerpt(s)
                    ),
                ));
            }
        }
        let name = field(url, "ports", i, p, "name")?;
        if name.len() > 255 || name.chars().any(char::is_control) {
            return Err(bad(url, "ports", format!("item {i}: 'name' is not printable or longer than 255")));
        }
        out.push(Port {
            id: ident(url, "ports", i, p, "id", false)?,
            device_id: ident(url, "ports", i, p, "device_id", true)?,
            name: name.to_string(),
            network_id: ident(url, "ports", i, p, "network_id", false)?,
            fixed_ips,
            allowed_ips,
        });
    }
    Ok(out)
}

/// `GET /v2.0/floatingips`'s answer: the associated ones (an unassociated one has no port).
pub fn parse_floating_ips(url: &str, status: u16, body: &[u8]) -> Result<Vec<FloatingIp>> {
    let mut doc = Value::Null;
    let items = list(url, status, body, "floatingips", &mut doc)?;
    let mut out = Vec::new();
    for (i, f) in items.iter().enumerate() {
        let port_id = ident(url, "floatingips", i, f, "port_id", true)?;
        if port_id.is_empty() {
            continue;
        }
        let address = address(url, "floatingips", i, f.get("floating_ip_address"), "floating_ip_address")?;
        out.push(FloatingIp { port_id, address });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn port(id: &str, dev: &str, ip: Value) -> Value {
        json!({"id": id, "device_id": dev, "name": "", "network_id": "net-1", "fixed_ips": [{"subnet_id": "s", "ip_address": ip}],
               "allowed_address_pairs": [{"ip_address": "10.0.0.100", "mac_address": "fa:16:3e:00:00:01"}, {"ip_address": "10.1.0.0/24"}]})
    }

    fn ports(items: Vec<Value>) -> Vec<u8> {
        json!({"ports": items}).to_string().into_bytes()
    }

    #[test]
    fn urls_repeat_the_filter() {
        assert_eq!(ports_url("http://n:9696/", &["a", "b"]), "http://n:9696/v2.0/ports?device_id=a&device_id=b");
        assert_eq!(
            floating_ips_url("http://n/networking/v2.0", &["p"]),
            "http://n/networking/v2.0/floatingips?port_id=p"
        );
        assert_eq!(ports_by_id_url("http://n", &["v"]), "http://n/v2.0/ports?id=v");
        assert!(id_ok("3f9c2b1e-0000-4000-8000-000000000001"));
        assert!(!id_ok("a&device_id=b") && !id_ok("") && !id_ok(&"a".repeat(65)));
    }

    #[test]
    fn ports_parse_to_addresses_and_vip_pairs() {
        let p = parse_ports(
            "u",
            200,
            &ports(vec![port("p1", "vm-1", json!("10.0.0.5")), port("vip", "", json!("fd00::5"))]),
        )
        .unwrap();
        assert_eq!(p[0].fixed_ips, vec!["10.0.0.5".parse::<IpAddr>().unwrap()]);
        assert_eq!(p[0].allowed_ips, vec!["10.0.0.100".parse::<IpAddr>().unwrap()], "a prefix is no VIP");
        assert_eq!(p[1].device_id, "");
        let f = parse_floating_ips("u", 200, br#"{"floatingips": [{"port_id": "p1", "floating_ip_address": "192.0.2.5"}, {"port_id": null, "floating_ip_address": "192.0.2.9"}]}"#).unwrap();
        assert_eq!(f, vec![FloatingIp { port_id: "p1".into(), address: "192.0.2.5".parse().unwrap() }]);
    }

    #[test]
    fn hostile_answers_are_refused() {
        for (body, needle) in [
            (ports(vec![port("p1", "vm-1", json!("10.0.0.5; reboot"))]), "'10.0.0.5; reboot' is not an IP address"),
            (ports(vec![port("p1", "vm-1", json!(["10.0.0.5"]))]), "fixed_ips[].ip_address' is not a string"),
            (ports(vec![port("p1;id", "vm-1", json!("10.0.0.5"))]), "'id' 'p1;id' is not an id"),
            (ports(vec![port("p1", "vm\n1", json!("10.0.0.5"))]), "'device_id' 'vm\\n1' is not an id"),
            (json!({"ports": {"id": "p1"}}).to_string().into_bytes(), "no 'ports' list"),
            (json!({"ports": vec![json!(1); MAX_ITEMS + 1]}).to_string().into_bytes(), "more than 10000 items"),
            (b"<html>".to_vec(), "not JSON: a syntax error"),
        ] {
            let e = parse_ports("http://n/v2.0/ports", 200, &body).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let mut many = port("p1", "vm-1", json!("10.0.0.5"));
        many["fixed_ips"] = json!(vec![json!({"ip_address": "10.0.0.5"}); MAX_ADDRESSES + 1]);
        assert!(parse_ports("u", 200, &ports(vec![many])).unwrap_err().to_string().contains("more than 64 addresses"));
        let e = parse_floating_ips("u", 200, br#"{"floatingips": [{"port_id": "p1", "floating_ip_address": "x"}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("'floating_ip_address' 'x' is not an IP address"), "{e}");
        let e = parse_ports("u", 403, br#"{"NeutronError": {"type": "Forbidden", "message": "token gAAAAsecret"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("HTTP 403 (Forbidden)") && !e.contains("gAAAAsecret"), "{e}");
    }

    /// A real Neutron's answers (tests/data/openstack/): four VM ports, the masters' VIP pair,
    /// one floating IP.
    #[test]
    fn recorded_neutron_answers() {
        let p = parse_ports("u", 200, include_bytes!("../../tests/data/openstack/neutron-ports.json")).unwrap();
        assert_eq!(p.len(), 4);
        let vip: IpAddr = "10.10.0.100".parse().unwrap();
        assert_eq!(p.iter().filter(|p| p.allowed_ips == [vip]).count(), 3);
        assert!(p.iter().all(|p| p.fixed_ips.len() == 1 && !p.device_id.is_empty()));
        let f = parse_floating_ips("u", 200, include_bytes!("../../tests/data/openstack/neutron-floatingips.json"))
            .unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].address, "203.0.113.11".parse::<IpAddr>().unwrap());
        assert!(p.iter().any(|p| p.id == f[0].port_id));
    }
}
