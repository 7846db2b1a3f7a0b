//! What a hook's request may set in `additionalParams.mgmt_driver`: the table [`RULES`], and
//! nothing else. The request body is written by the VNFM's API user (a tenant), not by the
//! operator, so it may only ask for waits no longer than the operator allows and name an
//! inventory file of its own VNF package (which the inventory loader reads in package mode:
//! nodes only, no credential, file or host-key setting). Every other option (`tacker_compat`
//! would hand the tenant the operator's node password, `dry_run` would turn a real instantiate
//! into an `ok` no-op, `cluster_instance` would point a CNF at another tenant's cluster, and
//! `state_dir`, `known_hosts`, `kubeconfig_out`, `reset_nodes`) is the operator's: a flag of
//! `mgmt-driver hook`, or the document's `options`, which the shim writes. Pure: the caller
//! gives the operator's own timeouts and resolves the inventory in the package.

use std::time::Duration;

use serde_json::Value;

use crate::duration::parse_duration;
use crate::error::{excerpt, Error, Result};

/// What one key of `additionalParams.mgmt_driver` may be.
#[derive(Clone, Copy)]
pub enum Rule {
    /// A duration no longer than the operator's own value (`operator`: a flag, else the
    /// document's options), or, when the operator set none, than `ceiling`.
    Timeout { ceiling: Duration, operator: fn(&Caps) -> Option<Duration>, set: fn(&mut TenantOptions, Duration) },
    /// A relative path, to a file of the VNF package.
    PackageFile,
}

/// Every key a request may set; any other is refused as the operator's setting.
pub const RULES: [(&str, Rule); 4] = [
    (
        "install_timeout",
        Rule::Timeout {
            ceiling: Duration::from_secs(2 * 3600),
            operator: |c| c.install_timeout,
            set: |o, d| o.install_timeout = Some(d),
        },
    ),
    (
        "drain_timeout",
        Rule::Timeout {
            ceiling: Duration::from_secs(30 * 60),
            operator: |c| c.drain_timeout,
            set: |o, d| o.drain_timeout = Some(d),
        },
    ),
    (
        // How long a node that does not answer SSH is waited for (a new VM still booting): a
        // VM that never boots holds the VNFM's operation this long, and Tacker puts no timeout
        // on the script, so the request may shorten it. The ceiling is the hooks' default.
        "retry_for",
        Rule::Timeout {
            ceiling: Duration::from_secs(300),
            operator: |c| c.retry_for,
            set: |o, d| o.retry_for = Some(d),
        },
    ),
    ("inventory", Rule::PackageFile),
];

/// The operator's own timeouts (a flag, else the document's options): the request's caps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Caps {
    pub install_timeout: Option<Duration>,
    pub drain_timeout: Option<Duration>,
    /// `mgmt-driver hook --retry-for`.
    pub retry_for: Option<Duration>,
}

/// What the request set, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantOptions {
    /// Relative to the VNF package; not yet resolved in it.
    pub inventory: Option<String>,
    pub install_timeout: Option<Duration>,
    pub drain_timeout: Option<Duration>,
    pub retry_for: Option<Duration>,
}

/// The field every message names (`additionalParams.mgmt_driver.<key>`).
fn field(key: &str) -> String {
    format!("additionalParams.mgmt_driver.{}", excerpt(key))
}

