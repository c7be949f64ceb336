//! The field rules of persona headings: the heading names, single-line and required values,
//! flags, numbers, sticker-set names and phone shapes, each a small function that reports its
//! problem with the heading's line.

use std::collections::HashMap;

use super::report::Report;
use super::sections::Section;
use super::{Problem, Severity, redact_phones};

// ---------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Field {
    Name,
    Phone,
    Instructions,
    RolePrompt,
    StickerSets,
    StickerSetLegacy,
    Stickers,
    Timezone,
    TypingSpeed,
    StartTypingDelay,
    LlmModel,
    Llm,
    Disabled,
    AllowClearConversation,
    AllowBlock,
    AllowScheduleEdits,
    AllowRetrieve,
    RetrieveDailyCap,
    GroupTriggerMode,
    GroupConfidenceThreshold,
    GroupInterjectThreshold,
    Nicknames,
    Description,
    GroupReplyToBots,
    GroupMaxShare,
    GroupCooldown,
    GroupMaxPlansPerHour,
    GroupClassifierModel,
    DailySchedule,
    ResetContext,
    ClearSummaries,
    StartOfConversation,
    Approval,
    ApprovalTimeout,
    AdminChat,
    DailyBudget,
    SendLimits,
    Language,
    Voice,
    MediaFolder,
}

impl Field {
    pub(super) const ALL: [Field; 40] = [
        Field::Name,
        Field::Phone,
        Field::Instructions,
        Field::RolePrompt,
        Field::StickerSets,
        Field::StickerSetLegacy,
        Field::Stickers,
        Field::Timezone,
        Field::TypingSpeed,
        Field::StartTypingDelay,
        Field::LlmModel,
        Field::Llm,
        Field::Disabled,
        Field::AllowClearConversation,
        Field::AllowBlock,
        Field::AllowScheduleEdits,
        Field::AllowRetrieve,
        Field::RetrieveDailyCap,
        Field::GroupTriggerMode,
        Field::GroupConfidenceThreshold,
        Field::GroupInterjectThreshold,
        Field::Nicknames,
        Field::Description,
        Field::GroupReplyToBots,
        Field::GroupMaxShare,
        Field::GroupCooldown,
        Field::GroupMaxPlansPerHour,
        Field::GroupClassifierModel,
        Field::DailySchedule,
        Field::ResetContext,
        Field::ClearSummaries,
        Field::StartOfConversation,
        Field::Approval,
        Field::ApprovalTimeout,
        Field::AdminChat,
        Field::DailyBudget,
        Field::SendLimits,
        Field::Language,
        Field::Voice,
        Field::MediaFolder,
    ];

    /// The canonical heading text.
    pub(super) fn heading(self) -> &'static str {
        match self {
            Field::Name => "Agent Name",
            Field::Phone => "Agent Phone",
            Field::Instructions => "Agent Instructions",
            Field::RolePrompt => "Role Prompt",
            Field::StickerSets => "Agent Sticker Sets",
            Field::StickerSetLegacy => "Agent Sticker Set",
            Field::Stickers => "Agent Stickers",
            Field::Timezone => "Agent Timezone",
            Field::TypingSpeed => "Typing Speed",
            Field::StartTypingDelay => "Start Typing Delay",
            Field::LlmModel => "LLM Model",
            Field::Llm => "LLM",
            Field::Disabled => "Disabled",
            Field::AllowClearConversation => "Allow Clear Conversation",
            Field::AllowBlock => "Allow Block",
            Field::AllowScheduleEdits => "Allow Schedule Edits",
            Field::AllowRetrieve => "Allow Retrieve",
            Field::RetrieveDailyCap => "Retrieve Daily Cap",
            Field::GroupTriggerMode => "Group Trigger Mode",
            Field::GroupConfidenceThreshold => "Group Confidence Threshold",
            Field::GroupInterjectThreshold => "Group Interject Threshold",
            Field::Nicknames => "Agent Nicknames",
            Field::Description => "Agent Description",
            Field::GroupReplyToBots => "Group Reply To Bots",
            Field::GroupMaxShare => "Group Max Share",
            Field::GroupCooldown => "Group Cooldown",
            Field::GroupMaxPlansPerHour => "Group Max Plans Per Hour",
            Field::GroupClassifierModel => "Group Classifier Model",
            Field::DailySchedule => "Daily Schedule",
            Field::ResetContext => "Reset Context On First Message",
            Field::ClearSummaries => "Clear Summaries On First Message",
            Field::StartOfConversation => "Start Of Conversation",
            Field::Approval => "Approval",
            Field::ApprovalTimeout => "Approval Timeout",
            Field::AdminChat => "Admin Chat",
            Field::DailyBudget => "Daily Budget",
            Field::SendLimits => "Send Limits",
            Field::Language => "Language",
            Field::Voice => "Voice",
            Field::MediaFolder => "Media Folder",
        }
    }

    pub(super) fn from_key(key: &str) -> Option<Field> {
        Field::ALL
            .into_iter()
            .find(|f| f.heading().eq_ignore_ascii_case(key))
    }
}

