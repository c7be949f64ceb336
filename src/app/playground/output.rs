//! What the playground prints: each action of the in-memory backend and each group decision,
//! as a human line or a JSON event (`--jsonl`), with times relative to the session's start.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::adapters::memory::{Action, Recorded};
use crate::adapters::store::facts::FileFacts;
use crate::app::cli::ChatArgs;
use crate::app::lifecycle::Lifecycle;
use crate::app::services::ViewFacts;
use crate::core::model::{Chat, ChatId, MessageId};
use crate::ingress::gate::{DecisionEvent, GroupGate};
use crate::ports::clock::SharedClock;

/// One line of the session's output. A closed stdout does not stop the session (its state
/// is still saved at the end), so the error is dropped here.
pub(super) fn emit_line(line: &str) {
    let _ = crate::app::stdout::line(line);
}

pub(super) fn emit_error(message: &str) {
    emit_line(&json!({"event": "error", "at_ms": 0, "message": message}).to_string());
}

/// Prints every recorded action until the backend stops observing.
pub(super) async fn print_actions(
    mut rx: mpsc::UnboundedReceiver<Recorded>,
    start: Timestamp,
    jsonl: bool,
    (agent, owner): (String, crate::core::model::ChatId),
    gate: Option<(GroupGate, Chat)>,
) {
    while let Some(rec) = rx.recv().await {
        // What the runtime tells the owner (drafts, notices) goes to the account's Saved
        // Messages: marked as such, never mistaken for an answer in the session's chat.
        let to_owner = matches!(&rec.action, Action::Send { chat, .. } if *chat == owner);
        if let (
            Some((gate, chat)),
            Action::Send { message, .. }
            | Action::Sticker { message, .. }
            | Action::Voice { message, .. }
            | Action::Media { message, .. },
        ) = (&gate, &rec.action)
        {
            gate.note_own(chat, message);
        }
        let at_ms = rec.at.duration_since(start).as_millis().max(0);
        let line = if jsonl {
            let mut v = json_event(&rec.action, at_ms);
            if to_owner && let Some(obj) = v.as_object_mut() {
                obj.insert("to_owner".into(), Value::Bool(true));
            }
            Some(v.to_string())
        } else {
            human_event(&rec.action, at_ms, &agent).map(|l| {
                if to_owner {
                    format!("{l}   (to the owner)")
                } else {
                    l
                }
            })
        };
        if let Some(line) = line {
            emit_line(&line);
        }
    }
}

/// Starts [`print_presence`] for the session; send on the returned channel to stop it.
pub(super) fn spawn_presence_printer(
    life: &Lifecycle,
    runtime: &crate::runtime::RuntimeHandle,
    start: Timestamp,
    args: &crate::app::cli::ChatArgs,
    persona: &crate::core::persona::Persona,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = life.spawn(print_presence(
        runtime.observe_presence(),
        runtime.observe_notables(),
        stopped,
        start,
        args.jsonl,
        crate::runtime::driver::presence_zone(persona),
    ));
    (stop, task)
}

