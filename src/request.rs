//! What a VNFM hands over (ETSI NFV SOL002/SOL003 bodies), as serde models. Only the fields the
//! cluster hooks use are typed; everything else is kept (`rest`) so nothing a VNFM sends is lost
//! or refused. Type errors name the JSON path and the file.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Read and parse a JSON document; errors carry `file: json.path: message`. Files larger than
/// [`REQUEST_MAX_BYTES`](crate::input_limit::REQUEST_MAX_BYTES) are refused unread.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = crate::input_limit::read_capped(path, crate::input_limit::REQUEST_MAX_BYTES, "request")?;
    parse(&text, &path.display().to_string())
}

/// Where a document comes from: a file the operator named, or a part of a larger document
/// already in memory (the `hook` command's input), named for error messages as
/// `<input>: <key>`.
#[derive(Clone, Debug)]
pub enum Doc {
    File(PathBuf),
    Inline { name: String, value: Value },
}

impl Doc {
    /// The name errors give as the document's location.
    pub fn name(&self) -> String {
        match self {
            Doc::File(p) => p.display().to_string(),
            Doc::Inline { name, .. } => name.clone(),
        }
    }

    pub fn load<T: DeserializeOwned>(&self) -> Result<T> {
        match self {
            Doc::File(p) => load(p),
            Doc::Inline { name, value } => from_value(value, name),
        }
    }
}

impl From<PathBuf> for Doc {
    fn from(p: PathBuf) -> Self {
        Doc::File(p)
    }
}

/// Deserialize a value already parsed (and size-checked) elsewhere; errors name the path.
pub fn from_value<T: DeserializeOwned>(v: &Value, name: &str) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "(document)".to_string() } else { path };
        Error::input(name, field, e.into_inner().to_string())
    })
}

/// serde_json's own nesting limit: deeper documents are refused by the parser, not by a stack
/// overflow.
const JSON_DEPTH: usize = 128;

pub fn parse<T: DeserializeOwned>(text: &str, file: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let v = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "(document)".to_string() } else { path };
        let inner = e.into_inner();
        let mut msg = inner.to_string();
        if msg.starts_with("recursion limit exceeded") {
            msg = format!("nested deeper than {JSON_DEPTH} levels ({msg}); refused");
        }
        Error::input(file, field, msg)
    })?;
    // Text after the document (a second body, garbage) is an error, not silently ignored.
    de.end().map_err(|e| Error::input(file, "(document)", format!("text after the JSON document: {e}")))?;
    Ok(v)
}

/// SOL003 `vimConnectionInfo`: v1 sends a list, v2 a map keyed by a VNFM-chosen name. The form
/// is kept so the updated value goes back the way it came.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum VimConnections {
    List(Vec<VimConnection>),
    Map(indexmap::IndexMap<String, VimConnection>),
}

impl Default for VimConnections {
    fn default() -> Self {
        VimConnections::List(Vec::new())
    }
}

impl VimConnections {
    pub fn iter(&self) -> Box<dyn Iterator<Item = &VimConnection> + '_> {
        match self {
            VimConnections::List(v) => Box::new(v.iter()),
            VimConnections::Map(m) => Box::new(m.values()),
        }
    }

    /// Remove entries whose `vimType` is kubernetes and whose `accessInfo.authUrl` or VIM name
    /// matches; returns how many went.
    pub fn remove_kubernetes(&mut self, auth_url: Option<&str>, vim_name: &str) -> usize {
        let keep =
            |c: &VimConnection| !(c.is_kubernetes() && (c.auth_url() == auth_url || c.vim_name() == Some(vim_name)));
        match self {
            VimConnections::List(v) => {
                let n = v.len();
                v.retain(keep);
                n - v.len()
            }
            VimConnections::Map(m) => {
                let n = m.len();
                m.retain(|_, c| keep(c));
                n - m.len()
            }
        }
    }

    /// Append `c` (key `key` in the map form).
    /// The map key of the cluster's entry: `kubernetes_<vim_name>`, except that a name that
    /// already starts with `kubernetes_` (the default `kubernetes_vim_<id>` among them) is the
    /// key as it is, so the prefix is never doubled.
    pub fn key_for(vim_name: &str) -> String {
        if vim_name.starts_with("kubernetes_") {
            vim_name.to_string()
        } else {
            format!("kubernetes_{vim_name}")
        }
    }

    pub fn push(&mut self, key: &str, c: VimConnection) {
        match self {
            VimConnections::List(v) => v.push(c),
            VimConnections::Map(m) => {
                m.insert(key.to_string(), c);
            }
        }
    }
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VimConnection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_id: Option<String>,
    pub vim_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_info: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_info: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

