//! `personad replay`: runs a Telegram Desktop export through the group decision pipeline,
//! under virtual time that follows the export's timestamps, with the persona standing in for
//! one of the export's users (whose messages count as ours). Prints one JSON line per message
//! of others and a summary line. Never plans and never sends; in strict mode it makes no LLM
//! request at all (no client is even built). Called by the binary.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::adapters::export::{self, Export};
use crate::app::cli::{GlobalArgs, ReplayArgs};
use crate::app::commands::{CmdResult, CommandError, find_persona, load_personas_async};
use crate::core::group::classifier::{ClassifierInput, HISTORY_SMART, HISTORY_TALKATIVE};
use crate::core::group::decide::{self, ChatState, Context, Decision, Identity, Inbound, Verdict};
use crate::core::group::settings::TriggerMode;
use crate::core::model::Message;
use crate::core::persona::Persona;
use crate::ingress::classifier::Classifier;
use crate::ingress::gate::description_for;
use crate::ports::clock::{self, SharedClock, SystemClock};

/// How a replay runs.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// A `from_id` (`user123`) or display name of the export.
    pub as_user: String,
    pub username: Option<String>,
    pub mode: TriggerMode,
    pub limit: Option<usize>,
    /// The classifier's quiet period (the planning debounce, 2 s).
    pub quiet: Duration,
    pub classifier_model: String,
}

/// Counts of one replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub messages: usize,
    pub ours: usize,
    pub triggered: usize,
    pub reacted: usize,
    pub classifier_calls: usize,
    pub by_stage: BTreeMap<String, usize>,
    pub skipped_service: usize,
    pub skipped_malformed: usize,
}

impl Summary {
    pub(crate) fn to_json(&self) -> Value {
        json!({"summary": {
            "messages": self.messages,
            "ours": self.ours,
            "triggered": self.triggered,
            "reacted": self.reacted,
            "classifier_calls": self.classifier_calls,
            "by_stage": self.by_stage,
            "skipped": {"service": self.skipped_service, "malformed": self.skipped_malformed},
        }})
    }
}

struct Replayer<'a> {
    persona: &'a Persona,
    identity: Identity,
    opts: &'a ReplayOptions,
    classifier: Option<&'a Classifier>,
    state: ChatState,
    context: Vec<Message>,
    pending: Vec<Message>,
    last_arrival: Option<Timestamp>,
    summary: Summary,
    reacted: std::collections::HashSet<i64>,
}

/// Replays `export` for `persona`; `emit` gets every output line (the summary last).
pub async fn replay(
    persona: &Persona,
    export: &Export,
    opts: &ReplayOptions,
    classifier: Option<&Classifier>,
    mut emit: impl FnMut(Value),
) -> Result<Summary, CommandError> {
    let wanted = opts.as_user.trim();
    let ours = export
        .messages
        .iter()
        .find(|m| {
            m.from_id
                .as_deref()
                .is_some_and(|f| f.eq_ignore_ascii_case(wanted))
                || m.message.sender.name.eq_ignore_ascii_case(wanted)
        })
        .map(|m| m.message.sender.id)
        .ok_or_else(|| {
            CommandError::NotFound(format!(
                "no message of {wanted:?} in the export: --as takes a `from_id` such as `user123` or a display name"
            ))
        })?;
    let mut names = vec![persona.name.clone()];
    names.extend(persona.group.nicknames.iter().cloned());
    let mut r = Replayer {
        persona,
        identity: Identity {
            user_id: ours,
            username: opts
                .username
                .clone()
                .map(|u| u.trim_start_matches('@').to_string()),
            names,
        },
        opts,
        classifier,
        state: ChatState::default(),
        context: Vec::new(),
        pending: Vec::new(),
        last_arrival: None,
        summary: Summary {
            skipped_service: export.skipped_service,
            skipped_malformed: export.skipped_malformed,
            ..Summary::default()
        },
        reacted: Default::default(),
    };
    let limit = opts.limit.unwrap_or(usize::MAX);
    for em in export.messages.iter().take(limit) {
        let mut m = em.message.clone();
        if let Some(last) = r.last_arrival
            && !r.pending.is_empty()
            && m.date > clock::add(last, opts.quiet)
        {
            r.flush(clock::add(last, opts.quiet), &mut emit).await;
        }
        if m.sender.id == ours {
            m.outgoing = true;
            r.summary.ours += 1;
            r.state.record(&m, true);
            r.push_context(m);
            continue;
        }
        r.summary.messages += 1;
        let ctx = r.ctx();
        let d = decide::decide(
            &ctx,
            &r.state,
            &Inbound {
                message: &m,
                blocked: false,
                callout: false,
            },
            m.date,
        );
        match d.verdict {
            Verdict::Classify => {
                r.pending.push(m.clone());
                r.last_arrival = Some(m.date);
            }
            _ => r.report(&m, &d, &mut emit),
        }
        r.state.record(&m, false);
        r.push_context(m);
    }
    if let Some(last) = r.last_arrival
        && !r.pending.is_empty()
    {
        r.flush(clock::add(last, opts.quiet), &mut emit).await;
    }
    emit(r.summary.to_json());
    Ok(r.summary)
}

