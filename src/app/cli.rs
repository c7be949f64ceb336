//! Command-line definitions (clap). Every option can also come from an environment variable,
//! named in `--help`. This module only describes the interface; `commands` and `playground`
//! carry the commands out, and the binary maps their errors to exit codes.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::app::logging::LogFormat;
use crate::core::config::RawRuntimeConfig;

mod admin;
mod doctor;
mod shard;
mod voice;
pub use admin::{CtlArgs, CtlCommand, StateCommand};
pub use doctor::DoctorArgs;
pub use shard::{ShardArgs, ShardsArgs, socket_label};
pub use voice::VoiceArgs;

/// A Telegram userbot daemon: gives user accounts LLM personas written as Markdown files.
#[derive(Debug, Parser)]
#[command(
    name = "personad",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 success, 1 unexpected failure, 2 bad command line, 65 unusable persona or \
                  unreadable graph, 66 not found, 69 no agent can start, 74 state directory I/O, \
                  78 invalid settings. Docs: README.md and docs/."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command understands.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Directory holding persona files (every *.md directly in it).
    #[arg(
        long = "agents",
        value_name = "DIR",
        env = "PERSONAD_AGENTS_DIR",
        default_value = "agents",
        global = true
    )]
    pub agents_dir: PathBuf,
    /// Where role prompts are looked up, as DIR[:DIR...]; the first directory holding
    /// <name>.md wins.
    #[arg(
        long = "prompts",
        value_name = "DIR[:DIR...]",
        env = "PERSONAD_PROMPTS_PATH",
        default_value = "prompts",
        global = true
    )]
    pub prompts_path: String,
    /// Directory for runtime state (task graphs, sessions, caches). Keep it private.
    #[arg(
        long = "state",
        value_name = "DIR",
        env = "PERSONAD_STATE_DIR",
        default_value = "state",
        global = true
    )]
    pub state_dir: PathBuf,
    /// Log line format (logs go to stderr). Default: journald when stderr is the journal,
    /// text otherwise.
    #[arg(long, value_enum, env = "PERSONAD_LOG_FORMAT", global = true)]
    pub log_format: Option<LogFormat>,
    /// More log output in every command: -v debug (message bodies included), -vv trace
    /// (Telegram and HTTP libraries too). Default: info (`chat`: warnings only).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Less log output in every command: -q warnings only, -qq errors only.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub quiet: u8,
}

impl GlobalArgs {
    /// The prompt search path as a list of directories.
    pub(crate) fn prompt_dirs(&self) -> Vec<PathBuf> {
        std::env::split_paths(&self.prompts_path)
            .filter(|p| !p.as_os_str().is_empty())
            .collect()
    }

