//! The crash-safety harnesses behind the hidden subcommands, compiled only with the
//! `test-hooks` feature (the tests' build; the daemon's build has neither subcommand). Two of
//! them, each run as a child process that a test kills with SIGKILL:
//!
//! * `personad crash-child` ([`crash_child`]): the real runtime (scheduler, driver, fsynced
//!   writes) on a persisted in-memory Telegram and a deterministic planner whose plans have
//!   several sends with waits between them and a memory write (a `note`) among them, for the
//!   runtime-level kill -9 test (tests/crash.rs). The last chat is a group behind the real
//!   group gate (its messages name the persona) under `# Approval groups`: its plans become
//!   drafts in Saved Messages, which the harness approves as the owner would (`APPROVED`) as
//!   soon as one waits, at start too. Each run resumes what the previous run left on disk,
//!   optionally receives one new message, and prints a line per step (`READY`, `PUSHED`,
//!   `SENT <text>`, `APPROVED`, `IDLE`) so the test can kill it at chosen points. Like the
//!   daemon's unread scan on connect, a chat whose newest inbound message is unread and has no
//!   graph is pushed again at start.
//! * `personad save-loop` ([`save_loop`]): the graph store alone, saving in a loop and
//!   acknowledging each durable save (tests/state.rs).
//!
//! Nothing else calls into this module; it touches only the state directory it is given.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::adapters::memory::{self, Incoming, MemoryTelegram};
use crate::adapters::store::{GraphStore, StateDir};
use crate::app::cli::{CrashChildArgs, GlobalArgs, SaveLoopArgs};
use crate::app::commands::{CmdResult, CommandError};
use crate::core::config::{Pacing, RuntimeConfig};
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskSpec};
use crate::core::model::{Chat, ChatId, ChatKind};
use crate::core::plan::{Action, PlanError, PlanRequest};
use crate::core::time::BoxFuture;
use crate::ports::clock::{self, SharedClock, SystemClock};
use crate::ports::planner::Planner;
use crate::runtime::AgentHandle;

/// The agent of the harness.
pub const AGENT: &str = "crash";

/// The texts the planner sends for message `msg` of `chat`, in order.
pub fn planned_texts(chat: i64, msg: i64) -> Vec<String> {
    (1..=3)
        .map(|i| format!("c{chat} m{msg} part {i}"))
        .collect()
}

/// The note the planner keeps for message `msg` of `chat` (a memory write in every plan).
pub fn planned_fact(chat: i64, msg: i64) -> String {
    format!("c{chat} m{msg} noted")
}

struct CrashPlanner {
    clock: SharedClock,
}

impl Planner for CrashPlanner {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        Box::pin(async move {
            clock::pause(self.clock.as_ref(), Duration::from_millis(5)).await;
            let msg = req.target.map_or(0, |m| m.0);
            let mut actions = Vec::new();
            for (i, text) in planned_texts(req.chat.id.0, msg).into_iter().enumerate() {
                if i > 0 {
                    actions.push(Action::Wait { secs: 0.01 });
                }
                if i == 1 {
                    actions.push(Action::Note {
                        write: crate::core::facts::FactWrite {
                            id: None,
                            content: planned_fact(req.chat.id.0, msg),
                        },
                        message: req.target,
                    });
                }
                // The second part is a voice note: a kill can land between its upload and
                // its send.
                actions.push(if i == 1 {
                    Action::Voice {
                        text,
                        reply_to: None,
                    }
                } else {
                    Action::Send {
                        text,
                        reply_to: None,
                    }
                });
            }
            Ok(actions)
        })
    }
}

/// Makes every voice note from a short tone (no speech engine in the harness).
struct ToneVoice;

impl crate::ports::voice::VoiceMaker for ToneVoice {
    fn make<'a>(
        &'a self,
        _: crate::ports::voice::VoiceRequest<'a>,
    ) -> BoxFuture<'a, Result<crate::ports::voice::MadeVoice, crate::ports::voice::VoiceFailure>>
    {
        Box::pin(async {
            let tone: Vec<i16> = (0..8_000)
                .map(|i| ((f64::from(i) * 0.07).sin() * 6000.0) as i16)
                .collect();
            let v = crate::adapters::voice::encode_voice(&tone, 16_000)
                .map_err(|e| crate::ports::voice::VoiceFailure::Encode(Box::new(e)))?;
            Ok(crate::ports::voice::MadeVoice {
                ogg: Arc::new(v.ogg),
                duration_secs: v.duration_secs,
                waveform: v.waveform,
            })
        })
    }
}

fn say(line: &str) -> Result<(), CommandError> {
    Ok(crate::app::stdout::line(line)?)
}

