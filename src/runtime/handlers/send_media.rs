//! `send_media`: sends an item of the persona's album by its id, with the task's idempotency
//! key (the backend uploads it once per account and reuses the upload; a retry after a crash
//! between upload and send posts it once). An id the album does not have is refused: a WARN
//! with the event `send_media_refused`, nothing sent, the id never sent as text. The album is
//! the persona's as loaded (a reload replaces it from the next task on).

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::OutgoingMedia;
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct SendMedia;

impl TaskHandler for SendMedia {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::SendMedia {
                unique_id,
                reply_to,
                idempotency_key,
            } = &ctx.task.spec
            else {
                return Err(ctx.spec_mismatch(TaskKind::SendMedia));
            };
            let Some(item) = ctx.persona.album.get(unique_id) else {
                tracing::warn!(
                    event = "send_media_refused",
                    agent = %ctx.key.agent,
                    chat = ctx.key.chat.0,
                    unique_id = %unique_id,
                    album_items = ctx.persona.album.items.len(),
                    "send_media refused: the album has no item with this id; nothing sent"
                );
                metrics::counter!("personad_album_sends_total", "outcome" => "refused")
                    .increment(1);
                return Ok(Outcome::Done);
            };
            let msg = OutgoingMedia {
                chat: ctx.chat.id,
                album_id: item.id.clone(),
                kind: item.kind,
                path: item.path.clone(),
                file_name: item.file_name.clone(),
                mime: item.mime.clone(),
                content_hash: item.content_hash.clone(),
                reply_to: *reply_to,
                idempotency_key: idempotency_key.0,
            };
            let sent = ctx.telegram.send_media(msg).await?;
            tracing::info!(event = "media_sent", agent = %ctx.key.agent, chat = ctx.key.chat.0, message_id = sent.id.0, unique_id = %item.id, kind = item.kind.as_str(), "sent an album item");
            metrics::counter!("personad_album_sends_total", "outcome" => "sent").increment(1);
            Ok(Outcome::Done)
        })
    }
}
