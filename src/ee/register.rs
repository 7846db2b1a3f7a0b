//! `ee register`: `prepare` checks the arguments (name, address, user, port, namespace, the
//! credential) before anything connects, then, under the registry's lock, that the name is
//! free, and makes the driver's key if it is to be installed. The steps (`register`): reach the
//! machine with the credentials given (its host key learned into the store's known_hosts under
//! the chosen policy), optionally install our public key, prove a login with that key alone,
//! and only then forget the password. Nothing is stored until every step worked (`save`).

use std::path::PathBuf;

use crate::command::RemoteCommand;
use crate::ee::authorized_keys;
use crate::ee::driver_key::{KeyDoc, KeyType, DOC_ID, DOC_KIND};
use crate::ee::name::check_name;
use crate::ee::namespace::Namespace;
use crate::ee::record::{self, EeRecord, Registry};
use crate::error::{Error, Result};
use crate::inventory::{check_user, validate_addr, Auth, Host, HostKeyCheck};
use crate::lifecycle::state::{now_rfc3339, Lock, Store};
use crate::lifecycle::Runner;
use crate::secret::Secret;

/// What `ee register` is given (the command line's arguments).
#[derive(Clone, Debug)]
pub struct Request {
    /// The name commands use for it (`--ee NAME`).
    pub name: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    /// A file holding the login password (first line).
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the login password.
    pub password_env: Option<String>,
    /// A private key file to log in with.
    pub identity: Option<PathBuf>,
    pub install_key: bool,
    pub drop_password: bool,
    /// How its host key is learned: accept-new or strict.
    pub host_key_check: HostKeyCheck,
    /// OSM namespace `[nsi].ns.vnf.vdu[-count]`.
    pub namespace: Option<String>,
    /// The kind of driver key made if there is none yet.
    pub key_type: KeyType,
}

/// A registration ready to run; holds the registry's lock until it is dropped.
pub struct Prepared {
    _lock: Lock,
    registry: Registry,
    /// The record as it will be stored if every step works.
    record: EeRecord,
    /// The host built from the credentials given, with the policy given.
    first: Host,
    /// The driver's keys (when one is to be installed).
    pub keys: Option<KeyDoc>,
    opts: Options,
}

/// The password given by file or environment.
fn password(r: &Request) -> Result<Option<Secret>> {
    if let Some(p) = &r.password_file {
        let text = crate::input_limit::read_capped(p, 64 << 10, "--password-file")?;
        let line = text.lines().next().unwrap_or("");
        if line.is_empty() {
            return Err(Error::input(p.display().to_string(), "--password-file", "is empty"));
        }
        return Ok(Some(Secret::new(line)));
    }
    if let Some(v) = &r.password_env {
        return match std::env::var(v) {
            Ok(s) if !s.is_empty() => Ok(Some(Secret::new(s))),
            _ => Err(Error::input("--password-env", v.clone(), "is not set (or empty) in the environment")),
        };
    }
    Ok(None)
}

