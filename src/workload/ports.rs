//! DCAE's port specs: `PORT[/PROTOCOL][:NODEPORT]`, e.g. `8080/udp:30080`. The container port
//! and its protocol (`tcp` when left out) go into the container and the ClusterIP Service; a
//! node port other than 0 also goes into a NodePort Service. Pure.

use std::fmt;

/// Kubernetes' default NodePort range (`--service-node-port-range` of kube-apiserver).
pub const NODE_PORT_RANGE: std::ops::RangeInclusive<u16> = 30000..=32767;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    /// As the Kubernetes API spells it.
    pub fn api(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        }
    }

    fn lower(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub port: u16,
    pub protocol: Protocol,
    /// Exposed on every node at this port (a NodePort Service); None: inside the cluster only.
    pub node_port: Option<u16>,
}

impl PortSpec {
    /// The Service port's name: `<protocol>-<port>` (at most 9 characters, a valid IANA
    /// service name, unique per port and protocol).
    pub fn name(&self) -> String {
        format!("{}-{}", self.protocol.lower(), self.port)
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.port, self.protocol.lower())?;
        if let Some(n) = self.node_port {
            write!(f, ":{n}")?;
        }
        Ok(())
    }
}

/// Decimal digits only (no sign, no spaces), as a number in `range`.
fn number(s: &str, what: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("the {what} '{}' is not a number", crate::error::excerpt(s)));
    }
    let n: u32 = s.parse().map_err(|_| format!("the {what} '{s}' is not a number"))?;
    if !range.contains(&n) {
        return Err(format!("the {what} {n} is not in {}..{}", range.start(), range.end()));
    }
    Ok(n)
}

/// Parse one port spec; the error says what is wrong and shows the accepted form.
pub fn parse(s: &str) -> Result<PortSpec, String> {
    let form = "use PORT[/tcp|/udp][:NODEPORT], e.g. 8080/udp:30080";
    let fail = |why: String| format!("'{}': {why}; {form}", crate::error::excerpt(s));
    let (head, node) = match s.split_once(':') {
        Some((h, n)) => (h, Some(n)),
        None => (s, None),
    };
    let (port, proto) = match head.split_once('/') {
        Some((p, pr)) => (p, Some(pr)),
        None => (head, None),
    };
    let port = number(port, "container port", 1..=65535).map_err(fail)? as u16;
    let protocol = match proto.map(|p| p.to_ascii_lowercase()) {
        None => Protocol::Tcp,
        Some(p) if p == "tcp" => Protocol::Tcp,
        Some(p) if p == "udp" => Protocol::Udp,
        Some(p) => return Err(fail(format!("the protocol '{}' is not tcp or udp", crate::error::excerpt(&p)))),
    };
    let node_port = match node {
        None => None,
        Some(n) => {
            let range = (*NODE_PORT_RANGE.start() as u32)..=(*NODE_PORT_RANGE.end() as u32);
            match number(n, "node port", 0..=65535).map_err(fail)? {
                0 => None,
                v if range.contains(&v) => Some(v as u16),
                v => return Err(fail(format!("the node port {v} is not 0 (none) or in 30000..32767"))),
            }
        }
    };
    Ok(PortSpec { port, protocol, node_port })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dcae_forms() {
        let p = parse("8080/udp:30080").unwrap();
        assert_eq!((p.port, p.protocol, p.node_port), (8080, Protocol::Udp, Some(30080)));
        assert_eq!(p.name(), "udp-8080");
        assert_eq!(parse("9090").unwrap(), PortSpec { port: 9090, protocol: Protocol::Tcp, node_port: None });
        assert_eq!(parse("53/UDP").unwrap().protocol, Protocol::Udp);
        assert_eq!(parse("80/tcp:0").unwrap().node_port, None, "node port 0: not exposed, as DCAE");
        assert_eq!(parse("1/tcp:32767").unwrap().to_string(), "1/tcp:32767");
    }

    #[test]
    fn bad_specs_say_why() {
        for (bad, why) in [
            ("8080/tcp:99999", "node port 99999"),
            ("8080/tcp:80", "node port 80"),
            ("x", "container port 'x'"),
            ("8080/sctp:", "protocol 'sctp'"),
            ("8080/udp:", "node port ''"),
            ("", "container port ''"),
            ("0", "container port 0"),
            ("65536", "container port 65536"),
            ("+80", "container port '+80'"),
            ("80/", "protocol ''"),
            ("80:30080:1", "node port '30080:1'"),
            ("80 ; reboot", "container port"),
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains(why) && e.contains("8080/udp:30080"), "{bad}: {e}");
        }
    }
}