/// Prints every presence change (`activity`, `asleep`, `woke`) and every notable event (a
/// draft decided, a plan dropped, a cap reached: its stable name) until told to stop, then
/// what is left: local times in the persona's zone.
pub(super) async fn print_presence(
    mut rx: mpsc::UnboundedReceiver<crate::runtime::handle::PresenceEvent>,
    mut notables: mpsc::UnboundedReceiver<crate::runtime::NotableEvent>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    start: Timestamp,
    jsonl: bool,
    tz: jiff::tz::TimeZone,
) {
    let print = |e: crate::runtime::handle::PresenceEvent| {
        let at_ms = e.at.duration_since(start).as_millis().max(0);
        let local = |t: Timestamp| {
            t.to_zoned(tz.clone())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        };
        let ms = |t: Timestamp| t.duration_since(start).as_millis().max(0) as i64;
        use crate::core::scheduler::PresenceChange;
        let line = match (&e.change, jsonl) {
            (PresenceChange::Activity(now), true) => json!({
                "event": "activity", "name": now.activity.name,
                "responsiveness": now.activity.responsiveness, "local": local(e.at),
                "until_ms": ms(now.until), "fallback": now.fallback, "at_ms": at_ms as i64,
            })
            .to_string(),
            (PresenceChange::Asleep { until }, true) => json!({
                "event": "asleep", "local": local(e.at), "until_ms": ms(*until),
                "until_local": local(*until), "at_ms": at_ms as i64,
            })
            .to_string(),
            (PresenceChange::Off, true) => {
                json!({"event": "schedule_off", "local": local(e.at), "at_ms": at_ms as i64})
                    .to_string()
            }
            (PresenceChange::Woke, true) => {
                json!({"event": "woke", "local": local(e.at), "at_ms": at_ms as i64}).to_string()
            }
            (change, false) => {
                let t = format!("[{:>7.1}s]", at_ms as f64 / 1000.0);
                let what = match change {
                    PresenceChange::Activity(now) => format!(
                        "{} (responsiveness {})",
                        now.activity.name, now.activity.responsiveness
                    ),
                    PresenceChange::Asleep { until } => format!("asleep until {}", local(*until)),
                    PresenceChange::Woke => "woke up".to_string(),
                    PresenceChange::Off => "no schedule: always available".to_string(),
                };
                terminal_safe(&format!("{t} {} · {what}", local(e.at)))
            }
        };
        emit_line(&line);
    };
    let notable = |e: crate::runtime::NotableEvent| {
        let at_ms = e.at.duration_since(start).as_millis().max(0) as i64;
        let n = e.notable;
        let line = if jsonl {
            json!({
                "event": n.event, "agent": n.agent, "chat": n.chat.map(|c| c.0),
                "detail": n.detail, "at_ms": at_ms,
            })
            .to_string()
        } else {
            let t = format!("[{:>7.1}s]", at_ms as f64 / 1000.0);
            terminal_safe(&format!("{t} {}: {}", n.event.replace('_', " "), n.detail))
        };
        emit_line(&line);
    };
    loop {
        tokio::select! {
            e = rx.recv() => match e {
                Some(e) => print(e),
                None => return,
            },
            n = notables.recv() => if let Some(n) = n { notable(n) },
            _ = &mut stop => break,
        }
    }
    while let Ok(e) = rx.try_recv() {
        print(e);
    }
    while let Ok(n) = notables.try_recv() {
        notable(n);
    }
}

/// Prints every group decision until the gate stops observing: a `decision` event in
/// `--jsonl` mode, one dim line otherwise.
pub(super) async fn print_decisions(
    mut rx: mpsc::UnboundedReceiver<DecisionEvent>,
    clock: SharedClock,
    start: Timestamp,
    jsonl: bool,
) {
    while let Some(d) = rx.recv().await {
        let at_ms = clock.now().duration_since(start).as_millis().max(0);
        let line = if jsonl {
            decision_event(&d, at_ms).to_string()
        } else {
            let t = format!("[{:>7.1}s]", at_ms as f64 / 1000.0);
            let verdict = if d.triggered {
                "plan"
            } else if d.react.is_some() {
                "react"
            } else {
                "listen"
            };
            let text = format!(
                "{t} #{} {verdict} ({} / {})",
                d.message_id,
                d.stage.as_str(),
                d.reason
            );
            // Dim on a terminal only: piped output carries no escape codes.
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                format!("\x1b[2m{text}\x1b[0m")
            } else {
                text
            }
        };
        emit_line(&line);
    }
}

/// The `--jsonl` object of a group decision.
pub(crate) fn decision_event(d: &DecisionEvent, at_ms: i128) -> Value {
    json!({
        "event": "decision",
        "message_id": d.message_id,
        "stage": d.stage,
        "triggered": d.triggered,
        "reason": d.reason,
        "react": d.react,
        "scores": d.scores,
        "at_ms": at_ms as i64,
    })
}

