//! Exponential backoff with full jitter, for reconnecting to a VM that is still booting.
//! Pure: the random draw is a parameter so the schedule is testable.

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Duration::from_millis(250), cap: Duration::from_secs(5) }
    }
}

impl Backoff {
    /// Delay before retry number `attempt` (1-based). `unit` is a uniform draw in [0, 1).
    /// The delay lies in [ceiling/2, ceiling) where ceiling = min(cap, base * 2^(attempt-1)):
    /// half fixed so retries never hammer, half jitter so 200 VMs do not retry in lockstep.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(20);
        let ceiling = self.base.saturating_mul(1u32 << exp).min(self.cap);
        let unit = unit.clamp(0.0, 0.999_999);
        ceiling.mul_f64(0.5 + unit / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_and_is_capped() {
        let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(2) };
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay(2, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 0.0), Duration::from_millis(200));
        assert_eq!(b.delay(10, 0.0), Duration::from_secs(1));
        assert!(b.delay(10, 0.99) < Duration::from_secs(2));
        assert!(b.delay(40, 0.5) <= Duration::from_secs(2));
    }

    #[test]
    fn jitter_spreads_within_the_band() {
        let b = Backoff::default();
        let lo = b.delay(3, 0.0);
        let hi = b.delay(3, 0.999);
        assert!(lo < hi);
        assert!(hi < Duration::from_secs(1));
        assert!(lo >= Duration::from_millis(500));
    }
}
