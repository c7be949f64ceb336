//! `ctl say` on the in-memory Telegram (`run --telegram memory`): a message from someone,
//! or from the owner (`--from me`, `--chat me`), put into a chat and handed to the runtime
//! through the admission chain, as the real backend's pump does. Part of [`Controller`].

use std::sync::Arc;

use crate::adapters::memory::{Incoming, user_id_for};
use crate::app::ops::OpError;
use crate::core::model::{Chat, ChatId, ChatKind, OutgoingText};
use crate::ports::telegram::Telegram;

use super::{Controller, Gate, lock};

impl Controller {
    /// `ctl say`: puts a message into an in-memory chat and hands it to the runtime through
    /// the gate (so `--chat me` is the owner writing in Saved Messages).
    pub(super) async fn say(
        &self,
        agent: &str,
        chat: Option<&str>,
        from: &str,
        group: Option<&str>,
        text: &str,
    ) -> Result<String, OpError> {
        let seat = self.seat(agent).ok_or("agent not running")?;
        let Some(memory) = seat.memory else {
            return Err(OpError::from("say needs `personad run --telegram memory`"));
        };
        let chained = lock(&self.ingress).clone();
        let gated = match chained {
            Some(handle) => handle,
            None => self
                .runtime
                .clone()
                .with_gate(Arc::new(Gate(self.clone_arc()?))),
        };
        let saved_messages = chat.is_some_and(|c| c.eq_ignore_ascii_case("me"));
        if saved_messages || from.eq_ignore_ascii_case("me") {
            // The owner writes (from another device): an outgoing message of the account.
            let target = match (saved_messages, group, chat) {
                (true, _, _) => ChatId(memory.self_id()),
                (false, Some(title), _) => {
                    let chat = Chat {
                        id: ChatId(-user_id_for(title)),
                        kind: ChatKind::Group,
                        title: title.to_string(),
                    };
                    memory.ensure_chat(chat.clone());
                    chat.id
                }
                (false, None, Some(c)) => ChatId(
                    c.parse::<i64>()
                        .map_err(|_| OpError(format!("--chat takes an id or `me`, not {c:?}")))?,
                ),
                (false, None, None) => ChatId(memory.self_id()),
            };
            let msg = memory
                .send_text(OutgoingText {
                    chat: target,
                    text: text.to_string(),
                    reply_to: None,
                    idempotency_key: fastrand::i64(1..),
                })
                .await
                .map_err(OpError::of)?;
            let chat = memory.chat(target).await.map_err(OpError::of)?;
            let id = msg.id;
            gated.push_inbound(agent, chat, msg, false);
            return Ok(format!("delivered #{id} from the owner to chat {target}"));
        }
        let chat = match (group, chat) {
            (Some(title), _) => Chat {
                id: ChatId(-user_id_for(title)),
                kind: ChatKind::Group,
                title: title.to_string(),
            },
            (None, Some(c)) => {
                let id = c
                    .parse::<i64>()
                    .map_err(|_| OpError(format!("--chat takes an id or `me`, not {c:?}")))?;
                memory.chat(ChatId(id)).await.map_err(OpError::of)?
            }
            (None, None) => Chat {
                id: ChatId(user_id_for(from)),
                kind: ChatKind::Direct,
                title: from.to_string(),
            },
        };
        memory.ensure_chat(chat.clone());
        let msg = memory
            .inject(
                chat.id,
                Incoming {
                    from: from.to_string(),
                    text: text.to_string(),
                    ..Incoming::default()
                },
            )
            .await
            .map_err(OpError::of)?;
        let id = msg.id;
        let chat_id = chat.id;
        gated.push_inbound(agent, chat, msg, true);
        Ok(format!("delivered #{id} to chat {chat_id}"))
    }
}
