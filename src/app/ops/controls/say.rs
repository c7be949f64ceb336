//! `ctl say` on the in-memory Telegram (`run --telegram memory`): a message from someone,
//! or from the owner (`--from me`, `--chat me`), put into a chat and handed to the runtime
//! through the admission chain, as the real backend's pump does; then, within a bound, what
//! the persona (or the owner command) answered. Part of [`Controller`].

use std::time::Duration;

use crate::adapters::memory::{Incoming, MemoryTelegram, user_id_for};
use crate::app::ops::OpError;
use crate::core::model::{Chat, ChatId, ChatKind, MessageId, OutgoingText};
use crate::ports::telegram::Telegram;

use crate::app::ops::controls::Controller;

/// What `ctl say` puts into a chat.
pub(super) struct Said<'a> {
    pub chat: Option<&'a str>,
    pub from: &'a str,
    pub group: Option<&'a str>,
    /// The message it replies to (the owner answering a draft).
    pub reply_to: Option<MessageId>,
    pub text: &'a str,
}

/// The in-memory group titled `title` (its id follows from the title, as in every account).
fn group_named(title: &str) -> Chat {
    Chat {
        id: ChatId(-user_id_for(title)),
        kind: ChatKind::Group,
        title: title.to_string(),
    }
}

/// The in-memory direct chat with the user `name`.
fn direct_with(name: &str) -> Chat {
    Chat {
        id: ChatId(user_id_for(name)),
        kind: ChatKind::Direct,
        title: name.to_string(),
    }
}

impl Controller {
    /// `ctl say`: puts a message into an in-memory chat and hands it to the runtime through
    /// the gate (so `--chat me` is the owner writing in Saved Messages).
    pub(super) async fn say(
        &self,
        agent: &str,
        said: Said<'_>,
        wait: Duration,
    ) -> Result<String, OpError> {
        let Said {
            chat,
            from,
            group,
            reply_to,
            text,
        } = said;
        let seat = self.seat(agent).ok_or(OpError::NotRunning)?;
        let Some(memory) = seat.memory else {
            return Err(OpError::refused(
                "say needs `personad run --telegram memory`",
            ));
        };
        let gated = &self.ingress;
        let saved_messages = chat.is_some_and(|c| c.eq_ignore_ascii_case("me"));
        if saved_messages || from.eq_ignore_ascii_case("me") {
            // The owner writes (from another device): an outgoing message of the account.
            let target = match (saved_messages, group, chat) {
                (true, _, _) => ChatId(memory.self_id()),
                (false, Some(title), _) => {
                    let chat = group_named(title);
                    memory.ensure_chat(chat.clone());
                    chat.id
                }
                // A name: the direct chat with that user (another persona of this daemon,
                // in the in-memory world, gets the message as one from this account).
                (false, None, Some(c)) => match c.parse::<i64>() {
                    Ok(id) => ChatId(id),
                    Err(_) => {
                        let chat = direct_with(c.trim_start_matches('@'));
                        memory.ensure_chat(chat.clone());
                        chat.id
                    }
                },
                (false, None, None) => ChatId(memory.self_id()),
            };
            let msg = memory
                .send_text(OutgoingText {
                    chat: target,
                    text: text.to_string(),
                    reply_to,
                    idempotency_key: fastrand::i64(1..),
                })
                .await?;
            let chat = memory.chat(target).await?;
            let id = msg.id;
            gated.push(agent, chat, msg, false);
            let said = format!("delivered #{id} from the owner to chat {target}");
            return Ok(self
                .said_and_answered(agent, &memory, (target, id), None, said, wait)
                .await);
        }
        let chat = match (group, chat) {
            (Some(title), _) => group_named(title),
            (None, Some(c)) => {
                let id = c.parse::<i64>().map_err(|_| {
                    OpError::refused(format!("--chat takes an id or `me`, not {c:?}"))
                })?;
                memory.chat(ChatId(id)).await?
            }
            (None, None) => direct_with(from),
        };
        memory.ensure_chat(chat.clone());
        let msg = memory
            .inject(
                chat.id,
                Incoming {
                    from: from.to_string(),
                    text: text.to_string(),
                    reply_to,
                    ..Incoming::default()
                },
            )
            .await?;
        let id = msg.id;
        let chat_id = chat.id;
        let draft_for = Some((chat.title.clone(), msg.date));
        gated.push(agent, chat, msg, true);
        let said = format!("delivered #{id} to chat {chat_id}");
        Ok(self
            .said_and_answered(agent, &memory, (chat_id, id), draft_for, said, wait)
            .await)
    }

