//! The `chat` playground: the real runtime on the in-memory Telegram, driven from the
//! terminal. Interactive mode reads one message per line and prints the persona's actions as
//! they happen; `--jsonl` speaks JSON objects on both sides (docs/playground.md); `--fast`
//! runs the scheduler on virtual time, which moves only when the input says time passes
//! (`after_ms`) and at end of input. Graphs and transcripts persist in the state dir, so a
//! playground killed mid-plan resumes when started again. Called by the binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::cli::{ChatArgs, GlobalArgs, PlannerChoice};
use crate::clock::{self, Hold, SharedClock, SystemClock, VirtualClock};
use crate::commands::{CmdResult, CommandError, find_persona, load_personas_async, playground_dir};
use crate::group::classifier::Classifier;
use crate::group::gate::{DecisionEvent, GateConfig, GroupGate, QuoteBook, identity_for};
use crate::llm::Llm;
use crate::llm_planner::{LlmPlanner, LlmPlannerConfig, llm_from_env};
use crate::media::MediaPipeline;
use crate::planner::{EchoPlanner, SharedPlanner};
use crate::runtime::{AgentHandle, Runtime, RuntimeHandle};
use crate::store::{GraphStore, StateDir};
use crate::telegram::memory::{Action, Incoming, MemoryTelegram, Recorded, user_id_for};
use crate::telegram::{
    Chat, ChatId, ChatKind, MediaInfo, MediaKind, Mention, MessageId, StickerInfo, Telegram,
};

/// Largest media file the playground reads from disk.
const MAX_MEDIA_BYTES: u64 = 20 * 1024 * 1024;

