//! Rollout safety for `sites apply`, as Ansible users know it: canary batches (`--batch
//! 1,10%,100%`, Ansible's `serial`) and a stop rule (`--max-fail N|P%`, Ansible's
//! `max_fail_percentage`; `--fail-fast` is `--max-fail 0`). Pure: the batch planner turns the
//! number of sites into consecutive position ranges, the stop rule says from counts alone
//! whether the rollout must stop, and `apply.rs` does the running.

use std::fmt;
use std::ops::Range;

/// One batch size: a count of sites, or a percentage of the sites the run has to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Count(usize),
    Percent(u32),
}

impl Size {
    /// Percentages are of `total`, rounded down but never below one site (Ansible's rule), so
    /// `10%` of 5 sites is a batch of 1, not an empty batch that would loop forever.
    fn of(self, total: usize) -> usize {
        match self {
            Size::Count(n) => n,
            Size::Percent(p) => (total * p as usize / 100).max(1),
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Count(n) => write!(f, "{n}"),
            Size::Percent(p) => write!(f, "{p}%"),
        }
    }
}

fn parse_size(s: &str, flag: &str) -> Result<Size, String> {
    let s = s.trim();
    let bad = || format!("{flag}: {s:?} is neither a count (3) nor a percentage (10%)");
    match s.strip_suffix('%') {
        Some(p) => {
            let p: u32 = p.parse().map_err(|_| bad())?;
            if p > 100 {
                return Err(format!("{flag}: {s} is more than 100%"));
            }
            Ok(Size::Percent(p))
        }
        None => s.parse().map(Size::Count).map_err(|_| bad()),
    }
}

/// `--batch 1,10%,100%`: each size at least one site (a batch of none would never finish the
/// rollout).
/// The batch sizes of `--batch`, in order. A type of its own: clap reads a field typed
/// `Option<Vec<T>>` as a flag given several times, each value a `T`, and would panic when the
/// parser hands it the whole list.
pub type Batches = Vec<Size>;

pub fn parse_batches(s: &str) -> Result<Batches, String> {
    let sizes = s.split(',').map(|x| parse_size(x, "--batch")).collect::<Result<Vec<_>, _>>()?;
    if let Some(z) = sizes.iter().find(|z| matches!(z, Size::Count(0) | Size::Percent(0))) {
        return Err(format!("--batch: a batch of {z} sites never ends the rollout; give at least 1"));
    }
    Ok(sizes)
}

/// The batches over `total` sites, as position ranges in run order: each size in turn, the last
/// one repeated until every site has a batch (Ansible's `serial` list). No sizes: one batch.
pub fn plan(sizes: &[Size], total: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < total {
        let size = match sizes.get(i).or(sizes.last()) {
            Some(z) => z.of(total).max(1),
            None => total,
        };
        let end = (start + size).min(total);
        out.push(start..end);
        start = end;
        i += 1;
    }
    out
}

/// `--max-fail N|P%`: how many failed sites the rollout tolerates before it starts no more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxFail(pub Size);

impl MaxFail {
    /// `--fail-fast`: the first failure stops the rollout.
    pub const FAIL_FAST: MaxFail = MaxFail(Size::Count(0));

    /// Whether `failed` failures among `total` sites to run are more than tolerated. A
    /// percentage is of the sites the run has to run (skipped ones are not counted), and, as
    /// Ansible's `max_fail_percentage`, only going over it stops (`10%` of 10 tolerates one).
    pub fn exceeded(self, failed: usize, total: usize) -> bool {
        match self.0 {
            Size::Count(n) => failed > n,
            Size::Percent(p) => failed * 100 > total * p as usize,
        }
    }
}

impl fmt::Display for MaxFail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

pub fn parse_max_fail(s: &str) -> Result<MaxFail, String> {
    parse_size(s, "--max-fail").map(MaxFail)
}

/// Why sites were not started: the sentence every not-started site's result and status carry.
pub fn stop_reason(rule: MaxFail, failed: usize, total: usize) -> String {
    let limit = if rule == MaxFail::FAIL_FAST { "--fail-fast".to_string() } else { format!("--max-fail {rule}") };
    format!("not started: the rollout stopped after {failed} of {total} sites failed ({limit})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_batches_take_each_size_in_turn_and_repeat_the_last() {
        let b = parse_batches("1,10%,100%").unwrap();
        assert_eq!(b, [Size::Count(1), Size::Percent(10), Size::Percent(100)]);
        assert_eq!(plan(&b, 50), [0..1, 1..6, 6..50]);
        // The last size repeats; percentages are of the whole run, at least one site.
        assert_eq!(plan(&parse_batches("1,25%").unwrap(), 10), [0..1, 1..3, 3..5, 5..7, 7..9, 9..10]);
        assert_eq!(plan(&parse_batches("10%").unwrap(), 5), [0..1, 1..2, 2..3, 3..4, 4..5]);
        assert_eq!(plan(&parse_batches("2, 3").unwrap(), 7), [0..2, 2..5, 5..7]);
        // Sizes past the sites are cut; no sizes is one batch; no sites is no batch.
        assert_eq!(plan(&parse_batches("100").unwrap(), 3), vec![0..3_usize]);
        assert_eq!(plan(&[], 4), vec![0..4_usize]);
        assert!(plan(&b, 0).is_empty());
    }

    #[test]
    fn a_batch_spec_that_could_never_finish_or_is_not_a_size_is_refused() {
        for bad in ["0", "1,0%", "x", "1,,2", "101%", "-1", "5%%"] {
            let e = parse_batches(bad).unwrap_err();
            assert!(e.starts_with("--batch"), "{bad}: {e}");
        }
        assert!(parse_max_fail("abc").unwrap_err().starts_with("--max-fail"));
        assert!(parse_max_fail("150%").is_err());
    }

    #[test]
    fn the_stop_rule_stops_only_past_the_tolerated_failures() {
        let fast = MaxFail::FAIL_FAST;
        assert!(!fast.exceeded(0, 10) && fast.exceeded(1, 10));
        let two = parse_max_fail("2").unwrap();
        assert!(!two.exceeded(2, 10) && two.exceeded(3, 10));
        // Ansible's max_fail_percentage: going over stops, reaching it does not.
        let ten = parse_max_fail("10%").unwrap();
        assert!(!ten.exceeded(1, 10) && ten.exceeded(2, 10));
        assert!(ten.exceeded(1, 5), "1 of 5 is 20%");
        assert!(!parse_max_fail("0%").unwrap().exceeded(0, 3) && parse_max_fail("0%").unwrap().exceeded(1, 3));
        assert!(!parse_max_fail("100%").unwrap().exceeded(3, 3));
    }

    #[test]
    fn the_stop_reason_names_the_counts_and_the_flag() {
        assert_eq!(
            stop_reason(MaxFail::FAIL_FAST, 1, 4),
            "not started: the rollout stopped after 1 of 4 sites failed (--fail-fast)"
        );
        assert!(stop_reason(parse_max_fail("10%").unwrap(), 3, 20).ends_with("(--max-fail 10%)"));
    }
}