/// Stable sort by line, problems without a line first.
pub(crate) fn sort_problems(problems: &mut [Problem]) {
    problems.sort_by_key(|p| p.line.unwrap_or(0));
}

/// Quotes a value for a message: backticks, control characters escaped,
/// cut after 80 characters.
pub(crate) fn show(value: &str) -> String {
    let mut out = String::from("`");
    for (i, c) in redact_phones(value).chars().enumerate() {
        if i == 80 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

pub(super) fn heading(field: Field) -> String {
    format!("`# {}`", field.heading())
}

/// The value of a field that must be one line, or `None` after reporting.
pub(super) fn single_line<'a>(
    report: &mut Report,
    field: Field,
    sec: &Section<'a>,
) -> Option<&'a str> {
    let mut lines = sec.lines();
    let Some((_, first)) = lines.next() else {
        report.error(sec.line, format!("{} is empty", heading(field)));
        return None;
    };
    if let Some((line, _)) = lines.next() {
        report.error(line, format!("{} must be a single line", heading(field)));
        return None;
    }
    Some(first)
}

/// A required field's section, or `None` after reporting it missing or empty.
pub(super) fn required<'s, 'a>(
    report: &mut Report,
    fields: &HashMap<Field, &'s Section<'a>>,
    field: Field,
) -> Option<&'s Section<'a>> {
    match fields.get(&field) {
        None => {
            report.push(
                Severity::Error,
                None,
                format!("missing required {} heading", heading(field)),
            );
            None
        }
        Some(sec) if sec.value.is_empty() => {
            report.error(sec.line, format!("{} is empty", heading(field)));
            None
        }
        Some(sec) => Some(*sec),
    }
}

/// A yes/no heading: present with an empty value, `true`, `yes` or `1` means on; `false`, `no`
/// or `0` off; anything else warns and counts as on (the heading's presence shows intent).
pub(super) fn parse_flag(report: &mut Report, field: Field, sec: &Section<'_>) -> bool {
    match sec.value.to_ascii_lowercase().as_str() {
        "false" | "no" | "0" => false,
        "" | "true" | "yes" | "1" => true,
        _ => {
            let meaning = if field == Field::Disabled {
                "the agent is disabled"
            } else {
                "taken as yes"
            };
            report.warning(
                sec.value_line,
                format!(
                    "{} value {} is not one of `true`, `yes`, `1`, `false`, `no`, `0` (or empty); {meaning}",
                    heading(field),
                    show(sec.value)
                ),
            );
            true
        }
    }
}

pub(super) fn parse_number(report: &mut Report, field: Field, sec: &Section<'_>) -> Option<f64> {
    let value = single_line(report, field, sec)?;
    // A delay becomes one saved wait task: it must be one a saved graph can hold.
    let max_wait = crate::core::graph::MAX_WAIT_SECS;
    let number = value.parse::<f64>().ok().filter(|n| {
        n.is_finite()
            && if field == Field::TypingSpeed {
                *n > 0.0
            } else {
                (0.0..=max_wait).contains(n)
            }
    });
    if number.is_some() {
        return number;
    }
    let wanted = if field == Field::TypingSpeed {
        "a number of characters per second greater than 0, such as `5.0`".to_string()
    } else {
        format!("a number of seconds from 0 to {max_wait} (a day), such as `2.5`")
    };
    report.error(
        sec.value_line,
        format!(
            "invalid {} value {}: expected {wanted}",
            heading(field),
            show(value)
        ),
    );
    None
}

/// Telegram sticker set short names use only ASCII letters, digits and `_`.
pub(super) fn valid_set_name(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn bad_set_name_message(name: &str) -> String {
    format!(
        "invalid sticker set name {}: a set's short name (the part after `t.me/addstickers/`) has only letters, digits and `_`",
        show(name)
    )
}

pub(super) fn looks_like_phone(phone: &str) -> bool {
    let compact: String = phone
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.'))
        .collect();
    let digits = compact.strip_prefix('+').unwrap_or(&compact);
    (7..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit())
}