/// The `--jsonl` output object of an action.
pub(crate) fn json_event(action: &Action, at_ms: i128) -> Value {
    let mut v = match action {
        Action::Inbound { message, .. } => json!({
            "event": "inbound", "id": message.id, "from": message.sender.name,
            "text": message.text, "reply_to": message.reply_to,
        }),
        Action::Send { message, .. } => json!({
            "event": "send", "id": message.id, "text": message.text, "reply_to": message.reply_to,
        }),
        Action::Sticker {
            message, sticker, ..
        } => json!({
            "event": "sticker", "id": message.id, "set": sticker.set, "name": sticker.name,
            "reply_to": message.reply_to,
        }),
        Action::Voice { message, file, .. } => json!({
            "event": "voice", "id": message.id, "file": file,
            "duration": message.media.as_ref().and_then(|m| m.duration_secs),
            "text": message.text, "reply_to": message.reply_to,
        }),
        Action::Media {
            message, album_id, ..
        } => json!({
            "event": "media", "id": message.id, "album_id": album_id,
            "kind": message.media.as_ref().map(|m| m.kind.as_str()),
            "reply_to": message.reply_to,
        }),
        Action::React {
            message_id, emoji, ..
        } => json!({"event": "react", "message_id": message_id, "emoji": emoji}),
        Action::Typing { .. } => json!({"event": "typing"}),
        Action::RecordingVoice { .. } => json!({"event": "recording_voice"}),
        Action::Read { upto, .. } => json!({"event": "read", "upto": upto}),
        Action::Block { .. } => json!({"event": "block"}),
        Action::Unblock { .. } => json!({"event": "unblock"}),
        Action::Clear { .. } => json!({"event": "clear"}),
        Action::Status { online } => json!({"event": "status", "online": online}),
    };
    if let Some(obj) = v.as_object_mut() {
        obj.insert("at_ms".into(), Value::from(at_ms as i64));
    }
    v
}

