//! Validated runtime settings. The CLI parses raw values (flags and environment variables);
//! [`RuntimeConfig::validate`] is the one place they become the typed settings the runtime
//! uses, so no other module re-checks a number. Pure: no I/O.

use std::time::Duration;

use crate::core::graph::RetryPolicy;

/// Settings of the scheduler and task handlers.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    /// Quiet time after the newest inbound message before planning starts.
    pub debounce: Duration,
    /// Tasks running at once across all conversations.
    pub max_in_flight: usize,
    /// Attempts and spacing of failed tasks.
    pub retry: RetryPolicy,
    /// Longest a single task may run.
    pub task_timeout: Duration,
    /// Messages of history fetched for planning.
    pub history_limit: usize,
    /// How long shutdown waits for tasks in flight before abandoning them (they resume on
    /// the next start).
    pub shutdown_grace: Duration,
    /// Human pacing of outbound messages, unless a persona sets its own.
    pub pacing: Pacing,
    /// Cap on one scope of long-term memory (a person's facts, a chat's notes) as the prompt
    /// shows it, in bytes.
    pub memory_scope_bytes: usize,
    /// The daemon's daily LLM cap, all personas together (`--daily-budget`).
    pub daily_budget: Option<crate::core::budget::DailyCap>,
    /// Chats besides Saved Messages where the owner commands (`--admin-chat`). Drafts and
    /// answers go there only when a persona's `# Admin Chat` names the chat; what the daemon
    /// sends there is the owner's side, as in Saved Messages: the owner's own writing does not
    /// cancel it, and neither sleep nor the account breaker holds it.
    pub admin_chats: Vec<crate::core::model::ChatId>,
    /// Draft mode: the least time between two draft posts for one chat (a newer message's
    /// draft waits this long after the one it replaces).
    pub draft_gap: Duration,
}

/// How fast a persona "types": a pause before its first message of a plan, then a typing
/// indicator for a time proportional to each message's length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    /// Characters per second.
    pub chars_per_sec: f64,
    /// Seconds before the first message of a plan (reading, thinking).
    pub start_delay_secs: f64,
    /// Longest typing pause for one message.
    pub max_typing_secs: f64,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            chars_per_sec: 10.0,
            start_delay_secs: 2.0,
            max_typing_secs: 20.0,
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            debounce: Duration::from_secs(2),
            max_in_flight: 16,
            retry: RetryPolicy {
                max_attempts: 10,
                interval: Duration::from_secs(10),
            },
            task_timeout: Duration::from_secs(180),
            history_limit: 500,
            shutdown_grace: Duration::from_secs(10),
            pacing: Pacing::default(),
            memory_scope_bytes: crate::core::facts::DEFAULT_SCOPE_BYTES,
            daily_budget: None,
            admin_chats: Vec::new(),
            draft_gap: crate::core::approval::DRAFT_GAP,
        }
    }
}

/// Raw runtime settings as the CLI reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRuntimeConfig {
    pub debounce_ms: u64,
    pub max_in_flight: usize,
    pub retry_attempts: u32,
    pub retry_interval_secs: f64,
    pub task_timeout_secs: f64,
    pub history_limit: usize,
    pub typing_speed: f64,
    pub start_typing_delay_secs: f64,
    pub memory_scope_bytes: usize,
    /// `--daily-budget` as written (`200k tokens`, `$5`).
    pub daily_budget: Option<String>,
}

/// A setting out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {name}: {reason}")]
pub struct ConfigError {
    pub name: &'static str,
    pub reason: String,
}

fn positive_secs(name: &'static str, v: f64) -> Result<Duration, ConfigError> {
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(ConfigError {
            name,
            reason: format!("{v} is not a positive number of seconds"),
        })
    }
}

/// The retry pause is saved as a `wait` task, so it must fit what a loaded graph may hold
/// ([`crate::core::graph::MAX_WAIT_SECS`]); longer would get the graph quarantined at restart.
fn retry_interval(v: f64) -> Result<Duration, ConfigError> {
    let d = positive_secs("retry-interval", v)?;
    if v > crate::core::graph::MAX_WAIT_SECS {
        return Err(ConfigError {
            name: "retry-interval",
            reason: format!(
                "{v} seconds is longer than the longest wait a task graph may hold ({} s)",
                crate::core::graph::MAX_WAIT_SECS
            ),
        });
    }
    Ok(d)
}

