//! `send`: posts one text message (`text`, optional `reply_to`) with the idempotency key the
//! task carried since before it started, so a retry after a crash never posts twice. A text
//! longer than Telegram takes in one message goes out as several ([`send_in_parts`], shared
//! with the `draft` handler's notices).

use std::collections::VecDeque;

use crate::core::blocks::TELEGRAM_TEXT_LIMIT_UTF16;
use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::{Message, OutgoingText, TelegramError};
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::time::BoxFuture;
use crate::ports::telegram::Telegram;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

/// The shortest part a text refused as too long is split into (below it the refusal stands).
const MIN_PART_UTF16: usize = 256;

/// Sends `msg` as the messages it takes ([`OutgoingText::parts`] at Telegram's limit), in
/// order. A part Telegram still refuses as too long (MESSAGE_TOO_LONG: its count can differ
/// from ours) is split again at half the limit and sent as smaller parts; below
/// [`MIN_PART_UTF16`] the refusal stands. Returns the messages sent, in order (at least one).
pub(super) async fn send_in_parts(
    telegram: &dyn Telegram,
    msg: OutgoingText,
) -> Result<Vec<Message>, TelegramError> {
    let limit = TELEGRAM_TEXT_LIMIT_UTF16;
    let mut queue: VecDeque<(OutgoingText, usize)> =
        msg.parts(limit).into_iter().map(|p| (p, limit)).collect();
    let mut sent = Vec::new();
    while let Some((part, limit)) = queue.pop_front() {
        match telegram.send_text(part.clone()).await {
            Ok(message) => sent.push(message),
            Err(e @ TelegramError::TooLong(_)) => {
                let smaller = limit / 2;
                let pieces = part.parts(smaller);
                if smaller < MIN_PART_UTF16 || pieces.len() < 2 {
                    return Err(e);
                }
                tracing::warn!(
                    event = "text_split_further",
                    chat = part.chat.0,
                    limit_utf16 = smaller,
                    parts = pieces.len(),
                    "Telegram refused a part as too long; sending it in smaller parts"
                );
                for piece in pieces.into_iter().rev() {
                    queue.push_front((piece, smaller));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

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
            tracing::debug!(event = "message_sent_body", agent = %ctx.key.agent, chat = ctx.key.chat.0, text, "sent text");
            metrics::counter!("personad_messages_sent_total").increment(1);
            Ok(Outcome::Done)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::send_in_parts;
    use crate::adapters::memory::{MemoryTelegram, Op};
    use crate::core::blocks::{TELEGRAM_TEXT_LIMIT_UTF16, utf16_len};
    use crate::core::model::{Chat, ChatId, ChatKind, MessageId, OutgoingText, TelegramError};
    use crate::ports::clock::{SharedClock, VirtualClock};

    fn account() -> MemoryTelegram {
        let t0 = "2026-01-01T12:00:00Z".parse().unwrap_or_default();
        let clock: SharedClock = Arc::new(VirtualClock::new(t0, true));
        let tg = MemoryTelegram::new("Wren", clock, None).expect("no files");
        tg.ensure_chat(Chat {
            id: ChatId(5),
            kind: ChatKind::Direct,
            title: "Ann".into(),
        });
        tg
    }

    fn long_text() -> String {
        (0..60)
            .map(|i| format!("Paragraph {i}: {}", "words and more words ".repeat(7)))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn text(body: &str) -> OutgoingText {
        OutgoingText {
            chat: ChatId(5),
            text: body.to_string(),
            reply_to: Some(MessageId(3)),
            idempotency_key: 42,
        }
    }

    /// A text longer than one message goes out in order as several, each within Telegram's
    /// limit, the reply on the first only; sent again with the same key, nothing is posted
    /// twice.
    #[tokio::test]
    async fn a_long_text_goes_out_in_parts_once() {
        let tg = account();
        let body = long_text();
        assert!(utf16_len(&body) > TELEGRAM_TEXT_LIMIT_UTF16);
        let sent = send_in_parts(&tg, text(&body)).await.expect("sent");
        assert!(sent.len() >= 2, "{}", sent.len());
        assert!(
            sent.iter()
                .all(|m| utf16_len(&m.text) <= TELEGRAM_TEXT_LIMIT_UTF16)
        );
        assert_eq!(sent[0].reply_to, Some(MessageId(3)));
        assert!(sent[1..].iter().all(|m| m.reply_to.is_none()));
        let words: Vec<&str> = sent
            .iter()
            .flat_map(|m| m.text.split_whitespace())
            .collect();
        assert!(
            words == body.split_whitespace().collect::<Vec<_>>(),
            "the parts are the text"
        );
        let again = send_in_parts(&tg, text(&body)).await.expect("sent");
        assert_eq!(again, sent, "the same messages, none posted twice");
        assert_eq!(tg.transcript(ChatId(5)).len(), sent.len());
    }

    /// A part Telegram still refuses as too long is split again at half the limit and sent;
    /// the refusal stands only for a part that cannot be split that small.
    #[tokio::test]
    async fn a_part_refused_as_too_long_is_split_again() {
        let tg = account();
        let body = long_text();
        tg.fail_next(
            Op::SendText,
            TelegramError::TooLong("MESSAGE_TOO_LONG (400)".into()),
        );
        let sent = send_in_parts(&tg, text(&body)).await.expect("sent");
        let plain = send_in_parts(&account(), text(&body)).await.expect("sent");
        assert!(
            sent.len() > plain.len(),
            "{} vs {}",
            sent.len(),
            plain.len()
        );
        assert!(
            sent.iter()
                .take(2)
                .all(|m| utf16_len(&m.text) <= TELEGRAM_TEXT_LIMIT_UTF16 / 2)
        );
        let tg = account();
        for _ in 0..8 {
            tg.fail_next(
                Op::SendText,
                TelegramError::TooLong("MESSAGE_TOO_LONG (400)".into()),
            );
        }
        let refused = send_in_parts(&tg, text(&body)).await;
        assert!(
            matches!(refused, Err(TelegramError::TooLong(_))),
            "{refused:?}"
        );
    }
}
