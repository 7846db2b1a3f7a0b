//! Files in a place only the running user may change: the state directory and the state key.
//!
//! The state directory may sit on a volume others can reach (a shared ReadWriteMany volume for
//! `sites export k8s-job`, a 1777 `/tmp` by mistake). Whatever is planted there must not steer
//! a write elsewhere or stall the run, so, as OpenSSH does for `~/.ssh`:
//! - a directory is trusted only when the running user owns it and neither group nor others
//!   may write to it; one that is not is refused, never silently chmodded (chmodding a shared
//!   1777 directory would lock its other users out and still trust what they planted);
//! - files are created new, never through a symlink (`O_NOFOLLOW` with create-new);
//! - files are read non-blocking (a FIFO fails the regular-file check instead of waiting for a
//!   writer), regular files only, and only up to a cap.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The effective uid: what "owned by the running user" means (0 when run as root, as CI does).
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no argument, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why an existing directory cannot hold private files, with how to fix it; `None` when it can.
/// A directory of mode 0755 owned by the user is accepted: others may read, but not change,
/// what it holds (the documents themselves are 0600).
pub fn untrusted_dir(dir: &Path, meta: &Metadata) -> Option<String> {
    let d = dir.display();
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    let me = euid();
    if meta.uid() != me {
        return Some(format!(
            "is owned by uid {}, not by the user running mgmt-driver (uid {me}): its owner could plant or \
             swap what it holds; use a directory of your own (e.g. `chown {me} {d}` or another --state-dir)",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "is writable by group or others (mode {:o}): anyone who can write here could plant or swap what it \
             holds; make it private (`chmod 700 {d}`) or use another directory",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Why a secret file's owner or mode is unsafe; `None` when it is fine. Its owner is the running
/// user or root (a Kubernetes Secret volume's files are root's, readable through the pod's
/// fsGroup), nobody else may write it, and others (beyond the owner and group) may not read it.
pub fn unsafe_secret(path: &Path, meta: &Metadata) -> Option<String> {
    let p = path.display();
    let me = euid();
    if meta.uid() != me && meta.uid() != 0 {
        return Some(format!(
            "is owned by uid {}, not by the user running mgmt-driver (uid {me}) or root: its owner could swap \
             the key; use a file of your own (`chown {me} {p}`)",
            meta.uid()
        ));
    }
    if meta.mode() & 0o026 != 0 {
        return Some(format!(
            "is writable by group or others, or readable by others (mode {:o}): the key unseals every \
             recorded secret; make it private (`chmod 600 {p}`)",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Open `path` for reading without blocking and only if it is a regular file; with
/// `follow == false` a symlink at `path` is refused too. Reads at most `max` bytes: more is an
/// error, never a partial read.
pub fn read_regular(path: &Path, max: u64, follow: bool) -> std::io::Result<(Vec<u8>, Metadata)> {
    let flags = libc::O_NONBLOCK | if follow { 0 } else { libc::O_NOFOLLOW };
    let f = OpenOptions::new().read(true).custom_flags(flags).open(path).map_err(explain_symlink)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("is not a regular file; refused unread"));
    }
    let mut buf = Vec::new();
    // One byte more than allowed tells "exactly at the cap" from "over it".
    f.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::other(format!("is larger than {max} bytes; refused")));
    }
    Ok((buf, meta))
}

/// Create a new private (0600) file: refuses an existing file and never follows a symlink, so
/// nothing planted at `path` can redirect the write.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(explain_symlink)
}

/// Open (or create, 0600) a lock file: never through a symlink, never blocking on a FIFO, and
/// only a regular file.
pub fn open_lock(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(explain_symlink)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("is not a regular file; refused"));
    }
    Ok(f)
}

/// `O_NOFOLLOW` on a symlink fails with ELOOP ("too many levels of symbolic links"): say what
/// it means here.
fn explain_symlink(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other("is a symbolic link; refused (files here are never written or read through a link)")
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_dir_is_trusted_only_when_ours_and_not_writable_by_others() {
        let d = tempfile::tempdir().unwrap();
        let meta = |m: u32| {
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(m)).unwrap();
            std::fs::metadata(d.path()).unwrap()
        };
        assert_eq!(untrusted_dir(d.path(), &meta(0o700)), None);
        assert_eq!(untrusted_dir(d.path(), &meta(0o755)), None, "readable by others, as OpenSSH accepts");
        for bad in [0o1777, 0o770, 0o702] {
            let why = untrusted_dir(d.path(), &meta(bad)).expect("refused");
            assert!(why.contains("writable by group or others") && why.contains("chmod 700"), "{why}");
        }
        let not_ours = std::fs::metadata("/").unwrap();
        if euid() != 0 {
            assert!(untrusted_dir(Path::new("/"), &not_ours).unwrap().contains("owned by uid 0"));
        }
    }

    #[test]
    fn reads_refuse_links_fifos_and_oversize_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "12345").unwrap();
        assert_eq!(read_regular(&f, 5, false).unwrap().0, b"12345");
        assert!(read_regular(&f, 4, false).unwrap_err().to_string().contains("larger than 4 bytes"));
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(read_regular(&l, 5, false).unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(read_regular(&l, 5, true).unwrap().0, b"12345");
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read_regular(&fifo, 5, true).unwrap_err().to_string().contains("not a regular file"));
        assert!(open_lock(&fifo).is_err(), "a FIFO is no lock file (and does not block)");
        assert_eq!(create_new(&l).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists, "never through a link");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "12345");
    }
}
