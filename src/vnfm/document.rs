//! The hook protocol's two documents (docs/hook-protocol.md, docs/hook.schema.json): the
//! request a VNFM's shim sends (Tacker v2's script dict, key for key, plus options) and the
//! response it gets back. Parsing checks the version, the operation name and the options'
//! names, so a typo is an error naming the key, not a silently ignored setting.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{excerpt, Error, Result};

pub const API_VERSION: &str = "mgmt-driver.hook/v1";

/// What the VNFM asks for: the same keys Tacker v2 pickles for a management script.
#[derive(Clone, Deserialize, Serialize)]
pub struct HookRequest {
    #[serde(rename = "apiVersion", default)]
    pub api_version: Option<String>,
    pub operation: String,
    #[serde(default)]
    pub request: Value,
    pub vnf_instance: Value,
    #[serde(default)]
    pub grant_request: Value,
    #[serde(default)]
    pub grant_response: Value,
    #[serde(default)]
    pub tmp_csar_dir: Option<PathBuf>,
    #[serde(default)]
    pub new_csar_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub user_script_err_handling_data: Map<String, Value>,
    #[serde(default)]
    pub vnfm: Vnfm,
    #[serde(default)]
    pub options: Options,
}

crate::secret::impl_debug_masked!(HookRequest);

fn null_as_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> std::result::Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Which VNFM's shape the returned `vimConnectionInfo` entry takes.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Vnfm {
    #[default]
    TackerV2,
    TackerV1,
    Generic,
}

/// How mgmt-driver runs: the operator's settings, from a flag (wins) or the document's
/// `options` (the shim writes them). The request's `additionalParams.mgmt_driver` is the
/// tenant's and may set only what `tenant_options.rs` allows.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    pub inventory: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub kubeconfig_out: Option<PathBuf>,
    pub tacker_compat: Option<bool>,
    pub reset_nodes: Option<bool>,
    pub dry_run: Option<bool>,
    /// A CNF: the cluster recorded by `instantiate_end` under this VNF instance id.
    pub cluster_instance: Option<String>,
    pub install_timeout: Option<DurationValue>,
    pub drain_timeout: Option<DurationValue>,
}

/// A duration as seconds (number) or text (`45m`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum DurationValue {
    Seconds(f64),
    Text(String),
}

impl DurationValue {
    /// As the command line would give it (`2700`, `45m`), for the same duration parser.
    pub fn text(&self) -> String {
        match self {
            DurationValue::Seconds(s) => s.to_string(),
            DurationValue::Text(t) => t.clone(),
        }
    }
}

impl Options {
    /// `self`, with every unset option taken from `other`.
    pub fn or(self, other: Options) -> Options {
        Options {
            inventory: self.inventory.or(other.inventory),
            state_dir: self.state_dir.or(other.state_dir),
            known_hosts: self.known_hosts.or(other.known_hosts),
            kubeconfig_out: self.kubeconfig_out.or(other.kubeconfig_out),
            tacker_compat: self.tacker_compat.or(other.tacker_compat),
            reset_nodes: self.reset_nodes.or(other.reset_nodes),
            dry_run: self.dry_run.or(other.dry_run),
            cluster_instance: self.cluster_instance.or(other.cluster_instance),
            install_timeout: self.install_timeout.or(other.install_timeout),
            drain_timeout: self.drain_timeout.or(other.drain_timeout),
        }
    }
}

/// The LCM operation a hook belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lcm {
    Instantiate,
    Scale,
    Heal,
    Terminate,
    ModifyInformation,
    ChangeExternalConnectivity,
    ChangeCurrentPackage,
}

/// When in the operation the hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Start,
    End,
    RollbackStart,
    RollbackEnd,
}

/// `instantiate_end`, `scale_rollback_start`, ... → (operation, phase).
pub fn parse_operation(name: &str) -> Result<(Lcm, Phase)> {
    let (lcm, phase) = [
        ("_rollback_start", Phase::RollbackStart),
        ("_rollback_end", Phase::RollbackEnd),
        ("_start", Phase::Start),
        ("_end", Phase::End),
    ]
    .into_iter()
    .find_map(|(suffix, p)| name.strip_suffix(suffix).map(|l| (l, p)))
    .ok_or_else(|| unknown_operation(name))?;
    let lcm = match lcm {
        "instantiate" => Lcm::Instantiate,
        "scale" => Lcm::Scale,
        "heal" => Lcm::Heal,
        "terminate" => Lcm::Terminate,
        "modify_information" => Lcm::ModifyInformation,
        "change_external_connectivity" => Lcm::ChangeExternalConnectivity,
        "change_current_package" => Lcm::ChangeCurrentPackage,
        _ => return Err(unknown_operation(name)),
    };
    Ok((lcm, phase))
}