crate::secret::impl_debug_masked!(VimConnection);

impl VimConnection {
    pub fn is_kubernetes(&self) -> bool {
        // Tacker v2 names a cluster with Helm `ETSINFV.HELM.V_3`: still a Kubernetes cluster.
        let t = self.vim_type.to_ascii_lowercase();
        t == "kubernetes" || t.starts_with("etsinfv.kubernetes") || t.starts_with("etsinfv.helm")
    }

    /// The API server: v1's `accessInfo.authUrl`, or SOL003's `interfaceInfo.endpoint` (v2).
    pub fn auth_url(&self) -> Option<&str> {
        let a = self.access_info.as_ref();
        a.and_then(|a| a.get("authUrl").or_else(|| a.get("auth_url")))
            .or_else(|| self.interface_info.as_ref()?.get("endpoint"))
            .and_then(Value::as_str)
    }

    pub fn vim_name(&self) -> Option<&str> {
        self.extra.as_ref()?.get("vim_name").and_then(Value::as_str)
    }
}

/// SOL003 InstantiateVnfRequest.
#[derive(Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantiateRequest {
    pub flavour_id: String,
    #[serde(default)]
    pub instantiation_level_id: Option<String>,
    #[serde(default)]
    pub ext_virtual_links: Vec<Value>,
    #[serde(default)]
    pub vim_connection_info: VimConnections,
    #[serde(default)]
    pub additional_params: Map<String, Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

crate::secret::impl_debug_masked!(InstantiateRequest);

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub enum ScaleType {
    #[serde(rename = "SCALE_OUT")]
    Out,
    #[serde(rename = "SCALE_IN")]
    In,
}

/// SOL003 ScaleVnfRequest (`numberOfSteps` as a number or, as Tacker's guide sends it, a string).
#[derive(Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleRequest {
    #[serde(rename = "type")]
    pub kind: ScaleType,
    pub aspect_id: String,
    #[serde(default = "one", deserialize_with = "int_or_string")]
    pub number_of_steps: u32,
    #[serde(default)]
    pub additional_params: Map<String, Value>,
}

crate::secret::impl_debug_masked!(ScaleRequest);

fn one() -> u32 {
    1
}

fn int_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| serde::de::Error::custom("must be a positive integer")),
        Value::String(s) => s.trim().parse().map_err(|_| serde::de::Error::custom(format!("'{s}' is not an integer"))),
        other => Err(serde::de::Error::custom(format!("expected an integer, got {other}"))),
    }
}

/// SOL002/SOL003 HealVnfRequest. `vnfcInstanceId` is an array in SOL002 and the API reference;
/// Tacker's guide sends a single string. No VNFC ids, or `additionalParams.all`, means the
/// whole VNF (SOL003 heal).
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealRequest {
    #[serde(default, deserialize_with = "string_or_list")]
    pub vnfc_instance_id: Vec<String>,
    #[serde(default)]
    pub cause: Option<String>,
    #[serde(default)]
    pub additional_params: Map<String, Value>,
}

crate::secret::impl_debug_masked!(HealRequest);

fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => vec![],
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

impl HealRequest {
    /// SOL003 "heal the whole VNF": `additionalParams.all: true` or no VNFC named.
    pub fn whole_vnf(&self) -> bool {
        self.additional_params.get("all").and_then(Value::as_bool).unwrap_or(false) || self.vnfc_instance_id.is_empty()
    }
}

