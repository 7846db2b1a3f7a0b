//! One runner for the test binaries (`harness = false`, tests/bin/*.rs): each binary folds
//! several suites (one suite per test file, `pub fn suite() -> Suite`), and this module owns what
//! they share — the root/CI skip policy, each suite's shared lab (brought up only when one of its
//! lab trials will run, always torn down), the suite prefix of every trial's name, and the test
//! name that [`super::phase`] reports.
//!
//! Why one binary holds several suites: every test binary links russh, tokio and the driver, and
//! on a 2-core CI the links dominated building the tests. Why the suites still run one after
//! another, each as its own libtest-mimic run: a suite's trials may bring up labs of their own
//! (fixed names and nets, memory, namespaces), as they did when each suite was its own binary and
//! cargo ran the binaries one by one; running suites side by side would put several suites' labs
//! up at once, unbounded. Inside a suite, trials run on `--test-threads` threads, as before.
//!
//! Trials are named `<suite>::<test>`, so a filter on the prefix runs one suite
//! (`cargo test --test cluster -- keys::`). A suite with no selected trial is skipped silently.
//!
//! The policy: the lab needs root (network/mount/pid namespaces). Without root, the trials that
//! need the lab are ignored with a loud message and the run can still pass; under `CI=true` a
//! non-root run that selects a lab trial fails at once with exit 1 instead, so CI can never pass
//! without the lab tests. `--list` only lists, whoever runs it. `--logfile` is written by each
//! suite's run in turn, so it keeps the last suite's output only.

use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use libtest_mimic::{Arguments, Conclusion, Failed, Trial};

use super::{is_root, phase, Lab};

/// A test function; its name is given next to it.
pub type Test = (&'static str, fn() -> Result<(), Failed>);

/// A trial body that is not a plain function: a row of a table of cases, with its data.
pub type Body = Box<dyn FnOnce() -> Result<(), Failed> + Send>;

/// The running suite's shared lab, published while that suite runs (suites run one at a time).
static SHARED_LAB: Mutex<Option<&'static Lab>> = Mutex::new(None);

/// The running suite's shared lab (see [`Suite::shared_lab`]); only lab trials may call this.
pub fn shared_lab() -> &'static Lab {
    SHARED_LAB.lock().unwrap_or_else(PoisonError::into_inner).expect("the suite's shared lab is up")
}

/// One suite (one test file): `Suite::new(file!()).without_root(&[..]).needing_root(&[..])`,
/// returned by the file's `suite()` and run by its binary's `main` through [`run`].
pub struct Suite {
    /// The prefix of its trials' names: the file's name (`keys` for tests/keys.rs, `hostile` for
    /// tests/hostile/main.rs).
    name: String,
    /// The file, for the skip and CI messages.
    file: PathBuf,
    needing_root: Vec<Test>,
    without_root: Vec<Test>,
    cases: Vec<(String, Body)>,
    shared_lab: Option<Box<dyn FnOnce() -> Lab>>,
    closing_line: Option<String>,
    /// Why its root trials cannot run here although root could run them (something they need
    /// is not built): they are then ignored, and the run says so loudly.
    missing: Option<String>,
}

impl Suite {
    /// `file` is the suite's `file!()`: it names the suite (the trials' prefix) and its file in
    /// the skip and CI messages.
    pub fn new(file: &'static str) -> Suite {
        let file = normalize(Path::new(file));
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("suite");
        let name = if stem == "main" || stem == "mod" {
            file.parent().and_then(|p| p.file_name()).and_then(|s| s.to_str()).unwrap_or(stem)
        } else {
            stem
        };
        Suite {
            name: name.to_string(),
            file,
            needing_root: Vec::new(),
            without_root: Vec::new(),
            cases: Vec::new(),
            shared_lab: None,
            closing_line: None,
            missing: None,
        }
    }

