//! The VNF package directory (`--package-dir`): every script or artifact a request names is a
//! path inside it. A path that leaves it — `..`, absolute, or a symlink pointing out — is refused
//! before anything runs, so a request can never make the driver upload `/etc/shadow`.
//!
//! A file to upload is checked through the handle it is then uploaded from ([`Package::file`]):
//! the package changing between the check and the upload cannot slip another file in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::transport::{OpenFile, Source};

#[derive(Clone, Debug)]
pub struct Package {
    root: PathBuf,
    /// Files handed out by [`Package::file`], by real path: each one is opened once per run,
    /// however many nodes upload it (one descriptor per file, not per node).
    open: Arc<Mutex<HashMap<PathBuf, OpenFile>>>,
}

impl Package {
    pub fn open(dir: &Path) -> Result<Package> {
        let root = dir
            .canonicalize()
            .map_err(|e| Error::input("--package-dir", dir.display().to_string(), format!("cannot open: {e}")))?;
        if !root.is_dir() {
            return Err(Error::input("--package-dir", dir.display().to_string(), "is not a directory"));
        }
        Ok(Package { root, open: Arc::default() })
    }

    /// Resolve `rel` (named by `field` of `file`) to a real path inside the package.
    pub fn resolve(&self, rel: &str, file: &str, field: &str, want_dir: bool) -> Result<PathBuf> {
        self.checked(rel, file, field, want_dir).map(|(at, _)| at)
    }

    /// The regular file `rel` as an upload source: checked through its open handle, which the
    /// upload then reads — never the name again.
    pub fn file(&self, rel: &str, file: &str, field: &str) -> Result<Source> {
        let (at, f) = self.checked(rel, file, field, false)?;
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let o = open.entry(at.clone()).or_insert_with(|| OpenFile::new(at, f));
        Ok(Source::Open(o.clone()))
    }

    fn checked(&self, rel: &str, file: &str, field: &str, want_dir: bool) -> Result<(PathBuf, std::fs::File)> {
        let err = |m: String| Error::input(file, field, m);
        let p = Path::new(rel);
        if p.is_absolute()
            || p.components().any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
        {
            return Err(err(format!("'{rel}' must be a relative path inside the VNF package")));
        }
        // One message for a path that is missing, a link that leads out (to something or to
        // nothing) and a file that cannot be opened: the package is a vendor's, the path a
        // tenant's, and neither may learn from an error whether a controller file exists, nor
        // where a link points.
        let what = if want_dir { "directory" } else { "file" };
        let not_inside = || {
            err(format!(
                "'{rel}' is no {what} inside the VNF package (missing, unreadable, or it or a folder on its way \
                 is a link that leads out of the package)"
            ))
        };
        let full = self.root.join(p);
        let real = full.canonicalize().map_err(|_| not_inside())?;
        if !real.starts_with(&self.root) {
            return Err(not_inside());
        }
        // Check the file itself, through one open handle: where it really is and what it is.
        // Path checks one after the other could each see a different file if the package
        // changes under us. Non-blocking, so a FIFO cannot hold the open.
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&real)
            .map_err(|_| not_inside())?;
        let at = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f)))
            .unwrap_or_else(|_| real.clone());
        if !at.starts_with(&self.root) {
            return Err(not_inside());
        }
        let kind = f.metadata().map_err(|e| err(format!("'{rel}': {e}")))?.file_type();
        let ok = if want_dir { kind.is_dir() } else { kind.is_file() };
        if !ok {
            return Err(err(format!("'{rel}' is not a {what} in the VNF package")));
        }
        Ok((at, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_package() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("Scripts")).unwrap();
        std::fs::write(d.path().join("Scripts/install.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("Scripts/out.sh")).unwrap();
        std::os::unix::fs::symlink("install.sh", d.path().join("Scripts/in.sh")).unwrap();
        let pkg = Package::open(d.path()).unwrap();
        assert!(pkg.resolve("Scripts/install.sh", "r", "script_path", false).is_ok());
        assert!(pkg.resolve("Scripts/in.sh", "r", "script_path", false).is_ok(), "a link inside is fine");
        for bad in ["../x", "/etc/passwd", "Scripts/out.sh", "Scripts/../../x", "Scripts/missing.sh", "Scripts"] {
            let e = pkg.resolve(bad, "r.json", "script_path", false).unwrap_err().to_string();
            assert!(e.starts_with("r.json: script_path: "), "{bad}: {e}");
        }
        // A link out to a file that exists and one to a file that does not read the same, and
        // neither says where it points.
        std::os::unix::fs::symlink("/nonexistent/shadow", d.path().join("Scripts/nowhere.sh")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("Etc")).unwrap();
        let msg =
            |rel: &str| pkg.resolve(rel, "r.json", "script_path", false).unwrap_err().to_string().replace(rel, "X");
        for rel in ["Scripts/nowhere.sh", "Scripts/missing.sh", "Etc/passwd", "Etc/no-such-file"] {
            assert_eq!(msg(rel), msg("Scripts/out.sh"), "{rel}");
        }
        assert!(!msg("Scripts/out.sh").contains("/etc"), "{}", msg("Scripts/out.sh"));
        assert!(pkg.resolve("Scripts", "r", "offline", true).is_ok());
        // A FIFO is refused at once, not waited on.
        let fifo = d.path().join("Scripts/fifo.sh");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = pkg.resolve("Scripts/fifo.sh", "r", "script_path", false).unwrap_err().to_string();
        assert!(e.contains("is not a file"), "{e}");
    }

    #[tokio::test]
    async fn a_package_file_is_uploaded_from_the_handle_that_was_checked() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("Scripts")).unwrap();
        std::fs::write(d.path().join("Scripts/install.sh"), "echo ok\n").unwrap();
        let pkg = Package::open(d.path()).unwrap();
        let src = pkg.file("Scripts/install.sh", "r.json", "script_path").unwrap();
        assert!(src.shown().ends_with("Scripts/install.sh"), "{}", src.shown());
        // Once checked, the name is swapped for a link out of the package: the upload still
        // reads the checked file, and the same file is opened once however often it is named.
        let again = pkg.file("Scripts/install.sh", "r.json", "script_path").unwrap();
        assert_eq!(src.local_path(), again.local_path());
        std::fs::remove_file(d.path().join("Scripts/install.sh")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("Scripts/install.sh")).unwrap();
        let o = crate::transport::open_source(&src).await.unwrap();
        assert_eq!(o.size, 8);
        assert!(pkg.file("Scripts/install.sh", "r.json", "script_path").is_err(), "now it leaves the package");
    }
}
