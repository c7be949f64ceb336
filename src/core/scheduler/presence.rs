//! Presence in the scheduler: each agent's schedule (asleep means nothing of it runs, human
//! delays before reading), its activity boundaries (announced once, the account shown offline
//! when sleep starts, the next day's schedule asked for in the agent's own chat), the
//! messages parked for a wake-up (moved when the day changes) and its scheduled intents
//! (fired as plans at their time, after waking unless urgent). Part of the
//! pure scheduler: the driver installs an agent's presence with [`Scheduler::set_presence`]
//! and carries out the effects.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use tracing::{info, warn};

use super::{Effect, Scheduler, keys_of};
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskKind, TaskSpec, TaskStatus};
use crate::core::intents::{self, Fired, Intent};
use crate::core::model::Chat;
use crate::core::presence::{self, DaySchedule, Presence, PresenceNow};

/// A change of an agent's presence, for the operator's views (`ctl status`, the playground).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresenceChange {
    /// A new activity began.
    Activity(PresenceNow),
    /// Sleep began (or the day changed during it); it lasts until the instant given.
    Asleep { until: Timestamp },
    /// The persona woke up.
    Woke,
    /// The persona has no schedule any more (always available).
    Off,
}

/// What the scheduler keeps of one agent's presence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentPresence {
    /// The persona's zone (its `Agent Timezone`, else the host's).
    pub(crate) tz: TimeZone,
    /// The schedule, when the persona has a `Daily Schedule` (else always available).
    pub(crate) schedule: Option<Presence>,
    pub(crate) intents: Vec<Intent>,
    /// The activity last announced (its day and start), so each is announced once.
    announced: Option<(Date, u16)>,
    asleep: bool,
    /// The wake-up last announced while asleep, so a changed day announces the new one.
    announced_wake: Option<Timestamp>,
    /// The next instant something of this agent's presence is due.
    pub(crate) boundary: Option<Timestamp>,
    /// A `schedule` task handed out for this day, and when the claim lapses.
    generating: Option<(Date, Timestamp)>,
    /// The persona wrote something until this instant ago: it is still "online".
    online_until: Option<Timestamp>,
}

/// How long a handed-out `schedule` task keeps others from being made for its day.
const CLAIM: std::time::Duration = std::time::Duration::from_secs(30 * 60);

impl Scheduler {
    /// Installs (or replaces) an agent's presence: its zone, its schedule's days (`None`:
    /// the persona has no `Daily Schedule`) and its intents. Conversations are rescheduled
    /// (one may sleep, or wake); a firing already recorded in a loaded plan moves its intent
    /// on (a crash between the two writes fires it once).
    pub(crate) fn set_presence(
        &mut self,
        agent: &str,
        tz: TimeZone,
        schedule: Option<Presence>,
        mut intents: Vec<Intent>,
        now: Timestamp,
    ) {
        if !self.agents.contains(agent) {
            return;
        }
        let fired: Vec<Fired> = self
            .graphs
            .values()
            .filter(|g| g.agent == agent)
            .filter_map(|g| match g.tasks.first().map(|t| &t.spec) {
                Some(TaskSpec::Received {
                    intent: Some(f), ..
                }) => Some(f.clone()),
                _ => None,
            })
            .collect();
        let mut moved = false;
        for f in fired {
            if let Some(i) = intents.iter().position(|i| i.id == f.id)
                && intents::instant(intents[i].due, &tz) <= f.due
            {
                moved = true;
                match intents::fire(&intents[i], f.due, &tz) {
                    Some(next) => intents[i] = next,
                    None => {
                        intents.remove(i);
                    }
                }
            }
        }
        let previous = self.presence.remove(agent);
        if schedule.is_none() && previous.as_ref().is_some_and(|p| p.schedule.is_some()) {
            // The persona lost its `Daily Schedule`: it is always available from now on.
            self.effects.push(Effect::Presence {
                agent: agent.to_string(),
                change: PresenceChange::Off,
            });
        }
        self.presence.insert(
            agent.to_string(),
            AgentPresence {
                tz,
                schedule,
                intents,
                announced: previous.as_ref().and_then(|p| p.announced),
                asleep: previous.as_ref().is_some_and(|p| p.asleep),
                announced_wake: previous.as_ref().and_then(|p| p.announced_wake),
                boundary: None,
                generating: previous.as_ref().and_then(|p| p.generating),
                online_until: previous.and_then(|p| p.online_until),
            },
        );
        if moved {
            self.effects.push(Effect::SaveIntents {
                agent: agent.to_string(),
                after: false,
            });
        }
        // The first look happens in the pass's `advance`, after the queued events are
        // applied (the owner's pauses are in the agent's state, read with it).
        if let Some(p) = self.presence.get_mut(agent) {
            p.boundary = Some(now);
        }
        // A reload may have changed a day (a hand edit): parked messages follow its wake-up.
        self.retime_parked(agent, now);
        self.reschedule_agent(agent, now);
    }

