//! Where a VM runs, as Tacker's sample driver labels its workers: the compute host
//! (`CIS-node=<host>`) and the availability zone (`kubernetes.io/zone=<zone>`). Without a VNFM
//! an inventory gives them (`placement: {<host>: {host_compute: ..., zone: ...}}`); from a
//! VnfInstance they come from `vnfcResourceInfo[]` (see `cluster/labels.rs`). Both values become
//! Kubernetes label values, so they are checked as such.

use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The hypervisor host the VM runs on (Nova's `OS-EXT-SRV-ATTR:host`).
    #[serde(default)]
    pub host_compute: Option<String>,
    /// The availability zone.
    #[serde(default)]
    pub zone: Option<String>,
}

impl Placement {
    pub fn is_empty(&self) -> bool {
        self.host_compute.is_none() && self.zone.is_none()
    }

    /// The first field whose value is not a Kubernetes label value, and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (field, v) in [("host_compute", &self.host_compute), ("zone", &self.zone)] {
            if let Some(v) = v {
                check_label_value(v).map_err(|m| (field, m))?;
            }
        }
        Ok(())
    }
}

/// A Kubernetes label value: at most 63 characters, letters, digits, `-`, `_`, `.`, beginning and
/// ending with a letter or digit (empty is a valid label value, but says nothing: refused here).
pub fn check_label_value(v: &str) -> Result<(), String> {
    if !v.is_empty() && crate::k8s_names::label_value(v) {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a Kubernetes label value (1..63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)",
            crate::error::excerpt(v)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values() {
        for ok in ["nova", "compute-01", "az_1.a", "A", &"x".repeat(63)] {
            assert_eq!(check_label_value(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a/b", "a=b", "ｚ", "a\n", &"x".repeat(64), "$(id)"] {
            assert!(check_label_value(bad).is_err(), "{bad:?}");
        }
        let p = Placement { host_compute: Some("c1".into()), zone: Some("bad zone".into()) };
        assert_eq!(p.check().unwrap_err().0, "zone");
    }
}
