//! The `chat` playground: the real runtime on the in-memory Telegram, driven from the
//! terminal. Interactive mode reads one message per line and prints the persona's actions as
//! they happen; `--jsonl` speaks JSON objects on both sides (docs/playground.md); `--fast`
//! runs the scheduler on virtual time, which moves only when the input says time passes
//! (`after_ms`) and at end of input. Graphs and transcripts persist in the state dir, so a
//! playground killed mid-plan resumes when started again. Called by the binary.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig, llm_from_env};
use crate::adapters::memory::{Action, Incoming, MemoryTelegram, Recorded, user_id_for};
use crate::adapters::store::{GraphStore, StateDir};
use crate::app::cli::{ChatArgs, GlobalArgs, PlannerChoice};
use crate::app::commands::{
    CmdResult, CommandError, find_persona, load_personas_async, playground_dir,
};
use crate::app::services;
use crate::core::model::{
    Chat, ChatId, ChatKind, MediaInfo, MediaKind, Mention, MessageId, StickerInfo,
};
use crate::ingress::chain::Groups;
use crate::ingress::classifier::Classifier;
use crate::ingress::gate::{DecisionEvent, GateConfig, GroupGate, identity_for};
use crate::ports::clock::{self, Hold, SharedClock, SystemClock, VirtualClock};
use crate::ports::llm::Llm;
use crate::ports::planner::{EchoPlanner, SharedPlanner};
use crate::ports::telegram::Telegram;
use crate::runtime::{AgentHandle, RuntimeHandle};

pub mod input;

use input::{InputError, InputMedia, MAX_LINE_BYTES, RawLine, read_line_capped};
mod output;
use output::*;
mod signals;
use signals::*;

/// Largest media file the playground reads from disk.
const MAX_MEDIA_BYTES: u64 = 20 * 1024 * 1024;

/// Exit code after SIGINT (128 + 2), graceful or not.
pub(crate) const EXIT_SIGINT: u8 = 130;
/// Exit code after SIGTERM (128 + 15), graceful or not.
pub(crate) const EXIT_SIGTERM: u8 = 143;

/// How long the task in flight may run on after a stop signal (on the run's clock).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A message ready to inject, plus how long to wait before it.
struct Pending {
    after: Duration,
    incoming: Incoming,
    media_bytes: Option<Vec<u8>>,
}

