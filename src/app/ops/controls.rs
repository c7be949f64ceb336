//! Owner controls: the commands an account's owner writes in its Saved Messages (`/status`,
//! `/pause`, `/resume`, `/forget`, `/plans`, `/mode`, `/stop`, `/help`) and the same
//! operations for `personad ctl`. Owns their parsing (pure), the pauses (persisted per agent
//! in `<state>/<agent>/controls.json`, so they survive restarts) and the inbound gate: a
//! command is accepted only from the account itself (the owner, from any device), in its
//! Saved Messages or in a configured admin chat, and is never planned as conversation; a
//! command-looking message from anyone else is neither executed nor planned, and in an admin
//! chat nobody else's text is answered at all. A paused chat still records its messages but does
//! not plan. Plans are read from the graph store and dropped through the runtime's
//! `cancel_plan`; nothing here edits a graph. Wired by `daemon`; `ctl` calls [`Controller`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::adapters::memory::MemoryTelegram;
use crate::adapters::store::{self, GraphStore, StateDir};
use crate::app::ops::OpError;
use crate::core::graph::TaskStatus;
use crate::core::model::{Chat, ChatId, Message, OutgoingText};
use crate::ports::clock::{self, SharedClock};
use crate::ports::telegram::Telegram;
use crate::runtime::{Admit, InboundGate, RuntimeHandle};
mod drafts;
mod pauses;
mod reads;
mod say;
use crate::core::approval::{ApprovalMode, Decision};
pub(crate) use reads::{AgentView, DraftView};
mod views;
use pauses::save_pauses;
pub use pauses::{Pause, Pauses, load_pauses};

/// Longest answer sent to Telegram (its limit is 4096 characters).
const MAX_ANSWER_CHARS: usize = 4000;

/// An operation, from a Saved Messages command or from `personad ctl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Status,
    Pause {
        chat: Option<String>,
        secs: Option<u64>,
    },
    Resume {
        chat: Option<String>,
    },
    Forget {
        chat: String,
    },
    Plans {
        chat: Option<String>,
    },
    Mode {
        chat: String,
        mode: String,
    },
    Reload,
    Stop,
    Help,
    /// What the agent remembers (about `who`, or everything).
    Memory {
        who: Option<String>,
    },
    /// The persona's schedule (today, or a `YYYY-MM-DD` day) and its intents.
    Schedule {
        day: Option<String>,
    },
    /// Forget one fact by its id.
    ForgetFact {
        id: String,
    },
    /// Drafts waiting for the owner.
    Drafts,
    /// Approve a draft (with a text of the owner's instead of the plan's, if given).
    Approve {
        id: String,
        text: Option<String>,
    },
    /// Reject a draft.
    Reject {
        id: String,
    },
    /// A chat's draft mode (`default` clears the override).
    ApprovalMode {
        chat: String,
        mode: String,
    },
    /// `--telegram memory` only: a message as if `from` wrote it.
    Say {
        chat: Option<String>,
        from: String,
        group: Option<String>,
        /// The message it replies to.
        #[serde(default)]
        reply_to: Option<i64>,
        text: String,
        /// How long to wait for the answer, in seconds (0: do not wait).
        #[serde(default)]
        wait_secs: u64,
    },
}

const HELP: &str = "personad commands (Saved Messages only):
/status: agents, chats with plans, pauses, breaker, disabled chats
/pause [chat|all] [duration]: stop replying (e.g. /pause all 2h, /pause @alice)
/resume [chat|all]: reply again
/forget chat: drop the chat's pending plan
/plans [chat]: pending plans
/mode chat strict|smart|talkative: a group's trigger mode
/drafts: drafts waiting for your approval (reply to a draft: ok, no, later, or your text)
/approve id [text]: send a draft (or your text instead)
/reject id: drop a draft
/approve-mode chat off|new-contacts|groups|all|default: a chat's draft mode
/memory [person|chat]: what the persona remembers, with fact ids
/forget-fact id: forget one fact
/schedule [YYYY-MM-DD]: today's (or that day's) schedule and the scheduled intents
/stop: stop the daemon gracefully
/help: this text
A chat is an id, @username or part of its title.";

