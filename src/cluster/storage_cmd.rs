//! The shell text of the storage steps (`storage_ops.rs`) and the checks of what those commands
//! print. Every value is quoted; the longer programs are `src/remote/` scripts (`nfs_packages.sh`,
//! `storage_volume.sh`, `nfs_exports.sh`) that get their values as arguments.

use crate::cluster::storage_setup::check_k8s_name;
use crate::error::Result;
use crate::facts::last_line;
use crate::kube::kubectl::Kubectl;
use crate::remote;

/// `apt-get install -y PACKAGE...` (`src/remote/nfs_packages.sh`).
pub fn packages(names: &[&str]) -> Result<String> {
    remote::NFS_PACKAGES.command(names)
}

/// As [`packages`], with the variables of the env file `env_path` (relative to the login
/// user's home: the proxy) exported to apt-get; the program deletes the file first.
pub fn packages_with_env(env_path: &str, names: &[&str]) -> Result<String> {
    let mut args = vec!["-e", env_path];
    args.extend_from_slice(names);
    remote::NFS_PACKAGES.command(&args)
}

/// Filesystem (only when none), fstab and mount of one volume (`src/remote/storage_volume.sh`).
pub fn volume(device: &str, dir: &str) -> Result<String> {
    remote::STORAGE_VOLUME.command(&[device, dir])
}

/// Our exports file, the server, `exportfs -ra` (`src/remote/nfs_exports.sh`).
pub fn exports(pairs: &[(&str, &str)]) -> Result<String> {
    let args: Vec<&str> = pairs.iter().flat_map(|(d, c)| [*d, *c]).collect();
    remote::NFS_EXPORTS.command(&args)
}

/// `kubectl apply -f FILE` of an uploaded manifest, which is removed whatever the outcome.
pub fn pv_apply(file: &str) -> Result<String> {
    Kubectl::admin().apply_and_remove(file)
}

/// One PV's `status.phase` (nothing when it does not exist).
pub fn pv_phase(name: &str) -> Result<String> {
    Kubectl::admin().jsonpath(&["get", "pv", name, "--ignore-not-found"], "{.status.phase}")
}

/// The named PVs as JSON (a single object for one name, a List for several: kubectl's way).
pub fn pv_get(names: &[&str]) -> Result<String> {
    let mut words = vec!["get", "pv"];
    words.extend(names);
    words.extend(["--ignore-not-found", "-o", "json"]);
    Kubectl::admin().args(&words)
}

/// `kubectl delete pv`. kubectl waits until the objects are gone, and the API server keeps a PV
/// that a claim is bound to (the `kubernetes.io/pv-protection` finalizer) until that claim is
/// deleted: with `wait` false the deletion is only requested (`--wait=false`), so a bound PV
/// cannot hold the step until its timeout; it goes when its claim does.
pub fn pv_delete(names: &[&str], wait: bool) -> Result<String> {
    let mut words = vec!["delete", "pv"];
    words.extend(names);
    words.push("--ignore-not-found");
    if !wait {
        words.push("--wait=false");
    }
    Kubectl::admin().args(&words)
}

/// A PV phase as kubectl prints it; `""` when the PV does not exist.
pub fn parse_phase(out: &str) -> std::result::Result<String, String> {
    let p = out.trim();
    match p {
        "" | "Pending" | "Available" | "Bound" | "Released" | "Failed" => Ok(p.to_string()),
        _ => Err(format!("{:?} is not a PersistentVolume phase", p.chars().take(40).collect::<String>())),
    }
}

/// `(name, phase)` of every PV in `kubectl get pv ... -o json` output (one object or a List;
/// empty output when none exists).
pub fn parse_pv_list(out: &str) -> std::result::Result<Vec<(String, String)>, String> {
    if out.trim().is_empty() {
        return Ok(vec![]);
    }
    let v: serde_json::Value = serde_json::from_str(out).map_err(|e| format!("not JSON: {e}"))?;
    let items = match v.get("items").and_then(|i| i.as_array()) {
        Some(a) => a.clone(),
        None => vec![v],
    };
    items
        .iter()
        .map(|o| {
            let name = o.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or("");
            check_k8s_name(name)?;
            let phase = parse_phase(o.pointer("/status/phase").and_then(|p| p.as_str()).unwrap_or(""))?;
            Ok((name.to_string(), phase))
        })
        .collect()
}

