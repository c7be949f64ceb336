//! What the owner reads: `/status` (agents, each persona's activity, pauses, breaker,
//! disabled chats, LLM usage) and `/plans` (pending tasks, with what each will do, as the
//! runtime holds them). Part of [`Controller`]; it reads, never changes anything.

use crate::app::ops::OpError;
use crate::app::ops::controls::{Controller, list};
use crate::core::graph::TaskStatus;

impl Controller {
    /// `ctl wait-quiet`: waits (on the project clock, at most `wait_secs`, capped at 50)
    /// until the runtime is quiet with nothing due within `horizon_secs`, then says what
    /// waits and until when.
    pub(super) async fn wait_quiet(
        &self,
        wait_secs: u64,
        horizon_secs: u64,
    ) -> Result<String, OpError> {
        let wait = std::time::Duration::from_secs(wait_secs.min(50));
        let horizon = std::time::Duration::from_secs(horizon_secs);
        let runtime = self.runtime().clone();
        let clock = std::sync::Arc::clone(&self.clock);
        let quiet = runtime.wait_quiet(horizon, clock.as_ref());
        let st = tokio::select! {
            st = quiet => st,
            () = crate::ports::clock::pause(self.clock.as_ref(), wait) => {
                let st = self.runtime().status();
                return Err(OpError::refused(format!(
                    "not quiet after {} s: {} task(s) running, {} write(s) pending{}{}",
                    wait.as_secs(),
                    st.in_flight,
                    st.writes_pending,
                    if st.due { ", a task due now" } else { "" },
                    st.next_wake.map(|at| format!(", the next wake-up at {at}")).unwrap_or_default()
                )));
            }
        };
        if st.stopped {
            return Ok("stopped".into());
        }
        Ok(match st.next_wake {
            Some(at) => format!(
                "quiet: {} conversation(s) with plans; the next wake-up at {at}",
                st.graphs
            ),
            None => format!(
                "quiet: {} conversation(s) with plans; nothing due",
                st.graphs
            ),
        })
    }

    pub(super) async fn status(&self, agent: Option<&str>) -> Result<String, OpError> {
        let agents = match agent {
            Some(a) => vec![self.pick_agent(Some(a))?],
            None => self.agents(),
        };
        let st = self.runtime().status();
        let graphs = self.graphs().await;
        let now = self.clock.now();
        let mut text = format!(
            "{} agent(s) up, {} chat(s) with plans, {} task(s) in flight\n",
            st.agents, st.graphs, st.in_flight
        );
        if let Some(selection) = &self.selection {
            text.push_str(&format!(
                "this process runs {selection}: {}\n",
                self.agents().join(", ")
            ));
        }
        for a in agents {
            let plans: Vec<String> = graphs
                .iter()
                .filter(|g| g.agent == a)
                .map(|g| format!("{} ({})", g.chat.id, g.chat.title))
                .collect();
            // The agent's state as the runtime holds it (it is its only writer).
            let safety = self.runtime().agent_state(&a).unwrap_or_default();
            let pauses = &safety.pauses;
            let mut paused: Vec<String> = Vec::new();
            if let Some(p) = pauses.all.as_ref().filter(|p| p.active(now)) {
                paused.push(format!("all chats {}", p.describe()));
            }
            for (chat, p) in pauses.chats.iter().filter(|(_, p)| p.active(now)) {
                paused.push(format!("chat {chat} {}", p.describe()));
            }
            let breaker = safety
                .breaker
                .as_ref()
                .filter(|_| safety.breaker_active(now))
                .map_or("-".to_string(), |b| {
                    format!("until {} ({})", b.until, b.reason)
                });
            let disabled: Vec<String> = safety
                .disabled_chats
                .iter()
                .map(|(c, d)| format!("{c} ({})", d.reason))
                .collect();
            let usage = self
                .usage_line(&a)
                .unwrap_or_else(|| "not tracked yet".into());
            let activity = self.presence_line(&a, now);
            let budget = budget_line(
                self.runtime().persona(&a).and_then(|p| p.daily_budget),
                &safety.budget,
                now,
            );
            text.push_str(&format!(
                "{a}: now: {activity}; paused: {}; chats with plans: {}; breaker: {breaker}; disabled chats: {}; LLM usage today: {usage}{budget}\n",
                list(&paused),
                list(&plans),
                list(&disabled),
            ));
        }
        Ok(text)
    }

    pub(super) async fn plans(
        &self,
        agent: Option<&str>,
        chat: Option<&str>,
    ) -> Result<String, OpError> {
        let agent = match (agent, chat) {
            (None, None) if self.roster.agents().len() != 1 => None,
            _ => Some(self.pick_agent(agent)?),
        };
        let chat = match (&agent, chat) {
            (Some(a), Some(c)) => Some(self.resolve_chat(a, c).await?.0),
            _ => None,
        };
        let mut text = String::new();
        let graphs = match &agent {
            Some(a) => self.plans_in(a, chat).await,
            None => self.graphs().await,
        };
        for g in graphs {
            text.push_str(&format!(
                "{} chat {} ({}): {} open of {} task(s)\n",
                g.agent,
                g.chat.id,
                g.chat.title,
                g.open_tasks(),
                g.tasks.len()
            ));
            for t in g.tasks.iter().filter(|t| t.status != TaskStatus::Done) {
                let when = t
                    .not_before
                    .map(|nb| format!(" not before {}", nb.strftime("%H:%M:%S")))
                    .unwrap_or_default();
                let what = t.spec.summary();
                let what = if what.is_empty() {
                    what
                } else {
                    format!(": {what}")
                };
                text.push_str(&format!(
                    "  {} {}{when}{what}\n",
                    t.kind(),
                    t.status.as_str()
                ));
            }
        }
        if text.is_empty() {
            text.push_str("no pending plans\n");
        }
        Ok(text)
    }
}

/// The persona's cap and where today stands against each cap (what the owner was told, a
/// hold, a lift).
fn budget_line(
    cap: Option<crate::core::budget::DailyCap>,
    marks: &std::collections::BTreeMap<
        crate::core::agent_state::CapSource,
        crate::core::agent_state::BudgetMark,
    >,
    now: jiff::Timestamp,
) -> String {
    use crate::core::agent_state::CapSource;
    use crate::core::budget::Level;
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let mut parts: Vec<String> = cap.iter().map(|c| c.to_string()).collect();
    for (source, m) in marks.iter().filter(|(_, m)| m.day == today) {
        let whose = match source {
            CapSource::Persona => "its cap",
            CapSource::Daemon => "the daemon's cap",
        };
        let state = match (m.told, m.lifted) {
            (Level::Reached, true) => "reached, lifted by the owner",
            (Level::Reached, false) => "reached: planning waits for the next UTC day",
            (Level::Warn, _) => "past 80%",
            (Level::Under, _) => continue,
        };
        parts.push(format!("{whose} ({}) {state}", m.cap));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; budget: {}", parts.join(", "))
    }
}