    /// Trials that need root (a lab); ignored without it.
    pub fn needing_root(mut self, tests: &[Test]) -> Suite {
        self.needing_root.extend_from_slice(tests);
        self
    }

    /// Trials that need no node, and run for everyone.
    pub fn without_root(mut self, tests: &[Test]) -> Suite {
        self.without_root.extend_from_slice(tests);
        self
    }

    /// Table-driven trials that need no node (each row its own named trial).
    pub fn cases(mut self, cases: impl IntoIterator<Item = (String, Body)>) -> Suite {
        self.cases.extend(cases);
        self
    }

    /// A lab shared by the root trials (read through [`shared_lab`]): brought up by `up` before
    /// the suite's first trial if any of its root trials is selected, and torn down after its
    /// last one, also when trials failed or panicked.
    pub fn shared_lab(mut self, up: impl FnOnce() -> Lab + 'static) -> Suite {
        self.shared_lab = Some(Box::new(up));
        self
    }

    /// Ignore the root trials, loudly, when `missing` says what they need and is not there.
    pub fn needing(mut self, missing: Option<String>) -> Suite {
        self.missing = missing;
        self
    }

    /// A line printed after the suite ran (a count of what the suite covered).
    pub fn closing_line(mut self, line: String) -> Suite {
        self.closing_line = Some(line);
        self
    }

    /// Its trials, named `<suite>::<test>`, and how many of them (the last ones) need root.
    fn trials(&mut self, root: bool) -> (Vec<Trial>, usize) {
        let prefix = |test: &str| format!("{}::{test}", self.name);
        let mut trials: Vec<Trial> = self.without_root.iter().map(|&(n, f)| trial(prefix(n), f)).collect();
        trials.extend(self.cases.drain(..).map(|(n, body)| Trial::test(prefix(&n), body)));
        let ignore = !root || self.missing.is_some();
        trials.extend(self.needing_root.iter().map(|&(n, f)| trial(prefix(n), f).with_ignored_flag(ignore)));
        (trials, self.needing_root.len())
    }
}

/// Run the suites of one test binary one after another (see the module's doc), then exit: 101 if
/// a trial failed, 1 under `CI=true` without root.
pub fn run(suites: Vec<Suite>) -> ! {
    let args = Arguments::from_args();
    let conclusion = run_suites(&args, suites, is_root());
    conclusion.exit()
}

/// A suite, its trials, and which of them (the last `root_trials`) need root.
struct Planned {
    suite: Suite,
    trials: Vec<Trial>,
    root_trials: usize,
}

impl Planned {
    fn selected(&self, args: &Arguments) -> usize {
        self.trials.iter().filter(|t| !args.is_filtered_out(t)).count()
    }

    fn selected_root_trials(&self, args: &Arguments) -> usize {
        let first = self.trials.len() - self.root_trials;
        self.trials[first..].iter().filter(|t| !args.is_filtered_out(t)).count()
    }

    /// Whether a root trial will really run (selected, and not ignored).
    fn runs_a_lab_trial(&self, args: &Arguments) -> bool {
        let first = self.trials.len() - self.root_trials;
        self.trials[first..].iter().any(|t| !args.is_filtered_out(t) && !args.is_ignored(t))
    }
}

