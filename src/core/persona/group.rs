//! The group headings (`# Group …`, `# Agent Nicknames`, `# Agent Description`,
//! `# Language`; docs/groups.md): each value checked by its parser in
//! `core::group::settings`, the result a [`GroupSettings`] with defaults for the headings not
//! given. Called by `validate` only.

use std::collections::HashMap;

use super::fields::{Field, heading, parse_flag, show, single_line};
use super::redact_phones;
use super::report::Report;
use super::sections::Section;
use crate::core::Invalid;
use crate::core::group::requests::{known_language, known_languages};
use crate::core::group::settings::{self as gs, GroupSettings};

/// The group headings, each validated by its parser in `group::settings`.
pub(super) fn group_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> GroupSettings {
    let mut g = GroupSettings::default();
    fn one<T>(
        report: &mut Report,
        fields: &HashMap<Field, &Section<'_>>,
        field: Field,
        parse: impl Fn(&str) -> Result<T, Invalid>,
    ) -> Option<T> {
        let sec = fields.get(&field)?;
        let value = single_line(report, field, sec)?;
        match parse(value) {
            Ok(v) => Some(v),
            Err(reason) => {
                report.error(
                    sec.value_line,
                    format!("{}: {}", heading(field), redact_phones(&reason.0)),
                );
                None
            }
        }
    }
    if let Some(m) = one(report, fields, Field::GroupTriggerMode, |v| v.parse()) {
        g.mode = m;
    }
    if let Some(t) = one(
        report,
        fields,
        Field::GroupConfidenceThreshold,
        gs::parse_threshold,
    ) {
        g.confidence_threshold = t;
    }
    if let Some(t) = one(
        report,
        fields,
        Field::GroupInterjectThreshold,
        gs::parse_threshold,
    ) {
        g.interject_threshold = t;
    }
    if let Some(p) = one(report, fields, Field::GroupMaxShare, gs::parse_percent) {
        g.max_share_percent = p;
    }
    if let Some(d) = one(report, fields, Field::GroupCooldown, gs::parse_seconds) {
        g.cooldown = d;
    }
    if let Some(n) = one(report, fields, Field::GroupMaxPlansPerHour, gs::parse_count) {
        g.max_plans_per_hour = n;
    }
    g.classifier_model = one(report, fields, Field::GroupClassifierModel, |v| {
        Ok::<_, Invalid>(v.to_owned())
    });
    g.description = one(report, fields, Field::Description, |v| {
        Ok::<_, Invalid>(v.to_owned())
    });
    if let Some(sec) = fields.get(&Field::GroupReplyToBots) {
        g.reply_to_bots = parse_flag(report, Field::GroupReplyToBots, sec);
    }
    if let Some(sec) = fields.get(&Field::Language) {
        g.languages = parse_languages(report, sec);
    }
    if let Some(sec) = fields.get(&Field::Nicknames) {
        for (line, nick) in sec.lines() {
            let nick = nick.trim_start_matches(['-', '*']).trim();
            if nick.is_empty() || nick.chars().count() > 64 {
                report.error(line, format!("invalid nickname {}", show(nick)));
            } else if !g.nicknames.iter().any(|n| n.eq_ignore_ascii_case(nick)) {
                g.nicknames.push(nick.to_owned());
            }
        }
    }
    g
}

/// `# Language`: languages by code or name, separated by commas or lines. One without a
/// table of request words is a warning and left out (its groups are then matched by script).
fn parse_languages(report: &mut Report, sec: &Section<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (line, text) in sec.lines() {
        for lang in text
            .split(',')
            .map(|l| l.trim_start_matches(['-', '*']).trim())
        {
            if lang.is_empty() {
                continue;
            }
            if known_language(lang) {
                if !out.iter().any(|l| l.eq_ignore_ascii_case(lang)) {
                    out.push(lang.to_owned());
                }
            } else {
                report.warning(
                    line,
                    format!(
                        "Language {} has no table of request words (known: {}); group messages are matched by their script instead",
                        show(lang),
                        known_languages()
                    ),
                );
            }
        }
    }
    out
}
