//! The agent's one-line settings: `# Agent Timezone` (an IANA name from the bundled
//! database), `# Typing Speed` and `# Start Typing Delay` (numbers), `# LLM` and `# LLM Model`
//! (the model to plan with), and the switches `# Disabled`, `# Allow Clear Conversation`
//! (with `mine` for this side only), `# Allow Block` (on unless it says otherwise),
//! `# Allow Schedule Edits`, `# Allow Retrieve` (off unless present) and `# Retrieve Daily
//! Cap` (a whole number). Called
//! by `validate` only.

use std::collections::HashMap;

use jiff::tz::TimeZone;

use super::fields::{Field, parse_flag, parse_number, show, single_line};
use super::report::Report;
use super::sections::Section;

/// What the setting headings gave; an absent or invalid value is `None` (or the default).
pub(super) struct Settings {
    pub(super) timezone: Option<TimeZone>,
    pub(super) timezone_name: Option<String>,
    pub(super) typing_speed: Option<f64>,
    pub(super) start_typing_delay: Option<f64>,
    pub(super) llm_model: Option<String>,
    pub(super) llm: Option<String>,
    pub(super) disabled: bool,
    pub(super) allow_clear_conversation: bool,
    pub(super) clear_for_both_sides: bool,
    pub(super) allow_block: bool,
    /// `# Allow Schedule Edits` when given (`None`: the role prompts decide).
    pub(super) allow_schedule_edits: Option<bool>,
    pub(super) allow_retrieve: bool,
    pub(super) retrieve_daily_cap: u32,
}

/// The setting headings, each checked once.
pub(super) fn settings_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> Settings {
    let (timezone, timezone_name) = fields
        .get(&Field::Timezone)
        .and_then(|sec| timezone_of(report, sec))
        .unzip();
    let typing_speed = fields
        .get(&Field::TypingSpeed)
        .and_then(|sec| parse_number(report, Field::TypingSpeed, sec));
    let start_typing_delay = fields
        .get(&Field::StartTypingDelay)
        .and_then(|sec| parse_number(report, Field::StartTypingDelay, sec));
    let llm_model = fields
        .get(&Field::LlmModel)
        .and_then(|sec| single_line(report, Field::LlmModel, sec))
        .map(str::to_owned);
    let mut llm = None;
    if let Some(sec) = fields.get(&Field::Llm)
        && let Some(value) = single_line(report, Field::Llm, sec)
    {
        match crate::core::llm::resolve(value) {
            Ok(_) => llm = Some(value.trim().to_owned()),
            Err(e) => report.error(sec.value_line, e.to_string()),
        }
    }

    let disabled = fields
        .get(&Field::Disabled)
        .is_some_and(|sec| parse_flag(report, Field::Disabled, sec));
    let clear = fields.get(&Field::AllowClearConversation);
    // `mine` (or `my side`): allowed, and the history goes for this account only.
    let clear_mine_only = clear.is_some_and(|sec| {
        matches!(
            sec.value.trim().to_ascii_lowercase().as_str(),
            "mine" | "my side" | "only mine"
        )
    });
    // Blocking is on unless the persona says otherwise (`# Allow Block` / `false`).
    let allow_block = fields
        .get(&Field::AllowBlock)
        .is_none_or(|sec| parse_flag(report, Field::AllowBlock, sec));
    let allow_schedule_edits = fields
        .get(&Field::AllowScheduleEdits)
        .map(|sec| parse_flag(report, Field::AllowScheduleEdits, sec));
    // Looking things up on the web is off unless the persona says so.
    let allow_retrieve = fields
        .get(&Field::AllowRetrieve)
        .is_some_and(|sec| parse_flag(report, Field::AllowRetrieve, sec));
    let retrieve_daily_cap = fields
        .get(&Field::RetrieveDailyCap)
        .and_then(|sec| daily_cap_of(report, sec))
        .unwrap_or(crate::core::retrieve::DEFAULT_DAILY_CAP);
    let allow_clear_conversation = clear_mine_only
        || clear.is_some_and(|sec| parse_flag(report, Field::AllowClearConversation, sec));
    Settings {
        timezone,
        timezone_name,
        typing_speed,
        start_typing_delay,
        llm_model,
        llm,
        disabled,
        allow_clear_conversation,
        clear_for_both_sides: !clear_mine_only,
        allow_block,
        allow_schedule_edits,
        allow_retrieve,
        retrieve_daily_cap,
    }
}

/// `# Retrieve Daily Cap`: a whole number of fetches per UTC day, or `None` after reporting.
fn daily_cap_of(report: &mut Report, sec: &Section<'_>) -> Option<u32> {
    let value = single_line(report, Field::RetrieveDailyCap, sec)?;
    let max = crate::core::retrieve::MAX_DAILY_CAP;
    match value.trim().parse::<u32>() {
        Ok(n) if n <= max => Some(n),
        _ => {
            report.error(
                sec.value_line,
                format!(
                    "invalid `# Retrieve Daily Cap` value {}: expected a whole number of fetches per day from 0 to {max}, such as `20`",
                    show(value)
                ),
            );
            None
        }
    }
}

/// `# Agent Timezone`: the zone and its name as written, or `None` after reporting.
fn timezone_of(report: &mut Report, sec: &Section<'_>) -> Option<(TimeZone, String)> {
    let value = single_line(report, Field::Timezone, sec)?;
    match TimeZone::get(value) {
        Ok(tz) => Some((tz, value.to_owned())),
        Err(_) => {
            report.error(
                sec.value_line,
                format!(
                    "unknown time zone {}: expected an IANA name such as `Europe/Berlin`",
                    show(value)
                ),
            );
            None
        }
    }
}
