//! Inventory unit tests: resolution, errors that name the field, secrets, and the OpenSSH
//! client configuration.

use super::*;

fn env(k: &str) -> Option<String> {
    match k {
        "NODE_PW" => Some("s3cret'pw".into()),
        "SUDO_PW" => Some("sudo-pw".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Inventory> {
    // Hermetic: the developer's own ~/.ssh/config must not change these results.
    let opts = LoadOptions { ssh_config: SshConfigSource::None, ..Default::default() };
    Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts)
}

const SAMPLE: &str = r#"
defaults:
  user: ubuntu
  port: 22
  password_env: NODE_PW
  known_hosts: ./known_hosts
  host_key_check: accept-new
  jump: [ops@bastion:2222]
  become_password_env: SUDO_PW
groups:
  master_instance:
    - {name: master1, ssh_ip: 198.18.0.10, nic_ip: 10.0.0.10}
  worker_instance:
    - {name: worker1, ssh_ip: 198.18.0.20, port: 2200, user: admin, jump: []}
    - {name: master1, ssh_ip: 198.18.0.10}
cps:
  vip_CP: 198.18.0.100
"#;

#[test]
fn sample_resolves_defaults_overrides_and_groups() {
    let inv = parse(SAMPLE).unwrap();
    assert_eq!(inv.hosts.len(), 2);
    let m = &inv.hosts[0];
    assert_eq!((m.name.as_str(), m.addr.as_str(), m.port, m.user.as_str()), ("master1", "198.18.0.10", 22, "ubuntu"));
    assert_eq!(m.nic_ip.as_deref(), Some("10.0.0.10"));
    assert_eq!(m.auth.password.as_ref().unwrap().expose(), "s3cret'pw");
    assert!(!m.auth.agent);
    assert_eq!(m.known_hosts, PathBuf::from("/base/./known_hosts"));
    assert_eq!(m.jump, vec![Jump { user: "ops".into(), addr: "bastion".into(), port: 2222, ..Default::default() }]);
    assert_eq!(m.become_password.as_ref().unwrap().expose(), "sudo-pw");
    assert_eq!(m.groups, vec!["master_instance", "worker_instance"]);
    let w = &inv.hosts[1];
    assert_eq!((w.port, w.user.as_str()), (2200, "admin"));
    assert!(w.jump.is_empty());
    assert_eq!(inv.cps["vip_CP"], "198.18.0.100");
    assert_eq!(inv.groups[1].1, vec![1, 0]);
}

#[test]
fn unknown_key_names_the_key_and_file() {
    let err = parse("defaults:\n  pasword_env: X\ngroups: {}\n").unwrap_err().to_string();
    assert!(err.starts_with("inv.yaml"), "{err}");
    assert!(err.contains("pasword_env"), "{err}");
}

#[test]
fn missing_env_var_names_field_and_variable_but_no_value() {
    let text = "groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1, password_env: NOPE}\n";
    let err = parse(text).unwrap_err().to_string();
    assert!(err.contains("groups.g[0].password_env"), "{err}");
    assert!(err.contains("NOPE"), "{err}");
}

#[test]
fn secrets_never_show_in_debug_output() {
    let inv = parse(SAMPLE).unwrap();
    let dump = format!("{inv:?}");
    assert!(!dump.contains("s3cret") && !dump.contains("sudo-pw"), "{dump}");
    // The raw host entry, as read from the file, too.
    let spec: HostSpec = yaml_serde::from_str("{password: s3cret, become_password: sudo-pw, user: u}").unwrap();
    let dump = format!("{spec:?}");
    assert!(!dump.contains("s3cret") && !dump.contains("sudo-pw") && dump.contains("********"), "{dump}");
}

#[test]
fn host_key_off_needs_the_cli_flag() {
    let text = "defaults: {password: x, host_key_check: off}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n";
    let err = parse(text).unwrap_err().to_string();
    assert!(err.contains("host_key_check") && err.contains("--insecure-no-host-key-check"), "{err}");
    let ok =
        Inventory::parse(text, "f", Path::new("/"), &env, &LoadOptions { allow_insecure: true, ..Default::default() })
            .unwrap();
    assert_eq!(ok.hosts[0].host_key_check, HostKeyCheck::Off);
}

#[test]
fn hostile_addresses_and_names_are_refused() {
    for (field, bad) in
        [("ssh_ip", "10.0.0.1;reboot"), ("ssh_ip", "$(id)"), ("name", "a b"), ("nic_ip", "-oProxyCommand=x")]
    {
        let host = match field {
            "ssh_ip" => format!("{{name: a, ssh_ip: '{bad}'}}"),
            "name" => format!("{{name: '{bad}', ssh_ip: 10.0.0.1}}"),
            _ => format!("{{name: a, ssh_ip: 10.0.0.1, nic_ip: '{bad}'}}"),
        };
        let text = format!("defaults: {{password: x}}\ngroups:\n  g:\n    - {host}\n");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains(&format!("groups.g[0].{field}")), "{bad}: {err}");
    }
}

#[test]
fn jump_may_name_an_inventory_host() {
    let text = "defaults: {password: x}\ngroups:\n  b:\n    - {name: bastion, ssh_ip: 198.18.0.11, user: ops}\n  h:\n    - {name: n, ssh_ip: 198.19.0.11, jump: [bastion]}\n";
    let inv = parse(text).unwrap();
    assert_eq!(
        inv.hosts[1].jump,
        vec![Jump { user: "ops".into(), addr: "198.18.0.11".into(), port: 22, ..Default::default() }]
    );
}

#[test]
fn select_by_group_and_host() {
    let inv = parse(SAMPLE).unwrap();
    let names = |v: Vec<Host>| v.into_iter().map(|h| h.name).collect::<Vec<_>>();
    assert_eq!(names(inv.select(&["worker_instance".into()], &[]).unwrap()), vec!["master1", "worker1"]);
    assert_eq!(names(inv.select(&[], &["worker1".into()]).unwrap()), vec!["worker1"]);
    assert!(inv.select(&["nope".into()], &[]).unwrap_err().to_string().contains("nope"));
}

#[test]
fn no_credential_without_agent_is_an_error() {
    let err = parse("groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n").unwrap_err().to_string();
    assert!(err.contains("no credential"), "{err}");
}

/// A fake `$HOME` holding `.ssh/config` (and any other files), and an inventory parsed with it.
struct SshHome {
    dir: tempfile::TempDir,
}

impl SshHome {
    fn new(config: &str) -> SshHome {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ssh")).unwrap();
        std::fs::write(dir.path().join(".ssh/config"), config).unwrap();
        SshHome { dir }
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn touch(&self, rel: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "").unwrap();
        p
    }

    fn parse_with(&self, text: &str, src: SshConfigSource) -> Result<Inventory> {
        let home = self.home().display().to_string();
        let env = move |k: &str| if k == "HOME" { Some(home.clone()) } else { env(k) };
        let opts = LoadOptions { ssh_config: src, ..Default::default() };
        Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts)
    }

    /// With the default source: `$HOME/.ssh/config`.
    fn parse(&self, text: &str) -> Result<Inventory> {
        self.parse_with(text, SshConfigSource::Default)
    }
}

