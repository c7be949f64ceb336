//! `send_media` blocks: an item of the persona's album, by its id, in either form. As a task
//! block the body is the id (a `unique_id:` label is forgiven) and a message id after the
//! heading makes it a reply:
//!
//! ```text
//! # «send_media» 42
//! 4918428193711131585
//! ```
//!
//! As the original's JSON task: `{"kind": "send_media", "unique_id": "…", "reply_to": 42}`.
//! Only the syntax is checked here (an id of letters, digits, `-` and `_`); whether the album
//! has it is the handler's to decide, which refuses an unknown id and never sends it as text.

use super::syntax::IdPart;
use super::{ParseOptions, ParsedReply, excerpt, reply_target, warn};
use crate::core::album::valid_id;
use crate::core::plan::Action;

/// Reads a `send_media` block: `id` is the heading's message id (the reply target).
pub(super) fn parse_send_media(
    out: &mut ParsedReply,
    label: &str,
    id: &IdPart<'_>,
    body: &str,
    opts: &ParseOptions,
) {
    let mut reply_to = reply_target(out, label, id, opts);
    let mut item = None;
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = match line.split_once(':') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
            None => (String::new(), line),
        };
        match key.as_str() {
            "reply_to" | "reply to" => {
                let digits = value.trim_start_matches('#');
                reply_to = match digits.parse::<i64>() {
                    Ok(n) if n > 0 => reply_target(
                        out,
                        label,
                        &IdPart::Valid(crate::core::model::MessageId(n)),
                        opts,
                    ),
                    _ => reply_to,
                };
            }
            "unique_id" | "id" | "media_id" | "" if item.is_none() => {
                item = Some(value.trim_matches('`').trim_matches('"').to_owned());
            }
            _ => {}
        }
    }
    push(out, label, item, reply_to);
}

/// Reads a `send_media` JSON task (`reply_id`: its `reply_to`, read by the caller).
pub(super) fn parse_json_send_media(
    out: &mut ParsedReply,
    label: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
    reply_id: &IdPart<'_>,
    opts: &ParseOptions,
) {
    let item = ["unique_id", "media_id", "id"]
        .iter()
        .find_map(|k| match obj.get(*k) {
            Some(serde_json::Value::String(s)) => Some(s.trim().to_owned()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        });
    let reply_to = reply_target(out, label, reply_id, opts);
    push(out, label, item, reply_to);
}

fn push(
    out: &mut ParsedReply,
    label: &str,
    item: Option<String>,
    reply_to: Option<crate::core::model::MessageId>,
) {
    match item {
        Some(id) if valid_id(&id) => out.actions.push(Action::SendMedia {
            unique_id: id,
            reply_to,
        }),
        Some(id) if !id.is_empty() => warn(
            out,
            label,
            format_args!("{} is not an album id; skipped", excerpt(&id)),
        ),
        _ => warn(out, label, "names no album item; skipped"),
    }
}

#[cfg(test)]
mod tests {
    use crate::core::blocks::{ParseOptions, parse_reply};
    use crate::core::model::MessageId;
    use crate::core::plan::Action;

    fn media(id: &str, reply: Option<i64>) -> Action {
        Action::SendMedia {
            unique_id: id.into(),
            reply_to: reply.map(MessageId),
        }
    }

    #[test]
    fn both_forms_read_the_same_action() {
        let opts = ParseOptions::default();
        let block = parse_reply("# «send_media» 42\n4918428193711131585", &opts);
        assert_eq!(block.actions, vec![media("4918428193711131585", Some(42))]);
        let json = parse_reply(
            r#"[{"kind": "send_media", "unique_id": "ABC123XYZ", "reply_to": 42}]"#,
            &opts,
        );
        assert_eq!(json.actions, vec![media("ABC123XYZ", Some(42))]);
        let number = parse_reply(r#"[{"kind": "send_media", "unique_id": 77}]"#, &opts);
        assert_eq!(number.actions, vec![media("77", None)]);
        let labelled = parse_reply("# «send-media»\nunique_id: `cat_1`", &opts);
        assert_eq!(labelled.actions, vec![media("cat_1", None)]);
    }

    #[test]
    fn an_item_without_an_id_or_with_a_sentence_is_skipped() {
        let opts = ParseOptions::default();
        let empty = parse_reply("# «send_media»\n", &opts);
        assert!(empty.actions.is_empty());
        assert!(empty.warnings[0].contains("names no album item"));
        let prose = parse_reply("# «send_media»\nthe photo of the beach please", &opts);
        assert!(prose.actions.is_empty(), "{:?}", prose.actions);
        assert!(prose.warnings[0].contains("is not an album id"));
    }
}