    /// The agent's presence, if it runs.
    pub(crate) fn presence_of(&self, agent: &str) -> Option<&AgentPresence> {
        self.presence.get(agent)
    }

    /// When the agent wakes, if it is asleep at `now`.
    pub(crate) fn asleep_until(&self, agent: &str, now: Timestamp) -> Option<Timestamp> {
        self.presence.get(agent)?.schedule.as_ref()?.wake_at(now)
    }

    /// Whether sleep holds this task back, and until when: everything of a sleeping agent
    /// waits, except its own chat (alerts, presence upkeep), a stop, and a plan an urgent
    /// intent started.
    pub(super) fn held_by_sleep(
        &self,
        graph: &TaskGraph,
        task: &Task,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let wake = self.asleep_until(&graph.agent, now)?;
        let urgent = matches!(
            graph.tasks.first().map(|t| &t.spec),
            Some(TaskSpec::Received { intent: Some(f), .. }) if f.urgent
        );
        // A draft is the owner's side of a plan (posting it, its timeout), not the persona's.
        let exempt = matches!(task.kind(), TaskKind::Shutdown | TaskKind::Draft)
            || urgent
            || self.is_owner_chat(&graph.agent, graph.chat.id);
        (!exempt).then_some(wake)
    }

    /// When a new plan of `agent` may start, counting from `from`: after the debounce and,
    /// with a schedule, after the persona got to reading (its responsiveness now, or at
    /// wake-up when asleep). `pending`: the reading time of the plan it replaces and the
    /// wake-up that counts from, kept when later (a persona does not read later because a
    /// second message came). Returns the instant and, when it counts from a wake-up, that
    /// wake-up (so a changed day can move it: [`Scheduler::retime_parked`]).
    pub(super) fn plan_ready_at(
        &self,
        agent: &str,
        from: Timestamp,
        pending: Option<(Timestamp, Option<Timestamp>)>,
    ) -> (Timestamp, Option<Timestamp>) {
        let debounced = crate::core::time::add(from, self.config.debounce);
        let Some(p) = self.presence.get(agent) else {
            return (debounced, None);
        };
        let Some(schedule) = &p.schedule else {
            return (debounced, None);
        };
        let wake = schedule.wake_at(from);
        let (start, online) = match wake {
            Some(wake) => (wake, false),
            None => (from, p.online_until.is_some_and(|u| u > from)),
        };
        // Asleep, the reading time is drawn again from the wake-up (a kept one may have come
        // and gone during the night).
        if let Some((pending, woke)) = pending.filter(|_| wake.is_none()) {
            // The reading time was drawn when the first message came: a later one only
            // adds the debounce.
            return if pending >= debounced {
                (pending, woke)
            } else {
                (debounced, None)
            };
        }
        let r = schedule.now(start).activity.responsiveness;
        let read =
            crate::core::time::add(start, presence::response_delay(r, online, fastrand::f64()));
        if read >= debounced {
            (read, wake)
        } else {
            (debounced, None)
        }
    }

    /// Moves every parked `received` task of `agent` (one whose reading time counts from a
    /// wake-up) to the wake-up of its schedule as it is now: called when a day changed (a
    /// generated day installed, the schedule reloaded). A task not parked by sleep, or one
    /// already started, keeps its time.
    pub(super) fn retime_parked(&mut self, agent: &str, now: Timestamp) {
        let Some(schedule) = self.presence.get(agent).and_then(|p| p.schedule.as_ref()) else {
            return;
        };
        let wake = schedule.wake_at(now);
        let earliest = crate::core::time::add(now, self.config.debounce);
        let mut moved = Vec::new();
        for key in keys_of(&self.graphs, agent) {
            let Some(task) = self.graphs.get_mut(&key).and_then(|g| g.tasks.first_mut()) else {
                continue;
            };
            if task.kind() != TaskKind::Received || task.status != TaskStatus::Pending {
                continue;
            }
            let (Some(woke), Some(not_before)) = (task.woke_at, task.not_before) else {
                continue;
            };
            let parked = Parked { woke, not_before };
            if let Some(new) = retimed(parked, wake, now, earliest) {
                info!(event = "parked_retimed", conversation = %key, from = %not_before, to = %new.not_before, "the day changed: a parked message is read from the new wake-up");
                task.woke_at = Some(new.woke);
                task.not_before = Some(new.not_before);
                task.updated_at = now;
                moved.push(key);
            }
        }
        for key in moved {
            self.mark_dirty(&key);
        }
    }