/// `personad crash-child`.
pub(crate) async fn crash_child(global: GlobalArgs, args: CrashChildArgs) -> CmdResult {
    let clock: SharedClock = Arc::new(SystemClock);
    let _lock = crate::app::commands::lock_state(&global)?;
    let state = StateDir::new(&global.state_dir);
    let telegram = Arc::new(
        MemoryTelegram::new(AGENT, Arc::clone(&clock), Some(state.transcripts_dir()))
            .map_err(CommandError::Store)?,
    );
    // The last chat is a group (with one chat only, there is none).
    let chats: Vec<Chat> = (1..=args.chats)
        .map(|id| Chat {
            id: ChatId(id),
            kind: if id == args.chats && id > 1 {
                ChatKind::Group
            } else {
                ChatKind::Direct
            },
            title: format!("chat {id}"),
        })
        .collect();
    for c in &chats {
        telegram.ensure_chat(c.clone());
    }
    let src = format!(
        "# Agent Name\n{AGENT}\n\n# Agent Phone\n+15550100002\n\n# Agent Instructions\nAnswer.\n\n# Approval\ngroups\n\n# Group Cooldown\n0\n\n# Group Max Plans Per Hour\n100000\n"
    );
    let persona = crate::adapters::persona_loader::parse_persona(Path::new("crash.md"), &src, &[])
        .persona
        .ok_or_else(|| CommandError::Internal("the harness persona does not parse".into()))?;
    let config = RuntimeConfig {
        debounce: Duration::from_millis(2),
        max_in_flight: 4,
        pacing: Pacing {
            chars_per_sec: 1e9,
            start_delay_secs: 0.0,
            max_typing_secs: 0.0,
        },
        // Every plan keeps a note: a thousand cycles write hundreds of them into one chat's
        // file, past the default cap (a refused write would read as a lost note).
        memory_scope_bytes: 65_536,
        // A newer group message's draft is posted at once, not minutes after the one it
        // replaces.
        draft_gap: Duration::from_millis(20),
        ..RuntimeConfig::default()
    };
    let spec = crate::app::services::Spec::plain(
        config,
        vec![AgentHandle {
            persona: Arc::new(persona),
            telegram: telegram.clone(),
        }],
        &clock,
        &state,
        {
            let planner = Arc::new(CrashPlanner {
                clock: Arc::clone(&clock),
            });
            Box::new(move |_| planner as crate::ports::planner::SharedPlanner)
        },
    );
    let persona = Arc::clone(&spec.agents[0].persona);
    let services = crate::app::services::Services::build(spec).await?;
    let ingress = services.plain_ingress();
    let handle = services.runtime.handle();
    install_gate(&ingress, &handle, persona, &telegram, &clock);
    // Every task of the run (the runtime and the watchers) belongs to one lifecycle.
    let life = crate::app::lifecycle::Lifecycle::new();
    let runtime = services.runtime.with_voice(Arc::new(ToneVoice));
    let mut observed = telegram.observe();
    let run = life.spawn(runtime.run());
    handle.wait_until(|s| s.started).await;
    say("READY")?;
    let mut approved = std::collections::HashSet::new();
    approve_waiting(&handle, &state, &chats, &mut approved)?;
    // The unread scan, as on connecting to Telegram: the newest inbound message is pushed
    // again unless it was read (its planning started) or the graph on disk answers it.
    for c in &chats {
        let key = ConversationKey::new(AGENT, c.id);
        let answers =
            current_graph(&state, &key).and_then(|g| match g.tasks.first().map(|t| &t.spec) {
                Some(TaskSpec::Received { message_id, .. }) => *message_id,
                _ => None,
            });
        let transcript = telegram.transcript(c.id);
        let newest = transcript.iter().rev().find(|m| !m.outgoing);
        let read = telegram.read_upto(c.id);
        if let Some(m) = newest
            && answers != Some(m.id)
            && read.is_none_or(|r| r < m.id)
        {
            ingress.push(AGENT, c.clone(), m.clone(), true);
        }
    }
    if let Some(chat) = args.push {
        let c = chats
            .iter()
            .find(|c| c.id.0 == chat)
            .ok_or_else(|| CommandError::NotFound(format!("chat {chat}")))?;
        let msg = telegram
            .inject(
                c.id,
                Incoming {
                    from: "Bob".into(),
                    text: if c.kind == ChatKind::Group {
                        format!("{AGENT}, hello")
                    } else {
                        "hello".into()
                    },
                    ..Incoming::default()
                },
            )
            .await?;
        ingress.push(AGENT, c.clone(), msg, true);
        say("PUSHED")?;
    }
    let idle = {
        let handle = handle.clone();
        async move { handle.wait_idle().await }
    };
    tokio::pin!(idle);
    loop {
        tokio::select! {
            rec = observed.recv() => match rec {
                Some(r) => {
                    if let memory::Action::Send { message, .. } | memory::Action::Voice { message, .. } = r.action {
                        say(&format!("SENT {}", message.text))?;
                        approve_waiting(&handle, &state, &chats, &mut approved)?;
                    }
                }
                None => break,
            },
            () = &mut idle => break,
            // A draft whose post became durable after the last send is approved here.
            () = clock::pause(clock.as_ref(), Duration::from_millis(50)) => {
                approve_waiting(&handle, &state, &chats, &mut approved)?;
            }
        }
    }
    say("IDLE")?;
    handle.shutdown("harness done");
    match run.await {
        Ok(Ok(_)) => Ok(ExitCode::SUCCESS),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(e.into()),
    }
}

