//! The `chat` playground: the real runtime on the in-memory Telegram, driven from the
//! terminal. Interactive mode reads one message per line and prints the persona's actions as
//! they happen; `--jsonl` speaks JSON objects on both sides (docs/playground.md); `--fast`
//! runs the scheduler on virtual time, which moves only when the input says time passes
//! (`after_ms`) and at end of input. Graphs and transcripts persist in the state dir, so a
//! playground killed mid-plan resumes when started again. Like the daemon, a session is
//! built (`session`), run as tasks of one lifecycle with the one signal loop and the one
//! reloader, and stopped. Called by the binary.
//!
//! - `session`: what a session is built from;
//! - `input`: the line formats; `feed`: reading and delivering them;
//! - `output`: what is printed.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::adapters::memory::MemoryTelegram;
use crate::app::cli::{ChatArgs, GlobalArgs};
use crate::app::commands::{CmdResult, CommandError, find_persona, load_personas_async};
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::reload::{self, Reload};
use crate::app::ops::signals::{self, Signal};
use crate::core::model::ChatId;
use crate::ports::telegram::Telegram;
use crate::runtime::{AgentHandle, RuntimeHandle};

mod feed;
pub mod input;
mod output;
mod session;

use feed::{Driver, recover_unanswered, spawn_stdin_reader};
use output::{print_actions, print_decisions, spawn_presence_printer};
use session::Session;

/// Exit code after SIGINT (128 + 2), graceful or not.
pub(crate) const EXIT_SIGINT: u8 = 130;
/// Exit code after SIGTERM (128 + 15), graceful or not.
pub(crate) const EXIT_SIGTERM: u8 = 143;
/// How long the session's other tasks get to stop after the runtime ended.
const WIND_DOWN: Duration = Duration::from_secs(2);

/// `personad chat`.
pub async fn chat(global: GlobalArgs, args: ChatArgs) -> CmdResult {
    let life = Lifecycle::new();
    let signals = signals::listen(&life);
    let session = Session::build(&global, &args, &life).await?;
    let result = run(&global, &args, session, &life, signals).await;
    life.wind_down(WIND_DOWN).await;
    result
}

/// How the input side of a session ended.
struct Ended {
    /// The stop signal that ended it, if one did.
    stopped_by: Option<&'static str>,
    read_failed: bool,
}

