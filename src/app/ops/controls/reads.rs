//! Structured reads for the web console: the same sources `/status`, `/plans` and `/drafts`
//! read (the runtime, which holds plans and what the owner set, and each agent's Telegram seat
//! for history), as data instead of text. Part of [`Controller`]; it changes
//! nothing: every action goes through [`Controller::execute`].

use crate::app::ops::OpError;
use crate::app::ops::controls::Controller;
use crate::core::agent_state::Pause;
use crate::core::graph::{TaskGraph, TaskSpec, TaskStatus};
use crate::core::model::{Chat, ChatId, Message};

/// One running persona as the console shows it.
#[derive(Debug, Clone)]
pub(crate) struct AgentView {
    pub name: String,
    /// The pause of all its chats, when it holds.
    pub paused: Option<Pause>,
    /// Chats paused one by one.
    pub paused_chats: usize,
    /// The persona's group trigger mode (its heading).
    pub mode: String,
    /// Today's LLM use and cost, as `/status` words it.
    pub today: Option<String>,
    /// Conversations with a plan under way.
    pub plans: usize,
    /// Where the persona stands now, as `/status` words it ([`Controller::presence_line`]).
    pub now: String,
    /// Its time zone.
    pub zone: jiff::tz::TimeZone,
    /// When it wakes, if it is asleep.
    pub asleep_until: Option<jiff::Timestamp>,
    /// Its spending caps and today's spend against them.
    pub caps: Vec<super::health::CapView>,
    /// The breaker, disabled chats.
    pub warnings: Vec<String>,
}

/// A draft task not done yet, as the runtime holds it.
#[derive(Debug, Clone)]
pub(crate) struct DraftView {
    pub agent: String,
    pub id: String,
    pub chat: ChatId,
    pub title: String,
    pub text: String,
    /// The texts the plan would send (what the owner's edit replaces), one per line.
    pub sends: String,
    /// Posted to the owner and waiting until this instant (`None`: being posted).
    pub waits_until: Option<jiff::Timestamp>,
    /// The owner has answered; the runtime is applying it.
    pub decided: bool,
    /// What happens when it is still waiting then: the plan is carried out as drafted.
    pub sends_on_timeout: bool,
}

impl Controller {
    /// Every running persona.
    pub(crate) async fn agent_views(&self) -> Vec<AgentView> {
        let graphs = self.graphs().await;
        let now = self.clock.now();
        self.agents()
            .into_iter()
            .map(|name| {
                let pauses = self
                    .runtime()
                    .agent_state(&name)
                    .map(|s| s.pauses)
                    .unwrap_or_default();
                let paused = pauses.all.clone().filter(|p| p.active(now));
                let paused_chats = pauses.chats.values().filter(|p| p.active(now)).count();
                let mode = self
                    .runtime()
                    .persona(&name)
                    .map_or_else(String::new, |p| p.group.mode.to_string());
                let today = self.usage_line(&name);
                let plans = graphs.iter().filter(|g| g.agent == name).count();
                let line = self.presence_line(&name, now);
                AgentView {
                    zone: self.zone(&name),
                    asleep_until: self.asleep_until(&name, now),
                    caps: self.caps(&name, now),
                    warnings: self.warnings(&name, now),
                    name,
                    paused,
                    paused_chats,
                    mode,
                    today,
                    plans,
                    now: line,
                }
            })
            .collect()
    }

    /// Where `agent` stands at `now`, one line in its persona's zone (`Sleep (asleep until
    /// 06:45 CET)`, `Lunch (responsiveness 50, until 13:00 CET)`, `always available`): what
    /// `/status`, `ctl status` and the console's personas page show, from the schedule the
    /// runtime holds.
    pub(crate) fn presence_line(&self, agent: &str, now: jiff::Timestamp) -> String {
        self.runtime()
            .presence(agent)
            .map_or_else(|| "always available".to_string(), |p| p.line(now))
    }

    /// The graphs (plans under way) of `agent`.
    pub(crate) async fn plans_of(&self, agent: &str) -> Vec<TaskGraph> {
        self.plans_in(agent, None).await
    }

    /// The chats the controller has seen for `agent` (id, title), newest knowledge kept.
    pub(crate) fn known_chats(&self, agent: &str) -> Vec<(ChatId, String)> {
        self.roster
            .chats(agent)
            .into_iter()
            .map(|(id, c)| (ChatId(id), c.title))
            .collect()
    }

    /// The chat and its last `limit` messages, read through the agent's Telegram.
    pub(crate) async fn history(
        &self,
        agent: &str,
        chat: ChatId,
        limit: usize,
    ) -> Result<(Chat, Vec<Message>), OpError> {
        let seat = self.seat(agent).ok_or(OpError::NotRunning)?;
        let info = seat.telegram.chat(chat).await?;
        let messages = seat.telegram.fetch_history(chat, limit).await?;
        Ok((info, messages))
    }

    /// The file of a message's media (a voice note the console plays), at most `max_bytes`.
    pub(crate) async fn media_bytes(
        &self,
        agent: &str,
        chat: ChatId,
        message: crate::core::model::MessageId,
        max_bytes: u64,
    ) -> Result<Vec<u8>, OpError> {
        let seat = self.seat(agent).ok_or(OpError::NotRunning)?;
        Ok(seat
            .telegram
            .download_media(chat, message, max_bytes)
            .await?)
    }

    /// Every draft task not done yet (`/drafts`, `ctl drafts` and the console read this).
    pub(crate) async fn draft_views(&self) -> Vec<DraftView> {
        let mut out = Vec::new();
        for g in self.graphs().await {
            for t in g.tasks.iter().filter(|t| t.status != TaskStatus::Done) {
                if let TaskSpec::Draft {
                    draft,
                    posted,
                    decision,
                    on_timeout,
                    ..
                } = &t.spec
                {
                    out.push(DraftView {
                        agent: g.agent.clone(),
                        id: t.id.clone(),
                        chat: g.chat.id,
                        title: g.chat.title.clone(),
                        text: draft.clone(),
                        sends: g
                            .tasks
                            .iter()
                            .filter(|s| s.status == TaskStatus::Pending)
                            .filter_map(|s| match &s.spec {
                                TaskSpec::Send { text, .. } => Some(text.as_str()),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n"),
                        waits_until: posted.as_ref().and(t.not_before),
                        decided: decision.is_some(),
                        sends_on_timeout: *on_timeout == crate::core::approval::OnTimeout::Send,
                    });
                }
            }
        }
        out
    }
}