    /// The -v/-q balance.
    pub fn verbosity(&self) -> i8 {
        let v = i8::try_from(self.verbose).unwrap_or(i8::MAX);
        let q = i8::try_from(self.quiet).unwrap_or(i8::MAX);
        v.saturating_sub(q)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: every valid agent on its Telegram account.
    Run(RunArgs),
    /// Load configuration and every persona, report problems with file:line, exit non-zero
    /// when an agent is unusable.
    Check(CheckArgs),
    /// Check a setup (configuration, persona files, the state directory, sessions, the unit
    /// file, each LLM route and voice) and say what to fix; exit non-zero on a problem.
    Doctor(DoctorArgs),
    /// Talk to a persona in the terminal, on an in-memory Telegram (no account needed).
    Chat(ChatArgs),
    /// Inspect or clear persisted task graphs.
    #[command(subcommand)]
    State(StateCommand),
    /// Log an agent's Telegram account in (creates its session file).
    Login(LoginArgs),
    /// Measure the runtime: the real scheduler and disk writes (fsync on) with the in-memory
    /// Telegram and a planner of fixed latency; prints latencies, throughput, CPU and memory.
    Bench(BenchArgs),
    /// Crash-safety harness: the runtime on a persisted in-memory Telegram, resuming what
    /// the last run left (used by the runtime kill -9 test). Built with `test-hooks` only.
    #[cfg(feature = "test-hooks")]
    #[command(hide = true)]
    CrashChild(CrashChildArgs),
    /// Run a Telegram Desktop export (result.json) through the group decision pipeline:
    /// one JSON line per message of others, then a summary. Never plans, never sends.
    Replay(ReplayArgs),
    /// Steer a running daemon over its control socket (`<state>/ctl.sock`; a shard's is
    /// `<state>/ctl-shard-I-of-N.sock`: give the same `--shard`).
    Ctl(CtlArgs),
    /// Print which shard of N runs each agent of the agents directory, and each shard's count.
    Shards(ShardsArgs),
    /// Crash-safety harness: save graphs in a loop, printing `ACK <chat> <seq>` after each
    /// durable save (used by the SIGKILL test). Built with `test-hooks` only.
    #[cfg(feature = "test-hooks")]
    #[command(hide = true)]
    SaveLoop(SaveLoopArgs),
}

/// `run`'s send limits when neither the command line nor the persona's `# Send Limits` sets
/// them (`check` names them as defaults).
pub(crate) const DEFAULT_SEND_GAP_SECS: u64 = 3;
pub(crate) const DEFAULT_CHAT_SENDS_PER_MINUTE: u32 = 10;
pub(crate) const DEFAULT_ACCOUNT_SENDS_PER_MINUTE: u32 = 20;

/// Settings of the scheduler, shared by `run`, `chat` and `check`.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// Quiet time after the newest message of a chat before planning a reply.
    #[arg(
        long,
        value_name = "MS",
        env = "PERSONAD_DEBOUNCE_MS",
        default_value_t = 2000
    )]
    pub debounce_ms: u64,
    /// Tasks running at once across all conversations.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_MAX_IN_FLIGHT",
        default_value_t = 16
    )]
    pub max_in_flight: usize,
    /// Attempts of a failing task before its conversation's plan is dropped.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_RETRY_ATTEMPTS",
        default_value_t = 10
    )]
    pub retry_attempts: u32,
    /// Seconds between attempts of a failing task.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_RETRY_INTERVAL_SECS",
        default_value_t = 10.0
    )]
    pub retry_interval_secs: f64,
    /// Longest a single task may run, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_TASK_TIMEOUT_SECS",
        default_value_t = 180.0
    )]
    pub task_timeout_secs: f64,
    /// Messages of chat history read for planning.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_HISTORY_LIMIT",
        default_value_t = 500
    )]
    pub history_limit: usize,
    /// Typing speed of personas without a `Typing Speed`, in characters per second.
    #[arg(
        long,
        value_name = "CPS",
        env = "PERSONAD_TYPING_SPEED",
        default_value_t = 10.0
    )]
    pub typing_speed: f64,
    /// Pause before a plan's first message for personas without a `Start Typing Delay`.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_START_TYPING_DELAY",
        default_value_t = 2.0
    )]
    pub start_typing_delay: f64,
    /// Cap on one scope of long-term memory (a person's facts, a chat's notes) as the prompt
    /// shows it; a write past it is refused and logged.
    #[arg(
        long,
        value_name = "BYTES",
        env = "PERSONAD_MEMORY_SCOPE_BYTES",
        default_value_t = 3072
    )]
    pub memory_scope_bytes: usize,
    /// The daemon's daily LLM cap, all personas together: `200000 tokens`, `200k tokens`,
    /// `$5`, or both (`1M tokens, $5`). Past 80% the owners are told; at 100% planning stops
    /// until the next UTC day (or `/resume`). A persona's `# Daily Budget` caps it alone.
    #[arg(long, value_name = "CAP", env = "PERSONAD_DAILY_BUDGET")]
    pub daily_budget: Option<String>,
}

impl RuntimeArgs {
    pub fn raw(&self) -> RawRuntimeConfig {
        RawRuntimeConfig {
            debounce_ms: self.debounce_ms,
            max_in_flight: self.max_in_flight,
            retry_attempts: self.retry_attempts,
            retry_interval_secs: self.retry_interval_secs,
            task_timeout_secs: self.task_timeout_secs,
            history_limit: self.history_limit,
            memory_scope_bytes: self.memory_scope_bytes,
            daily_budget: self.daily_budget.clone(),
            typing_speed: self.typing_speed,
            start_typing_delay_secs: self.start_typing_delay,
        }
    }
}

