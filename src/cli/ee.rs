//! `mgmt-driver key` and `mgmt-driver ee …`: the driver's own SSH key (show, rotate,
//! finish-rotation) and the registered execution environments (register, list, show, delete).
//! Arguments are checked before anything connects (exit 2); the steps are in `ee/`.
// Until the family's printing goes through the renderer (issue 19): its orchestration is being
// moved to `ee/` (issue 19), and then its prints become `console` calls.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::ee::driver_key::{KeyDoc, KeyType};
use crate::ee::namespace::Namespace;
use crate::ee::record::{self, EeRecord, Registry};
use crate::ee::{register, rotate};
use crate::error::{exit, Error, Result};
use crate::inventory::{check_user, validate_addr, Auth, Host, HostKeyCheck};
use crate::lifecycle::state::{now_rfc3339, Store};
use crate::lifecycle::Timeouts;
use crate::render::Output;
use crate::secret::Secret;

/// Registered machines answer quickly or are down: retry briefly, not like a booting VM.
const EE_DEFAULTS: Defaults = Defaults::EE;

/// `--state-dir`, declared once for every command (`cli/common.rs`).
pub use crate::cli::common::StateDir as StoreArgs;

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Print the driver's public key (made on first use): one OpenSSH line for cloud-init.
    Show,
    /// Make a new key and install it on every registered EE; the old key is kept (and offered)
    /// until every EE has the new one, then removed from them and from the store.
    Rotate,
    /// Resume a pending rotation (EEs that were unreachable): install, then retire the old key.
    FinishRotation,
}

#[derive(Args, Debug)]
pub struct KeyArgs {
    #[command(subcommand)]
    pub cmd: Option<KeyCmd>,
    /// The kind of key made (first use, or a rotation): ed25519 or RSA 4096.
    #[arg(long = "type", value_enum, default_value = "ed25519", global = true)]
    pub kind: KeyType,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Subcommand, Debug)]
pub enum EeCmd {
    /// Register an existing machine: check it answers, learn its host key, optionally install
    /// the driver's key and drop the password.
    Register(RegisterArgs),
    /// The registered machines (`--namespace .ns[.vnf]` filters).
    List {
        /// Only the EEs within this OSM namespace (a prefix of theirs).
        #[arg(long, value_name = "[nsi].ns[.vnf[.vdu[-count]]]")]
        namespace: Option<String>,
    },
    /// One registered machine, by name or id.
    Show {
        /// The EE's name or id.
        ee: String,
    },
    /// Forget a registered machine (`--remove-key`: first remove the driver's keys from it).
    Delete {
        /// The EE's name or id.
        ee: String,
        /// First log in and remove the driver's keys from the machine's authorized_keys.
        #[arg(long)]
        remove_key: bool,
    },
}

#[derive(Args, Debug)]
pub struct RegisterArgs {
    /// The name commands use for it (`--ee NAME`).
    pub name: String,
    /// Its address: an IP address or a host name.
    #[arg(long)]
    pub host: String,
    /// Its SSH port.
    #[arg(long, default_value_t = 22)]
    pub port: u16,
    /// The user to log in as.
    #[arg(long)]
    pub user: String,
    /// A file holding the login password (first line).
    #[arg(long, value_name = "FILE", group = "cred")]
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the login password.
    #[arg(long, value_name = "VAR", group = "cred")]
    pub password_env: Option<String>,
    /// A private key file to log in with.
    #[arg(long, value_name = "FILE", group = "cred")]
    pub identity: Option<PathBuf>,
    /// Install the driver's public key in the user's ~/.ssh/authorized_keys, then prove a
    /// login with it.
    #[arg(long)]
    pub install_key: bool,
    /// With --install-key: keep no password once the key login works.
    #[arg(long, requires = "install_key")]
    pub drop_password: bool,
    /// How its host key is learned into the store's known_hosts: accept-new (record it on
    /// first contact) or strict (it must be there already).
    #[arg(long, value_enum, default_value = "accept-new")]
    pub host_key_check: RegisterPolicy,
    /// OSM namespace `[nsi].ns.vnf.vdu[-count]`, e.g. `.nsid.vnfid.vduid-2`.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The kind of driver key made if there is none yet.
    #[arg(long = "key-type", value_enum, default_value = "ed25519")]
    pub key_type: KeyType,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum RegisterPolicy {
    Strict,
    AcceptNew,
}

/// The hosts of `--ee NAME|ID …`, ready to connect (for the fan-out commands and primitives).
pub fn ee_hosts(store: &Store, names: &[String]) -> Result<Vec<Host>> {
    let reg = Registry::load(store)?;
    let keys = KeyDoc::load(store)?;
    names.iter().map(|n| reg.find(n, "--ee").map(|r| r.to_host(store, keys.as_ref()))).collect()
}

fn print_doc(ctx: &Ctx, op: &str, ok: bool, result: Value, errors: Vec<ErrorItem>, plain: impl FnOnce()) {
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new(op, ctx.run.dry_run);
            env.ok = ok;
            env.result = result;
            env.errors = errors;
            env.print(ctx.output);
        }
        _ => plain(),
    }
}

