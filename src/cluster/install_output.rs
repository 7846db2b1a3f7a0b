//! Parsing what the main master's install script prints (Tacker's contract): `token:`,
//! `server:`, `ssl_ca_cert_hash:`, `certificate_key:` lines and the CA certificate's PEM block,
//! wherever they appear among the script's other output.

use crate::secret::Secret;

#[derive(Clone, Debug)]
pub struct MasterOutput {
    pub token: Secret,
    pub server: String,
    pub ca_hash: String,
    pub certificate_key: Option<Secret>,
    pub ca_pem: String,
}

/// The fields of the main master's output, or what is missing (the caller names node and command).
pub fn parse(stdout: &str) -> Result<MasterOutput, String> {
    let (mut token, mut server, mut hash, mut key) = (None, None, None, None);
    let mut pem: Option<String> = None;
    let mut in_pem = false;
    for line in stdout.lines() {
        let l = line.trim_end();
        if l == "-----BEGIN CERTIFICATE-----" && pem.is_none() {
            in_pem = true;
            pem = Some(String::new());
        }
        if in_pem {
            let p = pem.as_mut().expect("set above");
            p.push_str(l);
            p.push('\n');
            if l == "-----END CERTIFICATE-----" {
                in_pem = false;
            }
            continue;
        }
        let value = |p: &str| l.strip_prefix(p).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if let Some(v) = value("token:") {
            token = Some(v);
        } else if let Some(v) = value("server:") {
            server = Some(v);
        } else if let Some(v) = value("ssl_ca_cert_hash:") {
            hash = Some(v.trim_start_matches("sha256:").to_string());
        } else if let Some(v) = value("certificate_key:") {
            key = Some(v);
        }
    }
    let missing = |what: &str| {
        format!(
            "the install script's output has no {what} (Tacker's contract: token:, server:, ssl_ca_cert_hash:, CA PEM)"
        )
    };
    let pem = pem.filter(|_| !in_pem).ok_or_else(|| missing("complete CA certificate PEM block"))?;
    let hash = hash.ok_or_else(|| missing("'ssl_ca_cert_hash:' line"))?;
    if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(missing("valid 'ssl_ca_cert_hash:' (64 hex digits)"));
    }
    Ok(MasterOutput {
        token: Secret::new(token.ok_or_else(|| missing("'token:' line"))?),
        server: server.ok_or_else(|| missing("'server:' line"))?,
        ca_hash: hash,
        certificate_key: key.map(Secret::new),
        ca_pem: pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str =
        "[init] Using Kubernetes version: v1.31.2\nnoise token: in the middle\ntoken:abcdef.0123456789abcdef\n\
server:https://10.10.0.91:16443\n-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBADANBgkq\n-----END CERTIFICATE-----\n\
ssl_ca_cert_hash:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\ncertificate_key:1111\nDone\n";

    #[test]
    fn finds_every_field_among_other_output() {
        let o = parse(OUT).unwrap();
        assert_eq!(o.token.expose(), "abcdef.0123456789abcdef");
        assert_eq!(o.server, "https://10.10.0.91:16443");
        assert_eq!(o.ca_hash.len(), 64);
        assert_eq!(o.certificate_key.unwrap().expose(), "1111");
        assert_eq!(o.ca_pem, "-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBADANBgkq\n-----END CERTIFICATE-----\n");
    }

    #[test]
    fn missing_fields_are_named() {
        let e = parse(&OUT.replace("token:abc", "tok:abc")).unwrap_err();
        assert!(e.contains("no 'token:' line"), "{e}");
        let e = parse(&OUT.replace("-----END CERTIFICATE-----\n", "")).unwrap_err();
        assert!(e.contains("PEM"), "{e}");
    }
}
