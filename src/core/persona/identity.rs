//! The identity headings, all three required: `# Agent Name` (a usable identifier, see
//! [`validate_agent_name`]), `# Agent Phone` (one line; a shape that is not an international
//! number is a warning) and `# Agent Instructions` (free Markdown). Called by `validate` only.

use std::collections::HashMap;

use super::fields::{Field, heading, looks_like_phone, required, show, single_line};
use super::report::Report;
use super::sections::Section;
use super::validate_agent_name;

/// What the identity headings gave; a `None` was reported.
pub(super) struct Identity {
    /// The agent name, when valid.
    pub(super) name: Option<String>,
    /// The line of the name's value (where a duplicate name across files is reported).
    pub(super) name_line: Option<usize>,
    /// The phone as written, when one line.
    pub(super) phone: Option<String>,
    /// The instructions' raw Markdown.
    pub(super) instructions: Option<String>,
}

/// The identity headings, each checked once (the missing ones reported first).
pub(super) fn identity_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> Identity {
    let name_sec = required(report, fields, Field::Name);
    let phone_sec = required(report, fields, Field::Phone);
    let instructions_sec = required(report, fields, Field::Instructions);

    let mut name = None;
    let mut name_line = None;
    if let Some(sec) = name_sec {
        let value = sec.value;
        name_line = Some(sec.value_line);
        match validate_agent_name(value) {
            Ok(()) => name = Some(value.to_owned()),
            Err(reason) => report.error(
                sec.value_line,
                format!("agent name {} is not usable: {reason}", show(value)),
            ),
        }
    }

    let mut phone = None;
    if let Some(sec) = phone_sec
        && let Some(value) = single_line(report, Field::Phone, sec)
    {
        if !looks_like_phone(value) {
            report.warning(
                sec.value_line,
                format!(
                    "{} does not look like an international phone number (`+` and 7 to 15 digits, e.g. `+1 555 010 0001`)",
                    heading(Field::Phone)
                ),
            );
        }
        phone = Some(value.to_owned());
    }

    Identity {
        name,
        name_line,
        phone,
        instructions: instructions_sec.map(|s| s.value.to_owned()),
    }
}
