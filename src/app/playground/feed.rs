//! The playground's input side: each line read (on a thread of its own, capped), parsed
//! (typed text, or a JSON object with `--jsonl`), turned into a message in the session's
//! chat (with media read from disk, mentions as entities) and pushed through the admission
//! chain; a line from the owner writes in Saved Messages and may decide a draft. A voice note
//! given with its words has them recorded as its transcript first (as the media pipeline
//! records one it made). Also the unread scan at start. Called by `chat`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::adapters::memory::{Incoming, MemoryTelegram, user_id_for};
use crate::adapters::store::StateDir;
use crate::app::cli::ChatArgs;
use crate::app::commands::CommandError;
use crate::app::playground::input::{
    self, InputError, InputMedia, MAX_LINE_BYTES, RawLine, read_line_capped,
};
use crate::app::playground::output::emit_error;
use crate::core::media::{MediaRecord, MediaStatus};
use crate::core::model::{Chat, ChatId, MediaInfo, MediaKind, Mention, MessageId, StickerInfo};
use crate::ingress::Ingress;
use crate::ingress::gate::GroupGate;
use crate::ports::clock::{self, Hold, SharedClock};
use crate::ports::telegram::Telegram;

/// Largest media file the playground reads from disk.
const MAX_MEDIA_BYTES: u64 = 20 * 1024 * 1024;

/// A message ready to inject, plus how long to wait before it.
struct Pending {
    after: Duration,
    incoming: Incoming,
    media_bytes: Option<Vec<u8>>,
    /// A voice note's words, given with it: its transcript, recorded before it arrives.
    transcript: Option<String>,
}

/// The unread scan of the playground, as the daemon does on connecting: when the newest
/// message from others in the session's chat was never read (its planning never started,
/// say the previous session was killed between the message and its plan) and no graph on
/// disk answers it, it is handed to the runtime again. Only the session's chat is scanned.
pub(super) async fn recover_unanswered(driver: &Driver<'_>, dir: &std::path::Path) {
    let chat = driver.chat;
    let transcript = driver.memory.transcript(chat.id);
    let Some(newest) = transcript.iter().rev().find(|m| !m.outgoing).cloned() else {
        return;
    };
    if driver
        .memory
        .read_upto(chat.id)
        .is_some_and(|r| r >= newest.id)
        || driver.memory.is_blocked(chat.id)
    {
        return;
    }
    let key = crate::core::graph::ConversationKey::new(driver.agent, chat.id);
    // The journal over the graph file: a plan under way may not have a file yet.
    let store = crate::adapters::store::GraphStore::new(StateDir::new(dir));
    let answered = tokio::task::spawn_blocking(move || {
        let graph = store.read_graph(&key).ok()??;
        graph.tasks.iter().find_map(|t| match t.spec {
            crate::core::graph::spec::TaskSpec::Received { message_id, .. } => message_id,
            _ => None,
        })
    })
    .await
    .ok()
    .flatten();
    if answered == Some(newest.id) {
        return;
    }
    tracing::info!(
        event = "unanswered_replanned",
        message_id = newest.id.0,
        "a message of the previous session was never planned: planning it now"
    );
    driver
        .ingress
        .push(driver.agent, chat.clone(), newest, true);
}

/// Standard input, read on a thread of its own (never the runtime's blocking pool, so a
/// read that never returns cannot keep the process alive at exit). The channel ends at the
/// end of input; a read error arrives as `Err` and ends it too.
pub(super) fn spawn_stdin_reader()
-> Result<mpsc::Receiver<Result<RawLine, InputError>>, CommandError> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            loop {
                match read_line_capped(&mut input, MAX_LINE_BYTES) {
                    Ok(None) => return,
                    Ok(Some(line)) => {
                        if tx.blocking_send(Ok(line)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(InputError::Read(e)));
                        return;
                    }
                }
            }
        })
        .map_err(|e| CommandError::unexpected(e).doing("cannot start the input reader"))?;
    Ok(rx)
}

/// Feeds the session's input into its chat.
pub(super) struct Driver<'a> {
    pub(super) args: &'a ChatArgs,
    pub(super) memory: &'a Arc<MemoryTelegram>,
    /// The door every line takes (the admission chain).
    pub(super) ingress: &'a Ingress,
    pub(super) clock: &'a SharedClock,
    pub(super) chat: &'a Chat,
    pub(super) agent: &'a str,
    pub(super) gate: Option<&'a GroupGate>,
    /// The state whose media records the pipeline reads (a voice note's given words go there).
    pub(super) media_state: StateDir,
}

