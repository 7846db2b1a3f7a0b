//! One runner for the lab test mains (`harness = false`): each main lists its trials, and this
//! module owns what they share — the root/CI skip policy, the suite's shared lab (brought up only
//! when a lab trial will run, always torn down), and the test name that [`super::phase`] reports.
//!
//! The policy: the lab needs root (network/mount/pid namespaces). Without root, the trials that
//! need the lab are ignored with a loud message and the run can still pass; under `CI=true` a
//! non-root run fails at once with exit 1 instead, so CI can never pass without the lab tests.
//! `--list` only lists, whoever runs it.

use std::sync::OnceLock;

use libtest_mimic::{Arguments, Failed, Trial};

use super::{is_root, phase, Lab};

/// A test function; its name is given next to it.
pub type Test = (&'static str, fn() -> Result<(), Failed>);

static SHARED_LAB: OnceLock<Lab> = OnceLock::new();

/// The suite's shared lab (see [`Suite::shared_lab`]); only lab trials may call this.
pub fn shared_lab() -> &'static Lab {
    SHARED_LAB.get().expect("the suite's shared lab is up")
}

/// One test main: `Suite::new(file!()).without_root(&[..]).needing_root(&[..]).run()`.
pub struct Suite {
    name: &'static str,
    needing_root: Vec<Test>,
    without_root: Vec<Test>,
    shared_lab: Option<Box<dyn FnOnce() -> Lab>>,
}

impl Suite {
    /// `name` names the suite in the skip and CI messages (the main's `file!()`).
    pub fn new(name: &'static str) -> Suite {
        Suite { name, needing_root: Vec::new(), without_root: Vec::new(), shared_lab: None }
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

    /// A lab shared by the root trials (read through [`shared_lab`]): brought up by `up` before
    /// the first trial if any root trial is selected, and torn down after the last one, also
    /// when trials failed or panicked.
    pub fn shared_lab(mut self, up: impl FnOnce() -> Lab + 'static) -> Suite {
        self.shared_lab = Some(Box::new(up));
        self
    }

    /// Parse the command line, apply the skip policy, run the trials and exit.
    pub fn run(self) -> ! {
        let args = Arguments::from_args();
        let root = is_root();
        if !root && !args.list {
            refuse_or_warn(self.name, self.needing_root.len());
        }
        let mut trials: Vec<Trial> = self.without_root.iter().map(|&t| trial(t)).collect();
        let lab_trials = self.needing_root.iter().map(|&t| trial(t).with_ignored_flag(!root));
        let first_lab_trial = trials.len();
        trials.extend(lab_trials);
        let runs_a_lab_trial =
            trials[first_lab_trial..].iter().any(|t| !args.is_filtered_out(t) && !args.is_ignored(t));
        let teardown = SharedLabTeardown;
        if let Some(up) = self.shared_lab {
            if root && !args.list && runs_a_lab_trial {
                let _ = SHARED_LAB.set(up());
            }
        }
        let conclusion = libtest_mimic::run(&args, trials);
        // `exit` skips destructors: tear the shared lab down first.
        drop(teardown);
        conclusion.exit()
    }
}

/// Non-root: under `CI=true` fail now (exit 1); otherwise say loudly what is skipped.
fn refuse_or_warn(suite: &str, skipped: usize) {
    if std::env::var("CI").as_deref() == Ok("true") {
        eprintln!(
            "FAIL (CI=true): the lab tests in {suite} need root (network namespaces); CI must run them as root, not skip them"
        );
        std::process::exit(1);
    }
    eprintln!(
        "\n!!!!!!!! SKIPPING {skipped} LAB TESTS in {suite}: they need root (run `sudo bash scripts/test.sh`) !!!!!!!!\n"
    );
}

/// A trial that tells [`phase`] its test name.
fn trial((name, f): Test) -> Trial {
    Trial::test(name, move || {
        phase::set_test(name);
        f()
    })
}

/// Tears the shared lab down when dropped (a static is never dropped by itself).
struct SharedLabTeardown;

impl Drop for SharedLabTeardown {
    fn drop(&mut self) {
        if let Some(lab) = SHARED_LAB.get() {
            lab.down();
        }
    }
}
