//! `draft`: posts a plan's draft to the owner (the account's Saved Messages, or the chat the
//! persona's `# Admin Chat` names, never another), with the key the
//! task carried since it was made, and reports where it went (a draft longer than one message
//! goes out in several, split like any send; the owner answers the last); the scheduler then
//! keeps the task pending until the owner decides or its timeout passes. Run again at the
//! timeout, it tells the owner what became of the draft and ends it: carried out (`then send`)
//! or dropped. It never decides for the owner otherwise.

use crate::core::approval::{self, OnTimeout, Posted};
use crate::core::graph::{IdempotencyKey, TaskKind, TaskSpec};
use crate::core::model::{ChatId, OutgoingText, TelegramError};
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Draft;

impl TaskHandler for Draft {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Draft {
                draft,
                idempotency_key,
                timeout_secs,
                on_timeout,
                posted,
                ..
            } = &ctx.task.spec
            else {
                return Err(ctx.spec_mismatch(TaskKind::Draft));
            };
            // The persona's own admin chat when it names one, else the account's Saved
            // Messages: never a chat the persona did not name (`--admin-chat` alone).
            let owner = ctx
                .persona
                .admin_chat
                .unwrap_or(ChatId(ctx.telegram.self_id()));
            let id = &ctx.task.id;
            let Some(posted) = posted else {
                let now = ctx.clock.now();
                let deadline =
                    crate::core::time::add(now, std::time::Duration::from_secs(*timeout_secs));
                let tz = ctx
                    .persona
                    .timezone
                    .clone()
                    .unwrap_or(jiff::tz::TimeZone::UTC);
                let when = deadline.to_zoned(tz).strftime("%Y-%m-%d %H:%M %Z");
                let text = approval::notice(id, draft, &when.to_string(), *on_timeout);
                // A long draft goes out in several messages, like any long send; the last one
                // (which says "Reply to this message") is where the owner answers.
                let notice = OutgoingText {
                    chat: owner,
                    text,
                    reply_to: None,
                    idempotency_key: idempotency_key.0,
                };
                let sent = crate::ports::telegram::send_in_parts(ctx.telegram.as_ref(), notice)
                    .await
                    .map_err(posting_failed)?;
                let Some(last) = sent.last() else {
                    return Err(TaskError::Permanent(Cause::NothingToSend));
                };
                tracing::info!(event = "draft_sent_to_owner", agent = %ctx.key.agent, chat = ctx.key.chat.0, draft = %id, message_id = last.id.0, parts = sent.len(), "draft posted to the owner");
                return Ok(Outcome::Drafted(Posted {
                    chat: owner,
                    message: last.id,
                }));
            };
            // The timeout: the owner is told what became of the draft (a key of its own, so
            // a retry never tells twice).
            let what = match on_timeout {
                OnTimeout::Send => "was not answered in time: carried out as planned",
                OnTimeout::Drop => "was not answered in time: dropped, nothing is sent",
            };
            let told = ctx
                .telegram
                .send_text(OutgoingText {
                    chat: posted.chat,
                    text: format!("personad: draft {id} for {} {what}", ctx.chat.title),
                    reply_to: Some(posted.message),
                    idempotency_key: timeout_key(*idempotency_key),
                })
                .await;
            if let Err(e) = told {
                tracing::warn!(event = "owner_notice_failed", agent = %ctx.key.agent, error = %e, "could not tell the owner a draft timed out");
            }
            tracing::info!(event = "draft_timed_out", agent = %ctx.key.agent, chat = ctx.key.chat.0, draft = %id, then = ?on_timeout, "draft not answered in time");
            Ok(match on_timeout {
                OnTimeout::Send => Outcome::Done,
                OnTimeout::Drop => Outcome::Dropped {
                    reason: format!("draft {id} not answered in time"),
                },
            })
        })
    }
}

/// A failure to post the draft is about the owner's chat, never the contact's: a chat that
/// refuses us (the account left the admin group) drops the plan without disabling the
/// contact's chat; the account's own troubles (limited, logged out, a flood wait) and
/// passing failures keep their meaning.
fn posting_failed(e: TelegramError) -> TaskError {
    match e {
        TelegramError::Forbidden(_) | TelegramError::NotFound(_) => {
            TaskError::Permanent(Cause::DraftNotPosted(e))
        }
        other => TaskError::from(other),
    }
}

/// The key of the timeout notice: derived from the draft's, never equal to it.
fn timeout_key(key: IdempotencyKey) -> i64 {
    let k = key.0 ^ 0x5bd1_e995_1234_5678;
    if k == 0 || k == key.0 {
        key.0.wrapping_add(1)
    } else {
        k
    }
}
