//! The thin async driver around the pure [`Scheduler`]: it loads the state directory, then
//! loops: drain the work queue, hand each event and the time to the scheduler, let it start
//! ready tasks, and carry out the effects it returns (writes through the [`Persister`], task
//! spawns, aborts). A task is spawned only once the write holding its `active` mark is
//! durable; nothing else waits for the disk. Between passes it sleeps until the next event
//! or the scheduler's next deadline. Hooks that watch the loop (a watchdog, metrics) read the
//! [`Status`] published after every pass. What it was given (config, agents, ports, queue)
//! lives in the runtime's shared `Services`, which it owns.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::task::AbortHandle;
use tracing::{error, info};

use crate::core::graph::ConversationKey;
use crate::core::outcome::{Cause, TaskError};
use crate::core::safety::AccountSafety;
use crate::core::scheduler::{Effect, Scheduler, Start};
use crate::ports::clock::{self, Hold};
use crate::runtime::handlers::{self, TaskContext};
use crate::runtime::persistence::{OnSaved, Persister, Saved, Target, Write, blocking};
use crate::runtime::queue::{Event, PASS_EVENTS};
use crate::runtime::startup::load_agent_state;
use crate::runtime::{AgentHandle, RuntimeError, Services, Status, StopReport};

mod dormancy;

struct Running {
    graph_id: String,
    task_id: String,
    abort: AbortHandle,
}

/// The loop and everything it owns.
pub(crate) struct Driver {
    /// What the runtime was given (config, agents, ports, queue, status channel).
    svc: Services,
    sched: Scheduler,
    persister: Persister,
    running: HashMap<ConversationKey, Running>,
    /// Tasks decided but waiting for the write of their `active` mark (its generation).
    waiting: HashMap<ConversationKey, (u64, Start)>,
    /// Inbound messages per conversation whose graph is not durable yet, and the write
    /// generation that will make it so.
    inbound_waiting: HashMap<ConversationKey, (u64, u64)>,
    /// Inbound messages applied in this pass, per conversation (their write is not yet
    /// submitted).
    inbound_pass: HashMap<ConversationKey, u64>,
    applied: u64,
    inbound_durable: u64,
    passes: u64,
    /// Stop once idle, for this reason (`RuntimeHandle::stop_when_idle`).
    stop_when_idle: Option<String>,
    /// Who gets a hold on the clock once idle (`RuntimeHandle::hold_when_idle`).
    idle_waiters: Vec<tokio::sync::oneshot::Sender<Hold>>,
    /// Intents saves waiting for graph writes of their agent (a fired intent's plan is on
    /// disk before the intent moves on): the writes (conversation, generation) still due.
    intents_after: HashMap<String, Vec<(ConversationKey, u64)>>,
    /// Conversations whose write is done (or read back) this pass: out of RAM at its end if
    /// they have settled (`dormancy`).
    evictable: Vec<ConversationKey>,
}

impl Driver {
    pub(in crate::runtime) fn new(svc: Services) -> Driver {
        // Replaced by `load` once the agents' safety state is read.
        let sched = Scheduler::new(
            Arc::clone(&svc.config),
            svc.agents.keys().cloned(),
            AccountSafety::default(),
        );
        let queue = Arc::clone(&svc.queue);
        let on_saved: OnSaved = Arc::new(move |saved: Saved| {
            queue.push(Event::Saved {
                done: saved.done,
                result: saved.result,
                urgent: saved.urgent,
            })
        });
        let queue = Arc::clone(&svc.queue);
        let persister = Persister::new(
            Arc::clone(&svc.store),
            on_saved,
            Arc::new(move |result| queue.push(Event::Checkpointed { result })),
            Arc::clone(&svc.clock),
        );
        Driver {
            svc,
            sched,
            persister,
            running: HashMap::new(),
            waiting: HashMap::new(),
            inbound_waiting: HashMap::new(),
            inbound_pass: HashMap::new(),
            applied: 0,
            inbound_durable: 0,
            passes: 0,
            stop_when_idle: None,
            idle_waiters: Vec::new(),
            intents_after: HashMap::new(),
            evictable: Vec::new(),
        }
    }

