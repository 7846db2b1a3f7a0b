//! `ee register`, as steps: reach the machine with the credentials given (its host key learned
//! into the store's known_hosts under the chosen policy), optionally install our public key,
//! prove a login with that key alone, and only then forget the password. Nothing is stored until
//! every step worked (the CLI saves the record this returns).

use crate::command::RemoteCommand;
use crate::ee::authorized_keys;
use crate::ee::driver_key::KeyDoc;
use crate::ee::record::EeRecord;
use crate::error::Result;
use crate::inventory::{Auth, Host};
use crate::lifecycle::Runner;

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
        rt.exec(first, authorized_keys::add(&keys.current)?).await?;
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
