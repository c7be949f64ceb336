//! The owner-in-the-loop headings: `# Approval` (which plans wait for the owner),
//! `# Approval Timeout` (how long, and what then), `# Admin Chat` (the one chat besides Saved
//! Messages where drafts and command answers may go), `# Daily Budget` (the persona's daily
//! LLM cap) and `# Send Limits` (the account governor's figures). Each is validated once here,
//! with the file's line on every problem.

use std::collections::HashMap;
use std::time::Duration;

use super::fields::{Field, heading, single_line};
use super::report::Report;
use super::sections::Section;
use crate::core::approval::{ApprovalMode, ApprovalPolicy};
use crate::core::budget::DailyCap;
use crate::core::model::ChatId;

/// The send governor's figures a persona may set; `None` keeps the daemon's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendLimits {
    /// At most this many of our messages in one chat per minute.
    pub chat_per_minute: Option<u32>,
    /// At most this many messages from the account per minute, all chats together.
    pub account_per_minute: Option<u32>,
    /// At least this long between two of our messages in one chat.
    pub chat_gap: Option<Duration>,
}

impl SendLimits {
    /// Parses `per chat 6/min, per account 15/min, gap 5s` (any subset, any order; `6 per
    /// minute`, `6/minute` and `per chat: 6/min` read the same; `gap 0` turns the gap off).
    pub fn parse(value: &str) -> Result<SendLimits, crate::core::Invalid> {
        let mut out = SendLimits::default();
        for part in value
            .split([',', ';', '\n'])
            .map(|p| p.trim().trim_start_matches(['-', '*']).trim())
            .filter(|p| !p.is_empty())
        {
            let lower = part.to_ascii_lowercase();
            let bad = || {
                crate::core::Invalid(format!(
                    "`{part}`: write `per chat 6/min` (1 to 60), `per account 15/min` (1 to 600) or `gap 5s` (0 to 60 s)"
                ))
            };
            let per_minute = |rest: &str, most: u32| -> Result<u32, crate::core::Invalid> {
                let n = rest
                    .trim()
                    .trim_start_matches(':')
                    .trim()
                    .replace(" /", "/")
                    .replace("/ ", "/");
                let n = n.as_str();
                let n = ["/minute", "/min", "per minute", "a minute"]
                    .iter()
                    .find_map(|unit| n.strip_suffix(unit))
                    .unwrap_or(n)
                    .trim();
                n.parse::<u32>()
                    .ok()
                    .filter(|n| (1..=most).contains(n))
                    .ok_or_else(bad)
            };
            if let Some(rest) = lower.strip_prefix("per chat") {
                out.chat_per_minute = Some(per_minute(rest, 60)?);
            } else if let Some(rest) = lower.strip_prefix("per account") {
                out.account_per_minute = Some(per_minute(rest, 600)?);
            } else if let Some(rest) = lower.strip_prefix("gap") {
                let rest = rest.trim().trim_start_matches(':').trim();
                // Longer than the governor's longest own wait (60 s) would refuse every
                // second message instead of pacing it.
                let secs = match rest {
                    "0" | "0s" | "off" | "none" => 0,
                    _ => crate::core::time::parse_span(rest)
                        .filter(|s| *s <= 60)
                        .ok_or_else(bad)?,
                };
                out.chat_gap = Some(Duration::from_secs(secs));
            } else {
                return Err(bad());
            }
        }
        Ok(out)
    }
}

/// The owner headings, each checked once.
pub(super) struct OwnerFields {
    pub(super) approval: ApprovalPolicy,
    pub(super) admin_chat: Option<ChatId>,
    pub(super) daily_budget: Option<DailyCap>,
    pub(super) send_limits: SendLimits,
}

/// Parses `# Admin Chat`: one chat id as the Bot API writes it (`-1001234567890` for a
/// supergroup, `-123456` for a basic group, a positive user id for a direct chat), never 0.
pub(super) fn parse_admin_chat(value: &str) -> Result<ChatId, crate::core::Invalid> {
    let v = value.trim();
    match v.parse::<i64>() {
        Ok(0) | Err(_) => Err(crate::core::Invalid(format!(
            "`{v}` is not a chat id: write the chat's id, such as `-1001234567890` (see `personad ctl chats`)"
        ))),
        Ok(id) => Ok(ChatId(id)),
    }
}

