//! `sticker`: sends a sticker named by `set` and `name`, with the task's idempotency key.
//! Resolution: the backend checks the task's set (its cache, else the set fetched from
//! Telegram, only that set); a sticker that still cannot be found is replaced by its name
//! (usually an emoji) sent as text, with a WARN, so the persona's intent is not lost.

use super::{HandlerResult, Outcome, TaskContext, TaskError, TaskHandler};
use crate::clock::BoxFuture;
use crate::telegram::{OutgoingSticker, OutgoingText, StickerChoice};

pub struct Sticker;

impl TaskHandler for Sticker {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let (Some(set), Some(name)) = (ctx.task.param_str("set"), ctx.task.param_str("name"))
            else {
                return Err(TaskError::Permanent(
                    "sticker task needs `set` and `name`".into(),
                ));
            };
            let sticker = StickerChoice {
                set: set.to_string(),
                name: name.to_string(),
            };
            if !ctx.telegram.has_sticker(&sticker).await? {
                tracing::warn!(
                    agent = %ctx.key.agent,
                    chat = %ctx.key.chat,
                    set = %sticker.set,
                    name = %sticker.name,
                    "sticker not found: sending its name as text instead"
                );
                let text = OutgoingText {
                    chat: ctx.chat.id,
                    text: sticker.name,
                    reply_to: ctx.reply_to(),
                    idempotency_key: ctx.idempotency_key()?,
                };
                ctx.telegram.send_text(text).await?;
                return Ok(Outcome::Done);
            }
            let msg = OutgoingSticker {
                chat: ctx.chat.id,
                sticker,
                reply_to: ctx.reply_to(),
                idempotency_key: ctx.idempotency_key()?,
            };
            ctx.telegram.send_sticker(msg).await?;
            Ok(Outcome::Done)
        })
    }
}
