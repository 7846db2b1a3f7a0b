//! Who runs a record that says `running` (a primitive run, a site's operation), so that a
//! reader can tell a live run from one whose driver was SIGKILLed or crashed: a killed process
//! never gets to write its record's end, and without this the record says `running` for ever.
//!
//! The owner is the driver process as this machine knows it: the host name, the boot id
//! (`/proc/sys/kernel/random/boot_id`, new at every boot), the process id and the process's start
//! time in clock ticks since boot (`/proc/<pid>/stat`, so a reused pid is not taken for the
//! owner). [`liveness`] is the pure decision over a [`Processes`] view: the real one reads
//! `/proc` ([`ProcFs`]), the fake one ([`FakeProcesses`]) is a table for tests. Only the machine
//! (and PID namespace) that ran the owner can tell: on another host name the answer is
//! [`Liveness::Unknown`] and the record is shown as it is.

use serde::{Deserialize, Serialize};

/// The process that wrote a record, as this machine names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub host: String,
    pub boot_id: String,
    pub pid: u32,
    /// The process's start time, clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
}

/// What the reader can see of this machine's processes.
pub trait Processes {
    /// This machine's host name (its UTS namespace's).
    fn host(&self) -> Option<String>;
    /// The current boot's id.
    fn boot_id(&self) -> Option<String>;
    /// The start time of process `pid`, or `None` when there is no such process.
    fn start_ticks(&self, pid: u32) -> Option<u64>;
    /// This process's id.
    fn own_pid(&self) -> u32;
}

/// Whether a record's owner still runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Gone, and why (for the record's detail).
    Gone(String),
    /// This machine cannot tell (another host, or `/proc` unreadable): shown as recorded.
    Unknown,
}

impl Owner {
    /// This process as an owner; `None` when `/proc` cannot say (the record then has none and
    /// is shown as recorded).
    pub fn current(p: &dyn Processes) -> Option<Owner> {
        let pid = p.own_pid();
        Some(Owner { host: p.host()?, boot_id: p.boot_id()?, pid, start_ticks: p.start_ticks(pid)? })
    }
}

/// Whether `owner` still runs, as `p` sees this machine.
pub fn liveness(owner: &Owner, p: &dyn Processes) -> Liveness {
    let (Some(host), Some(boot)) = (p.host(), p.boot_id()) else {
        return Liveness::Unknown;
    };
    if host != owner.host {
        return Liveness::Unknown;
    }
    if boot != owner.boot_id {
        return Liveness::Gone(format!("{host} restarted since process {} started it", owner.pid));
    }
    match p.start_ticks(owner.pid) {
        None => Liveness::Gone(format!("process {} on {host} is gone", owner.pid)),
        Some(t) if t != owner.start_ticks => {
            Liveness::Gone(format!("process {} on {host} is gone (its id belongs to another process now)", owner.pid))
        }
        Some(_) => Liveness::Alive,
    }
}

/// A boot id as the kernel writes it: a UUID in lower-case text. Anything else is not trusted.
pub fn parse_boot_id(text: &str) -> Option<String> {
    let t = text.trim();
    let ok = t.len() == 36
        && t.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    ok.then(|| t.to_ascii_lowercase())
}

/// The start time (field 22) of a `/proc/<pid>/stat` line; `None` for a process that is dead
/// already (a zombie, `Z`, or `X`: killed, not yet reaped by its parent). The command name
/// (field 2) is in parentheses and may hold spaces and parentheses itself, so the fields are
/// counted after the last `)`.
pub fn parse_start_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // Fields 3.. follow: the state first; the start time is field 22, the 20th of them.
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// A host name as read back: one line of printable ASCII without spaces, at most 253 bytes.
fn parse_host(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty() && t.len() <= 253 && t.bytes().all(|b| b.is_ascii_graphic())).then(|| t.to_string())
}

/// The real view: `/proc` of this machine.
pub struct ProcFs;

impl Processes for ProcFs {
    fn host(&self) -> Option<String> {
        parse_host(&std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?)
    }