/// One line of `--jsonl` input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputLine {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    reply_to: Option<i64>,
    #[serde(default)]
    after_ms: u64,
    #[serde(default)]
    media: Option<InputMedia>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputMedia {
    kind: InputMediaKind,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    set: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    emoji: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum InputMediaKind {
    Photo,
    Sticker,
    Voice,
    Audio,
    Video,
    Gif,
    Document,
}

impl From<InputMediaKind> for MediaKind {
    fn from(k: InputMediaKind) -> MediaKind {
        match k {
            InputMediaKind::Photo => MediaKind::Photo,
            InputMediaKind::Sticker => MediaKind::Sticker,
            InputMediaKind::Voice => MediaKind::Voice,
            InputMediaKind::Audio => MediaKind::Audio,
            InputMediaKind::Video => MediaKind::Video,
            InputMediaKind::Gif => MediaKind::Gif,
            InputMediaKind::Document => MediaKind::Document,
        }
    }
}

/// A message ready to inject, plus how long to wait before it.
struct Pending {
    after: Duration,
    incoming: Incoming,
    media_bytes: Option<Vec<u8>>,
}

/// `personad chat`.
pub async fn chat(global: GlobalArgs, args: ChatArgs) -> CmdResult {
    let config = args.runtime.raw().validate()?;
    let _lock = crate::commands::lock_state(&global)?;
    let report = load_personas_async(&global).await?;
    let persona = Arc::new(find_persona(&report, &args.agent)?);
    let clock: SharedClock = if args.fast {
        Arc::new(VirtualClock::new(Timestamp::now(), true))
    } else {
        Arc::new(SystemClock)
    };
    let chat = match &args.group {
        Some(title) => Chat {
            id: ChatId(-user_id_for(title)),
            kind: ChatKind::Group,
            title: title.clone(),
        },
        None => Chat {
            id: ChatId(user_id_for(&args.user)),
            kind: ChatKind::Direct,
            title: args.user.clone(),
        },
    };
    let dir = playground_dir(&global, &persona.name);
    let memory = {
        let (name, c, d) = (persona.name.clone(), Arc::clone(&clock), dir.clone());
        let stickers = args.stickers.clone();
        tokio::task::spawn_blocking(move || {
            let memory = MemoryTelegram::new(&name, c, Some(d))?;
            if let Some(dir) = stickers {
                memory.load_sticker_sets(&dir)?;
            }
            Ok::<_, crate::store::StoreError>(memory)
        })
        .await
        .map_err(|e| CommandError::Failed(e.to_string()))??
    };
    let memory = Arc::new(memory);
    memory.ensure_chat(chat.clone());
    let quotes = QuoteBook::new();
    let quiet = config.debounce;
    let media_state = StateDir::new(&global.state_dir);
    let usage = Arc::new({
        let (s, c) = (media_state.clone(), Arc::clone(&clock));
        tokio::task::spawn_blocking(move || crate::llm::usage::UsageMeter::load(s, c))
            .await
            .map_err(|e| CommandError::Failed(e.to_string()))?
    });
    let (planner, llm) = choose_planner(
        &args,
        &persona,
        &config,
        &media_state,
        Arc::clone(&usage),
        Arc::clone(&clock),
        Arc::clone(&quotes),
    )?;
    let classifier = llm
        .as_ref()
        .map(|l| Classifier::new(Arc::clone(l), Arc::clone(&clock)));
    let media = match llm {
        Some(llm) => Some(Arc::new(
            MediaPipeline::load(
                args.media.config(),
                args.media.media_prompts.clone(),
                llm,
                media_state,
                Arc::clone(&clock),
            )
            .await
            .map_err(|e| CommandError::Io(e.to_string()))?
            .with_usage(usage),
        )),
        None => None,
    };
    let mut runtime = Runtime::new(
        config,
        vec![AgentHandle {
            persona: Arc::clone(&persona),
            telegram: memory.clone(),
        }],
        planner,
        // The playground keeps its graphs apart from the daemon's: its chats exist only in
        // the in-memory backend, and the daemon's plans must never be run (and dropped) here.
        // Media descriptions are facts about files, shared with the daemon's cache.
        GraphStore::new(StateDir::new(&dir)),
        Arc::clone(&clock),
    );
    if let Some(media) = media {
        runtime = runtime.with_media(media);
    }
    let handle = runtime.handle();
    let start = clock.now();
    let gate = (!chat.kind.is_direct()).then(|| {
        let mut modes = std::collections::HashMap::new();
        if let Some(mode) = args.groups.mode {
            modes.insert(chat.id, mode);
        }
        GroupGate::new(GateConfig {
            agent: persona.name.clone(),
            persona: Arc::clone(&persona),
            // In the playground the persona's @username is its name.
            identity: identity_for(&persona, memory.self_id(), Some(persona.name.clone())),
            telegram: memory.clone(),
            runtime: handle.clone(),
            classifier,
            classifier_model: Some(args.groups.classifier_model.clone()),
            clock: Arc::clone(&clock),
            quiet,
            peers: Vec::new(),
            modes,
            quotes,
        })
    });
    let decisions = gate.as_ref().map(|g| {
        tokio::spawn(print_decisions(
            g.observe(),
            Arc::clone(&clock),
            start,
            args.jsonl,
        ))
    });
    let printer = tokio::spawn(print_actions(
        memory.observe(),
        start,
        args.jsonl,
        persona.name.clone(),
        gate.clone().map(|g| (g, chat.clone())),
    ));
    // In fast mode virtual time stands still while input is read.
    let mut hold = Some(clock.hold());
    let run = tokio::spawn(runtime.run());
    if !args.jsonl {
        let who = match &args.group {
            Some(t) => format!("the group {t:?} (type `Name: message`)"),
            None => format!("a direct chat as {}", args.user),
        };
        eprintln!(
            "Talking to {} in {who}. Type a message and press Enter; Ctrl-D ends the session.",
            persona.name
        );
    }
    // Persona and role-prompt edits (and SIGHUP) reload the persona, as in the daemon.
    let (reload_tx, reload_rx) = mpsc::unbounded_channel::<()>();
    let _watcher = {
        let mut dirs = vec![global.agents_dir.clone()];
        dirs.extend(global.prompt_dirs());
        crate::ops::watch::watch(&dirs, Duration::from_millis(300), reload_tx.clone()).ok()
    };
    let reloader = tokio::spawn(reload_persona(
        global.clone(),
        persona.name.clone(),
        Arc::clone(&memory),
        handle.clone(),
        reload_rx,
    ));
    let hangups = tokio::spawn(forward_hangups(reload_tx));
    let driver = Driver {
        args: &args,
        memory: &memory,
        handle: &handle,
        clock: &clock,
        chat: &chat,
        agent: &persona.name,
        gate: gate.as_ref(),
    };
    let interrupted = tokio::select! {
        r = driver.feed(&mut hold) => { r?; false }
        _ = tokio::signal::ctrl_c() => true,
    };
    drop(hold);
    if interrupted {
        handle.shutdown("interrupted");
    } else {
        // A classifier batch or a delayed answer may still start a plan, and a plan may
        // still be running: wait until both sides are quiet.
        for _ in 0..3 {
            if let Some(g) = &gate {
                g.wait_idle().await;
            }
            handle.wait_idle().await;
        }
        handle.shutdown("end of input");
    }
    let result = run
        .await
        .map_err(|e| CommandError::Failed(format!("runtime task failed: {e}")))?;
    reloader.abort();
    hangups.abort();
    memory.stop_observing();
    let _ = printer.await;
    if let (Some(g), Some(d)) = (&gate, decisions) {
        g.stop_observing();
        let _ = d.await;
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CommandError::Io(e.to_string())),
    }
}