fn unknown_operation(name: &str) -> Error {
    Error::input(
        "hook request",
        "operation",
        format!(
            "'{}' is not a hook: <op>_start, <op>_end, <op>_rollback_start or <op>_rollback_end, where <op> is \
             instantiate, scale, heal, terminate, modify_information, change_external_connectivity or \
             change_current_package",
            excerpt(name)
        ),
    )
}

impl HookRequest {
    /// Parse and check the document: version, operation, the instance id, the options.
    pub fn parse(text: &str, name: &str) -> Result<HookRequest> {
        let r: HookRequest = crate::request::parse(text, name)?;
        if let Some(v) = r.api_version.as_deref().filter(|v| *v != API_VERSION) {
            return Err(Error::input(
                name,
                "apiVersion",
                format!("'{}' is not supported; use {API_VERSION}", excerpt(v)),
            ));
        }
        parse_operation(&r.operation).map_err(|e| relocate(e, name))?;
        if !r.vnf_instance.get("id").is_some_and(Value::is_string) {
            return Err(Error::input(name, "vnf_instance.id", "is required (a string)"));
        }
        for (key, v) in [("request", &r.request), ("grant_request", &r.grant_request)] {
            if !(v.is_null() || v.is_object()) {
                return Err(Error::input(name, key, "must be an object or null"));
            }
        }
        Ok(r)
    }

    /// `request.additionalParams`, or an empty map.
    pub fn additional_params(&self) -> Map<String, Value> {
        self.request.get("additionalParams").and_then(Value::as_object).cloned().unwrap_or_default()
    }

    pub fn instance_id(&self) -> String {
        self.vnf_instance.get("id").and_then(Value::as_str).unwrap_or_default().to_string()
    }
}

/// Errors from the operation parser name the document, not a generic location.
fn relocate(e: Error, name: &str) -> Error {
    match e {
        Error::Input { field, message, .. } => Error::input(name, field, message),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tacker_hook_name_parses_and_others_are_refused_by_name() {
        assert_eq!(parse_operation("instantiate_end").unwrap(), (Lcm::Instantiate, Phase::End));
        assert_eq!(parse_operation("scale_rollback_start").unwrap(), (Lcm::Scale, Phase::RollbackStart));
        assert_eq!(parse_operation("heal_rollback_end").unwrap(), (Lcm::Heal, Phase::RollbackEnd));
        assert_eq!(
            parse_operation("change_external_connectivity_start").unwrap(),
            (Lcm::ChangeExternalConnectivity, Phase::Start)
        );
        for bad in ["instantiate", "explode_end", "_end", "heal_middle", ""] {
            let e = parse_operation(bad).unwrap_err().to_string();
            assert!(e.contains("operation: '") && e.contains("is not a hook"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_document_is_checked_before_anything_runs() {
        let ok = r#"{"operation":"instantiate_end","vnf_instance":{"id":"i1"},"request":{},"user_script_err_handling_data":null}"#;
        let r = HookRequest::parse(ok, "in.json").unwrap();
        assert_eq!((r.instance_id().as_str(), r.vnfm), ("i1", Vnfm::TackerV2));
        let cases = [
            (
                r#"{"apiVersion":"mgmt-driver.hook/v9","operation":"instantiate_end","vnf_instance":{"id":"i"}}"#,
                "apiVersion",
            ),
            (r#"{"operation":"instantiate_end","vnf_instance":{}}"#, "vnf_instance.id"),
            (r#"{"operation":"blow_up","vnf_instance":{"id":"i"}}"#, "operation"),
            (r#"{"operation":"heal_end","vnf_instance":{"id":"i"},"request":[1]}"#, "request"),
            (r#"{"operation":"heal_end","vnf_instance":{"id":"i"},"vnfm":"osm"}"#, "vnfm"),
            (r#"{"operation":"heal_end","vnf_instance":{"id":"i"},"options":{"inventroy":"x"}}"#, "options"),
        ];
        for (doc, field) in cases {
            let e = HookRequest::parse(doc, "in.json").unwrap_err().to_string();
            assert!(e.starts_with(&format!("in.json: {field}")), "{doc}: {e}");
        }
    }
}
