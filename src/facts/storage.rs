//! Facts of the storage steps: what the storage server's programs did, and the
//! PersistentVolumes' phases. Each is read back by exact words or checked names: they decide
//! what is reported and whether a PV is deleted.

use crate::cluster::storage_cmd;
use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::{Fact, Wait};

/// Whether `storage_volume.sh` made a filesystem on `device` (`filesystem=made`) or kept the one
/// there (`filesystem=kept`), from its last line; anything else is refused. It may format a
/// device, so it has the install bound. A plan assumes it kept one (it never formats).
pub struct VolumeFilesystem<'a> {
    pub device: &'a str,
    pub mount_to: &'a str,
}

impl Fact for VolumeFilesystem<'_> {
    type Value = bool;

    fn what(&self) -> String {
        "the volume's filesystem".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(storage_cmd::volume(self.device, self.mount_to)?))
    }

    fn wait(&self) -> Wait {
        Wait::Install
    }

    fn placeholder(&self) -> bool {
        false
    }

    fn parse(&self, out: &str) -> std::result::Result<bool, String> {
        storage_cmd::parse_volume(out)
    }
}

/// Whether `nfs_exports.sh` wrote the exports file (`exports=changed`) or found it as wanted
/// (`exports=unchanged`), from its last line; anything else is refused.
pub struct ExportsChanged<'a> {
    /// `(directory, clients)` pairs.
    pub exports: &'a [(&'a str, &'a str)],
}

impl Fact for ExportsChanged<'_> {
    type Value = bool;

    fn what(&self) -> String {
        "whether the exports changed".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(storage_cmd::exports(self.exports)?))
    }

    fn placeholder(&self) -> bool {
        true
    }

    fn parse(&self, out: &str) -> std::result::Result<bool, String> {
        storage_cmd::parse_exports(out)
    }
}

/// One PersistentVolume's phase: one of Kubernetes' five words, or `""` when the PV does not
/// exist; anything else is refused (it is shown in the error that deletes the PV). A plan
/// assumes `Available`, so it does not poll.
pub struct PvPhase<'a> {
    pub name: &'a str,
}

impl Fact for PvPhase<'_> {
    type Value = String;

    fn what(&self) -> String {
        "the PersistentVolume's phase".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(storage_cmd::pv_phase(self.name)?))
    }

    fn placeholder(&self) -> String {
        "Available".to_string()
    }

    fn parse(&self, out: &str) -> std::result::Result<String, String> {
        storage_cmd::parse_phase(out)
    }
}

/// `(name, phase)` of the named PVs that exist, every name a Kubernetes name and every phase
/// one of the five (a Bound one stops a storage heal, and its name is shown).
pub struct PvList<'a> {
    pub names: &'a [&'a str],
}

impl Fact for PvList<'_> {
    type Value = Vec<(String, String)>;

    fn what(&self) -> String {
        "the PersistentVolumes".into()
    }

    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(storage_cmd::pv_get(self.names)?))
    }

    fn placeholder(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn parse(&self, out: &str) -> std::result::Result<Vec<(String, String)>, String> {
        storage_cmd::parse_pv_list(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testkit::{planned, read, unreadable, value};

    #[tokio::test]
    async fn volume_made_or_kept_by_the_last_line() {
        let f = VolumeFilesystem { device: "/dev/vdb", mount_to: "/volume" };
        let (sent, got) = read(&f, "mke2fs ...\nfilesystem=made type=ext4 uuid=1\n").await;
        assert!(sent.starts_with("storage_volume.sh") && sent.contains("/dev/vdb"), "{sent}");
        assert!(got.unwrap());
        assert!(!value(&f, "filesystem=kept type=ext4 uuid=1").await);
        assert!(unreadable(&f, "filesystem=made\n$(reboot)").await.contains("filesystem=made|kept"));
        assert!(!planned(&f).await);
        assert_eq!(f.wait(), Wait::Install);
    }

    #[tokio::test]
    async fn exports_changed_or_not_by_the_last_line() {
        let pairs = [("/volume", "10.0.0.0/24")];
        let f = ExportsChanged { exports: &pairs };
        let (sent, got) = read(&f, "exports=changed\n").await;
        assert!(sent.starts_with("nfs_exports.sh") && sent.contains("/volume"), "{sent}");
        assert!(got.unwrap());
        assert!(!value(&f, "exports=unchanged").await);
        assert!(unreadable(&f, "exports=maybe").await.contains("exports=changed|unchanged"));
        assert!(planned(&f).await);
    }

    #[tokio::test]
    async fn pv_phase_one_of_five_words_or_absent() {
        let f = PvPhase { name: "pv1" };
        let (sent, got) = read(&f, "Bound").await;
        assert!(sent.contains("kubectl get pv pv1 --ignore-not-found -o jsonpath"), "{sent}");
        assert_eq!(got.unwrap(), "Bound");
        assert_eq!(value(&f, "\n").await, "");
        assert!(unreadable(&f, "\u{1b}[2JBound").await.contains("not a PersistentVolume phase"));
        assert_eq!(planned(&f).await, "Available");
    }

    #[tokio::test]
    async fn pv_list_names_and_phases_checked() {
        let names = ["pv1", "pv2"];
        let f = PvList { names: &names };
        let list = r#"{"items":[{"metadata":{"name":"pv1"},"status":{"phase":"Bound"}},
                                {"metadata":{"name":"pv2"},"status":{"phase":"Available"}}]}"#;
        let (sent, got) = read(&f, list).await;
        assert!(sent.contains("kubectl get pv pv1 pv2 --ignore-not-found -o json"), "{sent}");
        assert_eq!(got.unwrap(), vec![("pv1".into(), "Bound".into()), ("pv2".into(), "Available".into())]);
        assert_eq!(value(&f, "").await, vec![]);
        let one = r#"{"metadata":{"name":"pv1"},"status":{"phase":"Released"}}"#;
        assert_eq!(value(&f, one).await, vec![("pv1".into(), "Released".into())]);
        unreadable(&f, r#"{"metadata":{"name":"PV 1; x"},"status":{"phase":"Bound"}}"#).await;
        unreadable(&f, "not json").await;
        assert!(planned(&f).await.is_empty());
    }
}
