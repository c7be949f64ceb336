//! The reactions a chat allows, read over MTProto: the chat's own setting from its full info
//! (`channels.getFullChannel` / `messages.getFullChat`), and for "all reactions" the
//! account's available reactions (`messages.getAvailableReactions`, premium-only and inactive
//! ones left out). Pure mapping functions plus one async look-up on the backend (an unknown
//! chat is learnt and the look-up retried once); callers (the group gate) cache the answer.

use grammers_client::tl;

use crate::adapters::mtproto::backend::MtprotoTelegram;
use crate::adapters::mtproto::errors::{call_error, classify};
use crate::adapters::mtproto::recover::{self, CallError};
use crate::core::model::{ChatId, TgResult};

/// The chat's own reaction setting: `Some(list)` for a restricted chat (empty: none allowed),
/// `None` when every available reaction is allowed (or the setting is absent).
pub(crate) fn chat_setting(full: &tl::enums::ChatFull) -> Option<Vec<String>> {
    let setting = match full {
        tl::enums::ChatFull::ChannelFull(f) => f.available_reactions.clone(),
        tl::enums::ChatFull::Full(f) => f.available_reactions.clone(),
        _ => None,
    };
    restriction(setting.as_ref())
}

/// What a `ChatReactions` setting allows: `Some(list)` restricted, `None` everything.
pub(crate) fn restriction(setting: Option<&tl::enums::ChatReactions>) -> Option<Vec<String>> {
    match setting? {
        tl::enums::ChatReactions::None => Some(Vec::new()),
        tl::enums::ChatReactions::Some(s) => Some(
            s.reactions
                .iter()
                .filter_map(|r| match r {
                    tl::enums::Reaction::Emoji(e) => Some(e.emoticon.clone()),
                    _ => None,
                })
                .collect(),
        ),
        tl::enums::ChatReactions::All(_) => None,
    }
}

/// The standard reactions a regular account may use.
pub(crate) fn available(list: &tl::enums::messages::AvailableReactions) -> Option<Vec<String>> {
    match list {
        tl::enums::messages::AvailableReactions::Reactions(r) => Some(
            r.reactions
                .iter()
                .filter_map(|a| match a {
                    tl::enums::AvailableReaction::Reaction(a) if !a.inactive && !a.premium => {
                        Some(a.reaction.clone())
                    }
                    _ => None,
                })
                .collect(),
        ),
        tl::enums::messages::AvailableReactions::NotModified => None,
    }
}

impl MtprotoTelegram {
    /// The reactions allowed in `chat` (`None`: a direct chat, or unknown).
    pub(crate) async fn fetch_allowed_reactions(
        &self,
        chat: ChatId,
    ) -> TgResult<Option<Vec<String>>> {
        // An unknown chat is learnt and the look-up retried once, like a send.
        let full = recover::with_peer_retry(self, chat, || async {
            let full = match self.input_peer_for_reactions(chat).await? {
                tl::enums::InputPeer::Channel(c) => {
                    self.call(&tl::functions::channels::GetFullChannel {
                        channel: tl::types::InputChannel {
                            channel_id: c.channel_id,
                            access_hash: c.access_hash,
                        }
                        .into(),
                    })
                    .await
                }
                tl::enums::InputPeer::Chat(c) => {
                    self.call(&tl::functions::messages::GetFullChat { chat_id: c.chat_id })
                        .await
                }
                _ => return Ok(None),
            };
            full.map(Some).map_err(|e| call_error(&e))
        })
        .await
        .map_err(CallError::into_error)?;
        let Some(full) = full else {
            return Ok(None);
        };
        let tl::enums::messages::ChatFull::Full(full) = full;
        if let Some(restricted) = chat_setting(&full.full_chat) {
            return Ok(Some(restricted));
        }
        let list = self
            .call(&tl::functions::messages::GetAvailableReactions { hash: 0 })
            .await
            .map_err(|e| classify(&e))?;
        Ok(available(&list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> tl::enums::Document {
        tl::types::DocumentEmpty { id: 1 }.into()
    }

    fn reaction(emoji: &str, premium: bool, inactive: bool) -> tl::enums::AvailableReaction {
        tl::types::AvailableReaction {
            inactive,
            premium,
            reaction: emoji.into(),
            title: emoji.into(),
            static_icon: doc(),
            appear_animation: doc(),
            select_animation: doc(),
            activate_animation: doc(),
            effect_animation: doc(),
            around_animation: None,
            center_icon: None,
        }
        .into()
    }

    #[test]
    fn restricted_chats_list_their_emoji_and_all_means_the_available_ones() {
        let some: tl::enums::ChatReactions = tl::types::ChatReactionsSome {
            reactions: vec![
                tl::types::ReactionEmoji {
                    emoticon: "👍".into(),
                }
                .into(),
                tl::enums::Reaction::Paid,
            ],
        }
        .into();
        assert_eq!(restriction(Some(&some)), Some(vec!["👍".to_string()]));
        assert_eq!(
            restriction(Some(&tl::enums::ChatReactions::None)),
            Some(Vec::new())
        );
        let all: tl::enums::ChatReactions = tl::types::ChatReactionsAll {
            allow_custom: false,
        }
        .into();
        assert_eq!(restriction(Some(&all)), None);
        assert_eq!(restriction(None), None);
        let list: tl::enums::messages::AvailableReactions =
            tl::types::messages::AvailableReactions {
                hash: 0,
                reactions: vec![
                    reaction("❤", false, false),
                    reaction("🐳", true, false),
                    reaction("🥱", false, true),
                ],
            }
            .into();
        assert_eq!(available(&list), Some(vec!["❤".to_string()]));
    }
}
