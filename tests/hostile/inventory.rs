//! Hostile inventory inputs: every host field with shell, option, newline, NUL, ESC, unicode
//! lookalike and out-of-range values; structure errors; and input bombs (size, YAML aliases,
//! deep nesting), each of which must be refused before anything is planned. Run through `exec`,
//! the smallest command that loads an inventory.

use crate::case::{Case, NOWHERE};

const PW: &str = "pw-hostile-inv";

/// An inventory with `defaults` lines (after user/password/known_hosts) and host entries.
fn inv(defaults: &str, hosts: &str) -> String {
    format!(
        "defaults:\n  user: ubuntu\n  password: {PW}\n  known_hosts: '{{dir}}/kh'\n{defaults}groups:\n  g:\n{hosts}"
    )
}

/// One host entry (YAML flow mapping) with `extra` fields after name and ssh_ip.
fn host(extra: &str) -> String {
    format!("    - {{name: n1, ssh_ip: {NOWHERE}{extra}}}\n")
}

const EXEC: [&str; 5] = ["exec", "-i", "{dir}/inv.yaml", "--", "true"];

fn rejected(name: &str, text: impl Into<Vec<u8>>, field: &str) -> Case {
    Case::rejected(format!("inventory/{name}"), &EXEC, field).file("inv.yaml", text).never(PW)
}

/// A host with one field set to `value` (a YAML scalar as written), refused naming `field`.
fn field(name: &str, key: &str, value: &str, field: &str) -> Case {
    let entry = match key {
        "name" => format!("    - {{name: {value}, ssh_ip: {NOWHERE}}}\n"),
        "ssh_ip" => format!("    - {{name: n1, ssh_ip: {value}}}\n"),
        _ => host(&format!(", {key}: {value}")),
    };
    rejected(name, inv("", &entry), field)
}

fn accepted(name: &str, text: String, cmd: &[&str], shown: &[&str], never: &[&str]) -> Case {
    let mut args = vec!["exec", "-i", "{dir}/inv.yaml", "--"];
    args.extend(cmd);
    Case::accepted(format!("inventory/{name}"), &args, shown, never).file("inv.yaml", text)
}

