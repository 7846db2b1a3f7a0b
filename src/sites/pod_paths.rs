//! The file paths a rendered inventory names (`identity_file`, `known_hosts`, the `*_file`
//! secrets), judged as a Job's pod will see them (`sites export k8s-job`). A pod has only its
//! site's rendered files (unpacked from the ConfigMap's bundle into a folder of its own), the
//! `--secret` Secret at `/secrets/`, and an empty `/tmp` as its home: a controller's
//! `~/.ssh/id_ed25519` or `/home/op/lab/known_hosts` does not exist there, and the run would fail
//! on every site at its first connection. The Secret is a read-only mount, so a `known_hosts`
//! there must be checked `strict`: accept-new appends to the file, and fails on every connection
//! when it cannot. Pure:
//! the site's rendered files in, the first such path out as an error naming the site, the file,
//! the field and the path.

use std::path::{Component, Path};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::sites::lexical_path::clean;

/// The inventory fields that hold a path on the machine that runs the driver.
pub const PATH_KEYS: [&str; 5] =
    ["identity_file", "known_hosts", "password_file", "identity_passphrase_file", "become_password_file"];

/// What the pod can read besides the site's own files (unpacked from its bundle into a folder
/// of its own, so named relative to the inventory).
pub struct PodView<'a> {
    /// The `--secret` Secret's mount, when one is given.
    pub secrets: Option<&'a str>,
}

/// Every path field of every inventory (`*.yaml` files whose YAML has such fields) in one site's
/// rendered files; refused unless the pod can read it: a file of the site's own folder (relative
/// to the inventory: the pod unpacks the site where it chooses), or a file under the Secret's
/// mount.
pub fn check(site: &str, files: &[(String, String)], view: &PodView) -> Result<()> {
    for (path, text) in files {
        if !(path.ends_with(".yaml") || path.ends_with(".yml")) {
            continue;
        }
        // A YAML file that does not parse is not an inventory the pod would load either; the
        // rendered-file check has refused it already.
        let Ok(doc) = yaml_serde::from_str::<Value>(text) else { continue };
        let mut found = Vec::new();
        walk(&doc, String::new(), &mut found);
        let dir = Path::new(path).parent().unwrap_or(Path::new(""));
        for (field, value) in found {
            if let Err(why) = readable(dir, &value, files, view) {
                return Err(Error::input(
                    format!("{site}/{path}"),
                    field,
                    format!(
                        "is {value:?}, which the Job's pod cannot read ({why}): put the file in the --secret \
                         Secret and write {mount}/<key>, or render it into the site's folder and name it \
                         relative to the inventory",
                        mount = view.secrets.unwrap_or("/secrets")
                    ),
                ));
            }
        }
        if let Err((field, kh)) = read_only_known_hosts(&doc) {
            return Err(Error::input(
                format!("{site}/{path}"),
                field,
                format!(
                    "is accept-new (the default) while known_hosts is {kh:?}, which the pod mounts read-only: \
                     accept-new must append to it and every connection would fail; set host_key_check: strict \
                     with every node's key in that file, or render known_hosts into the site's folder"
                ),
            ));
        }
    }
    Ok(())
}

/// A `known_hosts` under the Secret's mount (an absolute path: the only one a pod can read) is
/// read-only, so a host whose check must append to it (accept-new, the default) cannot connect:
/// the first such host, as the place of its `host_key_check` and its known_hosts path. One in
/// the site's folder is in the pod's own unpacked copy, which accept-new may write.
fn read_only_known_hosts(doc: &Value) -> std::result::Result<(), (String, String)> {
    let str_of = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_str).map(str::to_string);
    let d = doc.get("defaults");
    let (dkh, dcheck) = (str_of(d, "known_hosts"), str_of(d, "host_key_check"));
    let dkh = dkh.filter(|k| k.starts_with('/'));
    let writes = |check: &Option<String>| !matches!(check.as_deref(), Some("strict" | "off"));
    let Some(groups) = doc.get("groups").and_then(Value::as_object) else {
        return match (&dkh, writes(&dcheck)) {
            (Some(kh), true) => Err(("defaults.host_key_check".into(), kh.clone())),
            _ => Ok(()),
        };
    };
    for (g, hosts) in groups {
        for (i, h) in hosts.as_array().into_iter().flatten().enumerate() {
            let kh = str_of(Some(h), "known_hosts").or(dkh.clone()).filter(|k| k.starts_with('/'));
            let own = str_of(Some(h), "host_key_check");
            let check = own.clone().or(dcheck.clone());
            if let (Some(kh), true) = (kh, writes(&check)) {
                let at = if own.is_some() {
                    format!("groups.{g}[{i}].host_key_check")
                } else {
                    "defaults.host_key_check".into()
                };
                return Err((at, kh));
            }
        }
    }
    Ok(())
}

