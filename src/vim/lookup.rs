//! The round trips, in order, through the [`Http`] seam: one token (Keystone), one ports call
//! for every VNFC (repeated `device_id` filters), the VIP's port when no VM owns it, one floating
//! IPs call. Pure apart from the client it is handed.

use crate::error::{Error, Result};
use crate::request::{VimConnections, VnfInstance};
use crate::secret::Secret;
use crate::vim::access::{self, Access};
use crate::vim::addresses::{resolve, CloudAddresses, Want};
use crate::vim::http::{Http, Method, Request, Response, BODY_MAX_BYTES};
use crate::vim::{keystone, neutron, Vim, ALLOW_FLAG};

fn send(http: &dyn Http, req: Request) -> Result<Response> {
    let r = http.send(&req)?;
    if r.body.len() as u64 > BODY_MAX_BYTES {
        return Err(Error::Unreadable {
            node: req.service.into(),
            command: format!("{:?} {}", req.method, req.url).to_uppercase(),
            what: "the VIM's answer".into(),
            message: format!("larger than {BODY_MAX_BYTES} bytes; refused"),
        });
    }
    Ok(r)
}

fn get(http: &dyn Http, url: String, token: &Secret) -> Result<Response> {
    send(http, Request { method: Method::Get, url, token: Some(token.clone()), body: None, service: "neutron" })
}

/// The VIM entry the VNFCs name (`computeResource.vimConnectionId`), else the only OpenStack
/// one; None when the instance has no OpenStack VIM (then there is no cloud to ask).
pub fn access(vim: &Vim, conns: &VimConnections, inst: &VnfInstance, file: &str) -> Result<Option<Access>> {
    let named = inst.instantiated_vnf_info.as_ref().and_then(|i| {
        i.vnfc_resource_info.iter().find_map(|v| v.compute_resource.as_ref()?.get("vimConnectionId")?.as_str())
    });
    let Some((at, c)) = access::select(conns, named, file)? else { return Ok(None) };
    // Tacker v1 records its OpenStack entry empty (the VIM's credentials stay in its
    // database): no endpoint named, no cloud to ask.
    if c.interface_info.as_ref().and_then(|i| i.get("endpoint")).is_none() {
        return Ok(None);
    }
    Access::parse(&at, c, &vim.allowed_auth_urls, file).map(Some)
}

