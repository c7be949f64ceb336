//! `voice`: a voice note saying the task's `text`. The voice port makes it (speech from the
//! persona's engine, encoded, metered, held at the spending cap); the Telegram port sends it
//! with the task's idempotency key, so a retry after a crash between upload and send posts it
//! once. Whenever no voice note can go (no engine, the cap, a failed engine, a chat that
//! refuses voice notes) the same words go as text, with a key of their own derived from the
//! task's, so the persona's answer is never lost and never doubled. The "recording a voice
//! message" indicator is the `wait` before it (`received` paces it like typing).

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::{MessageId, OutgoingText, OutgoingVoice, TelegramError};
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::time::BoxFuture;
use crate::ports::telegram::send_in_parts;
use crate::ports::voice::VoiceRequest;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Voice;

/// The key the words go with as text, when they do: derived from the voice note's, so a retry
/// of the fallback is idempotent too, and never the voice note's own.
fn text_key(voice_key: i64) -> i64 {
    voice_key ^ 0x5A5A_5A5A_5A5A_5A5A
}

impl TaskHandler for Voice {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Voice {
                text,
                reply_to,
                idempotency_key,
            } = &ctx.task.spec
            else {
                return Err(ctx.spec_mismatch(TaskKind::Voice));
            };
            if text.trim().is_empty() {
                return Err(TaskError::Permanent(Cause::NothingToSend));
            }
            let key = idempotency_key.0;
            let Some(maker) = &ctx.voice else {
                return as_text(ctx, text, *reply_to, key, "no voice engine in this process").await;
            };
            let made = maker
                .make(VoiceRequest {
                    agent: &ctx.key.agent,
                    chat: ctx.chat.id,
                    settings: &ctx.persona.voice,
                    text,
                    key,
                })
                .await;
            let made = match made {
                Ok(made) => made,
                Err(why) => return as_text(ctx, text, *reply_to, key, &why.to_string()).await,
            };
            let note = OutgoingVoice {
                chat: ctx.chat.id,
                ogg: made.ogg,
                duration_secs: made.duration_secs,
                waveform: made.waveform,
                text: text.clone(),
                reply_to: *reply_to,
                idempotency_key: key,
            };
            match ctx.telegram.send_voice(note).await {
                Ok(sent) => {
                    // Its words, for later prompts: a history read back from Telegram has
                    // none for a voice note.
                    if let (Some(media), Some(info)) = (&ctx.media, &sent.media) {
                        media.known_words(info, text.clone()).await;
                    }
                    tracing::info!(event = "voice_sent", agent = %ctx.key.agent, chat = ctx.key.chat.0, message_id = sent.id.0, duration_secs = made.duration_secs, chars = text.chars().count(), "sent a voice note");
                    metrics::counter!("personad_voice_notes_total", "outcome" => "sent")
                        .increment(1);
                    Ok(Outcome::Done)
                }
                Err(TelegramError::ContentRefused(why)) => {
                    as_text(
                        ctx,
                        text,
                        *reply_to,
                        key,
                        &format!("the chat refuses voice notes ({why})"),
                    )
                    .await
                }
                Err(e) => Err(e.into()),
            }
        })
    }
}

/// The words as text, because no voice note could go (`why`).
async fn as_text(
    ctx: &TaskContext,
    text: &str,
    reply_to: Option<MessageId>,
    voice_key: i64,
    why: &str,
) -> HandlerResult {
    tracing::warn!(event = "voice_as_text", agent = %ctx.key.agent, chat = ctx.key.chat.0, reason = %why, "no voice note: the words go as text");
    metrics::counter!("personad_voice_notes_total", "outcome" => "text").increment(1);
    let msg = OutgoingText {
        chat: ctx.chat.id,
        text: text.to_owned(),
        reply_to,
        idempotency_key: text_key(voice_key),
    };
    send_in_parts(ctx.telegram.as_ref(), msg).await?;
    Ok(Outcome::Done)
}
