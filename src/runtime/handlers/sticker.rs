//! `sticker`: sends a sticker named by `set` and `name`, with the task's idempotency key.
//! Resolution: the task's set (the backend's cache, else that one set fetched from
//! Telegram) → a curated sticker of the persona with that name in another set → the name
//! (usually an emoji) sent as text, with a WARN, so the persona's intent is not lost.

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::{OutgoingSticker, OutgoingText, StickerChoice};
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Sticker;

impl TaskHandler for Sticker {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Sticker {
                set,
                name,
                reply_to,
                idempotency_key,
            } = &ctx.task.spec
            else {
                return Err(ctx.spec_mismatch(TaskKind::Sticker));
            };
            let (reply_to, idempotency_key) = (*reply_to, idempotency_key.0);
            let mut sticker = StickerChoice {
                set: set.to_string(),
                name: name.to_string(),
            };
            let mut found = ctx.telegram.has_sticker(&sticker).await?;
            if !found && let Some(curated) = ctx.stickers.find_by_name(&ctx.key.agent, name) {
                // Loaded from that set earlier, so it exists there.
                sticker.set = curated.set;
                found = true;
            }
            if !found {
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
                    reply_to,
                    idempotency_key,
                };
                ctx.telegram.send_text(text).await?;
                return Ok(Outcome::Done);
            }
            let msg = OutgoingSticker {
                chat: ctx.chat.id,
                sticker,
                reply_to,
                idempotency_key,
            };
            ctx.telegram.send_sticker(msg).await?;
            Ok(Outcome::Done)
        })
    }
}
