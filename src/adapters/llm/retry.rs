//! The one retry policy of the paid providers ([`RetryPolicy`], over any failure that is
//! [`Retryable`]), and its LLM wrapper: [`RetryingLlm`] implements [`Llm`] over another `Llm`
//! whose clients make exactly one HTTP request per call (`adapters::speech` wraps its voices
//! in the same policy). It retries
//! transient failures with the shared [`Backoff`] (full jitter, cap) on the project clock,
//! honours a server's `Retry-After` / `retryDelay`, and keeps every call inside a time budget
//! (derived from the task timeout), so the task machinery never cuts a retry off midway.
//!
//! During an outage it also stops the retry storm: after a call has spent its attempts on
//! transient failures, the model's *outage guard* opens for a cooldown (a backoff of its own,
//! growing per failed call); calls during the cooldown fail at once without a request, and the
//! first call after it is a single probe. A success (or any non-transient answer) closes it.
//!
//! Worst case, for `A` attempts and `R` task-level attempts of a plan: the first task attempt
//! sends at most `A` requests, every later one at most 1 (a probe) or 0 (guard open), so a plan
//! costs at most `A + R − 1` requests (12 with the defaults 3 and 10, instead of 30).
//!
//! Empty answers and blocked prompts are outcomes, not failures: they pass through untouched
//! (silence is free). This module does no HTTP and never sees a key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use tracing::{debug, warn};

use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::time::BoxFuture;
use crate::ports::backoff::Backoff;
use crate::ports::clock::{self, SharedClock};
use crate::ports::llm::{Llm, LlmError};

/// Settings of [`RetryingLlm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    /// Requests per call, the first included (at least 1).
    pub max_attempts: u32,
    /// Delay between attempts.
    pub backoff: Backoff,
    /// The providers' limit on one request; a retry starts only if it can finish in budget.
    pub request_timeout: Duration,
    /// Longest one call may take, retries and waits included.
    pub budget: Duration,
    /// Cooldown of the outage guard, per consecutive failed call.
    pub cooldown: Backoff,
}

/// Default attempts per call.
pub(crate) const DEFAULT_ATTEMPTS: u32 = 3;
/// Default limit on one LLM request (real time).
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

impl RetryConfig {
    /// The defaults for a task timeout: 3 attempts, 2 s backoff capped at 30 s, a budget of
    /// the task timeout less a sixth (at most 30 s) kept for the rest of the task, requests
    /// limited to the budget, and a guard cooldown from 30 s to 10 min.
    pub fn within_task_timeout(task_timeout: Duration, max_attempts: u32) -> RetryConfig {
        let margin = (task_timeout / 6).min(Duration::from_secs(30));
        let budget = task_timeout
            .saturating_sub(margin)
            .max(Duration::from_secs(1));
        RetryConfig {
            max_attempts: max_attempts.max(1),
            backoff: Backoff::new(Duration::from_secs(2), Duration::from_secs(30)),
            request_timeout: DEFAULT_REQUEST_TIMEOUT.min(budget),
            budget,
            cooldown: Backoff::new(Duration::from_secs(30), Duration::from_secs(600)),
        }
    }

    /// Most requests one plan can cost during an outage, with `task_attempts` task-level tries.
    pub fn worst_case_requests(&self, task_attempts: u32) -> u32 {
        self.max_attempts
            .saturating_add(task_attempts.max(1).saturating_sub(1))
    }
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig::within_task_timeout(Duration::from_secs(180), DEFAULT_ATTEMPTS)
    }
}

/// A failure the retry policy can judge: whether another try may help, and the delay the
/// server asked for. LLM and speech errors implement it, so both follow one policy.
pub trait Retryable: std::fmt::Display + Sized {
    /// Worth another try.
    fn is_transient(&self) -> bool;
    /// The delay the server asked for before the next try, if it named one.
    fn retry_after(&self) -> Option<Duration>;
    /// The HTTP status, for the log.
    fn status(&self) -> Option<u16>;
    /// The failure of a call refused while the outage guard is open (`left` until it
    /// closes).
    fn guard_open(message: String, left: Duration) -> Self;
}

impl Retryable for LlmError {
    fn is_transient(&self) -> bool {
        LlmError::is_transient(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        LlmError::retry_after(self)
    }

    fn status(&self) -> Option<u16> {
        LlmError::status(self)
    }

    fn guard_open(message: String, left: Duration) -> LlmError {
        LlmError::Transient {
            status: None,
            message,
            retry_after: Some(left),
        }
    }
}

/// Per-model outage guard.
#[derive(Debug, Clone, Copy, Default)]
struct Guard {
    failed_calls: u32,
    open_until: Option<Timestamp>,
}

/// The one retry policy (see the module docs) over any call whose failures are
/// [`Retryable`]: attempts, backoff, the time budget and the outage guard per key (a model).
pub struct RetryPolicy {
    config: RetryConfig,
    clock: SharedClock,
    guards: Mutex<HashMap<String, Guard>>,
    /// What is called, for the log (`LLM`, `speech`).
    what: &'static str,
}

impl RetryPolicy {
    /// The policy of `config` on `clock`; `what` names the calls in the log.
    pub fn new(config: RetryConfig, clock: SharedClock, what: &'static str) -> RetryPolicy {
        RetryPolicy {
            config: RetryConfig {
                max_attempts: config.max_attempts.max(1),
                ..config
            },
            clock,
            guards: Mutex::new(HashMap::new()),
            what,
        }
    }

