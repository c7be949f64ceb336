//! What the console shows of a persona beyond `/status`: its zone and clock, its spending
//! caps against the day's spend, its warnings (the breaker, disabled chats), the chats it has
//! known, a chat's group mode, its schedule today and tomorrow with its intents, and its
//! memory, all as data. The schedule and the memory are read by the same readers as `state
//! schedule` and `state memory` (`presence_report`, `memory_report`). Part of [`Controller`];
//! it changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::app::memory_report::MemoryView;
use crate::app::ops::OpError;
use crate::app::ops::controls::{ChatEntry, Controller};
use crate::app::presence_report::DayView;
use crate::core::agent_state::CapSource;
use crate::core::budget::Level;
use crate::core::model::ChatId;

/// One spending cap of a persona and where today (UTC) stands against it.
#[derive(Debug, Clone)]
pub(crate) struct CapView {
    /// `its cap` or `the daemon's cap`.
    pub whose: &'static str,
    pub cap: String,
    /// Today's spend that counts against it (the persona's, or every persona's).
    pub spent: String,
    /// Planning waits for the next UTC day or the owner's lift.
    pub holds: bool,
    /// Reached today and lifted by the owner.
    pub lifted: bool,
    /// Past 80% today.
    pub warned: bool,
}

/// A persona's schedule as the console shows it.
#[derive(Debug, Clone)]
pub(crate) struct ScheduleView {
    /// The persona keeps a `# Daily Schedule`.
    pub has_schedule: bool,
    pub days: Vec<DayView>,
    pub intents: Result<Vec<crate::core::intents::Intent>, Vec<String>>,
}

impl Controller {
    /// The runtime's notable events from now on (the console's incident log).
    pub(crate) fn observe_notables(
        &self,
    ) -> tokio::sync::mpsc::UnboundedReceiver<crate::runtime::NotableEvent> {
        self.runtime().observe_notables()
    }

    /// Now, on the daemon's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The persona's time zone (its `# Timezone`, else the host's; UTC when not running).
    pub(crate) fn zone(&self, agent: &str) -> TimeZone {
        self.runtime()
            .persona(agent)
            .map_or(TimeZone::UTC, |p| crate::runtime::driver::presence_zone(&p))
    }

    /// When the persona wakes, if it is asleep at `now`.
    pub(crate) fn asleep_until(&self, agent: &str, now: Timestamp) -> Option<Timestamp> {
        self.runtime()
            .presence(agent)
            .and_then(|p| p.standing(now).asleep_until)
    }

    /// The persona's caps and today's spend against them: its own `# Daily Budget`, and any
    /// cap (its own or the daemon's) that marked today.
    pub(crate) fn caps(&self, agent: &str, now: Timestamp) -> Vec<CapView> {
        let today = now.to_zoned(TimeZone::UTC).date();
        let state = self.runtime().agent_state(agent).unwrap_or_default();
        let (own, all) = self
            .usage
            .as_ref()
            .map(|u| u.spend_today(agent))
            .unwrap_or_default();
        let mut out = Vec::new();
        let persona_cap = self.runtime().persona(agent).and_then(|p| p.daily_budget);
        let marks = state.budget.iter().filter(|(_, m)| m.day == today);
        for (source, m) in marks {
            let (whose, spent) = match source {
                CapSource::Persona => ("its cap", own.to_string()),
                CapSource::Daemon => ("the daemon's cap", format!("all personas: {all}")),
            };
            out.push(CapView {
                whose,
                cap: m.cap.clone(),
                spent,
                holds: m.holds(today),
                lifted: m.lifted && m.told == Level::Reached,
                warned: m.told >= Level::Warn,
            });
        }
        if let Some(cap) = persona_cap
            && !out.iter().any(|c| c.whose == "its cap")
        {
            out.insert(
                0,
                CapView {
                    whose: "its cap",
                    cap: cap.to_string(),
                    spent: own.to_string(),
                    holds: false,
                    lifted: false,
                    warned: false,
                },
            );
        }
        out
    }

    /// The persona's own daily cap (`# Daily Budget`).
    pub(crate) fn daily_cap(&self, agent: &str) -> Option<crate::core::budget::DailyCap> {
        self.runtime().persona(agent).and_then(|p| p.daily_budget)
    }

    /// What the owner should know of the persona now: the breaker, disabled chats.
    pub(crate) fn warnings(&self, agent: &str, now: Timestamp) -> Vec<String> {
        let state = self.runtime().agent_state(agent).unwrap_or_default();
        let mut out = Vec::new();
        if let Some(b) = state.breaker.as_ref().filter(|_| state.breaker_active(now)) {
            out.push(format!(
                "the breaker holds every send until {} UTC ({})",
                b.until.strftime("%Y-%m-%d %H:%M"),
                b.reason
            ));
        }
        for (chat, d) in &state.disabled_chats {
            out.push(format!("chat {chat} disabled: {}", d.reason));
        }
        out
    }

    /// The chats the persona has known (kept across restarts), by id; its own Saved
    /// Messages (the owner's notices and drafts) left out.
    pub(crate) fn chat_entries(&self, agent: &str) -> BTreeMap<i64, ChatEntry> {
        let mut chats = self.roster.index().chats(agent);
        if let Some(me) = self.roster.self_id(agent) {
            chats.remove(&me);
        }
        chats
    }

    /// A group's trigger mode now: the owner's choice for it, else the persona's.
    pub(crate) fn group_mode_of(&self, agent: &str, chat: ChatId) -> String {
        self.runtime().group_mode(agent, chat).map_or_else(
            || {
                self.runtime()
                    .persona(agent)
                    .map_or_else(String::new, |p| p.group.mode.to_string())
            },
            |m| m.to_string(),
        )
    }

    /// The persona's memory, as `state memory` reads it.
    pub(crate) async fn memory_view(&self, agent: &str) -> Result<MemoryView, OpError> {
        let agent = self.pick_agent(Some(agent))?;
        let facts = Arc::clone(&self.facts);
        Ok(tokio::task::spawn_blocking(move || {
            crate::app::memory_report::read(facts.as_ref(), &agent)
        })
        .await??)
    }

    /// The persona's schedule today and tomorrow (its local days) and its intents, as `state
    /// schedule` reads them.
    pub(crate) async fn schedule_view(&self, agent: &str) -> Result<ScheduleView, OpError> {
        let agent = self.pick_agent(Some(agent))?;
        let now = self.clock.now();
        let tz = self.zone(&agent);
        let has_schedule = self
            .runtime()
            .persona(&agent)
            .is_some_and(|p| p.daily_schedule.is_some());
        let live = self.runtime().presence(&agent).map(|r| r.schedule);
        let dir = self.state.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let today = now.to_zoned(tz.clone()).date();
            let days = if has_schedule {
                [Some(today), today.tomorrow().ok()]
                    .into_iter()
                    .flatten()
                    .map(|d| {
                        crate::app::presence_report::day_view(
                            &dir,
                            &agent,
                            &tz,
                            live.as_ref(),
                            d,
                            now,
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            ScheduleView {
                has_schedule,
                days,
                intents: crate::app::presence_report::intents(&dir, &agent),
            }
        })
        .await?)
    }
}
