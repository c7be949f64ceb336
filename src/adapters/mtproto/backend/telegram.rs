//! The [`Telegram`] port over MTProto: each operation of the trait as grammers calls, with
//! errors classified, sends made idempotent through the sent ledger and random ids.

use std::sync::PoisonError;

use grammers_client::session::types::PeerId;
use grammers_client::tl;

use super::{MtprotoTelegram, SendAnswer};
use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::format::to_telegram;
use crate::adapters::mtproto::recover::{self, CallError};
use crate::core::model::{
    Chat, ChatId, ChatKind, Message, MessageId, OutgoingMedia, OutgoingSticker, OutgoingText,
    OutgoingVoice, StickerChoice, TelegramError, TgResult,
};
use crate::core::time::BoxFuture;
use crate::ports::telegram::Telegram;

impl Telegram for MtprotoTelegram {
    fn self_id(&self) -> i64 {
        self.self_id
    }

    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        Box::pin(self.fetch_allowed_reactions(chat))
    }

    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>> {
        Box::pin(async move {
            let kind = if chat.0 > 0 {
                ChatKind::Direct
            } else {
                ChatKind::Group
            };
            let id = PeerId::from_bot_api_dialog_id(chat.0)
                .ok_or_else(|| TelegramError::NotFound(format!("chat id {chat}")))?;
            let _ = id;
            let title = self
                .peers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(chat.0)
                .map(|d| d.name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| chat.to_string());
            Ok(Chat {
                id: chat,
                kind,
                title,
            })
        })
    }

    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let (text, entities) = to_telegram(&msg.text);
            // Until this send returns, an outgoing echo of this text in this chat is ours.
            let _in_flight = self.ledger.begin(msg.chat, &text);
            let answer = recover::with_peer_retry(self, msg.chat, || {
                recover::with_entity_fallback(|with_entities| {
                    self.raw_send_text(&msg, &text, with_entities.then_some(&entities))
                })
            })
            .await
            .map_err(CallError::into_error)?;
            let id = self
                .sent_message_id(&msg.chat, msg.idempotency_key, answer, &text)
                .await;
            Ok(self.outgoing(msg.chat, id, text, msg.reply_to))
        })
    }

    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let _in_flight = self.ledger.begin(msg.chat, "");
            let doc = self.sticker(&msg.sticker, false).await?;
            let mut result = self.send_sticker_doc(&msg, doc.clone()).await;
            if let Err(e) = &result
                && e.is("FILE_REFERENCE_*")
            {
                // File references expire: fetch the set again for a fresh one.
                let doc = self.sticker(&msg.sticker, true).await?;
                result = self.send_sticker_doc(&msg, doc).await;
            }
            let answer = match result {
                Ok(updates) => Ok(SendAnswer::Sent(Self::sent_id(
                    &updates,
                    msg.idempotency_key,
                ))),
                Err(e) if Self::is_duplicate(&e) => Ok(SendAnswer::Duplicate),
                Err(e) => Err(Self::call_error(&e)),
            };
            let answer = match answer {
                Err(CallError::UnknownPeer(e)) => {
                    if !self.learn(msg.chat).await {
                        return Err(e);
                    }
                    match self.send_sticker_doc(&msg, doc).await {
                        Ok(updates) => {
                            SendAnswer::Sent(Self::sent_id(&updates, msg.idempotency_key))
                        }
                        Err(e) if Self::is_duplicate(&e) => SendAnswer::Duplicate,
                        Err(e) => return Err(classify(&e)),
                    }
                }
                other => other.map_err(CallError::into_error)?,
            };
            let id = self
                .sent_message_id(&msg.chat, msg.idempotency_key, answer, "")
                .await;
            Ok(self.outgoing(msg.chat, id, String::new(), msg.reply_to))
        })
    }

    fn send_voice(&self, msg: OutgoingVoice) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(self.voice(msg))
    }

    fn send_media(&self, msg: OutgoingMedia) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(self.album_item(msg))
    }

    fn recording_voice(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.record_audio_action(chat))
    }

    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>> {
        let emoji = emoji.to_string();
        Box::pin(async move {
            let msg_id = i32::try_from(message.0)
                .map_err(|_| TelegramError::Invalid(format!("message id {message}")))?;
            let send = |emoticon: String| async move {
                let peer = self.input_peer(chat).await?;
                self.call(&tl::functions::messages::SendReaction {
                    big: false,
                    add_to_recent: false,
                    peer,
                    msg_id,
                    reaction: Some(vec![tl::types::ReactionEmoji { emoticon }.into()]),
                })
                .await
                .map(|_| ())
                .map_err(|e| Self::call_error(&e))
            };
            let first = recover::with_peer_retry(self, chat, || send(emoji.clone())).await;
            match first {
                // Telegram's list spells some emoji with U+FE0F and some without.
                Err(CallError::BadReaction(e)) => match recover::reaction_variant(&emoji) {
                    Some(other) => send(other).await.map_err(CallError::into_error),
                    None => Err(e),
                },
                other => other.map_err(CallError::into_error),
            }
        })
    }

    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.chat_action(chat, tl::enums::SendMessageAction::SendMessageTypingAction))
    }

    fn set_online(&self, online: bool) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            self.call(&tl::functions::account::UpdateStatus { offline: !online })
                .await
                .map(|_| ())
                .map_err(|e| Self::call_error(&e).into_error())
        })
    }

    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            let max_id = i32::try_from(upto.0).unwrap_or(0);
            recover::with_peer_retry(self, chat, || async {
                let peer = self.peer(chat).await?;
                let result = if peer.id.kind() == grammers_client::session::types::PeerKind::Channel
                {
                    self.call(&tl::functions::channels::ReadHistory {
                        channel: peer.into(),
                        max_id,
                    })
                    .await
                    .map(|_| ())
                } else {
                    self.call(&tl::functions::messages::ReadHistory {
                        peer: peer.into(),
                        max_id,
                    })
                    .await
                    .map(|_| ())
                };
                result.map_err(|e| Self::call_error(&e))
            })
            .await
            .map_err(CallError::into_error)?;
            self.clear_unread(chat).await;
            Ok(())
        })
    }

    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.set_blocked(chat, true))
    }

    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.set_blocked(chat, false))
    }

    fn delete_history(&self, chat: ChatId, for_both_sides: bool) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            if chat.0 <= 0 {
                return Err(TelegramError::Invalid(
                    "history is only deleted in direct chats".into(),
                ));
            }
            // Telegram deletes a long history in parts: repeat while it reports more left.
            recover::delete_all(|| async {
                recover::with_peer_retry(self, chat, || async {
                    let peer = self.input_peer(chat).await?;
                    self.call(&tl::functions::messages::DeleteHistory {
                        just_clear: false,
                        revoke: for_both_sides,
                        peer,
                        max_id: 0,
                        min_date: None,
                        max_date: None,
                    })
                    .await
                    .map(|tl::enums::messages::AffectedHistory::History(h)| {
                        // A direct chat: the account's common pts.
                        self.feed_affected(None, h.pts, h.pts_count);
                        h.offset
                    })
                    .map_err(|e| Self::call_error(&e))
                })
                .await
                .map_err(CallError::into_error)
            })
            .await
            .map(|_| ())
        })
    }

    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>> {
        Box::pin(async move {
            recover::with_peer_retry(self, chat, || self.history_page(chat, limit))
                .await
                .map_err(CallError::into_error)
        })
    }

    fn sticker_set(
        &self,
        set: &str,
    ) -> BoxFuture<'_, TgResult<Vec<crate::core::model::SetSticker>>> {
        let set = set.to_string();
        Box::pin(async move {
            let docs = self.fetch_set(&set).await?;
            let mut out: Vec<crate::core::model::SetSticker> = docs
                .into_iter()
                .filter_map(|(name, doc)| match doc {
                    tl::enums::InputDocument::Document(d) => Some(crate::core::model::SetSticker {
                        name,
                        unique_id: d.id.to_string(),
                    }),
                    _ => None,
                })
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
    }

    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>> {
        let choice = choice.clone();
        Box::pin(async move {
            match self.sticker(&choice, false).await {
                Ok(_) => Ok(true),
                Err(TelegramError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn download_media(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> BoxFuture<'_, TgResult<Vec<u8>>> {
        Box::pin(self.download(chat, message, max_bytes))
    }
}
