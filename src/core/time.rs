//! Time arithmetic shared by every layer: adding durations to timestamps without overflow,
//! reading fractional seconds, and the boxed-future alias of the object-safe async traits.
//! Pure: it never reads a clock (the `ports::clock` port does); everything may call it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use jiff::Timestamp;

/// A boxed, sendable future, the return type of the object-safe async methods in this crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Adds a duration to a timestamp, saturating at the representable maximum.
pub fn add(t: Timestamp, d: Duration) -> Timestamp {
    let span = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    t.checked_add(span).unwrap_or(Timestamp::MAX)
}

/// Seconds (possibly fractional, never negative) as a [`Duration`]; garbage becomes zero.
pub(crate) fn secs_f64(secs: f64) -> Duration {
    if secs.is_finite() && secs > 0.0 {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    } else {
        Duration::ZERO
    }
}

/// A span written as `90s`, `30m`, `2h`, `1d`, or plain seconds, in seconds (more than 0).
pub fn parse_span(s: &str) -> Option<u64> {
    let s = s.trim().to_lowercase();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s.as_str(), "s"),
    };
    let n: u64 = num.parse().ok()?;
    let mult = match unit.trim() {
        "s" | "sec" | "secs" => 1,
        "m" | "min" | "mins" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        _ => return None,
    };
    n.checked_mul(mult).filter(|v| *v > 0)
}
