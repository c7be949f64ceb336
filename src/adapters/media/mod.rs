//! Media understanding: turns the photos, stickers, videos, voice notes and documents of a
//! chat into cached text descriptions the prompt builder can render. It owns the description
//! record ([`MediaRecord`]), the cache tiers (in-memory moka → operator-curated directory →
//! generated records under `state/media/` → the LLM), the per-pass budget, the global cap on
//! description calls in flight, per-item and per-sticker-set backoff of failures, and the
//! describe prompts (embedded defaults, overridable from a directory).
//!
//! It must not build chat prompts (that is `prompt`, which only reads the records handed to
//! it) nor write files itself: it serializes its records and saves them through `store`'s
//! crash-safe writes, at paths from the state layout, off the async threads. What describing
//! one medium takes is decided in `plan`. The `received` handler calls it through the
//! media port (`ports::media::MediaDescriber`) before planning; start-up code (daemon,
//! playground) builds one pipeline and gives it to the runtime.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::adapters::store::{self, StateDir, StoreError};
use crate::core::llm::{LlmOutcome, LlmRequest, Part, Turn};
use crate::core::media::{MediaDescriptions, MediaRecord, MediaStatus};
use crate::core::model::{ChatId, MediaInfo, Message, MessageId, TelegramError};
use crate::core::time::BoxFuture;
use crate::ports::backoff::Backoff;
use crate::ports::clock::{self, SharedClock};
use crate::ports::llm::{Llm, LlmError};
use crate::ports::telegram::Telegram;

mod plan;

pub use plan::{
    DEFAULT_BUDGET_PER_PASS, DEFAULT_MEDIA_MODEL, MediaConfig, MediaPrompts, sniff_mime,
};
use plan::{
    Family, MAX_DESCRIPTION_CHARS, NOT_UNDERSTOOD, Plan, accepted, metadata_description, plan_for,
};

/// An item being described; dropping it lets other passes describe the item again.
struct Claim {
    pipeline: Arc<MediaPipeline>,
    id: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.pipeline.release(&self.id);
    }
}

#[derive(Debug, Clone, Copy)]
struct SetBackoff {
    failures: u32,
    until: Timestamp,
}

/// The shared description pipeline (one per process).
/// The name media descriptions' token usage is summed under.
pub(crate) const MEDIA_USAGE_AGENT: &str = "(media)";

pub struct MediaPipeline {
    config: MediaConfig,
    prompts: MediaPrompts,
    llm: Arc<dyn Llm>,
    state: StateDir,
    clock: SharedClock,
    memory: moka::future::Cache<String, Arc<MediaRecord>>,
    in_flight: Arc<Semaphore>,
    describing: Mutex<HashSet<String>>,
    set_backoff: Mutex<HashMap<String, SetBackoff>>,
    calls: AtomicUsize,
    usage: Option<Arc<crate::adapters::llm::usage::UsageMeter>>,
}

impl MediaPipeline {
    pub fn new(
        config: MediaConfig,
        prompts: MediaPrompts,
        llm: Arc<dyn Llm>,
        state: StateDir,
        clock: SharedClock,
    ) -> MediaPipeline {
        let memory = moka::future::Cache::builder()
            .max_capacity(config.memory_capacity)
            .time_to_live(config.memory_ttl)
            .build();
        MediaPipeline {
            in_flight: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
            config,
            prompts,
            llm,
            state,
            clock,
            memory,
            describing: Mutex::new(HashSet::new()),
            set_backoff: Mutex::new(HashMap::new()),
            calls: AtomicUsize::new(0),
            usage: None,
        }
    }

    /// Sums the describe calls' token usage in `meter`, under the agent name
    /// [`MEDIA_USAGE_AGENT`] (descriptions are cached and shared by every agent).
    pub(crate) fn with_usage(
        mut self,
        meter: Arc<crate::adapters::llm::usage::UsageMeter>,
    ) -> MediaPipeline {
        self.usage = Some(meter);
        self
    }