    /// A message of the agent's went out: it stays online for a while.
    pub(super) fn note_wrote(&mut self, agent: &str, now: Timestamp) {
        if let Some(p) = self.presence.get_mut(agent) {
            p.online_until = Some(crate::core::time::add(now, presence::ONLINE_WINDOW));
        }
    }

    /// The earliest presence deadline of any agent.
    pub(super) fn presence_wake(&self) -> Option<Timestamp> {
        self.presence.values().filter_map(|p| p.boundary).min()
    }

    /// Runs every agent's presence whose deadline has come.
    pub(super) fn presence_advance(&mut self, now: Timestamp) {
        let due: Vec<String> = self
            .presence
            .iter()
            .filter(|(_, p)| p.boundary.is_some_and(|b| b <= now))
            .map(|(a, _)| a.clone())
            .collect();
        for agent in due {
            self.presence_tick(&agent, now);
            self.reschedule_agent(&agent, now);
        }
    }

    /// Puts every conversation of the agent back where it belongs (asleep or awake now).
    fn reschedule_agent(&mut self, agent: &str, now: Timestamp) {
        for key in keys_of(&self.graphs, agent) {
            self.armed.remove(&key);
            self.reschedule(&key, now);
        }
    }

    /// One look at the agent's presence at `now`: announce a new activity, sleep or waking
    /// (showing the account offline as sleep starts), ask for a missing day, fire the
    /// intents that are due, and arm the next deadline.
    fn presence_tick(&mut self, agent: &str, now: Timestamp) {
        let Some(p) = self.presence.get(agent) else {
            return;
        };
        let mut next: Vec<Timestamp> = Vec::new();
        let mut changes = Vec::new();
        let mut generate = None;
        let mut asleep = false;
        let mut wake = None;
        let mut announced = None;
        if let Some(schedule) = &p.schedule {
            let state = schedule.now(now);
            asleep = state.activity.asleep();
            next.push(state.until);
            let id = (state.date, state.activity.start);
            announced = Some(id);
            if p.announced != Some(id) {
                changes.push(PresenceChange::Activity(state.clone()));
            }
            wake = schedule.wake_at(now);
            if asleep != p.asleep || (asleep && wake != p.announced_wake) {
                // Sleep began, or the day changed during it and moved the wake-up.
                changes.push(match wake {
                    Some(until) => PresenceChange::Asleep { until },
                    None => PresenceChange::Woke,
                });
            }
            let claimed = p.generating.filter(|(_, until)| *until > now);
            let (today, minute) = schedule.local(now);
            // At most two calls a day (the persona's local day of the call, all target days
            // together; counted in the agent's state when handed out).
            let calls_left = self.safety.schedule_calls(agent, today) < presence::CALLS_PER_DAY;
            if let Some(day) = schedule.day_to_generate(now)
                && claimed.is_none_or(|(d, _)| d != day)
                && calls_left
                && !self.schedule_task_waits(agent, day)
            {
                generate = Some((day, today));
            }
            // From 18:00 local, the next day may be asked for.
            if minute < presence::GENERATE_FROM_MINUTE {
                next.push(schedule.instant(today, presence::GENERATE_FROM_MINUTE, now));
            }
            let tomorrow = today.tomorrow().unwrap_or(today);
            for day in [today, tomorrow] {
                if let Some(Source::Fallback {
                    retry_at: Some(at), ..
                }) = schedule.known(day).map(|d| &d.source)
                    && *at > now
                {
                    next.push(*at);
                }
            }
            if let Some((_, until)) = claimed {
                next.push(until);
            }
        }
        let fell_asleep = asleep && !p.asleep;
        if let Some(p) = self.presence.get_mut(agent) {
            p.announced = announced;
            p.asleep = asleep;
            p.announced_wake = wake.filter(|_| asleep);
            if let Some((day, _)) = generate {
                p.generating = Some((day, crate::core::time::add(now, CLAIM)));
            }
        }
        if let Some((_, today)) = generate {
            self.safety.count_schedule_call(agent, today);
            self.effects.push(Effect::SaveAgentState(agent.to_string()));
        }
        for change in changes {
            self.effects.push(Effect::Presence {
                agent: agent.to_string(),
                change,
            });
        }
        if fell_asleep {
            self.own_task(agent, TaskSpec::Presence { online: false }, now);
        }
        if let Some((day, _)) = generate {
            self.own_task(
                agent,
                TaskSpec::Schedule {
                    date: day.to_string(),
                },
                now,
            );
        }
        next.extend(self.fire_intents(agent, now));
        if let Some(p) = self.presence.get_mut(agent) {
            p.boundary = next.into_iter().filter(|t| *t > now).min();
        }
    }

