//! The planner port: turns a conversation into a plan (a list of `core::plan::Action`s).
//! The LLM planner (`adapters::llm_planner`) implements it; [`EchoPlanner`] is the offline twin
//! the tests and the playground's `--planner echo` use. The `received` handler is its caller.

use std::sync::Arc;

use crate::core::plan::{Action, PlanError, PlanRequest};
use crate::core::summaries::Draft;
use crate::core::time::BoxFuture;

/// Produces a plan; an empty plan means the persona stays silent.
pub trait Planner: Send + Sync + 'static {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>>;

    /// Summarizes a stretch of a chat (`summarize` tasks). `Ok(None)`: no summary (declined,
    /// or a planner without a model, as here by default).
    fn summarize<'a>(
        &'a self,
        req: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<Draft>, PlanError>> {
        let _ = req;
        Box::pin(async { Ok(None) })
    }

    /// Writes one day of the persona's schedule (`schedule` tasks): the answer's text, in
    /// the day file's line form (`core::presence`). `Ok(None)`: no model to ask, as here by
    /// default (the deterministic fallback is used).
    fn schedule<'a>(
        &'a self,
        req: ScheduleRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<String>, PlanError>> {
        let _ = req;
        Box::pin(async { Ok(None) })
    }
}

/// What a schedule call is given: the persona, its `Daily Schedule` prose, the local day to
/// write and the days before it (so the model varies them).
#[derive(Debug, Clone, Copy)]
pub struct ScheduleRequest<'a> {
    pub persona: &'a crate::core::persona::Persona,
    pub prose: &'a str,
    pub date: jiff::civil::Date,
    /// The zone's IANA name.
    pub zone: &'a str,
    pub recent: &'a [crate::core::presence::DaySchedule],
    pub now: jiff::Timestamp,
}

/// What a summary call is given.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    pub persona: &'a crate::core::persona::Persona,
    pub chat: &'a crate::core::model::Chat,
    /// The summaries so far (their prompt form).
    pub earlier: &'a str,
    /// The messages to summarize, oldest first.
    pub messages: &'a [crate::core::model::Message],
    pub media: &'a crate::core::media::MediaDescriptions,
    pub now: jiff::Timestamp,
}

pub type SharedPlanner = Arc<dyn Planner>;

/// Offline planner: answers the newest inbound text by echoing it; a voice note (with its
/// transcript, when known), or a message asking for a "voice" from a persona that speaks when
/// asked, is echoed in a voice note when the persona's `# Voice` allows it. No LLM involved.
#[derive(Debug, Default)]
pub(crate) struct EchoPlanner;

impl Planner for EchoPlanner {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        let target = match req.target {
            Some(id) => req.history.iter().find(|m| m.id == id),
            None => req.history.iter().rev().find(|m| !m.outgoing),
        };
        let name = &req.persona.name;
        let reply = target.map(|m| {
            let voice = m
                .media
                .as_ref()
                .filter(|media| media.kind == crate::core::model::MediaKind::Voice);
            let asked = req.persona.voice.speak == crate::core::voice::Speak::WhenAsked
                && m.text.to_lowercase().contains("voice");
            match voice {
                None if asked => Action::Voice {
                    text: format!("{name} heard: {}", m.text),
                    reply_to: None,
                },
                Some(media) if req.persona.voice.allows(true) => {
                    let said = req
                        .media
                        .get(&media.unique_id)
                        .and_then(|r| r.description.clone())
                        .unwrap_or_default();
                    Action::Voice {
                        text: format!("{name} heard your voice note. {said}")
                            .trim()
                            .to_owned(),
                        reply_to: None,
                    }
                }
                _ => Action::Send {
                    text: format!("{name} heard: {}", m.text),
                    reply_to: None,
                },
            }
        });
        Box::pin(async move { Ok(reply.into_iter().collect()) })
    }
}