/// The group gate the daemon would give the agent (no classifier: the group's messages name
/// the persona).
fn install_gate(
    ingress: &crate::ingress::Ingress,
    handle: &crate::runtime::RuntimeHandle,
    persona: Arc<crate::core::persona::Persona>,
    telegram: &Arc<MemoryTelegram>,
    clock: &SharedClock,
) {
    ingress.groups().insert(
        AGENT,
        crate::ingress::gate::GroupGate::new(crate::ingress::gate::GateConfig {
            agent: AGENT.into(),
            identity: crate::ingress::gate::identity_for(
                &persona,
                crate::ports::telegram::Telegram::self_id(telegram.as_ref()),
                None,
            ),
            persona,
            telegram: telegram.clone(),
            runtime: handle.clone(),
            classifier: None,
            classifier_model: None,
            clock: Arc::clone(clock),
            peers: Arc::default(),
            modes: Default::default(),
        }),
    );
}

/// A chat's graph as it is now: the journal's newest state over its checkpoint file (the
/// file alone may be a moment, or after a kill a whole run, behind).
fn current_graph(state: &StateDir, key: &ConversationKey) -> Option<TaskGraph> {
    GraphStore::new(state.clone())
        .read_graph(key)
        .ok()
        .flatten()
}

/// Approves, as the owner would, every draft that waits in a chat's graph and was
/// not approved by this run yet (a decision lost to a kill is made again by the next run).
fn approve_waiting(
    handle: &crate::runtime::RuntimeHandle,
    state: &StateDir,
    chats: &[Chat],
    approved: &mut std::collections::HashSet<String>,
) -> Result<(), CommandError> {
    for c in chats {
        let key = ConversationKey::new(AGENT, c.id);
        let Some(graph) = current_graph(state, &key) else {
            continue;
        };
        for t in &graph.tasks {
            let waits = t.status != crate::core::graph::TaskStatus::Done
                && matches!(
                    t.spec,
                    TaskSpec::Draft {
                        decision: None,
                        posted: Some(_),
                        ..
                    }
                );
            if waits && approved.insert(t.id.clone()) {
                handle.decide_draft(
                    AGENT,
                    crate::core::scheduler::DraftRef::Id(t.id.clone()),
                    crate::core::approval::Decision::Send,
                );
                say(&format!("APPROVED {}", t.id))?;
            }
        }
    }
    Ok(())
}

/// `personad save-loop`: saves `chats` graphs round-robin, printing `ACK <chat> <seq>` after
/// each save returns. A parent kills it at random moments and checks every file parses.
pub(crate) fn save_loop(global: &GlobalArgs, args: &SaveLoopArgs) -> CmdResult {
    let store = GraphStore::new(StateDir::new(&global.state_dir));
    let mut graphs: Vec<TaskGraph> = (0..args.chats.max(1))
        .map(|i| {
            let chat = Chat {
                id: ChatId(i + 1),
                kind: ChatKind::Direct,
                title: format!("chat {i} ```json\n{{\"forged\":1}}\n```"),
            };
            let now = Timestamp::now();
            TaskGraph::with_received("harness", chat, now, None, now)
        })
        .collect();
    // Start from what is on disk so sequence numbers keep rising across kills.
    if let Ok(files) = store.scan() {
        for f in files {
            if let Ok(g) = f.graph
                && let Some(slot) = graphs.iter_mut().find(|x| x.chat.id == g.chat.id)
            {
                *slot = g;
            }
        }
    }
    let mut n: u64 = 0;
    loop {
        let i = (n % graphs.len() as u64) as usize;
        let g = &mut graphs[i];
        g.seq += 1;
        let text = "x".repeat((n % 4096) as usize);
        g.tasks.truncate(1);
        let first = g.tasks[0].id.clone();
        g.append_chain(
            &first,
            vec![Task::new(TaskSpec::send(text, None), Timestamp::now())],
        );
        store.save(g)?;
        crate::app::stdout::line(format_args!("ACK {} {}", g.chat.id, g.seq))?;
        n += 1;
        if args.saves > 0 && n >= args.saves {
            return Ok(ExitCode::SUCCESS);
        }
    }
}