fn key_doc_json(k: &KeyDoc, reg: &Registry, made: bool) -> Value {
    json!({
        "publicKey": k.current.openssh,
        "fingerprint": k.current.fingerprint,
        "type": k.current.kind,
        "created": k.current.created,
        "generated": made,
        "rotation": {
            "pending": k.previous.is_some(),
            "previousFingerprint": k.previous.as_ref().map(|p| p.fingerprint.clone()),
            "pendingOn": rotate::pending(reg, k),
        },
    })
}

pub async fn key(a: KeyArgs, ctx: &Ctx) -> Result<i32> {
    let store = ctx.store(&a.store.state_dir)?;
    let rotate_new = matches!(a.cmd, Some(KeyCmd::Rotate));
    match a.cmd.unwrap_or(KeyCmd::Show) {
        KeyCmd::Show => {
            let (k, made) = if ctx.run.dry_run {
                match KeyDoc::load(&store)? {
                    Some(k) => (k, false),
                    None => return Err(Error::input("key", "dry run", "no key yet (a real run makes one)")),
                }
            } else {
                let _lock = store.lock(crate::ee::driver_key::DOC_ID, crate::ee::driver_key::DOC_KIND)?;
                KeyDoc::load_or_create(&store, a.kind)?
            };
            let reg = Registry::load(&store)?;
            let doc = key_doc_json(&k, &reg, made);
            print_doc(ctx, "key", true, doc, vec![], || {
                println!("{}", k.current.openssh);
                if k.previous.is_some() {
                    eprintln!(
                        "note: a key rotation is pending on: {} (mgmt-driver key finish-rotation)",
                        rotate::pending(&reg, &k).join(", ")
                    );
                }
            });
            Ok(exit::OK)
        }
        KeyCmd::Rotate | KeyCmd::FinishRotation => {
            let _reg_lock = Registry::lock(&store)?;
            let _key_lock = store.lock(crate::ee::driver_key::DOC_ID, crate::ee::driver_key::DOC_KIND)?;
            let mut keys = KeyDoc::load(&store)?
                .ok_or_else(|| Error::input("key", "rotate", "there is no key yet: `mgmt-driver key` makes one"))?;
            if rotate_new {
                if keys.previous.is_some() {
                    return Err(Error::input(
                        "key",
                        "rotate",
                        "a rotation is pending already: finish it first (mgmt-driver key finish-rotation)",
                    ));
                }
                let new = crate::ee::driver_key::DriverKey::generate(a.kind)?;
                keys.previous = Some(std::mem::replace(&mut keys.current, new));
                // The new key is saved before any machine is touched: it is never lost.
                keys.save(&store)?;
            } else if keys.previous.is_none() {
                return Err(Error::input("key", "finish-rotation", "no rotation is pending"));
            }
            let mut reg = Registry::load(&store)?;
            let (events, renderer) = ctx.renderer(Some(reg.ees.len().max(1)));
            let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
            let pass = rotate::advance(&rt, &store, &mut reg, &mut keys).await;
            drop(rt);
            let _ = renderer.await;
            reg.save(&store)?;
            keys.save(&store)?;
            let failed: Vec<&(String, &str, Result<()>)> = pass.results.iter().filter(|r| r.2.is_err()).collect();
            let errors: Vec<ErrorItem> =
                failed.iter().filter_map(|r| r.2.as_ref().err()).map(ErrorItem::from_error).collect();
            let mut doc = key_doc_json(&keys, &reg, rotate_new);
            doc["steps"] =
                pass.results.iter().map(|(ee, step, r)| json!({"ee": ee, "step": step, "ok": r.is_ok()})).collect();
            doc["finished"] = json!(pass.finished);
            let op = if rotate_new { "key rotate" } else { "key finish-rotation" };
            print_doc(ctx, op, failed.is_empty(), doc, errors, || {
                for (ee, step, r) in &pass.results {
                    match r {
                        Ok(()) => eprintln!("{ee}: {step}: ok"),
                        Err(e) => eprintln!("{ee}: {step}: {e}"),
                    }
                }
                if pass.finished {
                    eprintln!("rotation finished: the old key is gone");
                } else {
                    eprintln!(
                        "rotation pending on: {} (run `mgmt-driver key finish-rotation` when they are back)",
                        rotate::pending(&reg, &keys).join(", ")
                    );
                }
                println!("{}", keys.current.openssh);
            });
            Ok(if failed.is_empty() { exit::OK } else { exit::HOST_FAILED })
        }
    }
}

