//! The spend port: where the LLM layer's meter reports the day's spend after each request
//! (the agent's own, and every agent's together), and where a paid call outside the planner
//! (speech) asks whether a reached cap holds its agent. The runtime's handle implements both
//! (it holds planning at a spending cap, and answers from the same marks); the meter is given
//! its sink when it is built.

use crate::core::budget::Spend;

/// Hears the day's spend after each request of `agent`.
pub trait SpendSink: Send + Sync {
    /// `day` is the UTC day the spend is of; `own` is the agent's, `all` every agent's.
    fn spent(&self, agent: &str, day: jiff::civil::Date, own: Spend, all: Spend);
}

/// Whether a daily cap reached today (and not lifted by the owner) holds `agent`: the same
/// decision that holds its planning.
pub trait CapHold: Send + Sync {
    /// True when a cap holds `agent` at `now`.
    fn holds(&self, agent: &str, now: jiff::Timestamp) -> bool;
}