/// The Telegram application's credentials (from my.telegram.org).
#[derive(Debug, Clone, Args)]
pub struct TelegramArgs {
    /// The application's api_id.
    #[arg(long, value_name = "ID", env = "TELEGRAM_API_ID")]
    pub api_id: Option<i32>,
    /// The application's api_hash (a secret: prefer the environment variable).
    #[arg(
        long,
        value_name = "HASH",
        env = "TELEGRAM_API_HASH",
        hide_env_values = true
    )]
    pub api_hash: Option<String>,
    /// Use Telegram's test servers (test phone numbers such as 99966XYYYY, no real account
    /// at risk) with a session of their own (`<state>/<agent>/telegram-test.session`):
    /// docs/live-testing.md.
    #[arg(long, env = "PERSONAD_TEST_DC")]
    pub test_dc: bool,
}

/// Which Telegram the daemon runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TelegramChoice {
    /// The real accounts over MTProto (needs credentials and `personad login`).
    Mtproto,
    /// An in-memory Telegram per agent: no account, no credentials; transcripts under
    /// `<state>/<agent>/telegram-memory/`; messages come in through `personad ctl say`.
    Memory,
    /// The simulated Telegram: the real MTProto adapter against a local server that speaks
    /// Telegram's TL (started in the daemon, or the one `--sim-addr` names); no account, no
    /// credentials; messages come in through `personad ctl say`.
    Sim,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Which agents this process runs.
    #[command(flatten)]
    pub shard: ShardArgs,
    /// How long an agent's session lease lasts unless renewed (renewed every third of it;
    /// tests shorten it).
    #[arg(long, value_name = "MS", default_value_t = 60_000, hide = true)]
    pub lease_ttl_ms: u64,
    /// Telegram backend.
    #[arg(long, value_enum, env = "PERSONAD_TELEGRAM", default_value = "mtproto")]
    pub telegram: TelegramChoice,
    /// Who plans replies with `--telegram memory` or `sim` (with MTProto it is always the LLM).
    #[arg(long, value_enum, env = "PERSONAD_PLANNER", default_value = "auto")]
    pub planner: PlannerChoice,
    /// On SIGTERM/SIGINT, how long tasks in flight may finish before they are abandoned
    /// (they run again after the next start). A second signal exits at once.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_SHUTDOWN_GRACE_SECS",
        default_value_t = 10
    )]
    pub shutdown_grace_secs: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics and a health check at /healthz.
    #[arg(long, value_name = "ADDR", env = "PERSONAD_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Serve the local web console (off by default): a port alone (`8377`) listens on
    /// 127.0.0.1; a full address such as `0.0.0.0:8377` is served too, with a warning. Its
    /// token is in <state>/console.token, kept across restarts (`ctl console-token --rotate`).
    #[arg(long, value_name = "[ADDR:]PORT", env = "PERSONAD_CONSOLE_ADDR", value_parser = console_addr)]
    pub console_addr: Option<std::net::SocketAddr>,
    /// Chats (by id) besides Saved Messages where owner commands (`/status`, ...) and replies
    /// to drafts are accepted. Drafts and command answers never go there unless a persona's
    /// `# Admin Chat` names the chat: they go to Saved Messages.
    #[arg(
        long = "admin-chat",
        value_name = "ID",
        env = "PERSONAD_ADMIN_CHATS",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    pub admin_chats: Vec<i64>,
    /// With `--telegram memory`: every text send and reaction takes this long (a slow network;
    /// tests).
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    pub memory_send_delay_ms: u64,
    /// How often the daemon checks, when it writes nothing, that its state directory is
    /// still the one it locked (each write batch checks first anyway; tests).
    #[arg(long, value_name = "MS", default_value_t = 2000, hide = true)]
    pub state_check_every_ms: u64,
    /// Draft mode: the least time between two draft posts for one chat, in seconds (a newer
    /// message's draft waits this long after the one it replaces; tests shorten it).
    #[arg(long, value_name = "SECS", default_value_t = 180, hide = true)]
    pub draft_gap_secs: u64,
    /// With `--telegram sim`: the simulated Telegram to connect to (one a test or another
    /// process runs) instead of starting one inside the daemon.
    #[arg(long, value_name = "ADDR", env = "PERSONAD_SIM_ADDR")]
    pub sim_addr: Option<std::net::SocketAddr>,
    /// Fault injection (tests of the watchdog and `/healthz`): AFTER_MS after the tick loop
    /// starts, it stalls once for FOR_MS, running no pass, as a hung loop would.
    #[arg(
        long,
        value_name = "AFTER_MS,FOR_MS",
        value_delimiter = ',',
        hide = true
    )]
    pub debug_stall_loop: Vec<u64>,
    /// Do not watch persona and role-prompt files (SIGHUP still reloads).
    #[arg(long, env = "PERSONAD_NO_WATCH")]
    pub no_watch: bool,
    #[command(flatten)]
    pub credentials: TelegramArgs,
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub media: MediaArgs,
    #[command(flatten)]
    pub voice: VoiceArgs,
    /// Model of the group addressing classifier (the persona's `Group Classifier Model` wins).
    #[arg(long, value_name = "MODEL", env = "PERSONAD_CLASSIFIER_MODEL", default_value = crate::core::group::settings::DEFAULT_CLASSIFIER_MODEL)]
    pub classifier_model: String,
    /// Flood waits up to this many seconds are slept inside the Telegram library; longer ones
    /// park the conversation.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_FLOOD_SLEEP_SECS",
        default_value_t = 10
    )]
    pub flood_sleep_secs: u64,
    /// Messages older than this when they arrive (catch-up after downtime) join the history
    /// without triggering a reply.
    #[arg(
        long,
        value_name = "MINUTES",
        env = "PERSONAD_CATCH_UP_MINUTES",
        default_value_t = 15
    )]
    pub catch_up_minutes: u64,
    /// Least time between two of our messages in one chat.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_SEND_GAP_SECS",
        default_value_t = DEFAULT_SEND_GAP_SECS
    )]
    pub send_gap_secs: u64,
    /// Most of our messages in one chat per minute.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_CHAT_SENDS_PER_MINUTE",
        default_value_t = DEFAULT_CHAT_SENDS_PER_MINUTE
    )]
    pub chat_sends_per_minute: u32,
    /// Most messages per minute for the whole account.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_ACCOUNT_SENDS_PER_MINUTE",
        default_value_t = DEFAULT_ACCOUNT_SENDS_PER_MINUTE
    )]
    pub account_sends_per_minute: u32,
    /// Longest the governor waits to keep the pace; a longer wait parks the conversation.
    #[arg(
        long,
        value_name = "SECS",
        env = "PERSONAD_MAX_PACING_WAIT_SECS",
        default_value_t = 60
    )]
    pub max_pacing_wait_secs: u64,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// With `--shard`: print which shard runs which agent.
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub groups: GroupArgs,
    #[command(flatten)]
    pub media: MediaArgs,
    #[command(flatten)]
    pub voice: VoiceArgs,
}

