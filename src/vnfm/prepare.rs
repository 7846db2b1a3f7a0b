//! A hook's inputs settled before anything runs: the document checked (`document.rs`), the
//! operator's options taken from the flags, then the document's `options`, and what the request
//! itself may set (`additionalParams.mgmt_driver`, the tenant's: only what
//! `tenant_options.rs` allows; its inventory must be a file of the package).

use std::path::PathBuf;
use std::time::Duration;

use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::vnfm::document::{DurationValue, HookRequest, Options};
use crate::vnfm::tenant_options::{self, Caps};

/// Everything the action needs, settled from the document, the options and the flags.
pub struct Call {
    pub doc: HookRequest,
    /// The document's name in messages (its file, or `<stdin>`).
    pub name: String,
    pub opts: Options,
    /// `opts.inventory` is the request's (a file of the VNF package, which a tenant picked),
    /// not the operator's: the inventory loader reads it in package mode.
    pub package_inventory: bool,
    /// With `package_inventory`: the path the request named in the package, which
    /// instantiate_end records for the later hooks whose request names none.
    pub request_inventory: Option<String>,
    pub install_timeout: Duration,
    pub drain_timeout: Duration,
    /// The request's shorter wait for a node that does not answer SSH yet (capped by the
    /// operator's `--retry-for`); `None`: the operator's.
    pub retry_for: Option<Duration>,
}

/// What the command line gives: options (they win over the document's) and the timeouts.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub options: Options,
    pub install_timeout: Option<Duration>,
    pub drain_timeout: Option<Duration>,
    /// `--retry-for`: the request's `retry_for` may not exceed it.
    pub retry_for: Option<Duration>,
}

/// Check the document `text` (named `name`) and settle the options: the operator's (flags, then
/// the document's `options`; its relative paths are the package's), then what the request may
/// set (a timeout no longer than the operator's, an inventory of the package when the operator
/// named none).
pub fn prepare(text: &str, name: &str, flags: Flags) -> Result<Call> {
    let doc = HookRequest::parse(text, name)?;
    let mut doc_opts = doc.options.clone();
    if let (Some(dir), Some(inv)) = (&doc.tmp_csar_dir, &doc_opts.inventory) {
        doc_opts.inventory = Some(dir.join(inv));
    }
    let mut opts = flags.options.or(doc_opts);
    // The vendor's bound on the wait for a VM that never boots, within the operator's.
    let vnfd_retry = vnfd_retry_for(&doc)?;
    let operator_retry = flags.retry_for.unwrap_or(RETRY_FOR_CEILING);
    let retry_cap = vnfd_retry.map_or(flags.retry_for, |v| Some(v.min(operator_retry)));
    let operator = Caps {
        install_timeout: flags
            .install_timeout
            .map_or_else(|| optional(&opts.install_timeout, "install_timeout"), |d| Ok(Some(d)))?,
        drain_timeout: flags
            .drain_timeout
            .map_or_else(|| optional(&opts.drain_timeout, "drain_timeout"), |d| Ok(Some(d)))?,
        retry_for: retry_cap,
    };
    let file = format!("{name}: request");
    let tenant = tenant_options::check(doc.additional_params().get("mgmt_driver"), &operator, &file)?;
    let package_inventory = opts.inventory.is_none() && tenant.inventory.is_some();
    if let Some(rel) = &tenant.inventory {
        let inv = package_file(&doc.tmp_csar_dir, rel, &file)?;
        opts.inventory = opts.inventory.or(Some(inv));
    }
    // The request may shorten a wait (up to the operator's own value, checked above).
    let install_timeout = tenant.install_timeout.or(operator.install_timeout).unwrap_or(Duration::from_secs(2700));
    let drain_timeout = tenant.drain_timeout.or(operator.drain_timeout).unwrap_or(Duration::from_secs(300));
    let request_inventory = tenant.inventory.clone().filter(|_| package_inventory);
    let retry_for = tenant.retry_for.or(retry_cap.filter(|_| vnfd_retry.is_some()));
    Ok(Call {
        doc,
        name: name.to_string(),
        opts,
        package_inventory,
        request_inventory,
        install_timeout,
        drain_timeout,
        retry_for,
    })
}

/// The request's inventory: a file of the package (a path elsewhere could make an error message
/// quote a file of the conductor).
fn package_file(csar: &Option<PathBuf>, rel: &str, file: &str) -> Result<PathBuf> {
    let field = "additionalParams.mgmt_driver.inventory";
    let dir = csar
        .as_ref()
        .ok_or_else(|| Error::input(file, field, "names a file of the package, and there is no tmp_csar_dir"))?;
    Package::open(dir)?.resolve(rel, file, field, false)
}

