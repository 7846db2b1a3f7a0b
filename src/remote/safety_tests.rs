//! The node-side programs against hostile input, run by a real `sh` on real temp files: a value
//! that tries to add a line to /etc/hosts or haproxy.cfg, an archive that tries to write outside
//! its directory, an owner that looks like an option, an env file whose command never starts.
//! System paths (/etc/hosts, /var/tacker/helm, ...) are swapped for temp paths in the program
//! text; everything else runs as shipped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use super::*;
use crate::quote::{join, quote};

/// Run `p` with `args`, each `(from, to)` of `swap` replaced in its text first.
fn run(p: Program, swap: &[(&str, &str)], args: &[&str]) -> Output {
    run_in(None, p, swap, args)
}

/// [`run`] in the working directory `cwd` (a relative path is in the login user's home on a
/// node).
fn run_in(cwd: Option<&Path>, p: Program, swap: &[(&str, &str)], args: &[&str]) -> Output {
    let mut text = p.text.to_string();
    for (from, to) in swap {
        assert!(text.contains(from), "{}: no {from} to swap", p.name);
        text = text.replace(from, to);
    }
    let cmd = format!("sh -c {} {} {}", quote(&text).unwrap(), p.name, join(args).unwrap());
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    // On a node the programs start under sshd with every signal at its default. A test runner
    // started in the background of a non-interactive shell inherits SIGINT/SIGQUIT ignored, and
    // a shell cannot undo an inherited ignore: put them back, so the signal tests mean the same.
    // SAFETY: signal(2) is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The names in `dir`, sorted.
fn ls(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// The chart functions of `chart_lib.sh` (helm_prepare.sh's) as programs of their own.
const PREPARE_CHART_DIR: Program = Program {
    name: "chart_dir_make.sh",
    text: concat!(include_str!("chart_lib.sh"), "chart_dir_make \"$1\" \"$2\"\n"),
};
const EXTRACT_CHART: Program = Program {
    name: "chart_extract.sh",
    text: concat!(include_str!("archive_lib.sh"), include_str!("chart_lib.sh"), "chart_extract \"$1\" \"$2\" \"$3\"\n"),
};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn hosts_file_is_replaced_by_a_rename_keeping_its_mode_and_no_value_adds_a_line() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("hosts");
    let before = "127.0.0.1 localhost\n10.0.0.1 old # mgmt-driver\n";
    std::fs::write(&f, before).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ino = std::fs::metadata(&f).unwrap().ino();
    let swap = [("hosts=/etc/hosts", &*format!("hosts={}", s(&f)))];
    let o = run(HOSTS_UPDATE, &swap, &["-d", "10.0.0.9", "10.0.0.1 master1", "fd00::2 reg reg.example"]);
    assert!(o.status.success(), "{}", text(&o));
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "127.0.0.1 localhost\n10.0.0.1 master1 # mgmt-driver\nfd00::2 reg reg.example # mgmt-driver\n"
    );
    assert_ne!(m.ino(), ino, "replaced by a rename, not rewritten in place");
    assert_eq!(m.permissions().mode() & 0o777, 0o640, "mode kept");
    assert_eq!(ls(d.path()), ["hosts"], "no temp file left");

    let good = std::fs::read_to_string(&f).unwrap();
    for args in [
        &["10.0.0.1 m1\n10.6.6.6 evil"][..],
        &["10.0.0.1 m1\\n10.6.6.6 evil"],
        &["10.0.0.1 m1 # x"],
        &["10.0.0.1"],
        &["10.0.0.1\n10.6.6.6 evil"],
        &["-d", "10.0.0.1 10.0.0.2", "10.0.0.3 m3"],
        &["-d", "\n", "10.0.0.3 m3"],
    ] {
        let o = run(HOSTS_UPDATE, &swap, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("refused"), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), good, "{args:?} changed the file");
        assert_eq!(ls(d.path()), ["hosts"], "{args:?}: a temp file is left");
    }
}

