//! The fleet: the one owner of the running agents. [`Accounts`] opens an agent's account
//! (MTProto, connected and governed, or in-memory in the shared world) and reports persona
//! problems once per file version; [`Fleet`], built once the runtime, the admission chain and
//! the owner controls exist, builds each agent's group gate, starts its update pump as a
//! task of the daemon's lifecycle, and applies reloads (new, changed, removed and broken
//! persona files) to the runtime. Called by `daemon`; its reloads run in the one reloader.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::adapters::governor::Governor;
use crate::adapters::memory::MemoryTelegram;
use crate::adapters::mtproto::{self, Connected};
use crate::adapters::store::StateDir;
use crate::app::cli::GlobalArgs;
use crate::app::commands::reload_personas;
use crate::app::daemon::backend::{Backend, SimLink};
use crate::app::daemon::health::status_line;
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::app::ops::controls::{Controller, Seat, SimSeat};
use crate::app::ops::reload::Reload;
use crate::app::ops::sdnotify::Notifier;
use crate::core::persona::{LoadReport, Persona, PersonaEntry, Problem, SendLimits};
use crate::ingress::Ingress;
use crate::ingress::classifier::Classifier;
use crate::ingress::gate::{GateConfig, GroupGate, identity_for};
use crate::ingress::sink::RuntimeSink;
use crate::ports::clock::SharedClock;
use crate::ports::telegram::Telegram;
use crate::runtime::AgentHandle;

/// Sets a running governor's limits from a persona's `# Send Limits`.
type Retune = Box<dyn Fn(&SendLimits) + Send>;

/// How the daemon opens accounts, and what it keeps to retune them.
pub(crate) struct Accounts {
    pub(crate) global: GlobalArgs,
    pub(crate) backend: Backend,
    pub(crate) state: StateDir,
    pub(crate) clock: SharedClock,
    /// Per MTProto agent: applies a persona's `# Send Limits` to its running governor.
    retune: Mutex<BTreeMap<String, Retune>>,
    /// Problems already logged, so a broken file is reported once, not at every reload.
    reported: BTreeSet<String>,
    /// The chats each persona has known: an opened account's sends are noted there.
    pub(crate) chats: Option<Arc<crate::app::ops::controls::ChatIndex>>,
    /// Which agents this process runs (`--shard`, `--agent`), applied at each reload.
    pub(crate) selection: crate::core::shard::Selection,
    /// The session leases (taken before an account opens).
    pub(crate) leases: Option<Arc<super::leases::LeaseKeeper>>,
}

/// An agent whose account is connected, ready to join the runtime.
pub(crate) type Opened = (PathBuf, Arc<Persona>, Seat, Option<Connected>);

/// One running agent.
struct Running {
    path: PathBuf,
    persona: Arc<Persona>,
    seat: Seat,
    pump_stop: Option<CancellationToken>,
}

/// What each agent's group gate is built with: the classifier and its model.
pub(crate) struct GroupSettings {
    pub(crate) classifier: Option<Classifier>,
    pub(crate) classifier_model: String,
}

/// The running agents and what they need to start, stop and reload.
pub(crate) struct Fleet {
    accounts: Accounts,
    ingress: Ingress,
    controller: Arc<Controller>,
    life: Lifecycle,
    notifier: Notifier,
    groups: GroupSettings,
    /// Every persona's gate reads this one set, so one started later is a peer too.
    peers: crate::ingress::gate::Peers,
    running: BTreeMap<String, Running>,
}

impl Accounts {
    pub(crate) fn new(
        global: GlobalArgs,
        backend: Backend,
        state: StateDir,
        clock: &SharedClock,
    ) -> Accounts {
        Accounts {
            global,
            backend,
            state,
            clock: Arc::clone(clock),
            retune: Mutex::default(),
            chats: None,
            reported: BTreeSet::new(),
            selection: crate::core::shard::Selection::All,
            leases: None,
        }
    }

    /// Logs each new problem of the report once.
    pub(crate) fn report_problems(
        &mut self,
        report: &LoadReport,
        starting: bool,
        running: &BTreeSet<PathBuf>,
    ) {
        // A problem is reported once per version of its file: the same file read again stays
        // quiet, a new edit with the same mistake is reported again; forget what is gone.
        let key = |e: &PersonaEntry, p: &Problem| format!("{:016x} {p}", e.fingerprint);
        let current: BTreeSet<String> = report
            .entries
            .iter()
            .flat_map(|e| {
                e.problems
                    .iter()
                    .filter(|p| p.is_error())
                    .map(|p| key(e, p))
            })
            .collect();
        self.reported.retain(|p| current.contains(p));
        for entry in &report.entries {
            for p in entry.problems.iter().filter(|p| p.is_error()) {
                let text = p.to_string();
                if self.reported.insert(key(entry, p)) {
                    let kept = running.contains(&entry.path);
                    if starting {
                        tracing::error!(event = "agent_not_started", problem = %text, "agent not started");
                    } else if kept {
                        tracing::error!(event = "persona_edit_rejected", problem = %text, "persona edit rejected: the previous version keeps running");
                    } else {
                        tracing::error!(event = "persona_invalid", problem = %text, "persona file unusable");
                    }
                }
            }
        }
    }

