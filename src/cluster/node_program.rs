//! Consecutive steps on one node sent as one exec (pure). At an edge site each exec is one round
//! trip, and a hook's per-node steps (sweep the env files, `/etc/hosts`, the registries, the
//! install, read the hostname back) need nothing from another node and no decision of the
//! controller between them: one node program runs them in order, so a node costs one round trip
//! where it cost one per step (issue 24).
//!
//! Each step keeps its own guarantees: it is the same quoted command it was alone, run in a
//! subshell (an `exit` or `cd` in it stays there); the next step runs only when it succeeded;
//! the first that fails names itself on stderr and the program exits with its status, so the
//! error still names the node, the command and what went wrong. People see the steps' labels
//! joined by ` && ` (`clean_env.sh ... && hosts_update.sh ...`), never a program's text.

use crate::error::Result;
use crate::quote::quote;
use crate::remote;

#[derive(Clone, Debug, Default)]
pub struct NodeProgram {
    /// Each step's shell text and what people see of it.
    steps: Vec<(String, String)>,
}

impl NodeProgram {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, step: String) {
        let label = label_of(&step).to_string();
        self.steps.push((step, label));
    }

    /// A step shown as `label` (a step whose text is not what people should read).
    pub fn push_as(&mut self, step: String, label: &str) {
        self.steps.push((step, label.to_string()));
    }

    /// The shell text. One step is sent as it is.
    pub fn script(&self) -> Result<String> {
        if let [(one, _)] = self.steps.as_slice() {
            return Ok(one.clone());
        }
        let mut s = String::new();
        for (step, label) in &self.steps {
            let name = label.split(' ').next().unwrap_or_default();
            let failed = quote(&format!("mgmt-driver: step {name} failed with exit status"))?;
            s.push_str(&format!("( {step}\n) || {{ s=$?; printf '%s %s\\n' {failed} \"$s\" >&2; exit \"$s\"; }}\n"));
        }
        Ok(s)
    }

    /// What people see: each step's label, ` && ` between them.
    pub fn label(&self) -> String {
        self.steps.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join(" && ")
    }
}

/// A step as people see it: a `src/remote/` program as `<name> <arg>...`, anything else as is.
fn label_of(step: &str) -> &str {
    remote::label(step).unwrap_or(step)
}

/// The line before the hostname in an install program's stdout.
const HOSTNAME_MARKER: &str = "\nmgmt-driver-hostname\n";

/// The last step of an install program: a marker line, then the hostname. Shown as `hostname`
/// ([`HOSTNAME_LABEL`]).
pub const HOSTNAME_LABEL: &str = "hostname";

pub fn hostname_after() -> String {
    "printf '\\n%s\\n' mgmt-driver-hostname; hostname".into()
}

