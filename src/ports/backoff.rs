//! The one backoff formula of the daemon: exponential growth from a base, a cap, and full
//! jitter (the delay before retry `n` is uniform in `[0, min(cap, base · 2^(n-1))]`), so
//! clients that failed together do not come back together. Waiting goes through the project
//! clock ([`Backoff::wait`] uses [`clock::pause`]), never through tokio's timer, so tests run
//! on virtual time. Pure apart from the random draw; it knows nothing about what is retried.
//! Used by the LLM retry wrapper (`llm::retry`), the media pipeline's per-item schedule, and
//! meant for Telegram reconnects.

use std::time::Duration;

use crate::ports::clock::{self, Clock};

/// Exponential backoff with a cap and full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Ceiling of the first retry's delay.
    pub base: Duration,
    /// No delay is ever longer than this.
    pub cap: Duration,
}

impl Backoff {
    /// A backoff starting at `base`, doubling per retry, never above `cap`.
    pub const fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff { base, cap }
    }

    /// The longest delay before retry `retry` (1 for the first retry): `base · 2^(retry-1)`,
    /// capped. Retry 0 is treated as 1.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << exp).min(self.cap)
    }

    /// The delay before retry `retry` for a draw `unit` in `[0, 1]` (clamped): `unit` times
    /// the ceiling. [`Backoff::delay`] draws `unit` at random; tests pass it in.
    pub fn jittered(&self, retry: u32, unit: f64) -> Duration {
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.ceiling(retry).mul_f64(unit)
    }

    /// A random delay before retry `retry`, uniform in `[0, ceiling(retry)]`.
    pub fn delay(&self, retry: u32) -> Duration {
        self.jittered(retry, fastrand::f64())
    }

    #[cfg(test)]
    /// Sum of the ceilings of retries `1..=retries`: the most time `retries` backoff waits
    /// can take.
    pub fn worst_case_total(&self, retries: u32) -> Duration {
        (1..=retries).fold(Duration::ZERO, |sum, n| sum.saturating_add(self.ceiling(n)))
    }

    /// Waits `delay` on `clock` (giving up a running task's clock hold meanwhile).
    pub async fn wait(clock: &dyn Clock, delay: Duration) {
        clock::pause(clock, delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_and_stop_at_the_cap() {
        let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(30));
        let got: Vec<u64> = (0..=6).map(|n| b.ceiling(n).as_secs()).collect();
        assert_eq!(got, [2, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(30));
        assert_eq!(b.worst_case_total(3), Duration::from_secs(14));
    }

    #[test]
    fn full_jitter_spans_zero_to_the_ceiling() {
        let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(30));
        assert_eq!(b.jittered(3, 0.0), Duration::ZERO);
        assert_eq!(b.jittered(3, 1.0), Duration::from_secs(8));
        assert_eq!(b.jittered(3, 0.5), Duration::from_secs(4));
        assert_eq!(b.jittered(3, f64::NAN), Duration::ZERO);
        assert_eq!(b.jittered(3, 7.0), Duration::from_secs(8));
        let draws: Vec<Duration> = (0..500).map(|_| b.delay(4)).collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_secs(16)));
        // Full jitter really spreads: both halves of the range are hit.
        assert!(draws.iter().any(|d| *d < Duration::from_secs(8)));
        assert!(draws.iter().any(|d| *d > Duration::from_secs(8)));
    }
}