    /// Opens an agent's account: MTProto (connected, not yet pumping) or in-memory.
    pub(crate) async fn open(
        &self,
        persona: &Persona,
    ) -> Result<(Seat, Option<Connected>), OpError> {
        // The session lease first: a session another process holds is never opened here.
        if let Some(leases) = &self.leases {
            leases.take(&persona.name).await?;
        }
        let opened = self.open_account(persona).await;
        let (mut seat, connected) = match opened {
            Ok(o) => o,
            Err(e) => {
                if let Some(leases) = &self.leases {
                    leases.release(&persona.name).await;
                }
                return Err(e);
            }
        };
        if let Some(chats) = &self.chats {
            seat.telegram = chats.noting(&persona.name, seat.telegram);
        }
        Ok((seat, connected))
    }

    /// [`Accounts::open`] without the noting of sends.
    async fn open_account(&self, persona: &Persona) -> Result<(Seat, Option<Connected>), OpError> {
        match &self.backend {
            Backend::Mtproto {
                creds,
                opts,
                governor,
                sim,
            } => {
                if let Some(link) = sim {
                    sim_session(&self.state, &persona.name, link).await?;
                }
                let connected = mtproto::connect(
                    &self.state,
                    &persona.name,
                    creds,
                    *opts,
                    Arc::clone(&self.clock),
                )
                .await?;
                // The persona's `# Send Limits` over the daemon's figures (again at each
                // reload that changes them).
                let governed = Arc::new(Governor::new(
                    connected.telegram.clone(),
                    Arc::clone(&self.clock),
                    governor.clone().with_limits(&persona.send_limits),
                ));
                let (g, base) = (Arc::clone(&governed), governor.clone());
                self.retune
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(
                        persona.name.clone(),
                        Box::new(move |limits| g.set_config(base.clone().with_limits(limits))),
                    );
                let seat = Seat {
                    telegram: governed,
                    memory: None,
                    sim: sim.as_ref().and_then(SimLink::sim).map(|sim| SimSeat {
                        me: sim.account(&persona.name),
                        sim,
                    }),
                };
                Ok((seat, Some(connected)))
            }
            Backend::Memory { send_delay, world } => {
                let send_delay = *send_delay;
                let (name, clock) = (persona.name.clone(), Arc::clone(&self.clock));
                let dir = self.state.memory_dir(&persona.name);
                let old = self.state.facts_dir(&persona.name);
                let memory = tokio::task::spawn_blocking(move || {
                    crate::adapters::memory::adopt_old_transcripts(&old, &dir)?;
                    crate::adapters::store::ensure_private_dir(&dir)?;
                    MemoryTelegram::new(&name, clock, Some(dir))
                })
                .await??;
                memory.set_send_delay(send_delay);
                // Nothing reads a daemon's recorded actions: keep few in a long run.
                memory.set_actions_kept(256);
                let memory = Arc::new(memory);
                world.join(&memory);
                let seat = Seat {
                    telegram: memory.clone() as Arc<dyn Telegram>,
                    memory: Some(memory),
                    sim: None,
                };
                Ok((seat, None))
            }
        }
    }
}

/// Makes (or re-points) an agent's session on the simulated Telegram, after making its
/// account there when the simulator runs in this daemon.
async fn sim_session(state: &StateDir, agent: &str, link: &SimLink) -> Result<(), OpError> {
    if let Some(sim) = link.sim() {
        sim.account(agent);
    }
    let path = mtproto::session::session_path(state, agent, mtproto::Servers::Sim);
    let dir = path.parent().map(std::path::Path::to_path_buf);
    if let Some(dir) = dir {
        tokio::task::spawn_blocking(move || crate::adapters::store::ensure_private_dir(&dir))
            .await??;
    }
    mtproto::sim::prepare_session(&path, agent, link.addr)
        .await
        .map_err(|e| {
            OpError::from(mtproto::ConnectError::Open {
                path: e.path,
                message: e.message,
            })
        })
}

