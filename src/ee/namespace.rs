//! OSM's namespace strings, `[nsi].ns.vnf.vdu[-count]`: where an execution environment sits in a
//! network service (e.g. `.nsid.vnfid.vduid-2`, the third instance of VDU `vduid` of VNF `vnfid`
//! in NS `nsid`, outside any slice). Parsed into parts and checked, so a registered machine can
//! be filtered by NS or VNF without string matching. Pure.
//!
//! The rules: the string starts with the slice id, which may be empty (hence the leading dot);
//! the NS id is required; the VNF and VDU ids are optional, in that order (an NS-level or a
//! VNF-level environment stops earlier); a VDU may end in `-N`, its instance count. Each id is
//! 1..=64 letters, digits, `_` or `-` (OSM's ids are UUIDs or descriptor ids).

use serde::Serialize;

use crate::error::excerpt;

/// The parts of one namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Namespace {
    /// The network slice instance; `None` for the empty leading part.
    pub nsi: Option<String>,
    pub ns: String,
    pub vnf: Option<String>,
    pub vdu: Option<String>,
    /// The VDU's instance index (`-2`); only with a VDU.
    pub count: Option<u32>,
}

/// Longest id part we accept.
const MAX_PART: usize = 64;

fn check_part(what: &str, p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err(format!("the {what} id is empty"));
    }
    if p.len() > MAX_PART || !p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        return Err(format!("the {what} id '{}' is not 1..={MAX_PART} letters, digits, '_' or '-'", excerpt(p)));
    }
    Ok(())
}

impl Namespace {
    /// Parse `[nsi].ns[.vnf[.vdu[-count]]]`; the message says which part is wrong.
    pub fn parse(s: &str) -> Result<Namespace, String> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() < 2 || parts.len() > 4 {
            return Err(format!(
                "'{}' is not a namespace of the form [nsi].ns[.vnf[.vdu[-count]]] (e.g. .nsid.vnfid.vduid-2)",
                excerpt(s)
            ));
        }
        let nsi = match parts[0] {
            "" => None,
            p => {
                check_part("slice (nsi)", p)?;
                Some(p.to_string())
            }
        };
        check_part("ns", parts[1])?;
        let vnf = parts.get(2).map(|p| check_part("vnf", p).map(|()| p.to_string())).transpose()?;
        let (vdu, count) = match parts.get(3) {
            None => (None, None),
            Some(p) => {
                let (id, count) = match p.rsplit_once('-') {
                    Some((id, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => {
                        let n: u32 = n.parse().map_err(|_| format!("the vdu count '{}' is too large", excerpt(n)))?;
                        (id, Some(n))
                    }
                    _ => (*p, None),
                };
                check_part("vdu", id)?;
                (Some(id.to_string()), count)
            }
        };
        Ok(Namespace { nsi, ns: parts[1].to_string(), vnf, vdu, count })
    }

    /// Whether this namespace lies within `filter` (a namespace too): every part the filter
    /// sets is equal here. `.ns1` matches every environment of NS `ns1`.
    pub fn within(&self, filter: &Namespace) -> bool {
        filter.ns == self.ns
            && (filter.nsi.is_none() || filter.nsi == self.nsi)
            && (filter.vnf.is_none() || filter.vnf == self.vnf)
            && (filter.vdu.is_none() || filter.vdu == self.vdu)
            && (filter.count.is_none() || filter.count == self.count)
    }
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.nsi.as_deref().unwrap_or(""), self.ns)?;
        if let Some(v) = &self.vnf {
            write!(f, ".{v}")?;
        }
        if let Some(v) = &self.vdu {
            write!(f, ".{v}")?;
        }
        if let Some(c) = self.count {
            write!(f, "-{c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osm_namespaces_split_into_their_parts() {
        let n = Namespace::parse(".nsid.vnfid.vduid-2").unwrap();
        assert_eq!(
            n,
            Namespace {
                nsi: None,
                ns: "nsid".into(),
                vnf: Some("vnfid".into()),
                vdu: Some("vduid".into()),
                count: Some(2)
            }
        );
        assert_eq!(n.to_string(), ".nsid.vnfid.vduid-2");
        let n = Namespace::parse("slice1.ns-1.vnf_a.my-vdu").unwrap();
        assert_eq!((n.nsi.as_deref(), n.vdu.as_deref(), n.count), (Some("slice1"), Some("my-vdu"), None));
        let n = Namespace::parse(".0b1c-uuid.vnf").unwrap();
        assert_eq!((n.vnf.as_deref(), n.vdu), (Some("vnf"), None));
        assert_eq!(Namespace::parse(".ns").unwrap().to_string(), ".ns");
        // A VDU id with dashes keeps them; only a trailing all-digit part is the count.
        let n = Namespace::parse(".ns.vnf.vdu-1-12").unwrap();
        assert_eq!((n.vdu.as_deref(), n.count), (Some("vdu-1"), Some(12)));
    }

    #[test]
    fn bad_namespaces_say_which_part() {
        for (bad, says) in [
            ("", "not a namespace"),
            ("nsid", "not a namespace"),
            (".a.b.c.d", "not a namespace"),
            ("..vnf", "ns id is empty"),
            (".ns..vdu", "vnf id is empty"),
            (".ns.vnf.-2", "vdu id is empty"),
            (".ns.vnf.vdu-99999999999", "too large"),
            (".ns;rm -rf /.vnf", "ns id"),
            (".ns.vnf\nforged", "vnf id"),
            (".ns.$(id)", "vnf id"),
            ("s l.ns", "slice"),
        ] {
            let e = Namespace::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{e:?}");
        }
        let long = format!(".{}", "a".repeat(65));
        assert!(Namespace::parse(&long).is_err());
    }

    #[test]
    fn a_filter_matches_what_lies_within_it() {
        let n = Namespace::parse(".ns1.vnf1.vdu-3").unwrap();
        assert!(n.within(&Namespace::parse(".ns1").unwrap()));
        assert!(n.within(&Namespace::parse(".ns1.vnf1").unwrap()));
        assert!(n.within(&Namespace::parse(".ns1.vnf1.vdu-3").unwrap()));
        assert!(!n.within(&Namespace::parse(".ns1.vnf2").unwrap()));
        assert!(!n.within(&Namespace::parse(".ns2").unwrap()));
        assert!(!n.within(&Namespace::parse(".ns1.vnf1.vdu-4").unwrap()));
        assert!(!n.within(&Namespace::parse("s.ns1").unwrap()));
    }
}