    /// Builds a pipeline, reading prompt overrides from `prompts_dir` off the async threads.
    pub async fn load(
        config: MediaConfig,
        prompts_dir: Option<PathBuf>,
        llm: Arc<dyn Llm>,
        state: StateDir,
        clock: SharedClock,
    ) -> Result<MediaPipeline, StoreError> {
        let prompts =
            tokio::task::spawn_blocking(move || MediaPrompts::load(prompts_dir.as_deref()))
                .await
                .map_err(|e| StoreError::Io {
                    action: "cannot load media prompts from",
                    path: PathBuf::from("."),
                    source: std::io::Error::other(e.to_string()),
                })??;
        Ok(MediaPipeline::new(config, prompts, llm, state, clock))
    }

    /// The cached records (memory, curated directory, disk) of these media ids; starts no
    /// description. Used for the curated sticker list.
    pub async fn cached(&self, ids: Vec<String>) -> MediaDescriptions {
        let mut out = MediaDescriptions::new();
        let mut missing = Vec::new();
        for id in ids {
            match self.memory.get(&id).await {
                Some(r) => {
                    out.insert(id, (*r).clone());
                }
                None => missing.push(id),
            }
        }
        if !missing.is_empty() {
            for r in self.load_from_disk(missing).await {
                self.memory
                    .insert(r.unique_id.clone(), Arc::new(r.clone()))
                    .await;
                out.insert(r.unique_id.clone(), r);
            }
        }
        out
    }

    /// The records of every medium in `history` (cache tiers only), after starting at most
    /// the budget of new descriptions, newest media first, and waiting for them. Media over
    /// budget, in backoff or being described elsewhere have no usable record yet and render
    /// as "not described yet"; later passes pick them up.
    pub(crate) async fn describe_pass(
        self: &Arc<Self>,
        telegram: Arc<dyn Telegram>,
        chat: ChatId,
        history: &[Message],
    ) -> MediaDescriptions {
        let now = self.clock.now();
        let mut seen = HashSet::new();
        let mut items: Vec<(MessageId, MediaInfo)> = Vec::new();
        for m in history.iter().rev() {
            if let Some(media) = &m.media
                && seen.insert(media.unique_id.clone())
            {
                items.push((m.id, (**media).clone()));
            }
        }
        let mut out = self
            .cached(items.iter().map(|(_, m)| m.unique_id.clone()).collect())
            .await;
        let mut budget = self.config.budget_per_pass;
        let mut jobs = JoinSet::new();
        for (msg, media) in items {
            let previous = out.get(&media.unique_id).cloned();
            if previous.as_ref().is_some_and(|r| !r.retry_due(now)) {
                continue;
            }
            if self.set_in_backoff(&media, now) {
                continue;
            }
            let plan = plan_for(&media, &self.config);
            if let Plan::FromMetadata = plan {
                let mut r = MediaRecord::new(&media, now);
                r.description = Some(metadata_description(&media));
                r.status = MediaStatus::Ok;
                self.remember(r.clone()).await;
                out.insert(media.unique_id.clone(), r);
                continue;
            }
            if let Plan::Unsupported(reason) = plan {
                tracing::debug!(media = %media.unique_id, reason, "media not described");
                let mut r = MediaRecord::new(&media, now);
                r.status = MediaStatus::Unsupported;
                self.remember(r.clone()).await;
                out.insert(media.unique_id.clone(), r);
                continue;
            }
            if budget == 0 {
                continue;
            }
            if !self.claim(&media.unique_id) {
                continue;
            }
            budget -= 1;
            let (this, tg) = (Arc::clone(self), Arc::clone(&telegram));
            // Released on drop, so a superseded plan that aborts these tasks (even before
            // they first run) leaves the item free for later passes.
            let claim = Claim {
                pipeline: Arc::clone(self),
                id: media.unique_id.clone(),
            };
            // Each job holds the clock like the task that spawned it (a spawned task does
            // not inherit that hold), so its retry pauses let virtual time move.
            let hold = self.clock.hold();
            jobs.spawn(async move {
                let _claim = claim;
                clock::with_task_hold_returned(
                    hold,
                    this.describe_one(tg, chat, msg, &media, plan, previous),
                )
                .await
            });
        }
        // While the jobs run, this task's own hold would keep virtual time from reaching
        // their retry pauses: it is given up, and the last job's hold taken over.
        let released = if jobs.is_empty() {
            None
        } else {
            clock::release_task_hold()
        };
        let had_hold = released.is_some();
        drop(released);
        let mut last_hold = None;
        while let Some(done) = jobs.join_next().await {
            let hold = match done {
                Ok((r, hold)) => {
                    out.insert(r.unique_id.clone(), r);
                    hold
                }
                Err(e) => {
                    tracing::warn!(error = %e, "media description task failed");
                    None
                }
            };
            // A finished job's hold is kept only if no job is left to wait for.
            last_hold = if jobs.is_empty() { hold } else { None };
        }
        if had_hold {
            clock::resume_task_hold(last_hold.unwrap_or_else(|| self.clock.hold()));
        }
        out
    }

