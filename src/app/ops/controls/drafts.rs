//! Drafts for the owner: `/drafts` and `ctl drafts` list the plans waiting for approval (as
//! the runtime holds them), `ctl approve` / `ctl reject` (and `/approve`, `/reject`) hand the
//! owner's word to the runtime, which applies it once; `/approve-mode` and `ctl approve-mode`
//! set a chat's draft mode. Part of [`Controller`]; it never edits a graph itself.

use crate::app::ops::OpError;
use crate::app::ops::controls::Controller;
use crate::core::approval::{self, ApprovalMode, Decision};
use crate::core::graph::{TaskGraph, TaskSpec, TaskStatus};
use crate::core::model::ChatId;

/// A waiting draft as the runtime holds it.
struct Found {
    agent: String,
    id: String,
    title: String,
    chat: ChatId,
}

impl Controller {
    /// Every draft that waits, of one agent or all.
    pub(super) async fn drafts(&self, agent: Option<&str>) -> Result<String, OpError> {
        let agent = agent.map(|a| self.pick_agent(Some(a))).transpose()?;
        let mut text = String::new();
        let tz_of = |a: &str| {
            self.runtime()
                .persona(a)
                .and_then(|p| p.timezone.clone())
                .unwrap_or(jiff::tz::TimeZone::UTC)
        };
        for d in self.draft_views().await {
            if agent.as_ref().is_some_and(|a| *a != d.agent) {
                continue;
            }
            let state = match d.waits_until {
                Some(until) => format!(
                    "waits until {}",
                    until
                        .to_zoned(tz_of(&d.agent))
                        .strftime("%Y-%m-%d %H:%M %Z")
                ),
                None => "not posted to the owner yet".into(),
            };
            text.push_str(&format!(
                "{} {} ({state}):\n  {}\n",
                d.agent,
                d.id,
                d.text.replace('\n', "\n  ")
            ));
        }
        if text.is_empty() {
            text = "no draft waits".into();
        }
        Ok(text)
    }

    /// The owner's word on the draft `sel`, checked against the runtime's plans first so the
    /// answer says what happens.
    pub(super) async fn decide(
        &self,
        agent: Option<&str>,
        sel: &str,
        decision: Decision,
    ) -> Result<String, OpError> {
        let agent = agent.map(|a| self.pick_agent(Some(a))).transpose()?;
        let graphs = self.graphs().await;
        let found: Vec<Found> = graphs
            .iter()
            .filter(|g| agent.as_ref().is_none_or(|a| *a == g.agent))
            .flat_map(|g| waiting(g, sel))
            .collect();
        let f = match found.as_slice() {
            [one] => one,
            [] => {
                return Err(OpError::refused(format!(
                    "no draft {sel:?} waits (see `personad ctl drafts`)"
                )));
            }
            many => {
                return Err(OpError::refused(format!(
                    "{sel:?} matches several drafts: {}; give more of the id",
                    many.iter()
                        .map(|f| f.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        let what = match &decision {
            Decision::Send => "approved: its plan is carried out".to_string(),
            Decision::Edit { text } => format!("approved with your text: sending {text:?}"),
            Decision::Drop => "rejected: nothing is sent".to_string(),
            Decision::Later => "kept for later".to_string(),
        };
        tracing::info!(event = "owner_draft_decision", agent = %f.agent, chat = f.chat.0, draft = %f.id, decision = decision.verb(), "owner decided on a draft from the shell");
        let later = matches!(decision, Decision::Later);
        self.runtime().decide_draft(
            &f.agent,
            crate::core::scheduler::DraftRef::Id(f.id.clone()),
            decision,
        );
        // The answer comes once the decision is on disk (the draft no longer waits in the
        // chat's graph file), so a crash right after it cannot take it back.
        let key = crate::core::graph::ConversationKey::new(f.agent.clone(), f.chat);
        // What is on disk: the journal over the graph file (the plan moves on, so its
        // file may not be written for a while).
        let store = crate::adapters::store::GraphStore::new(self.state.clone());
        let id = f.id.clone();
        let durable = later
            || self
                .until(DURABLE_WITHIN, move || {
                    // Gone (the plan was dropped or done) or no longer waiting.
                    store
                        .read_graph(&key)
                        .is_ok_and(|graph| graph.is_none_or(|g| waiting(&g, &id).is_empty()))
                })
                .await;
        let note = if durable {
            ""
        } else {
            " (not on disk yet: see `personad ctl drafts`)"
        };
        Ok(format!(
            "{}: draft {} for {} ({}) {what}{note}",
            f.agent, f.id, f.title, f.chat
        ))
    }

    /// Sets (or with `default`, clears) a chat's draft mode.
    pub(super) async fn approval_mode(
        &self,
        agent: Option<&str>,
        chat: &str,
        mode: &str,
    ) -> Result<String, OpError> {
        let agent = self.pick_agent(agent)?;
        let mode = match mode.trim().to_ascii_lowercase().as_str() {
            "default" | "persona" | "clear" => None,
            other => Some(
                other
                    .parse::<ApprovalMode>()
                    .map_err(|e| OpError::refused(e.to_string()))?,
            ),
        };
        let (id, title) = self.resolve_chat(&agent, chat).await?;
        let request = crate::core::scheduler::OwnerRequest::ApprovalMode { chat: id, mode };
        self.done(self.runtime().owner(&agent, request).await)?;
        tracing::info!(event = "approval_mode_set", agent = %agent, chat = id.0, mode = mode.map_or("default", ApprovalMode::as_str), "owner set a chat's draft mode");
        Ok(match mode {
            Some(m) => format!("{title} ({id}): draft mode {m}"),
            None => format!("{title} ({id}): draft mode as the persona says"),
        })
    }
}

/// How long `ctl approve`/`reject` wait for the decision to be on disk.
const DURABLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

impl Controller {
    /// Polls `done` (a blocking look at the disk) every 50 ms for at most `limit`.
    async fn until(
        &self,
        limit: std::time::Duration,
        done: impl Fn() -> bool + Send + Sync + Clone + 'static,
    ) -> bool {
        let start = std::time::Instant::now();
        loop {
            let look = done.clone();
            if tokio::task::spawn_blocking(look).await.unwrap_or(false) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// The drafts of `g` that wait and that `sel` names.
fn waiting(g: &TaskGraph, sel: &str) -> Vec<Found> {
    g.tasks
        .iter()
        .filter(|t| {
            t.status != TaskStatus::Done
                && matches!(t.spec, TaskSpec::Draft { decision: None, .. })
                && approval::matches_id(&t.id, sel)
        })
        .map(|t| Found {
            agent: g.agent.clone(),
            id: t.id.clone(),
            title: g.chat.title.clone(),
            chat: g.chat.id,
        })
        .collect()
}
