//! What `--help` shows, on top of what the argument declarations say: a short `Examples:` block
//! on every command (as kubectl and k3sup have), and the global flags once. clap repeats every
//! global flag in every subcommand's help (a dozen flags on each page, before the command's
//! own); here they are listed in full only by `mgmt-driver --help`, and each subcommand's page
//! names them in one line. They still parse anywhere on the line: only the help hides them.
//!
//! The examples live in one table, keyed by the command's path, so the commands of the other
//! modules (`cnf::Op`, `workload::Op`, `sites::plan::Op`) get theirs too; unit tests check that
//! every command has examples and that every example parses.

use clap::{Command, CommandFactory};

use crate::cli::Cli;

/// The parser the binary runs: `Cli`'s, with examples and the global flags shown once.
pub fn command() -> Command {
    let mut cmd = Cli::command();
    // Built first, so clap has copied the global flags into every subcommand: they can then be
    // hidden there, and only there.
    cmd.build();
    let globals: Vec<(String, String)> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| {
            let shown = match (a.get_short(), a.get_long()) {
                (Some(s), _) => format!("-{s}"),
                (None, Some(l)) => format!("--{l}"),
                (None, None) => a.get_id().to_string(),
            };
            (a.get_id().to_string(), shown)
        })
        .collect();
    let names: Vec<&str> = globals.iter().map(|(_, shown)| shown.as_str()).collect();
    let note = wrap(&format!("Global options (mgmt-driver --help): {}", names.join(", ")), 100);
    let ids: Vec<&str> = globals.iter().map(|(id, _)| id.as_str()).collect();
    cmd = cmd.after_help(format!("{}\n\n{TOP_NOTE}", examples_block("")));
    for sub in cmd.get_subcommands_mut() {
        decorate(sub, "", &ids, &note);
    }
    cmd
}

/// After the top-level examples: where the rest is.
const TOP_NOTE: &str = "Global options work before or after the command (`mgmt-driver exec -o json ...`).
Environment variables: docs/environment.md. Exit codes: 0 ok, 1 a node failed, 2 bad input
(nothing ran), 130/143 interrupted (docs/architecture.md).";

/// A subcommand and its own subcommands: the global flags hidden, the examples and the note
/// about the global flags after the options.
fn decorate(cmd: &mut Command, parent: &str, globals: &[&str], note: &str) {
    if cmd.get_name() == "help" {
        return;
    }
    let path = if parent.is_empty() { cmd.get_name().to_string() } else { format!("{parent} {}", cmd.get_name()) };
    // `mut_args` keeps the arguments in place: the built command's index of flags stays right
    // (`mut_arg` would move the argument to the end, and the index would point elsewhere).
    let c = std::mem::take(cmd).mut_args(|a| {
        let hide = a.is_hide_set() || globals.contains(&a.get_id().as_str());
        a.hide(hide)
    });
    *cmd = c.after_help(format!("{}\n\n{note}", examples_block(&path)));
    for sub in cmd.get_subcommands_mut() {
        decorate(sub, &path, globals, note);
    }
}

/// `Examples:` and the command's example lines, indented.
fn examples_block(path: &str) -> String {
    let lines: Vec<String> = examples(path).iter().map(|l| format!("  {l}")).collect();
    format!("Examples:\n{}", lines.join("\n"))
}

