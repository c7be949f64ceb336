//! The spend port: where the LLM layer's meter reports the day's spend after each request
//! (the agent's own, and every agent's together). The runtime's handle implements it (it
//! holds planning at a spending cap); the meter is given its sink when it is built.

use crate::core::budget::Spend;

/// Hears the day's spend after each request of `agent`.
pub trait SpendSink: Send + Sync {
    /// `day` is the UTC day the spend is of; `own` is the agent's, `all` every agent's.
    fn spent(&self, agent: &str, day: jiff::civil::Date, own: Spend, all: Spend);
}