/// The password given by file or environment.
fn password(a: &RegisterArgs) -> Result<Option<Secret>> {
    if let Some(p) = &a.password_file {
        let text = crate::input_limit::read_capped(p, 64 << 10, "--password-file")?;
        let line = text.lines().next().unwrap_or("");
        if line.is_empty() {
            return Err(Error::input(p.display().to_string(), "--password-file", "is empty"));
        }
        return Ok(Some(Secret::new(line)));
    }
    if let Some(v) = &a.password_env {
        return match std::env::var(v) {
            Ok(s) if !s.is_empty() => Ok(Some(Secret::new(s))),
            _ => Err(Error::input("--password-env", v.clone(), "is not set (or empty) in the environment")),
        };
    }
    Ok(None)
}

/// The host key fingerprints recorded for `host:port` in the store's known_hosts.
fn learned_key(store: &Store, host: &str, port: u16) -> Option<String> {
    crate::ssh::host_key::recorded_fingerprint(&record::known_hosts(store), host, port)
}

async fn register_cmd(a: RegisterArgs, ctx: &Ctx, store: &Store) -> Result<i32> {
    record::check_name(&a.name).map_err(|m| Error::input("arguments", "NAME", m))?;
    validate_addr(&a.host).map_err(|m| Error::input("arguments", "--host", m))?;
    check_user(&a.user).map_err(|m| Error::input("arguments", "--user", m))?;
    if a.port == 0 {
        return Err(Error::input("arguments", "--port", "must be 1..65535"));
    }
    let namespace = a
        .namespace
        .as_deref()
        .map(|n| Namespace::parse(n).map_err(|m| Error::input("arguments", "--namespace", m)))
        .transpose()?;
    let pw = password(&a)?;
    if let Some(p) = &a.identity {
        if !p.is_file() {
            return Err(Error::input("arguments", "--identity", format!("{} is not a file", p.display())));
        }
    }
    if pw.is_none() && a.identity.is_none() {
        return Err(Error::input(
            "arguments",
            "--password-file",
            "a first login needs a credential: --password-file, --password-env or --identity",
        ));
    }
    if a.drop_password && pw.is_none() {
        return Err(Error::input("arguments", "--drop-password", "there is no password to drop"));
    }
    let _lock = Registry::lock(store)?;
    let mut reg = Registry::load(store)?;
    if reg.ees.iter().any(|e| e.name == a.name) {
        return Err(Error::input(
            "arguments",
            "NAME",
            format!("'{}' is registered already (ee show {0}; ee delete {0} to register it again)", a.name),
        ));
    }
    let keys = if a.install_key {
        if ctx.run.dry_run {
            KeyDoc::load(store)?
        } else {
            let _k = store.lock(crate::ee::driver_key::DOC_ID, crate::ee::driver_key::DOC_KIND)?;
            Some(KeyDoc::load_or_create(store, a.key_type)?.0)
        }
    } else {
        None
    };
    let policy = match a.host_key_check {
        RegisterPolicy::Strict => HostKeyCheck::Strict,
        RegisterPolicy::AcceptNew => HostKeyCheck::AcceptNew,
    };
    let rec = EeRecord {
        id: record::new_id(),
        name: a.name.clone(),
        host: a.host.clone(),
        port: a.port,
        user: a.user.clone(),
        password: pw.as_ref().map(|s| s.expose().to_string()),
        identity_file: a.identity.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        host_key_check: policy,
        host_key: None,
        namespace: namespace.map(|n| n.to_string()),
        driver_keys: vec![],
        registered: now_rfc3339(),
    };
    let first = Host {
        host_key_check: policy,
        auth: Auth { driver_keys: vec![], ..rec.to_host(store, None).auth },
        ..rec.to_host(store, None)
    };
    let (events, renderer) = ctx.renderer(Some(1));
    let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
    let opts = register::Options { install_key: a.install_key, drop_password: a.drop_password };
    let r = register::register(&rt, &first, rec, keys.as_ref(), opts).await;
    rt.close().await;
    drop(rt);
    let _ = renderer.await;
    let mut rec = match r {
        Ok(rec) => rec,
        Err(e) => {
            eprintln!("error: {e}");
            print_doc(ctx, "ee register", false, Value::Null, vec![ErrorItem::from_error(&e)], || {});
            return Ok(e.exit_code());
        }
    };
    rec.host_key = learned_key(store, &rec.host, rec.port);
    reg.ees.push(rec.clone());
    reg.save(store)?;
    let shown = rec.shown(keys.as_ref());
    print_doc(ctx, "ee register", true, shown, vec![], || {
        println!("{}", rec.id);
        eprintln!(
            "registered {} ({}@{}:{}){}{}",
            rec.name,
            rec.user,
            rec.host,
            rec.port,
            if rec.driver_keys.is_empty() { "" } else { ", driver key installed" },
            if rec.password.is_some() { ", password kept (sealed)" } else { "" }
        );
    });
    Ok(exit::OK)
}