/// How the model is asked to write its plan (`--plan-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    /// Task blocks (`# «send»` ...), read by any model.
    Blocks,
    /// A JSON object the route is held to by the task schema (structured output).
    Json,
}

/// Which planner answers in the playground.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlannerChoice {
    /// The persona's LLM when its provider is configured, otherwise echo (with a notice).
    Auto,
    /// The persona's LLM (Gemini needs GEMINI_API_KEY; OpenAI-compatible providers read
    /// OPENAI_API_KEY / OPENAI_BASE_URL etc., see docs/providers.md).
    #[value(alias = "gemini")]
    Llm,
    /// Offline: echoes the message it answers (no LLM, no key needed).
    Echo,
}

/// Settings of the LLM planner.
#[derive(Debug, Clone, Args)]
pub struct LlmArgs {
    /// Default LLM for personas without an `LLM` heading: a provider (gemini, openai or gpt,
    /// grok, openrouter, ollama), a model name (gemini-…, gpt-…, grok-…, vendor/model) or
    /// provider:model. DEFAULT_AGENT_LLM is read too, as in the original. [default: gemini]
    #[arg(long = "llm", value_name = "LLM", env = "PERSONAD_LLM")]
    pub llm: Option<String>,
    /// Model of the default provider for personas naming none (else the provider's own
    /// default: GEMINI_MODEL / OPENAI_MODEL / … or gemini-flash-latest, gpt-5-mini, …).
    #[arg(long, value_name = "MODEL", env = "PERSONAD_MODEL")]
    pub model: Option<String>,
    /// Sampling temperature (provider default when unset).
    #[arg(long, value_name = "T", env = "PERSONAD_TEMPERATURE")]
    pub temperature: Option<f32>,
    /// Cap on tokens the model may generate per reply.
    #[arg(long, value_name = "N", env = "PERSONAD_MAX_OUTPUT_TOKENS")]
    pub max_output_tokens: Option<u32>,
    /// The model's context window, in tokens: each planning prompt is fitted to it, leaving
    /// room for the answer (oldest history first, then memory, then long messages are cut).
    /// For local models with small contexts (docs/providers.md).
    #[arg(long, value_name = "N", env = "PERSONAD_CONTEXT_TOKENS", value_parser = clap::value_parser!(u32).range(512..))]
    pub context_tokens: Option<u32>,
    /// How the model is asked to write its plan: `blocks` (task blocks, any model) or `json`
    /// (structured output: the task schema goes with the request, for routes that enforce it
    /// while decoding: Gemini, OpenAI, llama.cpp's server, Ollama).
    #[arg(
        long,
        value_enum,
        env = "PERSONAD_PLAN_FORMAT",
        default_value = "blocks"
    )]
    pub plan_format: PlanFormat,
    /// Most tasks taken from one reply of the model.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_MAX_TASKS",
        default_value_t = 12
    )]
    pub max_tasks: usize,
    /// Attempts of one LLM request (transient failures), before the task's own retries.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_LLM_ATTEMPTS",
        default_value_t = 3
    )]
    pub llm_attempts: u32,
}

