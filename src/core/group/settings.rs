//! A persona's group behaviour as validated settings: the trigger mode, the classifier's
//! thresholds and model, nicknames, bot opt-in and the share-of-voice caps. Pure data with
//! defaults and one parser per heading value; `persona` calls the parsers (and reports their
//! errors with file and line), the decision pipeline reads the result. No I/O here.

use crate::core::Invalid;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How readily the persona speaks in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerMode {
    /// Only an explicit address (reply to us, mention, name) starts a plan.
    Strict,
    /// Also what the addressing classifier judges addressed to us.
    #[default]
    Smart,
    /// Also an interjection the classifier wants to make, within the share-of-voice caps.
    Talkative,
}

impl TriggerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerMode::Strict => "strict",
            TriggerMode::Smart => "smart",
            TriggerMode::Talkative => "talkative",
        }
    }
}

impl fmt::Display for TriggerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TriggerMode {
    type Err = Invalid;

    fn from_str(s: &str) -> Result<TriggerMode, Invalid> {
        match s.trim().to_ascii_lowercase().as_str() {
            "strict" => Ok(TriggerMode::Strict),
            "smart" => Ok(TriggerMode::Smart),
            "talkative" => Ok(TriggerMode::Talkative),
            _ => Err(Invalid::from(format!(
                "unknown group trigger mode `{}`: expected `strict`, `smart` or `talkative`",
                s.trim()
            ))),
        }
    }
}

/// The classifier model used when neither the persona nor the command line names one.
pub(crate) const DEFAULT_CLASSIFIER_MODEL: &str = "gemini-flash-lite-latest";

/// Everything the group pipeline needs from a persona. [`Default`] gives the documented
/// defaults (docs/groups.md).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSettings {
    /// `# Group Trigger Mode` (default `smart`); a per-chat override in the agent state wins.
    pub mode: TriggerMode,
    /// `# Group Confidence Threshold` (0..=1, default 0.6): smart mode's bar for `addressed`.
    pub confidence_threshold: f64,
    /// `# Group Interject Threshold` (0..=1, default 0.6): talkative mode's bar for `interject`.
    pub interject_threshold: f64,
    /// `# Agent Nicknames`: other names that address the persona (one per line).
    pub nicknames: Vec<String>,
    /// `# Agent Description`: one line for the classifier (default: the instructions' first line).
    pub description: Option<String>,
    /// `# Group Reply To Bots`: bots' messages may trigger (default: history only).
    pub reply_to_bots: bool,
    /// `# Group Max Share` in percent (default 25): our share of the last
    /// [`GroupSettings::share_window`] messages.
    pub max_share_percent: f64,
    /// Messages the share is measured over (40).
    pub share_window: usize,
    /// `# Group Cooldown` in seconds (default 60) between two of our plans in one group.
    pub cooldown: Duration,
    /// `# Group Max Plans Per Hour` (default 20) per group.
    pub max_plans_per_hour: u32,
    /// `# Group Classifier Model` (default: the command's setting, else
    /// [`DEFAULT_CLASSIFIER_MODEL`]).
    pub classifier_model: Option<String>,
    /// Exchanges with another persona of this daemon allowed per [`GroupSettings::loop_window`] (3).
    pub loop_guard_exchanges: usize,
    /// The loop guard's window (10 minutes).
    pub loop_window: Duration,
    /// `# Language`: the languages whose request words the prefilter looks for (codes or
    /// names of `group::requests`' tables); empty: every language written in the message's
    /// script.
    pub languages: Vec<String>,
}

impl Default for GroupSettings {
    fn default() -> GroupSettings {
        GroupSettings {
            mode: TriggerMode::Smart,
            confidence_threshold: 0.6,
            interject_threshold: 0.6,
            nicknames: Vec::new(),
            description: None,
            reply_to_bots: false,
            max_share_percent: 25.0,
            share_window: 40,
            cooldown: Duration::from_secs(60),
            max_plans_per_hour: 20,
            classifier_model: None,
            loop_guard_exchanges: 3,
            loop_window: Duration::from_secs(600),
            languages: Vec::new(),
        }
    }
}

/// A threshold between 0 and 1.
pub(crate) fn parse_threshold(value: &str) -> Result<f64, Invalid> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && (0.0..=1.0).contains(n))
        .ok_or_else(|| {
            Invalid::from(format!(
                "invalid threshold `{}`: expected a number from 0 to 1, such as `0.6`",
                value.trim()
            ))
        })
}

/// A percentage from 0 to 100 (a trailing `%` is allowed).
pub(crate) fn parse_percent(value: &str) -> Result<f64, Invalid> {
    let v = value.trim();
    v.strip_suffix('%')
        .unwrap_or(v)
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && (0.0..=100.0).contains(n))
        .ok_or_else(|| {
            Invalid::from(format!(
                "invalid percentage `{v}`: expected a number from 0 to 100, such as `25`"
            ))
        })
}

/// A number of seconds, 0 or more.
pub(crate) fn parse_seconds(value: &str) -> Result<Duration, Invalid> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0 && *n <= 86_400.0 * 7.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            Invalid::from(format!(
                "invalid number of seconds `{}`: expected 0 or more, such as `60`",
                value.trim()
            ))
        })
}

/// A whole count, 0 or more.
pub(crate) fn parse_count(value: &str) -> Result<u32, Invalid> {
    value.trim().parse::<u32>().map_err(|_| {
        Invalid::from(format!(
            "invalid count `{}`: expected a whole number such as `20`",
            value.trim()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_accept_good_values_and_name_bad_ones() {
        assert_eq!(
            "Talkative".parse::<TriggerMode>(),
            Ok(TriggerMode::Talkative)
        );
        assert!(
            "loud"
                .parse::<TriggerMode>()
                .unwrap_err()
                .0
                .contains("`loud`")
        );
        assert_eq!(parse_threshold("0.75"), Ok(0.75));
        assert!(parse_threshold("1.5").is_err());
        assert_eq!(parse_percent("30%"), Ok(30.0));
        assert!(parse_percent("-1").is_err());
        assert_eq!(parse_seconds("90"), Ok(Duration::from_secs(90)));
        assert!(parse_seconds("soon").is_err());
        assert_eq!(parse_count("5"), Ok(5));
        assert!(parse_count("5.5").is_err());
    }
}
