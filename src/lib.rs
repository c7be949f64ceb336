//! personad: a Telegram userbot daemon that gives user accounts LLM personas.
//!
//! The crate is layered; each top-level module is a layer, and the rule is checked by
//! `tests/layers.rs`: `core` imports nothing outside itself; `ports` imports `core`;
//! `adapters` and `runtime` import `core` and `ports`; `ingress` adds `runtime`; `app` wires
//! everything; `cmd` calls `app`. There is no import cycle between them.
//!
//! Module map (one concept each):
//! - [`core`]: pure rules and vocabulary, no I/O.
//!   - `model`: chats, messages, media, stickers, Telegram's typed errors.
//!   - `graph`: task graphs as data and transitions; `graph::codec` is their on-disk form,
//!     `graph::draft` what a draft shows of a plan and what the owner's edit does to it.
//!   - `scheduler`: the pure state machine over graphs (events in, effects out); `admission`
//!     says how an admitted message enters it, `finish` applies a finished task, `owner`
//!     holds drafts and notices to the owner, `controls` the owner's requests (pauses,
//!     modes, plans) and the answers to commands, `budget` the spending caps, `xsend` notes
//!     across chats, `dormant` the settled graphs kept out of RAM (key and deadline);
//!     `outcome` is what a task hands back.
//!   - `approval`, `budget`: draft mode as data (modes, timeouts, the owner's reply) and
//!     daily spending caps (parse, levels).
//!   - `safety`, `agent_state`: per-agent safety (disabled chats, the breaker) and its record,
//!     with what the owner set (pauses, trigger and draft modes).
//!   - `persona`: persona files parsed (raw sections) and validated into `Persona`.
//!   - `blocks`: the model's task-block reply parsed into actions (adversarial input).
//!   - `plan`, `prompt`, `llm`: the planner's request and actions (and the task each action
//!     becomes), the cache-stable prompt, the provider-neutral LLM request and the provider
//!     choice.
//!   - `group`: group decisions (`decide`), settings, the classifier's request and answer,
//!     request words per language (`requests`), replay grading (`truth`).
//!   - `facts`, `summaries`: long-term memory as data (scopes, the persona's intentions and
//!     per-chat plans among them; files, caps, applied-once writes) and rolling summaries
//!     (when, which messages, checks, back-off).
//!   - `presence`, `intents`: a persona's day as data (activities, the day file, checks,
//!     the fallback, the timing curve, DST-aware instants; `presence::edit`, the persona's own
//!     changes to its day) and scheduled intents (the file,
//!     writes, when one fires next); `scheduler::presence` applies both.
//!   - `markdown`, `media`, `config`, `time`: rendering, media records, validated settings,
//!     time arithmetic.
//!   - `speech`: speech as data (the provider kinds, the request, the audio, the errors).
//!   - `voice`: a persona's `# Voice` (engine, voice, when it speaks) and a voice note's limits.
//! - [`ports`]: the traits at the edges: `telegram`, `llm`, `planner`, `clock` (with its
//!   virtual twin), `store`, `facts` (long-term memory), `media`, `stickers`, `groups`,
//!   `updates`, `spend` (the usage meter's reports, the cap hold), `speech`, `voice` (voice notes made); `backoff` waits
//!   on the clock.
//! - [`runtime`]: the driver (async loop; `driver::dormancy` reads dormant graphs back), work queue, durable writes off the loop, the
//!   handle (built before the runtime from a `RuntimeSeed`), and `handlers` (one per task
//!   kind, registered in one place). It owns its state, what the owner set included.
//! - [`ingress`]: the one door for inbound messages (`Ingress`, owning the plain runtime
//!   handle: sender rule → owner controls → filters → group gate → queue), the chain's
//!   vocabulary (`admit`), the group gate, the classifier call, the pump's runtime sink.
//! - [`adapters`]: MTProto (`mtproto`, the only grammers user; `mtproto::sim` is the simulated
//!   Telegram its real client connects to for `run --telegram sim` and the tests), the in-memory Telegram
//!   (`memory`, with `World` for several accounts that meet), the account-safety `governor`, LLM clients and router (`llm`),
//!   speech providers with the LLM layer's retry, metering and cap hold (`speech`), the LLM
//!   planner, the media pipeline, curated stickers, the persona loader, the Telegram Desktop
//!   export reader, and the crash-safe state `store` (every path under `state/` is built in
//!   `store::layout`; `store::journal`, `store::journaled` and `store::replay` are each agent's journal, whose
//!   graph files are checkpoints; `store::presence` reads schedule days and intents), `voice`, the
//!   voice-note codec (WAV or PCM in, Telegram's Ogg/Opus with duration and waveform out), and
//!   `voice_studio`, the voice port (speech, then the codec, the note kept for a retry).
//!   Voice notes go out through `mtproto::backend::voice` (upload, sendMedia), are received
//!   by `mtproto::sim::upload` on the simulated Telegram and kept by `memory::voice`.
//! - [`app`]: the composition root (`services`: the one place that builds what the runtime
//!   runs on), `lifecycle` (one task tracker and stop token per run), `daemon` (`run`,
//!   `login`), `playground` (`chat`), `bench` (and `bench_memory`), `memory_report` and
//!   `presence_report` (the operator's views of memory and of schedules), `replay`, the crash
//!   child, `check`, `doctor` (checks a setup, says what to fix), `commands` (`state`, the commands' errors and exit codes), `credentials` (systemd's credentials directory), `cli`, `ops` (systemd notify, the one signal loop,
//!   the one reloader, owner controls (with `controls::chat_index`, the chats each persona has
//!   known), ctl socket, metrics, file watching), `console` (the local web console: `views`
//!   gathers, `pages::*` renders one page each), `logging`.
//! - [`cmd`]: one module per subcommand, each a call into `app`; `main` dispatches here.
//! - `fuzz` (feature `fuzzing`): one entry point per parser of outside input, for `fuzz/`.

pub mod adapters;
pub mod app;
pub mod cmd;
pub mod core;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod ingress;
pub mod ports;
pub mod runtime;
