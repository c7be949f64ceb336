//! `personad replay`: runs a Telegram Desktop export through the group decision pipeline,
//! under virtual time that follows the export's timestamps, with the persona standing in for
//! one of the export's users (whose messages count as ours). Prints one JSON line per message
//! of others and a summary line; with truth labels (`--truth`, see `group::truth`) the
//! summary grades the decisions, for every mode in turn unless one is named, and `--oracle`
//! lets the labels answer for the classifier. `--derive-truth` prints labels derived from the
//! export. Never plans and never sends; in strict mode, or with the oracle, it makes no LLM
//! request at all (no client is even built). A personal chat's export is refused: every
//! message of a DM is addressed, there is nothing to decide. Called by the binary.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::adapters::export::{self, Export};
use crate::app::cli::{GlobalArgs, ReplayArgs};
use crate::app::commands::{CmdResult, CommandError, find_persona, load_personas_async};
use crate::core::group::classifier::{ClassifierInput, HISTORY_SMART, HISTORY_TALKATIVE, Scores};
use crate::core::group::decide::{self, ChatState, Context, Decision, Identity, Inbound, Verdict};
use crate::core::group::settings::TriggerMode;
use crate::core::group::truth::{Grade, Labels};
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
    /// Labels to grade the decisions against.
    pub truth: Option<Labels>,
}

