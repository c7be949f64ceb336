//! `send`: posts one text message (`text`, optional `reply_to`) with the idempotency key the
//! task carried since before it started, so a retry after a crash never posts twice. A text
//! longer than Telegram takes in one message goes out as several
//! ([`send_in_parts`](crate::ports::telegram::send_in_parts), as the `draft` handler's
//! notices do).

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::OutgoingText;
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::time::BoxFuture;
use crate::ports::telegram::send_in_parts;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Send;

impl TaskHandler for Send {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Send {
                text,
                reply_to,
                idempotency_key,
            } = &ctx.task.spec
            else {
                return Err(ctx.spec_mismatch(TaskKind::Send));
            };
            if text.trim().is_empty() {
                return Err(TaskError::Permanent(Cause::NothingToSend));
            }
            let msg = OutgoingText {
                chat: ctx.chat.id,
                text: text.clone(),
                reply_to: *reply_to,
                idempotency_key: idempotency_key.0,
            };
            let sent = send_in_parts(ctx.telegram.as_ref(), msg).await?;
            let last = sent.last().map_or(0, |m| m.id.0);
            tracing::info!(event = "message_sent", agent = %ctx.key.agent, chat = ctx.key.chat.0, message_id = last, parts = sent.len(), chars = text.chars().count(), "sent a message");
            tracing::debug!(event = "message_sent_body", agent = %ctx.key.agent, chat = ctx.key.chat.0, task = %ctx.task.id, text, "sent text");
            metrics::counter!("personad_messages_sent_total").increment(1);
            Ok(Outcome::Done)
        })
    }
}