impl Fleet {
    pub(crate) fn new(
        accounts: Accounts,
        ingress: Ingress,
        controller: Arc<Controller>,
        life: Lifecycle,
        notifier: Notifier,
        groups: GroupSettings,
    ) -> Fleet {
        Fleet {
            accounts,
            ingress,
            controller,
            life,
            notifier,
            groups,
            peers: crate::ingress::gate::peers([]),
            running: BTreeMap::new(),
        }
    }

    /// Starts the agents opened at start-up: each joins the owner's roster, gets its group
    /// gate and its update pump.
    pub(crate) fn start(&mut self, opened: Vec<Opened>) {
        for (path, persona, seat, connected) in opened {
            self.controller.add_agent(&persona.name, seat.clone());
            let pump_stop = self.pump(&persona, &seat, connected);
            self.running.insert(
                persona.name.clone(),
                Running {
                    path,
                    persona,
                    seat,
                    pump_stop,
                },
            );
        }
    }

    /// Builds the agent's group gate (trigger modes, classifier, share of voice) and, for an
    /// MTProto agent, starts its update pump with that gate; returns the pump's stop token.
    pub(crate) fn pump(
        &mut self,
        persona: &Arc<Persona>,
        seat: &Seat,
        connected: Option<Connected>,
    ) -> Option<CancellationToken> {
        let stop = self.life.stop_token().child_token();
        // A lost session lease stops the pump at once.
        if let Some(lost) = self
            .accounts
            .leases
            .as_ref()
            .and_then(|l| l.lost_token(&persona.name))
        {
            let s = stop.clone();
            self.life.spawn(async move {
                tokio::select! {
                    () = lost.cancelled() => s.cancel(),
                    () = s.cancelled() => {}
                }
            });
        }
        let handle = self.ingress.runtime().clone();
        let opts = match &self.accounts.backend {
            Backend::Mtproto { opts, .. } => Some(*opts),
            Backend::Memory { .. } => None,
        };
        let me = seat.telegram.self_id();
        // Every persona's gate reads the one shared set, so one started later is a peer too.
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(me);
        let peers = Arc::clone(&self.peers);
        let (clock, s, agent) = (
            Arc::clone(&self.accounts.clock),
            stop.clone(),
            persona.name.clone(),
        );
        let gate = GroupGate::new(GateConfig {
            agent: agent.clone(),
            // Telegram flags mentions of our @username as callouts.
            identity: identity_for(persona, me, None),
            persona: Arc::clone(persona),
            telegram: Arc::clone(&seat.telegram),
            runtime: handle.clone(),
            classifier: self.groups.classifier.clone(),
            classifier_model: Some(self.groups.classifier_model.clone()),
            clock: Arc::clone(&clock),
            peers,
            // The owner's per-chat modes come from the agent state the runtime holds,
            // through the handle; no session override in the daemon.
            modes: Default::default(),
        });
        self.ingress.groups().insert(&agent, gate);
        let (Some(connected), Some(opts)) = (connected, opts) else {
            if let (Some(memory), Backend::Memory { world, .. }) =
                (seat.memory.clone(), &self.accounts.backend)
            {
                // What the other personas (and people in shared groups) write reaches this
                // agent through the admission chain, as a real account's pump delivers it.
                world.attach(
                    me,
                    Arc::new(RuntimeSink {
                        agent: agent.clone(),
                        ingress: self.ingress.clone(),
                    }),
                );
                // The in-memory Telegram's unread scan, as a real account's connect does: a
                // message left unplanned by a crash is planned now (the runtime's handled
                // marks keep an answered one from being planned twice).
                let ingress = self.ingress.clone();
                self.life.spawn(async move {
                    handle.wait_agent_state(&agent).await;
                    // Ids never restart under a handled mark (a quarantined transcript).
                    if let Some(state) = handle.agent_state(&agent) {
                        memory.raise_ids(&state.handled_messages());
                    }
                    for (chat, message) in memory.unread() {
                        tracing::info!(event = "unanswered_replanned", agent = %agent, chat = %chat.id, message_id = message.id.0, "a message of the previous run was never planned: planning it now");
                        ingress.push(&agent, chat, message, true);
                    }
                });
            }
            return None;
        };
        let ingress = self.ingress.clone();
        self.life.spawn(async move {
            // Let the runtime read the agent's state (its trigger modes, pauses) before the
            // first updates reach the chain.
            handle.wait_agent_state(&agent).await;
            let sink = Arc::new(RuntimeSink {
                agent: agent.clone(),
                ingress,
            });
            if let Err(e) = connected.serve(agent.clone(), sink, opts, clock, s).await {
                tracing::error!(event = "pump_stopped", agent = %agent, error = %e, "update pump stopped");
            }
        });
        Some(stop)
    }

