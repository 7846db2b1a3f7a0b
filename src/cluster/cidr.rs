//! An IPv4/IPv6 network as the request writes it (the pod and service networks, `no_proxy`'s
//! node network, an NFS export's clients).

use std::net::IpAddr;

use ipnet::IpNet;

/// An IPv4/IPv6 network as written (`192.168.3.0/16` is kept as written, like kubeadm does).
/// Parsing and arithmetic are [`ipnet`]'s; `text` is what the request said and what the
/// scripts get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub text: String,
    pub net: IpNet,
}

impl Cidr {
    pub fn parse(s: &str) -> std::result::Result<Cidr, String> {
        match s.parse::<IpNet>() {
            Ok(net) => Ok(Cidr { text: s.to_string(), net }),
            Err(_) => Err(Self::why_not(s)),
        }
    }

    /// `ipnet` says only "invalid IP address syntax"; name the part that is wrong.
    fn why_not(s: &str) -> String {
        let Some((a, _)) = s.split_once('/') else { return format!("'{s}' is not a CIDR (address/prefix)") };
        match a.parse::<IpAddr>() {
            Err(_) => format!("'{s}': '{a}' is not an IP address"),
            Ok(ip) => format!("'{s}': prefix must be 0..{}", if ip.is_ipv4() { 32 } else { 128 }),
        }
    }

    /// True when bits beyond the prefix are set (Python's strict `ip_network` would refuse it;
    /// Tacker's own guide uses `192.168.3.0/16`, so we accept it with a warning).
    pub fn has_host_bits(&self) -> bool {
        self.net.addr() != self.net.network()
    }

    /// The network itself, host bits cleared: `192.168.3.0/16` → `192.168.0.0/16`.
    pub fn network(&self) -> IpNet {
        self.net.trunc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing() {
        let c = Cidr::parse("192.168.3.0/16").unwrap();
        assert!(c.has_host_bits());
        assert!(c.net.contains(&"192.168.200.1".parse::<IpAddr>().unwrap()));
        assert!(!Cidr::parse("10.96.0.0/12").unwrap().has_host_bits());
        assert!(Cidr::parse("fd00::/8").is_ok());
        for bad in ["10.0.0.0", "10.0.0.0/x", "300.0.0.0/8", "10.0.0.0/33"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidr_host_bits_v4_and_v6() {
        // (text, has host bits, network)
        for (text, host_bits, network) in [
            ("10.96.0.0/12", false, "10.96.0.0/12"),
            ("192.168.3.0/16", true, "192.168.0.0/16"),
            ("10.0.0.1/32", false, "10.0.0.1/32"),
            ("0.0.0.0/0", false, "0.0.0.0/0"),
            ("fd00:10::/64", false, "fd00:10::/64"),
            ("fd00:10::35/64", true, "fd00:10::/64"),
            ("fd00:10:0:0:1::/48", true, "fd00:10::/48"),
            ("::1/128", false, "::1/128"),
        ] {
            let c = Cidr::parse(text).unwrap();
            assert_eq!(c.text, text, "kept as written");
            assert_eq!(c.has_host_bits(), host_bits, "{text}");
            assert_eq!(c.network().to_string(), network, "{text}");
        }
        assert!(Cidr::parse("fd00::/64").unwrap().net.contains(&"fd00::ffff".parse::<IpAddr>().unwrap()));
        assert!(!Cidr::parse("fd00::/64").unwrap().net.contains(&"10.0.0.1".parse::<IpAddr>().unwrap()));
    }

    #[test]
    fn cidr_garbage_names_what_is_wrong() {
        for (bad, msg) in [
            ("", "'' is not a CIDR (address/prefix)"),
            ("fd00::", "'fd00::' is not a CIDR (address/prefix)"),
            ("fd00::/129", "'fd00::/129': prefix must be 0..128"),
            ("fd00::/-1", "'fd00::/-1': prefix must be 0..128"),
            ("10.0.0.0/33", "'10.0.0.0/33': prefix must be 0..32"),
            ("10.0.0.0/ 8", "'10.0.0.0/ 8': prefix must be 0..32"),
            ("gg::/64", "'gg::/64': 'gg::' is not an IP address"),
            ("10.0.0/8", "'10.0.0/8': '10.0.0' is not an IP address"),
            ("10.0.0.0/8; reboot", "'10.0.0.0/8; reboot': prefix must be 0..32"),
        ] {
            assert_eq!(Cidr::parse(bad).unwrap_err(), msg, "{bad}");
        }
    }
}