/// Text for a terminal: control characters (escape sequences that would recolour, move the
/// cursor or retitle the window) and bidirectional overrides and isolates (which reorder what
/// follows) are shown as `\u{..}` instead of acting. Line breaks and tabs stay.
pub(crate) fn terminal_safe(text: &str) -> String {
    let acts = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
    };
    if !text.chars().any(acts) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if acts(c) {
                format!("\\u{{{:x}}}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

pub(super) fn human_event(action: &Action, at_ms: i128, agent: &str) -> Option<String> {
    human_line(action, at_ms, agent).map(|line| terminal_safe(&line))
}

fn human_line(action: &Action, at_ms: i128, agent: &str) -> Option<String> {
    let t = format!("[{:>7.1}s]", at_ms as f64 / 1000.0);
    let reply =
        |r: &Option<MessageId>| r.map(|id| format!(" (reply to #{id})")).unwrap_or_default();
    Some(match action {
        // Echoed with its id, so replies and reactions can be followed.
        Action::Inbound { message, .. } => {
            format!(
                "{t} #{} {}: {}",
                message.id, message.sender.name, message.text
            )
        }
        Action::Send { message, .. } => format!(
            "{t} #{} {agent}{}: {}",
            message.id,
            reply(&message.reply_to),
            message.text
        ),
        Action::Sticker {
            message, sticker, ..
        } => format!(
            "{t} #{} {agent}{} sends sticker {} / {}",
            message.id,
            reply(&message.reply_to),
            sticker.set,
            sticker.name
        ),
        Action::Voice { message, file, .. } => format!(
            "{t} #{} {agent}{} sends a voice note ({} s{}): {}",
            message.id,
            reply(&message.reply_to),
            message
                .media
                .as_ref()
                .and_then(|m| m.duration_secs)
                .unwrap_or(0),
            file.as_ref()
                .map(|f| format!(", {}", f.display()))
                .unwrap_or_default(),
            message.text
        ),
        Action::Media {
            message, album_id, ..
        } => format!(
            "{t} #{} {agent}{} sends {} {album_id} from the album",
            message.id,
            reply(&message.reply_to),
            message.media.as_ref().map_or("media", |m| m.kind.as_str()),
        ),
        Action::React {
            message_id, emoji, ..
        } => format!("{t} {agent} reacts {emoji} to #{message_id}"),
        Action::Typing { .. } => format!("{t} {agent} is typing..."),
        Action::RecordingVoice { .. } => format!("{t} {agent} is recording a voice note..."),
        Action::Read { .. } => return None,
        Action::Block { .. } => format!("{t} {agent} blocked you"),
        Action::Unblock { .. } => format!("{t} {agent} unblocked you"),
        Action::Clear { .. } => format!("{t} {agent} cleared the conversation"),
        Action::Status { online } => {
            format!(
                "{t} {agent} is {}",
                if *online { "online" } else { "offline" }
            )
        }
    })
}

/// One memory write for the printer: its kind (`remember`, `note`, `summary`), scope, what
/// happened and the text.
pub(super) type MemoryEvent = (&'static str, crate::core::facts::FactScope, String, String);

/// The playground's memory store: the files under its state directory, with every applied
/// write also reported to the printer (a `remember`/`note` event).
pub(super) struct ObservedFacts {
    inner: Arc<FileFacts>,
    tx: mpsc::UnboundedSender<MemoryEvent>,
}

impl ObservedFacts {
    pub(super) fn new(
        inner: Arc<FileFacts>,
    ) -> (ObservedFacts, mpsc::UnboundedReceiver<MemoryEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ObservedFacts { inner, tx }, rx)
    }
}

impl crate::ports::facts::FactStore for ObservedFacts {
    fn read(
        &self,
        agent: &str,
        scope: crate::core::facts::FactScope,
    ) -> Result<crate::core::facts::FactFile, crate::ports::facts::FactError> {
        self.inner.read(agent, scope)
    }

    fn persona_text(&self, agent: &str) -> Result<String, crate::ports::facts::FactError> {
        self.inner.persona_text(agent)
    }

    fn apply(
        &self,
        agent: &str,
        scope: crate::core::facts::FactScope,
        write: &crate::core::facts::FactWrite,
        source: &crate::core::facts::Source,
    ) -> Result<
        Result<crate::core::facts::Applied, crate::core::facts::Refused>,
        crate::ports::facts::FactError,
    > {
        use crate::core::facts::Applied;
        let result = self.inner.apply(agent, scope, write, source)?;
        let outcome = match &result {
            Ok(Applied::Created(id)) => Some(("created", id.clone())),
            Ok(Applied::Replaced(id)) => Some(("replaced", id.clone())),
            Ok(Applied::Deleted(id)) => Some(("deleted", id.clone())),
            Ok(Applied::NothingToDelete(_) | Applied::AlreadyApplied) => None,
            Err(refused) => Some(("refused", refused.to_string())),
        };
        if let Some((what, id)) = outcome {
            let kind = match scope {
                crate::core::facts::FactScope::Chat(_) => "note",
                crate::core::facts::FactScope::Intentions => "intend",
                crate::core::facts::FactScope::Plans(_) => "plan",
                _ => "remember",
            };
            let _ = self
                .tx
                .send((kind, scope, format!("{what} {id}"), write.content.clone()));
        }
        Ok(result)
    }

    fn scopes(
        &self,
        agent: &str,
    ) -> Result<Vec<crate::core::facts::FactScope>, crate::ports::facts::FactError> {
        self.inner.scopes(agent)
    }

    fn summaries(
        &self,
        agent: &str,
        chat: ChatId,
    ) -> Result<crate::core::summaries::SummaryFile, crate::ports::facts::FactError> {
        self.inner.summaries(agent, chat)
    }

    fn summary_chats(&self, agent: &str) -> Result<Vec<ChatId>, crate::ports::facts::FactError> {
        self.inner.summary_chats(agent)
    }

    fn fresh_start(
        &self,
        agent: &str,
        chat: ChatId,
        first: MessageId,
        notes: bool,
        intents: &str,
    ) -> Result<Option<Vec<std::path::PathBuf>>, crate::ports::facts::FactError> {
        let moved = self.inner.fresh_start(agent, chat, first, notes, intents)?;
        if let Some(files) = &moved {
            let _ = self.tx.send((
                "reset",
                crate::core::facts::FactScope::Chat(chat),
                format!("from message {first}"),
                format!("{} file(s) archived", files.len()),
            ));
        }
        Ok(moved)
    }

    fn save_summaries(
        &self,
        agent: &str,
        chat: ChatId,
        file: &crate::core::summaries::SummaryFile,
    ) -> Result<(), crate::ports::facts::FactError> {
        let before = self.inner.summaries(agent, chat).unwrap_or_default();
        self.inner.save_summaries(agent, chat, file)?;
        if let Some(new) = file
            .summaries
            .last()
            .filter(|s| before.summaries.last() != Some(*s))
        {
            let outcome = format!("messages {}–{}", new.first, new.last);
            let _ = self.tx.send((
                "summary",
                crate::core::facts::FactScope::Chat(chat),
                outcome,
                new.text.clone(),
            ));
        }
        Ok(())
    }

    fn known_absent(&self, agent: &str, files: &[crate::ports::facts::MemoryFile]) -> bool {
        self.inner.known_absent(agent, files)
    }
}

/// Shows the runtime the process's memory store with each write printed (a task of the
/// session's lifecycle prints them).
pub(super) fn observe_memory(life: &Lifecycle, args: &ChatArgs, clock: &SharedClock) -> ViewFacts {
    let (life, jsonl, clock) = (life.clone(), args.jsonl, Arc::clone(clock));
    Box::new(move |facts| {
        let (observed, events) = ObservedFacts::new(facts);
        let start = clock.now();
        life.spawn(print_memory(events, clock, start, jsonl));
        Arc::new(observed)
    })
}

/// Prints every memory write: a `remember` or `note` event in `--jsonl` mode, a line
/// otherwise.
pub(super) async fn print_memory(
    mut rx: mpsc::UnboundedReceiver<MemoryEvent>,
    clock: SharedClock,
    start: Timestamp,
    jsonl: bool,
) {
    use crate::core::facts::FactScope;
    while let Some((kind, scope, outcome, text)) = rx.recv().await {
        let at_ms = clock.now().duration_since(start).as_millis().max(0);
        let about = match scope {
            FactScope::Chat(c) | FactScope::Plans(c) => c.0,
            FactScope::Person(p) => p,
            FactScope::Persona | FactScope::Intentions => 0,
        };
        let line = if jsonl {
            json!({"event": kind, "about": about, "outcome": outcome, "text": text, "at_ms": at_ms as i64})
                .to_string()
        } else {
            let t = format!("[{:>7.1}s]", at_ms as f64 / 1000.0);
            terminal_safe(&format!("{t} {kind} ({scope}): {outcome}: {text}"))
        };
        emit_line(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::{Action, human_event, json_event};
    use crate::core::model::{ChatId, MediaInfo, MediaKind, Message, MessageId, Sender};

    fn voice_action() -> Action {
        let message = Message {
            id: MessageId(7),
            chat: ChatId(5),
            sender: Sender {
                id: 1,
                name: "Wren".into(),
                username: None,
                is_bot: false,
                service: false,
                deleted: false,
            },
            outgoing: true,
            text: "the train is late".into(),
            mentions: Vec::new(),
            reply_to: Some(MessageId(6)),
            date: jiff::Timestamp::UNIX_EPOCH,
            media: Some(Box::new(MediaInfo {
                kind: MediaKind::Voice,
                unique_id: "voice:5:7".into(),
                mime: Some("audio/ogg".into()),
                size: Some(10),
                duration_secs: Some(4),
                file_name: Some("voice/5/7.ogg".into()),
                sticker: None,
            })),
        };
        Action::Voice {
            chat: ChatId(5),
            message,
            file: Some("/s/voice/5/7.ogg".into()),
        }
    }

    /// A voice note is a `voice` event with its file, duration and words; the recording
    /// action is `recording_voice`.
    #[test]
    fn a_voice_note_prints_its_file_duration_and_words() {
        let v = json_event(&voice_action(), 1500);
        assert_eq!(v["event"], "voice");
        assert_eq!(v["id"], 7);
        assert_eq!(v["file"], "/s/voice/5/7.ogg");
        assert_eq!(v["duration"], 4);
        assert_eq!(v["text"], "the train is late");
        assert_eq!(v["reply_to"], 6);
        assert_eq!(v["at_ms"], 1500);
        let line = human_event(&voice_action(), 1500, "Wren").unwrap_or_default();
        assert_eq!(
            line,
            "[    1.5s] #7 Wren (reply to #6) sends a voice note (4 s, /s/voice/5/7.ogg): the train is late"
        );
        let rec = json_event(&Action::RecordingVoice { chat: ChatId(5) }, 0);
        assert_eq!(rec["event"], "recording_voice");
    }
}