    /// Fires the agent's intents that are due (a sleeping persona's wait for its wake-up,
    /// unless urgent): each becomes a plan in its chat, and moves on (or ends). Returns when
    /// the next one is due.
    fn fire_intents(&mut self, agent: &str, now: Timestamp) -> Option<Timestamp> {
        let wake = self.asleep_until(agent, now);
        let mut changed = false;
        let mut fires: Vec<(Intent, Timestamp)> = Vec::new();
        if let Some(p) = self.presence.get_mut(agent) {
            let tz = p.tz.clone();
            let mut i = 0;
            while i < p.intents.len() {
                let at = intents::instant(p.intents[i].due, &tz);
                if at <= now && (wake.is_none() || p.intents[i].urgent) {
                    fires.push((p.intents[i].clone(), at));
                    changed = true;
                    match intents::fire(&p.intents[i], now, &tz) {
                        Some(next) => p.intents[i] = next,
                        None => {
                            p.intents.remove(i);
                            continue;
                        }
                    }
                }
                i += 1;
            }
        }
        for (intent, due) in fires {
            if self.safety.is_disabled(agent, intent.chat)
                || self.is_paused(agent, intent.chat, now)
            {
                info!(event = "intent_skipped", agent = %agent, chat = %intent.chat, intent = %intent.id, "scheduled intent skipped: the chat is paused or disabled");
                continue;
            }
            let chat = Chat {
                id: intent.chat,
                kind: if intent.chat.0 > 0 {
                    crate::core::model::ChatKind::Direct
                } else {
                    crate::core::model::ChatKind::Group
                },
                title: intent.title.clone(),
            };
            let key = ConversationKey::new(agent, intent.chat);
            let kind = self.graphs.get(&key).map(|g| g.chat.clone());
            info!(conversation = %key, intent = %intent.id, "scheduled intent fires");
            self.replan_intent(
                agent,
                kind.unwrap_or(chat),
                Fired {
                    id: intent.id,
                    text: intent.text,
                    due,
                    urgent: intent.urgent,
                },
                now,
            );
        }
        if changed {
            self.after_graphs.push(Effect::SaveIntents {
                agent: agent.to_string(),
                after: true,
            });
        }
        // A sleeping persona's intents wait for its wake-up, unless urgent.
        let p = self.presence.get(agent)?;
        p.intents
            .iter()
            .map(|i| {
                let at = intents::instant(i.due, &p.tz);
                match wake {
                    Some(w) if !i.urgent => at.max(w),
                    _ => at,
                }
            })
            .min()
    }

    /// A plan in the intent's chat, replacing what was planned there.
    pub(super) fn replan_intent(&mut self, agent: &str, chat: Chat, fired: Fired, now: Timestamp) {
        let key = ConversationKey::new(agent, chat.id);
        let not_before = crate::core::time::add(now, self.config.debounce);
        // A message whose plan has not started yet is answered by the same plan.
        let waiting = self.graphs.get(&key).and_then(|g| match g.tasks.first() {
            Some(
                t @ Task {
                    spec:
                        TaskSpec::Received {
                            message_id: Some(m),
                            no_quote,
                            ..
                        },
                    status: TaskStatus::Pending | TaskStatus::Active,
                    ..
                },
            ) => Some((*m, *no_quote, t.not_before, t.woke_at)),
            _ => None,
        });
        // It keeps the message's reading time (and the wake-up that counts from), unless it
        // is urgent (it runs now).
        let kept = waiting
            .and_then(|(_, _, nb, woke)| Some((nb?, woke)))
            .filter(|(nb, _)| !fired.urgent && *nb >= not_before);
        let (not_before, woke) = kept.unwrap_or((not_before, None));
        let mut graph =
            TaskGraph::with_received(agent, chat, now, waiting.map(|(m, ..)| m), not_before);
        if let Some(t) = graph.tasks.first_mut() {
            t.woke_at = woke;
        }
        if let Some(TaskSpec::Received {
            intent, no_quote, ..
        }) = graph.tasks.first_mut().map(|t| &mut t.spec)
        {
            *intent = Some(fired);
            *no_quote = waiting.is_some_and(|(_, q, ..)| q);
        }
        if let Some(old) = self.graphs.get(&key) {
            super::admission::carry_over(old, &mut graph, now);
        }
        self.abandon_cancel_safe(&key);
        self.graphs.insert(key.clone(), Box::new(graph));
        self.mark_dirty(&key);
        self.reschedule(&key, now);
    }

