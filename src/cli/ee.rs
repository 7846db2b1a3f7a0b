//! `mgmt-driver key` and `mgmt-driver ee …`: the driver's own SSH key (show, rotate,
//! finish-rotation) and the registered execution environments (register, list, show, delete).
//! Parses the arguments, calls `ee/` (which checks them before anything connects: exit 2) with
//! the store, renderer and runner picked here, and prints the result.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::cli::common::{Ctx, Defaults};
use crate::cli::envelope::{Envelope, ErrorItem};
use crate::console;
use crate::ee;
use crate::ee::driver_key::{KeyDoc, KeyType};
use crate::ee::record::Registry;
use crate::ee::rotate;
use crate::error::{exit, Result};
use crate::inventory::HostKeyCheck;
use crate::lifecycle::state::Store;
use crate::lifecycle::Timeouts;
use crate::render::Output;

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
    /// the driver's key and drop the password. With no credential, the first login is with the
    /// driver's key (put into the VM by cloud-init: `mgmt-driver key`).
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

impl RegisterArgs {
    fn request(&self) -> ee::register::Request {
        ee::register::Request {
            name: self.name.clone(),
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            password_file: self.password_file.clone(),
            password_env: self.password_env.clone(),
            identity: self.identity.clone(),
            install_key: self.install_key,
            drop_password: self.drop_password,
            host_key_check: match self.host_key_check {
                RegisterPolicy::Strict => HostKeyCheck::Strict,
                RegisterPolicy::AcceptNew => HostKeyCheck::AcceptNew,
            },
            namespace: self.namespace.clone(),
            key_type: self.key_type,
        }
    }
}

fn print_doc(ctx: &Ctx, op: &str, ok: bool, result: Value, errors: Vec<ErrorItem>, plain: impl FnOnce()) {
    print_doc_warned(ctx, op, ok, result, errors, vec![], plain)
}

/// [`print_doc`] with the warnings the renderer showed during the run (a host key learned).
fn print_doc_warned(
    ctx: &Ctx,
    op: &str,
    ok: bool,
    result: Value,
    errors: Vec<ErrorItem>,
    warnings: Vec<String>,
    plain: impl FnOnce(),
) {
    match ctx.output {
        Output::Json | Output::Yaml => {
            let mut env = Envelope::new(op, ctx.run.dry_run);
            env.ok = ok;
            env.result = result;
            env.errors = errors;
            env.warnings = warnings;
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
            let shown = ee::key::show(&store, a.kind, ctx.run.dry_run)?;
            let (k, reg) = (&shown.keys, &shown.registry);
            let doc = key_doc_json(k, reg, shown.made);
            print_doc(ctx, "key", true, doc, vec![], || {
                console::out_line(&k.current.openssh);
                if k.previous.is_some() {
                    console::err_line(&format!(
                        "note: a key rotation is pending on: {} (mgmt-driver key finish-rotation)",
                        rotate::pending(reg, k).join(", ")
                    ));
                }
            });
            Ok(exit::OK)
        }
        KeyCmd::Rotate | KeyCmd::FinishRotation => {
            let mut rotation = ee::key::prepare(&store, a.kind, rotate_new)?;
            let (events, renderer) = ctx.renderer(Some(rotation.registry.ees.len().max(1)));
            let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
            let pass = rotation.run(&store, rt).await?;
            let warnings = renderer.await.unwrap_or_default();
            rotation.save(&store)?;
            let (keys, reg) = (&rotation.keys, &rotation.registry);
            let failed: Vec<&(String, &str, Result<()>)> = pass.results.iter().filter(|r| r.2.is_err()).collect();
            let errors: Vec<ErrorItem> =
                failed.iter().filter_map(|r| r.2.as_ref().err()).map(ErrorItem::from_error).collect();
            let mut doc = key_doc_json(keys, reg, rotate_new);
            doc["steps"] =
                pass.results.iter().map(|(ee, step, r)| json!({"ee": ee, "step": step, "ok": r.is_ok()})).collect();
            doc["finished"] = json!(pass.finished);
            let op = if rotate_new { "key rotate" } else { "key finish-rotation" };
            print_doc_warned(ctx, op, failed.is_empty(), doc, errors, warnings, || {
                for (ee, step, r) in &pass.results {
                    match r {
                        Ok(()) => console::err_line(&format!("{ee}: {step}: ok")),
                        Err(e) => console::err_line(&format!("{ee}: {step}: {e}")),
                    }
                }
                if pass.finished {
                    console::err_line("rotation finished: the old key is gone");
                } else {
                    console::err_line(&format!(
                        "rotation pending on: {} (run `mgmt-driver key finish-rotation` when they are back)",
                        rotate::pending(reg, keys).join(", ")
                    ));
                }
                console::out_line(&keys.current.openssh);
            });
            Ok(if failed.is_empty() { exit::OK } else { exit::HOST_FAILED })
        }
    }
}