/// Parses a message as an owner command: `None` when it is not one of ours, `Some(Err)`
/// when it is but its arguments are wrong.
pub(crate) fn parse_command(text: &str) -> Option<Result<Op, OpError>> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let head = words.next()?.to_lowercase();
    let head = head.split('@').next().unwrap_or_default().to_string();
    let args: Vec<&str> = words.collect();
    let joined = |a: &[&str]| {
        let s = a.join(" ");
        (!s.is_empty() && !s.eq_ignore_ascii_case("all")).then_some(s)
    };
    let op = match head.as_str() {
        "status" => Ok(Op::Status),
        "help" => Ok(Op::Help),
        "stop" => Ok(Op::Stop),
        "pause" => {
            let (chat_words, secs) = match args.split_last() {
                Some((last, init)) if parse_duration(last).is_some() => {
                    (init, parse_duration(last))
                }
                _ => (&args[..], None),
            };
            Ok(Op::Pause {
                chat: joined(chat_words),
                secs,
            })
        }
        "resume" => Ok(Op::Resume {
            chat: joined(&args),
        }),
        "plans" => Ok(Op::Plans {
            chat: joined(&args),
        }),
        "forget" => match joined(&args) {
            Some(chat) => Ok(Op::Forget { chat }),
            None => Err(OpError::from("usage: /forget chat")),
        },
        "memory" => Ok(Op::Memory { who: joined(&args) }),
        "schedule" => Ok(Op::Schedule { day: joined(&args) }),
        "forget-fact" | "forget_fact" => match args.as_slice() {
            [id] => Ok(Op::ForgetFact {
                id: (*id).to_string(),
            }),
            _ => Err(OpError::from("usage: /forget-fact id")),
        },
        "drafts" => Ok(Op::Drafts),
        "approve" => match args.split_first() {
            Some((id, rest)) => Ok(Op::Approve {
                id: (*id).to_string(),
                text: (!rest.is_empty()).then(|| rest.join(" ")),
            }),
            None => Err(OpError::from("usage: /approve id [text]")),
        },
        "reject" => match args.as_slice() {
            [id] => Ok(Op::Reject {
                id: (*id).to_string(),
            }),
            _ => Err(OpError::from("usage: /reject id")),
        },
        "approve-mode" | "approve_mode" => match args.split_last() {
            Some((mode, chat)) if !chat.is_empty() => Ok(Op::ApprovalMode {
                chat: chat.join(" "),
                mode: mode.to_lowercase(),
            }),
            _ => Err(OpError::from(
                "usage: /approve-mode chat off|new-contacts|groups|all|default",
            )),
        },
        "mode" => match args.split_last() {
            Some((mode, chat)) if !chat.is_empty() => Ok(Op::Mode {
                chat: chat.join(" "),
                mode: mode.to_lowercase(),
            }),
            _ => Err(OpError::from("usage: /mode chat strict|smart|talkative")),
        },
        _ => return None,
    };
    Some(op)
}

/// `90s`, `30m`, `2h`, `1d`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Option<u64> {
    crate::core::time::parse_span(s)
}

/// An agent the controller can answer for.
#[derive(Clone)]
pub struct Seat {
    pub telegram: Arc<dyn Telegram>,
    /// Set with `run --telegram memory`: where `say` delivers.
    pub memory: Option<Arc<MemoryTelegram>>,
}

/// What the daemon does for `/stop` and `reload`.
pub struct Hooks {
    pub stop: Box<dyn Fn(&str) + Send + Sync>,
    pub reload: Box<dyn Fn() + Send + Sync>,
}

/// A seam for LLM usage totals (the LLM layer fills it): one line for the agent, if known.
pub(crate) type UsageSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Told when the owner sets a group's trigger mode (the daemon's live group gates).
pub(crate) type ModeListener =
    Arc<dyn Fn(&str, ChatId, crate::core::group::settings::TriggerMode) + Send + Sync>;

#[derive(Debug, Clone, Default)]
struct KnownChat {
    title: String,
    username: Option<String>,
}

