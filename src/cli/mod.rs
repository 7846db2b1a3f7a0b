//! The command line: one parser, shared flags declared once (`common.rs`), one result envelope
//! (`envelope.rs`), what `--help` shows (`help.rs`: examples, global flags once), and
//! subcommands that only parse their own arguments and call an operation: the fan-out commands
//! (`fanout.rs`), the cluster hooks (`hook.rs`), the Helm CNF operations (`cnf.rs`), the state
//! store's upkeep (`state.rs`), and `version` / `completion` (`meta.rs`). This is the composition root: the only place that picks
//! the SSH connector (or the plan connector for `--dry-run`). Everything it prints goes through
//! `console.rs` (and events through the renderer).

pub mod cnf;
pub mod common;
pub mod ee;
pub mod envelope;
pub mod fanout;
pub mod help;
pub mod hook;
pub mod interrupt;
pub mod meta;
pub mod primitive;
pub mod sites;
pub mod sites_export;
pub mod state;
pub mod vnfm_hook;
pub mod workload;

use clap::{ArgAction, Parser, Subcommand};

use crate::console;
use crate::env_vars;
use crate::error::Result;
use crate::render::Output;
use common::{ConnArgs, Ctx, RunArgs, SecretArgs, StateDir, VimArgs};

#[derive(Parser, Debug)]
#[command(name = "mgmt-driver", version, about = "Turn VMs into a Kubernetes cluster with Helm, over SSH")]
pub struct Cli {
    /// Output: progress on a terminal, plain lines, or one result document (json, yaml) on stdout
    /// with events on stderr.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "auto",
        value_name = "MODE",
        global = true,
        help_heading = "Global options"
    )]
    pub output: Output,
    /// -v: also show connects, commands, exits and uploads; -vv: also the driver's debug log
    /// (docs/environment.md).
    #[arg(short, long, action = ArgAction::Count, global = true, help_heading = "Global options")]
    pub verbose: u8,
    /// The key that seals the secrets of the state store (created, 0600, on first use; default:
    /// ~/.config/mgmt-driver/state.key). Keep it apart from the state directory.
    #[arg(long, global = true, env = env_vars::STATE_KEY_FILE, value_name = "FILE", help_heading = "Global options")]
    pub state_key: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub secrets: SecretArgs,
    #[command(flatten)]
    pub vim: VimArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a shell command on every selected host (words are joined, as ssh does).
    Exec(fanout::ExecArgs),
    /// Upload a file or a directory tree (atomic, skipped when the remote sha256 matches).
    Put(fanout::PutArgs),
    /// Download a file from every selected host into DIR/<host>/<file name>.
    Get(fanout::GetArgs),
    /// Upload a script to a private directory and run it with the given arguments (quoted).
    RunScript(fanout::RunScriptArgs),
    /// VNFM hook: turn the VMs into a Kubernetes cluster (with Helm) and record the VIM.
    InstantiateEnd(hook::HookArgs),
    /// VNFM hook: take the healed VNFCs out of the cluster (SOL002), or forget it (SOL003).
    HealStart(hook::HookArgs),
    /// VNFM hook: bring the healed VNFCs back (SOL002), or re-instantiate (SOL003).
    HealEnd(hook::HookArgs),
    /// VNFM hook: SCALE_IN drains and deletes the removed workers (`--node`).
    ScaleStart(hook::HookArgs),
    /// VNFM hook: SCALE_OUT joins the new workers.
    ScaleEnd(hook::HookArgs),
    /// VNFM hook: remove the VIM record and the instance state (`--reset-nodes`: kubeadm reset).
    TerminateEnd(hook::HookArgs),
    /// VNFM hook protocol: one JSON document in (stdin or --input), one out (docs/hook-protocol.md).
    Hook(vnfm_hook::VnfmHookArgs),
    /// Helm CNF operations on the cluster's masters (install, scale, upgrade, rollback, ...).
    Cnf {
        #[command(subcommand)]
        op: crate::cnf::Op,
        #[command(flatten)]
        args: cnf::CnfArgs,
    },
    /// Kubernetes workloads with kubectl on a master (deploy, scale, set-image, rollback, exec, ...).
    Workload {
        #[command(subcommand)]
        op: crate::workload::Op,
        #[command(flatten)]
        args: workload::WorkloadArgs,
    },
    /// The driver's own SSH key: print it (made on first use), rotate it across the EEs.
    Key(ee::KeyArgs),
    /// Execution environments: register existing machines (our key, their host key), list,
    /// show, delete; `--ee NAME` targets them.
    Ee {
        #[command(subcommand)]
        cmd: ee::EeCmd,
        #[command(flatten)]
        store: StateDir,
    },
    /// Named primitives of a package (primitives.yaml): list, show, run with typed parameters,
    /// status of runs (docs/primitives.md).
    Primitive {
        #[command(subcommand)]
        cmd: primitive::PrimitiveCmd,
        #[command(flatten)]
        src: primitive::Source,
    },
    /// Per-site runs: check and run one operation on many rendered sites (docs/fleet.md).
    Sites {
        #[command(subcommand)]
        cmd: sites::SitesCmd,
    },
    /// The state store's upkeep: `reseal` authenticates an earlier version's documents.
    State {
        #[command(subcommand)]
        cmd: state::StateCmd,
        #[command(flatten)]
        store: StateDir,
    },
    /// Print the version (and, with -o json, the build's details).
    Version,
    /// Print a shell completion script: `mgmt-driver completion bash > /etc/bash_completion.d/mgmt-driver`.
    Completion {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

impl Command {
    /// The operation's name as its result document names it.
    pub fn name(&self) -> String {
        match self {
            Command::Exec(_) => "exec",
            Command::Put(_) => "put",
            Command::Get(_) => "get",
            Command::RunScript(_) => "run-script",
            Command::InstantiateEnd(_) => "instantiate_end",
            Command::HealStart(_) => "heal_start",
            Command::HealEnd(_) => "heal_end",
            Command::ScaleStart(_) => "scale_start",
            Command::ScaleEnd(_) => "scale_end",
            Command::TerminateEnd(_) => "terminate_end",
            Command::Hook(_) => "hook",
            Command::Cnf { op, .. } => op.name(),
            Command::Workload { op, .. } => op.name(),
            Command::Sites { cmd } => return cmd.name(),
            Command::Key(a) => match a.cmd {
                None | Some(ee::KeyCmd::Show) => "key",
                Some(ee::KeyCmd::Rotate) => "key rotate",
                Some(ee::KeyCmd::FinishRotation) => "key finish-rotation",
            },
            Command::Ee { cmd, .. } => match cmd {
                ee::EeCmd::Register(_) => "ee register",
                ee::EeCmd::List { .. } => "ee list",
                ee::EeCmd::Show { .. } => "ee show",
                ee::EeCmd::Delete { .. } => "ee delete",
            },
            Command::Primitive { cmd, .. } => match cmd {
                primitive::PrimitiveCmd::List => "primitive list",
                primitive::PrimitiveCmd::Show { .. } => "primitive show",
                primitive::PrimitiveCmd::Run(_) => "primitive run",
                primitive::PrimitiveCmd::Status { .. } => "primitive status",
            },
            Command::State { cmd: state::StateCmd::Reseal, .. } => "state reseal",
            Command::Version => "version",
            Command::Completion { .. } => "completion",
        }
        .to_string()
    }
}

/// A command line clap refused: its message on stderr as clap prints it and, when the line asks
/// for `-o json` or `-o yaml`, the result document too, so a VNFM parsing stdout always gets one.
/// Returns the exit code (2, or 0 for `--help` / `--version`).
pub fn parse_error(e: &clap::Error, args: &[String]) -> i32 {
    console::clap_message(e);
    if !e.use_stderr() {
        return crate::error::exit::OK;
    }
    let output = requested_output(args);
    if matches!(output, Output::Json | Output::Yaml) {
        let field = match e.get(clap::error::ContextKind::InvalidArg) {
            Some(clap::error::ContextValue::String(s)) => s.clone(),
            _ => "arguments".to_string(),
        };
        let first = e.kind().as_str().unwrap_or("invalid command line");
        let detail = e.to_string();
        let detail = detail.lines().next().unwrap_or(first).trim_start_matches("error: ").to_string();
        let err = crate::error::Error::input("command line", field, detail);
        envelope::Envelope::new("mgmt-driver", args.iter().any(|a| a == "--dry-run")).error(&err).print(output);
    }
    crate::error::exit::BAD_INPUT
}

/// `-o X`, `-oX`, `--output X` or `--output=X` on a command line clap could not parse.
fn requested_output(args: &[String]) -> Output {
    use clap::ValueEnum;
    let mut want = None;
    for (i, a) in args.iter().enumerate() {
        let v = match a.as_str() {
            "-o" | "--output" => args.get(i + 1).map(String::as_str),
            "--" => break,
            _ => a.strip_prefix("--output=").or_else(|| a.strip_prefix("-o")),
        };
        if let Some(v) = v.and_then(|v| Output::from_str(v, true).ok()) {
            want = Some(v);
        }
    }
    want.unwrap_or(Output::Auto)
}

/// Run the parsed command line and return the process exit code.
pub async fn main(cli: Cli) -> i32 {
    let ctx = Ctx {
        output: cli.output,
        verbose: cli.verbose > 0,
        conn: cli.conn,
        run: cli.run,
        state_key: cli.state_key,
        secrets: cli.secrets,
        vim: cli.vim,
    };
    match run(cli.command, &ctx).await {
        Ok(code) => code,
        Err(e) => {
            // Only errors before any operation started end up here (bad flags, unreadable files).
            console::error(&e);
            envelope::Envelope::new("mgmt-driver", ctx.run.dry_run).error(&e).print(ctx.output);
            e.exit_code()
        }
    }
}

async fn run(command: Command, ctx: &Ctx) -> Result<i32> {
    use crate::cluster::prepare::Op;
    Ok(match command {
        Command::Exec(a) => fanout::exec(a, ctx).await?,
        Command::Put(a) => fanout::put(a, ctx).await?,
        Command::Get(a) => fanout::get(a, ctx).await?,
        Command::RunScript(a) => fanout::run_script(a, ctx).await?,
        Command::InstantiateEnd(a) => hook::run(Op::InstantiateEnd, a, ctx).await,
        Command::HealStart(a) => hook::run(Op::HealStart, a, ctx).await,
        Command::HealEnd(a) => hook::run(Op::HealEnd, a, ctx).await,
        Command::ScaleStart(a) => hook::run(Op::ScaleStart, a, ctx).await,
        Command::ScaleEnd(a) => hook::run(Op::ScaleEnd, a, ctx).await,
        Command::TerminateEnd(a) => hook::run(Op::TerminateEnd, a, ctx).await,
        Command::Hook(a) => vnfm_hook::run(a, ctx).await,
        Command::Cnf { op, args } => cnf::run(op, args, ctx).await,
        Command::Workload { op, args } => workload::run(op, args, ctx).await,
        Command::Sites { cmd } => sites::run(cmd, ctx).await,
        Command::Key(a) => ee::key(a, ctx).await?,
        Command::Ee { cmd, store } => ee::ee(cmd, store, ctx).await?,
        Command::Primitive { cmd, src } => primitive::run(cmd, src, ctx).await?,
        Command::State { cmd, store } => state::run(cmd, store, ctx)?,
        Command::Version => meta::version(ctx),
        Command::Completion { shell } => meta::completion(shell, <Cli as clap::CommandFactory>::command()),
    })
}

#[cfg(test)]
mod tests {
    use super::common::Defaults;
    use super::Cli;
    use clap::CommandFactory;

    /// Every command says what it does, and every argument has a help text (a user reads
    /// `--help` before any doc).
    #[test]
    fn every_command_and_argument_is_explained() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.get_about().is_none() && !path.is_empty() {
                missing.push(format!("`{path}` has no about"));
            }
            for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = a.get_id().as_str();
                let builtin = matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version);
                if a.get_help().is_none() && a.get_long_help().is_none() && !builtin {
                    missing.push(format!("`{path}` {id}"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                walk(sub, format!("{path} {}", sub.get_name()).trim(), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }

    /// The families' defaults and what `--retry-for` / `--parallel` say about them agree.
    #[test]
    fn the_shared_flags_name_each_family_s_default() {
        let cmd = Cli::command();
        let help = |id: &str| {
            let a = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            a.get_help().map(|h| h.to_string()).unwrap_or_default().replace('\n', " ")
        };
        let (retry, parallel) = (help("retry_for"), help("parallel"));
        for (d, who) in [
            (Defaults::FAN_OUT, "exec/put/get/run-script"),
            (Defaults::HOOKS, "the hooks"),
            (Defaults::SITES, "sites"),
            (Defaults::MASTERS, "cnf and workload"),
            (Defaults::EE, "key, ee"),
        ] {
            let r = format!("{}s", d.retry_for.as_secs());
            assert!(
                retry.split(r.as_str()).nth(1).is_some_and(|after| after.contains(who)),
                "--retry-for: {r} {who}: {retry}"
            );
            let p = format!("{} ", d.parallel);
            assert!(parallel.contains(&p) && parallel.contains(who), "--parallel: {p}{who}: {parallel}");
        }
    }

    /// Every flag that takes a duration (`--timeout`, `--install-timeout`, `--retry-for`, ...), in
    /// every subcommand, takes the forms operators write: `10s`, `5m`, `1h`, and plain seconds.
    #[test]
    fn every_duration_flag_takes_units() {
        fn walk(cmd: &clap::Command, path: &str, seen: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let is_duration = arg.get_value_names().is_some_and(|v| v.iter().any(|n| n.starts_with("DURATION")));
                if long.ends_with("timeout") {
                    assert!(is_duration, "{path} --{long} is not a DURATION flag");
                }
                if !is_duration {
                    continue;
                }
                // The flag alone, with its own value parser, in a command of its own.
                let parse = |v: &str| {
                    let one = clap::Command::new("t").arg(arg.clone().required(false).global(false));
                    one.try_get_matches_from(["t", &format!("--{long}"), v]).map(|_| ())
                };
                for v in ["10s", "5m", "1h", "90", "1m30s"] {
                    let r = parse(v);
                    assert!(r.is_ok(), "{path} --{long} {v}: {:?}", r.err());
                }
                assert!(parse("5 parsecs").is_err(), "{path} --{long} accepts nonsense");
                seen.push(format!("{path} --{long}"));
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut seen = Vec::new();
        walk(&Cli::command(), "mgmt-driver", &mut seen);
        for must in ["mgmt-driver exec --timeout", "mgmt-driver cnf --timeout", "mgmt-driver hook --install-timeout"] {
            assert!(seen.iter().any(|s| s == must), "{must} not found among {seen:?}");
        }
    }
}
