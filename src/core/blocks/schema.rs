//! The plan as structured output: the JSON schema a schema-constrained route is asked to
//! answer in (`{"tasks": [...]}`, the same kinds and fields as the original's JSON tasks that
//! `parse_reply` reads, at most `max_tasks` of them), and the instruction that tells the model
//! so. A route that enforces the schema while decoding (Gemini's `responseSchema`, OpenAI's and
//! llama.cpp's `response_format`, Ollama's `format`) cannot answer outside it; the answer goes
//! through the same parser and checks as task blocks. Pure; used by the LLM planner.

use serde_json::{Value, json};

/// The plan's schema in the OpenAPI subset Gemini takes (the OpenAI client converts it to
/// JSON Schema): each task is one of the kinds this persona may use, with the fields that
/// kind needs required (a `send` has its `text`), so a route that enforces the schema cannot
/// produce a task without its content.
pub fn plan_schema(
    max_tasks: usize,
    allow_block: bool,
    allow_clear: bool,
    allow_voice: bool,
    allow_schedule: bool,
) -> Value {
    let string = || json!({"type": "STRING"});
    let id = || json!({"type": "INTEGER", "nullable": true});
    let task = |kind: &str, fields: Value, required: &[&str]| {
        let mut properties = json!({"kind": {"type": "STRING", "enum": [kind]}});
        if let (Some(p), Some(f)) = (properties.as_object_mut(), fields.as_object()) {
            p.extend(f.clone());
        }
        let mut req = vec!["kind"];
        req.extend(required);
        json!({"type": "OBJECT", "properties": properties, "required": req})
    };
    let mut kinds = vec![
        task(
            "send",
            json!({"text": string(), "reply_to": id()}),
            &["text"],
        ),
        task(
            "sticker",
            json!({"sticker_set": string(), "name": string(), "reply_to": id()}),
            &["name"],
        ),
        task("wait", json!({"delay": {"type": "NUMBER"}}), &["delay"]),
        task(
            "react",
            json!({"message_id": {"type": "INTEGER"}, "emoji": string()}),
            &["message_id", "emoji"],
        ),
        task(
            "remember",
            json!({"content": string(), "about": string()}),
            &["content"],
        ),
        task("note", json!({"content": string()}), &["content"]),
        task(
            "intend",
            json!({"id": string(), "content": string()}),
            &["content"],
        ),
        task(
            "plan",
            json!({"id": string(), "content": string()}),
            &["content"],
        ),
        task(
            "xsend",
            json!({"target_channel_id": {"type": "INTEGER"}, "intent": string()}),
            &["target_channel_id", "intent"],
        ),
    ];
    if allow_block {
        kinds.push(task("block", json!({}), &[]));
        kinds.push(task("unblock", json!({}), &[]));
    }
    if allow_clear {
        kinds.push(task("clear-conversation", json!({}), &[]));
    }
    if allow_voice {
        kinds.push(task(
            "voice",
            json!({"text": string(), "reply_to": id()}),
            &["text"],
        ));
    }
    if allow_schedule {
        kinds.push(task(
            "schedule",
            json!({
                "id": string(),
                "start_time": string(),
                "end_time": string(),
                "activity_name": string(),
                "responsiveness": {"type": "INTEGER", "nullable": true},
                "description": string()
            }),
            &["activity_name"],
        ));
    }
    json!({
        "type": "OBJECT",
        "properties": {
            "tasks": {"type": "ARRAY", "maxItems": max_tasks, "items": {"anyOf": kinds}}
        },
        "required": ["tasks"]
    })
}

/// `schema` (a [`plan_schema`]) with the `send_media` task added: for a persona with an album.
pub fn with_send_media(mut schema: Value) -> Value {
    push_kind(
        &mut schema,
        json!({
            "type": "OBJECT",
            "properties": {
                "kind": {"type": "STRING", "enum": ["send_media"]},
                "unique_id": {"type": "STRING"},
                "reply_to": {"type": "INTEGER", "nullable": true}
            },
            "required": ["kind", "unique_id"]
        }),
    );
    schema
}

/// Adds the `retrieve` task to a plan schema made by [`plan_schema`]: only for a persona with
/// `# Allow Retrieve` (one without it never sees the kind).
pub fn offer_retrieve(schema: &mut Value) {
    push_kind(
        schema,
        json!({
            "type": "OBJECT",
            "properties": {
                "kind": {"type": "STRING", "enum": ["retrieve"]},
                "urls": {
                    "type": "ARRAY",
                    "maxItems": crate::core::retrieve::MAX_URLS,
                    "items": {"type": "STRING"}
                }
            },
            "required": ["kind", "urls"]
        }),
    );
}

/// Adds one task kind to a plan schema's list of kinds.
fn push_kind(schema: &mut Value, task: Value) {
    if let Some(kinds) = schema
        .pointer_mut("/properties/tasks/items/anyOf")
        .and_then(Value::as_array_mut)
    {
        kinds.push(task);
    }
}

/// Appended after [`JSON_PLAN_INSTRUCTIONS`] for a persona with `# Allow Retrieve`.
pub const RETRIEVE_JSON_INSTRUCTIONS: &str = "You may also look things up: retrieve (\"urls\": \
up to 3 http or https URLs, or file:schedule.json for your own schedule).";

/// Appended to the system instruction when the plan is asked for as structured output.
pub const JSON_PLAN_INSTRUCTIONS: &str = "\
# How to answer (structured)

Answer with one JSON object, {\"tasks\": [...]}, and nothing else: the tasks in order. Each task \
has a \"kind\" and its fields: send (\"text\", optional \"reply_to\": a message id), sticker \
(\"sticker_set\", \"name\"), wait (\"delay\": seconds), react (\"message_id\", \"emoji\"), \
remember (\"content\", optional \"about\": a person's id), note (\"content\"), intend \
(\"content\", optional \"id\": an intention you hold everywhere), plan (\"content\", optional \"id\": \
a step you mean to take in this chat; an id with empty content deletes either), xsend \
(\"target_channel_id\": another of your chats, \"intent\": a note to yourself there). Write only your own \
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
        let schema = plan_schema(12, false, false, false, false);
        let kinds = &schema["properties"]["tasks"]["items"]["properties"]["kind"]["enum"];
        assert!(
            !kinds
                .as_array()
                .is_some_and(|k| k.contains(&json!("block")))
        );
        assert_eq!(schema["properties"]["tasks"]["maxItems"], json!(12));
    }

    /// `retrieve` is in the schema only once offered.
    #[test]
    fn retrieve_is_listed_only_when_offered() {
        let mut schema = plan_schema(12, true, true, true, false);
        assert!(!schema.to_string().contains("retrieve"));
        offer_retrieve(&mut schema);
        let kinds = schema["properties"]["tasks"]["items"]["anyOf"]
            .as_array()
            .map(|k| {
                k.iter()
                    .map(|t| t["properties"]["kind"]["enum"][0].clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        assert!(kinds.contains(&json!("retrieve")), "{kinds:?}");
    }
}