/// Check the request, take the registry's lock, and settle the record and the first login.
pub fn prepare(r: &Request, store: &Store, dry_run: bool) -> Result<Prepared> {
    check_name(&r.name).map_err(|m| Error::input("arguments", "NAME", m))?;
    validate_addr(&r.host).map_err(|m| Error::input("arguments", "--host", m))?;
    check_user(&r.user).map_err(|m| Error::input("arguments", "--user", m))?;
    if r.port == 0 {
        return Err(Error::input("arguments", "--port", "must be 1..65535"));
    }
    let namespace = r
        .namespace
        .as_deref()
        .map(|n| Namespace::parse(n).map_err(|m| Error::input("arguments", "--namespace", m)))
        .transpose()?;
    let pw = password(r)?;
    if let Some(p) = &r.identity {
        if !p.is_file() {
            return Err(Error::input("arguments", "--identity", format!("{} is not a file", p.display())));
        }
    }
    if pw.is_none() && r.identity.is_none() {
        return Err(Error::input(
            "arguments",
            "--password-file",
            "a first login needs a credential: --password-file, --password-env or --identity",
        ));
    }
    if r.drop_password && pw.is_none() {
        return Err(Error::input("arguments", "--drop-password", "there is no password to drop"));
    }
    let lock = Registry::lock(store)?;
    let registry = Registry::load(store)?;
    if registry.ees.iter().any(|e| e.name == r.name) {
        return Err(Error::input(
            "arguments",
            "NAME",
            format!("'{}' is registered already (ee show {0}; ee delete {0} to register it again)", r.name),
        ));
    }
    let keys = if r.install_key {
        if dry_run {
            KeyDoc::load(store)?
        } else {
            let _k = store.lock(DOC_ID, DOC_KIND)?;
            Some(KeyDoc::load_or_create(store, r.key_type)?.0)
        }
    } else {
        None
    };
    let policy = r.host_key_check;
    let record = EeRecord {
        id: record::new_id(),
        name: r.name.clone(),
        host: r.host.clone(),
        port: r.port,
        user: r.user.clone(),
        password: pw.as_ref().map(|s| s.expose().to_string()),
        identity_file: r.identity.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        host_key_check: policy,
        host_key: None,
        namespace: namespace.map(|n| n.to_string()),
        driver_keys: vec![],
        registered: now_rfc3339(),
    };
    let first = Host {
        host_key_check: policy,
        auth: Auth { driver_keys: vec![], ..record.to_host(store, None).auth },
        ..record.to_host(store, None)
    };
    let opts = Options { install_key: r.install_key, drop_password: r.drop_password };
    Ok(Prepared { _lock: lock, registry, record, first, keys, opts })
}

/// Run the steps on the machine; the runner is closed after them.
pub async fn run(p: &Prepared, rt: Runner) -> Result<EeRecord> {
    let r = register(&rt, &p.first, p.record.clone(), p.keys.as_ref(), p.opts).await;
    rt.close().await;
    r
}

/// Store the record the steps returned, with the host key they learned.
pub fn save(p: &mut Prepared, store: &Store, mut rec: EeRecord) -> Result<EeRecord> {
    rec.host_key = learned_key(store, &rec.host, rec.port);
    p.registry.ees.push(rec.clone());
    p.registry.save(store)?;
    Ok(rec)
}

/// The host key fingerprints recorded for `host:port` in the store's known_hosts.
fn learned_key(store: &Store, host: &str, port: u16) -> Option<String> {
    crate::ssh::host_key::recorded_fingerprint(&record::known_hosts(store), host, port)
}

/// What a registration does beyond checking the machine answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub install_key: bool,
    pub drop_password: bool,
}

const CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A trivial command: the machine answers and runs commands as this user.
pub fn answer_check() -> RemoteCommand {
    RemoteCommand::new("id -un").with_timeout(Some(CHECK_LIMIT))
}

/// Register `rec` (its id, name, address, user, credentials and policy filled in). `first` is
/// the host built from the credentials given, with the policy given (accept-new learns the key).
pub async fn register(
    rt: &Runner,
    first: &Host,
    mut rec: EeRecord,
    keys: Option<&KeyDoc>,
    opts: Options,
) -> Result<EeRecord> {
    rt.phase("check", &[first], false);
    rt.exec(first, answer_check()).await?;
    if let (true, Some(keys)) = (opts.install_key, keys) {
        rt.phase("install key", &[first], false);
        rt.exec(first, authorized_keys::add(keys.current.blob())?).await?;
        rt.forget(first).await;
        // Prove the key alone logs in (host key now checked strictly) before relying on it.
        let key_only = Host {
            auth: Auth { driver_keys: vec![keys.current.secret()], ..Auth::default() },
            host_key_check: if first.host_key_check == crate::inventory::HostKeyCheck::Off {
                first.host_key_check
            } else {
                crate::inventory::HostKeyCheck::Strict
            },
            ..first.clone()
        };
        rt.phase("verify key login", &[&key_only], false);
        rt.exec(&key_only, answer_check()).await?;
        rt.forget(&key_only).await;
        rec.driver_keys = vec![keys.current.fingerprint.clone()];
        if opts.drop_password {
            rec.password = None;
        }
    }
    Ok(rec)
}