/// A `--console-addr` that is neither a port nor an address.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither a port (8377) nor an address (127.0.0.1:8377)")]
pub struct ConsoleAddrError(String);

/// `--console-addr`: a port alone is a loopback address.
fn console_addr(value: &str) -> Result<std::net::SocketAddr, ConsoleAddrError> {
    let value = value.trim();
    if let Ok(port) = value.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    value
        .parse()
        .map_err(|_| ConsoleAddrError(value.to_string()))
}

impl LlmArgs {
    /// The default LLM choice: `--llm` / `PERSONAD_LLM`, else `DEFAULT_AGENT_LLM`, else Gemini;
    /// `--model` fills in its model when the choice names none.
    pub(crate) fn default_choice(
        &self,
    ) -> Result<crate::core::llm::LlmChoice, crate::core::llm::ResolveError> {
        let spec = self.llm.clone().or_else(|| {
            std::env::var("DEFAULT_AGENT_LLM")
                .ok()
                .filter(|v| !v.trim().is_empty())
        });
        let mut choice = match spec {
            Some(spec) => crate::core::llm::resolve(&spec)?,
            None => crate::core::llm::LlmChoice::default(),
        };
        if choice.model.is_none() {
            choice.model = self.model.clone().filter(|m| !m.trim().is_empty());
        }
        Ok(choice)
    }
}

/// Settings of media understanding (descriptions, transcripts; see docs/media.md).
#[derive(Debug, Clone, Args)]
pub struct MediaArgs {
    /// New media descriptions one planning pass may start (cached ones are free).
    #[arg(
        long,
        value_name = "N",
        env = "MEDIA_DESC_BUDGET_PER_TICK",
        default_value_t = crate::adapters::media::DEFAULT_BUDGET_PER_PASS
    )]
    pub media_budget: usize,
    /// Model that describes photos, stickers, videos and documents and transcribes voice.
    #[arg(long, value_name = "MODEL", env = "PERSONAD_MEDIA_MODEL", default_value = crate::adapters::media::DEFAULT_MEDIA_MODEL)]
    pub media_model: String,
    /// Description calls in flight at once, across all chats.
    #[arg(
        long,
        value_name = "N",
        env = "PERSONAD_MEDIA_MAX_IN_FLIGHT",
        default_value_t = 4
    )]
    pub media_max_in_flight: usize,
    /// Directory of operator-curated description records (`<unique_id>.json`), used before
    /// generated ones.
    #[arg(long, value_name = "DIR", env = "PERSONAD_MEDIA_CURATED_DIR")]
    pub media_curated: Option<PathBuf>,
    /// Directory overriding the describe prompts (`image.md`, `video.md`, `audio.md`,
    /// `document.md`).
    #[arg(long, value_name = "DIR", env = "PERSONAD_MEDIA_PROMPTS_DIR")]
    pub media_prompts: Option<PathBuf>,
}

