//! Named phases for long tests: a failure says which phase of which test broke.
//!
//! `phase("scale out by 2 workers", || scale_out(&c))?` runs the closure; an `Err` it returns or
//! a panic inside it (an assert, `Run::ok`, an `unwrap` in a helper) becomes the error
//! `phase 'scale out by 2 workers' of <test>: <message>`, and the test stops there. [`phases`]
//! runs a list of them over one context struct, through which values flow from phase to phase.
//! The test name comes from the harness (see `harness::Suite`), which sets it for every trial.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use libtest_mimic::Failed;

thread_local! {
    /// The trial running on this thread.
    static TEST: RefCell<Option<&'static str>> = const { RefCell::new(None) };
    /// The phase running on this thread, for the panic hook.
    static PHASE: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Where the last panic on this thread happened (the payload does not say).
    static PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Called by the harness before each trial.
pub fn set_test(name: &'static str) {
    TEST.with(|t| *t.borrow_mut() = Some(name));
}

fn label(name: &str) -> String {
    let test = TEST.with(|t| *t.borrow()).unwrap_or("<test outside the harness>");
    format!("phase '{name}' of {test}")
}

/// Run one named phase of the current test; its failure or panic is reported under its name.
pub fn phase<T>(name: &str, f: impl FnOnce() -> Result<T, Failed>) -> Result<T, Failed> {
    install_panic_hook();
    let label = label(name);
    let outer = PHASE.with(|p| p.borrow_mut().replace(label.clone()));
    let result = catch_unwind(AssertUnwindSafe(f));
    PHASE.with(|p| *p.borrow_mut() = outer);
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{label}: {}", e.message().unwrap_or("failed")).into()),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            let at = PANIC_AT.with(|a| a.borrow_mut().take()).unwrap_or_else(|| "an unknown place".into());
            Err(format!("{label}: panicked at {at}: {msg}").into())
        }
    }
}

/// One named step of a long test, working on the context the steps share.
pub type Step<T> = (&'static str, fn(&mut T) -> Result<(), Failed>);

/// Run `list` in order as named [`phase`]s over one context; stop at the first failure.
pub fn phases<T>(ctx: &mut T, list: &[Step<T>]) -> Result<(), Failed> {
    for (name, f) in list {
        phase(name, || f(ctx))?;
    }
    Ok(())
}

/// As [`phases`], and each phase's wall time on stderr (`phase 'NAME' of TEST: 3.2 s`): for the long
/// suites whose cost is watched against CI's budget (the `real` binary).
pub fn timed_phases<T>(ctx: &mut T, list: &[Step<T>]) -> Result<(), Failed> {
    for (name, f) in list {
        let t0 = std::time::Instant::now();
        let r = phase(name, || f(ctx));
        eprintln!("{}: {:.1} s", label(name), t0.elapsed().as_secs_f64());
        r?;
    }
    Ok(())
}

/// Keep the default panic output (it goes to stderr at once, interleaved with other trials), name
/// the phase in front of it, and remember the location for [`phase`]'s error message.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANIC_AT.with(|a| *a.borrow_mut() = info.location().map(|l| l.to_string()));
            if let Some(label) = PHASE.with(|p| p.borrow().clone()) {
                eprintln!("{label}: panicked:");
            }
            default(info);
        }));
    });
}
