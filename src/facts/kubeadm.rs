//! Facts of a master's control plane: what the install script printed, join material, the API
//! server and its CA. Tokens and keys are secrets: their commands' output is never streamed
//! as is, and no parser's message quotes what it refused.

use crate::cluster::install_output::{self, MasterOutput};
use crate::cluster::node_cmd;
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::{last_line, Fact, Wait};
use crate::redact::Redact;
use crate::secret::Secret;

/// The install script's run on a joining master or a worker (`script`: the line
/// `node_cmd::install` built): nothing is read from it, its success is the fact. Streamed with
/// kubeadm's secrets masked, within the install bound.
pub struct Installed {
    pub script: String,
}

impl Fact for Installed {
    type Value = ();

    fn what(&self) -> String {
        "nothing".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.script.clone()).with_redact(Redact::Kubeadm))
    }

    fn wait(&self) -> Wait {
        Wait::Install
    }

    fn placeholder(&self) {}

    fn parse(&self, _out: &str) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// What the install script printed on the main master: join token, API server, CA hash and
/// certificate, certificate key, each checked by `install_output::parse` (they go into the
/// record, the VIM and other nodes' commands). A plan goes on with stand-ins naming each one
/// and the server the cluster IP will give.
pub struct MainMasterInstalled<'a> {
    pub script: String,
    pub cluster_ip: &'a str,
}

impl Fact for MainMasterInstalled<'_> {
    type Value = MasterOutput;

    fn what(&self) -> String {
        "the cluster facts (token, server, CA)".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(self.script.clone()).with_redact(Redact::Kubeadm))
    }

    fn wait(&self) -> Wait {
        Wait::Install
    }

    fn placeholder(&self) -> MasterOutput {
        MasterOutput {
            token: Secret::new("<token>"),
            server: format!("https://{}:6443", self.cluster_ip),
            ca_hash: "<ca-hash>".into(),
            certificate_key: Some(Secret::new("<certificate-key>")),
            ca_pem: "<CA PEM>".into(),
        }
    }

    fn parse(&self, out: &str) -> std::result::Result<MasterOutput, String> {
        install_output::parse(out)
    }
}

/// A fresh bootstrap token (`kubeadm token create`): the last non-empty line, when it has a
/// token's shape (`[a-z0-9]{6}.[a-z0-9]{16}`). The whole output is the secret: never streamed.
pub struct JoinToken;

impl Fact for JoinToken {
    type Value = Secret;

    fn what(&self) -> String {
        "a bootstrap token".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::token_create()).with_redact(Redact::All))
    }

    fn placeholder(&self) -> Secret {
        Secret::new("<token>")
    }

    fn parse(&self, out: &str) -> std::result::Result<Secret, String> {
        parse_token(out)
    }
}

/// The last non-empty line, when it is a bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`). The
/// message never quotes the output: it may be a secret.
fn parse_token(out: &str) -> std::result::Result<Secret, String> {
    let t = last_line(out);
    let ok = t.len() == 23
        && t.as_bytes()[6] == b'.'
        && t.chars().filter(|c| *c != '.').all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(Secret::new(t))
    } else {
        Err("the last line is not a bootstrap token".into())
    }
}

/// A fresh certificate key for a joining master (`kubeadm init phase upload-certs`, which
/// uploads the control-plane certificates): the last non-empty line, 64 hex digits.
pub struct CertificateKey;

impl Fact for CertificateKey {
    type Value = Secret;

    fn what(&self) -> String {
        "a certificate key".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::certificate_key()).with_redact(Redact::Kubeadm))
    }

    fn placeholder(&self) -> Secret {
        Secret::new("<certificate-key>")
    }

    fn parse(&self, out: &str) -> std::result::Result<Secret, String> {
        parse_certificate_key(out)
    }
}

fn parse_certificate_key(out: &str) -> std::result::Result<Secret, String> {
    let k = last_line(out);
    if k.len() == 64 && k.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(Secret::new(k))
    } else {
        Err("the last line is not a 64-hex certificate key".into())
    }
}

/// The API server's URL from the admin kubeconfig, held to `install_output::check_server`'s
/// shape (https, a host, no userinfo): it goes into the VIM record. A plan assumes the
/// cluster IP's.
pub struct ApiServer<'a> {
    pub cluster_ip: &'a str,
}

impl Fact for ApiServer<'_> {
    type Value = String;

    fn what(&self) -> String {
        "the API server URL".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::server_url()))
    }

    fn placeholder(&self) -> String {
        format!("https://{}:6443", self.cluster_ip)
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        install_output::check_server(out.trim())
    }
}

/// The cluster CA's certificate: one well-formed PEM block (`install_output::ca_pem`), as it
/// goes into the VIM record.
pub struct CaPem;

impl Fact for CaPem {
    type Value = String;

    fn what(&self) -> String {
        "the CA certificate".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::ca_pem()))
    }

    fn placeholder(&self) -> String {
        "<CA PEM>".into()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        install_output::ca_pem(out)
    }
}

