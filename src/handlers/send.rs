//! `send`: posts one text message (`text`, optional `reply_to`) with the idempotency key the
//! task carried since before it started, so a retry after a crash never posts twice.

use super::{HandlerResult, Outcome, TaskContext, TaskError, TaskHandler};
use crate::clock::BoxFuture;
use crate::telegram::OutgoingText;

pub struct Send;

impl TaskHandler for Send {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let text = ctx
                .task
                .param_str("text")
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| TaskError::Permanent("send task without text".into()))?;
            let msg = OutgoingText {
                chat: ctx.chat.id,
                text: text.to_string(),
                reply_to: ctx.reply_to(),
                idempotency_key: ctx.idempotency_key()?,
            };
            let sent = ctx.telegram.send_text(msg).await?;
            tracing::info!(event = "message_sent", agent = %ctx.key.agent, chat = ctx.key.chat.0, message_id = sent.id.0, chars = text.chars().count(), "sent a message");
            tracing::debug!(event = "message_sent_body", agent = %ctx.key.agent, chat = ctx.key.chat.0, text, "sent text");
            metrics::counter!("personad_messages_sent_total").increment(1);
            Ok(Outcome::Done)
        })
    }
}