impl Replayer<'_> {
    fn ctx(&self) -> Context<'_> {
        Context {
            identity: &self.identity,
            settings: &self.persona.group,
            mode: self.opts.mode,
            peers: &[],
        }
    }

    fn push_context(&mut self, m: Message) {
        self.context.push(m);
        if self.context.len() > 64 {
            self.context.drain(..32);
        }
    }

    fn report(&mut self, m: &Message, d: &Decision, emit: &mut impl FnMut(Value)) {
        *self
            .summary
            .by_stage
            .entry(d.stage.as_str().to_string())
            .or_default() += 1;
        let react = match &d.verdict {
            Verdict::Trigger { at, .. } => {
                self.summary.triggered += 1;
                self.state.record_plan(*at, None);
                None
            }
            Verdict::React { emoji } => {
                if self.reacted.insert(m.id.0) {
                    self.summary.reacted += 1;
                }
                Some(emoji.clone())
            }
            _ => None,
        };
        let mut line = json!({
            "message_id": m.id.0,
            "from": m.sender.name,
            "triggered": d.triggered(),
            "stage": d.stage.as_str(),
            "reason": d.reason,
            "react": react,
        });
        if let (Some(s), Some(obj)) = (&d.scores, line.as_object_mut()) {
            obj.insert("scores".into(), json!(s));
        }
        emit(line);
    }

    /// One classifier call for the pending batch, at `now` (the end of its quiet period).
    async fn flush(&mut self, now: Timestamp, emit: &mut impl FnMut(Value)) {
        let batch = std::mem::take(&mut self.pending);
        let Some(target) = batch.last().cloned() else {
            return;
        };
        let first = batch.first().map(|m| m.id);
        let context: Vec<Message> = self
            .context
            .iter()
            .filter(|m| first.is_none_or(|f| m.id < f))
            .cloned()
            .collect();
        let scores = match self.classifier {
            Some(c) => {
                self.summary.classifier_calls += 1;
                let description = description_for(self.persona);
                let input = ClassifierInput {
                    model: &self.opts.classifier_model,
                    persona_name: &self.persona.name,
                    description: &description,
                    history: &context,
                    history_size: if self.opts.mode == TriggerMode::Talkative {
                        HISTORY_TALKATIVE
                    } else {
                        HISTORY_SMART
                    },
                    new_messages: &batch,
                    allowed_reactions: None,
                };
                match c.classify(&input).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(message_id = target.id.0, error = %e, "classifier failed: not triggered");
                        None
                    }
                }
            }
            None => None,
        };
        for m in &batch[..batch.len() - 1] {
            let d = Decision {
                stage: decide::Stage::Classifier,
                verdict: Verdict::History,
                reason: "coalesced",
                scores: None,
            };
            self.report(m, &d, emit);
        }
        let ctx = self.ctx();
        let d = decide::resolve(&ctx, &self.state, &target, scores, now);
        self.report(&target, &d, emit);
    }
}

/// Largest Telegram Desktop export `replay` reads (a year of a busy group is tens of MB).
pub(crate) const EXPORT_FILE_CAP: u64 = 512 << 20;

/// `personad replay`.
pub async fn run(global: GlobalArgs, args: ReplayArgs) -> CmdResult {
    let report = load_personas_async(&global).await?;
    let persona = find_persona(&report, &args.agent)?;
    let path = args.file.clone();
    let export = tokio::task::spawn_blocking(move || -> Result<Export, CommandError> {
        let text = crate::adapters::store::read_file(
            &path,
            EXPORT_FILE_CAP,
            crate::adapters::store::Symlinks::Follow,
        )
        .map_err(|e| CommandError::NotFound(e.to_string()))
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| CommandError::Data(format!("{}: not valid UTF-8", path.display())))
        })?;
        export::parse(&text).map_err(|e| CommandError::Data(format!("{}: {e}", path.display())))
    })
    .await
    .map_err(|e| CommandError::Failed(e.to_string()))??;
    let mode = args.groups.mode.unwrap_or(persona.group.mode);
    let opts = ReplayOptions {
        as_user: args.as_user.clone(),
        username: args.username.clone(),
        mode,
        limit: args.limit,
        quiet: Duration::from_secs(2),
        classifier_model: persona
            .group
            .classifier_model
            .clone()
            .unwrap_or_else(|| args.groups.classifier_model.clone()),
    };
    // Strict mode never asks the classifier: no client, no key needed.
    let classifier = if mode == TriggerMode::Strict {
        None
    } else {
        let clock: SharedClock = Arc::new(SystemClock);
        let retry = crate::adapters::llm::retry::RetryConfig::within_task_timeout(
            crate::core::group::classifier::DEFAULT_TIMEOUT,
            args.llm_attempts,
        );
        let (llm, router) = crate::adapters::llm_planner::llm_from_env(retry, Arc::clone(&clock));
        router
            .check_route(&opts.classifier_model)
            .map_err(|reason| {
                CommandError::Config(crate::core::config::ConfigError {
                    name: "classifier",
                    reason: reason.to_string(),
                })
            })?;
        Some(Classifier::new(llm, clock))
    };
    let mut failed = None;
    replay(&persona, &export, &opts, classifier.as_ref(), |line| {
        if failed.is_none()
            && let Err(e) = writeln!(std::io::stdout().lock(), "{line}")
        {
            failed = Some(e);
        }
    })
    .await?;
    if let Some(e) = failed {
        return Err(CommandError::Io(format!("cannot write output: {e}")));
    }
    Ok(ExitCode::SUCCESS)
}