/// The SHA-256 of the CA's public key, 64 hex digits (`install_output::check_ca_hash`): nodes
/// join with `--discovery-token-ca-cert-hash`.
pub struct CaHash;

impl Fact for CaHash {
    type Value = String;

    fn what(&self) -> String {
        "the CA hash".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(node_cmd::ca_hash()))
    }

    fn placeholder(&self) -> String {
        "<ca-hash>".into()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        install_output::check_ca_hash(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testkit::{planned, read, unreadable, value};

    #[tokio::test]
    async fn a_join_install_reads_nothing() {
        let f = Installed { script: "install.sh worker".into() };
        let (sent, got) = read(&f, "anything at all\n").await;
        assert_eq!(sent, "install.sh worker");
        got.unwrap();
        planned(&f).await;
        assert_eq!((f.wait(), f.command().unwrap().redact), (Wait::Install, Redact::Kubeadm));
    }

    #[tokio::test]
    async fn the_main_master_output_checked() {
        let f = MainMasterInstalled { script: "install.sh main".into(), cluster_ip: "10.0.0.100" };
        let hash = "ab".repeat(32);
        let ok = format!(
            "[init] ...\ntoken: abcdef.0123456789abcdef\nserver: https://10.0.0.100:6443\n\
             ssl_ca_cert_hash: {hash}\ncertificate_key: {}\nssl_ca_cert:\n\
             -----BEGIN CERTIFICATE-----\nTUlJQw==\n-----END CERTIFICATE-----\n",
            "cd".repeat(32)
        );
        let (sent, got) = read(&f, &ok).await;
        assert_eq!(sent, "install.sh main");
        let m = got.map_err(|e| e.to_string()).unwrap();
        assert_eq!((m.server.as_str(), m.ca_hash.as_str()), ("https://10.0.0.100:6443", hash.as_str()));
        unreadable(&f, "token: $(reboot)\n").await;
        let p = planned(&f).await;
        assert_eq!((p.server.as_str(), p.token.expose()), ("https://10.0.0.100:6443", "<token>"));
        assert_eq!(f.wait(), Wait::Install);
    }

    #[tokio::test]
    async fn a_token_by_shape_never_quoted() {
        let f = JoinToken;
        let (sent, got) = read(&f, "W0101 a warning\nabcdef.0123456789abcdef\n").await;
        assert_eq!(sent, "kubeadm token create --ttl 2h");
        assert_eq!(got.unwrap().expose(), "abcdef.0123456789abcdef");
        for bad in ["ABCDEF.0123456789ABCDEF", "abcdef0123456789abcdef0", "abcdef.0123456789abcde$"] {
            let m = unreadable(&f, bad).await;
            assert!(!m.contains(bad) && m.contains("bootstrap token"), "{m}");
        }
        assert_eq!(planned(&f).await.expose(), "<token>");
        assert_eq!(f.command().unwrap().redact, Redact::All);
    }

    #[tokio::test]
    async fn a_certificate_key_64_hex_never_quoted() {
        let f = CertificateKey;
        let key = "0f".repeat(32);
        let (sent, got) = read(&f, &format!("[upload-certs] Using certificate key:\n{key}\n")).await;
        assert_eq!(sent, "kubeadm init phase upload-certs --upload-certs");
        assert_eq!(got.unwrap().expose(), key);
        let bad = format!("{key}0");
        assert!(!unreadable(&f, &bad).await.contains(&bad));
        assert_eq!(planned(&f).await.expose(), "<certificate-key>");
    }

    #[tokio::test]
    async fn the_server_url_https_without_userinfo() {
        let f = ApiServer { cluster_ip: "10.0.0.100" };
        let (sent, got) = read(&f, "https://10.0.0.100:6443\n").await;
        assert!(sent.contains("kubectl config view --raw"), "{sent}");
        assert_eq!(got.unwrap(), "https://10.0.0.100:6443");
        unreadable(&f, "https://u:p@h:6443").await;
        unreadable(&f, "").await;
        assert_eq!(planned(&f).await, "https://10.0.0.100:6443");
    }

    #[tokio::test]
    async fn the_ca_one_pem_block() {
        let f = CaPem;
        let pem = "-----BEGIN CERTIFICATE-----\nTUlJQw==\n-----END CERTIFICATE-----\n";
        let (sent, got) = read(&f, pem).await;
        assert_eq!(sent, "cat /etc/kubernetes/pki/ca.crt");
        assert!(got.unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
        unreadable(&f, "not a certificate").await;
        assert_eq!(planned(&f).await, "<CA PEM>");
    }

    #[tokio::test]
    async fn the_ca_hash_64_hex() {
        let f = CaHash;
        let (sent, got) = read(&f, &format!("{}\n", "AB".repeat(32))).await;
        assert!(sent.contains("openssl x509 -pubkey"), "{sent}");
        assert_eq!(got.unwrap(), "ab".repeat(32));
        assert_eq!(value(&f, &format!("sha256:{}", "ab".repeat(32))).await, "ab".repeat(32));
        unreadable(&f, "abc").await;
        assert_eq!(planned(&f).await, "<ca-hash>");
    }
}
