//! Spending caps in the scheduler: the LLM layer reports each agent's spend of the (UTC) day
//! after every request; past 80% of a cap the owner is told once, at 100% the agent's LLM
//! tasks (planning, classifying, summaries, its schedule) wait for the next UTC day or the
//! owner's `/resume`, so messages stay unread. Each cap (the persona's, the daemon's) has its
//! own mark in the agent's state, so a restart neither tells twice nor plans again, and a cap
//! the operator changed starts over. Part of the pure scheduler.

use jiff::Timestamp;
use tracing::{error, info, warn};

use super::{Effect, Scheduler, keys_of};
use crate::core::agent_state::{BudgetMark, CapSource};
use crate::core::budget::{DailyCap, Level, Spend};
use crate::core::graph::{Task, TaskGraph, TaskKind};

/// Task kinds that call the LLM: held while a cap holds.
fn calls_llm(kind: TaskKind) -> bool {
    matches!(
        kind,
        TaskKind::Received | TaskKind::Classify | TaskKind::Summarize | TaskKind::Schedule
    )
}

/// The start of the UTC day after `now`'s.
fn next_utc_day(now: Timestamp) -> Timestamp {
    utc_day(now)
        .tomorrow()
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map_or(now, |z| z.timestamp())
}

fn utc_day(now: Timestamp) -> jiff::civil::Date {
    now.to_zoned(jiff::tz::TimeZone::UTC).date()
}

/// One day's spend against the caps: the agent's own and the daemon's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpendReport {
    /// The (UTC) day of the spend: a report of another day than now's is stale.
    pub day: jiff::civil::Date,
    /// The agent's spend that day and its persona's cap.
    pub agent: (Spend, Option<DailyCap>),
    /// Every agent's spend that day and the daemon's cap.
    pub daemon: (Spend, Option<DailyCap>),
}

impl Scheduler {
    /// The LLM layer's report of the day's spend after a request of `agent`.
    pub(crate) fn on_spend(&mut self, agent: &str, report: SpendReport, now: Timestamp) {
        if report.day != utc_day(now) {
            // Yesterday's last request, seen after midnight: today starts at zero.
            return;
        }
        if let (spend, Some(cap)) = report.agent {
            let detail = format!("{spend} of {cap}");
            self.budget_level(
                agent,
                CapSource::Persona,
                &cap,
                cap.level(&spend),
                &detail,
                now,
            );
        }
        if let (spend, Some(cap)) = report.daemon {
            let level = cap.level(&spend);
            if level > Level::Under {
                let detail = format!("all personas together: {spend} of the daemon's {cap}");
                let agents: Vec<String> = self.agents.iter().cloned().collect();
                for a in agents {
                    self.budget_level(&a, CapSource::Daemon, &cap, level, &detail, now);
                }
            }
        }
    }

    /// Tells the owner (once a day per cap and level) and holds planning at the cap.
    fn budget_level(
        &mut self,
        agent: &str,
        source: CapSource,
        cap: &DailyCap,
        level: Level,
        detail: &str,
        now: Timestamp,
    ) {
        if level == Level::Under || !self.agents.contains(agent) {
            return;
        }
        let (day, cap) = (utc_day(now), cap.to_string());
        let mark = self
            .safety
            .budget_mut(agent)
            .get(&source)
            .filter(|m| m.day == day && m.cap == cap)
            .cloned()
            .unwrap_or(BudgetMark {
                day,
                told: Level::Under,
                cap: cap.clone(),
                lifted: false,
            });
        if level <= mark.told {
            return;
        }
        let until = next_utc_day(now);
        match level {
            Level::Warn => {
                warn!(event = "budget_warning", agent = %agent, spend = %detail, "80% of the daily LLM budget used");
                self.notable(agent, None, "budget_warning", detail.to_string());
                self.notify_owner(
                    agent,
                    &format!(
                        "personad: {agent} has used 80% of its daily LLM budget ({detail}); at 100% it stops planning until {until}"
                    ),
                    now,
                );
            }
            Level::Reached if !mark.lifted => {
                error!(event = "budget_reached", agent = %agent, spend = %detail, until = %until, "daily LLM budget reached: planning stops until the next UTC day or /resume; messages stay unread");
                self.notable(agent, None, "budget_reached", detail.to_string());
                self.notify_owner(
                    agent,
                    &format!(
                        "personad: {agent} reached its daily LLM budget ({detail}): it stops planning until {until}; messages stay unread. /resume lifts the cap for today."
                    ),
                    now,
                );
            }
            _ => {}
        }
        self.safety.budget_mut(agent).insert(
            source,
            BudgetMark {
                told: level,
                ..mark
            },
        );
        self.effects.push(Effect::SaveAgentState(agent.to_string()));
    }

