//! `schedule` blocks: the persona's own changes to its day (the original's `schedule` task), in
//! either form. As a task block, `key: value` lines (`id`, `start_time`, `end_time`,
//! `activity_name`, `responsiveness`, `description`; `start`, `end`, `name` and `activity`
//! too):
//!
//! ```text
//! # «schedule»
//! id: act-20261127-1500
//! start_time: 16:00
//! activity_name: Home
//! ```
//!
//! As the original's JSON task: `{"kind": "schedule", "id": …, "start_time": …, "end_time":
//! …, "activity_name": …, "responsiveness": …, "description": …}`. Every change of one reply
//! joins one action, applied together (`core::presence::edit`), which checks the times, the
//! ids and the day; here only the syntax, and whether this persona may change its day.

use super::memory::json_text;
use super::{ParseOptions, ParsedReply, excerpt, warn};
use crate::core::plan::Action;
use crate::core::presence::edit::ActivityEdit;

/// Reads a `schedule` block.
pub(super) fn parse_schedule(out: &mut ParsedReply, label: &str, body: &str, opts: &ParseOptions) {
    let mut edit = ActivityEdit::default();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((key, value)) = line.split_once(':') else {
            warn(
                out,
                label,
                format_args!("not a `key: value` line, ignored: {}", excerpt(line)),
            );
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim().to_string());
        // A time's own colons stay in the value: only the first one splits.
        let some = (!value.is_empty()).then_some(value.clone());
        match key.replace([' ', '-'], "_").as_str() {
            "id" => edit.id = some,
            "start_time" | "start" => edit.start_time = some,
            "end_time" | "end" => edit.end_time = some,
            "activity_name" | "activity" | "name" => edit.activity_name = value,
            "description" => edit.description = Some(value),
            "responsiveness" => match value.parse::<i64>() {
                Ok(r) => edit.responsiveness = Some(r),
                Err(_) => {
                    warn(
                        out,
                        label,
                        format_args!(
                            "responsiveness {} is not a number; skipped",
                            excerpt(&value)
                        ),
                    );
                    return;
                }
            },
            _ => warn(
                out,
                label,
                format_args!("unknown field {}, ignored", excerpt(&key)),
            ),
        }
    }
    push(out, label, edit, opts);
}

/// Reads a `schedule` JSON task.
pub(super) fn parse_json_schedule(
    out: &mut ParsedReply,
    label: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
    opts: &ParseOptions,
) {
    let text = |names: &[&str]| names.iter().find_map(|n| json_text(obj, n));
    let responsiveness = match obj.get("responsiveness") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(r) => Some(r),
            None => {
                warn(out, label, "responsiveness is not a number; skipped");
                return;
            }
        },
    };
    let edit = ActivityEdit {
        id: text(&["id"]).filter(|i| !i.trim().is_empty()),
        start_time: text(&["start_time", "start"]),
        end_time: text(&["end_time", "end"]),
        activity_name: text(&["activity_name", "activity", "name"]).unwrap_or_default(),
        responsiveness,
        description: text(&["description"]),
    };
    push(out, label, edit, opts);
}

/// Adds the change to the reply's one `schedule` action (made by the first).
fn push(out: &mut ParsedReply, label: &str, edit: ActivityEdit, opts: &ParseOptions) {
    if !opts.allow_schedule {
        warn(
            out,
            label,
            "this persona may not change its schedule (docs/actions.md); skipped",
        );
        return;
    }
    if edit.id.is_none() && edit.activity_name.trim().is_empty() {
        warn(out, label, "neither an id nor an activity name; skipped");
        return;
    }
    for action in &mut out.actions {
        if let Action::EditSchedule { edits } = action {
            edits.push(edit);
            return;
        }
    }
    out.actions.push(Action::EditSchedule { edits: vec![edit] });
}