/// Reloads the playground's persona on request: a valid edit takes effect from the next
/// plan; an invalid one keeps the running version and is reported once per problem.
async fn reload_persona(
    global: GlobalArgs,
    agent: String,
    memory: Arc<MemoryTelegram>,
    handle: RuntimeHandle,
    mut requests: mpsc::UnboundedReceiver<()>,
) {
    let mut reported = std::collections::BTreeSet::new();
    while requests.recv().await.is_some() {
        let report = match load_personas_async(&global).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(event = "reload_failed", error = %e, "reload failed: the persona keeps running as it was");
                continue;
            }
        };
        match find_persona(&report, &agent) {
            Ok(p) => {
                tracing::info!(event = "persona_reloaded", agent = %agent, "persona reloaded");
                handle.upsert_agent(AgentHandle {
                    persona: Arc::new(p),
                    telegram: memory.clone(),
                });
            }
            Err(e) => {
                let text = e.to_string();
                if reported.insert(text.clone()) {
                    tracing::error!(event = "persona_edit_rejected", problem = %text, "persona edit rejected: the previous version keeps running");
                }
            }
        }
    }
}

/// Turns SIGHUP into reload requests.
async fn forward_hangups(reload: mpsc::UnboundedSender<()>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            if reload.send(()).is_err() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = reload;
    }
}

/// The planner the playground runs: the persona's LLM when asked for (or when `auto` finds
/// its provider configured), otherwise the offline echo planner. With an LLM, the client is
/// returned too, for media descriptions.
fn choose_planner(
    args: &ChatArgs,
    persona: &crate::persona::Persona,
    runtime: &crate::config::RuntimeConfig,
    state: &StateDir,
    usage: Arc<crate::llm::usage::UsageMeter>,
    clock: SharedClock,
    quotes: Arc<QuoteBook>,
) -> Result<(SharedPlanner, Option<Arc<dyn Llm>>), CommandError> {
    let llm_error = |reason: String| {
        CommandError::Config(crate::config::ConfigError {
            name: "llm",
            reason,
        })
    };
    if args.planner == PlannerChoice::Echo {
        return Ok((Arc::new(EchoPlanner), None));
    }
    let default_llm = args
        .llm
        .default_choice()
        .map_err(|e| llm_error(e.to_string()))?;
    let retry = crate::llm::retry::RetryConfig::within_task_timeout(
        runtime.task_timeout,
        args.llm.llm_attempts,
    );
    let (llm, router) = llm_from_env(retry, clock);
    let config = LlmPlannerConfig {
        default_llm,
        temperature: args.llm.temperature,
        max_output_tokens: args.llm.max_output_tokens,
        max_tasks: args.llm.max_tasks,
        history_size: runtime.history_limit,
    };
    let planner = LlmPlanner::new(Arc::clone(&llm), config)
        .with_state(state.clone())
        .with_usage(usage)
        .with_quote_book(quotes);
    let route = planner.route(persona);
    let available = crate::llm::provider::resolve(&route)
        .map_err(|e| e.to_string())
        .and_then(|c| router.check(c.provider));
    if let Err(why) = available {
        if args.planner == PlannerChoice::Auto {
            eprintln!(
                "{why}: using the offline echo planner (configure the provider, or pass --planner echo to silence this)."
            );
            return Ok((Arc::new(EchoPlanner), None));
        }
        return Err(llm_error(why));
    }
    Ok((Arc::new(planner), Some(llm)))
}

struct Driver<'a> {
    args: &'a ChatArgs,
    memory: &'a Arc<MemoryTelegram>,
    handle: &'a RuntimeHandle,
    clock: &'a SharedClock,
    chat: &'a Chat,
    agent: &'a str,
    gate: Option<&'a GroupGate>,
}