/// Starts the session, feeds it its input, and stops it.
async fn run(
    global: &GlobalArgs,
    args: &ChatArgs,
    session: Session,
    life: &Lifecycle,
    signals: mpsc::UnboundedReceiver<Signal>,
) -> CmdResult {
    let Session {
        persona,
        memory,
        clock,
        chat,
        dir,
        gate,
        ingress,
        handle,
        usage,
        runtime,
        start,
        _lock,
    } = session;
    let decisions = gate.as_ref().map(|g| {
        life.spawn(print_decisions(
            g.observe(),
            Arc::clone(&clock),
            start,
            args.jsonl,
        ))
    });
    let (presence_stop, presence_printer) =
        spawn_presence_printer(life, &handle, start, args, &persona);
    let printer = life.spawn(print_actions(
        memory.observe(),
        start,
        args.jsonl,
        (persona.name.clone(), ChatId(memory.self_id())),
        gate.clone().map(|g| (g, chat.clone())),
    ));
    // In fast mode virtual time stands still while input is read.
    let mut hold = Some(clock.hold());
    let mut run = life.spawn(runtime.run());
    // Input moves virtual time only once the runtime has loaded and looked at its state (a
    // schedule's activity at the start is announced at the start).
    handle.wait_until(|st| st.started).await;
    // Ids never restart under the runtime's handled marks (a quarantined transcript).
    if let Some(state) = handle.agent_state(&persona.name) {
        memory.raise_ids(&state.handled_messages());
    }
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
    let mut stops = reloads_and_stops(global, life, &persona.name, &memory, &handle, signals);
    let driver = Driver {
        args,
        memory: &memory,
        ingress: &ingress,
        clock: &clock,
        chat: &chat,
        agent: &persona.name,
        gate: gate.as_ref(),
        media_state: crate::adapters::store::StateDir::new(&global.state_dir),
    };
    recover_unanswered(&driver, &dir).await;
    let input = spawn_stdin_reader()?;
    let mut ended = Ended {
        stopped_by: None,
        read_failed: false,
    };
    tokio::select! {
        end = driver.feed(&mut hold, input) => ended.read_failed = end.is_err(),
        Some(name) = stops.recv() => ended.stopped_by = Some(name),
    }
    drop(hold);
    ended.stopped_by = settle_and_stop(&handle, &mut stops, ended.stopped_by).await;
    let result = tokio::select! {
        r = &mut run => r,
        Some(name) = stops.recv() => {
            tracing::warn!(event = "exit_now", signal = name, "second signal: exiting at once; an unfinished plan resumes at the next start");
            // Saves are atomic: what was not saved runs again at the next start.
            run.abort();
            life.cancel();
            memory.stop_observing();
            return Ok(ExitCode::from(signal_exit_code(name)));
        }
    };
    let result = result.map_err(|e| CommandError::Join(e).doing("runtime task failed"))?;
    life.cancel();
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
    if let Some(name) = ended.stopped_by {
        return Ok(ExitCode::from(signal_exit_code(name)));
    }
    if ended.read_failed {
        return Err(CommandError::Io(std::io::Error::other(
            "standard input failed; the lines before the failure were handled",
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the one reloader over the session's persona, fed by file watching and SIGHUP, and
/// returns the stop signals (SIGINT/SIGTERM by name).
fn reloads_and_stops(
    global: &GlobalArgs,
    life: &Lifecycle,
    agent: &str,
    memory: &Arc<MemoryTelegram>,
    handle: &RuntimeHandle,
    mut signals: mpsc::UnboundedReceiver<Signal>,
) -> mpsc::UnboundedReceiver<&'static str> {
    // Persona and role-prompt edits (and SIGHUP) reload the persona, as in the daemon.
    let (reload_tx, reload_rx) = reload::requests();
    let mut dirs = vec![global.agents_dir.clone()];
    dirs.extend(global.prompt_dirs());
    let watcher =
        crate::app::ops::watch::watch(life, &dirs, Duration::from_millis(300), reload_tx.clone())
            .ok();
    let target = PersonaReload {
        global: global.clone(),
        agent: agent.to_string(),
        memory: Arc::clone(memory),
        handle: handle.clone(),
        reported: std::collections::BTreeSet::new(),
    };
    life.spawn(reload::serve(target, reload_rx, life.stop_token()));
    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    let stop = life.stop_token();
    life.spawn(async move {
        // The watcher lives as long as the session does.
        let _watcher = watcher;
        loop {
            let signal = tokio::select! {
                () = stop.cancelled() => return,
                s = signals.recv() => s,
            };
            match signal {
                Some(Signal::Reload) => {
                    let _ = reload_tx.send(());
                }
                Some(Signal::Stop(name)) => {
                    let _ = stop_tx.send(name);
                }
                None => return,
            }
        }
    });
    stop_rx
}

/// After the input ended (or a stop signal came): waits until the runtime is quiet (a
/// classifier batch, a delayed answer or a plan may still run, all of them tasks), unless a
/// signal comes first, then asks it to stop. Returns the signal that stopped the session.
async fn settle_and_stop(
    handle: &RuntimeHandle,
    signals: &mut mpsc::UnboundedReceiver<&'static str>,
    mut stopped_by: Option<&'static str>,
) -> Option<&'static str> {
    if stopped_by.is_none() {
        // The loop stops by itself once it is quiet (judged in the loop, so virtual time
        // never runs on past the last plan), unless a signal comes.
        handle.stop_when_idle("end of input");
        tokio::select! {
            () = handle.wait_until(|_| false) => return None,
            Some(name) = signals.recv() => stopped_by = Some(name),
        }
    }
    if let Some(name) = stopped_by {
        tracing::warn!(
            event = "signal_stop",
            signal = name,
            "stopping: the task in flight may finish within the grace period (a second signal exits at once)"
        );
        handle.shutdown(&format!("{name} received"));
    }
    stopped_by
}

/// The documented exit code for a stop signal.
fn signal_exit_code(name: &str) -> u8 {
    if name == "SIGTERM" {
        EXIT_SIGTERM
    } else {
        EXIT_SIGINT
    }
}

/// The playground's persona, reloaded on request: a valid edit takes effect from the next
/// plan; an invalid one keeps the running version and is reported once per problem.
struct PersonaReload {
    global: GlobalArgs,
    agent: String,
    memory: Arc<MemoryTelegram>,
    handle: RuntimeHandle,
    reported: std::collections::BTreeSet<String>,
}

impl Reload for PersonaReload {
    async fn reload(&mut self) {
        let report = match load_personas_async(&self.global).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(event = "reload_failed", error = %e, "reload failed: the persona keeps running as it was");
                return;
            }
        };
        match find_persona(&report, &self.agent) {
            Ok(p) => {
                tracing::info!(event = "persona_reloaded", agent = %self.agent, "persona reloaded");
                self.handle.upsert_agent(AgentHandle {
                    persona: Arc::new(p),
                    telegram: self.memory.clone(),
                });
            }
            Err(e) => {
                let text = e.to_string();
                if self.reported.insert(text.clone()) {
                    tracing::error!(event = "persona_edit_rejected", problem = %text, "persona edit rejected: the previous version keeps running");
                }
            }
        }
    }
}
