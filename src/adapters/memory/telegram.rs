//! The [`Telegram`] trait on the in-memory account: each call reads or changes the account's
//! state (in the parent module), records outbound actions and honours injected failures. Like
//! Telegram, it refuses a text longer than 4096 UTF-16 units as sent (MESSAGE_TOO_LONG), and a
//! voice note in a chat marked as refusing them (see `voice`).

use super::{Action, MemoryTelegram, Op, Record};
use crate::core::model::{
    Chat, ChatId, MediaInfo, Message, MessageId, OutgoingMedia, OutgoingSticker, OutgoingText,
    OutgoingVoice, StickerChoice, TelegramError, TgResult,
};
use crate::core::time::BoxFuture;
use crate::ports::telegram::Telegram;

impl Telegram for MemoryTelegram {
    fn self_id(&self) -> i64 {
        self.self_id
    }

    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        let mut st = self.lock();
        st.allowed_reactions_calls += 1;
        let list = st.allowed_reactions.get(&chat).cloned();
        Box::pin(async move { Ok(list) })
    }

    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>> {
        Box::pin(async move {
            self.enter(Op::Chat).await?;
            self.with_chat(chat, |log| log.chat.clone())
        })
    }

    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.enter(Op::SendText).await?;
            // As Telegram: the text as sent (Markdown rendered) in UTF-16 units.
            let rendered = crate::core::markdown::rendered_text(&msg.text);
            if crate::core::blocks::utf16_len(&rendered)
                > crate::core::blocks::TELEGRAM_TEXT_LIMIT_UTF16
            {
                return Err(TelegramError::TooLong("MESSAGE_TOO_LONG (400)".into()));
            }
            let (sent, fresh) = self
                .post(
                    msg.chat,
                    msg.idempotency_key,
                    msg.text,
                    msg.reply_to,
                    |_| None,
                )
                .await?;
            if fresh {
                self.record(Action::Send {
                    chat: msg.chat,
                    message: sent.clone(),
                });
            }
            Ok(sent)
        })
    }

    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.enter(Op::SendSticker).await?;
            let media = MediaInfo {
                kind: crate::core::model::MediaKind::Sticker,
                unique_id: format!("sticker:{}:{}", msg.sticker.set, msg.sticker.name),
                mime: Some("image/webp".into()),
                size: None,
                duration_secs: None,
                file_name: None,
                sticker: Some(crate::core::model::StickerInfo {
                    set: Some(msg.sticker.set.clone()),
                    name: msg.sticker.name.clone(),
                    emoji: None,
                }),
            };
            let chat = msg.chat;
            self.post_media(chat, msg.idempotency_key, msg.reply_to, media, |message| {
                Action::Sticker {
                    chat,
                    message,
                    sticker: msg.sticker,
                }
            })
            .await
        })
    }

    fn send_voice(&self, msg: OutgoingVoice) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.enter(Op::SendVoice).await?;
            self.voice(msg).await
        })
    }

    fn send_media(&self, msg: OutgoingMedia) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.enter(Op::SendMedia).await?;
            self.media(msg).await
        })
    }

    fn recording_voice(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::RecordingVoice).await?;
            self.with_chat(chat, |_| ())?;
            self.record(Action::RecordingVoice { chat });
            Ok(())
        })
    }

    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>> {
        let emoji = emoji.to_string();
        Box::pin(async move {
            self.enter(Op::React).await?;
            if self.find_message(chat, message).await?.is_none() {
                return Err(TelegramError::Invalid(format!(
                    "no message {message} in chat {chat}"
                )));
            }
            self.record(Action::React {
                chat,
                message_id: message,
                emoji,
            });
            Ok(())
        })
    }

    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::Typing).await?;
            self.with_chat(chat, |_| ())?;
            self.record(Action::Typing { chat });
            Ok(())
        })
    }

    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::MarkRead).await?;
            // Read state lives on Telegram's side: it survives a crash of ours, so the
            // twin makes it durable at once (an unread scan after a restart relies on it).
            let changed = self.with_chat_windowed(chat, |log, window| {
                let changed = log.read_upto.is_none_or(|r| r < upto);
                if changed {
                    log.change(Record::Read { upto }, window);
                }
                changed
            })?;
            if changed {
                self.persist(chat).await?;
            }
            self.record(Action::Read { chat, upto });
            Ok(())
        })
    }

    fn set_online(&self, online: bool) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::Status).await?;
            self.record(Action::Status { online });
            Ok(())
        })
    }

    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::Block).await?;
            self.with_chat_windowed(chat, |log, window| {
                log.change(Record::Blocked { blocked: true }, window);
            })?;
            self.persist(chat).await?;
            self.record(Action::Block { chat });
            Ok(())
        })
    }

    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::Unblock).await?;
            self.with_chat_windowed(chat, |log, window| {
                log.change(Record::Blocked { blocked: false }, window);
            })?;
            self.persist(chat).await?;
            self.record(Action::Unblock { chat });
            Ok(())
        })
    }

    fn delete_history(&self, chat: ChatId, for_both_sides: bool) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.enter(Op::DeleteHistory).await?;
            self.with_chat_windowed(chat, |log, window| log.change(Record::Clear, window))?;
            self.persist(chat).await?;
            self.record(Action::Clear {
                chat,
                for_both_sides,
            });
            Ok(())
        })
    }

    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>> {
        Box::pin(async move {
            self.enter(Op::FetchHistory).await?;
            self.history(chat, limit).await
        })
    }

    fn sticker_set(
        &self,
        set: &str,
    ) -> BoxFuture<'_, TgResult<Vec<crate::core::model::SetSticker>>> {
        let set = set.to_string();
        Box::pin(async move {
            let names = self
                .lock()
                .sticker_sets
                .get(&set)
                .cloned()
                .ok_or_else(|| TelegramError::NotFound(format!("sticker set {set}")))?;
            Ok(names
                .into_iter()
                .map(|name| crate::core::model::SetSticker {
                    unique_id: format!("sticker:{set}:{name}"),
                    name,
                })
                .collect())
        })
    }

    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>> {
        let state = self.lock();
        let found = state.sticker_sets.is_empty()
            || state
                .sticker_sets
                .get(&choice.set)
                .is_some_and(|names| names.contains(&choice.name));
        Box::pin(async move { Ok(found) })
    }

    fn download_media(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> BoxFuture<'_, TgResult<Vec<u8>>> {
        Box::pin(async move {
            self.enter(Op::Download).await?;
            let uid = self
                .find_message(chat, message)
                .await?
                .and_then(|m| m.media.map(|x| x.unique_id))
                .ok_or_else(|| TelegramError::NotFound(format!("no media in message {message}")))?;
            let given = self.lock().media.get(&uid).cloned();
            // Else one of our own voice notes (kept as files).
            let bytes = match given {
                Some(bytes) => bytes,
                None => self
                    .voice_file(chat, message)
                    .map(|f| f.as_ref().clone())
                    .ok_or_else(|| TelegramError::NotFound(format!("media {uid}")))?,
            };
            if bytes.len() as u64 > max_bytes {
                return Err(TelegramError::Invalid(format!(
                    "media is {} bytes, over the {max_bytes} byte cap",
                    bytes.len()
                )));
            }
            Ok(bytes)
        })
    }
}
