//! Every `MGMT_DRIVER_*` environment variable, declared once: its name, who reads it and what
//! it means. The command line takes its names from here (`env = env_vars::STATE_DIR`), and
//! docs/environment.md lists exactly this table (a unit test compares them, and finds any
//! `MGMT_DRIVER_*` name in the sources, scripts and glue that is not here), so a variable cannot
//! exist without its documentation.

/// `--inventory`'s default file.
pub const INVENTORY: &str = "MGMT_DRIVER_INVENTORY";
/// `--state-dir`'s default directory.
pub const STATE_DIR: &str = "MGMT_DRIVER_STATE_DIR";
/// `--state-key`'s default file.
pub const STATE_KEY_FILE: &str = "MGMT_DRIVER_STATE_KEY_FILE";
/// `--ssh-config`'s default file.
pub const SSH_CONFIG: &str = "MGMT_DRIVER_SSH_CONFIG";
/// The log filter.
pub const LOG: &str = "MGMT_DRIVER_LOG";
/// `--secrets-dir`'s directories.
pub const SECRETS_DIR: &str = "MGMT_DRIVER_SECRETS_DIR";
/// `--secret-env`'s names and prefixes.
pub const SECRET_ENV: &str = "MGMT_DRIVER_SECRET_ENV";
/// `--vim-auth-url`'s Keystone endpoints.
pub const VIM_AUTH_URLS: &str = "MGMT_DRIVER_VIM_AUTH_URLS";

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The `mgmt-driver` binary, from its own environment.
    Driver,
    /// A primitive's script on the node: the driver sets it (`src/remote/primitive_run.sh`).
    Primitive,
    /// The VNFM glue (the Tacker shim `samples/package/Scripts/mgmt_driver_hook.py`, the Tacker
    /// v1 driver `integrations/tacker-v1/`), from the conductor's environment.
    Glue,
    /// The project's own scripts (`scripts/`), which build what the tests and the demo need.
    Scripts,
}

impl Reader {
    /// As docs/environment.md's tables head it.
    pub fn title(self) -> &'static str {
        match self {
            Reader::Driver => "Read by mgmt-driver",
            Reader::Primitive => "Set for a primitive's script",
            Reader::Glue => "Read by the VNFM glue",
            Reader::Scripts => "Read by the project's scripts",
        }
    }
}

/// One variable: its name, who reads it, and what it means (as the docs say it).
#[derive(Clone, Copy, Debug)]
pub struct Var {
    pub name: &'static str,
    pub reader: Reader,
    pub meaning: &'static str,
}

