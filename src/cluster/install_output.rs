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
/// Every value is checked before it is stored and reused: the server is an `https://` URL
/// ([`check_server`]), the CA hash 64 hex digits, the CA a well-formed PEM block ([`ca_pem`]).
pub fn parse(stdout: &str) -> Result<MasterOutput, String> {
    let (mut token, mut server, mut hash, mut key) = (None, None, None, None);
    let mut in_pem = false;
    for line in stdout.lines() {
        let l = line.trim_end();
        if l == BEGIN {
            in_pem = true;
        }
        if in_pem {
            in_pem = l != END;
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
    let pem = ca_pem(stdout).map_err(|e| missing(&format!("complete CA certificate PEM block ({e})")))?;
    let hash = hash.ok_or_else(|| missing("'ssl_ca_cert_hash:' line"))?;
    let hash = check_ca_hash(&hash).map_err(|_| missing("valid 'ssl_ca_cert_hash:' (64 hex digits)"))?;
    let server = server.ok_or_else(|| missing("'server:' line"))?;
    let server = check_server(&server)?;
    Ok(MasterOutput {
        token: Secret::new(token.ok_or_else(|| missing("'token:' line"))?),
        server,
        ca_hash: hash,
        certificate_key: key.map(Secret::new),
        ca_pem: pem,
    })
}

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

/// The first CA certificate PEM block in `text`, as `BEGIN\n<base64 lines>\nEND\n`. Its lines
/// must be base64 (the block goes into the VIM record as it is).
pub fn ca_pem(text: &str) -> Result<String, String> {
    let mut lines = text.lines().map(str::trim_end).skip_while(|l| *l != BEGIN);
    let mut pem = match lines.next() {
        Some(b) => format!("{b}\n"),
        None => return Err(format!("no {BEGIN} line")),
    };
    let base64 = |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    for l in lines {
        pem.push_str(l);
        pem.push('\n');
        if l == END {
            return Ok(pem);
        }
        if !base64(l) || pem.len() > 64 * 1024 {
            return Err("a line in the PEM block is not base64".into());
        }
    }
    Err(format!("no {END} line"))
}

/// The API server URL as printed by the node: `https://` and then only host, port and path
/// characters (no user info, query, quote or whitespace), at most 512 characters.
pub fn check_server(s: &str) -> Result<String, String> {
    let rest = s.strip_prefix("https://").unwrap_or("");
    let ok = |b: u8| b.is_ascii_alphanumeric() || b".:[]_/-".contains(&b);
    if !rest.is_empty() && s.len() <= 512 && rest.bytes().all(ok) {
        Ok(s.to_string())
    } else {
        Err(format!("the server {:?} is not an https:// URL", s.chars().take(80).collect::<String>()))
    }
}

/// The CA hash: 64 hex digits (a `sha256:` prefix dropped), lower-cased.
pub fn check_ca_hash(s: &str) -> Result<String, String> {
    let h = s.trim().trim_start_matches("sha256:");
    if h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(h.to_ascii_lowercase())
    } else {
        Err(format!("{:?} is not 64 hex digits", h.chars().take(80).collect::<String>()))
    }
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

    #[test]
    fn values_that_could_steer_a_later_command_or_the_record_are_refused() {
        let e = parse(&OUT.replace("server:https://10.10.0.91:16443", "server:https://x:1' ; id")).unwrap_err();
        assert!(e.contains("not an https:// URL"), "{e}");
        let e = parse(&OUT.replace("server:https://", "server:http://")).unwrap_err();
        assert!(e.contains("not an https:// URL"), "{e}");
        let e = parse(&OUT.replace("MIIC5zCCAc+gAwIBAgIBADANBgkq", "MIIC5z\u{1b}[2J")).unwrap_err();
        assert!(e.contains("not base64"), "{e}");
        let e = parse(&OUT.replace("9f86d081", "9f86d08z")).unwrap_err();
        assert!(e.contains("64 hex digits"), "{e}");
        assert_eq!(check_server("https://[fd00::1]:6443").unwrap(), "https://[fd00::1]:6443");
        assert!(check_server("https://u:p@h:6443").is_err() && check_server("https://").is_err());
        assert_eq!(check_ca_hash(&format!("sha256:{}", "AB".repeat(32))).unwrap(), "ab".repeat(32));
        assert!(ca_pem("-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap_err().contains("END"));
        assert!(ca_pem("nothing").unwrap_err().contains("BEGIN"));
    }
}