/// Split an install program's stdout at the last marker of [`hostname_after`]: what the install
/// script printed, and what `hostname` printed. An install script that prints the marker line
/// itself cannot move the split (ours comes after it); what `hostname` prints is checked as a
/// whole, as when it ran alone. `None` when the marker is missing.
pub fn split_hostname(out: &str) -> Option<(&str, &str)> {
    let at = out.rfind(HOSTNAME_MARKER)?;
    Some((&out[..at], &out[at + HOSTNAME_MARKER.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sh(script: &str) -> std::process::Output {
        Command::new("sh").arg("-c").arg(script).output().unwrap()
    }

    #[test]
    fn steps_run_in_order_until_one_fails_which_names_itself_and_keeps_its_status() {
        let mut p = NodeProgram::new();
        p.push("echo one".into());
        p.push("(exit 3)".into());
        p.push("echo never".into());
        let o = sh(&p.script().unwrap());
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "one\n");
        assert!(String::from_utf8_lossy(&o.stderr).contains("mgmt-driver: step (exit failed with exit status 3"));
        assert_eq!(p.label(), "echo one && (exit 3) && echo never");
    }

    #[test]
    fn an_exit_or_cd_in_a_step_stays_in_that_step() {
        let mut p = NodeProgram::new();
        p.push("cd / && exit 0".into());
        p.push("pwd".into());
        let o = Command::new("sh").arg("-c").arg(p.script().unwrap()).current_dir("/tmp").output().unwrap();
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), std::fs::canonicalize("/tmp").unwrap().to_str().unwrap());
    }

    #[test]
    fn one_step_is_sent_as_it_is_and_programs_show_by_their_labels() {
        let clean = crate::cluster::node_cmd::clean_env("r", &["env.install"]).unwrap();
        let mut p = NodeProgram::new();
        p.push(clean.clone());
        assert_eq!(p.script().unwrap(), clean);
        p.push_as(hostname_after(), HOSTNAME_LABEL);
        assert_eq!(p.label(), "clean_env.sh r env.install && hostname");
    }

    #[test]
    fn the_hostname_is_what_follows_the_last_marker() {
        let o = sh(&format!("echo token:x; printf '\\nmgmt-driver-hostname\\nfake\\n'; {}", hostname_after()));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let (install, host) = split_hostname(&out).unwrap();
        assert!(install.starts_with("token:x\n") && install.contains("fake"), "{install:?}");
        assert_eq!(host.trim(), String::from_utf8_lossy(&sh("hostname").stdout).trim());
        assert!(split_hostname("token:x\nworker1\n").is_none());
    }

    /// A prepare + install program as the driver builds it, run by a real `sh` in a temp
    /// "home" (the node's /etc/hosts swapped for a temp file): the leftover env file goes, the
    /// one uploaded for the install is kept by the sweep and consumed by the install, `/etc/hosts`
    /// is written, and the hostname is read after the marker; a failing install stops the
    /// program before `hostname`, naming itself, with its status.
    #[test]
    fn a_prepare_and_install_program_runs_its_steps_in_order_on_a_real_shell() {
        use crate::cluster::node_cmd::{clean_env, hosts_update};
        let home = tempfile::tempdir().unwrap();
        let run = home.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let hosts = home.path().join("hosts");
        std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
        let build = |install: &str| {
            let mut p = NodeProgram::new();
            p.push(clean_env("run", &["env.install"]).unwrap());
            let h = hosts_update(&[("10.0.0.1".into(), "master1".into())], &[]).unwrap();
            p.push(h.replace("hosts=/etc/hosts", &format!("hosts={}", hosts.display())));
            p.push(format!("cd run && . ./env.install && rm -f env.install && {install}"));
            p.push_as(hostname_after(), HOSTNAME_LABEL);
            p
        };
        for (f, text) in [("env.old", "K8S_JOIN_TOKEN=old\n"), ("env.install", "GREETING=joined\n")] {
            std::fs::write(run.join(f), text).unwrap();
        }
        let p = build("echo \"$GREETING\"");
        let o = Command::new("sh").arg("-c").arg(p.script().unwrap()).current_dir(home.path()).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let (printed, host) = split_hostname(&out).unwrap();
        assert!(printed.contains("removed env.old\n") && printed.ends_with("joined\n"), "{printed:?}");
        assert_eq!(host.trim(), String::from_utf8_lossy(&sh("hostname").stdout).trim());
        assert_eq!(std::fs::read_dir(&run).unwrap().count(), 0, "no env file is left");
        assert!(std::fs::read_to_string(&hosts).unwrap().contains("10.0.0.1 master1"));

        std::fs::write(run.join("env.install"), "X=1\n").unwrap();
        let o = Command::new("sh")
            .arg("-c")
            .arg(build("exit 7").script().unwrap())
            .current_dir(home.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(7));
        assert!(split_hostname(&String::from_utf8_lossy(&o.stdout)).is_none(), "hostname never ran");
        assert!(String::from_utf8_lossy(&o.stderr).contains("mgmt-driver: step cd failed with exit status 7"));
    }
}