/// The table.
pub const ALL: &[Var] = &[
    Var {
        name: INVENTORY,
        reader: Reader::Driver,
        meaning: "The inventory file when `-i/--inventory` is not given (exec, put, get, run-script, the cluster hooks).",
    },
    Var {
        name: STATE_DIR,
        reader: Reader::Driver,
        meaning: "The state store when `--state-dir` is not given (default: ~/.local/state/mgmt-driver).",
    },
    Var {
        name: STATE_KEY_FILE,
        reader: Reader::Driver,
        meaning: "The key that seals the state store's secrets when `--state-key` is not given (default: ~/.config/mgmt-driver/state.key).",
    },
    Var {
        name: SSH_CONFIG,
        reader: Reader::Driver,
        meaning: "The OpenSSH client config when `--ssh-config` is not given (default: ~/.ssh/config if it exists; `none` reads none).",
    },
    Var {
        name: LOG,
        reader: Reader::Driver,
        meaning: "The log filter, in `tracing`'s syntax (`debug`, `mgmt_driver=debug,russh=info`); it wins over `-vv`. Default: the driver's own warnings and errors, its libraries' errors.",
    },
    Var {
        name: SECRETS_DIR,
        reader: Reader::Driver,
        meaning: "The directories (`DIR:DIR`) whose files `@file:` references in operator-given request files may read, when `--secrets-dir` is not given (docs/security.md, \"Secret references\"). Unset: none.",
    },
    Var {
        name: SECRET_ENV,
        reader: Reader::Driver,
        meaning: "The variables (`NAME,PREFIX*`) that `@env:` references in operator-given request files may read, when `--secret-env` is not given. Unset: none.",
    },
    Var {
        name: VIM_AUTH_URLS,
        reader: Reader::Driver,
        meaning: "The Keystone endpoints (`URL,URL`) a hook's `vimConnectionInfo` may name, to ask Neutron for node addresses the VNF instance lacks, when `--vim-auth-url` is not given. Unset: the VIM is never asked.",
    },
    Var {
        name: "MGMT_DRIVER_PARAMS",
        reader: Reader::Primitive,
        meaning: "A JSON file with the run's parameters (also in `$PARAM_<NAME>`).",
    },
    Var {
        name: "MGMT_DRIVER_RESULT",
        reader: Reader::Primitive,
        meaning: "Where the script may write its JSON result (the run's `result`).",
    },
    Var { name: "MGMT_DRIVER_PRIMITIVE", reader: Reader::Primitive, meaning: "The primitive's name." },
    Var {
        name: "MGMT_DRIVER_BIN",
        reader: Reader::Glue,
        meaning: "The mgmt-driver binary the glue runs (default: `mgmt-driver` on PATH).",
    },
    Var {
        name: "MGMT_DRIVER_HOOK_ARGS",
        reader: Reader::Glue,
        meaning: "Extra arguments for `mgmt-driver hook`, split as a shell would (e.g. `--dry-run`, `--tacker-compat`).",
    },
    Var {
        name: "MGMT_DRIVER_HOOK_LOG",
        reader: Reader::Glue,
        meaning: "Tacker v2 shim: a file mgmt-driver's progress lines are appended to (Tacker keeps only the error lines, in the operation's error detail).",
    },
    Var {
        name: "MGMT_DRIVER_KUBECONFIG_DIR",
        reader: Reader::Glue,
        meaning: "Tacker v1: a kubeconfig per cluster, written by instantiate_end and heal_end to `<dir>/<vnf instance id>.kubeconfig` (mode 0600).",
    },
    Var {
        name: "MGMT_DRIVER_CONTROL_PLANE_CACHE",
        reader: Reader::Scripts,
        meaning: "Where `scripts/build-control-plane.sh` keeps the built control plane, one directory per build key (default: `${XDG_CACHE_HOME:-~/.cache}/mgmt-driver/control-plane`).",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// Every `MGMT_DRIVER_[A-Z_]+` word of a text.
    fn names_in(text: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find("MGMT_DRIVER_") {
            let tail = &rest[i..];
            let end = tail.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(tail.len());
            let name = tail[..end].trim_end_matches('_');
            if name.len() > "MGMT_DRIVER".len() {
                out.insert(name.to_string());
            }
            rest = &tail[end..];
        }
        out
    }

    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if e.is_dir() {
                files(&e, out);
            } else if e
                .extension()
                .is_some_and(|x| ["rs", "sh", "py", "md", "yaml", "j2"].contains(&x.to_str().unwrap()))
            {
                out.push(e);
            }
        }
    }

    #[test]
    fn names_are_unique_and_well_formed() {
        let names: BTreeSet<&str> = ALL.iter().map(|v| v.name).collect();
        assert_eq!(names.len(), ALL.len());
        for v in ALL {
            assert!(v.name.starts_with("MGMT_DRIVER_") && names_in(v.name).contains(v.name), "{}", v.name);
            assert!(v.meaning.ends_with('.') && !v.meaning.contains('\n'), "{}: {}", v.name, v.meaning);
        }
    }

    /// docs/environment.md names exactly the table's variables, each in its reader's section.
    #[test]
    fn the_environment_page_lists_exactly_the_table() {
        let doc = std::fs::read_to_string(root().join("docs/environment.md")).unwrap();
        let want: BTreeSet<String> = ALL.iter().map(|v| v.name.to_string()).collect();
        assert_eq!(names_in(&doc), want, "docs/environment.md and src/env_vars.rs disagree");
        for v in ALL {
            let section = doc.split("\n## ").find(|s| s.starts_with(v.reader.title())).unwrap_or_else(|| {
                panic!("docs/environment.md has no section \"## {}\"", v.reader.title());
            });
            assert!(
                section.contains(&format!("| `{}` | {} |", v.name, v.meaning)),
                "docs/environment.md: {} row",
                v.name
            );
        }
    }

    /// No `MGMT_DRIVER_*` name in the sources, scripts, samples, glue, docs or tests is missing
    /// here.
    #[test]
    fn every_variable_used_anywhere_is_in_the_table() {
        let known: BTreeSet<String> = ALL.iter().map(|v| v.name.to_string()).collect();
        let mut paths = Vec::new();
        for d in ["src", "scripts", "samples", "integrations", "templates", "docs", "tests"] {
            if root().join(d).is_dir() {
                files(&root().join(d), &mut paths);
            }
        }
        for p in paths {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for n in names_in(&text) {
                assert!(known.contains(&n), "{}: {n} is not in src/env_vars.rs", p.display());
            }
        }
    }
}