    /// Loads persisted state, then runs until shutdown (or a failed write).
    pub(crate) async fn run(mut self) -> Result<StopReport, RuntimeError> {
        let result = self.run_inner().await;
        for r in self.running.values() {
            r.abort.abort();
        }
        self.svc.status_tx.send_modify(|s| {
            s.stopped = true;
            s.in_flight = 0;
        });
        result
    }

    async fn run_inner(&mut self) -> Result<StopReport, RuntimeError> {
        let hold = self.svc.clock.hold();
        self.load().await?;
        // Kept into the first pass: what the load decided (presence at start) happens at the
        // load's moment, before virtual time can move.
        let mut wake: Option<Hold> = Some(hold);
        loop {
            let hold = self.svc.clock.hold();
            drop(wake.take());
            let (events, queued_hold, more) = self.svc.queue.drain(PASS_EVENTS);
            self.applied += events.len() as u64;
            self.wake(self.touched_by(&events)).await?;
            for event in events {
                self.apply(event).await?;
            }
            drop(queued_hold);
            let now = self.svc.clock.now();
            self.wake(self.sched.wanted(now)).await?;
            self.sched.advance(now);
            if self.sched.stopping().is_some() {
                // Tasks not started yet are given up: their `active` mark makes them run
                // again after the next start.
                for (key, _) in std::mem::take(&mut self.waiting) {
                    self.sched.forget_in_flight(&key);
                }
                let settled = self.sched.stop_settled(now);
                self.execute();
                if settled && self.persister.pending() == 0 {
                    let reason = self
                        .sched
                        .stopping()
                        .map(|(r, _)| r.clone())
                        .unwrap_or_default();
                    // The files are brought up to date and the journal retired: the next
                    // start reads the files alone.
                    if let Err(e) = self.persister.final_checkpoint(now).await {
                        error!(event = "checkpoint_failed", error = %e, "the last checkpoint failed; the journal keeps everything and is read at the next start");
                    }
                    info!(reason = %reason, "runtime stopped; all state is saved");
                    return Ok(StopReport {
                        reason,
                        no_agents_left: self.svc.agents.is_empty(),
                    });
                }
            } else {
                self.sched.start_ready(now);
                self.execute();
                self.evict_settled(now);
                self.persister.maybe_checkpoint(now, self.quiet());
            }
            self.passes += 1;
            // One look at the next wake-up serves the published status and this pass's sleep.
            let next_wake = match (self.sched.next_wake(), self.persister.next_checkpoint()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.publish(now, next_wake);
            let idle = !more && self.quiet() && !self.persister.checkpoint_owed();
            if self.sched.stopping().is_none() && idle {
                // Idle, judged here so virtual time cannot run on first.
                for waiter in self.idle_waiters.drain(..) {
                    let _ = waiter.send(self.svc.clock.hold());
                }
                if let Some(reason) = self.stop_when_idle.take() {
                    self.sched.begin_stop(reason, now);
                    // Straight to the next pass, still holding the clock.
                    wake = Some(hold);
                    continue;
                }
            }
            let mut deadline = next_wake.filter(|at| *at > now);
            let mut hold = hold;
            if let Some(hb) = self.svc.heartbeat.clone() {
                let depth = self.svc.queue.pushed().saturating_sub(self.applied);
                (hb.beat)(&self.svc.status_tx.borrow(), depth);
                if let Some(stall) = hb.stall.as_ref().and_then(|f| f()) {
                    tracing::warn!(
                        event = "loop_stall_injected",
                        ms = stall.as_millis() as u64,
                        "the tick loop stalls (fault injection)"
                    );
                    drop(hold);
                    hold = self.svc.clock.sleep_until(clock::add(now, stall)).await;
                }
                let cap = clock::add(now, hb.every);
                deadline = Some(deadline.map_or(cap, |d| d.min(cap)));
            }
            // The rest of a burst: straight to the next pass, still holding the clock.
            wake = if more {
                Some(hold)
            } else {
                self.sleep(deadline, hold).await
            };
        }
    }

    /// No graph, nothing in flight, no write queued or running.
    fn quiet(&self) -> bool {
        self.sched.graphs() == 0 && self.sched.in_flight() == 0 && self.persister.pending() == 0
    }

    async fn load(&mut self) -> Result<(), RuntimeError> {
        let store = Arc::clone(&self.svc.store);
        let now = self.svc.clock.now();
        let loaded = blocking(move || store.load_all(now)).await??;
        if loaded.stale_temp_files_removed > 0 {
            info!(
                count = loaded.stale_temp_files_removed,
                "removed temp files left by an interrupted save"
            );
        }
        loaded
            .quarantined
            .iter()
            .for_each(dormancy::log_quarantined);
        let mut safety = AccountSafety::new(
            self.svc
                .agents
                .iter()
                .map(|(name, a)| (name.clone(), a.telegram.self_id()))
                .collect(),
        );
        let mut notices = Vec::new();
        for agent in self.svc.agents.keys() {
            let (state, notice) = load_agent_state(Arc::clone(&self.svc.store), agent, now).await?;
            safety.set_state(agent, state);
            notices.extend(notice.map(|n| (agent.clone(), n)));
        }
        self.sched = Scheduler::new(
            Arc::clone(&self.svc.config),
            self.svc.agents.keys().cloned(),
            safety,
        );
        self.sched.load(loaded.graphs, self.svc.clock.now());
        for (agent, notice) in notices {
            self.sched.fail_closed(&agent, &notice, now);
        }
        let agents: Vec<String> = self.svc.agents.keys().cloned().collect();
        for agent in agents {
            self.publish_agent_state(&agent);
            self.check_caps(&agent);
            self.load_presence(&agent).await?;
        }
        Ok(())
    }

    /// Reads the agent's schedule days and intents off the loop and hands them to the
    /// scheduler (at start, and whenever the agent is upserted: a reload reads hand edits),
    /// with the admin chat its persona names.
    async fn load_presence(&mut self, agent: &str) -> Result<(), RuntimeError> {
        let Some(handle) = self.svc.agents.get(agent) else {
            return Ok(());
        };
        let persona = Arc::clone(&handle.persona);
        // Where the owner's side is besides Saved Messages follows the persona too.
        self.sched.set_admin_chat(agent, persona.admin_chat);
        let tz = presence_zone(&persona);
        let now = self.svc.clock.now();
        let today = now.to_zoned(tz.clone()).date();
        let store = Arc::clone(&self.svc.store);
        let a = agent.to_string();
        let loaded = blocking(move || store.load_presence(&a, today)).await??;
        for problem in &loaded.problems {
            error!(event = "presence_file_unreadable", agent = %agent, problem = %problem, "schedule or intents file unreadable: the day falls back (fix the file and reload)");
        }
        // Writes still on their way make the disk older than memory: what they carry stays.
        let current = self.sched.presence_of(agent);
        let intents = match current {
            Some(p)
                if self
                    .persister
                    .is_pending(&Target::Intents(agent.to_string()))
                    || self.intents_after.contains_key(agent) =>
            {
                p.intents.clone()
            }
            _ => loaded.intents,
        };
        let mut days = loaded.days;
        if let Some(known) = current.and_then(|p| p.schedule.as_ref()) {
            for day in known.days() {
                let target = Target::Day(agent.to_string(), day.date.to_string());
                if self.persister.is_pending(&target) {
                    days.retain(|d| d.date != day.date);
                    days.push(day.clone());
                }
            }
        }
        let schedule = persona.daily_schedule.is_some().then(|| {
            crate::core::presence::Presence::new(tz.clone(), days)
                .with_unreadable(loaded.unreadable)
        });
        self.sched
            .set_presence(agent, tz, schedule, intents, self.svc.clock.now());
        self.publish_schedule(agent);
        Ok(())
    }

    /// Publishes the agent's schedule as the scheduler holds it (the operator's views read
    /// where the persona stands from it), or forgets it when the persona has none.
    fn publish_schedule(&self, agent: &str) {
        let schedule = self
            .sched
            .presence_of(agent)
            .and_then(|p| p.schedule.clone())
            .map(|schedule| crate::runtime::handle::PresenceReport { schedule });
        self.svc.published.set_presence(agent, schedule);
    }

    async fn apply(&mut self, event: Event) -> Result<(), RuntimeError> {
        let now = self.svc.clock.now();
        match event {
            Event::Inbound {
                agent,
                chat,
                message,
                admission,
            } => {
                let key = ConversationKey::new(agent.clone(), chat.id);
                if self.sched.admit(&agent, chat, message.id, admission, now) {
                    *self.inbound_pass.entry(key).or_default() += 1;
                }
            }
            Event::Finished {
                key,
                graph_id,
                task_id,
                result,
            } => {
                if self
                    .running
                    .get(&key)
                    .is_some_and(|r| r.graph_id == graph_id && r.task_id == task_id)
                {
                    self.running.remove(&key);
                }
                handlers::record_outcome(&result);
                self.sched
                    .on_finished(key, &graph_id, &task_id, *result, now);
            }
            Event::Saved {
                done,
                result,
                urgent,
            } => {
                result?;
                self.persister.completed(&done, urgent);
                for (target, generation) in &done {
                    if let Target::Graph(key) = target {
                        self.on_durable(key, *generation);
                    }
                }
            }
            Event::Checkpointed { result } => self.persister.checkpointed(result)?,
            Event::Cancel {
                agent,
                chat,
                reason,
            } => self.sched.on_cancel(&agent, chat, &reason, now),
            Event::StopAgent { agent, reason } => {
                error!(agent = %agent, reason = %reason, "agent stopped: log in again with personad login --agent {agent:?}");
                self.sched.stop_unauthorized(&agent, &reason, now);
            }
            Event::Shutdown { reason } => self.sched.begin_stop(reason, now),
            Event::StopWhenIdle { reason } => self.stop_when_idle = Some(reason),
            Event::HoldWhenIdle(tx) => self.idle_waiters.push(tx),
            Event::UpsertAgent(agent) => self.upsert_agent(*agent, now).await?,
            Event::MigrateChat { agent, from, to } => {
                if let Some(handle) = self.svc.agents.get(&agent) {
                    handle.telegram.chat_migrated(from, to);
                }
                self.sched.migrate_chat(&agent, from, to, now)
            }
            Event::Spent {
                agent,
                day,
                spend,
                all,
            } => {
                let cap = self
                    .svc
                    .agents
                    .get(&agent)
                    .and_then(|a| a.persona.daily_budget);
                let report = crate::core::scheduler::SpendReport {
                    day,
                    agent: (spend, cap),
                    daemon: (all, self.svc.config.daily_budget),
                };
                self.sched.on_spend(&agent, report, now);
            }
            Event::LiftBudget { agent } => self.sched.lift_budget(&agent, now),
            Event::DecideDraft {
                agent,
                which,
                decision,
            } => {
                self.sched.decide_draft(&agent, &which, decision, now);
            }
            Event::Owner {
                agent,
                request,
                reply,
            } => {
                let answer = self.sched.owner_request(&agent, request, now);
                // Readers see the change before the requester hears it is done.
                if self.sched.has_agent(&agent) {
                    self.publish_agent_state(&agent);
                }
                if let Some(reply) = reply {
                    let _ = reply.send(answer);
                }
            }
            Event::AnswerOwner {
                agent,
                chat,
                command,
                text,
            } => self.sched.answer_owner(&agent, chat, command, &text, now),
            Event::RemoveAgent { agent, reason } => {
                info!(event = "agent_removed", agent = %agent, reason = %reason, "agent stopped; its graphs stay on disk");
                self.sched.stop_agent(&agent, now);
                self.svc.published.set_agent_state(&agent, None);
            }
        }
        Ok(())
    }

    /// Hands the scheduler the agent's caps as configured now (a changed cap starts over).
    fn check_caps(&mut self, agent: &str) {
        let persona = self
            .svc
            .agents
            .get(agent)
            .and_then(|a| a.persona.daily_budget);
        let daemon = self.svc.config.daily_budget;
        self.sched
            .check_caps(agent, persona, daemon, self.svc.clock.now());
    }

    /// Shows the agent's state as the scheduler now holds it to the handle (the admission
    /// chain and the operator's views read it there).
    fn publish_agent_state(&self, agent: &str) {
        let state = self.sched.safety().state(agent).cloned();
        self.svc
            .published
            .set_agent_state(agent, Some(state.unwrap_or_default()));
    }

    /// Hot reload: a running agent gets its new persona (from its next task on); a new one
    /// starts with its safety state from disk, taking back its graphs kept there.
    async fn upsert_agent(
        &mut self,
        handle: AgentHandle,
        now: Timestamp,
    ) -> Result<(), RuntimeError> {
        let agent = handle.persona.name.clone();
        let self_id = handle.telegram.self_id();
        self.svc.agents.insert(agent.clone(), handle);
        if self.sched.has_agent(&agent) {
            info!(event = "agent_persona_reloaded", agent = %agent, "persona reloaded");
            self.check_caps(&agent);
            // The schedule's prose or zone may have changed, and hand edits are read.
            return self.load_presence(&agent).await;
        }
        let (state, notice) = load_agent_state(Arc::clone(&self.svc.store), &agent, now).await?;
        self.sched.add_agent(&agent, self_id, state, now);
        if let Some(notice) = notice {
            self.sched.fail_closed(&agent, &notice, now);
        }
        self.publish_agent_state(&agent);
        self.check_caps(&agent);
        self.load_presence(&agent).await?;
        info!(event = "agent_started", agent = %agent, "agent started");
        Ok(())
    }

    /// Writes the agent's intents as the scheduler holds them now.
    fn save_intents(&mut self, agent: String) {
        // An agent that stopped meanwhile keeps its file as it is.
        let Some(intents) = self.sched.presence_of(&agent).map(|p| p.intents.clone()) else {
            return;
        };
        self.persister.submit(
            Target::Intents(agent.clone()),
            Write::Intents(agent, intents),
        );
    }

    /// A conversation's write of `generation` is on disk: count the inbound messages it
    /// covers, start the task that waited for it, and save intents that waited for it.
    fn on_durable(&mut self, key: &ConversationKey, generation: u64) {
        self.evictable.push(key.clone());
        if let Some(needs) = self.intents_after.get_mut(&key.agent) {
            needs.retain(|(k, g)| !(k == key && *g <= generation));
            if needs.is_empty() {
                self.intents_after.remove(&key.agent);
                self.save_intents(key.agent.clone());
                self.persister.flush();
            }
        }
        if let Some((count, needed)) = self.inbound_waiting.get(key)
            && *needed <= generation
        {
            self.inbound_durable += count;
            self.inbound_waiting.remove(key);
        }
        if self
            .waiting
            .get(key)
            .is_some_and(|(needed, _)| *needed <= generation)
            && let Some((_, start)) = self.waiting.remove(key)
        {
            self.spawn(start);
        }
    }

    /// Carries out the scheduler's effects, in order.
    fn execute(&mut self) {
        let mut generations: HashMap<ConversationKey, u64> = HashMap::new();
        let mut marks = HashMap::new();
        for effect in self.sched.take_effects() {
            match effect {
                Effect::Abort {
                    key,
                    graph_id,
                    task_id,
                } => {
                    if self
                        .running
                        .get(&key)
                        .is_some_and(|r| r.graph_id == graph_id && r.task_id == task_id)
                        && let Some(r) = self.running.remove(&key)
                    {
                        r.abort.abort();
                    }
                    if self
                        .waiting
                        .get(&key)
                        .is_some_and(|(_, s)| s.graph_id == graph_id && s.task.id == task_id)
                    {
                        self.waiting.remove(&key);
                    }
                }
                Effect::SaveAgentState(agent) => {
                    self.publish_agent_state(&agent);
                    let state = self
                        .sched
                        .safety()
                        .state(&agent)
                        .map(|s| s.without_marks())
                        .unwrap_or_default();
                    self.persister.submit(
                        Target::AgentState(agent.clone()),
                        Write::AgentState(agent, Box::new(state)),
                    );
                }
                Effect::SaveHandled { agent, chat, mark } => {
                    // Saved with the graph's deletion, which follows in this pass.
                    marks.insert(ConversationKey::new(agent, chat), mark);
                }
                Effect::StopAgent(agent) => {
                    self.svc.agents.remove(&agent);
                    self.svc.published.set_presence(&agent, None);
                }
                Effect::SaveDay {
                    agent,
                    day,
                    replaces,
                } => {
                    self.publish_schedule(&agent);
                    let target = Target::Day(agent.clone(), day.date.to_string());
                    self.persister
                        .submit(target, Write::Day(agent, day, replaces));
                }
                Effect::SaveIntents {
                    agent,
                    after: false,
                } => {
                    if !self.intents_after.contains_key(&agent) {
                        self.save_intents(agent);
                    }
                }
                Effect::SaveIntents { agent, after: true } => {
                    let needs: Vec<(ConversationKey, u64)> = generations
                        .iter()
                        .filter(|(k, _)| k.agent == agent)
                        .map(|(k, g)| (k.clone(), *g))
                        .collect();
                    if needs.is_empty() && !self.intents_after.contains_key(&agent) {
                        self.save_intents(agent);
                    } else {
                        self.intents_after.entry(agent).or_default().extend(needs);
                    }
                }
                Effect::Notable(n) => {
                    metrics::counter!("personad_events_total", "event" => n.event).increment(1);
                    self.svc.published.notable(n, self.svc.clock.now());
                }
                Effect::Presence { agent, change } => {
                    let now = self.svc.clock.now();
                    if let crate::core::scheduler::PresenceChange::Activity(a) = &change {
                        info!(event = "activity", agent = %agent, activity = %a.activity.name, responsiveness = a.activity.responsiveness, until = %a.until, "activity begins");
                    }
                    self.svc.published.presence_changed(&agent, change, now);
                }
                Effect::Persist(key) => {
                    let write = match self.sched.snapshot(&key) {
                        Some(graph) => Write::Graph(Box::new(graph)),
                        None => Write::DeleteGraph(key.clone(), marks.remove(&key)),
                    };
                    let generation = self.persister.submit(Target::Graph(key.clone()), write);
                    if let Some(count) = self.inbound_pass.remove(&key) {
                        let entry = self.inbound_waiting.entry(key.clone()).or_default();
                        entry.0 += count;
                        entry.1 = generation;
                    }
                    generations.insert(key, generation);
                }
                Effect::Start(start) => {
                    let target = Target::Graph(start.key.clone());
                    // Planning marks its message read, which takes it out of the unread scan:
                    // it starts only once the graph holding the message is durable, or a kill
                    // in between would lose the message.
                    let pending = (start.task.kind() == crate::core::graph::TaskKind::Received)
                        .then(|| self.persister.undurable(&target))
                        .flatten();
                    match generations.get(&start.key).copied().or(pending) {
                        Some(generation) => {
                            // The task waits for this write: it skips the bulk queue.
                            self.persister.make_urgent(&target);
                            self.waiting.insert(start.key.clone(), (generation, *start));
                        }
                        None => self.spawn(*start),
                    }
                }
            }
        }
        // A mark whose graph was not deleted in this pass (none so far) is saved on its own.
        for (key, mark) in marks {
            let (agent, chat) = (key.agent, key.chat);
            self.persister.submit(
                Target::Handled(agent.clone(), chat),
                Write::Handled { agent, chat, mark },
            );
        }
        // Inbound messages whose graph needed no write (none so far) count at once.
        for (_, count) in self.inbound_pass.drain() {
            self.inbound_durable += count;
        }
        self.persister.set_busy(self.sched.in_flight() > 0);
        self.persister.flush();
    }

    /// Spawns a task's handler under the task timeout; its result comes back as an event.
    fn spawn(&mut self, start: Start) {
        let Some(agent) = self.svc.agents.get(&start.key.agent) else {
            self.sched.forget_in_flight(&start.key);
            return;
        };
        let Start {
            key,
            graph_id,
            chat,
            task,
            presence,
            approval,
        } = start;
        let task_id = task.id.clone();
        let kind = task.kind();
        metrics::counter!("personad_tasks_started_total", "kind" => kind.as_str()).increment(1);
        self.sched.spawned(&key);
        let ctx = TaskContext {
            key: key.clone(),
            chat,
            task,
            persona: Arc::clone(&agent.persona),
            telegram: Arc::clone(&agent.telegram),
            planner: Arc::clone(&self.svc.planner),
            clock: Arc::clone(&self.svc.clock),
            config: Arc::clone(&self.svc.config),
            media: self.svc.media.clone(),
            voice: self.svc.voice.clone(),
            stickers: Arc::clone(&self.svc.stickers),
            facts: self.svc.facts.clone(),
            groups: self.svc.groups.clone(),
            retrieval: self.svc.retrieval.clone(),
            presence,
            approval,
        };
        let queue = Arc::clone(&self.svc.queue);
        let clock = Arc::clone(&self.svc.clock);
        let timeout = self.svc.config.task_timeout;
        let hold = self.svc.clock.hold();
        let (k, gid, tid) = (key.clone(), graph_id.clone(), task_id.clone());
        let join = tokio::spawn(clock::with_task_hold(hold, async move {
            let deadline = clock::add(clock.now(), timeout);
            let result = tokio::select! {
                r = handlers::handler_for(kind).run(&ctx) => r,
                _ = clock.sleep_until(deadline) => Err(TaskError::Transient(Cause::TimedOut(timeout))),
            };
            queue.push(Event::Finished {
                key: k,
                graph_id: gid,
                task_id: tid,
                result: Box::new(result),
            });
        }));
        self.running.insert(
            key,
            Running {
                graph_id,
                task_id,
                abort: join.abort_handle(),
            },
        );
    }

    fn publish(&self, now: Timestamp, next_wake: Option<Timestamp>) {
        let status = Status {
            next_wake: next_wake.filter(|at| *at > now),
            due: next_wake.is_some_and(|at| at <= now),
            graphs: self.sched.graphs(),
            dormant: self.sched.dormant(),
            in_flight: self.sched.in_flight(),
            orphaned: self.sched.orphans(),
            agents: self.sched.agents(),
            started: true,
            applied: self.applied,
            writes_pending: self.persister.pending(),
            writes_done: self.persister.written(),
            inbound_durable: self.inbound_durable,
            passes: self.passes,
            stopped: false,
        };
        self.svc.status_tx.send_replace(status);
    }

    /// Sleeps until an event arrives or the deadline passes; returns a hold on the clock
    /// taken at wake-up. The loop's own hold is released only after the timer is registered,
    /// and a timer that may already have been woken is dropped only after a new hold is
    /// taken, so virtual time can never move between waking and reacting.
    async fn sleep(&self, deadline: Option<Timestamp>, hold: Hold) -> Option<Hold> {
        let mut timer = deadline.map(|at| self.svc.clock.sleep_until(at));
        drop(hold);
        let fired = match timer.as_mut() {
            Some(t) => {
                tokio::select! {
                    biased;
                    wake = t => Some(wake),
                    () = self.svc.queue.notified() => None,
                }
            }
            None => {
                self.svc.queue.notified().await;
                None
            }
        };
        match fired {
            Some(wake) => Some(wake),
            None => {
                let held = self.svc.clock.hold();
                drop(timer);
                Some(held)
            }
        }
    }
}

/// The zone an agent's schedule and intents are in: its `Agent Timezone`, else the host's.
pub(crate) fn presence_zone(persona: &crate::core::persona::Persona) -> jiff::tz::TimeZone {
    persona
        .timezone
        .clone()
        .unwrap_or_else(|| jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC))
}