#[test]
fn haproxy_cfg_is_replaced_by_a_rename_and_a_hostile_name_adds_no_line() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("haproxy.cfg");
    let cfg = "backend masters\n    server  master1  10.0.0.1:6443 check\n";
    std::fs::write(&f, cfg).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ino = std::fs::metadata(&f).unwrap().ino();
    let swap = [("cfg=/etc/haproxy/haproxy.cfg", &*format!("cfg={}", s(&f))), ("systemctl reload haproxy", "true")];
    let o = run(HAPROXY_BACKEND, &swap, &["master2", "10.0.0.2"]);
    assert!(o.status.success(), "{}", text(&o));
    let m = std::fs::metadata(&f).unwrap();
    let good = format!("{cfg}    server  master2  10.0.0.2:6443 check\n");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), good);
    assert!(m.ino() != ino && m.permissions().mode() & 0o777 == 0o644, "renamed, mode kept");
    assert_eq!(ls(d.path()), ["haproxy.cfg"]);
    // `awk -v name=...` would have turned this `\n` into a new line; it is refused before awk.
    for args in [
        &["m\\n    server  evil  6.6.6.6:6443 check"][..],
        &["m\n    server  evil  6.6.6.6:6443 check"],
        &["m", "10.0.0.2:1 backup\n    server evil 6.6.6.6"],
        &["-m"],
        &[""],
    ] {
        let o = run(HAPROXY_BACKEND, &swap, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), good, "{args:?} changed the file");
    }
}

