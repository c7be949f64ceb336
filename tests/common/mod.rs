//! Test harness: the real runtime on the in-memory Telegram, a scripted planner and a
//! virtual clock that only moves when everything has settled (so tests never sleep).
#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod console;
pub(crate) mod daemon;
pub(crate) mod gemini;
pub(crate) mod logs;
pub(crate) mod retrieve;
#[allow(dead_code)]
pub(crate) mod slow_schedule;
pub(crate) mod tl;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use personad::adapters::media::MediaPipeline;
use personad::adapters::memory::{Incoming, MemoryTelegram};
use personad::adapters::stickers::StickerCatalog;
use personad::adapters::store::windows::WindowRecords;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::config::RuntimeConfig;
use personad::core::model::{Chat, ChatId, ChatKind, Message};
use personad::core::persona::Persona;
use personad::core::plan::{Action, PlanError, PlanRequest};
use personad::core::time::BoxFuture;
use personad::ports::clock::{self, SharedClock, VirtualClock};
use personad::ports::planner::{Planner, SharedPlanner};
use personad::ports::telegram::Telegram;
use personad::runtime::{AgentHandle, Runtime, RuntimeError, RuntimeHandle, StopReport};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) fn t0() -> Timestamp {
    Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Elapsed time since `t0()`, in milliseconds.
pub(crate) fn ms_since_t0(t: Timestamp) -> i64 {
    t.duration_since(t0()).as_millis() as i64
}

/// What a scripted planner does with one request.
pub(crate) type Script =
    dyn Fn(&PlanRequest<'_>, usize) -> Result<Vec<Action>, PlanError> + Send + Sync;

/// A planner driven by a closure, counting its calls; optionally blocking each call until
/// the test releases it.
pub(crate) struct ScriptedPlanner {
    script: Box<Script>,
    calls: AtomicUsize,
    gate: Option<Arc<Notify>>,
    entered: Notify,
    seen: Mutex<Vec<(ChatId, usize)>>,
}

impl ScriptedPlanner {
    pub(crate) fn new(
        f: impl Fn(&PlanRequest<'_>, usize) -> Result<Vec<Action>, PlanError> + Send + Sync + 'static,
    ) -> ScriptedPlanner {
        ScriptedPlanner {
            script: Box::new(f),
            calls: AtomicUsize::new(0),
            gate: None,
            entered: Notify::new(),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// The first call waits for `gate.notify_one()` before answering; later calls do not.
    pub(crate) fn gated(mut self, gate: Arc<Notify>) -> ScriptedPlanner {
        self.gate = Some(gate);
        self
    }

    /// Resolves once a call has reached the planner (since the last time this resolved).
    pub(crate) async fn entered(&self) {
        self.entered.notified().await
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// (chat, history length) of every call, in order.
    pub(crate) fn seen(&self) -> Vec<(ChatId, usize)> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Planner for ScriptedPlanner {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        Box::pin(async move {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut seen) = self.seen.lock() {
                seen.push((req.chat.id, req.history.len()));
            }
            self.entered.notify_one();
            if let Some(gate) = self.gate.as_ref().filter(|_| n == 0) {
                gate.notified().await;
            }
            (self.script)(&req, n)
        })
    }
}

/// A planner that answers every message with one text.
pub(crate) fn reply_with(text: &'static str) -> ScriptedPlanner {
    ScriptedPlanner::new(move |_, _| {
        Ok(vec![Action::Send {
            text: text.to_string(),
            reply_to: None,
        }])
    })
}

/// Message `id` of `chat` from the chat's other side (named as the chat), text
/// `message <id>`, dated `at`.
#[allow(dead_code)]
pub(crate) fn numbered_message(chat: &Chat, id: i64, at: Timestamp) -> Message {
    Message {
        id: personad::core::model::MessageId(id),
        chat: chat.id,
        sender: personad::core::model::Sender {
            id: chat.id.0,
            name: chat.title.clone(),
            username: None,
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: false,
        text: format!("message {id}"),
        mentions: Vec::new(),
        reply_to: None,
        date: at,
        media: None,
    }
}

pub(crate) fn send(text: &str) -> Action {
    Action::Send {
        text: text.to_string(),
        reply_to: None,
    }
}

/// A minimal persona, parsed through the real parser.
pub(crate) fn persona(name: &str) -> Persona {
    persona_with(name, "")
}

/// A minimal persona plus extra Markdown fields (`# Agent Sticker Sets` ...).
pub(crate) fn persona_with(name: &str, extra: &str) -> Persona {
    let src = format!(
        "# Agent Name\n{name}\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nBe yourself.\n\n{extra}"
    );
    personad::adapters::persona_loader::parse_persona(Path::new("test.md"), &src, &[])
        .persona
        .unwrap_or_else(|| panic!("test persona {name} must parse"))
}

pub(crate) fn dm(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: ChatKind::Direct,
        title: format!("user{id}"),
    }
}

pub(crate) fn group(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: ChatKind::Group,
        title: format!("group{id}"),
    }
}

/// Settings for fast tests: defaults except what a test overrides.
/// No human pacing, so tests can reason about exact times unless they ask for pacing.
pub(crate) fn config() -> RuntimeConfig {
    RuntimeConfig {
        pacing: personad::core::config::Pacing {
            chars_per_sec: 1e9,
            start_delay_secs: 0.0,
            max_typing_secs: 0.0,
        },
        ..RuntimeConfig::default()
    }
}

/// One running runtime with one agent named "ann".
pub(crate) struct Harness {
    pub clock: VirtualClock,
    pub shared_clock: SharedClock,
    pub telegram: Arc<MemoryTelegram>,
    pub handle: RuntimeHandle,
    pub state: PathBuf,
    pub run: JoinHandle<Result<StopReport, RuntimeError>>,
    pub planner: Arc<ScriptedPlanner>,
    /// Keeps virtual time still while the test sets things up.
    pub hold: Option<personad::ports::clock::Hold>,
    /// The group gates the runtime's `classify` tasks reach (given at construction, empty
    /// until a test installs a gate).
    pub groups: Arc<personad::ingress::Groups>,
    /// The memory store, as the daemon builds it (absent files remembered on the clock).
    pub facts: Arc<personad::adapters::store::facts::FileFacts>,
}

pub(crate) const AGENT: &str = "ann";

type MakePlanner = Box<dyn FnOnce(SharedClock) -> SharedPlanner>;

/// Builds a media pipeline on the harness's clock.
pub(crate) type MakeMedia = Box<dyn FnOnce(SharedClock) -> Arc<MediaPipeline>>;

enum Planned {
    Ready(SharedPlanner),
    Make(MakePlanner),
    /// Given the window records the runtime's store writes (as the daemon's planner is).
    WithWindows(Box<dyn FnOnce(SharedClock, Arc<WindowRecords>) -> SharedPlanner>),
}

/// Wraps the in-memory backend before the runtime gets it (a governor, say).
pub(crate) type WrapTelegram =
    Box<dyn FnOnce(Arc<MemoryTelegram>, SharedClock) -> Arc<dyn Telegram>>;

impl Harness {
    /// Starts the runtime at `start` on a state dir, holding the clock until time is let run.
    pub(crate) fn start_at(
        state: &Path,
        planner: ScriptedPlanner,
        config: RuntimeConfig,
        chats: &[Chat],
        start: Timestamp,
    ) -> Harness {
        let planner = Arc::new(planner);
        let shared: SharedPlanner = planner.clone();
        Harness::boot_as(
            persona(AGENT),
            state,
            Planned::Ready(shared),
            planner,
            config,
            chats,
            start,
            None,
            None,
            None,
        )
    }

    /// Starts the runtime with any planner (an LLM planner against a mock server, say),
    /// built on the harness's clock.
    pub(crate) fn start_with(
        state: &Path,
        make_planner: impl FnOnce(SharedClock) -> SharedPlanner + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
    ) -> Harness {
        Harness::start_with_media(state, make_planner, None, config, chats)
    }

    /// Like [`Harness::start_with`], the planner given the window records the runtime's store
    /// writes behind its batches, as the daemon wires them.
    pub(crate) fn start_with_windows(
        state: &Path,
        make_planner: impl FnOnce(SharedClock, Arc<WindowRecords>) -> SharedPlanner + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
    ) -> Harness {
        let unused = Arc::new(ScriptedPlanner::new(|_, _| Ok(Vec::new())));
        Harness::boot_as(
            persona(AGENT),
            state,
            Planned::WithWindows(Box::new(make_planner)),
            unused,
            config,
            chats,
            t0(),
            None,
            None,
            None,
        )
    }

    /// Like [`Harness::start_with`], with the in-memory backend wrapped by `wrap` (the
    /// Governor, say) as the runtime sees it.
    pub(crate) fn start_with_wrapped(
        state: &Path,
        make_planner: impl FnOnce(SharedClock) -> SharedPlanner + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
        wrap: WrapTelegram,
    ) -> Harness {
        let unused = Arc::new(ScriptedPlanner::new(|_, _| Ok(Vec::new())));
        Harness::boot_as(
            persona(AGENT),
            state,
            Planned::Make(Box::new(make_planner)),
            unused,
            config,
            chats,
            t0(),
            None,
            Some(wrap),
            None,
        )
    }

    /// Like [`Harness::start_with`], with a media pipeline given to the runtime.
    pub(crate) fn start_with_media(
        state: &Path,
        make_planner: impl FnOnce(SharedClock) -> SharedPlanner + 'static,
        make_media: Option<MakeMedia>,
        config: RuntimeConfig,
        chats: &[Chat],
    ) -> Harness {
        Harness::start_as(
            persona(AGENT),
            state,
            make_planner,
            config,
            chats,
            None,
            make_media,
        )
    }

    /// Starts the runtime for a persona of the test's own (named `AGENT`), with an optional
    /// media pipeline and sticker sets served by the in-memory backend from `stickers`.
    pub(crate) fn start_as(
        persona: Persona,
        state: &Path,
        make_planner: impl FnOnce(SharedClock) -> SharedPlanner + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
        stickers: Option<&Path>,
        make_media: Option<MakeMedia>,
    ) -> Harness {
        let unused = Arc::new(ScriptedPlanner::new(|_, _| Ok(Vec::new())));
        let h = Harness::boot_as(
            persona,
            state,
            Planned::Make(Box::new(make_planner)),
            unused,
            config,
            chats,
            t0(),
            make_media,
            None,
            None,
        );
        if let Some(dir) = stickers {
            h.telegram
                .load_sticker_sets(dir)
                .unwrap_or_else(|e| panic!("sticker sets: {e}"));
        }
        h
    }

    #[allow(clippy::too_many_arguments)]
    fn boot_as(
        persona: Persona,
        state: &Path,
        planner: Planned,
        scripted: Arc<ScriptedPlanner>,
        config: RuntimeConfig,
        chats: &[Chat],
        start: Timestamp,
        make_media: Option<MakeMedia>,
        wrap: Option<WrapTelegram>,
        voice: Option<personad::ports::voice::SharedVoice>,
    ) -> Harness {
        let clock = VirtualClock::new(start, true);
        let shared: SharedClock = Arc::new(clock.clone());
        let hold = Some(shared.hold());
        let windows = Arc::new(WindowRecords::new(StateDir::new(state)));
        let planner = match planner {
            Planned::Ready(p) => p,
            Planned::Make(f) => f(Arc::clone(&shared)),
            Planned::WithWindows(f) => f(Arc::clone(&shared), Arc::clone(&windows)),
        };
        let telegram = Arc::new(
            MemoryTelegram::new(AGENT, Arc::clone(&shared), Some(state.join("memory")))
                .unwrap_or_else(|e| panic!("memory backend: {e}")),
        );
        for c in chats {
            telegram.ensure_chat(c.clone());
        }
        let agent_telegram: Arc<dyn Telegram> = match wrap {
            Some(wrap) => wrap(telegram.clone(), Arc::clone(&shared)),
            None => telegram.clone(),
        };
        let groups = personad::ingress::Groups::new();
        let facts = Arc::new(
            personad::adapters::store::facts::FileFacts::new(StateDir::new(state))
                .with_absent_cache(Arc::clone(&shared)),
        );
        let mut runtime = Runtime::new(
            config,
            vec![AgentHandle {
                persona: Arc::new(persona),
                telegram: agent_telegram,
            }],
            planner,
            GraphStore::new(StateDir::new(state)).with_window_records(windows),
            Arc::clone(&shared),
        )
        .with_groups(Arc::clone(&groups) as _)
        .with_stickers(Arc::new(StickerCatalog::new()))
        .with_facts(Arc::clone(&facts) as _);
        if let Some(make) = make_media {
            runtime = runtime.with_media(make(Arc::clone(&shared)));
        }
        if let Some(voice) = voice {
            runtime = runtime.with_voice(voice);
        }
        let handle = runtime.handle();
        let run = tokio::spawn(runtime.run());
        Harness {
            clock,
            shared_clock: shared,
            telegram,
            handle,
            state: state.to_path_buf(),
            run,
            planner: scripted,
            hold,
            groups,
            facts,
        }
    }

    /// Starts the runtime for a persona of the test's own (named `AGENT`), scripted, with
    /// `voice` making its voice notes.
    pub(crate) fn start_speaking(
        persona: Persona,
        state: &Path,
        planner: ScriptedPlanner,
        voice: personad::ports::voice::SharedVoice,
        chats: &[Chat],
    ) -> Harness {
        let planner = Arc::new(planner);
        let shared: SharedPlanner = planner.clone();
        Harness::boot_as(
            persona,
            state,
            Planned::Ready(shared),
            planner,
            config(),
            chats,
            t0(),
            None,
            None,
            Some(voice),
        )
    }

    /// Starts the runtime for a persona of the test's own (named `AGENT`) at `start`, with
    /// any planner built on the harness's clock.
    pub(crate) fn start_persona_at(
        persona: Persona,
        state: &Path,
        make_planner: impl FnOnce(SharedClock) -> SharedPlanner + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
        start: Timestamp,
    ) -> Harness {
        let unused = Arc::new(ScriptedPlanner::new(|_, _| Ok(Vec::new())));
        Harness::boot_as(
            persona,
            state,
            Planned::Make(Box::new(make_planner)),
            unused,
            config,
            chats,
            start,
            None,
            None,
            None,
        )
    }

    /// Like [`Harness::start_persona_at`] with a planner of the test's own type, started and
    /// loaded; returns the planner too, for the test to look into.
    #[allow(dead_code)]
    pub(crate) async fn start_keeping_planner<P: Planner + 'static>(
        persona: Persona,
        state: &Path,
        make: impl FnOnce(SharedClock) -> Arc<P> + 'static,
        config: RuntimeConfig,
        chats: &[Chat],
        start: Timestamp,
    ) -> Result<(Harness, Arc<P>), String> {
        let made: Arc<Mutex<Option<Arc<P>>>> = Arc::default();
        let keep = Arc::clone(&made);
        let h = Harness::start_persona_at(
            persona,
            state,
            move |clock| {
                let p = make(clock);
                if let Ok(mut k) = keep.lock() {
                    *k = Some(Arc::clone(&p));
                }
                p
            },
            config,
            chats,
            start,
        );
        h.started().await;
        let planner = made
            .lock()
            .map(|s| s.clone())
            .ok()
            .flatten()
            .ok_or("the planner was never made")?;
        Ok((h, planner))
    }

    /// Like [`Harness::start`], with the agent's Telegram wrapped by `wrap` (the harness's
    /// `telegram` stays the in-memory backend underneath).
    pub(crate) fn start_wrapped(
        state: &Path,
        planner: ScriptedPlanner,
        config: RuntimeConfig,
        chats: &[Chat],
        wrap: WrapTelegram,
    ) -> Harness {
        let planner = Arc::new(planner);
        let shared: SharedPlanner = planner.clone();
        Harness::boot_as(
            persona(AGENT),
            state,
            Planned::Ready(shared),
            planner,
            config,
            chats,
            t0(),
            None,
            Some(wrap),
            None,
        )
    }

    pub(crate) fn start(
        state: &Path,
        planner: ScriptedPlanner,
        config: RuntimeConfig,
        chats: &[Chat],
    ) -> Harness {
        Harness::start_at(state, planner, config, chats, t0())
    }

    /// A message from `from` arrives in `chat` now.
    pub(crate) async fn say(&self, chat: &Chat, from: &str, text: &str) -> Message {
        let msg = self
            .telegram
            .inject(
                chat.id,
                Incoming {
                    from: from.to_string(),
                    text: text.to_string(),
                    ..Incoming::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("inject: {e}"));
        self.handle
            .push_inbound(AGENT, chat.clone(), msg.clone(), true);
        msg
    }

    /// A message from `from` arrives in `chat` now, without being handed to the runtime
    /// (an update pump under test does that).
    pub(crate) async fn say_silently(&self, chat: &Chat, from: &str, text: &str) -> Message {
        self.telegram
            .inject(
                chat.id,
                Incoming {
                    from: from.to_string(),
                    text: text.to_string(),
                    ..Incoming::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("inject: {e}"))
    }

    /// Resolves once the runtime has loaded its state and made its first pass (virtual time
    /// stays still meanwhile: the harness holds it).
    pub(crate) async fn started(&self) {
        while !self.handle.status().started {
            tokio::task::yield_now().await;
        }
    }

    /// Lets virtual time run until `d` from now has passed (everything due earlier runs).
    pub(crate) async fn pass(&mut self, d: Duration) {
        let hold = clock::sleep_releasing(&self.clock, d, self.hold.take()).await;
        self.hold = Some(hold);
    }

    /// Lets time run until no work is left, and stops it there (a schedule's next activity
    /// does not move it on).
    pub(crate) async fn settle(&mut self) {
        let waiting = self.handle.hold_when_idle();
        drop(self.hold.take());
        self.hold = Some(match waiting.await {
            Some(hold) => hold,
            None => self.shared_clock.hold(),
        });
    }

    /// Texts sent by the agent, with the chat and the time (ms since t0).
    pub(crate) fn sends(&self) -> Vec<(ChatId, String, i64)> {
        self.telegram
            .actions()
            .into_iter()
            .filter_map(|r| match r.action {
                personad::adapters::memory::Action::Send { chat, message } => {
                    Some((chat, message.text, ms_since_t0(r.at)))
                }
                _ => None,
            })
            .collect()
    }

    /// Texts sent to `chat`.
    pub(crate) fn sends_to(&self, chat: ChatId) -> Vec<String> {
        self.sends()
            .into_iter()
            .filter(|(c, _, _)| *c == chat)
            .map(|(_, t, _)| t)
            .collect()
    }

    /// Notices the owner got in the agent's Saved Messages.
    pub(crate) fn owner_notices(&self) -> Vec<String> {
        self.sends_to(ChatId(self.telegram.self_id()))
    }

    /// Stops gracefully and waits for the loop to end.
    pub(crate) async fn stop(mut self) -> Result<StopReport, String> {
        self.handle.shutdown("test over");
        drop(self.hold.take());
        match self.run.await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Simulates a crash: the loop is aborted where it stands; disk keeps what was saved.
    pub(crate) async fn crash(self) {
        self.run.abort();
        let _ = self.run.await;
    }
}

/// An owner controller over the harness's runtime and agent, as the daemon wires it (its
/// command queue served by a task of the test).
pub(crate) fn controller(h: &Harness) -> Arc<personad::app::ops::controls::Controller> {
    controls(h).0
}

/// The owner controls as the daemon wires them: the controller and the admission chain it
/// sits in (owner controls, then the group gates), its command queue served.
pub(crate) fn controls(
    h: &Harness,
) -> (
    Arc<personad::app::ops::controls::Controller>,
    personad::ingress::Ingress,
) {
    use personad::app::ops::controls::{Controller, ControlsConfig, Hooks, Seat};
    let (c, ingress, commands) = Controller::build(
        ControlsConfig {
            state: StateDir::new(&h.state),
            clock: h.shared_clock.clone(),
            admin_chats: Vec::new(),
            hooks: Hooks {
                stop: Box::new(|_| {}),
                reload: Box::new(|| {}),
            },
            usage: None,
            facts: Arc::clone(&h.facts),
            chats: None,
            selection: None,
        },
        h.handle.clone(),
        personad::ingress::Groups::new(),
    );
    c.add_agent(
        AGENT,
        Seat {
            telegram: h.telegram.clone(),
            memory: Some(h.telegram.clone()),
            sim: None,
        },
    );
    let served = Arc::clone(&c);
    tokio::spawn(async move {
        served
            .serve(commands, tokio_util::sync::CancellationToken::new())
            .await
    });
    (c, ingress)
}

/// Files below `dir` (recursively), as sorted relative paths.
pub(crate) fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else if let Ok(rel) = p.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Runs a command (the binary) to its end with `input` on stdin, off the async threads.
pub(crate) async fn run_to_end(
    mut cmd: std::process::Command,
    input: String,
) -> Result<std::process::Output, String> {
    tokio::task::spawn_blocking(move || -> Result<std::process::Output, String> {
        use std::io::Write;
        let mut child = cmd.spawn().map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        child.wait_with_output().map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// `personad chat ARGS` over a persona folder (also its prompt path) and a state directory,
/// with a clean environment and every stream piped: feed it with [`run_to_end`].
pub(crate) fn playground(agents: &Path, state: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    clear_env(&mut cmd);
    cmd.arg("--agents")
        .arg(agents)
        .arg("--prompts")
        .arg(agents)
        .arg("--state")
        .arg(state)
        .arg("chat")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// The JSON lines of a `--jsonl` playground's output (other lines skipped).
pub(crate) fn jsonl(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An `agents/` directory (with an empty `prompts/` next to it) under `dir` holding one usable
/// persona file, `good.md` (agent `Good`); returns the agents directory.
pub(crate) fn agents_with_a_good_persona(dir: &Path) -> std::io::Result<PathBuf> {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::create_dir_all(dir.join("prompts"))?;
    std::fs::write(
        agents.join("good.md"),
        "# Agent Name\nGood\n# Agent Phone\n+15550100009\n# Agent Instructions\nHi.\n",
    )?;
    Ok(agents)
}

/// Removes every variable the binary (or a library default) could read from the
/// environment of a child process: PERSONAD_*, GEMINI_*, GOOGLE_*, TELEGRAM_*, OPENAI_*.
pub(crate) fn clear_env(cmd: &mut std::process::Command) {
    const PREFIXES: [&str; 5] = ["PERSONAD_", "GEMINI_", "GOOGLE_", "TELEGRAM_", "OPENAI_"];
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if PREFIXES.iter().any(|p| n.starts_with(p)) {
            cmd.env_remove(&name);
        }
    }
    // systemd's credentials directory stands in for the keys.
    cmd.env_remove("CREDENTIALS_DIRECTORY");
}

/// A path under the shared test data beside the checkout (`../shared/data/...`), if present.
/// When absent the test is skipped loudly (straight to stderr, which the harness does not
/// swallow), and `PERSONAD_REQUIRE_SHARED_DATA=1` makes the absence a failure.
pub(crate) fn shared_data(relative: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(relative);
    if path.exists() {
        return Some(path);
    }
    let msg = format!("SKIPPED: the shared test data {} is absent", path.display());
    assert!(
        std::env::var_os("PERSONAD_REQUIRE_SHARED_DATA").is_none(),
        "{msg}"
    );
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "\n*** {msg} ***");
    None
}
