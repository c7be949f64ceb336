//! The pure decision pipeline for one inbound group message: prefilter, explicit address,
//! mode, share of voice, and (after the classifier answered) the final verdict. It holds
//! each group's recent traffic in a [`ChatState`] (our messages, plan times, exchanges with
//! other personas of this daemon) and returns [`Decision`]s; it performs no I/O, calls no
//! LLM and reads no clock: the caller passes `now`. Called by `group::gate` (live and
//! playground) and `group::replay`.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use crate::core::group::classifier::Scores;
use crate::core::group::settings::{GroupSettings, TriggerMode};
use crate::core::model::{Message, MessageId};

/// Who "we" are in a group: what addresses us explicitly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user_id: i64,
    /// Our @username, without the `@`.
    pub username: Option<String>,
    /// The persona's name and nicknames: each addresses us as a whole word.
    pub names: Vec<String>,
}

/// The stage that settled a decision (stable names, used in logs and events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Prefilter,
    Explicit,
    Mode,
    Classifier,
    ShareOfVoice,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Prefilter => "prefilter",
            Stage::Explicit => "explicit",
            Stage::Mode => "mode",
            Stage::Classifier => "classifier",
            Stage::ShareOfVoice => "share_of_voice",
        }
    }
}

/// What to do with the message.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Not even history (a blocked sender).
    Drop,
    /// Kept as history; no plan.
    History,
    /// Ask the addressing classifier (off the event path), then [`resolve`].
    Classify,
    /// Plan a reply, not before `at`; `quote` makes the first message reply to the trigger.
    Trigger { at: Timestamp, quote: bool },
    /// React with this emoji and plan nothing.
    React { emoji: String },
}

/// One decision with its reason (a stable snake_case code).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub stage: Stage,
    pub verdict: Verdict,
    pub reason: &'static str,
    pub scores: Option<Scores>,
}

impl Decision {
    fn new(stage: Stage, verdict: Verdict, reason: &'static str) -> Decision {
        Decision {
            stage,
            verdict,
            reason,
            scores: None,
        }
    }

    /// Whether the message starts a plan.
    pub fn triggered(&self) -> bool {
        matches!(self.verdict, Verdict::Trigger { .. })
    }
}

/// A message of a group as the pipeline remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    id: MessageId,
    sender: i64,
    ours: bool,
    date: Timestamp,
}

/// How many recent messages are remembered (more than any share window in use).
const RECENT_KEPT: usize = 200;
/// How many of our message ids are remembered for "reply to us".
const OWN_IDS_KEPT: usize = 2000;
/// A message counts as part of our conversation when it is one of this many after ours...
const CONVERSATION_MESSAGES: usize = 3;
/// ... within this long.
const CONVERSATION_WINDOW: Duration = Duration::from_secs(300);
const HOUR: Duration = Duration::from_secs(3600);

/// One group's recent traffic, as far as the pipeline needs it.
#[derive(Debug, Clone, Default)]
pub struct ChatState {
    recent: VecDeque<Seen>,
    own_ids: VecDeque<MessageId>,
    plans: VecDeque<Timestamp>,
    exchanges: HashMap<i64, VecDeque<Timestamp>>,
}

impl ChatState {
    /// Remembers a message of the group (ours or not), after its decision.
    pub fn record(&mut self, message: &Message, ours: bool) {
        self.recent.push_back(Seen {
            id: message.id,
            sender: message.sender.id,
            ours,
            date: message.date,
        });
        while self.recent.len() > RECENT_KEPT {
            self.recent.pop_front();
        }
        if ours {
            self.own_ids.push_back(message.id);
            while self.own_ids.len() > OWN_IDS_KEPT {
                self.own_ids.pop_front();
            }
        }
    }

    /// Remembers that a plan starts at `at` (answering `peer`, when another persona spoke).
    pub fn record_plan(&mut self, at: Timestamp, peer: Option<i64>) {
        self.plans.push_back(at);
        while self.plans.len() > 1000 {
            self.plans.pop_front();
        }
        if let Some(peer) = peer {
            let q = self.exchanges.entry(peer).or_default();
            q.push_back(at);
            while q.len() > 100 {
                q.pop_front();
            }
        }
    }

    /// Whether `id` is one of our messages.
    pub fn is_ours(&self, id: MessageId) -> bool {
        self.own_ids.contains(&id)
    }