/// A bind-mounted file (a container's /etc/hosts) cannot be renamed over: it is rewritten in
/// place, with a note. Needs a private mount namespace (`unshare`, as root or with user
/// namespaces); where there is none, the test says so and checks nothing.
#[test]
fn a_bind_mounted_hosts_file_is_rewritten_in_place_with_a_note() {
    let probe =
        |args: &[&str]| Command::new("unshare").args(args).arg("true").output().is_ok_and(|o| o.status.success());
    let flags: &[&str] = if probe(&["-m"]) {
        &["-m"]
    } else if probe(&["-r", "-m"]) {
        &["-r", "-m"]
    } else {
        eprintln!("SKIPPED a_bind_mounted_hosts_file_is_rewritten_in_place_with_a_note: no unshare -m here");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (f, src) = (d.path().join("hosts"), d.path().join("mounted"));
    std::fs::write(&f, "").unwrap();
    std::fs::write(&src, "127.0.0.1 localhost\n").unwrap();
    let program = HOSTS_UPDATE.text.replace("hosts=/etc/hosts", &format!("hosts={}", s(&f)));
    let program = format!("mount --bind {} {} || exit 99\n{program}", quote(s(&src)).unwrap(), quote(s(&f)).unwrap());
    let o = Command::new("unshare")
        .args(flags)
        .args(["sh", "-c", &program, "hosts_update.sh", "10.0.0.1 m1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("rewritten in place"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&src).unwrap(), "127.0.0.1 localhost\n10.0.0.1 m1 # mgmt-driver\n");
    assert_eq!(ls(d.path()), ["hosts", "mounted"], "no temp file left");
}

#[test]
fn the_env_file_goes_even_when_the_command_never_starts() {
    let d = tempfile::tempdir().unwrap();
    let run_dir = d.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let env = run_dir.join("env.install");
    let go = |content: &str, name: &str| {
        std::fs::write(&env, content).unwrap();
        let o = run(RUN_WITH_ENV, &[], &[s(&run_dir), name, "sh", "-c", "echo ran; ls -A"]);
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    // Started: gone before the command runs.
    assert_eq!(go("K8S_JOIN_TOKEN='t'\n", "env.install"), (Some(0), "ran\n".into()));
    // The file cannot be read as variables: the command does not start, the file still goes.
    let (code, out) = go("K8S_JOIN_TOKEN='t\n", "env.install");
    assert!(code != Some(0) && out.is_empty() && !env.exists(), "{code:?} {out}");
    // A signal while it is read (a dropped connection's HUP, a kill): gone too.
    for sig in ["HUP", "TERM", "INT"] {
        let (code, out) = go(&format!("K8S_JOIN_TOKEN='t'\nkill -{sig} $$\nsleep 5\n"), "env.install");
        assert!(code.is_some_and(|c| c > 128) && out.is_empty() && !env.exists(), "{sig}: {code:?} {out}");
    }
    // A file name with a slash is not an env file of this run directory.
    std::fs::write(&env, "X=1\n").unwrap();
    let o = run(RUN_WITH_ENV, &[], &[s(d.path()), "run/env.install", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn clean_env_removes_the_run_directorys_env_files_only() {
    let d = tempfile::tempdir().unwrap();
    for f in ["env.install", "env.helm", "env.helm.mgmtd-00c0ffee00c0ffee", "install_k8s_cluster.sh", "offline"] {
        std::fs::write(d.path().join(f), "x").unwrap();
    }
    let o = run(CLEAN_ENV, &[], &[s(d.path())]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "removed env.helm\nremoved env.helm.mgmtd-00c0ffee00c0ffee\nremoved env.install\n"
    );
    assert_eq!(ls(d.path()), ["install_k8s_cluster.sh", "offline"]);
    let o = run(CLEAN_ENV, &[], &[s(&d.path().join("missing"))]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
}

/// A merged node program uploads its own env files with the scripts and sweeps after that:
/// the names it keeps stay (exact names only: an upload's broken-off temporary copy goes).
#[test]
fn clean_env_keeps_exactly_the_names_it_is_given() {
    let d = tempfile::tempdir().unwrap();
    for f in ["env.install", "env.install.mgmtd-00c0ffee00c0ffee", "env.old", "env.registry-auth", "x.sh"] {
        std::fs::write(d.path().join(f), "x").unwrap();
    }
    let o = run(CLEAN_ENV, &[], &[s(d.path()), "env.install", "env.registry-auth", "env.*"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "removed env.install.mgmtd-00c0ffee00c0ffee\nremoved env.old\n");
    assert_eq!(ls(d.path()), ["env.install", "env.registry-auth", "x.sh"]);
}

/// `tar` in `dir` with `args`, must succeed.
fn tar(dir: &Path, args: &[&str]) {
    let o = Command::new("tar").current_dir(dir).args(args).output().unwrap();
    assert!(o.status.success(), "tar {args:?}: {}", text(&o));
}

/// A scratch node for unpack_charts.sh: `root` stands for /var/tacker/helm (with a chart an
/// earlier run left), `src` is where archives are built, `outside` must never change.
struct Charts {
    d: tempfile::TempDir,
}

impl Charts {
    fn new() -> Charts {
        let c = Charts { d: tempfile::tempdir().unwrap() };
        for p in ["node/var/tacker/helm/old", "outside", "src/var/tacker/helm/vnf1/c/templates"] {
            std::fs::create_dir_all(c.p(p)).unwrap();
        }
        std::fs::write(c.p("node/var/tacker/helm/old/Chart.yaml"), "name: old\n").unwrap();
        std::fs::write(c.p("src/var/tacker/helm/vnf1/c/Chart.yaml"), "name: c\n").unwrap();
        c
    }

    fn p(&self, rel: &str) -> std::path::PathBuf {
        self.d.path().join(rel)
    }

    fn unpack(&self, archive: &str) -> Output {
        let root = format!("root={}", s(&self.p("node/var/tacker/helm")));
        run(UNPACK_CHARTS, &[("root=/var/tacker/helm", &root)], &[s(&self.p(archive))])
    }

    /// Nothing outside the chart root changed, no staging directory is left, the archive is gone.
    fn untouched(&self, archive: &str, o: &Output, why: &str) {
        assert_eq!(o.status.code(), Some(1), "{}", text(o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("refused the archive") && err.contains(why), "{why}: {}", text(o));
        assert!(ls(&self.p("outside")).is_empty(), "wrote outside: {:?}", ls(&self.p("outside")));
        assert_eq!(ls(&self.p("node/var/tacker")), ["helm"], "staging left behind");
        assert_eq!(ls(&self.p("node/var/tacker/helm")), ["old"]);
        assert!(!self.p(archive).exists(), "the archive is deleted on every path");
    }
}

#[test]
fn a_survivors_chart_root_is_restored_under_the_chart_root_only() {
    let c = Charts::new();
    tar(&c.p("src"), &["-czf", "../good.tgz", "var/tacker/helm"]);
    let o = c.unpack("good.tgz");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(ls(&c.p("node/var/tacker/helm")), ["old", "vnf1"], "the survivor's entries added, others kept");
    assert_eq!(std::fs::read_to_string(c.p("node/var/tacker/helm/vnf1/c/Chart.yaml")).unwrap(), "name: c\n");
    assert_eq!(ls(&c.p("node/var/tacker")), ["helm"]);
    assert!(!c.p("good.tgz").exists());
}

#[test]
fn a_crafted_chart_archive_is_refused_before_anything_is_written() {
    let c = Charts::new();
    let outside = c.p("outside");
    let src = c.p("src");
    // `..` in a member name, kept as written (-P).
    tar(&src, &["-czPf", "../dots.tgz", "var/tacker/helm/vnf1/../../../../../outside"]);
    c.untouched("dots.tgz", &c.unpack("dots.tgz"), "a .. component");
    // An absolute member.
    std::fs::write(src.join("abs"), "x").unwrap();
    tar(&src, &["-czPf", "../abs.tgz", s(&src.join("abs"))]);
    c.untouched("abs.tgz", &c.unpack("abs.tgz"), "outside var/tacker/helm: /");
    // A member outside the chart root.
    tar(&src, &["-czf", "../other.tgz", "var/tacker/helm", "abs"]);
    c.untouched("other.tgz", &c.unpack("other.tgz"), "outside var/tacker/helm: abs");
    // A symbolic link out of the tree, then a file written through it.
    let l = src.join("var/tacker/helm/vnf1/l");
    std::os::unix::fs::symlink(&outside, &l).unwrap();
    tar(&src, &["-cf", "../link.tar", "var/tacker/helm/vnf1/l"]);
    std::fs::remove_file(&l).unwrap();
    std::fs::create_dir(&l).unwrap();
    std::fs::write(l.join("pwned"), "x").unwrap();
    tar(&src, &["-rf", "../link.tar", "var/tacker/helm/vnf1/l/pwned"]);
    let gz = Command::new("sh").current_dir(c.p("")).args(["-c", "gzip -c link.tar >link.tgz"]).status().unwrap();
    assert!(gz.success());
    c.untouched("link.tgz", &c.unpack("link.tgz"), "not a plain file or directory: l");
    std::fs::remove_dir_all(&l).unwrap();
    // A hard link (its target could name any file once extracted).
    std::fs::write(src.join("var/tacker/helm/vnf1/h1"), "x").unwrap();
    std::fs::hard_link(src.join("var/tacker/helm/vnf1/h1"), src.join("var/tacker/helm/vnf1/h2")).unwrap();
    tar(&src, &["-czf", "../hard.tgz", "var/tacker/helm/vnf1/h1", "var/tacker/helm/vnf1/h2"]);
    c.untouched("hard.tgz", &c.unpack("hard.tgz"), "not a plain file or directory: h");
    std::fs::remove_file(src.join("var/tacker/helm/vnf1/h2")).unwrap();
    std::fs::remove_file(src.join("var/tacker/helm/vnf1/h1")).unwrap();
    // A name with a newline (tar lists it escaped).
    std::fs::write(src.join("var/tacker/helm/vnf1/a\nb"), "x").unwrap();
    tar(&src, &["-czf", "../nl.tgz", "var/tacker/helm"]);
    c.untouched("nl.tgz", &c.unpack("nl.tgz"), "an escaped character");
}

#[test]
fn a_crafted_cnf_chart_is_refused_and_the_earlier_copy_stays() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("i1");
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::write(dir.join("c/Chart.yaml"), "name: c\nversion: 0.9\n").unwrap();
    let build = d.path().join("build");
    std::fs::create_dir_all(build.join("c/templates")).unwrap();
    std::fs::write(build.join("c/Chart.yaml"), "name: c\nversion: 1.0\n").unwrap();
    let extract = |tgz: &str| run(EXTRACT_CHART, &[], &[s(&dir), tgz, "c"]);
    let kept = |o: &Output, why: &str| {
        assert_eq!(o.status.code(), Some(1), "{why}: {}", text(o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{why}: {}", text(o));
        assert_eq!(std::fs::read_to_string(dir.join("c/Chart.yaml")).unwrap(), "name: c\nversion: 0.9\n", "{why}");
        assert!(!d.path().join("evil").exists(), "{why}: wrote outside");
        assert!(ls(&dir).iter().all(|n| !n.starts_with(".extract")), "{why}: staging left: {:?}", ls(&dir));
    };
    std::fs::write(build.join("evil"), "x").unwrap();
    tar(&build, &["-czPf", "../i1/dots.tgz", "c/../evil"]);
    kept(&extract("dots.tgz"), "a .. component: c/../evil");
    tar(&build, &["-czf", "../i1/other.tgz", "c", "evil"]);
    kept(&extract("other.tgz"), "outside c: evil");
    std::os::unix::fs::symlink("/etc", build.join("c/templates/etc")).unwrap();
    tar(&build, &["-czf", "../i1/link.tgz", "c"]);
    kept(&extract("link.tgz"), "not a plain file or directory: l");
    std::fs::remove_file(build.join("c/templates/etc")).unwrap();
    // The same chart without tricks replaces the earlier copy.
    tar(&build, &["-czf", "../i1/c-1.0.tgz", "c"]);
    let o = extract("c-1.0.tgz");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(dir.join("c/Chart.yaml")).unwrap(), "name: c\nversion: 1.0\n");
    for bad in ["..", "a/b", "-c", ""] {
        assert_eq!(run(EXTRACT_CHART, &[], &[s(&dir), "c-1.0.tgz", bad]).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn an_owner_that_looks_like_an_option_never_reaches_chown() {
    let d = tempfile::tempdir().unwrap();
    for bad in ["--reference=/etc/shadow", "-R", "a b", "u:g:x", ":g", "u:", "u\nx", ""] {
        let dir = d.path().join("x");
        let o = run(PREPARE_CHART_DIR, &[], &[s(&dir), bad]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", text(&o));
        assert!(!dir.exists(), "{bad:?}: made the directory");
    }
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let o = run(PREPARE_CHART_DIR, &[], &[s(&d.path().join("ok")), me.trim()]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A relative chart directory whose name starts with `-` is an operand of mkdir, chown and
/// chmod, never an option.
#[test]
fn a_chart_dir_that_looks_like_an_option_is_a_directory() {
    let d = tempfile::tempdir().unwrap();
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let o = run_in(Some(d.path()), PREPARE_CHART_DIR, &[], &["-R", me.trim()]);
    assert!(o.status.success(), "{}", text(&o));
    let m = std::fs::metadata(d.path().join("-R")).unwrap();
    assert!(m.is_dir() && m.permissions().mode() & 0o777 == 0o755, "{m:?}");
}

/// The upload programs (issue 20): a target or temporary name that starts with `-` reaches
/// chmod, mv and rm as a file, never as an option. The driver refuses such remote paths before
/// anything connects (`transport::check_not_an_option`); this is the defence behind that.
#[test]
fn upload_targets_that_look_like_options_are_files_not_options() {
    let d = tempfile::tempdir().unwrap();
    let at = Some(d.path());
    let mode = |n: &str| std::fs::metadata(d.path().join(n)).unwrap().permissions().mode() & 0o777;
    let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    // Written first (TMP verified, chmod, mv), then skipped (chmod only); stdin is empty.
    for want in ["written", "skipped"] {
        let o = run_in(at, UPLOAD_INLINE, &[], &["-R", "-R.mgmtd-0000000000000001", empty, "640"]);
        assert!(o.status.success(), "{want}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), want, "{}", text(&o));
        assert_eq!(mode("-R"), 0o640, "{want}");
    }
    let o = run_in(at, UPLOAD_PROBE, &[], &["60", "-R", "-n"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("640 {empty}\n-\n"), "{}", text(&o));
    // Finalize: a chmod step and a move step, both on names that look like options.
    std::fs::write(d.path().join("-t"), "").unwrap();
    let o = run_in(at, UPLOAD_FINALIZE, &[], &["chmod", "600", "-R", "move", "-t", "-n", empty, "604"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((mode("-R"), mode("-n")), (0o600, 0o604));
    assert_eq!(ls(d.path()), ["-R", "-n"], "the temporary file is moved");
    // A checksum mismatch removes the temporary file and leaves the target alone.
    std::fs::write(d.path().join("-t"), "x").unwrap();
    let o = run_in(at, UPLOAD_FINALIZE, &[], &["move", "-t", "-n", empty, "600"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("checksum mismatch"), "{}", text(&o));
    assert_eq!(ls(d.path()), ["-R", "-n"], "the bad temporary file is removed");
    assert_eq!(mode("-n"), 0o604);
}

/// nfs_exports.sh (storage slice): our exports file only, written whole; a client that carries
/// options or a second client, and a directory with a newline or `..`, are refused before
/// anything is written; a re-run with the same exports says `unchanged`. The server start and
/// `exportfs` are swapped for `true` (they would act on this machine).
#[test]
fn the_exports_file_holds_our_lines_only_and_a_hostile_client_adds_no_option() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("exports.d/mgmt-driver.exports");
    let exd = d.path().join("exports.d");
    let (f, e) = (s(&file).to_string(), s(&exd).to_string());
    let mk = format!("mkdir -p {e}");
    let swap = [
        ("/etc/exports.d/mgmt-driver.exports", f.as_str()),
        ("mkdir -p /etc/exports.d", mk.as_str()),
        ("systemctl enable --now nfs-kernel-server", "true"),
        ("exportfs -ra", "true"),
    ];
    let dir = d.path().join("nfs/pv1");
    let dir = s(&dir);
    let o = run(NFS_EXPORTS, &swap, &[dir, "10.10.0.0/24"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).ends_with("exports=changed\n"), "{}", text(&o));
    let want = format!("{dir} 10.10.0.0/24(rw,sync,no_subtree_check,insecure,all_squash)\n");
    let got = std::fs::read_to_string(&file).unwrap();
    assert!(got.ends_with(&want) && got.lines().count() == 2, "{got}");
    let o = run(NFS_EXPORTS, &swap, &[dir, "10.10.0.0/24"]);
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("exports=unchanged\n"), "{}", text(&o));
    for (d2, client) in [
        (dir, "10.0.0.1(rw,no_root_squash)"),
        (dir, "10.0.0.1 *"),
        (dir, "-o"),
        (dir, ""),
        ("/srv/a\n/ *", "10.0.0.1"),
        ("/srv/../etc", "10.0.0.1"),
        ("srv", "10.0.0.1"),
    ] {
        let o = run(NFS_EXPORTS, &swap, &[d2, client]);
        assert_eq!(o.status.code(), Some(2), "{d2:?} {client:?}: {}", text(&o));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), got, "{d2:?} {client:?} changed the file");
    }
    let o = run(NFS_EXPORTS, &swap, &[dir]);
    assert_eq!(o.status.code(), Some(2), "an odd number of arguments: {}", text(&o));
    let o = run(NFS_PACKAGES, &[("exec apt-get", "exit 0; apt-get")], &["--allow-unauthenticated"]);
    assert_eq!(o.status.code(), Some(2), "an option as a package: {}", text(&o));
}

/// nfs_packages.sh -e (storage slice): the env file's proxy reaches apt-get's environment, and
/// the file is gone before apt-get runs, also when it cannot be read.
#[test]
fn the_storage_servers_proxy_env_file_is_read_then_deleted() {
    let d = tempfile::tempdir().unwrap();
    let env = d.path().join("env.storage");
    std::fs::write(&env, "http_proxy='http://u:Pr0xy@p:3128'\n").unwrap();
    let probe = [("exec apt-get install -y -q \"$@\"", "printf '%s %s\\n' \"$http_proxy\" \"$*\"")];
    let o = run(NFS_PACKAGES, &probe, &["-e", s(&env), "nfs-kernel-server"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("http://u:Pr0xy@p:3128 nfs-kernel-server\n"),
        "{}",
        text(&o)
    );
    assert!(!env.exists(), "the env file is still there");
    std::fs::write(&env, "http_proxy='x'\n").unwrap();
    let o = run(NFS_PACKAGES, &probe, &["-e", s(&env), "-bad"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!env.exists(), "a refused run left the env file");
}

#[test]
fn a_cluster_environment_never_writes_through_a_planted_link() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("admin.conf");
    std::fs::write(&src, "apiVersion: v1\n").unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "untouched\n").unwrap();
    let env = d.path().join("-rf x");
    std::fs::create_dir_all(&env).unwrap();
    std::os::unix::fs::symlink(&victim, env.join("kubeconfig.new")).unwrap();
    let o = run(HELM_ENV, &[], &[s(&env), s(&src)]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    let k = std::fs::symlink_metadata(env.join("kubeconfig")).unwrap();
    assert!(k.file_type().is_file() && k.mode() & 0o777 == 0o600, "{k:?}");
    assert_eq!(ls(&env), ["cache", "config", "data", "kubeconfig"]);
    let o = run(HELM_ENV_RESET, &[], &[s(&env)]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "removed\n", "{}", text(&o));
    assert!(!env.exists() && victim.exists() && src.exists());
}