    fn boot_id(&self) -> Option<String> {
        parse_boot_id(&std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?)
    }

    fn start_ticks(&self, pid: u32) -> Option<u64> {
        parse_start_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn own_pid(&self) -> u32 {
        std::process::id()
    }
}

/// A scripted view for tests: a host name, a boot id, and a table of processes.
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub struct FakeProcesses {
    pub host: Option<String>,
    pub boot_id: Option<String>,
    pub procs: std::collections::BTreeMap<u32, u64>,
    pub pid: u32,
}

#[cfg(test)]
impl Processes for FakeProcesses {
    fn host(&self) -> Option<String> {
        self.host.clone()
    }

    fn boot_id(&self) -> Option<String> {
        self.boot_id.clone()
    }

    fn start_ticks(&self, pid: u32) -> Option<u64> {
        self.procs.get(&pid).copied()
    }

    fn own_pid(&self) -> u32 {
        self.pid
    }
}

#[cfg(test)]
impl FakeProcesses {
    /// Host `h`, boot `b`, this process `pid` started at `ticks`.
    pub fn new(h: &str, b: &str, pid: u32, ticks: u64) -> FakeProcesses {
        FakeProcesses { host: Some(h.into()), boot_id: Some(b.into()), procs: [(pid, ticks)].into(), pid }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const BOOT: &str = "0f3c2a8e-5b1d-4c7e-9a2f-1e2d3c4b5a69";

    #[test]
    fn a_live_owner_is_alive_and_a_killed_rebooted_or_reused_one_is_gone() {
        let now = FakeProcesses::new("ctl", BOOT, 4242, 1000);
        let me = Owner::current(&now).unwrap();
        assert_eq!(liveness(&me, &now), Liveness::Alive);
        // Killed: the process is no more.
        let after = FakeProcesses { procs: BTreeMap::new(), ..now.clone() };
        assert!(matches!(liveness(&me, &after), Liveness::Gone(m) if m.contains("4242")));
        // Its pid reused by another process.
        let reused = FakeProcesses { procs: [(4242, 5000)].into(), ..now.clone() };
        assert!(matches!(liveness(&me, &reused), Liveness::Gone(m) if m.contains("another process")));
        // The machine rebooted (the same pid and ticks may well exist again).
        let rebooted = FakeProcesses { boot_id: Some("1f3c2a8e-5b1d-4c7e-9a2f-1e2d3c4b5a69".into()), ..now.clone() };
        assert!(matches!(liveness(&me, &rebooted), Liveness::Gone(m) if m.contains("restarted")));
        // Another machine (or a pod with its own PID namespace) cannot tell.
        let elsewhere = FakeProcesses { host: Some("other".into()), procs: BTreeMap::new(), ..now.clone() };
        assert_eq!(liveness(&me, &elsewhere), Liveness::Unknown);
        let blind = FakeProcesses { boot_id: None, ..now };
        assert_eq!(liveness(&me, &blind), Liveness::Unknown);
        assert!(Owner::current(&blind).is_none());
    }

    #[test]
    fn proc_values_are_parsed_strictly() {
        assert_eq!(parse_boot_id(&format!("{BOOT}\n")).as_deref(), Some(BOOT));
        assert_eq!(parse_boot_id("not-a-uuid"), None);
        assert_eq!(parse_boot_id("0f3c2a8e-5b1d-4c7e-9a2f-1e2d3c4b5a6z"), None);
        // A command name with spaces and parentheses does not shift the fields.
        let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_ticks(stat), Some(987654));
        assert_eq!(parse_start_ticks("4242 (x) S 1"), None);
        assert_eq!(parse_start_ticks(&stat.replace(") S ", ") Z ")), None, "a zombie is dead");
        assert_eq!(parse_host("ctl-1\n").as_deref(), Some("ctl-1"));
        assert_eq!(parse_host("a b"), None);
        // The real view sees this very process, alive.
        let me = Owner::current(&ProcFs).expect("/proc is readable here");
        assert_eq!(liveness(&me, &ProcFs), Liveness::Alive);
    }
}