#[test]
fn ssh_config_alias_resolves_through_hostname() {
    let h = SshHome::new("Host edge1\n    HostName 10.0.0.5\n");
    let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e1, ssh_ip: edge1}\n").unwrap();
    assert_eq!(inv.hosts[0].addr, "10.0.0.5");
    assert_eq!(inv.hosts[0].name, "e1");
    // `%h` is the alias; a host without ssh_ip is looked up by its name.
    let h = SshHome::new("Host n1\n  HostName %h.lab.example\n");
    let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: n1}\n").unwrap();
    assert_eq!(inv.hosts[0].addr, "n1.lab.example");
    // Without a HostName the missing ssh_ip is still an error.
    let err = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: other}\n").unwrap_err().to_string();
    assert!(err.contains("groups.g[0].ssh_ip: is required"), "{err}");
}

#[test]
fn ssh_config_fills_user_port_identity_and_known_hosts() {
    let h = SshHome::new(
            "Host 10.0.0.7\n  User admin\n  Port 2222\n  IdentityFile ~/.ssh/missing_key\n  IdentityFile ~/.ssh/id_test\n  UserKnownHostsFile ~/lab_known_hosts\n",
        );
    let key = h.touch(".ssh/id_test");
    let inv = h.parse("groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n").unwrap();
    let a = &inv.hosts[0];
    assert_eq!((a.user.as_str(), a.port), ("admin", 2222));
    // The first IdentityFile that exists, `~` being $HOME; a key means no agent is needed.
    assert_eq!(a.auth.identity_file.as_deref(), Some(key.as_path()));
    assert!(!a.auth.agent);
    assert_eq!(a.known_hosts, h.home().join("lab_known_hosts"));
}

