//! Spending caps in the scheduler: the LLM layer reports each agent's spend of the (UTC) day
//! after every request; past 80% of a cap the owner is told once, at 100% the agent's LLM
//! tasks (planning, classifying, summaries, its schedule) wait for the next UTC day or the
//! owner's `/resume`, so messages stay unread. What was told and held is in the agent's state,
//! so a restart neither tells twice nor plans again. Part of the pure scheduler.

use super::*;
use crate::core::agent_state::BudgetMark;
use crate::core::budget::{DailyCap, Level, Spend};

/// Task kinds that call the LLM: held while the cap holds.
fn calls_llm(kind: TaskKind) -> bool {
    matches!(
        kind,
        TaskKind::Received | TaskKind::Classify | TaskKind::Summarize | TaskKind::Schedule
    )
}

/// The start of the UTC day after `now`'s.
fn next_utc_day(now: Timestamp) -> Timestamp {
    let date = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    date.tomorrow()
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map_or(now, |z| z.timestamp())
}

fn utc_day(now: Timestamp) -> jiff::civil::Date {
    now.to_zoned(jiff::tz::TimeZone::UTC).date()
}

/// One day's spend against caps: the agent's own and the daemon's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpendReport {
    /// The agent's spend today and its persona's cap.
    pub agent: (Spend, Option<DailyCap>),
    /// Every agent's spend today and the daemon's cap.
    pub daemon: (Spend, Option<DailyCap>),
}

impl Scheduler {
    /// The LLM layer's report of the day's spend after a request of `agent`.
    pub(crate) fn on_spend(&mut self, agent: &str, report: SpendReport, now: Timestamp) {
        if let (spend, Some(cap)) = report.agent {
            let detail = format!("{spend} of {cap}");
            self.budget_level(agent, cap.level(&spend), &detail, now);
        }
        if let (spend, Some(cap)) = report.daemon {
            let level = cap.level(&spend);
            if level > Level::Under {
                let detail = format!("all personas together: {spend} of the daemon's {cap}");
                let agents: Vec<String> = self.agents.iter().cloned().collect();
                for a in agents {
                    self.budget_level(&a, level, &detail, now);
                }
            }
        }
    }

    /// Tells the owner (once a day per level) and holds planning at the cap.
    fn budget_level(&mut self, agent: &str, level: Level, detail: &str, now: Timestamp) {
        if level == Level::Under || !self.agents.contains(agent) {
            return;
        }
        let day = utc_day(now);
        let mark = self
            .safety
            .state(agent)
            .and_then(|s| s.budget)
            .filter(|m| m.day == day)
            .unwrap_or(BudgetMark {
                day,
                told: Level::Under,
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
        self.safety.set_budget(
            agent,
            BudgetMark {
                day,
                told: level,
                lifted: mark.lifted,
            },
        );
        self.effects.push(Effect::SaveAgentState(agent.to_string()));
    }

    /// Until when the cap holds this task back (an LLM task of an agent whose cap was
    /// reached today and not lifted).
    pub(super) fn held_by_budget(
        &self,
        agent: &str,
        task: &Task,
        now: Timestamp,
    ) -> Option<Timestamp> {
        if !calls_llm(task.kind()) {
            return None;
        }
        let mark = self.safety.state(agent)?.budget?;
        (mark.day == utc_day(now) && mark.told == Level::Reached && !mark.lifted)
            .then(|| next_utc_day(now))
    }

    /// The owner's `/resume`: a reached cap no longer holds today.
    pub(crate) fn lift_budget(&mut self, agent: &str, now: Timestamp) {
        let Some(mut mark) = self.safety.state(agent).and_then(|s| s.budget) else {
            return;
        };
        if mark.day != utc_day(now) || mark.told != Level::Reached || mark.lifted {
            return;
        }
        mark.lifted = true;
        info!(event = "budget_lifted", agent = %agent, "the owner lifted today's LLM budget: planning resumes");
        self.notable(agent, None, "budget_lifted", String::new());
        self.safety.set_budget(agent, mark);
        self.effects.push(Effect::SaveAgentState(agent.to_string()));
        for key in keys_of(&self.graphs, agent) {
            self.armed.remove(&key);
            self.reschedule(&key, now);
        }
    }

    /// Whether anything holds `task` back (the cap, sleep), and until when.
    pub(super) fn held(&self, graph: &TaskGraph, task: &Task, now: Timestamp) -> Option<Timestamp> {
        self.held_by_budget(&graph.agent, task, now)
            .or_else(|| self.held_by_sleep(graph, task, now))
    }
}
