//! The presence headings: `# Daily Schedule` (the prose the persona's days are planned from,
//! docs/presence.md), `# Reset Context On First Message` / `# Clear Summaries On First
//! Message` (what a chat that starts anew forgets) and `# Start Of Conversation` (what its
//! first turn is told). Called by `validate` only.

use std::collections::HashMap;

use super::FreshStart;
use super::fields::{Field, heading};
use super::report::Report;
use super::sections::Section;

/// A heading whose value is free Markdown: `None` when absent; an empty one is reported.
fn text_of(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
    field: Field,
) -> Option<String> {
    let sec = fields.get(&field)?;
    if sec.value.trim().is_empty() {
        report.warning(
            sec.line,
            format!("{} is empty; it is ignored", heading(field)),
        );
        return None;
    }
    Some(sec.value.trim().to_owned())
}

/// The presence headings: the schedule's prose, what a fresh start forgets, and what the
/// first turn of a fresh start is told. The reset flags' bodies are free prose in the
/// original's files (only `false`, `no` or `0` turn them off).
pub(super) fn presence_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> (Option<String>, FreshStart, Option<String>) {
    let daily_schedule = text_of(report, fields, Field::DailySchedule);
    let start_of_conversation = text_of(report, fields, Field::StartOfConversation);
    let off = |sec: &&Section<'_>| {
        matches!(
            sec.value.trim().to_ascii_lowercase().as_str(),
            "false" | "no" | "0"
        )
    };
    let fresh_start = if fields.get(&Field::ResetContext).is_some_and(|s| !off(s)) {
        FreshStart::ResetContext
    } else if fields.get(&Field::ClearSummaries).is_some_and(|s| !off(s)) {
        FreshStart::ClearSummaries
    } else {
        FreshStart::Keep
    };
    (daily_schedule, fresh_start, start_of_conversation)
}