pub fn cases() -> Vec<Case> {
    let long = "a".repeat(300);
    let mut v = vec![
        // ssh_ip: only an IP literal or a DNS name reaches a socket.
        field("ssh-ip-command-substitution", "ssh_ip", "'$(reboot)'", "ssh_ip"),
        field("ssh-ip-backticks", "ssh_ip", "'`id`'", "ssh_ip"),
        field("ssh-ip-newline", "ssh_ip", "\"10.0.0.1\\nforged\"", "ssh_ip"),
        field("ssh-ip-nul", "ssh_ip", "\"10.0.0.1\\0\"", "ssh_ip"),
        field("ssh-ip-escape-sequence", "ssh_ip", "\"\\e[31m10.0.0.1\"", "ssh_ip"),
        field("ssh-ip-option", "ssh_ip", "'-oProxyCommand=sh'", "ssh_ip"),
        field("ssh-ip-empty", "ssh_ip", "''", "ssh_ip"),
        field("ssh-ip-two-addresses", "ssh_ip", "'1.2.3.4 5.6.7.8'", "ssh_ip"),
        field("ssh-ip-fullwidth-digits", "ssh_ip", "'１０.０.０.１'", "ssh_ip"),
        field("ssh-ip-bracketed", "ssh_ip", "'[::1]'", "ssh_ip"),
        field("ssh-ip-too-long", "ssh_ip", &long, "ssh_ip"),
        field("ssh-ip-url", "ssh_ip", "'ssh://10.0.0.1'", "ssh_ip"),
        field("ssh-ip-list", "ssh_ip", "[10.0.0.1]", "ssh_ip"),
        field("nic-ip-semicolon", "nic_ip", "'10.0.0.1;id'", "nic_ip"),
        field("nic-ip-option", "nic_ip", "'-x'", "nic_ip"),
        field("nic-ip-scope-id", "nic_ip", "'fe80::1%eth0'", "nic_ip"),
        // name: a label for logs, state and --host.
        field("name-space", "name", "'a b'", "name"),
        field("name-path", "name", "'../etc'", "name"),
        field("name-empty", "name", "''", "name"),
        field("name-escape", "name", "\"\\e]0;pwned\\a\"", "name"),
        field("name-too-long", "name", &long, "name"),
        field("name-cyrillic-lookalike", "name", "'nоde'", "name"),
        field("name-slash", "name", "'a/b'", "name"),
        // user: a POSIX login name, never an option.
        field("user-semicolon", "user", "'root;id'", "user"),
        field("user-space", "user", "'a b'", "user"),
        field("user-command-substitution", "user", "'$(id)'", "user"),
        field("user-newline", "user", "\"ro\\not\"", "user"),
        field("user-empty", "user", "''", "user"),
        field("user-at", "user", "'u@h'", "user"),
        field("user-colon", "user", "'u:x'", "user"),
        field("user-too-long", "user", &"u".repeat(33), "user"),
        field("user-leading-digit", "user", "'1abc'", "user"),
        field("user-unicode", "user", "'üser'", "user"),
        field("user-dash-only", "user", "'-'", "user"),
        // port.
        field("port-negative", "port", "-1", "port"),
        field("port-string-with-shell", "port", "'22; id'", "port"),
        field("port-float", "port", "22.5", "port"),
        field("port-u64-overflow", "port", "99999999999999999999", "port"),
        // Credentials: one source each; files must exist.
        field("password-twice", "password_env", "SOME_VAR", "password"),
        field("password-file-missing", "password_file", "'{dir}/no-pw'", "password_file"),
        field("become-password-twice", "become_password_env", "X", "become_password"),
        field("identity-file-is-a-directory", "identity_file", "'{dir}'", "identity_file"),
        field("host-key-check-off-without-flag", "host_key_check", "off", "host_key_check"),
        field("host-key-check-unknown", "host_key_check", "none", "host_key_check"),
        // jump hops: the same rules as hosts.
        field("jump-user-option", "jump", "['-oProxyCommand=sh@h']", "jump[0]"),
        field("jump-host-semicolon", "jump", "['u@h;id']", "jump[0]"),
        field("jump-port-out-of-range", "jump", "['u@h:99999']", "jump[0]"),
        field("jump-unclosed-bracket", "jump", "['u@[::1']", "jump[0]"),
        field("jump-not-a-list", "jump", "'u@h'", "jump"),
        field("jump-user-newline", "jump", "[\"ops\\nx@h\"]", "jump[0]"),
        // Structure.
        rejected("defaults-name", inv("  name: n0\n", &host("")), "defaults.name"),
        rejected("defaults-ssh-ip", inv("  ssh_ip: 10.0.0.1\n", &host("")), "defaults.ssh_ip"),
        rejected(
            "defaults-user-option",
            inv("  user: '-oProxyCommand=sh'\n", &host("")).replace("  user: ubuntu\n", ""),
            "user",
        ),
        rejected("unknown-top-level-key", format!("{}hosts: []\n", inv("", &host(""))), "hosts"),
        rejected("unknown-host-key", inv("", &host(", pasword: x")), "pasword"),
        rejected("duplicate-host-key", inv("", &host(", user: a, user: b")), "duplicate"),
        rejected(
            "group-defined-twice",
            format!("{}\n  g:\n{}", inv("", &host("")).trim_end(), host("")),
            "defined twice",
        ),
        rejected(
            "same-name-other-address",
            inv("", &format!("{}    - {{name: n1, ssh_ip: 192.0.2.99}}\n", host(""))),
            "appears again",
        ),
        rejected("group-name-space", inv("", &host("")).replace("  g:\n", "  'a b':\n"), "groups.a b"),
        rejected("group-name-newline", inv("", &host("")).replace("  g:\n", "  \"a\\nb\":\n"), "groups.a\\nb"),
        rejected("groups-a-list", inv("", "").replace("groups:\n  g:\n", "groups: [a]\n"), "groups"),
        rejected("group-a-string", inv("", "").replace("  g:\n", "  g: n1\n"), "g"),
        rejected("host-a-string", inv("", "    - n1\n"), "g"),
        rejected("host-without-name", inv("", &format!("    - {{ssh_ip: {NOWHERE}}}\n")), "groups.g[0].name"),
        rejected("host-without-address", inv("", "    - {name: n1}\n"), "groups.g[0].ssh_ip"),
        rejected("cps-name-semicolon", format!("{}cps: {{'vip;x': 10.0.0.1}}\n", inv("", &host(""))), "cps.vip;x"),
        rejected("cps-value-shell", format!("{}cps: {{vip: '1.2.3.4; reboot'}}\n", inv("", &host(""))), "cps.vip"),
        rejected("cps-value-option", format!("{}cps: {{vip: '-oX'}}\n", inv("", &host(""))), "cps.vip"),
        rejected("cps-value-a-map", format!("{}cps: {{vip: {{a: b}}}}\n", inv("", &host(""))), "cps"),
        rejected("two-documents", format!("{}---\n{}", inv("", &host("")), inv("", &host(""))), "inventory"),
        rejected("tab-indentation", inv("", &host("")).replace("  g:\n", "\tg:\n"), "inventory"),
        rejected("latin1-bytes", [b"defaults:\n  password: ".as_slice(), &[0xe9, 0xe9], b"\n"].concat(), "not UTF-8"),
        // ssh config values are checked like the inventory's.
        Case::rejected(
            "inventory/ssh-config-user-option",
            &["exec", "-i", "{dir}/inv.yaml", "--ssh-config", "{dir}/cfg", "--", "true"],
            "user",
        )
        .file("inv.yaml", inv("", &host("")).replace("  user: ubuntu\n", ""))
        .file("cfg", "Host *\n  User -oProxyCommand=sh\n"),
        Case::rejected(
            "inventory/ssh-config-hostname-shell",
            &["exec", "-i", "{dir}/inv.yaml", "--ssh-config", "{dir}/cfg", "--", "true"],
            "ssh_ip",
        )
        .file("inv.yaml", inv("", "    - {name: n1, ssh_ip: edge}\n"))
        .file("cfg", "Host edge\n  HostName 10.0.0.1;reboot\n"),
        // Input bombs: refused before parsing, within the time limit (the runner checks it).
        rejected("bomb-size-5-mib", format!("{}# {}\n", inv("", &host("")), "x".repeat(5 << 20)), "larger than 4 MiB"),
        Case::rejected("inventory/bomb-dev-zero", &["exec", "-i", "/dev/zero", "--", "true"], "larger than 4 MiB"),
        rejected(
            "bomb-alias-big-scalar",
            inv(
                "",
                &host(&format!(", nic_ip: &s \"{}\", jump: [{}]", "x".repeat(10_000), vec!["*s"; 60_000].join(", "))),
            ),
            "expands (YAML aliases followed) to more than 16 MiB",
        ),
        rejected(
            "bomb-billion-laughs",
            {
                let mut t = String::from("cps:\n  l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
                for i in 1..9 {
                    t.push_str(&format!("  l{i}: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 10].join(", ")));
                }
                t
            },
            "expands YAML aliases",
        ),
        rejected(
            "bomb-deep-flow-sequence",
            format!("{}cps: {}{}\n", inv("", &host("")), "[".repeat(100_000), "]".repeat(100_000)),
            "nested deeper than 32",
        ),
        rejected(
            "bomb-deep-flow-mapping",
            format!("{}cps: {}b{}\n", inv("", &host("")), "{a: ".repeat(100_000), "}".repeat(100_000)),
            "nested deeper than 32",
        ),
        rejected(
            "bomb-deep-flow-behind-a-quote",
            format!("{}cps: [it's, {}{}, x']\n", inv("", &host("")), "[".repeat(50_000), "]".repeat(50_000)),
            "nested deeper than 32",
        ),
        rejected(
            "bomb-deep-block",
            {
                let mut t = inv("", &host(""));
                t.push_str("cps:\n");
                for i in 1..2000 {
                    t.push_str(&format!("{}a:\n", " ".repeat(i)));
                }
                t
            },
            "nested deeper than 32",
        ),
        rejected(
            "bomb-deep-dashes",
            format!("{}cps:\n  x:\n    {}b\n", inv("", &host("")), "- ".repeat(100_000)),
            "nested deeper than 32",
        ),
    ];
    // Accepted, harmlessly.
    v.extend([
        accepted(
            "password-with-shell-never-shown",
            inv("", &host("")).replace(PW, "'$(reboot)''x;id'"),
            &["id"],
            &["connect ubuntu@192.0.2.10"],
            &["$(reboot)", "x;id"],
        ),
        accepted(
            "password-with-brackets-never-shown",
            inv("", &host("")).replace(PW, &format!("a{}b", "[".repeat(40))),
            &["id"],
            &["connect ubuntu@192.0.2.10"],
            &["[[[[[[[["],
        ),
        accepted(
            "alias-reuses-a-host",
            format!("{}  h:\n    - *n\n", inv("", &format!("    - &n {{name: n1, ssh_ip: {NOWHERE}}}\n"))),
            &["true"],
            &["connect ubuntu@192.0.2.10"],
            &[PW],
        ),
        accepted("ipv6-address", inv("", "    - {name: n6, ssh_ip: 'fd00::1'}\n"), &["true"], &["[fd00::1]:22"], &[PW]),
        accepted(
            "user-with-dot-and-dash",
            inv("", &host(", user: svc.deploy-1")),
            &["true"],
            &["svc.deploy-1@192.0.2.10"],
            &[PW],
        ),
        accepted(
            "comment-with-brackets",
            format!("# {}\n{}", "[".repeat(100), inv("", &host(""))),
            &["true"],
            &["connect ubuntu@192.0.2.10"],
            &[PW],
        ),
        accepted(
            "become-password-with-quotes-never-shown",
            inv("  become_password: \"it's \\\"x\\\"\"\n", &host("")),
            &["id"],
            &["connect ubuntu@192.0.2.10"],
            &["it's"],
        ),
    ]);
    v
}
