//! The embedded state store: one JSON document per VNF instance in a private directory, written
//! atomically (temp file, fsync, rename), mode 0600 because it holds the cluster's secrets (the
//! VIM bearer token, node passwords from the request), and locked for the whole run so two
//! hooks on the same instance cannot interleave. Later hooks (heal, scale, terminate, CNF
//! operations) read what instantiate recorded here.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::topology::Role;
use crate::error::{Error, Result};

pub const STATE_VERSION: u32 = 1;

/// What one node has done.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeState {
    pub role: Option<Role>,
    pub ssh_addr: String,
    pub nic_ip: String,
    /// The Kubernetes node name (the node's hostname after the install script ran).
    pub k8s_name: String,
    pub installed: bool,
    pub helm_installed: bool,
}

/// Cluster facts learned from the main master.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterFacts {
    pub server: String,
    pub ca_pem: String,
    pub ca_hash: String,
    pub cluster_ip: String,
    pub main_master: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InstanceState {
    pub version: u32,
    pub vnf_instance_id: String,
    /// The validated `k8s_cluster_installation_param` as received (later hooks reuse it).
    #[serde(default)]
    pub params: Value,
    /// Inventory host name → what it has done, in cluster order.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeState>,
    #[serde(default)]
    pub facts: Option<ClusterFacts>,
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// The VIM registration record (with the bearer token) and the vimConnectionInfo entry.
    #[serde(default)]
    pub vim: Option<Value>,
    #[serde(default)]
    pub vim_connection_info: Option<Value>,
    #[serde(default)]
    pub updated_at: Option<String>,
}

impl InstanceState {
    pub fn new(id: &str) -> Self {
        InstanceState { version: STATE_VERSION, vnf_instance_id: id.to_string(), ..Default::default() }
    }

    pub fn node(&mut self, name: &str) -> &mut NodeState {
        self.nodes.entry(name.to_string()).or_default()
    }

    pub fn installed(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.installed)
    }
}

/// A directory of instance documents.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// Held for the whole run; dropping it releases the lock.
pub struct Lock {
    _file: File,
}

/// VNF instance ids become file names: keep them boring.
pub fn check_instance_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::input(
            "vnf instance",
            "id",
            format!("'{id}' is not a usable VNF instance id ([A-Za-z0-9._-], not starting with '.')"),
        ))
    }
}

impl Store {
    pub fn open(dir: &Path) -> Result<Store> {
        let err = |e: std::io::Error| Error::input("--state-dir", dir.display().to_string(), e.to_string());
        std::fs::create_dir_all(dir).map_err(err)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        Ok(Store { dir: dir.to_path_buf() })
    }