#[test]
fn the_inventory_wins_over_ssh_config() {
    let h = SshHome::new(
            "Host 10.0.0.7 a\n  User admin\n  Port 2222\n  IdentityFile ~/.ssh/id_test\n  ProxyJump hop\n  UserKnownHostsFile /cfg/kh\n",
        );
    h.touch(".ssh/id_test");
    let inv_key = h.touch("inv_key");
    let text = format!(
            "defaults: {{identity_file: {}, known_hosts: /inv/kh, jump: []}}\ngroups:\n  g:\n    - {{name: a, ssh_ip: 10.0.0.7, user: ubuntu, port: 22}}\n",
            inv_key.display()
        );
    let a = h.parse(&text).unwrap().hosts.remove(0);
    assert_eq!((a.user.as_str(), a.port), ("ubuntu", 22));
    assert_eq!(a.auth.identity_file.as_deref(), Some(inv_key.as_path()));
    assert_eq!(a.known_hosts, PathBuf::from("/inv/kh"));
    assert!(a.jump.is_empty());
    // `defaults:` is the inventory too: it wins over a host-specific block.
    let a = h
        .parse("defaults: {user: ops, password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n")
        .unwrap()
        .hosts
        .remove(0);
    assert_eq!((a.user.as_str(), a.port), ("ops", 2222));
}

#[test]
fn ssh_config_proxyjump_chain_maps_onto_jumps() {
    let h = SshHome::new(
        "Host 198.19.*\n  ProxyJump ops@198.18.0.1:2200,hop2,bastion,ssh://[fd00::1]:22\n\
             Host hop2\n  HostName 10.9.9.9\n  User j2\n  Port 2022\n\
             Host nojump\n  HostName 198.19.0.99\n  ProxyJump none\n",
    );
    let text = "defaults: {password: x, user: me}\ngroups:\n  b:\n    - {name: bastion, ssh_ip: 198.18.0.11, user: ops}\n  h:\n    - {name: n, ssh_ip: 198.19.0.11}\n    - {name: m, ssh_ip: nojump}\n";
    let inv = h.parse(text).unwrap();
    let j = |user: &str, addr: &str, port| Jump { user: user.into(), addr: addr.into(), port, ..Default::default() };
    assert_eq!(
        inv.hosts[1].jump,
        vec![
            j("ops", "198.18.0.1", 2200),
            j("j2", "10.9.9.9", 2022),
            // Names an inventory host: that host's address and user, as `jump:` does.
            j("ops", "198.18.0.11", 22),
            j("me", "fd00::1", 22),
        ]
    );
    // `ProxyJump none` wins over the later wildcard block (first value wins).
    assert_eq!(inv.hosts[2].addr, "198.19.0.99");
    assert!(inv.hosts[2].jump.is_empty());
    assert!(inv.hosts[0].jump.is_empty());
}

#[test]
fn ssh_config_host_star_defaults_come_last_and_names_match_too() {
    let h = SshHome::new(
        "Host special\n  User sp\n\
             Host 10.0.0.*\n  Port 2200\n\
             Host *\n  User fallback\n  Port 2222\n",
    );
    let text = "defaults: {password: x}\ngroups:\n  g:\n    - {name: special, ssh_ip: 10.0.0.1}\n    - {name: plain, ssh_ip: 10.1.0.1}\n";
    let inv = h.parse(text).unwrap();
    assert_eq!((inv.hosts[0].user.as_str(), inv.hosts[0].port), ("sp", 2200));
    assert_eq!((inv.hosts[1].user.as_str(), inv.hosts[1].port), ("fallback", 2222));
}

