//! `ctl say` on the in-memory Telegram (`run --telegram memory`): a message from someone,
//! or from the owner (`--from me`, `--chat me`), put into a chat and handed to the runtime
//! through the admission chain, as the real backend's pump does; then, within a bound, what
//! the persona (or the owner command) answered. Part of [`Controller`].

use std::time::Duration;

use crate::adapters::memory::{Incoming, MemoryTelegram, user_id_for};
use crate::app::ops::OpError;
use crate::core::model::{Chat, ChatId, ChatKind, MessageId, OutgoingText};
use crate::ports::telegram::Telegram;

use crate::adapters::mtproto::sim::{Peer, Post};
use crate::app::ops::controls::{Controller, SimSeat};

/// What `ctl say` puts into a chat.
pub(super) struct Said<'a> {
    pub chat: Option<&'a str>,
    pub from: &'a str,
    pub group: Option<&'a str>,
    /// The message it replies to (the owner answering a draft).
    pub reply_to: Option<MessageId>,
    pub text: &'a str,
}

/// `--chat me`: the owner's Saved Messages.
fn in_saved_messages(chat: Option<&str>) -> bool {
    chat.is_some_and(|c| c.eq_ignore_ascii_case("me"))
}

/// The owner writes: in Saved Messages (`--chat me`) or from another device (`--from me`).
fn by_owner(chat: Option<&str>, from: &str) -> bool {
    in_saved_messages(chat) || from.eq_ignore_ascii_case("me")
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
        if let Some(sim) = seat.sim {
            return self.say_sim(agent, &sim, said, wait).await;
        }
        let Some(memory) = seat.memory else {
            return Err(OpError::refused(
                "say needs `personad run --telegram memory` or `--telegram sim`",
            ));
        };
        // Its chats' ids start above the runtime's handled marks (a quarantined transcript
        // restarts its chat empty, never under the mark).
        self.runtime().wait_agent_state(agent).await;
        if let Some(state) = self.runtime().agent_state(agent) {
            memory.raise_ids(&state.handled_messages());
        }
        let gated = &self.ingress;
        let saved_messages = in_saved_messages(chat);
        if saved_messages || by_owner(chat, from) {
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
            let notables = self.runtime().observe_notables();
            gated.push(agent, chat, msg, false);
            let said = Told {
                said: format!("delivered #{id} from the owner to chat {target}"),
                notables,
            };
            return Ok(self
                .said_and_answered(
                    agent,
                    &Twin::Memory(&memory),
                    (target, id),
                    None,
                    said,
                    wait,
                )
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
        let notables = self.runtime().observe_notables();
        gated.push(agent, chat, msg, true);
        let said = Told {
            said: format!("delivered #{id} to chat {chat_id}"),
            notables,
        };
        Ok(self
            .said_and_answered(
                agent,
                &Twin::Memory(&memory),
                (chat_id, id),
                draft_for,
                said,
                wait,
            )
            .await)
    }

    /// `ctl say` on the simulated Telegram: the message is posted in the simulator (by the
    /// person, or by the owner from another device) and reaches the agent over MTProto, as a
    /// real account's messages do.
    async fn say_sim(
        &self,
        agent: &str,
        seat: &SimSeat,
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
        let (sim, me) = (&seat.sim, seat.me);
        let owner = by_owner(chat, from);
        let writer = if owner {
            me
        } else {
            sim.person(from.trim_start_matches('@'))
        };
        let peer = match (group, chat) {
            (Some(title), _) => Peer::Chat(sim.group(title, &[me, writer])),
            (None, Some(_)) if in_saved_messages(chat) => Peer::User(me),
            (None, Some(c)) => match c.parse::<i64>() {
                Ok(id) => peer_of(ChatId(id)),
                Err(_) => Peer::User(sim.person(c.trim_start_matches('@'))),
            },
            (None, None) => Peer::User(me),
        };
        // The dialog as the agent sees it.
        let seen_as = match peer {
            Peer::User(u) if !owner && u == me => Peer::User(writer),
            other => other,
        };
        let notables = self.runtime().observe_notables();
        let posted = sim
            .post(
                writer,
                peer,
                Post {
                    text: text.to_string(),
                    reply_to: reply_to.and_then(|r| i32::try_from(r.0).ok()),
                    ..Post::default()
                },
            )
            .map_err(|e| {
                OpError::refused(format!("the simulated Telegram refused it: {}", e.name))
            })?;
        let id = MessageId(i64::from(posted.id_for(me).unwrap_or(0)));
        let chat_id = ChatId(seen_as.chat_id());
        let said = Told {
            said: if owner {
                format!("delivered #{id} from the owner to chat {chat_id}")
            } else {
                format!("delivered #{id} to chat {chat_id}")
            },
            notables,
        };
        // The simulator dates in whole seconds.
        let since = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - 1)
            .unwrap_or_default();
        let draft_for = (!owner).then(|| (group.unwrap_or(from).to_string(), since));
        Ok(self
            .said_and_answered(
                agent,
                &Twin::Sim(seat),
                (chat_id, id),
                draft_for,
                said,
                wait,
            )
            .await)
    }

    /// `said`, then what the account wrote in `chat` after message `after` within `wait`:
    /// the persona's messages (until it has been quiet for a moment) or an owner command's
    /// answer. Returns at once when the message made no plan (paused, not addressed, an
    /// owner's note), and says so when nothing came in time. With `draft_for` (the chat's
    /// title, the message's time), a draft of the answer posted to the owner (in Saved
    /// Messages, or the persona's `# Admin Chat`) is an answer too.
    async fn said_and_answered(
        &self,
        agent: &str,
        twin: &Twin<'_>,
        (chat, after): (ChatId, MessageId),
        draft_for: Option<(String, jiff::Timestamp)>,
        told: Told,
        wait: Duration,
    ) -> String {
        let Told { said, mut notables } = told;
        if wait.is_zero() {
            return said;
        }
        // Why nothing came, when the runtime said so: the newest such event for this chat
        // (or the agent's spending cap).
        let mut why_not: Option<String> = None;
        let start = std::time::Instant::now();
        let mut seen = 0;
        let mut quiet_since = start;
        loop {
            let answers: Vec<String> = twin
                .lines(chat)
                .into_iter()
                .filter(|m| m.outgoing && m.id > after)
                .map(|m| format!("{agent}: {}", m.text))
                .collect();
            // Drafts are posted where the persona says (`# Admin Chat`), else in Saved
            // Messages: read wherever that is now.
            let place = self
                .runtime()
                .persona(agent)
                .and_then(|p| p.admin_chat)
                .filter(|c| c.0 != twin.self_id());
            let draft = draft_for.as_ref().and_then(|(title, since)| {
                twin.lines(place.unwrap_or(ChatId(twin.self_id())))
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
                let where_ = place.map_or("Saved Messages".to_string(), |c| {
                    format!("the admin chat {c}")
                });
                return format!(
                    "{said}\nno answer yet: a draft waits for your approval in {where_} (message #{}):\n{}",
                    d.id, d.text
                );
            }
            if answers.len() != seen {
                seen = answers.len();
                quiet_since = std::time::Instant::now();
            }
            // Whether the chat still has a plan, as the runtime holds it (a reply under way
            // is in the journal, not yet in a graph file).
            let planned = !self.plans_in(agent, Some(chat)).await.is_empty();
            while let Ok(event) = notables.try_recv() {
                if let Some(why) = why_nothing(&event.notable, agent, chat) {
                    why_not = Some(why);
                }
            }
            let settled = start.elapsed() > SETTLE;
            // What holds an answer that has not come: the cap, a pause, the persona's sleep.
            if seen == 0 && settled && why_not.is_none() {
                why_not = self.held(agent, chat);
            }
            let done = (seen > 0 && !planned && quiet_since.elapsed() > QUIET)
                || (seen == 0 && !planned && settled && start.elapsed() > NO_PLAN)
                || (seen == 0 && why_not.is_some() && settled);
            if done || start.elapsed() >= wait {
                return match (seen, planned, why_not) {
                    (0, _, Some(why)) => format!("{said}\nno answer: {why}"),
                    (0, false, None) => format!(
                        "{said}\nno answer: nothing was planned for it (paused, not addressed, a note, or the model chose silence)"
                    ),
                    (0, true, None) => format!(
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

impl Controller {
    /// What holds `agent`'s answer in `chat` now, if anything: its spending cap reached
    /// (and not lifted) today, a pause of the chat or of every chat, or its sleep per its
    /// schedule.
    fn held(&self, agent: &str, chat: ChatId) -> Option<String> {
        let now = self.clock.now();
        let safety = self.runtime().agent_state(agent).unwrap_or_default();
        let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        if let Some(mark) = safety.budget.values().find(|m| m.holds(today)) {
            return Some(format!(
                "{agent} is at its daily spending cap ({}): it answers once the cap lifts (the next UTC day, or `personad ctl resume --agent {agent}`)",
                mark.cap
            ));
        }
        if let Some(p) = safety.pauses.all.as_ref().filter(|p| p.active(now)) {
            return Some(format!(
                "{agent} is paused in every chat {} (`personad ctl resume --agent {agent}`)",
                p.describe()
            ));
        }
        if let Some(p) = safety.pauses.chats.get(&chat).filter(|p| p.active(now)) {
            return Some(format!(
                "the chat is paused {} (`personad ctl resume --agent {agent} --chat {chat}`)",
                p.describe()
            ));
        }
        let presence = self.runtime().presence(agent)?;
        presence.standing(now).asleep_until.map(|_| {
            format!(
                "{agent} is asleep per its schedule ({}): the message stays unread until then",
                presence.line(now)
            )
        })
    }
}

/// What `ctl say` did, and the runtime's notable events from just before it (so that a plan
/// dropped for the message is seen however fast it went).
struct Told {
    said: String,
    notables: tokio::sync::mpsc::UnboundedReceiver<crate::runtime::NotableEvent>,
}

/// Why no answer comes, when `event` says so for `agent`'s `chat`: a dropped plan (with the
/// runtime's reason: a refused request, an answer that did not parse), a spending cap
/// reached, the chat's safety breaker.
fn why_nothing(
    event: &crate::core::scheduler::Notable,
    agent: &str,
    chat: ChatId,
) -> Option<String> {
    if event.agent != agent || event.chat.is_some_and(|c| c != chat) {
        return None;
    }
    let detail = &event.detail;
    match (event.event, event.chat) {
        ("plan_dropped", Some(_)) => Some(format!("the plan for it was dropped: {detail}")),
        ("breaker_tripped", _) => Some(format!("the chat's safety breaker tripped: {detail}")),
        ("budget_reached", _) => Some(format!(
            "the agent reached its daily spending cap ({detail}); it answers once the cap lifts"
        )),
        _ => None,
    }
}

/// A chat's messages as `ctl say` reads them back.
struct Line {
    id: MessageId,
    outgoing: bool,
    text: String,
    date: jiff::Timestamp,
}

/// Where `ctl say` reads what the agent wrote.
enum Twin<'a> {
    Memory(&'a MemoryTelegram),
    Sim(&'a SimSeat),
}

impl Twin<'_> {
    fn self_id(&self) -> i64 {
        match self {
            Twin::Memory(m) => m.self_id(),
            Twin::Sim(s) => s.me,
        }
    }

    fn lines(&self, chat: ChatId) -> Vec<Line> {
        match self {
            Twin::Memory(m) => m
                .transcript(chat)
                .into_iter()
                .map(|m| Line {
                    id: m.id,
                    outgoing: m.outgoing,
                    text: m.text,
                    date: m.date,
                })
                .collect(),
            Twin::Sim(s) => s
                .sim
                .transcript(s.me, peer_of(chat))
                .into_iter()
                .map(|m| Line {
                    id: MessageId(i64::from(m.id)),
                    outgoing: m.out,
                    text: m.text,
                    date: jiff::Timestamp::from_second(i64::from(m.date)).unwrap_or_default(),
                })
                .collect(),
        }
    }
}

/// The simulator's dialog of a Bot API chat id.
fn peer_of(chat: ChatId) -> Peer {
    match chat.0 {
        id if id > 0 => Peer::User(id),
        id if id < -1_000_000_000_000 => Peer::Channel(-1_000_000_000_000 - id),
        id => Peer::Chat(-id),
    }
}

/// Longest `ctl say` wait, in seconds (the control socket's connection lasts 30 s).
pub(crate) const MAX_WAIT_SECS: u64 = 300;
/// `ctl say`'s wait when none is asked and the agent's calls have been quick.
const DEFAULT_WAIT: Duration = Duration::from_secs(20);

/// How long `ctl say` waits for the answer: `asked` seconds (at most [`MAX_WAIT_SECS`]), or by
/// default [`DEFAULT_WAIT`], longer when the agent's planning calls have lately been slow
/// (`slowest`, the slowest of its latest: a turn may take two calls, plus the pacing).
pub(super) fn wait_for(asked: Option<u64>, slowest: Option<Duration>) -> Duration {
    let most = Duration::from_secs(MAX_WAIT_SECS);
    match asked {
        Some(secs) => Duration::from_secs(secs).min(most),
        None => {
            let measured = slowest.map_or(Duration::ZERO, |d| {
                d.saturating_mul(2).saturating_add(Duration::from_secs(10))
            });
            DEFAULT_WAIT.max(measured).min(most)
        }
    }
}
/// How often `ctl say` looks for the answer.
const POLL: Duration = Duration::from_millis(100);
/// How long an answer must be followed by silence before `ctl say` returns it.
const QUIET: Duration = Duration::from_millis(1500);
/// How long after delivery the runtime has surely made the message's plan (or not).
const SETTLE: Duration = Duration::from_millis(500);
/// With no plan and no answer, how long an owner command's answer may take.
const NO_PLAN: Duration = Duration::from_millis(1500);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_WAIT_SECS, wait_for};

    /// `ctl say` waits as asked (capped), else 20 s, or longer after slow planning calls.
    #[test]
    fn the_default_wait_follows_the_agents_slowest_recent_call() {
        let secs = Duration::from_secs;
        assert_eq!(wait_for(Some(5), Some(secs(100))), secs(5));
        assert_eq!(wait_for(Some(9_999), None), secs(MAX_WAIT_SECS));
        assert_eq!(wait_for(None, None), secs(20));
        assert_eq!(wait_for(None, Some(secs(2))), secs(20));
        assert_eq!(wait_for(None, Some(secs(60))), secs(130));
        assert_eq!(wait_for(None, Some(secs(1_000))), secs(MAX_WAIT_SECS));
    }
}