    /// `said`, then what the account wrote in `chat` after message `after` within `wait`:
    /// the persona's messages (until it has been quiet for a moment) or an owner command's
    /// answer. Returns at once when the message made no plan (paused, not addressed, an
    /// owner's note), and says so when nothing came in time. With `draft_for` (the chat's
    /// title, the message's time), a draft of the answer posted to the owner is an answer too.
    async fn said_and_answered(
        &self,
        agent: &str,
        memory: &MemoryTelegram,
        (chat, after): (ChatId, MessageId),
        draft_for: Option<(String, jiff::Timestamp)>,
        said: String,
        wait: Duration,
    ) -> String {
        if wait.is_zero() {
            return said;
        }
        let start = std::time::Instant::now();
        let mut seen = 0;
        let mut quiet_since = start;
        loop {
            let answers: Vec<String> = memory
                .transcript(chat)
                .into_iter()
                .filter(|m| m.outgoing && m.id > after)
                .map(|m| format!("{agent}: {}", m.text))
                .collect();
            let draft = draft_for.as_ref().and_then(|(title, since)| {
                memory
                    .transcript(ChatId(memory.self_id()))
                    .into_iter()
                    .rev()
                    .find(|m| {
                        m.outgoing
                            && m.date >= *since
                            && m.text.starts_with("personad: draft ")
                            && m.text.contains(&format!(" in {title}"))
                    })
            });
            if let Some(d) = draft {
                return format!(
                    "{said}\nno answer yet: a draft waits for your approval in Saved Messages (message #{}):\n{}",
                    d.id, d.text
                );
            }
            if answers.len() != seen {
                seen = answers.len();
                quiet_since = std::time::Instant::now();
            }
            // The chat's plan, if any, is one file: no scan of every graph per look.
            let plan = self
                .state
                .graph_path(&crate::core::graph::ConversationKey::new(agent, chat));
            let planned = tokio::task::spawn_blocking(move || plan.exists())
                .await
                .unwrap_or(false);
            let settled = start.elapsed() > SETTLE;
            let done = (seen > 0 && !planned && quiet_since.elapsed() > QUIET)
                || (seen == 0 && !planned && settled && start.elapsed() > NO_PLAN);
            if done || start.elapsed() >= wait {
                return match (seen, planned) {
                    (0, false) => format!(
                        "{said}\nno answer: no plan was made for it (paused, not addressed, or a note)"
                    ),
                    (0, true) => format!(
                        "{said}\nno answer within {} s (still planned: see `personad ctl plans`)",
                        wait.as_secs()
                    ),
                    _ => format!("{said}\n{}", answers.join("\n")),
                };
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Longest `ctl say` wait, in seconds (the control socket's connection lasts 30 s).
pub(crate) const MAX_WAIT_SECS: u64 = 25;
/// How often `ctl say` looks for the answer.
const POLL: Duration = Duration::from_millis(100);
/// How long an answer must be followed by silence before `ctl say` returns it.
const QUIET: Duration = Duration::from_millis(1500);
/// How long after delivery the runtime has surely made the message's plan (or not).
const SETTLE: Duration = Duration::from_millis(500);
/// With no plan and no answer, how long an owner command's answer may take.
const NO_PLAN: Duration = Duration::from_millis(1500);