impl MediaArgs {
    /// The pipeline settings these options ask for.
    pub fn config(&self) -> crate::adapters::media::MediaConfig {
        crate::adapters::media::MediaConfig {
            budget_per_pass: self.media_budget,
            max_in_flight: self.media_max_in_flight.max(1),
            // A model name picks its provider (`gpt-…` OpenAI, `ollama:llava`, …); any other
            // name is a Gemini model, the default describer.
            model: crate::core::llm::persona_choice(
                None,
                Some(&self.media_model),
                &crate::core::llm::LlmChoice::default(),
            )
            .map_or_else(|_| self.media_model.clone(), |c| c.route()),
            curated_dir: self.media_curated.clone(),
            ..crate::adapters::media::MediaConfig::default()
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    /// The persona to talk to (its `Agent Name`).
    #[arg(long, env = "PERSONAD_AGENT")]
    pub agent: String,
    /// Make the chat a group with this title; typed lines then read `Name: text`.
    #[arg(long, value_name = "TITLE")]
    pub group: Option<String>,
    /// Your display name in a direct chat.
    #[arg(long, value_name = "NAME", default_value = "User")]
    pub user: String,
    /// Machine mode: JSON objects in and out, one per line (see docs/playground.md).
    #[arg(long)]
    pub jsonl: bool,
    /// Virtual time: waits and pacing cost no real time.
    #[arg(long)]
    pub fast: bool,
    /// With `--fast`: the virtual clock starts at this instant (RFC 3339, e.g.
    /// `2026-11-26T02:00:00Z`) instead of now, to try a schedule's night or noon.
    #[arg(long, value_name = "TIME", requires = "fast")]
    pub start_at: Option<jiff::Timestamp>,
    /// Who plans the persona's replies.
    #[arg(long, value_enum, env = "PERSONAD_PLANNER", default_value = "auto")]
    pub planner: PlannerChoice,
    /// Serve sticker sets from this directory: one folder per set, files named by emoji or
    /// name. Without it every sticker the persona names exists.
    #[arg(long, value_name = "DIR")]
    pub stickers: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub media: MediaArgs,
    #[command(flatten)]
    pub voice: VoiceArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    #[command(flatten)]
    pub groups: GroupArgs,
}

/// Settings of group decisions (docs/groups.md), shared by `chat` and `replay`.
#[derive(Debug, Clone, Args)]
pub struct GroupArgs {
    /// Group trigger mode for this run, over the persona's `Group Trigger Mode` heading.
    #[arg(long, value_name = "MODE", value_parser = clap::value_parser!(crate::core::group::settings::TriggerMode))]
    pub mode: Option<crate::core::group::settings::TriggerMode>,
    /// Model of the addressing classifier (the persona's `Group Classifier Model` wins).
    #[arg(long, value_name = "MODEL", env = "PERSONAD_CLASSIFIER_MODEL", default_value = crate::core::group::settings::DEFAULT_CLASSIFIER_MODEL)]
    pub classifier_model: String,
}

/// `personad replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The persona whose decisions to replay.
    #[arg(long, env = "PERSONAD_AGENT")]
    pub agent: String,
    /// The export's user the persona stands in for: a `from_id` (`user123`) or a display name.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: String,
    /// That user's @username, so `@username` in texts counts as addressing the persona.
    #[arg(long, value_name = "U")]
    pub username: Option<String>,
    /// Replay only the first N messages.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Grade the decisions against per-message labels (`<id> addressed` / `<id> not` lines):
    /// precision, recall and classifier calls per 100 messages, for every mode unless
    /// `--mode` names one.
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// Print labels derived from the export for `--as` (replies to that user, mentions of
    /// `--username`, and the messages that user replied to are `addressed`) and exit.
    #[arg(long, conflicts_with_all = ["truth", "oracle"])]
    pub derive_truth: bool,
    /// The classifier answers from the `--truth` labels instead of an LLM (no request is
    /// made): the best the prefilter lets any classifier reach.
    #[arg(long, requires = "truth")]
    pub oracle: bool,
    /// Attempts of one classifier request (transient failures).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub llm_attempts: u32,
    #[command(flatten)]
    pub groups: GroupArgs,
    /// The export: Telegram Desktop's `result.json`.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct LoginArgs {
    /// The persona whose account to log in (its phone comes from the persona file).
    #[arg(long)]
    pub agent: String,
    /// Sign out and delete the session instead.
    #[arg(long)]
    pub logout: bool,
    #[command(flatten)]
    pub telegram: TelegramArgs,
}

/// The hidden `save-loop` harness (built with `test-hooks` only).
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Args)]
pub struct SaveLoopArgs {
    /// Conversations to save in turn.
    #[arg(long, default_value_t = 8)]
    pub chats: i64,
    /// Stop after this many saves (0 = until killed).
    #[arg(long, default_value_t = 0)]
    pub saves: u64,
}

