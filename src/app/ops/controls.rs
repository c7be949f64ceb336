//! Owner controls: the operations an account's owner can ask for (`/status`, `/pause`,
//! `/resume`, `/forget`, `/plans`, `/mode`, drafts, memory, schedule, `/stop`, `/help`),
//! whether written in the agent's Saved Messages (or an admin chat), sent through
//! `personad ctl` or clicked in the console: one [`Controller::execute`] for all of them. The
//! controller is a thin operator: it turns a command into runtime requests (the runtime owns
//! pauses, modes, overrides and plans, and answers questions about them) and renders the
//! answer; a command written in a chat is answered there by a `send` task of that chat's
//! graph. Built once with its admission step and its [`Ingress`] by [`Controller::build`];
//! `ctl` and the console call it.
//!
//! - `commands`: [`Op`], the `/help` text and the command parser;
//! - `roster`: the running agents' seats and the chats known of each (`chat_index`, kept
//!   across restarts);
//! - `gate`: the owner's step of the admission chain;
//! - `answers`: the command queue carried out and answered;
//! - `pauses`, `drafts`, `views`, `reads`, `say`: the operations by concern;
//! - `health`: what the console shows of a persona beyond `/status` (caps, warnings, chats,
//!   schedule, memory), as data.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::store::StateDir;
use crate::adapters::store::facts::FileFacts;
use crate::app::ops::OpError;
use crate::core::approval::{ApprovalMode, Decision};
use crate::core::graph::TaskGraph;
use crate::core::model::ChatId;
use crate::core::scheduler::{OwnerReply, OwnerRequest};
use crate::ingress::{Groups, Ingress};
use crate::ports::clock::SharedClock;
use crate::runtime::RuntimeHandle;

mod answers;
mod chat_index;
mod commands;
mod drafts;
mod gate;
mod health;
mod pauses;
mod reads;
mod roster;
mod say;
mod views;

pub(crate) use chat_index::ChatEntry;
pub use chat_index::ChatIndex;
pub use commands::Op;
pub(crate) use commands::parse_duration;
pub use gate::Commands;
pub(crate) use health::ScheduleView;
pub(crate) use reads::{AgentView, DraftView};
pub use roster::{Roster, Seat, SimSeat};
pub(crate) use say::MAX_WAIT_SECS as SAY_MAX_WAIT_SECS;

/// The answer to `/stop`.
const STOPPING: &str = "stopping: tasks in flight may finish, then the daemon exits";

/// What the daemon does for `/stop` and `reload`.
pub struct Hooks {
    pub stop: Box<dyn Fn(&str) + Send + Sync>,
    pub reload: Box<dyn Fn() + Send + Sync>,
}

/// What the controller is built from.
pub struct ControlsConfig {
    pub state: StateDir,
    pub clock: SharedClock,
    /// Chats besides Saved Messages where the owner may command.
    pub admin_chats: Vec<i64>,
    pub hooks: Hooks,
    /// LLM usage for `/status` and the console (none: not tracked).
    pub usage: Option<Arc<UsageMeter>>,
    /// The process's one long-term memory store (`/memory`, `/forget-fact`).
    pub facts: Arc<FileFacts>,
    /// The chats each persona has known (none: kept in memory only).
    pub chats: Option<Arc<ChatIndex>>,
    /// Which agents this process runs (`shard 0/2`, `agents A,B`) for `status`; none: all.
    pub selection: Option<String>,
}

/// Carries out owner operations for every running agent.
pub struct Controller {
    state: StateDir,
    ingress: Ingress,
    clock: SharedClock,
    hooks: Hooks,
    usage: Option<Arc<UsageMeter>>,
    facts: Arc<FileFacts>,
    roster: Arc<Roster>,
    /// Which agents this process runs (`run --shard`, `--agent`), for `status`; none: all.
    selection: Option<String>,
}

impl Controller {
    /// The controller over `runtime`, with the admission chain it sits in (its own owner gate,
    /// then the group gates of `groups`) and the queue of commands its gate accepts, which
    /// [`Controller::serve`] carries out.
    pub fn build(
        config: ControlsConfig,
        runtime: RuntimeHandle,
        groups: Arc<Groups>,
    ) -> (Arc<Controller>, Ingress, Commands) {
        let roster = Roster::new(config.chats.unwrap_or_else(ChatIndex::in_memory));
        let (tx, rx) = mpsc::unbounded_channel();
        let gate = gate::OwnerGate {
            roster: Arc::clone(&roster),
            runtime: runtime.clone(),
            clock: Arc::clone(&config.clock),
            admin_chats: config.admin_chats,
            commands: tx,
        };
        let ingress = Ingress::new(runtime, Some(Arc::new(gate)), groups);
        let controller = Arc::new(Controller {
            state: config.state,
            ingress: ingress.clone(),
            clock: config.clock,
            hooks: config.hooks,
            usage: config.usage,
            facts: config.facts,
            roster,
            selection: config.selection,
        });
        (controller, ingress, rx)
    }

    fn runtime(&self) -> &RuntimeHandle {
        self.ingress.runtime()
    }

    /// Makes an agent known (at start and when hot reload starts one).
    pub fn add_agent(&self, agent: &str, seat: Seat) {
        self.roster.add(agent, seat);
    }

    pub(crate) fn remove_agent(&self, agent: &str) {
        self.roster.remove(agent);
    }

    pub fn agents(&self) -> Vec<String> {
        self.roster.agents()
    }

    /// Whether the agent's chat is paused now (as the runtime holds its pauses).
    pub fn is_paused(&self, agent: &str, chat: ChatId) -> bool {
        self.runtime().is_paused(agent, chat, self.clock.now())
    }