/// The hooks' own wait for a node that does not answer SSH (`Defaults::HOOKS`), the bound when
/// the operator set no `--retry-for`.
const RETRY_FOR_CEILING: Duration = Duration::from_secs(300);

/// `retry_for` in the package's VNFD (`interfaces.Vnflcm.inputs.mgmt_driver`, the vendor's:
/// how long its VMs may take to boot), of the flavour the request or the instance names.
fn vnfd_retry_for(doc: &HookRequest) -> Result<Option<Duration>> {
    let Some(dir) = &doc.tmp_csar_dir else { return Ok(None) };
    let flavour = doc
        .request
        .get("flavourId")
        .or_else(|| doc.vnf_instance.pointer("/instantiatedVnfInfo/flavourId"))
        .and_then(serde_json::Value::as_str);
    let pkg = Package::open(dir)?;
    let Some((file, settings)) = crate::cnf::vnfd_read::read_hook_settings(&pkg, flavour)? else { return Ok(None) };
    let field = "interfaces.Vnflcm.inputs.mgmt_driver";
    let Some(map) = settings.as_object() else { return Err(Error::input(&file, field, "must be a map")) };
    if let Some(k) = map.keys().find(|k| k.as_str() != "retry_for") {
        return Err(Error::input(
            &file,
            format!("{field}.{}", crate::error::excerpt(k)),
            "unknown key (known: retry_for)",
        ));
    }
    let Some(v) = map.get("retry_for") else { return Ok(None) };
    let text = match v {
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.clone(),
        _ => {
            return Err(Error::input(
                &file,
                format!("{field}.retry_for"),
                "must be a duration: seconds, or a text such as 2m",
            ))
        }
    };
    parse_duration(&text).map(Some).map_err(|m| Error::input(&file, format!("{field}.retry_for"), m))
}

