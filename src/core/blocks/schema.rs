//! The plan as structured output: the JSON schema a schema-constrained route is asked to
//! answer in (`{"tasks": [...]}`, the same kinds and fields as the original's JSON tasks that
//! `parse_reply` reads, at most `max_tasks` of them), and the instruction that tells the model
//! so. A route that enforces the schema while decoding (Gemini's `responseSchema`, OpenAI's and
//! llama.cpp's `response_format`, Ollama's `format`) cannot answer outside it; the answer goes
//! through the same parser and checks as task blocks. Pure; used by the LLM planner.

use serde_json::{Value, json};

/// The plan's schema in the OpenAPI subset Gemini takes (the OpenAI client converts it to
/// JSON Schema): `kind` is one of the kinds this persona may use.
pub fn plan_schema(max_tasks: usize, allow_block: bool, allow_clear: bool) -> Value {
    let mut kinds = vec![
        "send", "sticker", "wait", "react", "remember", "note", "event",
    ];
    if allow_block {
        kinds.extend(["block", "unblock"]);
    }
    if allow_clear {
        kinds.push("clear-conversation");
    }
    let string = || json!({"type": "STRING"});
    let id = || json!({"type": "INTEGER", "nullable": true});
    json!({
        "type": "OBJECT",
        "properties": {
            "tasks": {
                "type": "ARRAY",
                "maxItems": max_tasks,
                "items": {
                    "type": "OBJECT",
                    "properties": {
                        "kind": {"type": "STRING", "enum": kinds},
                        "text": string(),
                        "reply_to": id(),
                        "sticker_set": string(),
                        "name": string(),
                        "delay": {"type": "NUMBER"},
                        "emoji": string(),
                        "message_id": id(),
                        "content": string(),
                        "about": string(),
                        "id": string(),
                        "intent": string(),
                        "time": string(),
                        "timezone": string(),
                        "interval": string(),
                        "occurrences": {"type": "INTEGER"},
                        "urgent": {"type": "BOOLEAN"}
                    },
                    "required": ["kind"]
                }
            }
        },
        "required": ["tasks"]
    })
}

/// Appended to the system instruction when the plan is asked for as structured output.
pub const JSON_PLAN_INSTRUCTIONS: &str = "\
# How to answer (structured)

Answer with one JSON object, {\"tasks\": [...]}, and nothing else: the tasks in order. Each task \
has a \"kind\" and its fields: send (\"text\", optional \"reply_to\": a message id), sticker \
(\"sticker_set\", \"name\"), wait (\"delay\": seconds), react (\"message_id\", \"emoji\"), \
remember (\"content\", optional \"about\": a person's id), note (\"content\"). Write only your own \
words in \"text\": never the [metadata] or [context] lines, never what the other person says. \
An empty list is silence.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::blocks::{ParseOptions, parse_reply};
    use crate::core::plan::Action;

    /// An answer in the schema's shape is read like the original's JSON tasks.
    #[test]
    fn an_answer_in_the_schemas_shape_becomes_actions() {
        let answer = r#"{"tasks": [{"kind": "send", "text": "hello!", "reply_to": null},
            {"kind": "wait", "delay": 2}, {"kind": "send", "text": "how was the trip?"}]}"#;
        let parsed = parse_reply(answer, &ParseOptions::default());
        let texts: Vec<&str> = parsed
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Send { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            ["hello!", "how was the trip?"],
            "{:?}",
            parsed.warnings
        );
        assert!(
            parse_reply(r#"{"tasks": []}"#, &ParseOptions::default())
                .actions
                .is_empty()
        );
        let schema = plan_schema(12, false, false);
        let kinds = &schema["properties"]["tasks"]["items"]["properties"]["kind"]["enum"];
        assert!(
            !kinds
                .as_array()
                .is_some_and(|k| k.contains(&json!("block")))
        );
        assert_eq!(schema["properties"]["tasks"]["maxItems"], json!(12));
    }
}