    /// Curated records first, then generated ones; unreadable files are logged and skipped.
    async fn load_from_disk(&self, ids: Vec<String>) -> Vec<MediaRecord> {
        let curated = self.config.curated_dir.clone();
        let generated = self.state.media_dir();
        let read = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for id in ids {
                let dirs = curated.iter().chain(std::iter::once(&generated));
                for dir in dirs {
                    let path = store::media_record_path(dir, &id);
                    // Curated records are the operator's (links allowed); generated ones
                    // are ours.
                    let read = if *dir == generated {
                        store::read_optional(&path)
                    } else {
                        store::read_operator_file(&path)
                    };
                    match read {
                        Ok(Some(text)) => match serde_json::from_str::<MediaRecord>(&text) {
                            Ok(mut r) => {
                                r.unique_id.clone_from(&id);
                                found.push(r);
                                break;
                            }
                            Err(e) => tracing::warn!(
                                path = %path.display(), error = %e, "unreadable media record skipped"
                            ),
                        },
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %e, "media record not read"),
                    }
                }
            }
            found
        })
        .await;
        read.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "media record loading failed");
            Vec::new()
        })
    }

    fn claim(&self, id: &str) -> bool {
        self.describing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string())
    }

    fn release(&self, id: &str) {
        self.describing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    fn set_in_backoff(&self, media: &MediaInfo, now: Timestamp) -> bool {
        let Some(set) = media.sticker.as_ref().and_then(|s| s.set.as_ref()) else {
            return false;
        };
        self.set_backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(set)
            .is_some_and(|b| b.until > now)
    }

    fn note_set_result(&self, media: &MediaInfo, failed: bool, now: Timestamp) {
        let Some(set) = media.sticker.as_ref().and_then(|s| s.set.clone()) else {
            return;
        };
        let mut sets = self
            .set_backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failed {
            let failures = sets.get(&set).map_or(0, |b| b.failures) + 1;
            let until = clock::add(now, self.backoff(failures));
            sets.insert(set, SetBackoff { failures, until });
        } else {
            sets.remove(&set);
        }
    }

    /// Delay before attempt `failures + 1`: the shared [`Backoff`]'s ceiling (the base doubled
    /// per failure, capped). Items fail at their own times, so their schedules do not line up
    /// and need no jitter; a predictable schedule keeps "not before" testable.
    pub fn backoff(&self, failures: u32) -> Duration {
        Backoff::new(self.config.backoff_base, self.config.backoff_max).ceiling(failures)
    }

    /// Keeps a record in memory and on disk (generated records only).
    async fn remember(&self, record: MediaRecord) {
        self.memory
            .insert(record.unique_id.clone(), Arc::new(record.clone()))
            .await;
        let state = self.state.clone();
        let saved = tokio::task::spawn_blocking(move || {
            store::write_json(&state.media_record_path(&record.unique_id), &record)
        })
        .await;
        match saved {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "media record not saved"),
            Err(e) => tracing::warn!(error = %e, "media record saving failed"),
        }
    }

    async fn describe_one(
        &self,
        telegram: Arc<dyn Telegram>,
        chat: ChatId,
        msg: MessageId,
        media: &MediaInfo,
        plan: Plan,
        previous: Option<MediaRecord>,
    ) -> MediaRecord {
        let permit = Arc::clone(&self.in_flight).acquire_owned().await;
        let (status, description, mime) = self.attempt(&*telegram, chat, msg, plan).await;
        drop(permit);
        let now = self.clock.now();
        let mut r = previous.unwrap_or_else(|| MediaRecord::new(media, now));
        r.attempts = r.attempts.saturating_add(1);
        r.updated_at = now;
        r.status = status;
        r.description = description;
        if mime.is_some() {
            r.mime = mime;
        }
        let failed = matches!(status, MediaStatus::Error | MediaStatus::Timeout);
        r.retryable = failed;
        r.next_attempt_at = failed.then(|| clock::add(now, self.backoff(r.attempts)));
        self.note_set_result(media, failed, now);
        tracing::info!(
            media = %r.unique_id, kind = r.kind.as_str(), status = ?r.status, attempts = r.attempts,
            "media described"
        );
        self.remember(r.clone()).await;
        r
    }

    /// One try: download within the cap, then decode or ask the model.
    async fn attempt(
        &self,
        telegram: &dyn Telegram,
        chat: ChatId,
        msg: MessageId,
        plan: Plan,
    ) -> (MediaStatus, Option<String>, Option<String>) {
        let cap = match &plan {
            Plan::Inline { cap, .. } | Plan::Text { cap } => *cap,
            Plan::Unsupported(_) | Plan::FromMetadata => {
                return (MediaStatus::Unsupported, None, None);
            }
        };
        let bytes = match telegram.download_media(chat, msg, cap).await {
            Ok(b) => b,
            Err(e @ (TelegramError::Invalid(_) | TelegramError::NotFound(_))) => {
                // Too big, or nothing to download (e.g. a sticker known only by name).
                tracing::info!(error = %e, "media not downloadable");
                return (MediaStatus::Unsupported, None, None);
            }
            Err(e) => {
                tracing::warn!(error = %e, "media download failed");
                return (MediaStatus::Error, None, None);
            }
        };
        let (guess, family) = match plan {
            Plan::Text { .. } => {
                let text: String = String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(self.config.text_chars)
                    .collect();
                return (MediaStatus::Ok, Some(text), Some("text/plain".to_string()));
            }
            Plan::Inline { mime, family, .. } => (mime, family),
            Plan::Unsupported(_) | Plan::FromMetadata => {
                return (MediaStatus::Unsupported, None, None);
            }
        };
        let mime = sniff_mime(&bytes).map_or(guess, str::to_string);
        if !accepted(family, &mime) {
            return (MediaStatus::Unsupported, None, Some(mime));
        }
        let prompt = match family {
            Family::Image => &self.prompts.image,
            Family::Video => &self.prompts.video,
            Family::Audio => &self.prompts.audio,
            Family::Document => &self.prompts.document,
        };
        let req = LlmRequest {
            model: self.config.model.clone(),
            system: String::new(),
            turns: vec![Turn {
                role: crate::core::llm::Role::User,
                parts: vec![
                    Part::InlineData {
                        mime: mime.clone(),
                        data: bytes,
                    },
                    Part::text(prompt.clone()),
                ],
            }],
            temperature: None,
            max_output_tokens: None,
            response_schema: None,
        };
        self.calls.fetch_add(1, Ordering::SeqCst);
        let timeout = clock::sleep(self.clock.as_ref(), self.config.describe_timeout);
        let chat = chat.to_string();
        let call = crate::adapters::llm::usage::metered(
            MEDIA_USAGE_AGENT,
            &chat,
            crate::adapters::llm::usage::CallKind::Media,
            self.usage.as_ref(),
            self.llm.generate(&req),
        );
        let outcome = tokio::select! {
            o = call => o,
            _ = timeout => return (MediaStatus::Timeout, None, Some(mime)),
        };
        let (status, text) = match outcome {
            Ok(LlmOutcome::Text(t)) => {
                let t = t.trim();
                if t.is_empty() || t == NOT_UNDERSTOOD {
                    (MediaStatus::NotUnderstood, None)
                } else {
                    let cut: String = t.chars().take(MAX_DESCRIPTION_CHARS).collect();
                    (MediaStatus::Ok, Some(cut))
                }
            }
            Ok(LlmOutcome::Empty { .. }) => (MediaStatus::NotUnderstood, None),
            Ok(LlmOutcome::Blocked { reason }) => {
                tracing::info!(reason = %reason, "media description blocked by the provider");
                (MediaStatus::Unsupported, None)
            }
            Err(
                e @ (LlmError::Config(_) | LlmError::InvalidRequest(_) | LlmError::UnknownModel(_)),
            ) => {
                // No provider can take this medium (no Gemini key for audio, say): retrying
                // will not help, so it is shown as not described / not transcribed.
                tracing::info!(error = %e, "media cannot be described by the configured models");
                (MediaStatus::Unsupported, None)
            }
            Err(e) => {
                tracing::warn!(error = %e, "media description failed");
                (MediaStatus::Error, None)
            }
        };
        (status, text, Some(mime))
    }
}

