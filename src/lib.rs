//! personad: a Telegram userbot daemon that gives user accounts LLM personas.
//!
//! Module map (one concept each):
//! - [`backoff`]: the one backoff formula (exponential, capped, full jitter) on the project clock.
//! - [`clock`]: the one source of time; real, or virtual for tests and `chat --fast`.
//! - [`config`]: validated runtime settings (debounce, retries, caps, timeouts).
//! - [`persona`]: persona files and role prompts, parsed and validated into `Persona`.
//! - [`graph`]: task graphs as pure data and transitions; [`graph::codec`] is their on-disk form.
//! - [`agent_state`]: per-agent safety state kept across restarts (disabled chats, breaker).
//! - [`stickers`]: the persona's curated stickers, loaded lazily and bounded.
//! - [`store`]: every disk write (crash-safe, private permissions) and the state-dir layout.
//! - [`telegram`]: the Telegram boundary (domain types, trait, errors), its in-memory twin, the
//!   account-safety governor, and the MTProto backend (`telegram::mtproto`, the only grammers user).
//! - [`planner`]: the planning trait and the closed set of actions a plan may contain.
//! - [`blocks`]: parses the model's task-block reply into actions (pure, adversarial input).
//! - [`prompt`]: builds the cache-stable LLM request from persona and chat history (pure).
//! - [`llm`]: the LLM boundary (trait, request, outcomes, errors), providers (Gemini,
//!   OpenAI-compatible), their router, the one retry policy and usage metering.
//! - [`media`]: media descriptions and transcripts: cached records, budget, backoff, prompts.
//! - [`llm_planner`]: the planner over an LLM: prompt, generate, parse.
//! - [`handlers`]: one handler per task kind, registered in one place.
//! - [`runtime`]: handle, work queue, pure scheduler (ready queues, deadline heap, retries),
//!   account safety, durable writes off the loop, and the async driver.
//! - [`group`]: group messages: trigger modes, addressing classifier, share of voice, replay.
//! - [`playground`]: the `chat` command's driver (interactive and JSONL) on the in-memory backend.
//! - [`cli`]: command-line definitions (clap), options and their environment variables.
//! - [`daemon`]: `run` and `login`: connects agents, wires runtime, pumps and signals.
//! - [`commands`]: `check`, `state` and the crash harness, shared loading helpers, exit codes.
//! - [`bench`]: `personad bench`, the runtime measured on the in-memory backend.
//! - [`crash_harness`]: hidden `crash-child`, the runtime under the kill -9 test.
//! - [`fuzz`]: one entry point per parser of outside input, with its promises, for `fuzz/`.
//! - [`ops`]: systemd notify, owner controls, the ctl socket, file watching, metrics.
//! - [`logging`]: one log line per event (text, JSON or journald), stable event names.

pub mod adapters;
pub mod app;
pub mod cmd;
pub mod core;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod ingress;
pub mod ports;
pub mod runtime;