#[test]
fn ssh_config_match_blocks_are_skipped() {
    let h = SshHome::new(
        "Match all\n  User from-match\n\
             Host edge1\n  HostName 10.0.0.5\n\
             Match host edge1 exec \"false\"\n  Port 2999\n  Include nothing-here\n\
             Host *\n  Port 2200\n",
    );
    let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n").unwrap();
    let e = &inv.hosts[0];
    assert_eq!((e.addr.as_str(), e.user.as_str(), e.port), ("10.0.0.5", "root", 2200));
}

#[test]
fn ssh_config_include_is_inlined_and_the_enclosing_block_continues() {
    let h = SshHome::new("Include config.d/*.conf\nUser top\nHost edge1\n  Include ~/extra\n  Port 2022\n");
    std::fs::create_dir_all(h.home().join(".ssh/config.d")).unwrap();
    std::fs::write(h.home().join(".ssh/config.d/10-edge.conf"), "Host edge1\n  HostName 10.0.0.5\n").unwrap();
    std::fs::write(h.home().join("extra"), "IdentityFile ~/k\nHost unrelated\n  Port 1\n").unwrap();
    let key = h.touch("k");
    let inv = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n").unwrap();
    let e = &inv.hosts[0];
    assert_eq!((e.addr.as_str(), e.user.as_str(), e.port), ("10.0.0.5", "top", 2022));
    assert_eq!(e.auth.identity_file.as_deref(), Some(key.as_path()));
}

#[test]
fn ssh_config_sources_none_missing_and_unreadable() {
    let text = "defaults: {password: x}\ngroups:\n  g:\n    - {name: e, ssh_ip: edge1}\n";
    let h = SshHome::new("Host edge1\n  HostName 10.0.0.5\n");
    assert_eq!(h.parse_with(text, SshConfigSource::None).unwrap().hosts[0].addr, "edge1");
    // An explicit file replaces the default one.
    let other = h.home().join("other_config");
    std::fs::write(&other, "Host edge1\n  HostName 10.0.0.6\n").unwrap();
    assert_eq!(h.parse_with(text, SshConfigSource::File(other)).unwrap().hosts[0].addr, "10.0.0.6");
    // No default file is fine.
    std::fs::remove_file(h.home().join(".ssh/config")).unwrap();
    assert_eq!(h.parse(text).unwrap().hosts[0].addr, "edge1");
    // An explicit file that cannot be read is an error naming it.
    for bad in [h.home().join("nope"), h.home().join(".ssh")] {
        let err = h.parse_with(text, SshConfigSource::File(bad.clone())).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ssh config: cannot read", bad.display())), "{err}");
    }
    // So is one ssh would refuse, and a HostName that is not an address.
    std::fs::write(h.home().join("bad"), "Host x\n  Port many\n").unwrap();
    let err = h.parse_with(text, SshConfigSource::File(h.home().join("bad"))).unwrap_err().to_string();
    assert!(err.contains("bad: ssh config:"), "{err}");
    std::fs::write(h.home().join("bad"), "Host edge1\n  HostName 'x;reboot'\n").unwrap();
    let err = h.parse_with(text, SshConfigSource::File(h.home().join("bad"))).unwrap_err().to_string();
    assert!(err.contains("groups.g[0].ssh_ip: HostName for 'edge1'"), "{err}");
    assert_eq!(SshConfigSource::from_arg("none"), SshConfigSource::None);
    assert_eq!(SshConfigSource::from_arg("f"), SshConfigSource::File("f".into()));
}

