//! Masking secrets in what nodes print. Install scripts and `kubeadm` print the join token and
//! the certificate key; the driver must parse them (from the captured stdout) but they must
//! never reach an event, a log line or an error message. Redaction applies to the streamed
//! copy only. In every mode, the userinfo of URLs a node prints (a proxy or repository URL with
//! its password, echoed by apt, curl or helm) is masked too.

use crate::mask::MASK;
use crate::url_mask::mask_userinfo;

/// How a command's streamed output is treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Redact {
    /// Stream as is (URL userinfo masked).
    #[default]
    None,
    /// Mask the values kubeadm and Tacker-contract scripts print: `token:`, `certificate_key:`,
    /// `--token X`, `--certificate-key X`, and the line after `Using certificate key:`.
    Kubeadm,
    /// The whole output is a secret (e.g. a bearer token): stream nothing.
    All,
    /// Stdout is a secret (Helm's JSON carries a release's values): stream none of it; stderr is
    /// the command's error message, streamed and kept for the error as with `None`, so a failed
    /// probe says why it failed instead of showing only its command.
    Stdout,
}

impl Redact {
    /// How the command's stderr is shown: as stdout, except under `Stdout`.
    pub fn for_stderr(self) -> Redact {
        match self {
            Redact::Stdout => Redact::None,
            m => m,
        }
    }
}

/// Line-by-line masker; keeps the one bit of state kubeadm's two-line key output needs.
#[derive(Debug, Default)]
pub struct Redactor {
    mode: Redact,
    mask_next: bool,
}

const KEY_PREFIXES: [&str; 3] = ["token:", "certificate_key:", "bearer_token:"];
const FLAGS: [&str; 2] = ["--token", "--certificate-key"];

impl Redactor {
    pub fn new(mode: Redact) -> Self {
        Redactor { mode, mask_next: false }
    }

    /// The line to show instead of `line`, or `None` to show nothing.
    pub fn line(&mut self, line: &str) -> Option<String> {
        match self.mode {
            Redact::None => Some(mask_userinfo(line).into_owned()),
            Redact::All | Redact::Stdout => None,
            Redact::Kubeadm => Some(mask_userinfo(&self.kubeadm(line)).into_owned()),
        }
    }

    fn kubeadm(&mut self, line: &str) -> String {
        if std::mem::take(&mut self.mask_next) && !line.trim().is_empty() {
            return MASK.to_string();
        }
        let trimmed = line.trim_start();
        if trimmed.trim_end().ends_with("Using certificate key:") {
            self.mask_next = true;
            return line.to_string();
        }
        for p in KEY_PREFIXES {
            if trimmed.strip_prefix(p).is_some_and(|rest| !rest.trim().is_empty()) {
                return format!("{}{p}{MASK}", &line[..line.len() - trimmed.len()]);
            }
        }
        // `--token X`, `--token=X`, `--certificate-key X` anywhere in the line.
        let mut out = Vec::new();
        let mut words = line.split(' ').peekable();
        while let Some(w) = words.next() {
            if FLAGS.contains(&w) {
                out.push(w.to_string());
                if let Some(v) = words.next() {
                    out.push(if v.is_empty() || v == "\\" { v.to_string() } else { MASK.to_string() });
                }
            } else if let Some(flag) = FLAGS.iter().find(|f| w.starts_with(&format!("{f}="))) {
                out.push(format!("{flag}={MASK}"));
            } else if is_bootstrap_token(w) {
                // kubeadm also prints tokens in prose: `[bootstrap-token] Using token: abcdef.0123…`.
                out.push(MASK.to_string());
            } else {
                out.push(w.to_string());
            }
        }
        out.join(" ")
    }
}

/// `[a-z0-9]{6}.[a-z0-9]{16}`: the shape of a kubeadm bootstrap token.
fn is_bootstrap_token(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() == 23
        && b[6] == b'.'
        && b.iter().enumerate().all(|(i, c)| i == 6 || c.is_ascii_lowercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mode: Redact, lines: &[&str]) -> Vec<Option<String>> {
        let mut r = Redactor::new(mode);
        lines.iter().map(|l| r.line(l)).collect()
    }

    #[test]
    fn kubeadm_output_loses_its_secrets_but_keeps_its_shape() {
        let out = run(
            Redact::Kubeadm,
            &[
                "token:abcdef.0123456789abcdef",
                "server:https://10.0.0.1:6443",
                "certificate_key:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "[upload-certs] Using certificate key:",
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "  kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef \\",
                "\t--discovery-token-ca-cert-hash sha256:1234 --control-plane --certificate-key 9f86d0",
                "kubeadm join x --token=abcdef.0123456789abcdef",
                "ssl_ca_cert_hash:1234",
                "[bootstrap-token] Using token: zmcwrz.s860bebx6lncjhbs",
            ],
        );
        let out: Vec<String> = out.into_iter().map(Option::unwrap).collect();
        assert_eq!(out[0], "token:********");
        assert_eq!(out[1], "server:https://10.0.0.1:6443");
        assert_eq!(out[2], "certificate_key:********");
        assert_eq!(out[4], "********");
        assert_eq!(out[5], "  kubeadm join 10.0.0.1:6443 --token ******** \\");
        assert!(out[6].ends_with("--certificate-key ********"), "{}", out[6]);
        assert_eq!(out[7], "kubeadm join x --token=********");
        assert_eq!(out[8], "ssl_ca_cert_hash:1234", "the CA hash is public");
        assert_eq!(out[9], "[bootstrap-token] Using token: ********");
        assert!(out.iter().all(|l| !l.contains("0123456789abcdef") && !l.contains("9f86d0")));
    }

    #[test]
    fn all_hides_everything_and_none_nothing() {
        assert_eq!(run(Redact::All, &["secret"]), vec![None]);
        assert_eq!(run(Redact::None, &["token:x"]), vec![Some("token:x".to_string())]);
    }

    #[test]
    fn url_passwords_a_node_prints_are_masked_in_every_mode() {
        let line = "E: Failed to fetch http://user1:Pr0xy@proxy.lab:3128/debian";
        for mode in [Redact::None, Redact::Kubeadm] {
            assert_eq!(
                run(mode, &[line]),
                vec![Some("E: Failed to fetch http://********@proxy.lab:3128/debian".into())]
            );
        }
    }
}