    /// Whether the agent's own chat still holds a `schedule` task for `day` (handed out before
    /// and not run yet: its claim lapsed, the call is not made twice).
    fn schedule_task_waits(&self, agent: &str, day: Date) -> bool {
        let Some(chat) = self.safety.own_chat(agent) else {
            return false;
        };
        let date = day.to_string();
        self.graphs
            .get(&ConversationKey::new(agent, chat.id))
            .is_some_and(|g| {
                g.tasks.iter().any(|t| {
                    t.status != TaskStatus::Done
                        && matches!(&t.spec, TaskSpec::Schedule { date: d } if *d == date)
                })
            })
    }

    /// A `schedule` task the last stop cut short runs again: that is another call, counted
    /// now like a new one (a crash loop never calls without end); with the day's calls spent
    /// it is dropped and the day stays as it is (the fallback). Returns whether it may start.
    pub(super) fn schedule_call_again(
        &mut self,
        key: &ConversationKey,
        task_id: &str,
        now: Timestamp,
    ) -> bool {
        let Some(today) = self
            .presence
            .get(&key.agent)
            .and_then(|p| p.schedule.as_ref())
            .map(|s| s.local(now).0)
        else {
            return true;
        };
        if self.safety.schedule_calls(&key.agent, today) < presence::CALLS_PER_DAY {
            self.safety.count_schedule_call(&key.agent, today);
            self.effects.push(Effect::SaveAgentState(key.agent.clone()));
            return true;
        }
        warn!(event = "schedule_call_spent", agent = %key.agent, "a schedule call cut short by the last stop is not made again: the day's calls are spent");
        if let Some(graph) = self.graphs.get_mut(key) {
            graph.mark_done(task_id, now);
            if graph.is_finished() {
                self.remove_graph(key, now);
            } else {
                self.mark_dirty(key);
            }
        }
        self.reschedule(key, now);
        false
    }

    /// Adds one of the runtime's own tasks to the agent's own chat (its Saved Messages): a
    /// pending one of the same kind is replaced, so upkeep never piles up.
    pub(super) fn own_task(&mut self, agent: &str, spec: TaskSpec, now: Timestamp) {
        let Some(chat) = self.safety.own_chat(agent) else {
            return;
        };
        let key = ConversationKey::new(agent, chat.id);
        let kind = spec.kind();
        match self.graphs.get_mut(&key) {
            Some(graph) => {
                if let Some(t) = graph
                    .tasks
                    .iter_mut()
                    .find(|t| t.kind() == kind && t.status == TaskStatus::Pending)
                {
                    t.spec = spec;
                    t.updated_at = now;
                } else {
                    graph.tasks.push(Task::new(spec, now));
                }
            }
            None => {
                let graph = TaskGraph::with_tasks(agent, chat, now, vec![Task::new(spec, now)]);
                self.graphs.insert(key.clone(), Box::new(graph));
            }
        }
        self.mark_dirty(&key);
        self.reschedule(&key, now);
    }

    /// A `schedule` task's day: installed (the claim on it released), saved, the messages
    /// parked for the old wake-up moved to the new one, and every conversation of the agent
    /// rescheduled.
    pub(super) fn install_day(&mut self, agent: &str, day: DaySchedule, now: Timestamp) {
        let Some(p) = self.presence.get_mut(agent) else {
            return;
        };
        let Some(schedule) = p.schedule.as_mut() else {
            return;
        };
        if p.generating.is_some_and(|(d, _)| d == day.date) {
            p.generating = None;
        }
        let written_meanwhile = schedule.is_unreadable(day.date)
            || schedule
                .known(day.date)
                .is_some_and(|d| !matches!(d.source, Source::Fallback { .. }));
        if written_meanwhile {
            // A day written (or broken) by hand while the call ran is the operator's.
            info!(event = "schedule_kept", agent = %agent, date = %day.date, "a day written meanwhile is kept; the call's answer is dropped");
            return;
        }
        schedule.install(day.clone());
        self.after_graphs.push(Effect::SaveDay {
            agent: agent.to_string(),
            day: Box::new(day),
            replaces: None,
        });
        self.retime_parked(agent, now);
        self.presence_tick(agent, now);
        self.reschedule_agent(agent, now);
    }

