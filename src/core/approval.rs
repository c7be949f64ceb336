//! Draft mode as data and rules: which plans wait for the owner's approval (the persona's
//! `Approval` heading and the owner's per-chat override), what happens to a draft nobody
//! answers, the notice a draft is posted with, and how the owner's reply reads (`ok`, `no`,
//! `later`, or a text of their own). What a draft shows of a plan and what the owner's edit
//! does to its tasks are operations on the graph (`graph::draft`): this vocabulary knows
//! nothing of graphs, so tasks can carry it. Pure: the `received` handler builds the `draft`
//! task, the scheduler (`scheduler::owner`) applies decisions, the `draft` handler posts the
//! draft. Nothing here sends, waits or reads a file.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::model::{ChatId, MessageId};

/// Which plans wait for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// None: the persona acts on its own (the default).
    #[default]
    Off,
    /// Plans in direct chats where the account has not written yet.
    NewContacts,
    /// Plans in groups.
    Groups,
    /// Every plan that would send, react, block or clear.
    All,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Off => "off",
            ApprovalMode::NewContacts => "new-contacts",
            ApprovalMode::Groups => "groups",
            ApprovalMode::All => "all",
        }
    }

    /// Whether a plan in a chat of this kind needs the owner's approval; `wrote_before`: the
    /// chat's history holds a message of the account.
    pub fn requires(self, direct: bool, wrote_before: bool) -> bool {
        match self {
            ApprovalMode::Off => false,
            ApprovalMode::NewContacts => direct && !wrote_before,
            ApprovalMode::Groups => !direct,
            ApprovalMode::All => true,
        }
    }
}

impl fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApprovalMode {
    type Err = crate::core::Invalid;

    fn from_str(s: &str) -> Result<ApprovalMode, Self::Err> {
        match s
            .trim()
            .to_ascii_lowercase()
            .replace(['_', ' '], "-")
            .as_str()
        {
            "off" | "no" | "none" | "false" => Ok(ApprovalMode::Off),
            "new-contacts" | "new-contact" | "new" => Ok(ApprovalMode::NewContacts),
            "groups" | "group" => Ok(ApprovalMode::Groups),
            "all" | "on" | "yes" | "true" | "always" => Ok(ApprovalMode::All),
            other => Err(crate::core::Invalid(format!(
                "unknown approval mode `{other}`: off, new-contacts, groups or all"
            ))),
        }
    }
}

/// What happens to a draft nobody answered in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnTimeout {
    /// Drop the plan (the default: nothing is said in the owner's name unseen).
    #[default]
    Drop,
    /// Carry the plan out as drafted.
    Send,
}

/// The persona's draft settings (`# Approval`, `# Approval Timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalPolicy {
    pub mode: ApprovalMode,
    /// How long a draft waits for the owner.
    pub timeout: Duration,
    pub on_timeout: OnTimeout,
}

/// How long a draft waits by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
/// The longest timeout a persona may set (a saved graph's deadlines stay within a month).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 86_400);

impl Default for ApprovalPolicy {
    fn default() -> ApprovalPolicy {
        ApprovalPolicy {
            mode: ApprovalMode::Off,
            timeout: DEFAULT_TIMEOUT,
            on_timeout: OnTimeout::Drop,
        }
    }
}

/// Parses `# Approval Timeout`: a duration (`90s`, `30m`, `2h`, `1d`), optionally followed by
/// `then send` or `then drop` (`drop` when absent).
pub fn parse_timeout(value: &str) -> Result<(Duration, OnTimeout), crate::core::Invalid> {
    let lower = value.trim().to_ascii_lowercase();
    let (span, then) = match lower.split_once("then") {
        Some((span, then)) => (span.trim().trim_end_matches(','), Some(then.trim())),
        None => (lower.as_str(), None),
    };
    let secs = crate::core::time::parse_span(span.trim()).ok_or_else(|| {
        crate::core::Invalid(format!(
            "`{}` is not a duration such as `30m`, `2h` or `1d`",
            span.trim()
        ))
    })?;
    let timeout = Duration::from_secs(secs);
    if timeout > MAX_TIMEOUT {
        return Err(crate::core::Invalid::from(
            "a draft waits at most 7 days (`7d`)",
        ));
    }
    let on_timeout = match then {
        None | Some("drop") => OnTimeout::Drop,
        Some("send") => OnTimeout::Send,
        Some(other) => {
            return Err(crate::core::Invalid(format!(
                "after `then`: `send` or `drop`, not `{other}`"
            )));
        }
    };
    Ok((timeout, on_timeout))
}