    /// The runtime carried the request out (else the agent is not running).
    fn done(&self, reply: Option<OwnerReply>) -> Result<(), OpError> {
        match reply {
            Some(OwnerReply::Done { .. }) => Ok(()),
            _ => Err(OpError::NotRunning),
        }
    }

    /// Today's usage line of `agent`, when usage is tracked.
    fn usage_line(&self, agent: &str) -> Option<String> {
        self.usage.as_ref().and_then(|u| u.today_line(agent))
    }

    fn seat(&self, agent: &str) -> Option<Seat> {
        self.roster.seat(agent)
    }

    /// The running agent an operation is about: the one named (any case), or the only one.
    fn pick_agent(&self, agent: Option<&str>) -> Result<String, OpError> {
        let agents = self.roster.agents();
        match agent {
            Some(name) => agents
                .iter()
                .find(|k| k.eq_ignore_ascii_case(name.trim()))
                .cloned()
                .ok_or_else(|| {
                    OpError::refused(format!(
                        "no running agent named {name:?} (running: {})",
                        agents.join(", ")
                    ))
                }),
            None if agents.len() == 1 => Ok(agents.into_iter().next().unwrap_or_default()),
            None => Err(OpError::refused(format!(
                "say which agent (--agent NAME); running: {}",
                agents.join(", ")
            ))),
        }
    }

    /// The plans under way of every running agent, as the runtime holds them.
    async fn graphs(&self) -> Vec<TaskGraph> {
        let mut out = Vec::new();
        for agent in self.roster.agents() {
            out.extend(self.plans_in(&agent, None).await);
        }
        out
    }

    /// The plans under way of `agent` (in `chat`, or every chat), as the runtime holds them.
    async fn plans_in(&self, agent: &str, chat: Option<ChatId>) -> Vec<TaskGraph> {
        match self
            .runtime()
            .owner(agent, OwnerRequest::Plans { chat })
            .await
        {
            Some(OwnerReply::Plans(plans)) => plans,
            _ => Vec::new(),
        }
    }

    /// Finds a chat by id, `me`, @username or title substring.
    async fn resolve_chat(&self, agent: &str, sel: &str) -> Result<(ChatId, String), OpError> {
        let sel = sel.trim();
        if sel.eq_ignore_ascii_case("me") || sel.eq_ignore_ascii_case("saved") {
            let id = self.roster.self_id(agent).unwrap_or(0);
            return Ok((ChatId(id), "Saved Messages".into()));
        }
        let mut known = self.roster.chats(agent);
        for g in self.plans_in(agent, None).await {
            known.entry(g.chat.id.0).or_insert(roster::KnownChat {
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
            [] => Err(OpError::refused(format!(
                "no chat of {agent} matches {sel:?}"
            ))),
            many => Err(OpError::refused(format!(
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
            Op::Help => Ok(commands::HELP.to_string()),
            Op::Status => self.status(agent).await,
            Op::WaitQuiet {
                wait_secs,
                horizon_secs,
            } => self.wait_quiet(wait_secs, horizon_secs).await,
            Op::Plans { chat } => self.plans(agent, chat.as_deref()).await,
            Op::Reload => {
                (self.hooks.reload)();
                Ok("reloading personas and role prompts".into())
            }
            Op::Stop => {
                (self.hooks.stop)("owner asked to stop");
                Ok(STOPPING.into())
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
                        OpError::refused(format!(
                            "unknown mode {mode:?}: strict, smart or talkative (a group's trigger), or off, new-contacts, groups or all (draft mode)"
                        ))
                    })?;
                let agent = self.pick_agent(agent)?;
                let (id, title) = self.resolve_chat(&agent, &chat).await?;
                // Kept in the agent's state by the runtime (so it survives restarts); the
                // group gate reads it from there at the next message.
                let request = OwnerRequest::GroupMode {
                    chat: id,
                    mode: Some(mode),
                };
                self.done(self.runtime().owner(&agent, request).await)?;
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
                let had = matches!(
                    self.runtime().owner(&agent, OwnerRequest::Forget { chat: id }).await,
                    Some(OwnerReply::Done { dropped, .. }) if !dropped.is_empty()
                );
                Ok(if had {
                    format!("{agent}: dropped the plan of chat {id} ({title})")
                } else {
                    format!("{agent}: chat {id} ({title}) had no plan")
                })
            }
            Op::Memory { who } => {
                let agent = self.pick_agent(agent)?;
                let facts = Arc::clone(&self.facts);
                tokio::task::spawn_blocking(move || {
                    crate::app::memory_report::report(facts.as_ref(), &agent, who.as_deref())
                })
                .await?
                .map_err(OpError::from)
            }
            Op::Schedule { day } => {
                let agent = self.pick_agent(agent)?;
                let now = self.clock.now();
                crate::app::presence_report::for_owner(&self.state, self.runtime(), agent, day, now)
                    .await
            }
            Op::ForgetFact { id } => {
                let agent = self.pick_agent(agent)?;
                let facts = Arc::clone(&self.facts);
                let now = self.clock.now();
                tokio::task::spawn_blocking(move || {
                    crate::app::memory_report::forget_fact(facts.as_ref(), &agent, &id, now)
                })
                .await?
                .map_err(OpError::from)?
                .map_err(|e| OpError::refused(e.to_string()))
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
                let slowest = self
                    .usage
                    .as_ref()
                    .and_then(|u| u.slowest_recent_plan(&agent));
                let wait = say::wait_for(wait_secs, slowest);
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
}

/// `-` for nothing, else the items joined.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests;