async fn register(a: RegisterArgs, ctx: &Ctx, store: &Store) -> Result<i32> {
    let mut prepared = ee::register::prepare(&a.request(), store, ctx.run.dry_run)?;
    let (events, renderer) = ctx.renderer(Some(1));
    let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
    let r = ee::register::run(&prepared, rt).await;
    let warnings = renderer.await.unwrap_or_default();
    let rec = match r {
        Ok(rec) => rec,
        Err(e) => {
            console::error(&e);
            print_doc_warned(ctx, "ee register", false, Value::Null, vec![ErrorItem::from_error(&e)], warnings, || {});
            return Ok(e.exit_code());
        }
    };
    let rec = ee::register::save(&mut prepared, store, rec)?;
    let shown = rec.shown(prepared.keys.as_ref());
    print_doc_warned(ctx, "ee register", true, shown, vec![], warnings, || {
        console::out_line(&rec.id);
        console::err_line(&format!(
            "registered {} ({}@{}:{}){}{}",
            rec.name,
            rec.user,
            rec.host,
            rec.port,
            if rec.driver_keys.is_empty() { "" } else { ", driver key installed" },
            if rec.password.is_some() { ", password kept (sealed)" } else { "" }
        ));
    });
    Ok(exit::OK)
}

pub async fn ee(cmd: EeCmd, a: StoreArgs, ctx: &Ctx) -> Result<i32> {
    let store = ctx.store(&a.state_dir)?;
    match cmd {
        EeCmd::Register(r) => register(r, ctx, &store).await,
        EeCmd::List { namespace } => {
            let listed = ee::list::list(&store, namespace.as_deref())?;
            let keys = listed.keys.as_ref();
            let list = &listed.ees;
            let doc = json!({"ees": list.iter().map(|e| e.shown(keys)).collect::<Vec<_>>()});
            print_doc(ctx, "ee list", true, doc, vec![], || {
                for e in list {
                    let v = e.shown(keys);
                    console::out_line(&format!(
                        "{}\t{}\t{}@{}:{}\t{}\t{}{}",
                        e.name,
                        e.id,
                        e.user,
                        e.host,
                        e.port,
                        e.namespace.as_deref().unwrap_or("-"),
                        if e.driver_keys.is_empty() { "password/identity" } else { "driver key" },
                        if v["rotationPending"] == json!(true) { "\trotation pending" } else { "" }
                    ));
                }
            });
            Ok(exit::OK)
        }
        EeCmd::Show { ee: name } => {
            let doc = ee::list::show(&store, &name)?;
            print_doc(ctx, "ee show", true, doc.clone(), vec![], || {
                console::out_line(&serde_json::to_string_pretty(&doc).expect("serializes"));
            });
            Ok(exit::OK)
        }
        EeCmd::Delete { ee: name, remove_key } => {
            let prepared = ee::delete::prepare(&store, &name, remove_key)?;
            if let Some(host) = prepared.key_holder(&store) {
                let (events, renderer) = ctx.renderer(Some(1));
                let rt = ctx.runner(events, &EE_DEFAULTS, Timeouts::default(), true)?;
                let r = prepared.remove_keys(&host, rt).await;
                let warnings = renderer.await.unwrap_or_default();
                if let Err(e) = r {
                    console::err_line(&format!("error: {e} (the record is kept)"));
                    let errors = vec![ErrorItem::from_error(&e)];
                    print_doc_warned(ctx, "ee delete", false, Value::Null, errors, warnings, || {});
                    return Ok(e.exit_code());
                }
            }
            let d = prepared.forget(&store)?;
            let doc = json!({"id": d.id, "name": d.name, "keyRemoved": d.key_removed});
            print_doc(ctx, "ee delete", true, doc, vec![], || {
                console::err_line(&format!("deleted {} ({})", d.name, d.id))
            });
            Ok(exit::OK)
        }
    }
}
