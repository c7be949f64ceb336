//! The fleet: the one owner of the running agents. It connects accounts, builds each agent's
//! group gate and starts its update pump, and applies reloads (new, changed, removed and
//! broken persona files) to the runtime.

use super::*;

impl Fleet {
    pub(super) fn new(
        global: GlobalArgs,
        backend: Backend,
        state: StateDir,
        clock: &SharedClock,
        stop: CancellationToken,
        group: GroupWiring,
    ) -> Fleet {
        Fleet {
            global,
            backend,
            state,
            clock: Arc::clone(clock),
            stop,
            running: BTreeMap::new(),
            reported: BTreeSet::new(),
            pumps: Vec::new(),
            group,
            retune: std::sync::Mutex::default(),
        }
    }

    /// Logs each new problem of the report once.
    pub(super) fn report_problems(&mut self, report: &LoadReport, starting: bool) {
        // A problem is reported once per version of its file: the same file read again stays
        // quiet, a new edit with the same mistake is reported again; forget what is gone.
        let key = |e: &crate::core::persona::PersonaEntry, p: &crate::core::persona::Problem| {
            format!("{:016x} {p}", e.fingerprint)
        };
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
                    let kept = self.running.values().any(|r| r.path == entry.path);
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
    pub(super) async fn open(
        &self,
        persona: &Persona,
    ) -> Result<(Seat, Option<Connected>), crate::app::ops::OpError> {
        match &self.backend {
            Backend::Mtproto {
                creds,
                opts,
                governor,
            } => {
                let connected = mtproto::connect(
                    &self.state,
                    &persona.name,
                    creds,
                    *opts,
                    Arc::clone(&self.clock),
                )
                .await
                .map_err(crate::app::ops::OpError::of)?;
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
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(
                        persona.name.clone(),
                        Box::new(move |limits| g.set_config(base.clone().with_limits(limits))),
                    );
                let seat = Seat {
                    telegram: governed,
                    memory: None,
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
                .await
                .map_err(crate::app::ops::OpError::of)?
                .map_err(crate::app::ops::OpError::of)?;
                memory.set_send_delay(send_delay);
                let memory = Arc::new(memory);
                world.join(&memory);
                let seat = Seat {
                    telegram: memory.clone() as Arc<dyn Telegram>,
                    memory: Some(memory),
                };
                Ok((seat, None))
            }
        }
    }

    /// Builds the agent's group gate (trigger modes, classifier, share of voice) and, for an
    /// MTProto agent, starts its update pump with that gate; returns the pump's stop token.
    pub(super) fn pump(
        &mut self,
        persona: &Arc<Persona>,
        seat: &Seat,
        connected: Option<Connected>,
        handle: RuntimeHandle,
    ) -> Option<CancellationToken> {
        let stop = self.stop.child_token();
        let opts = match &self.backend {
            Backend::Mtproto { opts, .. } => Some(*opts),
            Backend::Memory { .. } => None,
        };
        let me = seat.telegram.self_id();
        // Every persona's gate reads the one shared set, so one started later is a peer too.
        self.group
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(me);
        let peers = Arc::clone(&self.group.peers);
        let (clock, s, agent) = (Arc::clone(&self.clock), stop.clone(), persona.name.clone());
        let group = self.group.clone();
        let gate = GroupGate::new(GateConfig {
            agent: agent.clone(),
            // Telegram flags mentions of our @username as callouts.
            identity: identity_for(persona, me, None),
            persona: Arc::clone(persona),
            telegram: Arc::clone(&seat.telegram),
            runtime: handle.clone(),
            classifier: group.classifier,
            classifier_model: Some(group.classifier_model),
            clock: Arc::clone(&clock),
            peers,
            // Per-chat overrides come from the agent state the runtime reads (no second read
            // of that file), through the handle.
            modes: Default::default(),
        });
        group.groups.insert(&agent, gate);
        let (Some(connected), Some(opts)) = (connected, opts) else {
            if let (Some(memory), Backend::Memory { world, .. }) =
                (seat.memory.clone(), &self.backend)
            {
                // What the other personas (and people in shared groups) write reaches this
                // agent through the admission chain, as a real account's pump delivers it.
                world.attach(
                    me,
                    Arc::new(RuntimeSink {
                        agent: agent.clone(),
                        runtime: handle.clone(),
                        groups: Arc::clone(&group.groups),
                    }),
                );
                // The in-memory Telegram's unread scan, as a real account's connect does: a
                // message left unplanned by a crash is planned now (the runtime's handled
                // marks keep an answered one from being planned twice).
                self.pumps.push(tokio::spawn(async move {
                    handle.wait_agent_state(&agent).await;
                    for (chat, message) in memory.unread() {
                        tracing::info!(event = "unanswered_replanned", agent = %agent, chat = %chat.id, message_id = message.id.0, "a message of the previous run was never planned: planning it now");
                        handle.push_inbound(&agent, chat, message, true);
                    }
                }));
            }
            return None;
        };
        self.pumps.push(tokio::spawn(async move {
            // Let the runtime read the agent's state (its trigger modes) before the first
            // updates reach the gate.
            handle.wait_agent_state(&agent).await;
            let sink = Arc::new(RuntimeSink {
                agent: agent.clone(),
                runtime: handle,
                groups: group.groups,
            });
            if let Err(e) = connected.serve(agent.clone(), sink, opts, clock, s).await {
                tracing::error!(event = "pump_stopped", agent = %agent, error = %e, "update pump stopped");
            }
        }));
        Some(stop)
    }

    /// Re-reads persona and role-prompt files and applies the difference to the running
    /// agents: changed personas take effect from their next task, new ones start, removed
    /// or disabled ones stop (their graphs stay on disk), a broken edit keeps the previous
    /// version, and a changed `Agent Phone` is refused until a restart.
    pub(super) async fn reload(&mut self, handle: &RuntimeHandle, controller: &Controller) {
        let keep = self
            .running
            .iter()
            .map(|(name, r)| (name.to_lowercase(), r.path.clone()))
            .collect();
        let report = match reload_personas(&self.global, keep).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(event = "reload_failed", error = %e, "reload failed: every agent keeps running as it was");
                return;
            }
        };
        self.report_problems(&report, false);
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
                            .retune
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
                None => match self.open(p).await {
                    Ok((seat, connected)) => {
                        let persona = Arc::new(p.clone());
                        controller.add_agent(&p.name, seat.clone());
                        handle.upsert_agent(AgentHandle {
                            persona: Arc::clone(&persona),
                            telegram: Arc::clone(&seat.telegram),
                        });
                        let pump_stop = self.pump(&persona, &seat, connected, handle.clone());
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
                controller.remove_agent(&name);
                self.retune
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&name);
                self.group.groups.remove(&name);
                if let Backend::Memory { world, .. } = &self.backend {
                    world.leave(r.seat.telegram.self_id());
                }
                handle.remove_agent(&name, "its persona file was removed or disabled");
            }
        }
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
