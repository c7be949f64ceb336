//! Building and sending outbound messages over MTProto: reply targets and forum topics, the
//! sent id in Telegram's answer, sticker documents and sets, blocking, raw text sends and
//! history pages. Helpers of the backend's `Telegram` implementation.

use std::collections::HashMap;
use std::sync::PoisonError;

use grammers_client::tl;

use super::{MtprotoTelegram, SendAnswer, UnreadFlags};
use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::recover::{self, CallError};
use crate::core::model::{
    ChatId, Message, MessageId, OutgoingSticker, OutgoingText, Sender, StickerChoice,
    TelegramError, TgResult,
};

impl MtprotoTelegram {
    /// The forum topic of a message we answer, if it was in one.
    pub(super) fn topic(&self, chat: ChatId, reply: Option<MessageId>) -> Option<i32> {
        let id = reply.and_then(|r| i32::try_from(r.0).ok())?;
        self.topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_message
            .get(&(chat, id))
            .copied()
    }

    /// The forum topic of the newest message from others in `chat`, if it is a forum.
    pub(super) fn current_topic(&self, chat: ChatId) -> Option<i32> {
        self.topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest
            .get(&chat)
            .and_then(|(_, topic)| *topic)
    }

    /// The reply header of a send: the message answered, in its forum topic. A part that
    /// quotes nothing goes to the forum topic of the newest message from others (where the
    /// conversation is), not to General: its header names the topic alone.
    pub(super) fn reply_to(
        &self,
        chat: ChatId,
        reply: Option<MessageId>,
    ) -> Option<tl::enums::InputReplyTo> {
        let (id, top_msg_id) = match reply.and_then(|r| i32::try_from(r.0).ok()) {
            Some(id) => (id, self.topic(chat, reply)),
            None => (self.current_topic(chat)?, None),
        };
        Some(
            tl::types::InputReplyToMessage {
                reply_to_msg_id: id,
                top_msg_id,
                reply_to_peer_id: None,
                quote_text: None,
                quote_entities: None,
                quote_offset: None,
                monoforum_peer_id: None,
                todo_item_id: None,
                poll_option: None,
            }
            .into(),
        )
    }

    /// The id of the message an `Updates` answer to a send created.
    pub(super) fn sent_id(updates: &tl::enums::Updates, random_id: i64) -> Option<i32> {
        match updates {
            tl::enums::Updates::UpdateShortSentMessage(u) => Some(u.id),
            tl::enums::Updates::Updates(u) => Self::id_in(&u.updates, random_id),
            tl::enums::Updates::Combined(u) => Self::id_in(&u.updates, random_id),
            _ => None,
        }
    }

    pub(super) fn id_in(updates: &[tl::enums::Update], random_id: i64) -> Option<i32> {
        updates.iter().find_map(|u| match u {
            tl::enums::Update::MessageId(m) if m.random_id == random_id => Some(m.id),
            _ => None,
        })
    }

    pub(super) fn outgoing(
        &self,
        chat: ChatId,
        id: i32,
        text: String,
        reply_to: Option<MessageId>,
    ) -> Message {
        Message {
            id: MessageId(i64::from(id)),
            chat,
            sender: Sender {
                id: self.self_id,
                name: String::new(),
                username: self.self_username(),
                is_bot: false,
                service: false,
                deleted: false,
            },
            outgoing: true,
            text,
            mentions: Vec::new(),
            reply_to,
            date: self.clock.now(),
            media: None,
        }
    }