fn optional(v: &Option<DurationValue>, key: &str) -> Result<Option<Duration>> {
    v.as_ref()
        .map(|v| parse_duration(&v.text()).map_err(|e| Error::input("hook request", format!("options.{key}"), e)))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(options: &str, mgmt_driver: &str) -> String {
        format!(
            r#"{{"operation":"scale_end","vnf_instance":{{"id":"i"}},"options":{options},
                "request":{{"additionalParams":{{"mgmt_driver":{mgmt_driver}}}}}}}"#
        )
    }

    /// The request's package inventory is what instantiate_end records for the later hooks;
    /// an operator's inventory wins and is not the request's to record.
    #[test]
    fn the_requests_package_inventory_is_kept_by_its_package_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("Files")).unwrap();
        std::fs::write(dir.path().join("Files/inv.yaml"), "groups: {}\n").unwrap();
        let text = serde_json::json!({"operation": "instantiate_end", "vnf_instance": {"id": "i"},
            "tmp_csar_dir": dir.path(), "request": {"additionalParams": {"mgmt_driver": {"inventory": "Files/inv.yaml"}}}})
        .to_string();
        let c = prepare(&text, "in.json", Flags::default()).unwrap();
        assert!(c.package_inventory);
        assert_eq!(c.request_inventory.as_deref(), Some("Files/inv.yaml"));
        let flags = Flags {
            options: Options { inventory: Some("/etc/inv.yaml".into()), ..Default::default() },
            ..Default::default()
        };
        let c = prepare(&text, "in.json", flags).unwrap();
        assert_eq!((c.package_inventory, c.request_inventory), (false, None));
    }

    #[test]
    fn the_operator_sets_options_and_the_request_only_shortens_a_wait() {
        let flags =
            Flags { options: Options { tacker_compat: Some(true), ..Default::default() }, ..Default::default() };
        let c =
            prepare(&doc(r#"{"state_dir":"/doc","dry_run":true,"install_timeout":"1h"}"#, "null"), "in.json", flags)
                .unwrap();
        assert_eq!(c.opts.state_dir, Some(PathBuf::from("/doc")));
        assert_eq!((c.opts.tacker_compat, c.opts.dry_run), (Some(true), Some(true)));
        assert_eq!((c.install_timeout, c.drain_timeout), (Duration::from_secs(3600), Duration::from_secs(300)));
        assert!(!c.package_inventory);
        // The request may ask for less than the operator's hour, never for more.
        let c =
            prepare(&doc(r#"{"install_timeout":"1h"}"#, r#"{"install_timeout":"20m"}"#), "in.json", Flags::default())
                .unwrap();
        assert_eq!(c.install_timeout, Duration::from_secs(1200));
        let e =
            prepare(&doc(r#"{"install_timeout":"1h"}"#, r#"{"install_timeout":"61m"}"#), "in.json", Flags::default())
                .err()
                .unwrap()
                .to_string();
        assert!(
            e.starts_with("in.json: request: additionalParams.mgmt_driver.install_timeout: '61m' is longer"),
            "{e}"
        );
        let flags = Flags { drain_timeout: Some(Duration::from_secs(60)), ..Default::default() };
        let e = prepare(&doc("{}", r#"{"drain_timeout":61}"#), "in.json", flags).err().unwrap().to_string();
        assert!(
            e.contains("additionalParams.mgmt_driver.drain_timeout: '61' is longer than the operator allows"),
            "{e}"
        );
        // What the document's options may set, the request may not.
        let e =
            prepare(&doc("{}", r#"{"tacker_compat":true}"#), "in.json", Flags::default()).err().unwrap().to_string();
        assert!(
            e.starts_with("in.json: request: additionalParams.mgmt_driver.tacker_compat: is the operator's"),
            "{e}"
        );
        let e =
            prepare(&doc("{}", r#"{"inventory":"inv.yaml"}"#), "in.json", Flags::default()).err().unwrap().to_string();
        assert!(e.contains("additionalParams.mgmt_driver.inventory: names a file of the package"), "{e}");
    }

    /// The vendor's VNFD bounds the wait for its VMs (within the operator's `--retry-for`);
    /// the request may shorten it further, never lengthen it.
    #[test]
    fn the_vnfd_bounds_the_wait_for_a_booting_vm_within_the_operators() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("TOSCA-Metadata")).unwrap();
        std::fs::create_dir_all(p.join("Definitions")).unwrap();
        std::fs::write(p.join("TOSCA-Metadata/TOSCA.meta"), "Entry-Definitions: Definitions/top.yaml\n").unwrap();
        let vnfd = |inputs: &str| {
            format!(
                "tosca_definitions_version: tosca_simple_yaml_1_2\ntopology_template:\n  node_templates:\n    VNF:\n      \
                 type: company.provider.VNF\n      interfaces:\n        Vnflcm:\n{inputs}          \
                 instantiate_end: {{implementation: hook}}\n"
            )
        };
        let with = |inputs: &str| std::fs::write(p.join("Definitions/top.yaml"), vnfd(inputs)).unwrap();
        let text = |md: &str| {
            serde_json::json!({"operation": "scale_end", "vnf_instance": {"id": "i"}, "tmp_csar_dir": p,
                "request": {"additionalParams": {"mgmt_driver": serde_json::from_str::<serde_json::Value>(md).unwrap()}}})
            .to_string()
        };
        let secs = Duration::from_secs;
        with("          inputs:\n            mgmt_driver: {retry_for: 2m}\n");
        assert_eq!(prepare(&text("null"), "in.json", Flags::default()).unwrap().retry_for, Some(secs(120)));
        // Within the operator's: a shorter --retry-for wins.
        let flags = Flags { retry_for: Some(secs(60)), ..Default::default() };
        assert_eq!(prepare(&text("null"), "in.json", flags).unwrap().retry_for, Some(secs(60)));
        // The request shortens it, never lengthens it past the VNFD's.
        assert_eq!(
            prepare(&text(r#"{"retry_for": 30}"#), "in.json", Flags::default()).unwrap().retry_for,
            Some(secs(30))
        );
        let e = prepare(&text(r#"{"retry_for": "3m"}"#), "in.json", Flags::default()).err().unwrap().to_string();
        assert!(e.contains("additionalParams.mgmt_driver.retry_for: '3m' is longer than the operator allows"), "{e}");
        with("          inputs:\n            mgmt_driver: {retry_for: soon}\n");
        let e = prepare(&text("null"), "in.json", Flags::default()).err().unwrap().to_string();
        assert!(
            e.contains("Definitions/top.yaml") && e.contains("interfaces.Vnflcm.inputs.mgmt_driver.retry_for"),
            "{e}"
        );
        with("");
        assert_eq!(prepare(&text("null"), "in.json", Flags::default()).unwrap().retry_for, None);
    }

    /// The wait for a VM that never boots: the request may shorten the operator's
    /// `--retry-for`, never exceed it.
    #[test]
    fn the_request_shortens_the_wait_for_a_booting_vm_up_to_the_operators_retry_for() {
        let flags = || Flags { retry_for: Some(Duration::from_secs(120)), ..Default::default() };
        let c = prepare(&doc("{}", r#"{"retry_for":"90s"}"#), "in.json", flags()).unwrap();
        assert_eq!(c.retry_for, Some(Duration::from_secs(90)));
        assert_eq!(prepare(&doc("{}", "null"), "in.json", flags()).unwrap().retry_for, None);
        let e = prepare(&doc("{}", r#"{"retry_for":"3m"}"#), "in.json", flags()).err().unwrap().to_string();
        assert!(e.contains("additionalParams.mgmt_driver.retry_for: '3m' is longer than the operator allows"), "{e}");
    }
}