pub async fn ee(cmd: EeCmd, a: StoreArgs, ctx: &Ctx) -> Result<i32> {
    let store = ctx.store(&a.state_dir)?;
    match cmd {
        EeCmd::Register(r) => register_cmd(r, ctx, &store).await,
        EeCmd::List { namespace } => {
            let filter = namespace
                .as_deref()
                .map(|n| Namespace::parse(n).map_err(|m| Error::input("arguments", "--namespace", m)))
                .transpose()?;
            let reg = Registry::load(&store)?;
            let keys = KeyDoc::load(&store)?;
            let list: Vec<&EeRecord> = reg.within(filter.as_ref());
            let doc = json!({"ees": list.iter().map(|e| e.shown(keys.as_ref())).collect::<Vec<_>>()});
            print_doc(ctx, "ee list", true, doc, vec![], || {
                for e in &list {
                    let v = e.shown(keys.as_ref());
                    println!(
                        "{}\t{}\t{}@{}:{}\t{}\t{}{}",
                        e.name,
                        e.id,
                        e.user,
                        e.host,
                        e.port,
                        e.namespace.as_deref().unwrap_or("-"),
                        if e.driver_keys.is_empty() { "password/identity" } else { "driver key" },
                        if v["rotationPending"] == json!(true) { "\trotation pending" } else { "" }
                    );
                }
            });
            Ok(exit::OK)
        }
        EeCmd::Show { ee } => {
            let reg = Registry::load(&store)?;
            let keys = KeyDoc::load(&store)?;
            let doc = reg.find(&ee, "EE")?.shown(keys.as_ref());
            print_doc(ctx, "ee show", true, doc.clone(), vec![], || {
                println!("{}", serde_json::to_string_pretty(&doc).expect("serializes"));
            });
            Ok(exit::OK)
        }
        EeCmd::Delete { ee, remove_key } => {
            let _lock = Registry::lock(&store)?;
            let mut reg = Registry::load(&store)?;
            let rec = reg.find(&ee, "EE")?.clone();
            let keys = KeyDoc::load(&store)?;
            if remove_key && !rec.driver_keys.is_empty() {
                if let Some(k) = &keys {
                    let host = rec.to_host(&store, Some(k));
                    let (events, renderer) = ctx.renderer(Some(1));
                    let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
                    let r = async {
                        for key in std::iter::once(&k.current).chain(k.previous.as_ref()) {
                            rt.exec(&host, crate::ee::authorized_keys::remove(key)?).await?;
                        }
                        Ok::<(), Error>(())
                    }
                    .await;
                    rt.close().await;
                    drop(rt);
                    let _ = renderer.await;
                    if let Err(e) = r {
                        eprintln!("error: {e} (the record is kept)");
                        print_doc(ctx, "ee delete", false, Value::Null, vec![ErrorItem::from_error(&e)], || {});
                        return Ok(e.exit_code());
                    }
                }
            }
            reg.ees.retain(|e| e.id != rec.id);
            reg.save(&store)?;
            let doc = json!({"id": rec.id, "name": rec.name, "keyRemoved": remove_key && !rec.driver_keys.is_empty()});
            print_doc(ctx, "ee delete", true, doc, vec![], || eprintln!("deleted {} ({})", rec.name, rec.id));
            Ok(exit::OK)
        }
    }
}