    /// Re-reads persona and role-prompt files and applies the difference to the running
    /// agents: changed personas take effect from their next task, new ones start, removed
    /// or disabled ones stop (their graphs stay on disk), a broken edit keeps the previous
    /// version, and a changed `Agent Phone` is refused until a restart.
    async fn reload_files(&mut self) {
        let handle = self.ingress.runtime().clone();
        let keep = self
            .running
            .iter()
            .map(|(name, r)| (name.to_lowercase(), r.path.clone()))
            .collect();
        let report = match reload_personas(&self.accounts.global, keep)
            .await
            .and_then(|mut r| {
                crate::app::shards::select(&mut r, &self.accounts.selection).map(|()| r)
            }) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(event = "reload_failed", error = %e, "reload failed: every agent keeps running as it was");
                return;
            }
        };
        let paths = self.running.values().map(|r| r.path.clone()).collect();
        self.accounts.report_problems(&report, false, &paths);
        let mut keep: BTreeSet<String> = BTreeSet::new();
        for entry in &report.entries {
            let Some(p) = &entry.persona else {
                if let Some(name) = self
                    .running
                    .iter()
                    .find(|(_, r)| r.path == entry.path)
                    .map(|(n, _)| n.clone())
                {
                    keep.insert(name);
                }
                continue;
            };
            if p.disabled {
                continue;
            }
            keep.insert(p.name.clone());
            match self.running.get_mut(&p.name) {
                Some(r) if r.persona.phone != p.phone => {
                    tracing::error!(event = "reload_phone_refused", agent = %p.name, file = %entry.path.display(), "Agent Phone changed: that needs a restart; the previous persona keeps running");
                }
                Some(r) => {
                    if r.persona.send_limits != p.send_limits
                        && let Some(retune) = self
                            .accounts
                            .retune
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .get(&p.name)
                    {
                        tracing::info!(event = "send_limits_changed", agent = %p.name, limits = ?p.send_limits, "the persona's send limits apply from the next message");
                        retune(&p.send_limits);
                    }
                    if changed(&r.persona, p) {
                        r.persona = Arc::new(p.clone());
                        r.path = entry.path.clone();
                        handle.upsert_agent(AgentHandle {
                            persona: Arc::clone(&r.persona),
                            telegram: Arc::clone(&r.seat.telegram),
                        });
                    }
                }
                None => match self.accounts.open(p).await {
                    Ok((seat, connected)) => {
                        let persona = Arc::new(p.clone());
                        self.controller.add_agent(&p.name, seat.clone());
                        handle.upsert_agent(AgentHandle {
                            persona: Arc::clone(&persona),
                            telegram: Arc::clone(&seat.telegram),
                        });
                        let pump_stop = self.pump(&persona, &seat, connected);
                        self.running.insert(
                            p.name.clone(),
                            Running {
                                path: entry.path.clone(),
                                persona,
                                seat,
                                pump_stop,
                            },
                        );
                    }
                    Err(e) => {
                        tracing::error!(event = "agent_start_failed", agent = %p.name, error = %e, "new agent cannot start");
                    }
                },
            }
        }
        let gone: Vec<String> = self
            .running
            .keys()
            .filter(|n| !keep.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = self.running.remove(&name) {
                if let Some(s) = r.pump_stop {
                    s.cancel();
                }
                self.controller.remove_agent(&name);
                self.accounts
                    .retune
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&name);
                self.ingress.groups().remove(&name);
                if let Backend::Memory { world, .. } = &self.accounts.backend {
                    world.leave(r.seat.telegram.self_id());
                }
                handle.remove_agent(
                    &name,
                    "its persona file was removed or disabled, or it left this shard",
                );
                if let Some(leases) = &self.accounts.leases {
                    leases.release(&name).await;
                }
            }
        }
    }
}

impl Reload for Fleet {
    async fn reload(&mut self) {
        self.notifier.reloading();
        tracing::info!(
            event = "reload_started",
            "reloading personas and role prompts"
        );
        self.reload_files().await;
        let st = self.ingress.runtime().status();
        self.notifier.ready(&status_line(&st));
        tracing::info!(
            event = "reload_done",
            agents = self.running.len(),
            "reload done"
        );
    }
}

/// Whether a reloaded persona differs from the running one in anything the runtime uses: its
/// `Debug` form (which leaves out the schedule's prose, the group settings and the first-turn
/// text, to keep logs short) and those.
fn changed(running: &Persona, loaded: &Persona) -> bool {
    let whole = |p: &Persona| {
        format!(
            "{p:?}{:?}{:?}{:?}",
            p.daily_schedule, p.group, p.start_of_conversation
        )
    };
    whole(running) != whole(loaded)
}