/// `text` in lines of at most `width` characters, the later ones indented.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = "  ".to_string();
        } else if !line.is_empty() && line != "  " {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// The per-site operations and an argument each needs, for `sites plan|apply OP`.
const SITE_OPS: &[(&str, &str)] = &[
    ("instantiate", ""),
    ("terminate", ""),
    ("scale-out", ""),
    ("scale-in", " --node worker-3"),
    ("cnf-instantiate", ""),
    ("cnf-terminate", ""),
    ("run-script", " check.sh --fast"),
];

/// Every command's example lines, by its path (the top-level command as ""). `# ...` comments
/// and shell redirections are not part of what is parsed.
const EXAMPLES: &[(&str, &[&str])] = &[
    ("", &[
        "mgmt-driver exec -i hosts.yaml -- uptime",
        "mgmt-driver instantiate-end --request instantiate.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1",
        "mgmt-driver cnf instantiate --request cnf.json --vnf-instance-id cnf-1 --cluster-instance vnf-1 --package-dir pkg",
        "mgmt-driver hook --input hook.json > response.json   # the VNFM protocol",
        "mgmt-driver sites apply instantiate --sites sites.yaml",
    ]),
    ("exec", &[
        "mgmt-driver exec -i hosts.yaml -- uptime",
        "mgmt-driver exec -i hosts.yaml -g workers --become -t 10m -- apt-get -y upgrade",
        "mgmt-driver exec --ee db-1 -o json -- df -h /",
    ]),
    ("put", &[
        "mgmt-driver put -i hosts.yaml app.conf /etc/app/ --mode 0644",
        "mgmt-driver put -i hosts.yaml --host web-1 site/ /srv/www",
    ]),
    ("get", &[
        "mgmt-driver get -i hosts.yaml /var/log/syslog logs/   # logs/<host>/syslog",
        "mgmt-driver get -i hosts.yaml -g masters /etc/kubernetes/admin.conf kubeconfigs/",
    ]),
    ("run-script", &[
        "mgmt-driver run-script -i hosts.yaml samples/scripts/node-info.sh",
        "mgmt-driver run-script -i hosts.yaml --become -t 30m upgrade.sh 1.31 'with spaces'",
    ]),
    ("instantiate-end", &[
        "mgmt-driver instantiate-end --request instantiate.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1",
        "mgmt-driver instantiate-end --dry-run --request instantiate.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1",
        "mgmt-driver instantiate-end --request instantiate.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1 --kubeconfig-out vnf-1.kubeconfig",
    ]),
    ("heal-start", &["mgmt-driver heal-start --request heal.json -i hosts.yaml --vnf-instance-id vnf-1"]),
    ("heal-end", &["mgmt-driver heal-end --request heal.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1"]),
    ("scale-start", &[
        "mgmt-driver scale-start --request scale-in.json -i hosts.yaml --vnf-instance-id vnf-1 --node worker-3",
    ]),
    ("scale-end", &[
        "mgmt-driver scale-end --request scale-out.json -i hosts.yaml --package-dir pkg --vnf-instance-id vnf-1",
    ]),
    ("terminate-end", &[
        "mgmt-driver terminate-end -i hosts.yaml --vnf-instance-id vnf-1",
        "mgmt-driver terminate-end --request terminate.json -i hosts.yaml --vnf-instance-id vnf-1 --reset-nodes",
    ]),
    ("hook", &[
        "mgmt-driver hook --input hook.json > response.json",
        "mgmt-driver hook --dry-run < hook.json",
    ]),
    ("cnf", &[
        "mgmt-driver cnf instantiate --request cnf.json --vnf-instance-id cnf-1 --cluster-instance vnf-1 --package-dir pkg",
        "mgmt-driver cnf list --cluster-instance vnf-1 -n default",
        "mgmt-driver cnf status --vnf-instance-id cnf-1 --release web",
    ]),
    ("cnf instantiate", &[
        "mgmt-driver cnf instantiate --request cnf.json --vnf-instance-id cnf-1 --cluster-instance vnf-1 --package-dir pkg",
        "mgmt-driver cnf instantiate --request cnf.json --vnf-instance-id cnf-1 --cluster-instance vnf-1 --package-dir pkg --wait --atomic --timeout 10m",
    ]),
    ("cnf scale", &["mgmt-driver cnf scale --request scale.json --vnf-instance-id cnf-1"]),
    ("cnf heal", &[
        "mgmt-driver cnf heal --request heal.json --vnf-instance-id cnf-1 --vnf-instance instance.json",
    ]),
    ("cnf install", &[
        "mgmt-driver cnf install stable/openldap:1.2.3 --values ldap.yaml --vnf-instance-id kdu-1 --cluster-uuid osm:k8s-1 --cluster-instance k8s-1",
        "mgmt-driver cnf install oci://registry.example/charts/web --version 2.0.0 --release web --namespace edge --vnf-instance-id kdu-2 --cluster-instance k8s-1",
    ]),
    ("cnf uninstall", &["mgmt-driver cnf uninstall --vnf-instance-id kdu-1 --release web"]),
    ("cnf repo-add", &[
        "mgmt-driver cnf repo-add stable=https://charts.example/stable --vnf-instance-id ops --cluster-instance k8s-1",
    ]),
    ("cnf repo-remove", &["mgmt-driver cnf repo-remove stable --vnf-instance-id ops --cluster-instance k8s-1"]),
    ("cnf upgrade", &[
        "mgmt-driver cnf upgrade --vnf-instance-id cnf-1 --release web --version 1.2.0 --set image.tag=1.2.0 --reuse-values",
        "mgmt-driver cnf upgrade --vnf-instance-id kdu-1 --release web --values web-2.yaml",
    ]),
    ("cnf rollback", &["mgmt-driver cnf rollback --vnf-instance-id cnf-1 --release web --revision 2"]),
    ("cnf status", &["mgmt-driver cnf status --vnf-instance-id cnf-1 --release web"]),
    ("cnf history", &["mgmt-driver cnf history --vnf-instance-id cnf-1 --release web -o json"]),
    ("cnf values", &["mgmt-driver cnf values --vnf-instance-id cnf-1 --release web --all"]),
    ("cnf list", &[
        "mgmt-driver cnf list --cluster-instance vnf-1",
        "mgmt-driver cnf list --cluster-instance vnf-1 -n default",
    ]),
    ("cnf show", &[
        "mgmt-driver cnf show values nginx --repo https://charts.example/ --cluster-instance vnf-1",
        "mgmt-driver cnf show chart stable/web --version 1.2.0 --cluster-instance vnf-1",
    ]),
    ("cnf repo-list", &["mgmt-driver cnf repo-list --cluster-instance vnf-1"]),
    ("cnf repo-sync", &[
        "mgmt-driver cnf repo-sync --cluster-instance vnf-1 --repo stable=https://charts.example/stable --repo extra=https://charts.example/extra",
    ]),
    ("cnf terminate", &["mgmt-driver cnf terminate --vnf-instance-id cnf-1"]),
    ("cnf services", &["mgmt-driver cnf services --vnf-instance-id cnf-1 --release web -o json"]),
    ("cnf reset", &[
        "mgmt-driver cnf reset --vnf-instance-id cnf-1",
        "mgmt-driver cnf reset --vnf-instance-id cnf-1 --uninstall",
    ]),
    ("workload", &[
        "mgmt-driver workload deploy web.yaml --vnf-instance-id vnf-1 -i hosts.yaml",
        "mgmt-driver workload scale web 3 --vnf-instance-id vnf-1 -i hosts.yaml",
        "mgmt-driver workload wait web -i hosts.yaml --master-group masters -n apps",
    ]),
    ("workload deploy", &[
        "mgmt-driver workload deploy web.yaml --vnf-instance-id vnf-1 -i hosts.yaml",
        "mgmt-driver workload deploy db.yaml -i hosts.yaml --master-group masters --kind statefulset -n apps",
    ]),
    ("workload undeploy", &["mgmt-driver workload undeploy web --vnf-instance-id vnf-1 -i hosts.yaml"]),
    ("workload available", &["mgmt-driver workload available web --vnf-instance-id vnf-1 -i hosts.yaml -o json"]),
    ("workload scale", &["mgmt-driver workload scale web 3 --vnf-instance-id vnf-1 -i hosts.yaml"]),
    ("workload set-image", &[
        "mgmt-driver workload set-image web web=registry.example/web:1.1 --vnf-instance-id vnf-1 -i hosts.yaml",
    ]),
    ("workload rollback", &[
        "mgmt-driver workload rollback web --vnf-instance-id vnf-1 -i hosts.yaml",
        "mgmt-driver workload rollback web --vnf-instance-id vnf-1 -i hosts.yaml --to-revision 2",
    ]),
    ("workload exec", &[
        "mgmt-driver workload exec web --vnf-instance-id vnf-1 -i hosts.yaml -- sh -c 'echo $HOSTNAME'",
        "mgmt-driver workload exec web -c sidecar --vnf-instance-id vnf-1 -i hosts.yaml -- cat /etc/os-release",
    ]),
    ("workload wait", &[
        "mgmt-driver workload wait web --vnf-instance-id vnf-1 -i hosts.yaml --interval 10s --timeout 5m",
    ]),
    ("key", &[
        "mgmt-driver key   # the public key, for cloud-init",
        "mgmt-driver key rotate",
    ]),
    ("key show", &["mgmt-driver key show", "mgmt-driver key show -o json"]),
    ("key rotate", &["mgmt-driver key rotate", "mgmt-driver key rotate --type rsa"]),
    ("key finish-rotation", &["mgmt-driver key finish-rotation"]),
    ("state", &["mgmt-driver state reseal --state-dir /var/lib/mgmt-driver --dry-run"]),
    ("state reseal", &[
        "mgmt-driver state reseal --dry-run   # what would be authenticated",
        "mgmt-driver state reseal --state-dir /var/lib/mgmt-driver --state-key /etc/mgmt-driver/state.key",
    ]),
    ("ee", &[
        "mgmt-driver ee register db-1 --host 192.0.2.21 --user ops --password-file pw.txt --install-key --drop-password",
        "mgmt-driver ee list",
        "mgmt-driver ee show db-1",
    ]),
    ("ee register", &[
        "mgmt-driver ee register db-1 --host 192.0.2.21 --user ops --password-file pw.txt --install-key --drop-password",
        "mgmt-driver ee register cache-1 --host cache-1.example --user ops --identity ops.key --namespace .ns1.vnf1.vdu1-0",
    ]),
    ("ee list", &["mgmt-driver ee list", "mgmt-driver ee list --namespace .ns1 -o json"]),
    ("ee show", &["mgmt-driver ee show db-1 -o json"]),
    ("ee delete", &["mgmt-driver ee delete db-1", "mgmt-driver ee delete db-1 --remove-key"]),
    ("primitive", &[
        "mgmt-driver primitive list --package pkg",
        "mgmt-driver primitive run set-banner --dir prims --ee db-1 --param text=Hello",
        "mgmt-driver primitive status",
    ]),
    ("primitive list", &["mgmt-driver primitive list --dir prims", "mgmt-driver primitive list --package pkg"]),
    ("primitive show", &["mgmt-driver primitive show set-banner --dir prims"]),
    ("primitive run", &[
        "mgmt-driver primitive run set-banner --dir prims --ee db-1 --param text=Hello",
        "mgmt-driver primitive run restart-kubelet --package pkg --cluster-instance vnf-1 -i hosts.yaml",
    ]),
    ("primitive status", &["mgmt-driver primitive status", "mgmt-driver primitive status RUN_ID -o json"]),
    ("sites", &[
        "mgmt-driver sites render --sites samples/sites/sites.yaml --out target/sites",
        "mgmt-driver sites plan instantiate --sites samples/sites/sites.yaml",
        "mgmt-driver sites diff instantiate --sites samples/sites/sites.yaml",
        "mgmt-driver sites apply instantiate --sites samples/sites/sites.yaml",
        "mgmt-driver sites status",
    ]),
    ("sites render", &[
        "mgmt-driver sites render --sites samples/sites/sites.yaml --out target/sites",
        "mgmt-driver sites render --sites samples/sites/sites.yaml --out target/sites --selector region=eu",
    ]),
    ("sites plan", &[
        "mgmt-driver sites plan instantiate --sites samples/sites/sites.yaml",
        "mgmt-driver sites plan cnf-instantiate --rendered target/sites --only par1,ber2",
    ]),
    ("sites apply", &[
        "mgmt-driver sites apply instantiate --sites samples/sites/sites.yaml --max-sites 8",
        "mgmt-driver sites apply cnf-instantiate --rendered target/sites --selector tier=large",
        "mgmt-driver sites apply instantiate --rendered target/sites --index 3   # one pod of the Job",
    ]),
    ("sites diff", &[
        "mgmt-driver sites diff instantiate --rendered target/sites",
        "mgmt-driver sites diff cnf-instantiate --rendered target/sites --selector region=eu -o json",
    ]),
    ("sites status", &["mgmt-driver sites status", "mgmt-driver sites status -o json"]),
    ("sites export", &[
        "mgmt-driver sites export k8s-job --rendered target/sites --image registry.example/mgmt-driver:1 --state-claim mgmt-state instantiate | kubectl apply -f -",
    ]),
    ("sites export k8s-job", &[
        "mgmt-driver sites export k8s-job --rendered target/sites --image registry.example/mgmt-driver:1 --state-claim mgmt-state instantiate | kubectl apply -f -",
        "mgmt-driver sites export k8s-job --rendered target/sites --image registry.example/mgmt-driver:1 --state-claim mgmt-state -n fleet --secret site-secrets run-script check.sh --fast",
    ]),
    ("version", &["mgmt-driver version", "mgmt-driver version -o json"]),
    ("completion", &[
        "mgmt-driver completion bash > /etc/bash_completion.d/mgmt-driver",
        "mgmt-driver completion zsh > ~/.zfunc/_mgmt-driver",
    ]),
];

/// A command's example lines (`# ...` comments and shell redirections are not part of what is
/// parsed); empty for a command without any (a unit test refuses that).
fn examples(path: &str) -> Vec<String> {
    let per_op =
        ["plan", "apply", "diff"].into_iter().find_map(|v| path.strip_prefix(&format!("sites {v} ")).map(|op| (v, op)));
    if let Some((verb, op)) = per_op {
        let Some((op, arg)) = SITE_OPS.iter().find(|(o, _)| *o == op) else { return vec![] };
        // A script's arguments run to the end of the line: the selection goes before the op.
        return vec![
            format!("mgmt-driver sites {verb} --sites samples/sites/sites.yaml {op}{arg}"),
            format!("mgmt-driver sites {verb} --rendered target/sites --selector region=eu {op}{arg}"),
        ];
    }
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, lines)| lines.iter().map(|l| l.to_string()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command's path, the top-level one as "".
    fn paths(cmd: &Command, parent: &str, out: &mut Vec<String>) {
        out.push(parent.to_string());
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path =
                if parent.is_empty() { sub.get_name().to_string() } else { format!("{parent} {}", sub.get_name()) };
            paths(sub, &path, out);
        }
    }

    fn find<'c>(cmd: &'c Command, path: &str) -> &'c Command {
        path.split_whitespace().fold(cmd, |c, name| c.find_subcommand(name).unwrap_or_else(|| panic!("{path}")))
    }

    /// The words of an example as a shell would pass them: up to a comment or a redirection,
    /// quotes taken off.
    fn words(line: &str) -> Vec<String> {
        let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => (quote, any) = (Some(c), true),
                (None, ' ') => {
                    if any || !word.is_empty() {
                        out.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, c) => word.push(c),
            }
        }
        if any || !word.is_empty() {
            out.push(word);
        }
        let end = out.iter().position(|w| ["#", "|", ">", "<"].contains(&w.as_str())).unwrap_or(out.len());
        out.truncate(end);
        out
    }

    #[test]
    fn every_command_has_examples_that_parse_as_that_command() {
        let cmd = command();
        let mut all = Vec::new();
        paths(&cmd, "", &mut all);
        assert!(all.len() > 70, "{all:?}");
        for path in &all {
            let lines = examples(path);
            assert!(!lines.is_empty(), "`mgmt-driver {path}` has no examples (src/cli/help.rs)");
            let help = find(&cmd, path).clone().render_long_help().to_string();
            assert!(help.contains("Examples:\n  mgmt-driver"), "mgmt-driver {path} --help:\n{help}");
            for line in lines {
                let w = words(&line);
                assert_eq!(w[0], "mgmt-driver", "{line}");
                let m = Cli::command()
                    .try_get_matches_from(&w)
                    .unwrap_or_else(|e| panic!("{path}: `{line}` does not parse:\n{e}"));
                // The example runs the command it is shown for (a parent's may show a child).
                let mut ran = Vec::new();
                let mut at = &m;
                while let Some((name, sub)) = at.subcommand() {
                    ran.push(name.to_string());
                    at = sub;
                }
                assert!(ran.join(" ").starts_with(path.as_str()), "{path}: `{line}` runs `{}`", ran.join(" "));
            }
        }
    }

    #[test]
    fn global_flags_are_listed_once_and_still_parse_after_the_command() {
        let cmd = command();
        let top = cmd.clone().render_long_help().to_string();
        let exec = find(&cmd, "exec").clone().render_long_help().to_string();
        assert!(top.contains("--connect-timeout") && top.contains("Global options:"), "{top}");
        assert!(!exec.contains("--connect-timeout <DURATION>") && !exec.contains("      --dry-run\n"), "{exec}");
        assert!(exec.contains("Global options (mgmt-driver --help): -o, -v,") && exec.contains("--dry-run"), "{exec}");
        assert!(exec.contains("--inventory <FILE>") && exec.contains("--timeout <DURATION|none>"), "{exec}");
        let m = command().try_get_matches_from([
            "mgmt-driver",
            "exec",
            "-i",
            "h.yaml",
            "-o",
            "json",
            "--dry-run",
            "-vv",
            "--",
            "true",
        ]);
        let m = m.unwrap_or_else(|e| panic!("{e}"));
        assert!(m.get_flag("dry_run") && m.get_count("verbose") == 2);
    }

    #[test]
    fn long_lines_wrap_under_the_first() {
        assert_eq!(wrap("aaa bbb ccc", 7), "aaa bbb\n  ccc");
        assert_eq!(wrap("aaa", 2), "aaa");
    }
}
