//! The sticker headings: `# Agent Sticker Sets` (then the legacy `# Agent Sticker Set`), one
//! set's short name per line, and `# Agent Stickers`, one `SET :: NAME` per line; duplicates
//! are warned about and dropped. Called by `validate` only.

use std::collections::HashMap;

use super::StickerRef;
use super::fields::{Field, bad_set_name_message, heading, show, valid_set_name};
use super::report::Report;
use super::sections::Section;

/// The `Sticker Sets` heading (then the legacy singular one): one valid set name per line.
pub(super) fn sticker_sets_of(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> Vec<String> {
    let mut sticker_sets: Vec<String> = Vec::new();
    for field in [Field::StickerSets, Field::StickerSetLegacy] {
        let Some(sec) = fields.get(&field) else {
            continue;
        };
        if field == Field::StickerSetLegacy {
            report.warning(
                sec.line,
                format!(
                    "{} is the old spelling; use {} (one set per line)",
                    heading(field),
                    heading(Field::StickerSets)
                ),
            );
        }
        if sec.value.is_empty() {
            report.error(sec.line, format!("{} is empty", heading(field)));
        }
        for (line, set) in sec.lines() {
            if !valid_set_name(set) {
                report.error(line, bad_set_name_message(set));
            } else if sticker_sets.iter().any(|s| s == set) {
                report.warning(
                    line,
                    format!("sticker set {} is listed more than once", show(set)),
                );
            } else {
                sticker_sets.push(set.to_owned());
            }
        }
    }
    sticker_sets
}

/// The `Stickers` heading: one `SET :: NAME` per line.
pub(super) fn stickers_of(report: &mut Report, sec: &Section<'_>) -> Vec<StickerRef> {
    let mut stickers: Vec<StickerRef> = Vec::new();
    if sec.value.is_empty() {
        report.error(sec.line, format!("{} is empty", heading(Field::Stickers)));
    }
    for (line, text) in sec.lines() {
        let parsed = text
            .split_once("::")
            .map(|(set, name)| (set.trim(), name.trim()))
            .filter(|(set, name)| !set.is_empty() && !name.is_empty());
        let Some((set, sticker_name)) = parsed else {
            report.error(
                line,
                format!(
                    "malformed sticker line {}: expected `SET :: NAME`",
                    show(text)
                ),
            );
            continue;
        };
        if !valid_set_name(set) {
            report.error(line, bad_set_name_message(set));
            continue;
        }
        let sticker = StickerRef {
            set: set.to_owned(),
            name: sticker_name.to_owned(),
        };
        if stickers.contains(&sticker) {
            report.warning(
                line,
                format!("sticker {} is listed more than once", show(text)),
            );
        } else {
            stickers.push(sticker);
        }
    }
    stickers
}
