//! Reading messages back over raw TL calls through the invoker: history pages
//! (`messages.getHistory`, paged by `offset_id`), single messages by id
//! (`channels.getMessages` / `messages.getMessages`), and the look-up of a message an earlier
//! run sent (RANDOM_ID_DUPLICATE). Each answer's users and chats are cached first (access
//! hashes and names), then its messages are mapped with the backend's mapping. Helpers of
//! the backend's `Telegram` implementation; they decide nothing.

use grammers_client::session::types::PeerKind;
use grammers_client::tl;

use super::MtprotoTelegram;
use crate::adapters::mtproto::recover::CallError;
use crate::core::model::{ChatId, Message, MessageId, TgResult};

/// Most messages Telegram returns per history request.
const PAGE: usize = 100;
/// How many of our newest messages a RANDOM_ID_DUPLICATE look-up reads.
const DUPLICATE_SCAN: usize = 20;

/// The messages, users and chats of a `messages.Messages` answer.
pub(crate) fn parts(
    answer: tl::enums::messages::Messages,
) -> (
    Vec<tl::enums::Message>,
    Vec<tl::enums::User>,
    Vec<tl::enums::Chat>,
) {
    match answer {
        tl::enums::messages::Messages::Messages(m) => (m.messages, m.users, m.chats),
        tl::enums::messages::Messages::Slice(m) => (m.messages, m.users, m.chats),
        tl::enums::messages::Messages::ChannelMessages(m) => (m.messages, m.users, m.chats),
        tl::enums::messages::Messages::NotModified(_) => Default::default(),
    }
}

impl MtprotoTelegram {
    /// One `messages.getHistory` page older than `offset_id` (0: the newest), newest
    /// first, with its users and chats cached.
    pub(crate) async fn history_raw(
        &self,
        chat: ChatId,
        offset_id: i32,
        limit: usize,
    ) -> Result<Vec<tl::enums::Message>, CallError> {
        let peer = self.input_peer(chat).await?;
        let answer = self
            .call(&tl::functions::messages::GetHistory {
                peer,
                offset_id,
                offset_date: 0,
                add_offset: 0,
                limit: i32::try_from(limit.min(PAGE)).unwrap_or(0),
                max_id: 0,
                min_id: 0,
                hash: 0,
            })
            .await
            .map_err(|e| Self::call_error(&e))?;
        let (messages, users, chats) = parts(answer);
        self.cache_peers(users, chats).await;
        Ok(messages)
    }

    /// The newest `limit` messages of a chat, oldest first (pages of at most 100).
    pub(super) async fn history_page(
        &self,
        chat: ChatId,
        limit: usize,
    ) -> Result<Vec<Message>, CallError> {
        let mut out = Vec::with_capacity(limit.min(512));
        let mut offset_id = 0;
        let mut left = limit;
        while left > 0 {
            let page = self.history_raw(chat, offset_id, left).await?;
            let asked = left.min(PAGE);
            let got = page.len();
            for raw in &page {
                if let Ok(mut mapped) = self.map_fetched(raw) {
                    self.resolve_sticker_set(&mut mapped).await;
                    out.push(mapped.message);
                }
            }
            let oldest = page.iter().filter_map(message_id).min();
            match oldest {
                Some(oldest) if got >= asked && oldest > 1 => {
                    offset_id = oldest;
                    left -= got.min(left);
                }
                _ => break,
            }
        }
        out.reverse(); // newest first from Telegram; oldest first for us
        Ok(out)
    }

    /// One message by id (`None`: Telegram has no such message), with the answer's users
    /// and chats cached.
    pub(crate) async fn message_by_id(
        &self,
        chat: ChatId,
        id: i32,
    ) -> Result<Option<tl::enums::Message>, CallError> {
        let peer = self.peer(chat).await?;
        let ids = vec![tl::types::InputMessageId { id }.into()];
        let answer = if peer.id.kind() == PeerKind::Channel {
            self.call(&tl::functions::channels::GetMessages {
                channel: peer.into(),
                id: ids,
            })
            .await
        } else {
            self.call(&tl::functions::messages::GetMessages { id: ids })
                .await
        }
        .map_err(|e| Self::call_error(&e))?;
        let (messages, users, chats) = parts(answer);
        self.cache_peers(users, chats).await;
        Ok(messages
            .into_iter()
            .find(|m| matches!(m, tl::enums::Message::Message(m) if m.id == id)))
    }

    /// The newest of our recent messages in `chat` that `sent` accepts (the message an
    /// earlier run sent before Telegram answered RANDOM_ID_DUPLICATE).
    pub(super) async fn find_sent(
        &self,
        chat: ChatId,
        sent: &(dyn Fn(&tl::types::Message) -> bool + Send + Sync),
    ) -> TgResult<Option<i32>> {
        let page = self
            .history_raw(chat, 0, DUPLICATE_SCAN)
            .await
            .map_err(CallError::into_error)?;
        Ok(page.iter().find_map(|m| match m {
            tl::enums::Message::Message(m) if m.out && sent(m) => Some(m.id),
            _ => None,
        }))
    }

    /// The id of a message an earlier run already sent with `random_id` (Telegram answered
    /// RANDOM_ID_DUPLICATE): from the ledger, else the newest of our recent messages in the
    /// chat with the same text (0 when none is found).
    pub(super) async fn resolve_duplicate(
        &self,
        chat: ChatId,
        random_id: i64,
        text: &str,
    ) -> MessageId {
        let text = text.to_string();
        self.resolve_duplicate_with(chat, random_id, &move |m| m.message == text)
            .await
    }

    /// As [`Self::resolve_duplicate`], the history scan looking for what `sent` accepts.
    pub(super) async fn resolve_duplicate_with(
        &self,
        chat: ChatId,
        random_id: i64,
        sent: &(dyn Fn(&tl::types::Message) -> bool + Send + Sync),
    ) -> MessageId {
        if let Some(id) = self.ledger.by_random_id(chat, random_id) {
            return id;
        }
        match self.find_sent(chat, sent).await {
            Ok(Some(id)) => {
                let id = MessageId(i64::from(id));
                self.remember_sent(chat, id, random_id).await;
                id
            }
            Ok(None) => {
                tracing::warn!(chat = %chat, "a message sent before a restart could not be found again");
                MessageId(0)
            }
            Err(e) => {
                tracing::warn!(chat = %chat, error = %e, "could not look up a message sent before a restart");
                MessageId(0)
            }
        }
    }
}

/// The id of a raw message.
fn message_id(m: &tl::enums::Message) -> Option<i32> {
    match m {
        tl::enums::Message::Message(m) => Some(m.id),
        tl::enums::Message::Service(m) => Some(m.id),
        tl::enums::Message::Empty(m) => Some(m.id),
    }
}