/// Check `additionalParams.mgmt_driver` (`v`, null or absent: nothing set) against [`RULES`];
/// `file` names the request in messages.
pub fn check(v: Option<&Value>, caps: &Caps, file: &str) -> Result<TenantOptions> {
    let map = match v {
        None | Some(Value::Null) => return Ok(TenantOptions::default()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(Error::input(file, "additionalParams.mgmt_driver", "must be an object")),
    };
    let mut out = TenantOptions::default();
    for (key, value) in map {
        let Some((_, rule)) = RULES.iter().find(|(k, _)| k == key) else {
            return Err(Error::input(
                file,
                field(key),
                "is the operator's setting (a flag of `mgmt-driver hook`, or the hook document's `options`), \
                 not the request's: a request may set only install_timeout, drain_timeout, retry_for and inventory \
                 (a file of the VNF package)",
            ));
        };
        match rule {
            Rule::Timeout { ceiling, operator, set } => {
                let cap = operator(caps).unwrap_or(*ceiling);
                set(&mut out, timeout(value, cap, file, key)?);
            }
            Rule::PackageFile => match value {
                Value::String(s) if !s.is_empty() => out.inventory = Some(s.clone()),
                _ => return Err(Error::input(file, field(key), "must be a file of the VNF package (a relative path)")),
            },
        }
    }
    Ok(out)
}

/// A duration as a number of seconds or a text (`45m`), at most `cap`.
fn timeout(v: &Value, cap: Duration, file: &str, key: &str) -> Result<Duration> {
    let text = match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return Err(Error::input(file, field(key), "must be a duration: seconds, or a text such as 45m")),
    };
    let d = parse_duration(&text).map_err(|m| Error::input(file, field(key), m))?;
    if d > cap {
        return Err(Error::input(
            file,
            field(key),
            format!(
                "'{}' is longer than the operator allows a request ({}s); a longer wait is the operator's setting",
                excerpt(&text),
                cap.as_secs()
            ),
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value, caps: Caps) -> std::result::Result<TenantOptions, String> {
        check(Some(&v), &caps, "in.json: request").map_err(|e| e.to_string())
    }

    #[test]
    fn only_the_table_passes_and_every_operator_option_is_refused_by_name() {
        let o =
            run(json!({"install_timeout": "45m", "drain_timeout": 60, "inventory": "Files/inv.yaml"}), Caps::default())
                .unwrap();
        assert_eq!(o.install_timeout, Some(Duration::from_secs(2700)));
        assert_eq!(o.drain_timeout, Some(Duration::from_secs(60)));
        assert_eq!(o.inventory.as_deref(), Some("Files/inv.yaml"));
        assert_eq!(check(None, &Caps::default(), "f").unwrap(), TenantOptions::default());
        assert_eq!(check(Some(&Value::Null), &Caps::default(), "f").unwrap(), TenantOptions::default());
        for (key, value) in [
            ("tacker_compat", json!(true)),
            ("dry_run", json!(true)),
            ("cluster_instance", json!("other-tenant")),
            ("reset_nodes", json!(true)),
            ("state_dir", json!("/etc")),
            ("known_hosts", json!("/dev/null")),
            ("kubeconfig_out", json!("/root/.kube/config")),
            ("sate_dir", json!("/x")),
        ] {
            let e = run(json!({ key: value }), Caps::default()).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "in.json: request: additionalParams.mgmt_driver.{key}: is the operator's setting"
                )),
                "{key}: {e}"
            );
        }
        let e = run(json!("tacker_compat"), Caps::default()).unwrap_err();
        assert!(e.contains("additionalParams.mgmt_driver: must be an object"), "{e}");
        for bad in [json!(""), json!(1), json!(null)] {
            let e = run(json!({ "inventory": bad }), Caps::default()).unwrap_err();
            assert!(e.contains("additionalParams.mgmt_driver.inventory: must be a file"), "{e}");
        }
    }

    #[test]
    fn a_timeout_is_capped_by_the_operators_value_else_the_ceiling() {
        let e = run(json!({"install_timeout": "3h"}), Caps::default()).unwrap_err();
        assert!(
            e.contains("additionalParams.mgmt_driver.install_timeout: '3h' is longer than") && e.contains("7200s"),
            "{e}"
        );
        assert!(run(json!({"install_timeout": "2h"}), Caps::default()).is_ok());
        let e = run(json!({"drain_timeout": 1801}), Caps::default()).unwrap_err();
        assert!(e.contains("drain_timeout") && e.contains("1800s"), "{e}");
        let operator = Caps {
            install_timeout: Some(Duration::from_secs(600)),
            drain_timeout: Some(Duration::from_secs(5 * 3600)),
            retry_for: None,
        };
        assert!(run(json!({"install_timeout": 601}), operator).unwrap_err().contains("600s"));
        assert_eq!(
            run(json!({"install_timeout": 300}), operator).unwrap().install_timeout,
            Some(Duration::from_secs(300))
        );
        // The operator's own value is the cap, even above the ceiling.
        assert_eq!(
            run(json!({"drain_timeout": "4h"}), operator).unwrap().drain_timeout,
            Some(Duration::from_secs(4 * 3600))
        );
        for bad in [json!("forever"), json!(0), json!(-5), json!(true)] {
            let e = run(json!({ "drain_timeout": bad }), Caps::default()).unwrap_err();
            assert!(e.contains("additionalParams.mgmt_driver.drain_timeout: "), "{e}");
        }
    }

    /// A VM that never boots holds the VNFM's operation for the SSH wait: the request may
    /// shorten it, never lengthen it past the operator's `--retry-for` (else the hooks' 300 s).
    #[test]
    fn the_wait_for_a_booting_vm_is_the_requests_to_shorten_only() {
        assert_eq!(run(json!({"retry_for": "90s"}), Caps::default()).unwrap().retry_for, Some(Duration::from_secs(90)));
        let e = run(json!({"retry_for": 301}), Caps::default()).unwrap_err();
        assert!(
            e.contains("additionalParams.mgmt_driver.retry_for: '301' is longer than") && e.contains("300s"),
            "{e}"
        );
        let operator = Caps { retry_for: Some(Duration::from_secs(60)), ..Caps::default() };
        assert!(run(json!({"retry_for": "2m"}), operator).unwrap_err().contains("60s"));
        assert_eq!(run(json!({"retry_for": 30}), operator).unwrap().retry_for, Some(Duration::from_secs(30)));
    }
}