/// `filesystem=made|kept type=T uuid=U`, the last line of storage_volume.sh: whether a
/// filesystem was made.
pub fn parse_volume(out: &str) -> std::result::Result<bool, String> {
    match last_line(out).split_whitespace().next() {
        Some("filesystem=made") => Ok(true),
        Some("filesystem=kept") => Ok(false),
        _ => Err("the last line is not 'filesystem=made|kept ...'".into()),
    }
}

/// `exports=changed|unchanged`, the last line of nfs_exports.sh.
pub fn parse_exports(out: &str) -> std::result::Result<bool, String> {
    match last_line(out) {
        "exports=changed" => Ok(true),
        "exports=unchanged" => Ok(false),
        _ => Err("the last line is not 'exports=changed|unchanged'".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_quote_every_value() {
        let c = pv_apply(".mgmt-driver/run/i/pv-a.json").unwrap();
        assert!(
            c.contains("kubectl apply -f .mgmt-driver/run/i/pv-a.json; rc=$?; rm -f -- .mgmt-driver/run/i/pv-a.json"),
            "{c}"
        );
        assert!(pv_phase("nfs-pv1")
            .unwrap()
            .ends_with("kubectl get pv nfs-pv1 --ignore-not-found -o jsonpath='{.status.phase}'"));
        assert!(pv_delete(&["a", "b"], true).unwrap().ends_with("kubectl delete pv a b --ignore-not-found"));
        let admin = "export KUBECONFIG=/etc/kubernetes/admin.conf; ";
        assert_eq!(pv_get(&["a", "b"]).unwrap(), format!("{admin}kubectl get pv a b --ignore-not-found -o json"));
        assert_eq!(pv_delete(&["a"], true).unwrap(), format!("{admin}kubectl delete pv a --ignore-not-found"));
        assert_eq!(
            pv_delete(&["a"], false).unwrap(),
            format!("{admin}kubectl delete pv a --ignore-not-found --wait=false")
        );
        assert_eq!(
            pv_apply("r/pv a.json").unwrap(),
            format!("{admin}kubectl apply -f 'r/pv a.json'; rc=$?; rm -f -- 'r/pv a.json'; exit $rc")
        );
        let v = volume("/dev/vdb", "/volume").unwrap();
        assert_eq!(crate::remote::label(&v), Some("storage_volume.sh /dev/vdb /volume"));
        let e = exports(&[("/volume/nfs/pv1", "10.10.0.0/24")]).unwrap();
        assert_eq!(crate::remote::label(&e), Some("nfs_exports.sh /volume/nfs/pv1 10.10.0.0/24"));
        let p = packages(&["nfs-common"]).unwrap();
        assert_eq!(crate::remote::label(&p), Some("nfs_packages.sh nfs-common"));
    }

    #[test]
    fn phases_and_lists_are_checked() {
        assert_eq!(parse_phase("Available\n").unwrap(), "Available");
        assert_eq!(parse_phase("").unwrap(), "");
        assert!(parse_phase("Available; rm").is_err());
        let one = r#"{"kind":"PersistentVolume","metadata":{"name":"a"},"status":{"phase":"Bound"}}"#;
        assert_eq!(parse_pv_list(one).unwrap(), vec![("a".to_string(), "Bound".to_string())]);
        let list = r#"{"kind":"List","items":[{"metadata":{"name":"a"},"status":{"phase":"Available"}},{"metadata":{"name":"b"},"status":{"phase":"Pending"}}]}"#;
        assert_eq!(parse_pv_list(list).unwrap().len(), 2);
        assert_eq!(parse_pv_list("").unwrap(), vec![]);
        assert!(parse_pv_list(r#"{"metadata":{"name":"A B"}}"#).is_err());
        assert_eq!(parse_volume("x\nfilesystem=made type=ext4 uuid=1\n"), Ok(true));
        assert_eq!(parse_volume("filesystem=kept type=ext4 uuid=1"), Ok(false));
        assert!(parse_volume("done").is_err());
        assert_eq!(parse_exports("exportfs: x\nexports=unchanged\n"), Ok(false));
        assert_eq!(parse_exports("exports=changed"), Ok(true));
        assert!(parse_exports("exports=maybe").is_err());
    }
}