impl Driver<'_> {
    /// Reads stdin to its end, injecting each message into the chat.
    async fn feed(&self, hold: &mut Option<Hold>) -> Result<(), CommandError> {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let mut line_no = 0usize;
        loop {
            let line = lines
                .next_line()
                .await
                .map_err(|e| CommandError::Io(format!("cannot read stdin: {e}")))?;
            let Some(line) = line else {
                return Ok(());
            };
            line_no += 1;
            if line.trim().is_empty() {
                continue;
            }
            let pending = if self.args.jsonl {
                match self.parse_jsonl(&line).await {
                    Ok(p) => p,
                    Err(message) => {
                        emit_error(&format!("line {line_no}: {message}"));
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

    async fn parse_jsonl(&self, line: &str) -> Result<Pending, String> {
        let input: InputLine = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let from = input
            .from
            .filter(|f| !f.trim().is_empty())
            .unwrap_or_else(|| self.args.user.clone());
        let (media, media_bytes) = match input.media {
            Some(m) => {
                let (info, bytes) = media_from_input(m).await?;
                (Some(info), bytes)
            }
            None => (None, None),
        };
        if input.text.is_empty() && media.is_none() {
            return Err("a message needs `text` or `media`".into());
        }
        Ok(Pending {
            after: Duration::from_millis(input.after_ms),
            incoming: Incoming {
                from,
                mentions: self.mentions(&input.text),
                text: input.text,
                reply_to: input.reply_to.map(MessageId),
                media,
            },
            media_bytes,
        })
    }

    async fn deliver(&self, pending: Pending) {
        let media_id = pending.incoming.media.as_ref().map(|m| m.unique_id.clone());
        if let (Some(id), Some(bytes)) = (media_id, pending.media_bytes) {
            self.memory.put_media(&id, bytes);
        }
        match self.memory.inject(self.chat.id, pending.incoming).await {
            Ok(msg) => match self.gate {
                Some(gate) => gate.on_inbound(self.chat.clone(), msg, false, false),
                None => self
                    .handle
                    .push_inbound(self.agent, self.chat.clone(), msg, true),
            },
            Err(e) => emit_error(&format!("could not deliver the message: {e}")),
        }
    }
}

/// Builds media info (and reads the file, if any) for a `--jsonl` media object.
async fn media_from_input(m: InputMedia) -> Result<(MediaInfo, Option<Vec<u8>>), String> {
    let bytes = match &m.path {
        Some(path) => {
            let path = path.clone();
            let read = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
                let meta = std::fs::metadata(&path)
                    .map_err(|e| format!("media file {}: {e}", path.display()))?;
                if meta.len() > MAX_MEDIA_BYTES {
                    return Err(format!(
                        "media file {} is over {MAX_MEDIA_BYTES} bytes",
                        path.display()
                    ));
                }
                std::fs::read(&path).map_err(|e| format!("media file {}: {e}", path.display()))
            })
            .await
            .map_err(|e| e.to_string())??;
            Some(read)
        }
        None => None,
    };
    let kind = MediaKind::from(m.kind);
    let unique_id = match (&bytes, &m.set, &m.name) {
        (Some(b), _, _) => format!("local-{:016x}", fnv64(b)),
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
        mime: None,
        size: bytes.as_ref().map(|b| b.len() as u64),
        duration_secs: None,
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

fn emit_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

fn emit_error(message: &str) {
    emit_line(&json!({"event": "error", "at_ms": 0, "message": message}).to_string());
}

/// Prints every recorded action until the backend stops observing.
async fn print_actions(
    mut rx: mpsc::UnboundedReceiver<Recorded>,
    start: Timestamp,
    jsonl: bool,
    agent: String,
    gate: Option<(GroupGate, Chat)>,
) {
    while let Some(rec) = rx.recv().await {
        if let (
            Some((gate, chat)),
            Action::Send { message, .. } | Action::Sticker { message, .. },
        ) = (&gate, &rec.action)
        {
            gate.note_own(chat, message);
        }
        let at_ms = rec.at.duration_since(start).as_millis().max(0);
        let line = if jsonl {
            Some(json_event(&rec.action, at_ms).to_string())
        } else {
            human_event(&rec.action, at_ms, &agent)
        };
        if let Some(line) = line {
            emit_line(&line);
        }
    }
}

/// Prints every group decision until the gate stops observing: a `decision` event in
/// `--jsonl` mode, one dim line otherwise.
async fn print_decisions(
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
            format!(
                "\x1b[2m{t} #{} {verdict} ({} / {})\x1b[0m",
                d.message_id,
                d.stage.as_str(),
                d.reason
            )
        };
        emit_line(&line);
    }
}

/// The `--jsonl` object of a group decision.
pub fn decision_event(d: &DecisionEvent, at_ms: i128) -> Value {
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
pub fn json_event(action: &Action, at_ms: i128) -> Value {
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
        Action::React {
            message_id, emoji, ..
        } => json!({"event": "react", "message_id": message_id, "emoji": emoji}),
        Action::Typing { .. } => json!({"event": "typing"}),
        Action::Read { upto, .. } => json!({"event": "read", "upto": upto}),
        Action::Block { .. } => json!({"event": "block"}),
        Action::Unblock { .. } => json!({"event": "unblock"}),
        Action::Clear { .. } => json!({"event": "clear"}),
    };
    if let Some(obj) = v.as_object_mut() {
        obj.insert("at_ms".into(), Value::from(at_ms as i64));
    }
    v
}

fn human_event(action: &Action, at_ms: i128, agent: &str) -> Option<String> {
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
        Action::React {
            message_id, emoji, ..
        } => format!("{t} {agent} reacts {emoji} to #{message_id}"),
        Action::Typing { .. } => format!("{t} {agent} is typing..."),
        Action::Read { .. } => return None,
        Action::Block { .. } => format!("{t} {agent} blocked you"),
        Action::Unblock { .. } => format!("{t} {agent} unblocked you"),
        Action::Clear { .. } => format!("{t} {agent} cleared the conversation"),
    })
}