/// `personad bench`. The state goes to a temp directory inside `--state` (same disk).
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Conversations that each receive messages at once.
    #[arg(long, default_value_t = 100)]
    pub chats: usize,
    /// Graphs on disk that wait far in the future (loaded at startup, never due).
    #[arg(long, default_value_t = 0)]
    pub idle_graphs: usize,
    /// Messages pushed per conversation.
    #[arg(long, default_value_t = 1)]
    pub messages_per_chat: usize,
    /// Bursts in turn, each once every chat answered the one before (the same number of
    /// replies at any chat count: 10 chats x 1000 rounds against 10,000 chats x 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// How long each planning call takes.
    #[arg(long, default_value_t = 1000)]
    pub llm_latency_ms: u64,
    /// Tasks running at once.
    #[arg(long, default_value_t = 32)]
    pub max_in_flight: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Keep the same disk busy meanwhile (a background writer syncing 1 MiB at a time), to
    /// measure the tail under contention.
    #[arg(long)]
    pub disk_noise: bool,
    /// How long each step of the sustained scenario lasts (steady arrivals at 500, 1000,
    /// 2000, ... messages/s); 0 skips it.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub sustain_secs: u64,
    /// Internal: load the graphs under DIR, print the milliseconds it took, exit (the cold
    /// startup figure's fresh process).
    #[arg(long, value_name = "DIR", hide = true)]
    pub startup_probe: Option<std::path::PathBuf>,
    /// Internal: the `--disk-noise` writer's child process (writes into DIR until DIR/stop).
    #[arg(long, value_name = "DIR", hide = true)]
    pub noise_writer: Option<std::path::PathBuf>,
    /// Instead: the memory bench, one conversation of N messages through the LLM planner,
    /// prompts and summaries (an in-process model, virtual time): prompt bytes, prefix reuse,
    /// summary calls, history gaps.
    #[arg(long, value_name = "N")]
    pub memory_conversation: Option<usize>,
    /// Instead: the daemon path, the wiring of `run --telegram memory --planner echo` in this
    /// process, fed through its control socket as `ctl say --no-wait` does (--chats x
    /// --messages-per-chat, --max-in-flight): throughput, CPU, memory and the syscalls per
    /// message.
    #[arg(long)]
    pub daemon: bool,
    /// With --daemon: the daemon's --debounce-ms (by default its own default).
    #[arg(long, value_name = "MS", requires = "daemon")]
    pub debounce_ms: Option<u64>,
}

/// The hidden `crash-child` harness (built with `test-hooks` only).
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Args)]
pub struct CrashChildArgs {
    /// Conversations (chat ids 1..=N).
    #[arg(long, default_value_t = 4)]
    pub chats: i64,
    /// A new message arrives in this chat after startup.
    #[arg(long)]
    pub push: Option<i64>,
}

/// `personad ctl ...`: the operations of the owner commands, for the local operator.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_and_model_options_make_the_default_choice() {
        let cli = Cli::try_parse_from([
            "personad", "chat", "--agent", "Wren", "--llm", "ollama", "--model", "qwen3:8b",
        ]);
        let Ok(Cli {
            command: Command::Chat(args),
            ..
        }) = cli
        else {
            panic!("chat args must parse");
        };
        let choice = args.llm.default_choice();
        assert_eq!(
            choice.map(|c| c.route()).ok().as_deref(),
            Some("ollama:qwen3:8b")
        );
    }
}