impl Driver<'_> {
    /// Reads the input to its end, injecting each message into the chat. A line that is not
    /// UTF-8, too long or (in `--jsonl`) not a valid message gets an `error` event naming its
    /// line number and is skipped. `Err` when reading failed (after an `error` event): the
    /// lines before were handled.
    pub(super) async fn feed(
        &self,
        hold: &mut Option<Hold>,
        mut input: mpsc::Receiver<Result<RawLine, InputError>>,
    ) -> Result<(), ()> {
        let mut line_no = 0usize;
        while let Some(read) = input.recv().await {
            line_no += 1;
            let bytes = match read {
                Ok(RawLine::Bytes(b)) => b,
                Ok(RawLine::TooLong) => {
                    self.error(&format!(
                        "line {line_no}: longer than {MAX_LINE_BYTES} bytes; skipped"
                    ));
                    continue;
                }
                Err(e) => {
                    self.error(&format!(
                        "cannot read input after line {}: {e}; treating it as the end of input",
                        line_no - 1
                    ));
                    return Err(());
                }
            };
            let line = match input::line_text(bytes) {
                Ok(l) => l,
                Err(message) => {
                    self.error(&format!("line {line_no}: {message}; skipped"));
                    continue;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let pending = if self.args.jsonl {
                match self.parse_jsonl(&line).await {
                    Ok(p) => p,
                    Err(message) => {
                        self.error(&format!("line {line_no}: {message}"));
                        continue;
                    }
                }
            } else {
                self.parse_typed(&line)
            };
            if !pending.after.is_zero() {
                // Let time pass (virtual in fast mode): the persona may act meanwhile.
                let taken = hold.take();
                *hold =
                    Some(clock::sleep_releasing(self.clock.as_ref(), pending.after, taken).await);
            }
            self.deliver(pending).await;
        }
        Ok(())
    }

    /// Reports a problem with the input: an `error` event in `--jsonl` mode, a line on
    /// stderr otherwise.
    fn error(&self, message: &str) {
        if self.args.jsonl {
            emit_error(message);
        } else {
            eprintln!("personad: {message}");
        }
    }

    fn parse_typed(&self, line: &str) -> Pending {
        let speaker = line.split_once(':').filter(|(name, _)| {
            let name = name.trim();
            !name.is_empty() && name.chars().count() <= 32 && name.split_whitespace().count() <= 3
        });
        let (from, text) = match (&self.args.group, speaker) {
            (Some(_), Some((name, text))) => (name.trim().to_string(), text.trim().to_string()),
            _ => (self.args.user.clone(), line.to_string()),
        };
        Pending {
            after: Duration::ZERO,
            incoming: Incoming {
                mentions: self.mentions(&text),
                from,
                text,
                ..Incoming::default()
            },
            media_bytes: None,
            transcript: None,
        }
    }

    /// `@Name` tokens as mention entities (the persona's own name is its user id).
    fn mentions(&self, text: &str) -> Vec<Mention> {
        if self.gate.is_none() {
            return Vec::new();
        }
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '@'))
            .filter_map(|w| w.strip_prefix('@'))
            .filter(|w| !w.is_empty() && !w.contains('@'))
            .map(|name| {
                let user_id = if name.eq_ignore_ascii_case(self.agent) {
                    self.memory.self_id()
                } else {
                    user_id_for(name)
                };
                Mention {
                    user_id: Some(user_id),
                    username: Some(name.to_string()),
                }
            })
            .collect()
    }

    async fn parse_jsonl(&self, line: &str) -> Result<Pending, InputError> {
        let input = input::parse_jsonl(line)?;
        let transcript = input.media.as_ref().and_then(|m| m.transcript.clone());
        let (media, media_bytes) = match input.media {
            Some(m) => {
                let (info, bytes) = media_from_input(m).await?;
                (Some(info), bytes)
            }
            None => (None, None),
        };
        Ok(Pending {
            after: input.after,
            incoming: Incoming {
                from: input.from.unwrap_or_else(|| self.args.user.clone()),
                mentions: self.mentions(&input.text),
                text: input.text,
                reply_to: input.reply_to.map(MessageId),
                media,
            },
            media_bytes,
            transcript,
        })
    }

    async fn deliver(&self, pending: Pending) {
        if pending.incoming.from.eq_ignore_ascii_case("owner") {
            return self.owner_says(pending.incoming).await;
        }
        let media_id = pending.incoming.media.as_ref().map(|m| m.unique_id.clone());
        if let (Some(id), Some(bytes)) = (media_id, pending.media_bytes) {
            self.memory.put_media(&id, bytes);
        }
        if let (Some(media), Some(words)) = (&pending.incoming.media, pending.transcript) {
            self.record_transcript(media, words).await;
        }
        match self.memory.inject(self.chat.id, pending.incoming).await {
            Ok(msg) => self.ingress.push(self.agent, self.chat.clone(), msg, true),
            Err(e) => self.error(&format!("could not deliver the message: {e}")),
        }
    }
}