    /// Our share of the last `window` messages (0 with none).
    pub fn share(&self, window: usize) -> f64 {
        let n = self.recent.len().min(window.max(1));
        if n == 0 {
            return 0.0;
        }
        let ours = self.recent.iter().rev().take(n).filter(|s| s.ours).count();
        ours as f64 / n as f64
    }

    /// Whether the newest messages continue a conversation we are in: fewer than 3 messages
    /// since our last one, which is at most 5 minutes old.
    pub fn in_conversation(&self, now: Timestamp) -> bool {
        let Some(pos) = self.recent.iter().rposition(|s| s.ours) else {
            return false;
        };
        let after = self.recent.len() - pos - 1;
        let Some(ours) = self.recent.get(pos) else {
            return false;
        };
        after < CONVERSATION_MESSAGES
            && now.duration_since(ours.date).as_secs() <= CONVERSATION_WINDOW.as_secs() as i64
    }

    /// The earliest moment the cooldown and the hourly cap allow a new plan (`now` if they
    /// already do).
    pub fn next_plan_allowed(&self, settings: &GroupSettings, now: Timestamp) -> Timestamp {
        let mut at = now;
        if let Some(last) = self.plans.back() {
            at = at.max(crate::core::time::add(*last, settings.cooldown));
        }
        let cap = settings.max_plans_per_hour as usize;
        let hour_ago = now
            .checked_sub(jiff::SignedDuration::from_secs(3600))
            .unwrap_or(now);
        let in_hour: Vec<&Timestamp> = self.plans.iter().filter(|t| **t > hour_ago).collect();
        if cap == 0 {
            return crate::core::time::add(now, HOUR);
        }
        if in_hour.len() >= cap {
            // The plan that leaves the window first makes room.
            if let Some(oldest) = in_hour.get(in_hour.len() - cap) {
                at = at.max(crate::core::time::add(**oldest, HOUR));
            }
        }
        at
    }

    /// Whether an interjection fits every cap right now.
    pub(crate) fn has_room(&self, settings: &GroupSettings, now: Timestamp) -> bool {
        self.next_plan_allowed(settings, now) <= now
            && self.share(settings.share_window) * 100.0 < settings.max_share_percent
    }

    fn exchanges_with(&self, peer: i64, since: Timestamp) -> usize {
        self.exchanges
            .get(&peer)
            .map_or(0, |q| q.iter().filter(|t| **t > since).count())
    }

    /// Whether answering the other persona `peer` now would pass the loop guard's cap (the
    /// exchanges with it within the loop window). Groups and direct chats alike.
    pub fn loop_guard_holds(&self, peer: i64, settings: &GroupSettings, now: Timestamp) -> bool {
        let since = now
            .checked_sub(jiff::SignedDuration::try_from(settings.loop_window).unwrap_or_default())
            .unwrap_or(now);
        self.exchanges_with(peer, since) >= settings.loop_guard_exchanges
    }
}

/// What the pipeline knows around one message.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub identity: &'a Identity,
    pub settings: &'a GroupSettings,
    /// The mode in force for this chat (persona heading or per-chat override).
    pub mode: TriggerMode,
    /// User ids of the other personas of this daemon.
    pub peers: &'a [i64],
}

/// One inbound message and what the backend says about it.
#[derive(Debug, Clone, Copy)]
pub struct Inbound<'a> {
    pub message: &'a Message,
    /// The sender is on our blocklist.
    pub blocked: bool,
    /// Telegram flagged the message as mentioning us (or replying to us).
    pub callout: bool,
}

