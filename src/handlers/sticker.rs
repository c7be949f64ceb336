//! `sticker`: sends a sticker named by `set` and `name`, with the task's idempotency key.

use super::{HandlerResult, Outcome, TaskContext, TaskError, TaskHandler};
use crate::clock::BoxFuture;
use crate::telegram::{OutgoingSticker, StickerChoice};

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
            let msg = OutgoingSticker {
                chat: ctx.chat.id,
                sticker: StickerChoice {
                    set: set.to_string(),
                    name: name.to_string(),
                },
                reply_to: ctx.reply_to(),
                idempotency_key: ctx.idempotency_key()?,
            };
            ctx.telegram.send_sticker(msg).await?;
            Ok(Outcome::Done)
        })
    }
}