impl Driver<'_> {
    /// Records a voice note's transcript given with it, as the media pipeline records one it
    /// made (so the prompt shows the words and no speech-to-text runs). A failure is an
    /// `error` event; the voice note still arrives (its words then untold).
    async fn record_transcript(&self, media: &MediaInfo, words: String) {
        let mut record = MediaRecord::new(media, self.clock.now());
        record.description = Some(words);
        record.status = MediaStatus::Ok;
        let path = self.media_state.media_record_path(&media.unique_id);
        let written =
            tokio::task::spawn_blocking(move || crate::adapters::store::write_json(&path, &record))
                .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.error(&format!("could not record the voice note's words: {e}")),
            Err(e) => self.error(&format!("could not record the voice note's words: {e}")),
        }
    }

    /// A line `from: "owner"`: the owner writes in the persona's Saved Messages; a reply there
    /// (`reply_to`) is the owner's word on the draft it answers (`ok`, `no`, `later`, a text).
    async fn owner_says(&self, incoming: Incoming) {
        let saved = ChatId(self.memory.self_id());
        let sent = self
            .memory
            .send_text(crate::core::model::OutgoingText {
                chat: saved,
                text: incoming.text.clone(),
                reply_to: incoming.reply_to,
                idempotency_key: fastrand::i64(1..),
            })
            .await;
        if let Err(e) = sent {
            return self.error(&format!("could not write to Saved Messages: {e}"));
        }
        if let (Some(message), Some(decision)) = (
            incoming.reply_to,
            crate::core::approval::Decision::from_reply(&incoming.text),
        ) {
            self.ingress.runtime().decide_draft(
                self.agent,
                crate::core::scheduler::DraftRef::Reply {
                    chat: saved,
                    message,
                },
                decision,
            );
        }
    }
}

/// Builds media info (and reads the file, if any) for a `--jsonl` media object.
async fn media_from_input(m: InputMedia) -> Result<(MediaInfo, Option<Vec<u8>>), InputError> {
    let bytes = match &m.path {
        Some(path) => {
            let path = path.clone();
            // Regular files only (a FIFO or device would block or never end), under the cap
            // even where the size on record is wrong (procfs says 0).
            let read = tokio::task::spawn_blocking(move || {
                crate::adapters::store::read_file(
                    &path,
                    MAX_MEDIA_BYTES,
                    crate::adapters::store::Symlinks::Follow,
                )
                .map_err(InputError::Media)
            })
            .await??;
            Some(read)
        }
        None => None,
    };
    let kind = MediaKind::from(m.kind);
    let unique_id = match (&bytes, &m.set, &m.name) {
        (Some(b), _, _) => format!("local-{:016x}", fnv64(b)),
        // The same words are the same voice note (one record, however often it is sent).
        (None, _, _) if m.transcript.is_some() => format!(
            "local-voice-{:016x}",
            fnv64(m.transcript.as_deref().unwrap_or_default().as_bytes())
        ),
        (None, Some(set), Some(name)) => format!("sticker:{set}:{name}"),
        _ => format!("local-{}-{:016x}", kind.as_str(), fastrand::u64(..)),
    };
    let sticker = (kind == MediaKind::Sticker).then(|| StickerInfo {
        set: m.set.clone(),
        name: m
            .name
            .clone()
            .or_else(|| m.emoji.clone())
            .unwrap_or_default(),
        emoji: m.emoji.clone(),
    });
    let info = MediaInfo {
        kind,
        unique_id,
        mime: (kind == MediaKind::Voice).then(|| "audio/ogg".to_string()),
        size: bytes.as_ref().map(|b| b.len() as u64),
        duration_secs: m.duration,
        file_name: m
            .path
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|f| f.to_string_lossy().into_owned()),
        sticker,
    };
    Ok((info, bytes))
}

fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