impl crate::ports::media::MediaDescriber for MediaPipeline {
    fn describe_pass<'a>(
        self: Arc<Self>,
        telegram: Arc<dyn Telegram>,
        chat: ChatId,
        history: &'a [Message],
    ) -> BoxFuture<'a, MediaDescriptions> {
        Box::pin(async move { MediaPipeline::describe_pass(&self, telegram, chat, history).await })
    }

    fn cached(&self, ids: Vec<String>) -> BoxFuture<'_, MediaDescriptions> {
        Box::pin(MediaPipeline::cached(self, ids))
    }

    fn known_words<'a>(&'a self, media: &'a MediaInfo, words: String) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut record = MediaRecord::new(media, self.clock.now());
            record.description = Some(words);
            record.status = crate::core::media::MediaStatus::Ok;
            self.remember(record).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::MediaKind;

    fn info(kind: MediaKind, mime: Option<&str>, size: Option<u64>) -> MediaInfo {
        MediaInfo {
            kind,
            unique_id: "u".into(),
            mime: mime.map(str::to_string),
            size,
            duration_secs: None,
            file_name: None,
            sticker: None,
        }
    }

    #[test]
    fn plans_follow_kind_mime_and_size() {
        let c = MediaConfig::default();
        assert!(matches!(
            plan_for(&info(MediaKind::Photo, None, Some(10)), &c),
            Plan::Inline {
                family: Family::Image,
                ..
            }
        ));
        assert_eq!(
            plan_for(
                &info(MediaKind::Sticker, Some("application/x-tgsticker"), None),
                &c
            ),
            Plan::FromMetadata
        );
        assert_eq!(
            plan_for(&info(MediaKind::Video, None, Some(u64::MAX)), &c),
            Plan::Unsupported("over the size cap")
        );
        assert!(matches!(
            plan_for(&info(MediaKind::Document, Some("text/plain"), None), &c),
            Plan::Text { .. }
        ));
        assert_eq!(
            plan_for(
                &info(MediaKind::Document, Some("application/zip"), None),
                &c
            ),
            Plan::Unsupported("document type not described")
        );
    }

    #[test]
    fn sniffing_recognises_common_formats() {
        assert_eq!(sniff_mime(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_mime(b"OggS\0"), Some("audio/ogg"));
        assert_eq!(sniff_mime(b"hello"), None);
    }

    #[test]
    fn a_minimal_curated_record_parses() {
        let r: Result<MediaRecord, _> = serde_json::from_str(
            r#"{"unique_id":"x","kind":"sticker","description":"a cat waving"}"#,
        );
        let r = r.ok();
        assert_eq!(
            r.as_ref().and_then(|r| r.shown_description()),
            Some("a cat waving")
        );
    }
}
