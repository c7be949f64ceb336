//! The reader of format 1 graph files (written by releases before typed tasks): each task
//! had a `kind` and an untyped `params` map. [`upgrade`] turns such a graph into today's
//! [`TaskGraph`], checking every parameter once; a task whose parameters do not fit its kind
//! makes the file unreadable (the caller quarantines it, nothing is deleted). A pending
//! `send`/`sticker` without an idempotency key gets one here, before it can ever run.
//! Pure: `codec` calls it, nothing writes format 1 any more.

use crate::core::Invalid;
use jiff::Timestamp;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::core::graph::{
    FORMAT_VERSION, IdempotencyKey, Task, TaskGraph, TaskKind, TaskSpec, TaskStatus,
};
use crate::core::model::{Chat, MessageId};

/// A format 1 graph, as it was written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphV1 {
    pub format: u32,
    pub id: String,
    pub agent: String,
    pub chat: Chat,
    pub seq: u64,
    pub created_at: Timestamp,
    #[serde(default)]
    pub parked_until: Option<Timestamp>,
    pub tasks: Vec<TaskV1>,
}

/// A format 1 task.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskV1 {
    pub id: String,
    pub kind: TaskKind,
    #[serde(default)]
    pub params: Map<String, Value>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub attempts: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default)]
    pub not_before: Option<Timestamp>,
    #[serde(default)]
    pub last_error: Option<String>,
}

/// Converts a format 1 graph; the error names the task and the parameter at fault.
pub fn upgrade(old: GraphV1) -> Result<TaskGraph, Invalid> {
    if old.format != 1 {
        return Err(Invalid::from(format!(
            "format {} read as format 1",
            old.format
        )));
    }
    let tasks = old
        .tasks
        .into_iter()
        .map(|t| {
            let spec = spec_of(t.kind, &t.params).map_err(|e| format!("task {:?}: {e}", t.id))?;
            Ok(Task {
                id: t.id,
                spec,
                depends_on: t.depends_on,
                status: t.status,
                attempts: t.attempts,
                created_at: t.created_at,
                updated_at: t.updated_at,
                not_before: t.not_before,
                woke_at: None,
                last_error: t.last_error,
            })
        })
        .collect::<Result<Vec<_>, Invalid>>()?;
    Ok(TaskGraph {
        format: FORMAT_VERSION,
        id: old.id,
        agent: old.agent,
        chat: old.chat,
        seq: old.seq,
        created_at: old.created_at,
        parked_until: old.parked_until,
        superseded: None,
        tasks,
    })
}

struct Params<'a> {
    kind: TaskKind,
    map: &'a Map<String, Value>,
}

impl Params<'_> {
    fn get<T>(
        &self,
        name: &str,
        what: &str,
        f: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, Invalid> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => f(v).map(Some).ok_or_else(|| {
                Invalid::from(format!(
                    "{} parameter `{name}` is not {what}: {v}",
                    self.kind.as_str()
                ))
            }),
        }
    }

    fn opt_i64(&self, name: &str) -> Result<Option<i64>, Invalid> {
        self.get(name, "an integer", Value::as_i64)
    }

    fn opt_str(&self, name: &str) -> Result<Option<String>, Invalid> {
        self.get(name, "a string", |v| v.as_str().map(str::to_string))
    }

    fn need<T>(&self, name: &str, v: Option<T>) -> Result<T, Invalid> {
        v.ok_or_else(|| Invalid::from(format!("{} task without `{name}`", self.kind.as_str())))
    }

    fn message(&self, name: &str) -> Result<Option<MessageId>, Invalid> {
        Ok(self.opt_i64(name)?.map(MessageId))
    }

    fn key(&self) -> Result<IdempotencyKey, Invalid> {
        Ok(self
            .opt_i64("idempotency_key")?
            .map_or_else(IdempotencyKey::fresh, IdempotencyKey))
    }
}

fn spec_of(kind: TaskKind, map: &Map<String, Value>) -> Result<TaskSpec, Invalid> {
    let p = Params { kind, map };
    Ok(match kind {
        TaskKind::Received => TaskSpec::Received {
            message_id: p.message("message_id")?,
            no_quote: false,
            intent: None,
        },
        TaskKind::Classify => TaskSpec::Classify {
            message_id: p.need("message_id", p.message("message_id")?)?,
        },
        TaskKind::Send => TaskSpec::Send {
            text: p.need("text", p.opt_str("text")?)?,
            reply_to: p.message("reply_to")?,
            idempotency_key: p.key()?,
        },
        TaskKind::Sticker => TaskSpec::Sticker {
            set: p.need("set", p.opt_str("set")?)?,
            name: p.need("name", p.opt_str("name")?)?,
            reply_to: p.message("reply_to")?,
            idempotency_key: p.key()?,
        },
        TaskKind::Wait => TaskSpec::Wait {
            delay_secs: p
                .get("delay_secs", "a number", Value::as_f64)?
                .unwrap_or(0.0),
            typing: p
                .get("typing", "a boolean", Value::as_bool)?
                .unwrap_or(false),
            recording: false,
            retry_of: p.opt_str("retry_of")?,
        },
        TaskKind::React => TaskSpec::React {
            message_id: p.need("message_id", p.message("message_id")?)?,
            emoji: p.need("emoji", p.opt_str("emoji")?)?,
        },
        TaskKind::Remember
        | TaskKind::Note
        | TaskKind::Summarize
        | TaskKind::Intent
        | TaskKind::Schedule
        | TaskKind::Presence
        | TaskKind::Draft
        | TaskKind::Voice
        | TaskKind::XSend
        | TaskKind::Intend
        | TaskKind::ChatPlan
        | TaskKind::EditSchedule
        | TaskKind::SendMedia
        | TaskKind::Retrieve => {
            return Err(Invalid::from(format!(
                "a {kind} task in a format 1 file (format 1 had no memory, presence, draft, voice, xsend, plan, send-media or retrieve tasks)"
            )));
        }
        TaskKind::Block => TaskSpec::Block,
        TaskKind::Unblock => TaskSpec::Unblock,
        TaskKind::ClearConversation => TaskSpec::ClearConversation,
        TaskKind::Shutdown => TaskSpec::Shutdown {
            reason: p.opt_str("reason")?,
        },
    })
}