#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateRequest {
    #[serde(default)]
    pub termination_type: Option<String>,
    #[serde(default)]
    pub graceful_termination_timeout: Option<u64>,
    #[serde(default)]
    pub additional_params: Map<String, Value>,
}

crate::secret::impl_debug_masked!(TerminateRequest);

/// The parts of a SOL003 GrantRequest the hooks read: which VMs a SCALE_IN or heal removes.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRequest {
    #[serde(default)]
    pub remove_resources: Vec<ResourceDefinition>,
    #[serde(default)]
    pub add_resources: Vec<ResourceDefinition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDefinition {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub vdu_id: Option<String>,
    #[serde(default)]
    pub resource: Option<ResourceHandle>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHandle {
    #[serde(default)]
    pub resource_id: Option<String>,
}

/// The parts of a SOL003 VnfInstance the hooks read.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfInstance {
    pub id: String,
    #[serde(default)]
    pub vim_connection_info: VimConnections,
    #[serde(default)]
    pub instantiated_vnf_info: Option<InstantiatedVnfInfo>,
    /// SOL003 `metadata`; `mgmt_driver_addresses` may give VNFC addresses (docs/hook-protocol.md).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantiatedVnfInfo {
    #[serde(default)]
    pub vnfc_resource_info: Vec<VnfcResourceInfo>,
    /// SOL003 VnfcInfo: the ids a SOL002 heal names (`vnfcInstanceId`) and their resource.
    #[serde(default)]
    pub vnfc_info: Vec<VnfcInfo>,
    /// External CPs: where Tacker v2 keeps a VNFC port's fixed addresses.
    #[serde(default)]
    pub ext_cp_info: Vec<ExtCpInfo>,
    #[serde(default)]
    pub additional_params: Map<String, Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcInfo {
    pub id: String,
    #[serde(default)]
    pub vdu_id: Option<String>,
    #[serde(default)]
    pub vnfc_resource_info_id: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtCpInfo {
    pub id: String,
    #[serde(default)]
    pub cpd_id: Option<String>,
    #[serde(default)]
    pub associated_vnfc_cp_id: Option<String>,
    /// The external link port (its `resourceHandle` is the Neutron port: `vim/addresses.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_link_port_id: Option<String>,
    #[serde(default)]
    pub cp_protocol_info: Vec<Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcResourceInfo {
    pub id: String,
    pub vdu_id: String,
    #[serde(default)]
    pub compute_resource: Option<Value>,
    #[serde(default)]
    pub vnfc_cp_info: Vec<VnfcCpInfo>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// SOL003 `zoneId`: the zone the VNFC runs in (Tacker v2 sets it from the VDU's placement).
    #[serde(default)]
    pub zone_id: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcCpInfo {
    #[serde(default)]
    pub id: Option<String>,
    pub cpd_id: String,
    #[serde(default)]
    pub vnf_ext_cp_id: Option<String>,
    /// A VNF-internal (or externally managed) link port: `vim/addresses.rs` finds its port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_link_port_id: Option<String>,
    #[serde(default)]
    pub cp_protocol_info: Vec<Value>,
}

/// The first IP address in `cpProtocolInfo[].ipOverEthernet.ipAddresses[].addresses[]`.
fn first_address(cp_protocol_info: &[Value]) -> Option<String> {
    cp_protocol_info.iter().find_map(|p| {
        p.pointer("/ipOverEthernet/ipAddresses")?
            .as_array()?
            .iter()
            .find_map(|a| a.get("addresses")?.as_array()?.iter().find_map(|x| x.as_str().map(str::to_string)))
    })
}

impl VnfcCpInfo {
    pub fn first_address(&self) -> Option<String> {
        first_address(&self.cp_protocol_info)
    }
}

impl VnfInstance {
    fn vnf_info(&self) -> Option<&InstantiatedVnfInfo> {
        self.instantiated_vnf_info.as_ref()
    }

    /// A VNFC's address on CP `cpd_id`: its own `cpProtocolInfo`, else the external CP it is
    /// linked to (Tacker v2 keeps fixed addresses there), else
    /// `metadata.mgmt_driver_addresses[<vnfc id or compute resourceId>][cpd_id]`.
    ///
    /// An external CP's address that another external CP of the same `cpdId` also carries is
    /// no address: Tacker v2's OpenStack infra driver gives every port of a CP the protocol info
    /// of the CP's first `cpConfig`, so with several VNFCs on one CP all but one record another
    /// VM's address. Such a node's address comes from the cloud (or is missing, named).
    pub fn address_of(&self, v: &VnfcResourceInfo, cpd_id: &str) -> Option<String> {
        let cp = v.vnfc_cp_info.iter().find(|c| c.cpd_id == cpd_id);
        let own = cp.and_then(VnfcCpInfo::first_address);
        let ext = || {
            let cp = cp?;
            let ext_cps = &self.vnf_info()?.ext_cp_info;
            let ext = ext_cps.iter().find(|e| {
                cp.vnf_ext_cp_id.as_deref() == Some(e.id.as_str())
                    || (cp.id.is_some() && e.associated_vnfc_cp_id == cp.id)
            })?;
            let address = first_address(&ext.cp_protocol_info)?;
            let copied = ext_cps.iter().any(|o| {
                o.id != ext.id
                    && o.cpd_id == ext.cpd_id
                    && first_address(&o.cp_protocol_info).as_deref() == Some(address.as_str())
            });
            (!copied).then_some(address)
        };
        let meta = || {
            let m = self.metadata.get("mgmt_driver_addresses")?;
            let by = m.get(&v.id).or_else(|| m.get(v.resource_id()?))?;
            by.get(cpd_id)?.as_str().map(str::to_string)
        };
        own.or_else(ext).or_else(meta)
    }

    /// An address for CP `cpd_id` anywhere in the instance: a VNFC's (as [`address_of`]), else
    /// an external CP of that cpdId (a VIP port is one that no VNFC owns).
    ///
    /// [`address_of`]: VnfInstance::address_of
    pub fn any_address_of(&self, cpd_id: &str) -> Option<String> {
        let info = self.vnf_info()?;
        info.vnfc_resource_info.iter().find_map(|v| self.address_of(v, cpd_id)).or_else(|| {
            info.ext_cp_info
                .iter()
                .filter(|e| e.cpd_id.as_deref() == Some(cpd_id))
                .find_map(|e| first_address(&e.cp_protocol_info))
        })
    }

    /// The vnfcResourceInfo a SOL002 VNFC id names: through `vnfcInfo`, or directly.
    pub fn vnfc_resource_for(&self, vnfc_id: &str) -> Option<&VnfcResourceInfo> {
        let info = self.vnf_info()?;
        let rid = info
            .vnfc_info
            .iter()
            .find(|c| c.id == vnfc_id)
            .and_then(|c| c.vnfc_resource_info_id.as_deref())
            .unwrap_or(vnfc_id);
        info.vnfc_resource_info.iter().find(|v| v.id == rid)
    }

    /// The vnfcResourceInfo whose `computeResource.resourceId` (or id) is `resource_id`.
    pub fn vnfc_by_resource(&self, resource_id: &str) -> Option<&VnfcResourceInfo> {
        let info = self.vnf_info()?;
        info.vnfc_resource_info
            .iter()
            .find(|v| v.resource_id() == Some(resource_id))
            .or_else(|| info.vnfc_resource_info.iter().find(|v| v.id == resource_id))
    }
}

impl VnfcResourceInfo {
    /// `computeResource.resourceId`: the VIM's id of the VM (what a grant's removeResources name).
    pub fn resource_id(&self) -> Option<&str> {
        self.compute_resource.as_ref()?.get("resourceId")?.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnfc_id_as_string_or_array_and_whole_vnf_heal() {
        let h: HealRequest = parse(r#"{"vnfcInstanceId": "a"}"#, "t").unwrap();
        assert_eq!(h.vnfc_instance_id, vec!["a"]);
        assert!(!h.whole_vnf());
        let h: HealRequest =
            parse(r#"{"vnfcInstanceId": ["a","b"], "additionalParams": {"all": false}}"#, "t").unwrap();
        assert_eq!(h.vnfc_instance_id.len(), 2);
        let h: HealRequest = parse(r#"{"additionalParams": {"all": true}}"#, "t").unwrap();
        assert!(h.whole_vnf());
    }

    #[test]
    fn steps_as_string_or_number_and_errors_name_the_path() {
        let s: ScaleRequest = parse(r#"{"type":"SCALE_OUT","aspectId":"w","numberOfSteps":"2"}"#, "t").unwrap();
        assert_eq!((s.kind, s.number_of_steps), (ScaleType::Out, 2));
        let s: ScaleRequest = parse(r#"{"type":"SCALE_IN","aspectId":"w","numberOfSteps":1}"#, "t").unwrap();
        assert_eq!(s.number_of_steps, 1);
        let e =
            parse::<ScaleRequest>(r#"{"type":"SCALE_SIDEWAYS","aspectId":"w"}"#, "req.json").unwrap_err().to_string();
        assert!(e.starts_with("req.json: type: unknown variant"), "{e}");
        let e = parse::<InstantiateRequest>(r#"{"flavourId": 3}"#, "req.json").unwrap_err().to_string();
        assert!(e.starts_with("req.json: flavourId: invalid type"), "{e}");
    }

    #[test]
    fn deep_nesting_and_huge_files_are_refused_with_the_file_named() {
        let deep =
            format!(r#"{{"flavourId": "s", "additionalParams": {{"x": {}{}}}}}"#, "[".repeat(200), "]".repeat(200));
        let e = parse::<InstantiateRequest>(&deep, "req.json").unwrap_err().to_string();
        assert!(e.starts_with("req.json: additionalParams.x"), "{e}");
        assert!(e.contains("nested deeper than 128 levels"), "{e}");
        let ok =
            format!(r#"{{"flavourId": "s", "additionalParams": {{"x": {}{}}}}}"#, "[".repeat(100), "]".repeat(100));
        assert!(parse::<InstantiateRequest>(&ok, "req.json").is_ok());
        let e = parse::<InstantiateRequest>(r#"{"flavourId": "s"} {"flavourId": "t"}"#, "req.json").unwrap_err();
        assert!(e.to_string().starts_with("req.json: (document): text after the JSON document"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.json");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(crate::input_limit::REQUEST_MAX_BYTES + 1).unwrap();
        let e = load::<InstantiateRequest>(&p).unwrap_err().to_string();
        assert!(e.contains("big.json: request: is larger than 16 MiB"), "{e}");
    }

    #[test]
    fn vim_connection_info_list_or_map_round_trips() {
        let r: InstantiateRequest =
            parse(r#"{"flavourId":"s","vimConnectionInfo":{"vim1":{"vimType":"openstack","vimId":"x"}}}"#, "t")
                .unwrap();
        assert!(matches!(r.vim_connection_info, VimConnections::Map(_)));
        let v = serde_json::to_value(&r.vim_connection_info).unwrap();
        assert_eq!(v["vim1"]["vimId"], "x");
    }

    #[test]
    fn vnfc_addresses_come_from_cp_protocol_info_ext_cps_or_metadata() {
        let proto = |ip: &str| {
            format!(
                r#"[{{"layerProtocol":"IP_OVER_ETHERNET","ipOverEthernet":{{"ipAddresses":[{{"type":"IPV4","addresses":["{ip}"]}}]}}}}]"#
            )
        };
        // c1: its own cpProtocolInfo (SOL003); c2: linked to an external CP (Tacker v2);
        // c3: only in the instance's metadata; the VIP is an external CP no VNFC owns.
        let text = format!(
            r#"{{"id":"i","metadata":{{"mgmt_driver_addresses":{{"vm-3":{{"w_CP":"10.0.0.7"}}}}}},
               "instantiatedVnfInfo":{{
                 "vnfcResourceInfo":[
                   {{"id":"c1","vduId":"m","vnfcCpInfo":[{{"cpdId":"m_CP","cpProtocolInfo":{}}}]}},
                   {{"id":"c2","vduId":"w","computeResource":{{"resourceId":"vm-2"}},"vnfcCpInfo":[{{"id":"cp2","cpdId":"w_CP","vnfExtCpId":"e2"}}]}},
                   {{"id":"c3","vduId":"w","computeResource":{{"resourceId":"vm-3"}},"vnfcCpInfo":[{{"cpdId":"w_CP"}}]}}],
                 "extCpInfo":[{{"id":"e2","cpdId":"w_CP","cpProtocolInfo":{}}},
                              {{"id":"e9","cpdId":"vip_CP","cpProtocolInfo":{}}}],
                 "vnfcInfo":[{{"id":"vnfc-2","vnfcResourceInfoId":"c2"}}]}}}}"#,
            proto("10.0.0.5"),
            proto("10.0.0.6"),
            proto("10.0.0.100")
        );
        let i: VnfInstance = parse(&text, "t").unwrap();
        let v = &i.instantiated_vnf_info.as_ref().unwrap().vnfc_resource_info;
        assert_eq!(i.address_of(&v[0], "m_CP").as_deref(), Some("10.0.0.5"));
        assert_eq!(i.address_of(&v[1], "w_CP").as_deref(), Some("10.0.0.6"));
        assert_eq!(i.address_of(&v[2], "w_CP").as_deref(), Some("10.0.0.7"));
        assert_eq!(i.address_of(&v[0], "other"), None);
        assert_eq!(i.any_address_of("vip_CP").as_deref(), Some("10.0.0.100"));
        assert_eq!(i.vnfc_resource_for("vnfc-2").map(|v| v.id.as_str()), Some("c2"));
        assert_eq!(i.vnfc_resource_for("c3").map(|v| v.id.as_str()), Some("c3"));
        assert_eq!(i.vnfc_by_resource("vm-3").map(|v| v.id.as_str()), Some("c3"));
        assert!(i.vnfc_by_resource("vm-404").is_none());
    }

    #[test]
    fn an_address_tacker_copied_to_every_port_of_a_cp_is_no_address() {
        // Two workers on CP w_CP with fixed addresses: Tacker records the first cpConfig's
        // address on both ports' external CPs. Neither is trusted; the VIP's stays.
        let proto = r#"[{"layerProtocol":"IP_OVER_ETHERNET","ipOverEthernet":{"ipAddresses":[{"type":"IPV4","addresses":["10.0.0.6"]}]}}]"#;
        let text = format!(
            r#"{{"id":"i","instantiatedVnfInfo":{{
                 "vnfcResourceInfo":[
                   {{"id":"c1","vduId":"w","vnfcCpInfo":[{{"cpdId":"w_CP","vnfExtCpId":"e1"}}]}},
                   {{"id":"c2","vduId":"w","vnfcCpInfo":[{{"cpdId":"w_CP","vnfExtCpId":"e2"}}]}}],
                 "extCpInfo":[{{"id":"e1","cpdId":"w_CP","cpProtocolInfo":{proto}}},
                              {{"id":"e2","cpdId":"w_CP","cpProtocolInfo":{proto}}},
                              {{"id":"e9","cpdId":"vip_CP","cpProtocolInfo":{proto}}}]}}}}"#
        );
        let i: VnfInstance = parse(&text, "t").unwrap();
        let v = &i.instantiated_vnf_info.as_ref().unwrap().vnfc_resource_info;
        assert_eq!(i.address_of(&v[0], "w_CP"), None);
        assert_eq!(i.address_of(&v[1], "w_CP"), None);
        assert_eq!(i.any_address_of("vip_CP").as_deref(), Some("10.0.0.6"));
    }

    #[test]
    fn an_inline_document_names_its_key_in_errors() {
        let d = Doc::Inline { name: "in.json: request".into(), value: serde_json::json!({"type": "SCALE_UP"}) };
        let e = d.load::<ScaleRequest>().unwrap_err().to_string();
        assert!(e.starts_with("in.json: request: type: unknown variant"), "{e}");
    }
}