    /// Finds a sticker document by set and name (or emoji), fetching the set when it is not
    /// cached or when `refresh` asks for fresh file references.
    pub(super) async fn sticker(
        &self,
        choice: &StickerChoice,
        refresh: bool,
    ) -> TgResult<tl::enums::InputDocument> {
        if !refresh
            && let Some(doc) = self
                .sticker_sets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&choice.set)
                .and_then(|set| set.get(&choice.name))
        {
            return Ok(doc.clone());
        }
        self.fetch_set(&choice.set)
            .await?
            .remove(&choice.name)
            .ok_or_else(|| {
                TelegramError::NotFound(format!("sticker {:?} in set {}", choice.name, choice.set))
            })
    }

    /// Fetches a sticker set from Telegram (fresh file references) and caches it: sticker
    /// name (its emoji) → document.
    pub(super) async fn fetch_set(
        &self,
        short_name: &str,
    ) -> TgResult<HashMap<String, tl::enums::InputDocument>> {
        let answer = self
            .call(&tl::functions::messages::GetStickerSet {
                stickerset: tl::types::InputStickerSetShortName {
                    short_name: short_name.to_string(),
                }
                .into(),
                hash: 0,
            })
            .await
            .map_err(|e| classify(&e))?;
        let tl::enums::messages::StickerSet::Set(set) = answer else {
            return Err(TelegramError::NotFound(format!("sticker set {short_name}")));
        };
        let mut by_name: HashMap<String, tl::enums::InputDocument> = HashMap::new();
        for doc in &set.documents {
            let tl::enums::Document::Document(d) = doc else {
                continue;
            };
            let input: tl::enums::InputDocument = tl::types::InputDocument {
                id: d.id,
                access_hash: d.access_hash,
                file_reference: d.file_reference.clone(),
            }
            .into();
            for attr in &d.attributes {
                if let tl::enums::DocumentAttribute::Sticker(s) = attr {
                    by_name
                        .entry(s.alt.clone())
                        .or_insert_with(|| input.clone());
                }
            }
        }
        self.sticker_sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(short_name.to_string(), by_name.clone());
        Ok(by_name)
    }

    pub(super) async fn send_sticker_doc(
        &self,
        msg: &OutgoingSticker,
        doc: tl::enums::InputDocument,
    ) -> Result<tl::enums::Updates, grammers_client::InvocationError> {
        let peer = self
            .input_peer(msg.chat)
            .await
            .map_err(|_| grammers_client::InvocationError::Dropped("no peer ref"))?;
        let media = tl::types::InputMediaDocument {
            spoiler: false,
            id: doc,
            video_cover: None,
            video_timestamp: None,
            ttl_seconds: None,
            query: None,
        };
        let reply_to = self.reply_to(msg.chat, msg.reply_to);
        self.call(&send_media_request(
            peer,
            reply_to,
            media.into(),
            msg.idempotency_key,
        ))
        .await
    }

    pub(super) async fn set_blocked(&self, chat: ChatId, blocked: bool) -> TgResult<()> {
        let result = recover::with_peer_retry(self, chat, || async {
            let id = self.input_peer(chat).await?;
            let result = if blocked {
                self.call(&tl::functions::contacts::Block {
                    my_stories_from: false,
                    id,
                })
                .await
            } else {
                self.call(&tl::functions::contacts::Unblock {
                    my_stories_from: false,
                    id,
                })
                .await
            };
            result.map(|_| ()).map_err(|e| Self::call_error(&e))
        })
        .await;
        self.blocked.invalidate(&());
        result.map_err(CallError::into_error)
    }

    /// One `messages.sendMessage`, with or without the entities.
    pub(super) async fn raw_send_text(
        &self,
        msg: &OutgoingText,
        text: &str,
        entities: Option<&Vec<tl::enums::MessageEntity>>,
    ) -> Result<SendAnswer, CallError> {
        let peer = self.input_peer(msg.chat).await?;
        let request = tl::functions::messages::SendMessage {
            no_webpage: true,
            silent: false,
            background: false,
            clear_draft: false,
            noforwards: false,
            update_stickersets_order: false,
            invert_media: false,
            allow_paid_floodskip: false,
            peer,
            reply_to: self.reply_to(msg.chat, msg.reply_to),
            message: text.to_string(),
            random_id: msg.idempotency_key,
            reply_markup: None,
            entities: entities.filter(|e| !e.is_empty()).cloned(),
            schedule_date: None,
            schedule_repeat_period: None,
            send_as: None,
            quick_reply_shortcut: None,
            effect: None,
            allow_paid_stars: None,
            suggested_post: None,
            rich_message: None,
        };
        match self.call(&request).await {
            Ok(updates) => Ok(SendAnswer::Sent(Self::sent_id(
                &updates,
                msg.idempotency_key,
            ))),
            Err(e) if Self::is_duplicate(&e) => Ok(SendAnswer::Duplicate),
            Err(e) => Err(Self::call_error(&e)),
        }
    }

    /// The id of what a send created, recorded in the ledger (a duplicate is resolved to
    /// the message an earlier run sent).
    pub(super) async fn sent_message_id(
        &self,
        chat: &ChatId,
        random_id: i64,
        answer: SendAnswer,
        text: &str,
    ) -> i32 {
        let id = match answer {
            SendAnswer::Sent(id) => {
                let id = MessageId(i64::from(id.unwrap_or(0)));
                self.remember_sent(*chat, id, random_id).await;
                id
            }
            SendAnswer::Duplicate => {
                tracing::info!(chat = %chat, "message was already sent before a restart");
                self.resolve_duplicate(*chat, random_id, text).await
            }
        };
        i32::try_from(id.0).unwrap_or(0)
    }

    /// Clears what readHistory leaves behind in a chat we handled: its unread mentions
    /// (messages.readMentions) and the owner's "marked unread" flag, so neither fires again
    /// at the next start. Failures are logged: the chat was read all the same.
    pub(super) async fn clear_unread(&self, chat: ChatId) {
        let flags = self.take_unread(chat);
        if flags == UnreadFlags::default() {
            return;
        }
        let Ok(peer) = self.input_peer(chat).await else {
            return;
        };
        if flags.mentions {
            let mut rounds = 0;
            loop {
                let answer = self
                    .call(&tl::functions::messages::ReadMentions {
                        peer: peer.clone(),
                        top_msg_id: None,
                    })
                    .await;
                rounds += 1;
                if let Ok(tl::enums::messages::AffectedHistory::History(h)) = &answer {
                    let channel = match &peer {
                        tl::enums::InputPeer::Channel(c) => Some(c.channel_id),
                        _ => None,
                    };
                    self.feed_affected(channel, h.pts, h.pts_count);
                }
                match answer {
                    Ok(tl::enums::messages::AffectedHistory::History(h))
                        if h.offset > 0 && rounds < recover::MAX_DELETE_ROUNDS => {}
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(chat = %chat, error = %classify(&e), "could not clear the chat's unread mentions");
                        break;
                    }
                }
            }
        }
        if flags.marked
            && let Err(e) = self
                .call(&tl::functions::messages::MarkDialogUnread {
                    unread: false,
                    parent_peer: None,
                    peer: tl::types::InputDialogPeer { peer }.into(),
                })
                .await
        {
            tracing::warn!(chat = %chat, error = %classify(&e), "could not clear the chat's unread mark");
        }
    }

    pub(super) fn is_duplicate(e: &grammers_client::InvocationError) -> bool {
        e.is("RANDOM_ID_DUPLICATE")
    }
}

/// A `messages.sendMedia` of `media` with no caption and nothing else set, `random_id` the
/// send's idempotency key (a sticker, a voice note).
pub(super) fn send_media_request(
    peer: tl::enums::InputPeer,
    reply_to: Option<tl::enums::InputReplyTo>,
    media: tl::enums::InputMedia,
    random_id: i64,
) -> tl::functions::messages::SendMedia {
    tl::functions::messages::SendMedia {
        silent: false,
        background: false,
        clear_draft: false,
        noforwards: false,
        update_stickersets_order: false,
        invert_media: false,
        allow_paid_floodskip: false,
        peer,
        reply_to,
        media,
        message: String::new(),
        random_id,
        reply_markup: None,
        entities: None,
        schedule_date: None,
        schedule_repeat_period: None,
        send_as: None,
        quick_reply_shortcut: None,
        effect: None,
        allow_paid_stars: None,
        suggested_post: None,
    }
}