    pub fn config(&self) -> &RetryConfig {
        &self.config
    }

    fn guard(&self, key: &str) -> Guard {
        self.guards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    fn close_guard(&self, key: &str) {
        self.guards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    fn open_guard(&self, key: &str, at_least: Option<Duration>) -> Duration {
        let mut guards = self.guards.lock().unwrap_or_else(PoisonError::into_inner);
        let g = guards.entry(key.to_owned()).or_default();
        g.failed_calls = g.failed_calls.saturating_add(1);
        // The ceiling, not a jittered draw: how many probes an outage costs stays predictable.
        let cooldown = self
            .config
            .cooldown
            .ceiling(g.failed_calls)
            .max(at_least.unwrap_or_default());
        g.open_until = Some(clock::add(self.clock.now(), cooldown));
        cooldown
    }

    /// Runs `attempt` (one request each time it is called) for `key` under the policy.
    pub async fn run<T, E, F, Fut>(&self, key: &str, mut attempt: F) -> Result<T, E>
    where
        E: Retryable,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let what = self.what;
        let start = self.clock.now();
        let guard = self.guard(key);
        if let Some(until) = guard.open_until
            && until > start
        {
            let left = Duration::try_from(until.duration_since(start)).unwrap_or_default();
            debug!(key, left_ms = millis(left), "outage guard open: no request");
            return Err(E::guard_open(
                format!(
                    "the model {key} failed {} call(s) in a row; next try in {:.0} s",
                    guard.failed_calls,
                    left.as_secs_f64()
                ),
                left,
            ));
        }
        // After an outage the first call is a single probe.
        let attempts = if guard.failed_calls > 0 {
            1
        } else {
            self.config.max_attempts
        };
        let deadline = clock::add(start, self.config.budget);
        let mut n = 0u32;
        loop {
            n += 1;
            let error = match attempt().await {
                Ok(out) => {
                    self.close_guard(key);
                    return Ok(out);
                }
                Err(e) if !e.is_transient() => {
                    self.close_guard(key);
                    return Err(e);
                }
                Err(e) => e,
            };
            let asked = error.retry_after();
            let delay = self.config.backoff.delay(n).max(asked.unwrap_or_default());
            let next_end = clock::add(
                clock::add(self.clock.now(), delay),
                self.config.request_timeout,
            );
            let why_stop = if n >= attempts {
                Some("attempts spent")
            } else if asked.is_some_and(|a| a > self.config.backoff.cap) {
                Some("the server asked for a delay beyond the cap")
            } else if next_end > deadline {
                Some("another attempt would not fit the time budget")
            } else {
                None
            };
            if let Some(why) = why_stop {
                let cooldown = self.open_guard(key, asked);
                warn!(
                    model = key,
                    attempt = n,
                    status = error.status(),
                    cooldown_ms = millis(cooldown),
                    "{what} call failed ({why}); outage guard open"
                );
                return Err(error);
            }
            warn!(
                model = key,
                attempt = n,
                max_attempts = attempts,
                status = error.status(),
                delay_ms = millis(delay),
                "{what} request failed; retrying"
            );
            debug!(model = key, error = %error, "{what} failure detail");
            Backoff::wait(self.clock.as_ref(), delay).await;
        }
    }
}

/// Retries transient failures of an inner provider (see the module docs).
pub struct RetryingLlm {
    inner: Arc<dyn Llm>,
    policy: RetryPolicy,
}

impl RetryingLlm {
    pub fn new(inner: Arc<dyn Llm>, config: RetryConfig, clock: SharedClock) -> RetryingLlm {
        RetryingLlm {
            inner,
            policy: RetryPolicy::new(config, clock, "LLM"),
        }
    }

    pub fn config(&self) -> &RetryConfig {
        self.policy.config()
    }
}

impl Llm for RetryingLlm {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        let model = req.model.as_str();
        Box::pin(self.policy.run(model, || self.inner.generate(req)))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fit_the_task_timeout_and_bound_the_worst_case() {
        let c = RetryConfig::default();
        assert_eq!(c.budget, Duration::from_secs(150));
        assert!(c.request_timeout <= c.budget);
        assert_eq!(c.worst_case_requests(10), 12);
        let short = RetryConfig::within_task_timeout(Duration::from_secs(60), 3);
        assert_eq!(short.budget, Duration::from_secs(50));
        assert_eq!(short.request_timeout, Duration::from_secs(50));
    }
}