/// Ask the cloud for what `want` names.
pub fn addresses(vim: &Vim, a: &Access, want: &Want, file: &str) -> Result<CloudAddresses> {
    let http = vim.http.as_deref().ok_or_else(|| {
        Error::input(
            file,
            format!("{}.interfaceInfo.endpoint", a.at),
            format!("no HTTP client for the VIM ({ALLOW_FLAG})"),
        )
    })?;
    let url = keystone::tokens_url(&a.auth_url);
    let r = send(
        http,
        Request {
            method: Method::Post,
            url: url.clone(),
            token: None,
            body: Some(keystone::auth_body(a)),
            service: "keystone",
        },
    )?;
    let token = keystone::parse_token(&url, r.status, r.subject_token.as_ref(), &r.body, a.region.as_deref())?;
    let net = &token.network_url;
    let mut ports = Vec::new();
    if !want.vnfcs.is_empty() {
        let url = neutron::ports_url(net, &want.device_ids());
        let r = get(http, url.clone(), &token.value)?;
        ports = neutron::parse_ports(&url, r.status, &r.body)?;
    }
    let vip_port = want.vip.as_ref().and_then(|v| v.port_id.as_deref());
    if let Some(id) = vip_port.filter(|id| !ports.iter().any(|p| p.id == *id)) {
        let url = neutron::ports_by_id_url(net, &[id]);
        let r = get(http, url.clone(), &token.value)?;
        ports.extend(neutron::parse_ports(&url, r.status, &r.body)?);
    }
    let found = resolve(want, &ports)?;
    let ids = found.port_ids(vip_port);
    if ids.is_empty() {
        return Ok(found);
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let url = neutron::floating_ips_url(net, &refs);
    let r = get(http, url.clone(), &token.value)?;
    let fips = neutron::parse_floating_ips(&url, r.status, &r.body)?;
    Ok(found.with_floating_ips(&fips, vip_port))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::vim::addresses::{CpWant, VipWant, VnfcWant};
    use crate::vim::fake::Fake;

    const TOKEN: &str = "gAAAAABtoken-0123456789abcdef";

    fn access() -> Access {
        Access {
            at: "vimConnectionInfo.vim1".into(),
            auth_url: "http://ks/identity/v3".into(),
            username: "u".into(),
            password: Secret::new("s3cret-pw"),
            project: "p".into(),
            project_domain: "Default".into(),
            user_domain: "Default".into(),
            region: Some("RegionOne".into()),
        }
    }

    fn want() -> Want {
        let v = |id: &str, dev: &str, cp: &str, master| VnfcWant {
            vnfc_id: id.into(),
            device_id: dev.into(),
            cps: vec![CpWant { cpd_id: cp.into(), port_id: None }],
            master,
        };
        Want {
            vnfcs: vec![v("m1", "vm-m1", "m_CP", true), v("w1", "vm-w1", "w_CP", false)],
            vip: Some(VipWant { cpd_id: "vip_CP".into(), port_id: Some("port-vip".into()), master_cp: "m_CP".into() }),
        }
    }

    fn cloud(ports_body: Vec<u8>) -> Fake {
        let catalog = json!({"token": {"catalog": [{"type": "network", "endpoints": [
            {"interface": "public", "region_id": "RegionOne", "url": "http://neutron:9696"}]}]}});
        let port = |id: &str, dev: &str, ip: &str| json!({"id": id, "device_id": dev, "name": "", "network_id": "n", "fixed_ips": [{"ip_address": ip}]});
        Fake::default()
            .answer("http://ks/identity/v3/auth/tokens", 201, Some(TOKEN), catalog.to_string())
            .answer("http://neutron:9696/v2.0/ports?device_id=", 200, None, ports_body)
            .answer(
                "http://neutron:9696/v2.0/ports?id=port-vip",
                200,
                None,
                json!({"ports": [port("port-vip", "", "10.0.0.100")]}).to_string(),
            )
            .answer(
                "http://neutron:9696/v2.0/floatingips",
                200,
                None,
                json!({"floatingips": [{"port_id": "port-vip", "floating_ip_address": "192.0.2.100"}]}).to_string(),
            )
    }

    fn ports_ok() -> Vec<u8> {
        json!({"ports": [
            {"id": "port-m1", "device_id": "vm-m1", "name": "", "network_id": "n", "fixed_ips": [{"ip_address": "10.0.0.11"}]},
            {"id": "port-w1", "device_id": "vm-w1", "name": "", "network_id": "n", "fixed_ips": [{"ip_address": "10.0.0.21"}]}]})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn one_token_one_ports_call_the_vip_port_and_one_floating_ips_call() {
        let fake = Arc::new(cloud(ports_ok()));
        let vim = Vim { allowed_auth_urls: vec![], http: Some(fake.clone()) };
        let c = addresses(&vim, &access(), &want(), "inst").unwrap();
        assert_eq!(c.fixed("m1", "m_CP").as_deref(), Some("10.0.0.11"));
        assert_eq!(c.fixed("w1", "w_CP").as_deref(), Some("10.0.0.21"));
        assert_eq!(
            (c.vip.unwrap().to_string(), c.vip_floating.unwrap().to_string()),
            ("10.0.0.100".into(), "192.0.2.100".into())
        );
        let sent = fake.requests();
        let urls: Vec<&str> = sent.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://ks/identity/v3/auth/tokens",
                "http://neutron:9696/v2.0/ports?device_id=vm-m1&device_id=vm-w1",
                "http://neutron:9696/v2.0/ports?id=port-vip",
                "http://neutron:9696/v2.0/floatingips?port_id=port-m1&port_id=port-vip&port_id=port-w1",
            ]
        );
        assert!(sent[0].token.is_none() && sent[1].token.as_ref().unwrap().expose() == TOKEN);
        let shown = format!("{sent:?}");
        assert!(!shown.contains(TOKEN) && !shown.contains("s3cret-pw"), "{shown}");
    }

    #[test]
    fn a_ten_megabyte_answer_is_refused() {
        let fake = Arc::new(cloud(vec![b' '; 10 * 1024 * 1024]));
        let vim = Vim { allowed_auth_urls: vec![], http: Some(fake) };
        let e = addresses(&vim, &access(), &want(), "inst").unwrap_err().to_string();
        assert!(e.contains("larger than 4194304 bytes"), "{e}");
    }

    #[test]
    fn an_unreachable_keystone_is_a_connect_error_without_secrets() {
        let vim = Vim { allowed_auth_urls: vec![], http: Some(Arc::new(Fake::default())) };
        let e = addresses(&vim, &access(), &want(), "inst").unwrap_err();
        assert_eq!(e.kind(), "connect");
        assert!(!e.to_string().contains("s3cret-pw"));
    }

    #[test]
    fn an_entry_that_names_no_endpoint_is_no_cloud_to_ask() {
        let inst: VnfInstance = serde_json::from_value(json!({"id": "i", "vimConnectionInfo": [
            {"id": "v", "vimId": "v", "vimType": "openstack", "interfaceInfo": {}, "accessInfo": {}}]}))
        .unwrap();
        assert!(super::access(&Vim::default(), &inst.vim_connection_info, &inst, "f").unwrap().is_none());
        let inst: VnfInstance = serde_json::from_value(json!({"id": "i", "vimConnectionInfo": [
            {"id": "v", "vimId": "v", "vimType": "openstack", "interfaceInfo": {"endpoint": "http://ks/v3"}}]}))
        .unwrap();
        let e = super::access(&Vim::default(), &inst.vim_connection_info, &inst, "f").unwrap_err().to_string();
        assert!(e.contains("vimConnectionInfo[0].interfaceInfo.endpoint"), "{e}");
    }
}
