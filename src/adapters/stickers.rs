//! The persona's curated stickers: the sets named in `Agent Sticker Sets` (bounded) and the
//! single stickers of `Agent Stickers` (only those, never their whole sets), loaded lazily
//! through the Telegram trait the first time an agent plans, and again later only for sets
//! that failed. It owns no I/O of its own and no descriptions: the `received` handler adds
//! cached descriptions, the prompt builder lists them, the `sticker` handler resolves names.
//! It implements the stickers port (`ports::stickers::StickerLookup`) the runtime holds.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;

use crate::core::model::{CuratedSticker, MAX_PER_SET};
use crate::core::persona::Persona;
use crate::core::time::BoxFuture;
use crate::ports::clock;
use crate::ports::telegram::Telegram;

/// How long a set that could not be fetched is left alone before the next try.
const RETRY_FAILED_SET: Duration = Duration::from_secs(600);

#[derive(Default)]
struct AgentEntry {
    /// Loaded stickers by set, in persona order.
    sets: BTreeMap<usize, (String, Vec<CuratedSticker>)>,
    /// Sets that failed, and when they may be tried again.
    failed: HashMap<String, Timestamp>,
    loaded: bool,
}

/// Curated stickers of every agent of the process.
#[derive(Default)]
pub struct StickerCatalog {
    agents: Mutex<HashMap<String, AgentEntry>>,
}

impl StickerCatalog {
    pub fn new() -> StickerCatalog {
        StickerCatalog::default()
    }

    /// The persona's curated stickers (without descriptions), loading what is missing.
    pub async fn curated(
        &self,
        persona: &Persona,
        telegram: &dyn Telegram,
        now: Timestamp,
    ) -> Vec<CuratedSticker> {
        // Which sets to fetch: each curated set, and each set of an explicit sticker.
        let mut wanted: Vec<(usize, String, Option<Vec<String>>)> = Vec::new();
        for (i, set) in persona.sticker_sets.iter().enumerate() {
            wanted.push((i, set.clone(), None));
        }
        let base = persona.sticker_sets.len();
        let mut explicit: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for st in &persona.stickers {
            explicit
                .entry(st.set.clone())
                .or_default()
                .push(st.name.clone());
        }
        for (j, (set, names)) in explicit.into_iter().enumerate() {
            wanted.push((base + j, set, Some(names)));
        }
        let todo: Vec<(usize, String, Option<Vec<String>>)> = {
            let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = agents.get(&persona.name);
            wanted
                .into_iter()
                .filter(|(i, set, _)| {
                    entry.is_none_or(|e| {
                        !e.sets.contains_key(i)
                            && e.failed.get(set).is_none_or(|retry| *retry <= now)
                    })
                })
                .collect()
        };
        for (i, set, only) in todo {
            let result = telegram.sticker_set(&set).await;
            let mut agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = agents.entry(persona.name.clone()).or_default();
            match result {
                Ok(list) => {
                    let chosen: Vec<CuratedSticker> = list
                        .into_iter()
                        .filter(|s| only.as_ref().is_none_or(|names| names.contains(&s.name)))
                        .take(MAX_PER_SET)
                        .map(|s| CuratedSticker {
                            set: set.clone(),
                            name: s.name,
                            unique_id: s.unique_id,
                            description: None,
                        })
                        .collect();
                    if let Some(names) = &only {
                        for name in names
                            .iter()
                            .filter(|n| !chosen.iter().any(|c| &c.name == *n))
                        {
                            tracing::warn!(agent = %persona.name, set = %set, name = %name, "curated sticker not found in its set");
                        }
                    }
                    entry.failed.remove(&set);
                    entry.sets.insert(i, (set, chosen));
                }
                Err(e) => {
                    tracing::warn!(agent = %persona.name, set = %set, error = %e, "could not load a curated sticker set; will try again later");
                    entry.failed.insert(set, clock::add(now, RETRY_FAILED_SET));
                }
            }
            entry.loaded = true;
        }
        let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        agents
            .get(&persona.name)
            .map(|e| {
                e.sets
                    .values()
                    .flat_map(|(_, list)| list.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A curated sticker of this agent with this name, in any loaded set.
    pub(crate) fn find_by_name(&self, agent: &str, name: &str) -> Option<CuratedSticker> {
        let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        agents.get(agent).and_then(|e| {
            e.sets
                .values()
                .flat_map(|(_, list)| list.iter())
                .find(|s| s.name == name)
                .cloned()
        })
    }
}

impl crate::ports::stickers::StickerLookup for StickerCatalog {
    fn curated<'a>(
        &'a self,
        persona: &'a Persona,
        telegram: &'a dyn Telegram,
        now: Timestamp,
    ) -> BoxFuture<'a, Vec<CuratedSticker>> {
        Box::pin(StickerCatalog::curated(self, persona, telegram, now))
    }

    fn find_by_name(&self, agent: &str, name: &str) -> Option<CuratedSticker> {
        StickerCatalog::find_by_name(self, agent, name)
    }
}
