//! The VNF package directory (`--package-dir`): every script or artifact a request names is a
//! path inside it. A path that leaves it — `..`, absolute, or a symlink pointing out — is refused
//! before anything runs, so a request can never make the driver upload `/etc/shadow`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Package {
    root: PathBuf,
}

impl Package {
    pub fn open(dir: &Path) -> Result<Package> {
        let root = dir
            .canonicalize()
            .map_err(|e| Error::input("--package-dir", dir.display().to_string(), format!("cannot open: {e}")))?;
        if !root.is_dir() {
            return Err(Error::input("--package-dir", dir.display().to_string(), "is not a directory"));
        }
        Ok(Package { root })
    }

    /// Resolve `rel` (named by `field` of `file`) to a real path inside the package.
    pub fn resolve(&self, rel: &str, file: &str, field: &str, want_dir: bool) -> Result<PathBuf> {
        let err = |m: String| Error::input(file, field, m);
        let p = Path::new(rel);
        if p.is_absolute()
            || p.components().any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
        {
            return Err(err(format!("'{rel}' must be a relative path inside the VNF package")));
        }
        let full = self.root.join(p);
        let real = full
            .canonicalize()
            .map_err(|e| err(format!("'{rel}' not found in the VNF package {}: {e}", self.root.display())))?;
        if !real.starts_with(&self.root) {
            return Err(err(format!("'{rel}' leaves the VNF package (it resolves to {})", real.display())));
        }
        // Check the file itself, through one open handle: where it really is and what it is.
        // Path checks one after the other could each see a different file if the package
        // changes under us. Non-blocking, so a FIFO cannot hold the open.
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&real)
            .map_err(|e| err(format!("'{rel}' cannot be opened in the VNF package: {e}")))?;
        let at = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f)))
            .unwrap_or_else(|_| real.clone());
        if !at.starts_with(&self.root) {
            return Err(err(format!("'{rel}' leaves the VNF package (it resolves to {})", at.display())));
        }
        let kind = f.metadata().map_err(|e| err(format!("'{rel}': {e}")))?.file_type();
        let ok = if want_dir { kind.is_dir() } else { kind.is_file() };
        if !ok {
            return Err(err(format!(
                "'{rel}' is not a {} in the VNF package",
                if want_dir { "directory" } else { "file" }
            )));
        }
        Ok(at)
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
        assert!(pkg.resolve("Scripts", "r", "offline", true).is_ok());
        // A FIFO is refused at once, not waited on.
        let fifo = d.path().join("Scripts/fifo.sh");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = pkg.resolve("Scripts/fifo.sh", "r", "script_path", false).unwrap_err().to_string();
        assert!(e.contains("is not a file"), "{e}");
    }
}
