//! Script tests of scripts/install_k8s_cluster.sh's checks that the lab cannot reach: the OS
//! list (the lab nodes are the host's Debian 12; Ubuntu 22.04 and 24.04 are only checked here),
//! the online pins, and the Kubernetes apt key's fingerprint check, run with the real `gpg` on
//! real keys made for the test. The script is sourced (it runs `main` only when executed), and
//! each check is one of its own functions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::harness::Suite;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/install_k8s_cluster.sh")
}

/// `bash -c 'source SCRIPT; BODY'` with `env`, in a clean environment.
fn run(body: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("bash");
    c.env_clear().env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    for (k, v) in env {
        c.env(k, v);
    }
    c.arg("-c").arg(format!("source {} && {body}", script().display())).output().expect("bash")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn supported_systems_are_ubuntu_22_04_and_24_04_and_debian_12() {
    for (id, v, arch, ok) in [
        ("ubuntu", "22.04", "x86_64", true),
        ("ubuntu", "24.04", "x86_64", true),
        ("ubuntu", "24.04", "aarch64", true),
        ("debian", "12", "x86_64", true),
        ("debian", "12", "aarch64", true),
        ("ubuntu", "20.04", "x86_64", false),
        ("ubuntu", "24.10", "x86_64", false),
        ("debian", "11", "x86_64", false),
        ("debian", "13", "x86_64", false),
        ("centos", "9", "x86_64", false),
        ("ubuntu", "24.04", "armv7l", false),
        ("", "", "x86_64", false),
    ] {
        let o = run(&format!("if os_supported '{id}' '{v}' '{arch}'; then echo yes; else echo no; fi"), &[]);
        let want = if ok { "yes\n" } else { "no\n" };
        assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{id} {v} {arch}: {}", text(&o));
    }
}

fn online_pins_are_filled_and_checked() {
    // Online (no K8S_OFFLINE_DIR), main master: the shipped pins pass.
    let o = run("ROLE=main-master; check_pins && echo pins-ok", &[]);
    assert!(o.status.success() && text(&o).contains("pins-ok"), "{}", text(&o));
    // Another Calico version has no recorded digest: refused, by name, unless one is given.
    let o = run("ROLE=main-master; check_pins && echo pins-ok", &[("CALICO_VERSION", "v3.29.0")]);
    assert!(!o.status.success() && text(&o).contains("CALICO_SHA256"), "{}", text(&o));
    let digest = "0".repeat(64);
    let o = run(
        "ROLE=main-master; check_pins && echo pins-ok",
        &[("CALICO_VERSION", "v3.29.0"), ("CALICO_SHA256", digest.as_str())],
    );
    assert!(o.status.success(), "{}", text(&o));
    // A worker needs no CNI digest; every node needs a well-formed key fingerprint.
    let o = run("ROLE=worker; check_pins && echo pins-ok", &[("CALICO_VERSION", "v3.29.0")]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run("ROLE=worker; check_pins && echo pins-ok", &[("K8S_KEY_FINGERPRINT", "234654DA9A296436")]);
    assert!(!o.status.success() && text(&o).contains("K8S_KEY_FINGERPRINT"), "{}", text(&o));
    // Offline mode does not use them.
    let o = run("ROLE=worker; OFFLINE_DIR=/nonexistent; check_pins && echo pins-ok", &[("K8S_KEY_FINGERPRINT", "x")]);
    assert!(o.status.success(), "{}", text(&o));
    // The recorded values themselves.
    let o = run("printf '%s %s %s' \"$K8S_KEY_FINGERPRINT\" \"$CALICO_VERSION\" \"$CALICO_SHA256\"", &[]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "DE15B14486CD377B9E876E1A234654DA9A296436 v3.28.2 be59408bf990e96276f631d2f9285c2a0f9802194c0ad1cecdb6d9c52623a1c8"
    );
}

/// A fresh OpenPGP key in `home`: its fingerprint.
fn make_key(home: &Path, uid: &str) -> String {
    let gpg = |args: &[&str]| {
        let o = Command::new("gpg")
            .env("GNUPGHOME", home)
            .args(["--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()
            .expect("gpg (apt-get install gnupg)");
        assert!(o.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    gpg(&["--quick-gen-key", uid, "ed25519", "sign", "never"]);
    let colons = gpg(&["--with-colons", "--fingerprint", uid]);
    let fpr = colons.lines().find(|l| l.starts_with("fpr:")).unwrap().split(':').nth(9).unwrap().to_string();
    // A sub key too, as real release keys often have: its fingerprint must not be taken.
    gpg(&["--quick-add-key", &fpr, "cv25519", "encr", "never"]);
    fpr
}

fn the_apt_key_is_recognised_by_its_fingerprint_only() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("gnupg");
    std::fs::create_dir(&home).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let a = make_key(&home, "release-a <a@example.invalid>");
    let b = make_key(&home, "release-b <b@example.invalid>");
    let export = |who: &[&str], file: &str| {
        let o = Command::new("gpg")
            .env("GNUPGHOME", &home)
            .args(["--batch", "--armor", "--export"])
            .args(who)
            .output()
            .unwrap();
        std::fs::write(d.path().join(file), o.stdout).unwrap();
        d.path().join(file)
    };
    let one = export(&[&a], "one.asc");
    let two = export(&[&a, &b], "two.asc");
    let junk = d.path().join("junk.asc");
    std::fs::write(&junk, "<html>not a key</html>\n").unwrap();
    let fp = |f: &Path| run(&format!("key_fingerprint {}", f.display()), &[]);
    let o = fp(&one);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), a, "the primary key's fingerprint, not the sub key's");
    for bad in [&two, &junk, &d.path().join("missing.asc")] {
        let o = fp(bad);
        assert!(!o.status.success() && o.stdout.is_empty(), "{}: {}", bad.display(), text(&o));
    }
}

/// The suite's trials (they need no lab), run by the `offline` test binary (tests/bin/offline.rs).
pub fn suite() -> Suite {
    Suite::new(file!()).without_root(&[
        ("supported_systems_are_ubuntu_22_04_and_24_04_and_debian_12", || {
            supported_systems_are_ubuntu_22_04_and_24_04_and_debian_12();
            Ok(())
        }),
        ("online_pins_are_filled_and_checked", || {
            online_pins_are_filled_and_checked();
            Ok(())
        }),
        ("the_apt_key_is_recognised_by_its_fingerprint_only", || {
            the_apt_key_is_recognised_by_its_fingerprint_only();
            Ok(())
        }),
    ])
}