#[test]
fn hook_mode_keeps_the_requests_login_for_hosts_without_inventory_credentials() {
    let h = SshHome::new("Host *\n  User operator\n  Port 2222\n  IdentityFile ~/.ssh/id_ops\n");
    h.touch(".ssh/id_ops");
    let home = h.home().display().to_string();
    let env = move |k: &str| if k == "HOME" { Some(home.clone()) } else { env(k) };
    let opts = LoadOptions { credentials_from_request: true, ..Default::default() };
    let text = "groups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n    - {name: b, ssh_ip: 10.0.0.8, password: pw}\n";
    let inv = Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts).unwrap();
    // `a` has no credential in the inventory: no user or key from the ssh config (the request
    // supplies them later); the port, which is not a credential, still comes from it.
    let a = &inv.hosts[0];
    assert_eq!((a.user.as_str(), a.port), ("root", 2222));
    assert!(a.auth.identity_file.is_none() && a.auth.agent);
    // `b` has a password in the inventory: the ssh config fills the rest as for any command.
    let b = &inv.hosts[1];
    assert_eq!(b.user, "operator");
    assert!(b.auth.identity_file.is_some());
}

#[test]
fn users_are_login_names_wherever_they_come_from() {
    for (where_, text) in [
        (
            "user",
            "defaults: {password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1, user: '-oProxyCommand=sh'}\n",
        ),
        ("user", "defaults: {password: x, user: 'root;id'}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n"),
        ("jump[0]", "defaults: {password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1, jump: ['-x@h']}\n"),
    ] {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(&format!("groups.g[0].{where_}")) && err.contains("is not a login name"), "{err}");
    }
    let h = SshHome::new("Host *\n  User -oProxyCommand=sh\n");
    let err = h.parse("defaults: {password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.1}\n").unwrap_err();
    assert!(err.to_string().contains("groups.g[0].user: '-oProxyCommand=sh' is not a login name"), "{err}");
    for ok in ["root", "_svc", "svc.deploy-1", "Admin2", &"u".repeat(32)] {
        assert_eq!(check_user(ok), Ok(()), "{ok}");
    }
    for bad in ["", "-", "1abc", "a b", "u@h", "u:x", "ü", "a\nb", &"u".repeat(33)] {
        assert!(check_user(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn group_and_cp_names_and_cp_addresses_are_checked_and_shown_escaped() {
    let err = parse("defaults: {password: x}\ngroups:\n  \"a\\nb\":\n    - {name: a, ssh_ip: 10.0.0.1}\n").unwrap_err();
    assert!(err.to_string().contains("groups.a\\nb: 'a\\nb': names are"), "{err}");
    let err = parse("groups: {}\ncps: {vip: '1.2.3.4; reboot'}\n").unwrap_err().to_string();
    assert!(err.contains("cps.vip: '1.2.3.4; reboot' is not an IP address or host name"), "{err}");
    assert_eq!(crate::error::excerpt(&"x".repeat(100)), format!("{}…", "x".repeat(80)));
}

#[test]
fn bombs_are_refused_before_loading_and_files_over_the_cap_unread() {
    let bomb = format!("cps: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let t = std::time::Instant::now();
    let err = parse(&bomb).unwrap_err().to_string();
    assert!(err.starts_with("inv.yaml: inventory: line 1: collections nested deeper than 32"), "{err}");
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    let alias = format!("cps:\n  a: &s \"{}\"\n  b: [{}]\n", "x".repeat(10_000), vec!["*s"; 2_000].join(", "));
    assert!(parse(&alias).unwrap_err().to_string().contains("inv.yaml: inventory: expands (YAML aliases followed)"));
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("inv.yaml");
    std::fs::File::create(&p).unwrap().set_len(crate::input_limit::INVENTORY_MAX_BYTES + 1).unwrap();
    let err = Inventory::load(&p, &LoadOptions::default()).unwrap_err().to_string();
    assert!(err.contains("inv.yaml: inventory: is larger than 4 MiB"), "{err}");
}

/// Package mode (`package.rs`): a VNF package's inventory, named by a tenant's request, lists
/// nodes only; every field that would reach a file, the environment, a key or a host-key setting
/// of the conductor is refused by name, and no ssh config is read.
#[test]
fn a_package_inventory_lists_nodes_only() {
    let opts = LoadOptions {
        // Not read in package mode: a missing file would otherwise be an error.
        ssh_config: SshConfigSource::File("/nonexistent/ssh_config".into()),
        allow_insecure: true,
        package: Some(PackageMode { known_hosts: "/op/state/known_hosts".into() }),
        ..Default::default()
    };
    let load = |text: &str| Inventory::parse(text, "pkg/inv.yaml", Path::new("/pkg"), &env, &opts);
    let ok = "groups:\n  master_instance:\n    - {name: m1, ssh_ip: 198.18.0.10, nic_ip: 10.0.0.10, port: 2222}\n\
              cps: {vip_CP: 198.18.0.100}\nplacement: {m1: {zone: z1}}\n";
    let inv = load(ok).unwrap();
    let h = &inv.hosts[0];
    assert_eq!((h.addr.as_str(), h.port, h.nic_ip.as_deref()), ("198.18.0.10", 2222, Some("10.0.0.10")));
    assert!(h.auth.password.is_none() && h.auth.identity_file.is_none() && h.jump.is_empty(), "{:?}", h.auth);
    assert!(h.become_password.is_none());
    assert_eq!(
        (h.known_hosts.as_path(), h.host_key_check),
        (Path::new("/op/state/known_hosts"), HostKeyCheck::AcceptNew)
    );
    for (field, value) in [
        ("user", "root"),
        ("password", "pw"),
        ("password_env", "NODE_PW"),
        ("password_file", "/etc/shadow"),
        ("identity_file", "/root/.ssh/id_ed25519"),
        ("identity_passphrase_env", "NODE_PW"),
        ("identity_passphrase_file", "/etc/pp"),
        ("known_hosts", "/dev/null"),
        ("host_key_check", "off"),
        ("jump", "[ops@bastion]"),
        ("become_password", "pw"),
        ("become_password_env", "SUDO_PW"),
        ("become_password_file", "/etc/sudo_pw"),
    ] {
        let host = format!("groups:\n  g:\n    - {{name: h, ssh_ip: 198.18.0.1, {field}: {value}}}\n");
        let e = load(&host).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "pkg/inv.yaml: groups.g[0].{field}: is not allowed in an inventory of the VNF package"
            )),
            "{e}"
        );
        let defaults =
            format!("defaults: {{{field}: {value}}}\ngroups:\n  g:\n    - {{name: h, ssh_ip: 198.18.0.1}}\n");
        let e = load(&defaults).unwrap_err().to_string();
        assert!(e.starts_with(&format!("pkg/inv.yaml: defaults.{field}: is not allowed")), "{e}");
        assert!(!e.contains("s3cret") && !e.contains("sudo-pw"), "{e}");
    }
    // The same fields are the operator's to use in any other inventory.
    let operator = LoadOptions { ssh_config: SshConfigSource::None, ..Default::default() };
    let inv = Inventory::parse(SAMPLE, "inv.yaml", Path::new("/base"), &env, &operator).unwrap();
    assert_eq!(inv.hosts[0].auth.password.as_ref().map(|s| s.expose()), Some("s3cret'pw"));
}

/// A VNFM hook gives an operator's inventory its own default known_hosts (the instance's file):
/// a host that names none learns there, not into the conductor user's `~/.ssh/known_hosts`; a
/// host that names one keeps it.
#[test]
fn a_hooks_default_known_hosts_replaces_only_the_openssh_default() {
    let opts = LoadOptions {
        ssh_config: SshConfigSource::None,
        default_known_hosts: Some("/state/vnf-1.known_hosts".into()),
        ..Default::default()
    };
    let text = "defaults: {user: ops, password: x}\ngroups:\n  g:\n    - {name: a, ssh_ip: 10.0.0.7}\n    - {name: b, ssh_ip: 10.0.0.8, known_hosts: ./kh}\n";
    let inv = Inventory::parse(text, "inv.yaml", Path::new("/base"), &env, &opts).unwrap();
    assert_eq!(inv.hosts[0].known_hosts, PathBuf::from("/state/vnf-1.known_hosts"));
    assert_eq!(inv.hosts[1].known_hosts, PathBuf::from("/base/./kh"));
    let plain = parse(text).unwrap();
    assert_eq!(plain.hosts[0].known_hosts, dirs::home_dir().unwrap_or_default().join(".ssh/known_hosts"));
}