    /// Until when a cap holds this task back (an LLM task of an agent whose cap was reached
    /// today and not lifted).
    pub(super) fn held_by_budget(
        &self,
        agent: &str,
        task: &Task,
        now: Timestamp,
    ) -> Option<Timestamp> {
        if !calls_llm(task.kind()) {
            return None;
        }
        let day = utc_day(now);
        self.safety
            .state(agent)?
            .budget_holds(day)
            .then(|| next_utc_day(now))
    }

    /// The owner's `/resume`: a cap reached today no longer holds today.
    pub(crate) fn lift_budget(&mut self, agent: &str, now: Timestamp) {
        let day = utc_day(now);
        let mut lifted = false;
        for mark in self.safety.budget_mut(agent).values_mut() {
            if mark.holds(day) {
                mark.lifted = true;
                lifted = true;
            }
        }
        if !lifted {
            return;
        }
        info!(event = "budget_lifted", agent = %agent, "the owner lifted today's LLM budget: planning resumes");
        self.notable(agent, None, "budget_lifted", String::new());
        self.effects.push(Effect::SaveAgentState(agent.to_string()));
        self.wake_agent(agent, now);
    }

    /// The caps as configured now (at start, after a reload): a mark told against another
    /// cap, or a cap that is gone, starts over, so a raised cap releases a hold at once (the
    /// next request's report decides again).
    pub(crate) fn check_caps(
        &mut self,
        agent: &str,
        persona: Option<DailyCap>,
        daemon: Option<DailyCap>,
        now: Timestamp,
    ) {
        let day = utc_day(now);
        let current = |source: CapSource| match source {
            CapSource::Persona => persona.map(|c| c.to_string()),
            CapSource::Daemon => daemon.map(|c| c.to_string()),
        };
        let marks = self.safety.budget_mut(agent);
        let before = marks.len();
        let held = marks.values().any(|m| m.holds(day));
        marks.retain(|source, m| m.day == day && current(*source).as_deref() == Some(&m.cap));
        let (after, still) = (marks.len(), marks.values().any(|m| m.holds(day)));
        if after != before {
            self.effects.push(Effect::SaveAgentState(agent.to_string()));
        }
        if held && !still {
            info!(event = "budget_changed", agent = %agent, "the daily LLM cap changed: planning resumes");
            self.wake_agent(agent, now);
        }
    }

    /// Looks at every conversation of `agent` again now (a hold just ended).
    pub(super) fn wake_agent(&mut self, agent: &str, now: Timestamp) {
        for key in keys_of(&self.graphs, agent) {
            self.armed.remove(&key);
            self.reschedule(&key, now);
        }
    }

    /// Whether anything holds `task` back (a pause, a cap, sleep), and until when.
    pub(super) fn held(&self, graph: &TaskGraph, task: &Task, now: Timestamp) -> Option<Timestamp> {
        self.held_by_pause(graph, now)
            .or_else(|| self.held_by_budget(&graph.agent, task, now))
            .or_else(|| self.held_by_sleep(graph, task, now))
            .or_else(|| self.held_by_draft_gap(graph, task, now))
    }
}