impl RawRuntimeConfig {
    /// The one validation step from raw values to [`RuntimeConfig`].
    pub(crate) fn validate(&self) -> Result<RuntimeConfig, ConfigError> {
        if self.max_in_flight == 0 {
            return Err(ConfigError {
                name: "max-in-flight",
                reason: "must be at least 1".into(),
            });
        }
        if self.retry_attempts == 0 {
            return Err(ConfigError {
                name: "retry-attempts",
                reason: "must be at least 1".into(),
            });
        }
        if self.history_limit == 0 {
            return Err(ConfigError {
                name: "history-limit",
                reason: "must be at least 1".into(),
            });
        }
        if !(self.typing_speed.is_finite() && self.typing_speed > 0.0) {
            return Err(ConfigError {
                name: "typing-speed",
                reason: format!(
                    "{} is not a positive number of characters per second",
                    self.typing_speed
                ),
            });
        }
        let max_wait = crate::core::graph::MAX_WAIT_SECS;
        if !(self.start_typing_delay_secs.is_finite()
            && (0.0..=max_wait).contains(&self.start_typing_delay_secs))
        {
            return Err(ConfigError {
                name: "start-typing-delay",
                reason: format!(
                    "{} is not a number of seconds from 0 to {max_wait} (a day)",
                    self.start_typing_delay_secs
                ),
            });
        }
        if !(256..=65_536).contains(&self.memory_scope_bytes) {
            return Err(ConfigError {
                name: "memory-scope-bytes",
                reason: format!(
                    "{} is not a number of bytes from 256 to 65536",
                    self.memory_scope_bytes
                ),
            });
        }
        let daily_budget = match self.daily_budget.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(v) => Some(v.parse().map_err(|e: crate::core::Invalid| ConfigError {
                name: "daily-budget",
                reason: e.0,
            })?),
        };
        Ok(RuntimeConfig {
            daily_budget,
            memory_scope_bytes: self.memory_scope_bytes,
            pacing: Pacing {
                chars_per_sec: self.typing_speed,
                start_delay_secs: self.start_typing_delay_secs,
                ..Pacing::default()
            },
            debounce: Duration::from_millis(self.debounce_ms),
            max_in_flight: self.max_in_flight,
            retry: RetryPolicy {
                max_attempts: self.retry_attempts,
                interval: retry_interval(self.retry_interval_secs)?,
            },
            task_timeout: positive_secs("task-timeout", self.task_timeout_secs)?,
            history_limit: self.history_limit,
            ..RuntimeConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> RawRuntimeConfig {
        RawRuntimeConfig {
            debounce_ms: 2000,
            max_in_flight: 16,
            retry_attempts: 10,
            retry_interval_secs: 10.0,
            task_timeout_secs: 180.0,
            history_limit: 500,
            typing_speed: 10.0,
            start_typing_delay_secs: 2.0,
            memory_scope_bytes: 3072,
            daily_budget: None,
        }
    }

    #[test]
    fn defaults_validate_to_the_documented_values() {
        assert_eq!(raw().validate(), Ok(RuntimeConfig::default()));
    }

    #[test]
    fn out_of_range_values_name_the_setting() {
        let mut r = raw();
        r.retry_interval_secs = -1.0;
        let err = r.validate().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("invalid setting retry-interval: -1 is not a positive number of seconds")
        );
        let mut r = raw();
        r.max_in_flight = 0;
        assert!(r.validate().is_err());
        // A retry pause a saved graph could not hold again is refused up front.
        let mut r = raw();
        r.retry_interval_secs = 2.0 * 86_400.0;
        assert!(r.validate().is_err());
        // So is a start typing delay (one wait task) longer than a saved graph may hold.
        let mut r = raw();
        r.start_typing_delay_secs = 86_401.0;
        assert!(r.validate().is_err());
    }
}