/// Carries out owner operations for every running agent.
pub struct Controller {
    state: StateDir,
    runtime: RuntimeHandle,
    clock: SharedClock,
    admin_chats: Vec<i64>,
    hooks: Hooks,
    usage: Mutex<Option<UsageSource>>,
    modes: Mutex<Option<ModeListener>>,
    /// The runtime handle carrying the whole admission chain (controls, then groups).
    ingress: Mutex<Option<RuntimeHandle>>,
    seats: Mutex<BTreeMap<String, Seat>>,
    pauses: Mutex<BTreeMap<String, Pauses>>,
    chats: Mutex<BTreeMap<String, BTreeMap<i64, KnownChat>>>,
    /// Itself, so `say` can route through its own gate.
    me: std::sync::Weak<Controller>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Controller {
    pub fn new(
        state: StateDir,
        runtime: RuntimeHandle,
        clock: SharedClock,
        admin_chats: Vec<i64>,
        hooks: Hooks,
    ) -> Arc<Controller> {
        Arc::new_cyclic(|me| Controller {
            state,
            runtime,
            clock,
            admin_chats,
            hooks,
            usage: Mutex::new(None),
            modes: Mutex::new(None),
            ingress: Mutex::new(None),
            seats: Mutex::new(BTreeMap::new()),
            pauses: Mutex::new(BTreeMap::new()),
            chats: Mutex::new(BTreeMap::new()),
            me: me.clone(),
        })
    }

    /// The handle `ctl say` delivers through: the runtime with the whole admission chain
    /// installed (without it, `say` passes the owner controls alone).
    pub(crate) fn set_ingress(&self, handle: RuntimeHandle) {
        *lock(&self.ingress) = Some(handle);
    }

    /// Who applies `/mode` to running group gates (the override is also kept on disk).
    pub(crate) fn set_mode_listener(&self, listener: ModeListener) {
        *lock(&self.modes) = Some(listener);
    }

    /// Where `/status` gets LLM usage from.
    pub(crate) fn set_usage_source(&self, source: UsageSource) {
        *lock(&self.usage) = Some(source);
    }

    /// Makes an agent known (at start and when hot reload starts one); loads its pauses.
    pub fn add_agent(&self, agent: &str, seat: Seat) {
        let pauses = load_pauses(&self.state, agent);
        self.runtime.set_paused(agent, pauses.for_runtime());
        lock(&self.pauses).insert(agent.to_string(), pauses);
        lock(&self.seats).insert(agent.to_string(), seat);
    }

    pub(crate) fn remove_agent(&self, agent: &str) {
        lock(&self.seats).remove(agent);
    }

    pub fn agents(&self) -> Vec<String> {
        lock(&self.seats).keys().cloned().collect()
    }

    /// The gate to put in front of the runtime's queue.
    pub fn gate(self: &Arc<Self>) -> Arc<dyn InboundGate> {
        Arc::new(Gate(Arc::clone(self)))
    }

    /// Whether the agent's chat is paused now.
    pub fn is_paused(&self, agent: &str, chat: ChatId) -> bool {
        let now = self.clock.now();
        lock(&self.pauses)
            .get(agent)
            .is_some_and(|p| p.is_paused(chat, now))
    }

    fn remember(&self, agent: &str, chat: &Chat, message: &Message) {
        let mut chats = lock(&self.chats);
        let entry = chats
            .entry(agent.to_string())
            .or_default()
            .entry(chat.id.0)
            .or_default();
        entry.title = chat.title.clone();
        if chat.kind.is_direct() && !message.outgoing && message.sender.username.is_some() {
            entry.username = message.sender.username.clone();
        }
    }

    fn seat(&self, agent: &str) -> Option<Seat> {
        lock(&self.seats).get(agent).cloned()
    }

    /// The running agent an operation is about: the one named (any case), or the only one.
    fn pick_agent(&self, agent: Option<&str>) -> Result<String, OpError> {
        let seats = lock(&self.seats);
        match agent {
            Some(name) => seats
                .keys()
                .find(|k| k.eq_ignore_ascii_case(name.trim()))
                .cloned()
                .ok_or_else(|| {
                    OpError(format!(
                        "no running agent named {name:?} (running: {})",
                        seats.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))
                }),
            None if seats.len() == 1 => Ok(seats.keys().next().cloned().unwrap_or_default()),
            None => Err(OpError::from(format!(
                "say which agent (--agent NAME); running: {}",
                seats.keys().cloned().collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    async fn graphs(&self) -> Vec<crate::core::graph::TaskGraph> {
        let store = GraphStore::new(self.state.clone());
        match tokio::task::spawn_blocking(move || store.scan()).await {
            Ok(Ok(files)) => files.into_iter().filter_map(|f| f.graph.ok()).collect(),
            _ => Vec::new(),
        }
    }

    /// Finds a chat by id, `me`, @username or title substring.
    async fn resolve_chat(&self, agent: &str, sel: &str) -> Result<(ChatId, String), OpError> {
        let sel = sel.trim();
        if sel.eq_ignore_ascii_case("me") || sel.eq_ignore_ascii_case("saved") {
            let id = self.seat(agent).map(|s| s.telegram.self_id()).unwrap_or(0);
            return Ok((ChatId(id), "Saved Messages".into()));
        }
        let mut known: BTreeMap<i64, KnownChat> =
            lock(&self.chats).get(agent).cloned().unwrap_or_default();
        for g in self.graphs().await.into_iter().filter(|g| g.agent == agent) {
            known.entry(g.chat.id.0).or_insert(KnownChat {
                title: g.chat.title.clone(),
                username: None,
            });
        }
        if let Ok(id) = sel.parse::<i64>() {
            let title = known.get(&id).map(|c| c.title.clone()).unwrap_or_default();
            return Ok((ChatId(id), title));
        }
        let matches: Vec<(i64, String)> = if let Some(user) = sel.strip_prefix('@') {
            known
                .iter()
                .filter(|(_, c)| {
                    c.username
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case(user))
                })
                .map(|(id, c)| (*id, c.title.clone()))
                .collect()
        } else {
            let needle = sel.to_lowercase();
            known
                .iter()
                .filter(|(_, c)| c.title.to_lowercase().contains(&needle))
                .map(|(id, c)| (*id, c.title.clone()))
                .collect()
        };
        match matches.as_slice() {
            [(id, title)] => Ok((ChatId(*id), title.clone())),
            [] => Err(OpError::from(format!("no chat of {agent} matches {sel:?}"))),
            many => Err(OpError::from(format!(
                "{sel:?} matches several chats: {}; use the id",
                many.iter()
                    .map(|(id, t)| format!("{id} ({t})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Carries out one operation; `agent` is the agent it concerns (required when several
    /// run, except for `status` and `plans`). Returns the answer text, or why it failed.
    pub async fn execute(&self, agent: Option<&str>, op: Op) -> Result<String, OpError> {
        match op {
            Op::Help => Ok(HELP.to_string()),
            Op::Status => self.status(agent).await,
            Op::Plans { chat } => self.plans(agent, chat.as_deref()).await,
            Op::Reload => {
                (self.hooks.reload)();
                Ok("reloading personas and role prompts".into())
            }
            Op::Stop => {
                (self.hooks.stop)("owner asked to stop");
                Ok("stopping: tasks in flight may finish, then the daemon exits".into())
            }
            Op::Drafts => self.drafts(agent).await,
            Op::Approve { id, text } => {
                let decision = match text {
                    Some(text) if !text.trim().is_empty() => Decision::Edit { text },
                    _ => Decision::Send,
                };
                self.decide(agent, &id, decision).await
            }
            Op::Reject { id } => self.decide(agent, &id, Decision::Drop).await,
            Op::ApprovalMode { chat, mode } => self.approval_mode(agent, &chat, &mode).await,
            Op::Mode { chat, mode } if mode.parse::<ApprovalMode>().is_ok() => {
                self.approval_mode(agent, &chat, &mode).await
            }
            Op::Mode { chat, mode } => {
                let mode: crate::core::group::settings::TriggerMode =
                    mode.parse().map_err(|_| {
                        OpError(format!(
                            "unknown mode {mode:?}: strict, smart or talkative (a group's trigger), or off, new-contacts, groups or all (draft mode)"
                        ))
                    })?;
                let agent = self.pick_agent(agent)?;
                let (id, title) = self.resolve_chat(&agent, &chat).await?;
                // Kept in the agent's state (so it survives restarts) and applied at once.
                self.runtime.set_group_mode(&agent, id, Some(mode));
                if let Some(listener) = lock(&self.modes).as_ref() {
                    listener(&agent, id, mode);
                }
                Ok(format!("{title} ({id}): group trigger mode {mode}"))
            }
            Op::Pause { chat, secs } => {
                let agent = self.pick_agent(agent)?;
                self.pause(&agent, chat.as_deref(), secs).await
            }
            Op::Resume { chat } => {
                let agent = self.pick_agent(agent)?;
                self.resume(&agent, chat.as_deref()).await
            }
            Op::Forget { chat } => {
                let agent = self.pick_agent(agent)?;
                let (id, title) = self.resolve_chat(&agent, &chat).await?;
                let had = self
                    .graphs()
                    .await
                    .iter()
                    .any(|g| g.agent == agent && g.chat.id == id);
                self.runtime
                    .cancel_plan(&agent, id, "the owner asked to forget it");
                Ok(if had {
                    format!("{agent}: dropped the plan of chat {id} ({title})")
                } else {
                    format!("{agent}: chat {id} ({title}) had no plan")
                })
            }
            Op::Memory { who } => {
                let agent = self.pick_agent(agent)?;
                let facts = crate::adapters::store::facts::FileFacts::new(self.state.clone());
                tokio::task::spawn_blocking(move || {
                    crate::app::memory_report::report(&facts, &agent, who.as_deref())
                })
                .await
                .map_err(OpError::of)?
                .map_err(OpError::of)
            }
            Op::Schedule { day } => {
                let agent = self.pick_agent(agent)?;
                let now = self.clock.now();
                crate::app::presence_report::for_owner(&self.state, &self.runtime, agent, day, now)
                    .await
            }
            Op::ForgetFact { id } => {
                let agent = self.pick_agent(agent)?;
                let facts = crate::adapters::store::facts::FileFacts::new(self.state.clone());
                let now = self.clock.now();
                tokio::task::spawn_blocking(move || {
                    crate::app::memory_report::forget_fact(&facts, &agent, &id, now)
                })
                .await
                .map_err(OpError::of)?
                .map_err(OpError::of)
            }
            Op::Say {
                chat,
                from,
                group,
                reply_to,
                text,
                wait_secs,
            } => {
                let agent = self.pick_agent(agent)?;
                let wait = Duration::from_secs(wait_secs.min(say::MAX_WAIT_SECS));
                let said = say::Said {
                    chat: chat.as_deref(),
                    from: &from,
                    group: group.as_deref(),
                    reply_to: reply_to.map(crate::core::model::MessageId),
                    text: &text,
                };
                self.say(&agent, said, wait).await
            }
        }
    }

    async fn pause(
        &self,
        agent: &str,
        chat: Option<&str>,
        secs: Option<u64>,
    ) -> Result<String, OpError> {
        let now = self.clock.now();
        let pause = Pause {
            since: now,
            until: secs.map(|s| clock::add(now, Duration::from_secs(s))),
        };
        let target = match chat {
            Some(c) => Some(self.resolve_chat(agent, c).await?),
            None => None,
        };
        let updated = {
            let mut all = lock(&self.pauses);
            let p = all.entry(agent.to_string()).or_default();
            match &target {
                Some((id, _)) => {
                    p.chats.insert(id.0, pause.clone());
                }
                None => p.all = Some(pause.clone()),
            }
            p.clone()
        };
        self.persist(agent, updated).await?;
        let dropped: Vec<ChatId> = self
            .graphs()
            .await
            .into_iter()
            .filter(|g| g.agent == agent && target.as_ref().is_none_or(|(id, _)| *id == g.chat.id))
            .map(|g| g.chat.id)
            .collect();
        for id in &dropped {
            self.runtime.cancel_plan(agent, *id, "paused by the owner");
        }
        let what = match &target {
            Some((id, title)) => format!("chat {id} ({title})"),
            None => "all chats".to_string(),
        };
        tracing::info!(event = "paused", agent, chat = target.as_ref().map(|t| t.0.0), until = %pause.describe(), "owner paused the agent");
        Ok(format!(
            "{agent}: paused {what} {}; {} pending plan(s) dropped",
            pause.describe(),
            dropped.len()
        ))
    }

    async fn resume(&self, agent: &str, chat: Option<&str>) -> Result<String, OpError> {
        let target = match chat {
            Some(c) => Some(self.resolve_chat(agent, c).await?),
            None => None,
        };
        let updated = {
            let mut all = lock(&self.pauses);
            let p = all.entry(agent.to_string()).or_default();
            match &target {
                Some((id, _)) => {
                    p.chats.remove(&id.0);
                }
                None => *p = Pauses::default(),
            }
            p.clone()
        };
        if target.is_none() {
            // Resuming everything also lifts a daily LLM cap reached today.
            self.runtime.lift_budget(agent);
        }
        self.persist(agent, updated).await?;
        tracing::info!(
            event = "resumed",
            agent,
            chat = target.as_ref().map(|t| t.0.0),
            "owner resumed the agent"
        );
        Ok(match target {
            Some((id, title)) => format!("{agent}: chat {id} ({title}) resumed"),
            None => format!("{agent}: resumed in every chat"),
        })
    }

    async fn persist(&self, agent: &str, pauses: Pauses) -> Result<(), OpError> {
        self.runtime.set_paused(agent, pauses.for_runtime());
        let (dir, name) = (self.state.clone(), agent.to_string());
        tokio::task::spawn_blocking(move || save_pauses(&dir, &name, &pauses))
            .await
            .map_err(OpError::of)?
            .map_err(|e| OpError(format!("could not save the pause: {e}")))
    }

    fn clone_arc(&self) -> Result<Arc<Controller>, OpError> {
        self.me
            .upgrade()
            .ok_or_else(|| OpError::from("the daemon is stopping"))
    }

    /// Runs a command written in a chat and answers there.
    async fn answer(
        &self,
        agent: &str,
        chat: ChatId,
        reply_to: crate::core::model::MessageId,
        op: Result<Op, OpError>,
    ) {
        let result = match op {
            Ok(op) => self.execute(Some(agent), op).await,
            Err(e) => Err(e),
        };
        let body = match result {
            Ok(t) => t,
            Err(e) => format!("error: {e}"),
        };
        let mut text = format!("personad: {}", body.trim_end());
        if text.chars().count() > MAX_ANSWER_CHARS {
            text = text.chars().take(MAX_ANSWER_CHARS).collect::<String>() + "…";
        }
        let Some(seat) = self.seat(agent) else { return };
        let sent = seat
            .telegram
            .send_text(OutgoingText {
                chat,
                text,
                reply_to: Some(reply_to),
                idempotency_key: fastrand::i64(1..),
            })
            .await;
        if let Err(e) = sent {
            tracing::warn!(event = "owner_answer_failed", agent, chat = chat.0, error = %e, "could not answer an owner command");
        }
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

struct Gate(Arc<Controller>);

impl InboundGate for Gate {
    fn admit(
        &self,
        agent: &str,
        chat: &Chat,
        message: &Message,
        trigger: bool,
        _callout: bool,
    ) -> Admit {
        let ctl = &self.0;
        ctl.remember(agent, chat, message);
        let self_id = ctl.seat(agent).map(|s| s.telegram.self_id());
        let admin_chat = ctl.admin_chats.contains(&chat.id.0);
        if let Some(op) = parse_command(&message.text) {
            // Only the owner account (the agent's own account, from any device) commands,
            // and only in its Saved Messages or an admin chat: a member of an admin group
            // is not the owner.
            let place = Some(chat.id.0) == self_id || admin_chat;
            if message.outgoing && place {
                tracing::info!(
                    event = "owner_command",
                    agent,
                    chat = chat.id.0,
                    command = message.text.split_whitespace().next().unwrap_or(""),
                    "owner command"
                );
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let (ctl, agent, chat, id) =
                        (Arc::clone(ctl), agent.to_string(), chat.id, message.id);
                    rt.spawn(async move { ctl.answer(&agent, chat, id, op).await });
                }
                return Admit::Consumed;
            }
            tracing::info!(
                event = "owner_command_ignored",
                agent,
                chat = chat.id.0,
                "a command from someone other than the owner: ignored and not planned"
            );
            return Admit::NoTrigger;
        }
        let place = Some(chat.id.0) == self_id || admin_chat;
        if message.outgoing
            && place
            && let Some(replied) = message.reply_to
            && !message.text.trim_start().starts_with("personad:")
            && let Some(decision) = Decision::from_reply(&message.text)
        {
            // The owner answering a draft (the runtime checks the message answered is one; a
            // reply to anything else changes nothing). The message itself stays history.
            tracing::info!(
                event = "owner_draft_reply",
                agent,
                chat = chat.id.0,
                reply_to = replied.0,
                "owner replied to a message: checked against the waiting drafts"
            );
            ctl.runtime.decide_draft(
                agent,
                crate::core::scheduler::DraftRef::Reply {
                    chat: chat.id,
                    message: replied,
                },
                decision,
            );
        }
        if admin_chat && !message.outgoing {
            tracing::debug!(
                event = "admin_chat_message_ignored",
                agent,
                chat = chat.id.0,
                "admin chat: text from someone other than the owner is recorded, not answered"
            );
            return Admit::NoTrigger;
        }
        if trigger && ctl.is_paused(agent, chat.id) {
            tracing::debug!(
                event = "paused_message",
                agent,
                chat = chat.id.0,
                "paused: the message is recorded, not answered"
            );
            return Admit::NoTrigger;
        }
        Admit::Pass
    }
}

#[cfg(test)]
mod tests;