/// The first stages: prefilter, explicit address, mode. Returns `Classify` when only the
/// classifier can tell.
pub fn decide(
    ctx: &Context<'_>,
    state: &ChatState,
    input: &Inbound<'_>,
    now: Timestamp,
) -> Decision {
    let msg = input.message;
    if input.blocked {
        return Decision::new(Stage::Prefilter, Verdict::Drop, "blocked_sender");
    }
    if msg.sender.is_bot && !ctx.settings.reply_to_bots {
        return Decision::new(Stage::Prefilter, Verdict::History, "bot_sender");
    }
    let explicit = explicit_address(ctx.identity, state, msg, input.callout);
    let peer = ctx.peers.contains(&msg.sender.id);
    if peer {
        if explicit.is_none() {
            return Decision::new(Stage::Prefilter, Verdict::History, "other_persona");
        }
        if state.loop_guard_holds(msg.sender.id, ctx.settings, now) {
            return Decision::new(Stage::Prefilter, Verdict::History, "loop_guard");
        }
    }
    if let Some(reason) = explicit {
        let at = state.next_plan_allowed(ctx.settings, now);
        let reason = if at > now { "explicit_delayed" } else { reason };
        return Decision::new(
            Stage::Explicit,
            Verdict::Trigger { at, quote: true },
            reason,
        );
    }
    if ctx.mode != TriggerMode::Talkative {
        if msg.reply_to.is_some() {
            return Decision::new(Stage::Prefilter, Verdict::History, "reply_to_other");
        }
        if opens_with_other_username(&msg.text) {
            return Decision::new(Stage::Prefilter, Verdict::History, "addressed_to_other");
        }
    }
    match ctx.mode {
        TriggerMode::Strict => Decision::new(Stage::Mode, Verdict::History, "not_explicit"),
        TriggerMode::Smart => {
            if looks_like_request(ctx.settings, &msg.text) {
                Decision::new(Stage::Mode, Verdict::Classify, "open_question")
            } else if state.in_conversation(now) {
                Decision::new(Stage::Mode, Verdict::Classify, "in_conversation")
            } else {
                Decision::new(Stage::Mode, Verdict::History, "not_for_us")
            }
        }
        TriggerMode::Talkative => {
            if state.has_room(ctx.settings, now) {
                Decision::new(Stage::Mode, Verdict::Classify, "room_to_speak")
            } else if msg.reply_to.is_none() && looks_like_request(ctx.settings, &msg.text) {
                Decision::new(Stage::Mode, Verdict::Classify, "open_question")
            } else if state.in_conversation(now) {
                Decision::new(Stage::Mode, Verdict::Classify, "in_conversation")
            } else {
                Decision::new(Stage::ShareOfVoice, Verdict::History, "share_cap")
            }
        }
    }
}

/// A direct message. From another persona of this daemon it is answered within the loop
/// guard, as in groups (`loop_guard` past it); from anyone else it always plans.
pub fn decide_direct(
    ctx: &Context<'_>,
    state: &ChatState,
    msg: &Message,
    now: Timestamp,
) -> Decision {
    let peer = msg.sender.id;
    if ctx.peers.contains(&peer) && state.loop_guard_holds(peer, ctx.settings, now) {
        return Decision::new(Stage::Prefilter, Verdict::History, "loop_guard");
    }
    Decision::new(
        Stage::Explicit,
        Verdict::Trigger {
            at: now,
            quote: false,
        },
        "direct",
    )
}

/// The last stage, once the classifier answered for `msg` (`scores`), or failed (`None`:
/// fail closed).
pub fn resolve(
    ctx: &Context<'_>,
    state: &ChatState,
    msg: &Message,
    scores: Option<Scores>,
    now: Timestamp,
) -> Decision {
    let Some(scores) = scores else {
        return Decision::new(Stage::Classifier, Verdict::History, "classifier_failed");
    };
    let addressed = scores.addressed && scores.confidence >= ctx.settings.confidence_threshold;
    let interject = ctx.mode == TriggerMode::Talkative
        && scores.wanna_interject
        && scores.interject >= ctx.settings.interject_threshold;
    let quote = scores.impulse > 0.8;
    let with = |d: Decision| Decision {
        scores: Some(scores.clone()),
        ..d
    };
    if !addressed && !interject {
        let reason = if ctx.mode == TriggerMode::Talkative {
            "no_interjection"
        } else {
            "not_addressed"
        };
        return with(Decision::new(Stage::Classifier, Verdict::History, reason));
    }
    let request_to_us = addressed && looks_like_request(ctx.settings, &msg.text);
    if scores.is_lightweight
        && !request_to_us
        && let Some(emoji) = scores.reaction.clone().filter(|e| !e.trim().is_empty())
    {
        return with(Decision::new(
            Stage::Classifier,
            Verdict::React { emoji },
            "lightweight",
        ));
    }
    if addressed {
        let at = state.next_plan_allowed(ctx.settings, now);
        let reason = if at > now {
            "addressed_delayed"
        } else {
            "addressed"
        };
        return with(Decision::new(
            Stage::Classifier,
            Verdict::Trigger { at, quote },
            reason,
        ));
    }
    if !state.has_room(ctx.settings, now) {
        return with(Decision::new(
            Stage::ShareOfVoice,
            Verdict::History,
            "share_cap",
        ));
    }
    with(Decision::new(
        Stage::Classifier,
        Verdict::Trigger { at: now, quote },
        "interjection",
    ))
}