/// Who answers for the classifier.
#[derive(Clone, Copy)]
pub enum Judge<'a> {
    /// The addressing classifier (an LLM).
    Llm(&'a Classifier),
    /// The truth labels: a batch is addressed when one of its messages is labelled so.
    Oracle(&'a Labels),
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
    pub mode: Option<TriggerMode>,
    /// Against the truth labels, when there were some.
    pub grade: Option<Grade>,
}

impl Summary {
    pub(crate) fn to_json(&self) -> Value {
        json!({"summary": {
            "mode": self.mode.map(TriggerMode::as_str),
            "grade": self.grade.map(|g| g.to_json(self.classifier_calls, self.messages)),
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
    judge: Option<Judge<'a>>,
    state: ChatState,
    context: Vec<Message>,
    pending: Vec<Message>,
    last_arrival: Option<Timestamp>,
    summary: Summary,
    reacted: std::collections::HashSet<i64>,
}

/// Export kinds of a one-to-one chat, where every message is addressed.
const DM_KINDS: [&str; 3] = ["personal_chat", "bot_chat", "saved_messages"];

/// Refuses a personal chat's export.
fn group_export(export: &Export) -> Result<(), CommandError> {
    if DM_KINDS.contains(&export.kind.as_str()) {
        return Err(CommandError::Data(format!(
            "this is the export of a personal chat ({}): in a DM every message is addressed to the persona, so there are no group decisions to replay; export a group instead",
            export.kind
        )));
    }
    Ok(())
}

/// The sender id of the export's user `wanted` (a `from_id` or a display name).
fn find_user(export: &Export, wanted: &str) -> Result<i64, CommandError> {
    let wanted = wanted.trim();
    export
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
        })
}

/// Labels derived from the export for the user `as_user`: a message of someone else is
/// `addressed` when it replies to one of that user's messages, mentions them (`username`, or
/// their id), or was itself replied to by them (they took it as theirs to answer); every
/// other message of someone else is `not`.
pub fn derive_truth(
    export: &Export,
    as_user: &str,
    username: Option<&str>,
) -> Result<Labels, CommandError> {
    group_export(export)?;
    let ours = find_user(export, as_user)?;
    let username = username.map(|u| u.trim_start_matches('@'));
    let our_ids: std::collections::HashSet<i64> = export
        .messages
        .iter()
        .filter(|m| m.message.sender.id == ours)
        .map(|m| m.message.id.0)
        .collect();
    let answered: std::collections::HashSet<i64> = export
        .messages
        .iter()
        .filter(|m| m.message.sender.id == ours)
        .filter_map(|m| m.message.reply_to.map(|r| r.0))
        .collect();
    let pairs = export
        .messages
        .iter()
        .filter(|m| m.message.sender.id != ours)
        .map(|em| {
            let m = &em.message;
            let mentioned = m.mentions.iter().any(|x| {
                x.user_id == Some(ours)
                    || x.username
                        .as_deref()
                        .zip(username)
                        .is_some_and(|(a, b)| a.trim_start_matches('@').eq_ignore_ascii_case(b))
            }) || username
                .is_some_and(|u| decide::contains_at_username(&m.text, u));
            let addressed = m.reply_to.is_some_and(|r| our_ids.contains(&r.0))
                || mentioned
                || answered.contains(&m.id.0);
            (m.id.0, addressed)
        });
    Ok(Labels::from_pairs(pairs))
}

/// Replays `export` for `persona`; `emit` gets every output line (the summary last).
pub async fn replay(
    persona: &Persona,
    export: &Export,
    opts: &ReplayOptions,
    judge: Option<Judge<'_>>,
    mut emit: impl FnMut(Value),
) -> Result<Summary, CommandError> {
    group_export(export)?;
    let ours = find_user(export, &opts.as_user)?;
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
        judge,
        state: ChatState::default(),
        context: Vec::new(),
        pending: Vec::new(),
        last_arrival: None,
        summary: Summary {
            skipped_service: export.skipped_service,
            skipped_malformed: export.skipped_malformed,
            mode: Some(opts.mode),
            grade: opts.truth.as_ref().map(|_| Grade::default()),
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
            _ => {
                r.report(&m, &d, &mut emit);
                r.grade(&m, d.triggered());
            }
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

    /// Counts a decided message against the truth labels, if any.
    fn grade(&mut self, m: &Message, triggered: bool) {
        if let (Some(grade), Some(labels)) = (self.summary.grade.as_mut(), &self.opts.truth) {
            grade.record(labels, m.id.0, triggered);
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
        let scores = match self.judge {
            Some(Judge::Oracle(labels)) => {
                self.summary.classifier_calls += 1;
                let addressed = batch.iter().any(|m| labels.get(m.id.0) == Some(true));
                Some(Scores {
                    addressed,
                    confidence: 1.0,
                    wanna_interject: false,
                    interject: 0.0,
                    impulse: 0.0,
                    is_lightweight: false,
                    reaction: None,
                    reason: "truth labels".into(),
                })
            }
            Some(Judge::Llm(c)) => {
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
        // A plan answers the whole batch: its coalesced messages count as answered.
        for m in &batch {
            self.grade(m, d.triggered());
        }
    }
}

/// Largest Telegram Desktop export `replay` reads (a year of a busy group is tens of MB).
pub(crate) const EXPORT_FILE_CAP: u64 = 512 << 20;

/// Reads a file of at most `cap` bytes as UTF-8 off the async threads (the export, labels).
async fn read_text(path: &std::path::Path, cap: u64) -> Result<String, CommandError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let bytes =
            crate::adapters::store::read_file(&path, cap, crate::adapters::store::Symlinks::Follow)
                .map_err(CommandError::InputFile)?;
        String::from_utf8(bytes)
            .map_err(|_| CommandError::Data(format!("{}: not valid UTF-8", path.display())))
    })
    .await?
}

/// Writes one output line to stdout.
fn print_line(line: &dyn std::fmt::Display) -> Result<(), CommandError> {
    Ok(crate::app::stdout::line(line)?)
}

/// `personad replay`.
pub async fn run(global: GlobalArgs, args: ReplayArgs) -> CmdResult {
    let report = load_personas_async(&global).await?;
    let persona = find_persona(&report, &args.agent)?;
    let text = read_text(&args.file, EXPORT_FILE_CAP).await?;
    let export = export::parse(&text)
        .map_err(|e| CommandError::Data(format!("{}: {e}", args.file.display())))?;
    drop(text);
    if args.derive_truth {
        let labels = derive_truth(&export, &args.as_user, args.username.as_deref())?;
        let header = format!(
            "personad replay labels for {:?}, as {}: {} of {} messages of others addressed\n<message id> addressed|not",
            export.name,
            args.as_user.trim(),
            labels.addressed(),
            labels.render("").lines().count()
        );
        print_line(&labels.render(&header).trim_end())?;
        return Ok(ExitCode::SUCCESS);
    }
    let truth = match &args.truth {
        Some(path) => Some(
            Labels::parse(&read_text(path, EXPORT_FILE_CAP).await?)
                .map_err(|e| CommandError::Data(format!("{}: {e}", path.display())))?,
        ),
        None => None,
    };
    // With labels and no mode named, every mode in turn (summary lines only).
    let modes: Vec<TriggerMode> = match (args.groups.mode, &truth) {
        (Some(mode), _) => vec![mode],
        (None, Some(_)) => vec![
            TriggerMode::Strict,
            TriggerMode::Smart,
            TriggerMode::Talkative,
        ],
        (None, None) => vec![persona.group.mode],
    };
    let opts = ReplayOptions {
        as_user: args.as_user.clone(),
        username: args.username.clone(),
        mode: persona.group.mode,
        limit: args.limit,
        quiet: Duration::from_secs(2),
        classifier_model: persona
            .group
            .classifier_model
            .clone()
            .unwrap_or_else(|| args.groups.classifier_model.clone()),
        truth,
    };
    // Strict mode and the oracle never ask an LLM: no client, no key needed.
    let needs_llm = !args.oracle && modes.iter().any(|m| *m != TriggerMode::Strict);
    let classifier = if needs_llm {
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
    } else {
        None
    };
    let judge = match (&opts.truth, &classifier) {
        (Some(labels), _) if args.oracle => Some(Judge::Oracle(labels)),
        (_, Some(c)) => Some(Judge::Llm(c)),
        _ => None,
    };
    let every_line = modes.len() == 1;
    for mode in modes {
        let opts = ReplayOptions {
            mode,
            ..opts.clone()
        };
        let judge = judge.filter(|_| mode != TriggerMode::Strict);
        let mut failed = None;
        replay(&persona, &export, &opts, judge, |line| {
            if failed.is_none() && (every_line || line.get("summary").is_some()) {
                failed = print_line(&line).err();
            }
        })
        .await?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(ExitCode::SUCCESS)
}
