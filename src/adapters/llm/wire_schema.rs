//! What the OpenAI-compatible client derives from its inputs for the wire: a request's schema
//! as JSON Schema (from the OpenAPI subset the rest of the project writes for Gemini), and a
//! URL as errors and `check` show it (no credentials, no query). Pure; used by `openai` and the
//! provider router.

/// `url` without credentials or query, for error messages.
pub(crate) fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "(the configured URL)".to_owned(),
    }
}

/// A request's schema (the OpenAPI subset Gemini takes: upper-case types, `nullable`,
/// `propertyOrdering`) as JSON Schema: lower-case types, a nullable type as `[type, "null"]`,
/// no ordering, and objects closed to other properties.
pub(crate) fn json_schema(schema: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match schema {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            let nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
            for (k, v) in map {
                match k.as_str() {
                    "nullable" | "propertyOrdering" => {}
                    "type" => {
                        let t = v
                            .as_str()
                            .map_or(Value::Null, |t| Value::String(t.to_ascii_lowercase()));
                        let t = if nullable {
                            Value::Array(vec![t, Value::String("null".into())])
                        } else {
                            t
                        };
                        out.insert(k.clone(), t);
                    }
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(name, s)| (name.clone(), json_schema(s)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(k.clone(), json_schema(v));
                    }
                }
            }
            if out.get("type") == Some(&Value::String("object".into())) {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}