/// Why a message addresses us explicitly, if it does.
pub(crate) fn explicit_address(
    me: &Identity,
    state: &ChatState,
    msg: &Message,
    callout: bool,
) -> Option<&'static str> {
    if msg.reply_to.is_some_and(|id| state.is_ours(id)) {
        return Some("reply_to_us");
    }
    for m in &msg.mentions {
        if m.user_id == Some(me.user_id) {
            return Some("mention_entity");
        }
        if let (Some(u), Some(mine)) = (&m.username, &me.username)
            && u.trim_start_matches('@').eq_ignore_ascii_case(mine)
        {
            return Some("mention_entity");
        }
    }
    if let Some(mine) = &me.username
        && contains_at_username(&msg.text, mine)
    {
        return Some("at_username");
    }
    if me.names.iter().any(|n| contains_word(&msg.text, n)) {
        return Some("name");
    }
    if callout {
        return Some("callout");
    }
    None
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `text` as a whole word, ignoring case.
pub(crate) fn contains_word(text: &str, needle: &str) -> bool {
    let needle = needle.trim();
    if needle.is_empty() {
        return false;
    }
    let hay = text.to_lowercase();
    let needle = needle.to_lowercase();
    let mut from = 0;
    while let Some(pos) = hay.get(from..).and_then(|h| h.find(&needle)) {
        let start = from + pos;
        let end = start + needle.len();
        let before = hay.get(..start).and_then(|s| s.chars().next_back());
        let after = hay.get(end..).and_then(|s| s.chars().next());
        let bounded = |c: Option<char>| c.is_none_or(|c| !is_word_char(c));
        // `@name` is a username, not the name.
        if bounded(before) && before != Some('@') && bounded(after) {
            return true;
        }
        from = start + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Whether `text` holds `@username` (case-insensitive, not followed by a username character).
pub(crate) fn contains_at_username(text: &str, username: &str) -> bool {
    let hay = text.to_lowercase();
    let needle = format!("@{}", username.trim_start_matches('@').to_lowercase());
    let mut from = 0;
    while let Some(pos) = hay.get(from..).and_then(|h| h.find(&needle)) {
        let start = from + pos;
        let end = start + needle.len();
        let before = hay.get(..start).and_then(|s| s.chars().next_back());
        let after = hay.get(end..).and_then(|s| s.chars().next());
        if before.is_none_or(|c| !is_word_char(c)) && after.is_none_or(|c| !is_word_char(c)) {
            return true;
        }
        from = end;
    }
    false
}

/// Whether the text opens with an @username (someone else's: ours was checked before).
fn opens_with_other_username(text: &str) -> bool {
    text.trim_start()
        .strip_prefix('@')
        .and_then(|r| r.chars().next())
        .is_some_and(is_word_char)
}

/// A question or request, in the languages the persona's settings put in play (see
/// [`requests`](crate::core::group::requests)).
fn looks_like_request(settings: &GroupSettings, text: &str) -> bool {
    crate::core::group::requests::looks_like_request(text, &settings.languages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_only() {
        assert!(contains_word("hey Wren, you there", "wren"));
        assert!(contains_word("WREN!", "Wren"));
        assert!(!contains_word("Wrens are birds", "Wren"));
        assert!(!contains_word("mywren", "Wren"));
        assert!(!contains_word("@wren hi", "Wren"));
        assert!(contains_word("ask Анна please", "анна"));
        assert!(!contains_word("Аннами", "Анна"));
        assert!(contains_at_username("hi @Wren_Bot!", "wren_bot"));
        assert!(!contains_at_username("hi @wren_bot2", "wren_bot"));
        assert!(!contains_at_username("mail x@wren_bot", "wren_bot"));
    }

    #[test]
    fn requests() {
        let settings = GroupSettings::default();
        assert!(looks_like_request(&settings, "is this right?"));
        assert!(looks_like_request(&settings, "این چیه؟"));
        assert!(looks_like_request(&settings, "Anyone know rust"));
        assert!(looks_like_request(&settings, "کسی میدونه این ارور از چیه"));
        assert!(!looks_like_request(&settings, "nice weather"));
    }
}
