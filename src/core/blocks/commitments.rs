//! Commitment blocks: `intend` (one of the persona's intentions, shown in every chat) and
//! `plan` (one of its plans for this chat), in either form. As a task block the id may follow
//! the heading (or a leading `id:` line gives it), and the body is the text:
//!
//! ```text
//! # «intend» intent-1a2b3c4d
//! Check in with Diego on Saturday about his recovery.
//! ```
//!
//! As the original's JSON task: `{"kind": "intend", "id": "…", "content": "…"}` (likewise
//! `plan`). An id that exists is replaced; an id with no content deletes; no id creates.
//! Only the syntax is checked here; ids, lengths and caps are checked where the write is
//! applied (`core::facts`).

use super::memory::json_text;
use super::syntax::{Heading, IdPart};
use super::{ParsedReply, excerpt, warn};
use crate::core::facts::FactWrite;
use crate::core::graph::TaskKind;
use crate::core::plan::Action;

/// Reads an `intend` or `plan` block.
pub(super) fn parse_commitment(
    out: &mut ParsedReply,
    label: &str,
    kind: TaskKind,
    heading: &Heading<'_>,
    body: &str,
) {
    let mut id = match heading.id {
        IdPart::Valid(n) => Some(n.0.to_string()),
        IdPart::Invalid(raw) => Some(raw.to_string()),
        IdPart::Absent => Some(heading.trailing.trim().to_string()),
    }
    .filter(|i| !i.is_empty());
    let mut rest = body.trim();
    if let Some((key, value)) = rest
        .split_once('\n')
        .unwrap_or((rest, ""))
        .0
        .split_once(':')
        && key.trim().eq_ignore_ascii_case("id")
    {
        let given = value.trim().to_string();
        if id.as_ref().is_some_and(|i| *i != given) {
            warn(
                out,
                label,
                format_args!("two ids; the heading's is used, not {}", excerpt(&given)),
            );
        } else if !given.is_empty() {
            id = Some(given);
        }
        rest = rest.split_once('\n').map_or("", |(_, t)| t).trim();
    }
    push(out, label, kind, id, rest.to_string());
}

/// Reads an `intend` or `plan` JSON task.
pub(super) fn parse_json_commitment(
    out: &mut ParsedReply,
    label: &str,
    kind: TaskKind,
    obj: &serde_json::Map<String, serde_json::Value>,
) {
    let content = json_text(obj, "content")
        .or_else(|| json_text(obj, "text"))
        .unwrap_or_default();
    push(out, label, kind, json_text(obj, "id"), content);
}

fn push(out: &mut ParsedReply, label: &str, kind: TaskKind, id: Option<String>, content: String) {
    let id = id.filter(|i| !i.trim().is_empty());
    if content.trim().is_empty() && id.is_none() {
        warn(out, label, "no text and no id to delete; skipped");
        return;
    }
    let write = FactWrite {
        id,
        content: content.trim().to_string(),
    };
    out.actions.push(match kind {
        TaskKind::Intend => Action::Intend { write },
        _ => Action::ChatPlan { write },
    });
}

#[cfg(test)]
mod tests {
    use crate::core::blocks::{ParseOptions, parse_reply};
    use crate::core::facts::FactWrite;
    use crate::core::plan::Action;

    fn writes(answer: &str) -> Vec<Action> {
        parse_reply(answer, &ParseOptions::default()).actions
    }

    /// Both forms read the same: an id after the heading or on an `id:` line (or in the JSON),
    /// the text after it; an id with no text is a delete; neither is skipped.
    #[test]
    fn intend_and_plan_read_in_both_forms() {
        let w = |id: Option<&str>, content: &str| FactWrite {
            id: id.map(str::to_string),
            content: content.to_string(),
        };
        assert_eq!(
            writes("# «intend»\nCall Mum on Sunday.\n\n# «plan» plan-3f2a\nMuseum first."),
            [
                Action::Intend {
                    write: w(None, "Call Mum on Sunday.")
                },
                Action::ChatPlan {
                    write: w(Some("plan-3f2a"), "Museum first.")
                }
            ]
        );
        assert_eq!(
            writes("# «intend»\nid: intent-1a2b\n"),
            [Action::Intend {
                write: w(Some("intent-1a2b"), "")
            }]
        );
        assert_eq!(
            writes(
                r#"[{"kind": "plan", "id": "plan-9", "content": "Then the beach."},
                    {"kind": "intend", "content": ""}]"#
            ),
            [Action::ChatPlan {
                write: w(Some("plan-9"), "Then the beach.")
            }]
        );
    }
}