    /// A plan's `schedule` tasks: the persona's changes to its day, applied together (refused
    /// whole, with the reason logged and shown to the owner), each changed day installed and
    /// saved over the one it replaces only (never over a day written by hand meanwhile), the
    /// messages parked for the old wake-up moved, and the agent's conversations rescheduled.
    pub(super) fn edit_day(
        &mut self,
        agent: &str,
        from: &ConversationKey,
        edits: &[presence::edit::ActivityEdit],
        now: Timestamp,
    ) {
        let Some(schedule) = self
            .presence
            .get_mut(agent)
            .and_then(|p| p.schedule.as_mut())
        else {
            warn!(event = "schedule_edit_refused", agent = %agent, chat = %from.chat, reason = "the persona has no Daily Schedule", "schedule change refused");
            return;
        };
        let days = match presence::edit::apply(schedule, edits, now) {
            Ok(days) => days,
            Err(why) => {
                warn!(event = "schedule_edit_refused", agent = %agent, chat = %from.chat, reason = %why, "schedule change refused");
                self.notable(agent, Some(from.chat), "schedule_edit_refused", why.0);
                return;
            }
        };
        for day in days {
            let replaces = schedule.known(day.date).cloned().map(Box::new);
            info!(event = "schedule_edited", agent = %agent, chat = %from.chat, date = %day.date, activities = day.activities.len(), "the persona changed its day");
            schedule.install(day.clone());
            self.after_graphs.push(Effect::SaveDay {
                agent: agent.to_string(),
                day: Box::new(day),
                replaces,
            });
        }
        self.retime_parked(agent, now);
        self.presence_tick(agent, now);
        self.reschedule_agent(agent, now);
    }

    /// A plan's `event` task: the write applied to the chat's intents (refusals logged), saved.
    pub(super) fn apply_intent(
        &mut self,
        key: &ConversationKey,
        title: &str,
        write: &crate::core::intents::IntentWrite,
        now: Timestamp,
    ) {
        let Some(p) = self.presence.get_mut(&key.agent) else {
            return;
        };
        let tz = p.tz.clone();
        match intents::apply(&mut p.intents, key.chat, title, write, &tz, now, || {
            crate::core::graph::new_id("event")
        }) {
            Ok(change) => {
                info!(event = "intent_changed", conversation = %key, change = ?change, "scheduled intent changed");
                // Saved at once: the graph marking the `event` task done goes on its own.
                self.effects.push(Effect::SaveIntents {
                    agent: key.agent.clone(),
                    after: false,
                });
                self.presence_tick(&key.agent, now);
            }
            Err(refused) => {
                warn!(event = "intent_refused", conversation = %key, reason = %refused, "scheduled intent refused");
            }
        }
    }
}

use crate::core::presence::Source;

/// A `received` task parked by sleep: the wake-up it counts from and its reading time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parked {
    pub(crate) woke: Timestamp,
    pub(crate) not_before: Timestamp,
}

/// A parked task after its agent's day changed at `now`: `wake` is the new day's wake-up
/// (`None`: awake now under the new day). The reading delay it had (its time after its
/// wake-up) now counts from the new wake-up, or from `now` when the persona is awake under
/// the new day but was still asleep under the old one; never before `earliest` (now plus the
/// debounce). `None`: it keeps its time (the wake-up did not move, or it had passed already
/// and the persona is awake).
pub(crate) fn retimed(
    parked: Parked,
    wake: Option<Timestamp>,
    now: Timestamp,
    earliest: Timestamp,
) -> Option<Parked> {
    let woke = match wake {
        Some(w) => w,
        None if parked.woke > now => now,
        None => return None,
    };
    if woke == parked.woke {
        return None;
    }
    // A reading time before its wake-up (a hand-edited file) counts as none.
    let reading = std::time::Duration::try_from(parked.not_before.duration_since(parked.woke))
        .unwrap_or_default();
    Some(Parked {
        woke,
        not_before: crate::core::time::add(woke, reading).max(earliest),
    })
}

#[cfg(test)]
mod tests;