/// Where the posted draft is, so the owner's reply can be matched to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posted {
    pub chat: ChatId,
    pub message: MessageId,
}

/// A draft the owner was shown for a chat and that a newer message of that chat voided. It
/// stays with the chat's plan until the draft that replaces it is posted: that one says what
/// it replaces and is posted no sooner than [`DRAFT_GAP`] (the runtime's setting) after it, so
/// a burst of messages yields one replacement, not one post per message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Superseded {
    /// The voided draft's task id.
    pub id: String,
    /// Where it was posted (`None`: its posting was under way when it was voided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posted: Option<Posted>,
    /// When the owner was last shown it (posted, or kept with `later`).
    pub at: jiff::Timestamp,
}

/// The least time between two draft posts for one chat by default: the replacement of a
/// voided draft waits this long after it (`RuntimeConfig::draft_gap`).
pub const DRAFT_GAP: Duration = Duration::from_secs(3 * 60);

/// The line a replacing draft carries about the draft it replaces.
pub fn replaces_line(old: &Superseded, title: &str) -> String {
    format!(
        "(replaces draft {}: {title} wrote again, and this plan answers the newest message)",
        old.id
    )
}

/// The owner's word on a draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Decision {
    /// Carry the plan out as drafted.
    Send,
    /// Send this text instead of the plan's texts.
    Edit { text: String },
    /// Drop the plan.
    Drop,
    /// Keep waiting (the timeout counts again from now).
    Later,
}

impl Decision {
    /// Reads the owner's reply to a draft: `ok`/`yes`/`send`/👍 sends, `no`/`drop`/👎 drops,
    /// `later` waits; anything else is the text to send instead. `None` for an empty reply.
    pub fn from_reply(text: &str) -> Option<Decision> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        // `send: TEXT` (or `edit:`) says outright that TEXT is to be sent.
        for prefix in ["send:", "edit:", "say:"] {
            if let Some(rest) = t
                .get(..prefix.len())
                .filter(|p| p.eq_ignore_ascii_case(prefix))
                .map(|_| t[prefix.len()..].trim())
            {
                return (!rest.is_empty()).then(|| Decision::Edit {
                    text: rest.to_string(),
                });
            }
        }
        let word = t
            .trim_end_matches(['.', '!'])
            .trim()
            .to_lowercase()
            .replace('\u{fe0f}', "")
            .replace('’', "'");
        Some(match word.as_str() {
            "ok" | "okay" | "k" | "yes" | "y" | "yep" | "sure" | "send" | "send it" | "go"
            | "approve" | "approved" | "👍" | "✅" | "ok 👍" | "👌" => Decision::Send,
            "no" | "n" | "nope" | "nah" | "no thanks" | "drop" | "drop it" | "reject"
            | "cancel" | "don't" | "dont" | "don't send" | "dont send" | "do not send" | "stop"
            | "skip" | "👎" | "❌" | "🚫" | "✋" => Decision::Drop,
            "later" | "wait" | "not now" | "⏳" => Decision::Later,
            _ => Decision::Edit {
                text: t.to_string(),
            },
        })
    }

    /// A word for logs and answers.
    pub fn verb(&self) -> &'static str {
        match self {
            Decision::Send => "approved",
            Decision::Edit { .. } => "approved with the owner's text",
            Decision::Drop => "rejected",
            Decision::Later => "kept for later",
        }
    }
}

/// The text posted to the owner for a draft task `id`.
pub fn notice(id: &str, draft: &str, deadline: &str, on_timeout: OnTimeout) -> String {
    let unanswered = match on_timeout {
        OnTimeout::Drop => "dropped",
        OnTimeout::Send => "sent as planned",
    };
    format!(
        "personad: draft {id} {draft}\n\nReply to this message: ok (or 👍) sends it, no (or 👎) drops it, later keeps it, any other text (or send: TEXT) is sent instead. Unanswered, it is {unanswered} at {deadline}."
    )
}

/// Whether `sel` names the draft task `id`: its whole id, or at least 4 leading characters of
/// the hex part (`draft-3f2a…` is `3f2a`).
pub fn matches_id(id: &str, sel: &str) -> bool {
    let sel = sel.trim();
    let hex = id.strip_prefix("draft-").unwrap_or(id);
    let part = sel.strip_prefix("draft-").unwrap_or(sel);
    id == sel || (part.len() >= 4 && hex.starts_with(part))
}

#[cfg(test)]
mod tests;