/// Each string value under a path key, with its place (`defaults.identity_file`,
/// `groups.m[0].known_hosts`).
fn walk(v: &Value, at: String, out: &mut Vec<(String, String)>) {
    let join = |k: &str| if at.is_empty() { k.to_string() } else { format!("{at}.{k}") };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::String(s) if PATH_KEYS.contains(&k.as_str()) => out.push((join(k), s.clone())),
                    _ => walk(x, join(k), out),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Whether the pod can read `value`, named in a file of folder `dir` of the site; why not.
fn readable(dir: &Path, value: &str, files: &[(String, String)], view: &PodView) -> std::result::Result<(), String> {
    let has = |rel: &Path| {
        let rel = clean(rel);
        !rel.components().any(|c| matches!(c, Component::ParentDir))
            && files.iter().any(|(p, _)| Path::new(p) == rel.as_path())
    };
    if value.starts_with('~') {
        return Err("a home-relative path: the pod's home is an empty /tmp".into());
    }
    let p = Path::new(value);
    if !p.is_absolute() {
        return if has(&dir.join(p)) { Ok(()) } else { Err("no such file in the site's rendered folder".into()) };
    }
    let p = clean(p);
    match view.secrets {
        Some(m) if p.starts_with(m) && p != Path::new(m) => Ok(()),
        Some(_) => Err("a path of the machine that rendered it".into()),
        None => Err("a path of the machine that rendered it, and no --secret is mounted".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIEW: PodView = PodView { secrets: Some("/secrets") };

    fn files(inv: &str) -> Vec<(String, String)> {
        vec![
            ("inventory.yaml".into(), inv.into()),
            ("known_hosts".into(), "n1 ssh-ed25519 AAAA\n".into()),
            ("site.json".into(), "{}".into()),
        ]
    }

    fn err(inv: &str, view: &PodView) -> String {
        check("par1", &files(inv), view).unwrap_err().to_string()
    }

    #[test]
    fn a_controller_path_in_an_inventory_is_refused_naming_site_file_field_and_path() {
        let inv = "defaults: {identity_file: /home/op/lab/id_ed25519, known_hosts: known_hosts}\n";
        let e = err(inv, &VIEW);
        assert!(e.contains("par1/inventory.yaml") && e.contains("defaults.identity_file"), "{e}");
        assert!(e.contains("/home/op/lab/id_ed25519") && e.contains("/secrets/<key>"), "{e}");
        // Every path field, wherever it is: hosts, a group's list, the secrets' files.
        for inv in [
            "groups:\n  m:\n    - {name: a, ssh_ip: 192.0.2.1, known_hosts: /etc/ssh/ssh_known_hosts}\n",
            "defaults: {password_file: /run/secrets/pw}\n",
            "defaults: {become_password_file: ../other/pw}\n",
            "defaults: {identity_passphrase_file: ~/.ssh/pass}\n",
            "defaults: {known_hosts: missing_hosts}\n",
            "defaults: {known_hosts: /config/rendered/par1/known_hosts}\n",
            "defaults: {identity_file: /secrets}\n",
        ] {
            let e = err(inv, &VIEW);
            assert!(e.contains("par1/inventory.yaml") && e.contains("cannot read"), "{inv}: {e}");
        }
        assert!(err("groups:\n  m:\n    - {known_hosts: /x}\n", &VIEW).contains("groups.m[0].known_hosts"));
    }

    #[test]
    fn the_site_s_own_files_and_the_secret_s_mount_are_readable() {
        for inv in [
            "defaults: {identity_file: /secrets/id_ed25519, known_hosts: known_hosts, host_key_check: strict}\n",
            "defaults: {known_hosts: ./known_hosts, password_file: /secrets/sub/../pw, host_key_check: strict}\n",
            "defaults: {known_hosts: known_hosts}\ngroups: {m: [{name: a, ssh_ip: 192.0.2.1, host_key_check: strict}]}\n",
            "defaults: {user: root, password_env: NODE_PW}\ngroups: {m: [{name: a, ssh_ip: 192.0.2.1}]}\n",
        ] {
            check("par1", &files(inv), &VIEW).unwrap_or_else(|e| panic!("{inv}: {e}"));
        }
        // Accept-new (the default) appends to known_hosts, which in a pod is read-only.
        let e = err("defaults: {known_hosts: /secrets/kh}\ngroups: {m: [{name: a, ssh_ip: 192.0.2.1}]}\n", &VIEW);
        assert!(e.contains("defaults.host_key_check") && e.contains("read-only"), "{e}");
        let inv = "defaults: {known_hosts: /secrets/kh, host_key_check: strict}\n\
                   groups: {m: [{name: a, ssh_ip: 192.0.2.1}, {name: b, ssh_ip: 192.0.2.2, host_key_check: accept-new}]}\n";
        assert!(err(inv, &VIEW).contains("groups.m[1].host_key_check"));
        assert!(err("defaults: {known_hosts: /secrets/kh}\n", &VIEW).contains("defaults.host_key_check"));
        // No known_hosts named (the pod's own, in its home), or the site's own (the pod's
        // unpacked copy): both writable, accept-new may learn there.
        check("par1", &files("groups: {m: [{name: a, ssh_ip: 192.0.2.1}]}\n"), &VIEW).unwrap();
        check("par1", &files("defaults: {known_hosts: known_hosts}\ngroups: {m: [{name: a}]}\n"), &VIEW).unwrap();
        // Without a mounted Secret, /secrets is just another missing path.
        let none = PodView { secrets: None };
        assert!(err("defaults: {identity_file: /secrets/id}\n", &none).contains("no --secret"));
    }
}
