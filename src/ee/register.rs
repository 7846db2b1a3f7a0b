//! `ee register`: `prepare` checks the arguments (name, address, user, port, namespace, the
//! credential) before anything connects, then, under the registry's lock, that the name is
//! free, and makes the driver's key if it is to be installed. The steps (`register`): reach the
//! machine with the credentials given (its host key learned into the store's known_hosts under
//! the chosen policy), optionally install our public key, prove a login with that key alone,
//! and only then forget the password. Nothing is stored until every step worked (`save`).
//!
//! With no credential at all, the first login is with the driver's own key: OSM's normal flow,
//! where `mgmt-driver key` went into the VM by cloud-init before it is registered. The private
//! half is sealed in the store and never exported, so this is the only way to use it for a
//! registration; the key must exist already (a VM cannot hold a key not made yet).

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
    let with_driver_key = pw.is_none() && r.identity.is_none();
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
    let keys = if with_driver_key {
        Some(KeyDoc::load(store)?.ok_or_else(|| {
            Error::input(
                "arguments",
                "--password-file",
                "with no credential the first login is with the driver's key, and there is none yet: \
                 `mgmt-driver key` makes it (for the VM's cloud-init), or give --password-file, \
                 --password-env or --identity",
            )
        })?)
    } else if r.install_key {
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
        driver_keys: match (&keys, with_driver_key) {
            (Some(k), true) => vec![k.current.fingerprint.clone()],
            _ => vec![],
        },
        registered: now_rfc3339(),
    };
    // The first login: the credentials given, or the driver's current key alone.
    let driver_keys = match (&keys, with_driver_key) {
        (Some(k), true) => vec![k.current.secret()],
        _ => vec![],
    };
    let first = Host {
        host_key_check: policy,
        auth: Auth { driver_keys, ..record.to_host(store, None).auth },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ee::driver_key::KeyType;
    use crate::lifecycle::state_key::StateKey;

    fn request(name: &str) -> Request {
        Request {
            name: name.into(),
            host: "198.18.0.7".into(),
            port: 22,
            user: "ops".into(),
            password_file: None,
            password_env: None,
            identity: None,
            install_key: false,
            drop_password: false,
            host_key_check: HostKeyCheck::AcceptNew,
            namespace: None,
            key_type: KeyType::Ed25519,
        }
    }

    /// OSM's flow: the key went in by cloud-init, the VM is registered with no credential. The
    /// first login offers the driver's key alone (learning the host key as asked), and the
    /// record holds the key, no password. Without a key yet, the error says how to make one.
    #[test]
    fn with_no_credential_the_first_login_is_the_driver_key() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open_with_key(&d.path().join("state"), StateKey::at(d.path().join("k"))).unwrap();
        let e = prepare(&request("vm-1"), &store, false).err().expect("no key yet");
        assert!(e.to_string().contains("mgmt-driver key"), "{e}");
        let (doc, _) = KeyDoc::load_or_create(&store, KeyType::Ed25519).unwrap();
        let p = prepare(&request("vm-1"), &store, false).unwrap();
        assert_eq!(p.first.auth.driver_keys.len(), 1);
        assert_eq!(p.first.auth.driver_keys[0].expose(), doc.current.private_key);
        assert!(p.first.auth.password.is_none() && p.first.auth.identity_file.is_none());
        assert_eq!(p.first.host_key_check, HostKeyCheck::AcceptNew);
        assert_eq!(p.record.driver_keys, std::slice::from_ref(&doc.current.fingerprint));
        assert!(p.record.password.is_none());
        // The record, as later commands use it, logs in with the key.
        assert_eq!(p.record.to_host(&store, Some(&doc)).auth.driver_keys.len(), 1);
        drop(p);
        // --drop-password still needs a password to drop.
        let r = Request { install_key: true, drop_password: true, ..request("vm-2") };
        assert!(prepare(&r, &store, false).err().unwrap().to_string().contains("--drop-password"));
    }
}