/// The owner headings, each checked once.
pub(super) fn owner_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> OwnerFields {
    let mut policy = ApprovalPolicy::default();
    let mut one = |field: Field| -> Option<(usize, String)> {
        let sec = fields.get(&field)?;
        single_line(report, field, sec).map(|v| (sec.value_line, v.to_owned()))
    };
    let approval = one(Field::Approval);
    let timeout = one(Field::ApprovalTimeout);
    let admin = one(Field::AdminChat);
    let budget = one(Field::DailyBudget);
    let limits = fields
        .get(&Field::SendLimits)
        .map(|sec| (sec.value_line, sec.value.to_owned()));
    if let Some((line, value)) = approval {
        match value.parse::<ApprovalMode>() {
            Ok(mode) => policy.mode = mode,
            Err(e) => report.error(line, format!("{}: {e}", heading(Field::Approval))),
        }
    }
    if let Some((line, value)) = timeout {
        match crate::core::approval::parse_timeout(&value) {
            Ok((t, then)) => {
                policy.timeout = t;
                policy.on_timeout = then;
            }
            Err(e) => report.error(line, format!("{}: {e}", heading(Field::ApprovalTimeout))),
        }
    }
    let admin_chat = admin.and_then(|(line, value)| match parse_admin_chat(&value) {
        Ok(chat) => Some(chat),
        Err(e) => {
            report.error(line, format!("{}: {e}", heading(Field::AdminChat)));
            None
        }
    });
    let daily_budget = budget.and_then(|(line, value)| match value.parse::<DailyCap>() {
        Ok(cap) => Some(cap),
        Err(e) => {
            report.error(line, format!("{}: {e}", heading(Field::DailyBudget)));
            None
        }
    });
    let send_limits = match limits {
        Some((line, value)) => SendLimits::parse(&value).unwrap_or_else(|e| {
            report.error(line, format!("{}: {e}", heading(Field::SendLimits)));
            SendLimits::default()
        }),
        None => SendLimits::default(),
    };
    OwnerFields {
        approval: policy,
        admin_chat,
        daily_budget,
        send_limits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `# Admin Chat` takes one chat id; 0, a name or `me` is refused with a hint.
    #[test]
    fn an_admin_chat_is_one_chat_id() {
        assert_eq!(
            parse_admin_chat(" -1001234567890 ").ok(),
            Some(ChatId(-1_001_234_567_890))
        );
        assert_eq!(parse_admin_chat("42").ok(), Some(ChatId(42)));
        for bad in ["0", "ops", "me", "-100 200", ""] {
            let e = parse_admin_chat(bad).err().map(|e| e.0).unwrap_or_default();
            assert!(e.contains("is not a chat id"), "{bad}: {e}");
        }
    }

    #[test]
    fn send_limits_parse_any_subset_and_refuse_nonsense() {
        let l = SendLimits::parse("per chat 6/min, gap 5s");
        assert_eq!(
            l.ok(),
            Some(SendLimits {
                chat_per_minute: Some(6),
                account_per_minute: None,
                chat_gap: Some(Duration::from_secs(5)),
            })
        );
        let l = SendLimits::parse("- per account 15 per minute");
        assert_eq!(l.ok().and_then(|l| l.account_per_minute), Some(15));
        let l = SendLimits::parse("per chat: 6 / minute; gap 0");
        assert_eq!(
            l.ok(),
            Some(SendLimits {
                chat_per_minute: Some(6),
                account_per_minute: None,
                chat_gap: Some(Duration::ZERO),
            })
        );
        for bad in [
            "per chat 0/min",
            "per chat lots",
            "speed 3",
            "gap 2m",
            "per chat 61/min",
        ] {
            assert!(SendLimits::parse(bad).is_err(), "{bad}");
        }
    }
}