    pub fn default_dir() -> PathBuf {
        dirs::state_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".local/state")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("mgmt-driver")
    }

    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Take the instance's lock without waiting: a second run on the same instance is refused
    /// with a clear message rather than queued behind a 40-minute install.
    pub fn lock(&self, id: &str) -> Result<Lock> {
        check_instance_id(id)?;
        let p = self.dir.join(format!("{id}.lock"));
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&p)
            .map_err(|e| Error::input(p.display().to_string(), "lock", e.to_string()))?;
        match f.try_lock() {
            Ok(()) => Ok(Lock { _file: f }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::input(
                p.display().to_string(),
                "lock",
                format!("another mgmt-driver run is working on VNF instance {id}; wait for it to finish"),
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::input(p.display().to_string(), "lock", e.to_string())),
        }
    }

    pub fn load(&self, id: &str) -> Result<Option<InstanceState>> {
        check_instance_id(id)?;
        let p = self.path(id);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::input(p.display().to_string(), "state", e.to_string())),
        };
        let s: InstanceState = serde_json::from_str(&text)
            .map_err(|e| Error::input(p.display().to_string(), "state", format!("unreadable: {e}")))?;
        if s.version != STATE_VERSION {
            return Err(Error::input(
                p.display().to_string(),
                "version",
                format!("state version {} is not {STATE_VERSION}", s.version),
            ));
        }
        Ok(Some(s))
    }

    /// Atomic replace: a crash leaves the old or the new document, never half of one.
    pub fn save(&self, s: &mut InstanceState) -> Result<()> {
        check_instance_id(&s.vnf_instance_id)?;
        s.updated_at = Some(now_rfc3339());
        let p = self.path(&s.vnf_instance_id);
        let tmp = self.dir.join(format!(".{}.json.tmp", s.vnf_instance_id));
        let err = |e: std::io::Error| Error::input(p.display().to_string(), "state", format!("cannot write: {e}"));
        let body = serde_json::to_vec_pretty(s).expect("state serializes");
        let mut f = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp).map_err(err)?;
        f.write_all(&body).map_err(err)?;
        f.sync_all().map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, &p).map_err(err)?;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Another document kind beside the cluster's (e.g. `cnf` for `<id>.cnf.json`), with the
    /// same guarantees: 0600, atomic replace.
    pub fn load_doc<T: serde::de::DeserializeOwned>(&self, id: &str, kind: &str) -> Result<Option<T>> {
        check_instance_id(id)?;
        let p = self.dir.join(format!("{id}.{kind}.json"));
        match std::fs::read_to_string(&p) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| Error::input(p.display().to_string(), "state", format!("unreadable: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::input(p.display().to_string(), "state", e.to_string())),
        }
    }

    pub fn save_doc<T: Serialize>(&self, id: &str, kind: &str, doc: &T) -> Result<()> {
        check_instance_id(id)?;
        let p = self.dir.join(format!("{id}.{kind}.json"));
        let tmp = self.dir.join(format!(".{id}.{kind}.json.tmp"));
        let err = |e: std::io::Error| Error::input(p.display().to_string(), "state", format!("cannot write: {e}"));
        let mut f = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp).map_err(err)?;
        f.write_all(&serde_json::to_vec_pretty(doc).expect("serializes")).map_err(err)?;
        f.sync_all().map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, &p).map_err(err)
    }

    pub fn remove_doc(&self, id: &str, kind: &str) -> Result<()> {
        check_instance_id(id)?;
        match std::fs::remove_file(self.dir.join(format!("{id}.{kind}.json"))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::input(id, "state", e.to_string())),
            _ => Ok(()),
        }
    }

    pub fn doc_path(&self, id: &str, kind: &str) -> PathBuf {
        self.dir.join(format!("{id}.{kind}.json"))
    }

    /// Lock a document kind of an instance (cluster hooks and CNF operations lock separately).
    pub fn lock_kind(&self, id: &str, kind: &str) -> Result<Lock> {
        self.lock(&format!("{id}.{kind}"))
    }

    pub fn remove(&self, id: &str) -> Result<bool> {
        check_instance_id(id)?;
        match std::fs::remove_file(self.path(id)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::input(self.path(id).display().to_string(), "state", e.to_string())),
        }
    }
}

/// UTC timestamp without a date crate: days-from-civil arithmetic.
pub fn now_rfc3339() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_atomically_private_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(&d.path().join("s")).unwrap();
        assert!(st.load("abc").unwrap().is_none());
        let mut s = InstanceState::new("abc");
        s.node("m1").installed = true;
        s.bearer_token = Some("tok".into());
        st.save(&mut s).unwrap();
        let mode = std::fs::metadata(st.path("abc")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::metadata(d.path().join("s")).unwrap().permissions().mode() & 0o777, 0o700);
        let back = st.load("abc").unwrap().unwrap();
        assert!(back.installed("m1") && !back.installed("m2"));
        assert!(st.remove("abc").unwrap() && !st.remove("abc").unwrap());
    }

    #[test]
    fn a_second_run_on_the_same_instance_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let st = Store::open(d.path()).unwrap();
        let held = st.lock("abc").unwrap();
        let e = st.lock("abc").err().unwrap().to_string();
        assert!(e.contains("another mgmt-driver run is working on VNF instance abc"), "{e}");
        assert!(st.lock("other").is_ok());
        drop(held);
        assert!(st.lock("abc").is_ok());
    }

    #[test]
    fn instance_ids_are_file_name_safe() {
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(check_instance_id(bad).is_err(), "{bad}");
        }
        assert!(check_instance_id("3cc2c4ff-525c-48b4-94c9-29247223322f").is_ok());
        assert_eq!(now_rfc3339().len(), 20);
    }
}