/// `personad chat`.
pub async fn chat(global: GlobalArgs, args: ChatArgs) -> CmdResult {
    let mut config = args.runtime.raw().validate()?;
    config.shutdown_grace = STOP_GRACE;
    let _lock = crate::app::commands::lock_state(&global)?;
    let report = load_personas_async(&global).await?;
    let persona = Arc::new(find_persona(&report, &args.agent)?);
    let clock = session_clock(&args);
    let chat = session_chat(&args);
    let dir = playground_dir(&global, &persona.name);
    let memory = open_memory(&persona.name, &clock, &dir, &args, &chat).await?;
    let media_state = StateDir::new(&global.state_dir);
    let usage = usage_meter(&media_state, &clock).await?;
    let (planner, llm) = choose_planner(
        &args,
        &persona,
        &config,
        &media_state,
        Arc::clone(&usage),
        Arc::clone(&clock),
    )?;
    let classifier = llm
        .as_ref()
        .map(|l| Classifier::new(Arc::clone(l), Arc::clone(&clock)));
    let media = services::media_pipeline(&args.media, llm, media_state, &clock, &usage).await?;
    let mut runtime = services::runtime(
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
        &clock,
    );
    if let Some(media) = media {
        runtime = runtime.with_media(media);
    }
    runtime = with_printed_memory(runtime, StateDir::new(&dir), &args, &clock);
    let base = runtime.handle();
    services::spending_caps(&usage, &base);
    let start = clock.now();
    let gate = (!chat.kind.is_direct())
        .then(|| group_gate(&args, &persona, &memory, &base, &clock, classifier, &chat));
    // The admission chain: every message of the session takes it (the group gate decides,
    // `classify` tasks reach it through the runtime).
    let groups = Groups::new();
    gate.iter()
        .for_each(|g| groups.insert(&persona.name, g.clone()));
    let handle = services::admission(&base, None, &groups);
    let decisions = gate.as_ref().map(|g| {
        tokio::spawn(print_decisions(
            g.observe(),
            Arc::clone(&clock),
            start,
            args.jsonl,
        ))
    });
    let (presence_stop, presence_printer) = spawn_presence_printer(&base, start, &args, &persona);
    let printer = tokio::spawn(print_actions(
        memory.observe(),
        start,
        args.jsonl,
        (persona.name.clone(), ChatId(memory.self_id())),
        gate.clone().map(|g| (g, chat.clone())),
    ));
    // In fast mode virtual time stands still while input is read.
    let mut hold = Some(clock.hold());
    let mut run = tokio::spawn(runtime.run());
    // Input moves virtual time only once the runtime has loaded and looked at its state (a
    // schedule's activity at the start is announced at the start).
    base.wait_until(|st| st.started).await;
    let mut read_failed = false;
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
        crate::app::ops::watch::watch(&dirs, Duration::from_millis(300), reload_tx.clone()).ok()
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
    // Stop signals: the first stops intake and lets the task in flight finish within the
    // grace period, a second exits at once.
    let (signal_tx, mut signals) = mpsc::unbounded_channel::<&'static str>();
    let signal_task = tokio::spawn(forward_stop_signals(signal_tx));
    recover_unanswered(&driver, &dir).await;
    let input = spawn_stdin_reader()?;
    let stopped_by = tokio::select! {
        end = driver.feed(&mut hold, input) => {
            read_failed = end.is_err();
            None
        }
        Some(name) = signals.recv() => Some(name),
    };
    drop(hold);
    let stopped_by = settle_and_stop(&handle, &mut signals, stopped_by).await;
    let result = tokio::select! {
        r = &mut run => r,
        Some(name) = signals.recv() => {
            tracing::warn!(event = "exit_now", signal = name, "second signal: exiting at once; an unfinished plan resumes at the next start");
            memory.stop_observing();
            return Ok(ExitCode::from(signal_exit_code(name)));
        }
    };
    let result = result.map_err(|e| CommandError::Join(e).doing("runtime task failed"))?;
    for t in [&signal_task, &reloader, &hangups] {
        t.abort();
    }
    let _ = usage.flush().await;
    memory.stop_observing();
    let _ = printer.await;
    let _ = (presence_stop.send(()), presence_printer.await);
    if let (Some(g), Some(d)) = (&gate, decisions) {
        g.stop_observing();
        let _ = d.await;
    }
    if let Err(e) = result {
        return Err(CommandError::Runtime(e));
    }
    if let Some(name) = stopped_by {
        return Ok(ExitCode::from(signal_exit_code(name)));
    }
    if read_failed {
        return Err(CommandError::Io(std::io::Error::other(
            "standard input failed; the lines before the failure were handled",
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The LLM usage meter over the state directory (shared with the daemon's records).
async fn usage_meter(
    state: &StateDir,
    clock: &SharedClock,
) -> Result<Arc<crate::adapters::llm::usage::UsageMeter>, CommandError> {
    Ok(Arc::new(
        crate::adapters::llm::usage::UsageMeter::load_async(state.clone(), Arc::clone(clock))
            .await
            .map_err(CommandError::unexpected)?,
    ))
}

/// The session's clock: virtual (waits cost no real time) with `--fast`, else the system's.
fn session_clock(args: &ChatArgs) -> SharedClock {
    if args.fast {
        Arc::new(VirtualClock::new(
            args.start_at.unwrap_or_else(Timestamp::now),
            true,
        ))
    } else {
        Arc::new(SystemClock)
    }
}

/// The session's chat: a group by its title, or a direct chat with the user.
fn session_chat(args: &ChatArgs) -> Chat {
    match &args.group {
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
    }
}

/// The session's in-memory Telegram (transcripts under `dir`, the `--stickers` sets loaded
/// off the runtime's threads), with the session's chat in it.
async fn open_memory(
    agent: &str,
    clock: &SharedClock,
    dir: &std::path::Path,
    args: &ChatArgs,
    chat: &Chat,
) -> Result<Arc<MemoryTelegram>, CommandError> {
    let memory = {
        let (name, c, d) = (agent.to_string(), Arc::clone(clock), dir.to_path_buf());
        let stickers = args.stickers.clone();
        tokio::task::spawn_blocking(move || {
            let memory = MemoryTelegram::new(&name, c, Some(d))?;
            if let Some(dir) = stickers {
                memory.load_sticker_sets(&dir)?;
            }
            Ok::<_, crate::adapters::store::StoreError>(memory)
        })
        .await
        .map_err(CommandError::Join)??
    };
    let memory = Arc::new(memory);
    memory.ensure_chat(chat.clone());
    Ok(memory)
}

/// The session's group gate (a group session only): the persona's names, the classifier, and
/// the `--mode` override for the session's chat.
fn group_gate(
    args: &ChatArgs,
    persona: &Arc<crate::core::persona::Persona>,
    memory: &Arc<MemoryTelegram>,
    base: &RuntimeHandle,
    clock: &SharedClock,
    classifier: Option<Classifier>,
    chat: &Chat,
) -> GroupGate {
    let mut modes = std::collections::HashMap::new();
    if let Some(mode) = args.groups.mode {
        modes.insert(chat.id, mode);
    }
    GroupGate::new(GateConfig {
        agent: persona.name.clone(),
        persona: Arc::clone(persona),
        // In the playground the persona's @username is its name.
        identity: identity_for(persona, memory.self_id(), Some(persona.name.clone())),
        telegram: memory.clone(),
        runtime: base.clone(),
        classifier,
        classifier_model: Some(args.groups.classifier_model.clone()),
        clock: Arc::clone(clock),
        peers: crate::ingress::gate::peers([]),
        modes,
    })
}

/// The unread scan of the playground, as the daemon does on connecting: when the newest
/// message from others in the session's chat was never read (its planning never started,
/// say the previous session was killed between the message and its plan) and no graph on
/// disk answers it, it is handed to the runtime again. Only the session's chat is scanned.
async fn recover_unanswered(driver: &Driver<'_>, dir: &std::path::Path) {
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
    let path = StateDir::new(dir).graph_path(&crate::core::graph::ConversationKey::new(
        driver.agent,
        chat.id,
    ));
    let answered = tokio::task::spawn_blocking(move || {
        let text = crate::adapters::store::read_to_string(&path).ok()?;
        let graph = crate::core::graph::codec::decode(&text).ok()?;
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
        .handle
        .push_inbound(driver.agent, chat.clone(), newest, true);
}

/// Standard input, read on a thread of its own (never the runtime's blocking pool, so a
/// read that never returns cannot keep the process alive at exit). The channel ends at the
/// end of input; a read error arrives as `Err` and ends it too.
fn spawn_stdin_reader() -> Result<mpsc::Receiver<Result<RawLine, InputError>>, CommandError> {
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
                        let _ = tx.blocking_send(Err(InputError::of(e)));
                        return;
                    }
                }
            }
        })
        .map_err(|e| CommandError::unexpected(e).doing("cannot start the input reader"))?;
    Ok(rx)
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

/// The planner the playground runs: the persona's LLM when asked for (or when `auto` finds
/// its provider configured), otherwise the offline echo planner. With an LLM, the client is
/// returned too, for media descriptions.
fn choose_planner(
    args: &ChatArgs,
    persona: &crate::core::persona::Persona,
    runtime: &crate::core::config::RuntimeConfig,
    state: &StateDir,
    usage: Arc<crate::adapters::llm::usage::UsageMeter>,
    clock: SharedClock,
) -> Result<(SharedPlanner, Option<Arc<dyn Llm>>), CommandError> {
    let llm_error = |reason: String| {
        CommandError::Config(crate::core::config::ConfigError {
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
    let retry = crate::adapters::llm::retry::RetryConfig::within_task_timeout(
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
        .with_usage(usage);
    let route = planner.route(persona);
    let available = router.check_route(&route);
    if let Err(why) = available {
        if args.planner == PlannerChoice::Auto {
            eprintln!(
                "{why}: using the offline echo planner (configure the provider, or pass --planner echo to silence this)."
            );
            return Ok((Arc::new(EchoPlanner), None));
        }
        return Err(llm_error(why.to_string()));
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
    /// Reads the input to its end, injecting each message into the chat. A line that is not
    /// UTF-8, too long or (in `--jsonl`) not a valid message gets an `error` event naming its
    /// line number and is skipped. `Err` when reading failed (after an `error` event): the
    /// lines before were handled.
    async fn feed(
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
        match self.memory.inject(self.chat.id, pending.incoming).await {
            Ok(msg) => self
                .handle
                .push_inbound(self.agent, self.chat.clone(), msg, true),
            Err(e) => self.error(&format!("could not deliver the message: {e}")),
        }
    }
}

impl Driver<'_> {
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
            self.handle.decide_draft(
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
                .map_err(|e| format!("media file: {e}"))
            })
            .await
            .map_err(InputError::of)??;
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