fn run_suites(args: &Arguments, suites: Vec<Suite>, root: bool) -> Conclusion {
    let mut planned: Vec<Planned> = suites
        .into_iter()
        .map(|mut suite| {
            let (trials, root_trials) = suite.trials(root);
            Planned { suite, trials, root_trials }
        })
        .collect();
    let selected: Vec<usize> = planned.iter().map(|p| p.selected(args)).collect();
    if args.list || selected.iter().all(|&n| n == 0) {
        // One list, or one run that says how many trials the filter left out.
        let all = planned.into_iter().flat_map(|p| p.trials).collect();
        return libtest_mimic::run(args, all);
    }
    if !root {
        refuse_in_ci(args, &planned);
    }
    let mut total = Conclusion { num_filtered_out: 0, num_passed: 0, num_failed: 0, num_ignored: 0, num_measured: 0 };
    let mut recap = Vec::new();
    for p in planned.iter_mut() {
        if p.selected(args) == 0 {
            total.num_filtered_out += p.trials.len() as u64;
            continue;
        }
        let skipped = p.selected_root_trials(args);
        if !root && skipped > 0 {
            eprintln!(
                "\n!!!!!!!! SKIPPING {skipped} LAB TESTS of suite {} ({}): they need root (run `sudo bash scripts/test.sh`) !!!!!!!!\n",
                p.suite.name,
                p.suite.file.display()
            );
        }
        if let (true, Some(why)) = (skipped > 0, &p.suite.missing) {
            eprintln!(
                "\n!!!!!!!! SKIPPED {skipped} LAB TESTS of suite {} ({}): {why} !!!!!!!!\n",
                p.suite.name,
                p.suite.file.display()
            );
        }
        let lab = match p.suite.shared_lab.take() {
            Some(up) if root && p.runs_a_lab_trial(args) => Some(SharedLabUp::bring_up(up)),
            _ => None,
        };
        let c = libtest_mimic::run(args, std::mem::take(&mut p.trials));
        drop(lab);
        if let Some(line) = &p.suite.closing_line {
            eprintln!("{line}");
        }
        let failed = if c.num_failed > 0 { format!(", {} FAILED", c.num_failed) } else { String::new() };
        recap.push(format!("{} ({} ok{failed})", p.suite.name, c.num_passed));
        total.num_filtered_out += c.num_filtered_out;
        total.num_passed += c.num_passed;
        total.num_failed += c.num_failed;
        total.num_ignored += c.num_ignored;
        total.num_measured += c.num_measured;
    }
    if recap.len() > 1 {
        println!("suites run one after another: {}", recap.join(", "));
    }
    total
}

/// Non-root under `CI=true` with a lab trial selected: fail now (exit 1), before any suite runs.
fn refuse_in_ci(args: &Arguments, planned: &[Planned]) {
    if std::env::var("CI").as_deref() != Ok("true") {
        return;
    }
    let needing: Vec<String> = planned
        .iter()
        .filter(|p| p.selected_root_trials(args) > 0)
        .map(|p| p.suite.file.display().to_string())
        .collect();
    if !needing.is_empty() {
        eprintln!(
            "FAIL (CI=true): the lab tests in {} need root (network namespaces); CI must run them as root, not skip them",
            needing.join(", ")
        );
        std::process::exit(1);
    }
}

/// A trial that tells [`phase`] its test name.
fn trial(name: String, f: fn() -> Result<(), Failed>) -> Trial {
    let name: &'static str = Box::leak(name.into_boxed_str());
    Trial::test(name, move || {
        phase::set_test(name);
        f()
    })
}

/// `tests/bin/../cluster.rs` (what `file!()` says in a suite its binary includes by `#[path]`)
/// as `tests/cluster.rs`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The running suite's shared lab: published by [`SharedLabUp::bring_up`], torn down and
/// unpublished when dropped, also while unwinding. The lab is leaked so trials can hold
/// `&'static Lab`; its own `Drop` never runs, this guard's does (once).
struct SharedLabUp;

impl SharedLabUp {
    fn bring_up(up: Box<dyn FnOnce() -> Lab>) -> SharedLabUp {
        let lab: &'static Lab = Box::leak(Box::new(up()));
        *SHARED_LAB.lock().unwrap_or_else(PoisonError::into_inner) = Some(lab);
        SharedLabUp
    }
}

impl Drop for SharedLabUp {
    fn drop(&mut self) {
        if let Some(lab) = SHARED_LAB.lock().unwrap_or_else(PoisonError::into_inner).take() {
            lab.down();
        }
    }
}
