//! Group pipeline figures for docs/groups.md (prints numbers; asserts nothing about speed):
//! 1. the time the pipeline adds to an explicitly addressed group message (no LLM call);
//! 2. classifier calls per 100 group messages when the real export is replayed in each mode,
//!    with an in-process classifier that never says "addressed" (so no plan changes the flow),
//!    and recall and precision against labels derived from the export, with the labels
//!    answering for the classifier (the best the prefilter lets any classifier reach).
//!
//! Run: `cargo bench --bench groups`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use personad::app::replay::{Judge, ReplayOptions, derive_truth, replay};
use personad::core::group::decide::{self, ChatState, Context, Identity, Inbound};
use personad::core::group::settings::{GroupSettings, TriggerMode};
use personad::core::llm::{LlmOutcome, LlmRequest};
use personad::core::model::{ChatId, Message, MessageId, Sender};
use personad::core::time::BoxFuture;
use personad::ingress::classifier::Classifier;
use personad::ports::clock::{SharedClock, SystemClock};
use personad::ports::llm::{Llm, LlmError};

struct NotAddressed(AtomicUsize);

impl Llm for NotAddressed {
    fn generate<'a>(&'a self, _req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Box::pin(async {
            Ok(LlmOutcome::Text(
                r#"{"addressed":false,"confidence":0.1,"wanna_interject":false,"interject":0,"impulse":0,"is_lightweight":false,"reason":"bench"}"#.into(),
            ))
        })
    }
}

fn message(id: i64, from: i64, text: &str, at: Timestamp) -> Message {
    Message {
        id: MessageId(id),
        chat: ChatId(-1),
        sender: Sender {
            id: from,
            name: format!("user{from}"),
            username: None,
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: false,
        text: text.into(),
        mentions: Vec::new(),
        reply_to: None,
        date: at,
        media: None,
    }
}

fn explicit_latency() {
    let t0 = Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let me = Identity {
        user_id: 42,
        username: Some("wren_bird".into()),
        names: vec!["Wren".into(), "Birdie".into(), "W.".into()],
    };
    let settings = GroupSettings::default();
    let mut state = ChatState::default();
    for i in 0..200 {
        state.record(
            &message(i, 5 + i % 7, "some earlier chatter in the group", t0),
            i % 9 == 0,
        );
    }
    let text = "So I was thinking about the weekend plans and the long list of things we said we would do, Wren, what do you think about the hike?";
    let msg = message(1000, 6, text, t0);
    let ctx = Context {
        identity: &me,
        settings: &settings,
        mode: TriggerMode::Smart,
        peers: &[7, 8],
    };
    let n = 100_000u32;
    let start = Instant::now();
    let mut triggered = 0;
    for _ in 0..n {
        let d = decide::decide(
            &ctx,
            &state,
            &Inbound {
                message: &msg,
                blocked: false,
                callout: false,
            },
            t0,
        );
        triggered += usize::from(d.triggered());
    }
    let per = start.elapsed() / n;
    assert_eq!(triggered, n as usize);
    println!(
        "explicit address: {:.2} µs per message through the pipeline ({n} runs, no LLM call)",
        per.as_secs_f64() * 1e6
    );
}

fn replay_calls() {
    let path = "../shared/data/telegram-exports/pytopia-public-group.json";
    let Ok(text) = std::fs::read_to_string(path) else {
        println!("classifier calls: {path} absent, skipped");
        return;
    };
    let Ok(export) = personad::adapters::export::parse(&text) else {
        println!("classifier calls: export unreadable");
        return;
    };
    let src = "# Agent Name\nWren\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nA friendly Python programmer.\n";
    let Some(persona) = personad::adapters::persona_loader::parse_persona(
        std::path::Path::new("bench.md"),
        src,
        &[],
    )
    .persona
    else {
        return;
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            println!("no runtime: {e}");
            return;
        }
    };
    for user in ["user637731573", "user38055895", "user397822769"] {
        let Ok(truth) = derive_truth(&export, user, None) else {
            continue;
        };
        let llm = Arc::new(NotAddressed(AtomicUsize::new(0)));
        let clock: SharedClock = Arc::new(SystemClock);
        let classifier = Classifier::new(llm.clone(), clock);
        for mode in [
            TriggerMode::Strict,
            TriggerMode::Smart,
            TriggerMode::Talkative,
        ] {
            let opts = ReplayOptions {
                as_user: user.into(),
                username: None,
                mode,
                limit: None,
                quiet: Duration::from_secs(2),
                classifier_model: "bench".into(),
                truth: Some(truth.clone()),
            };
            // The calls with a classifier that never says "addressed" (no plan changes the
            // flow), then the grade with one that answers from the labels.
            let calls = rt
                .block_on(replay(
                    &persona,
                    &export,
                    &opts,
                    Some(Judge::Llm(&classifier)),
                    |_| {},
                ))
                .map_or(0, |s| s.classifier_calls);
            let summary = rt.block_on(replay(
                &persona,
                &export,
                &opts,
                Some(Judge::Oracle(&truth)),
                |_| {},
            ));
            let Ok(s) = summary else { continue };
            let total = s.messages + s.ours;
            let g = s.grade.unwrap_or_default();
            println!(
                "{mode} replay as {user}: {calls} classifier calls for {total} group messages ({} of others): {:.1} per 100 messages, {:.1} per 100 of others; with the labels as classifier ({} calls): recall {:.3}, precision {:.3} ({} addressed: {} caught, {} missed, {} false alarms)",
                s.messages,
                100.0 * calls as f64 / total as f64,
                100.0 * calls as f64 / s.messages as f64,
                s.classifier_calls,
                g.recall().unwrap_or(0.0),
                g.precision().unwrap_or(0.0),
                truth.addressed(),
                g.true_positive,
                g.missed,
                g.false_positive,
            );
        }
    }
}

fn main() {
    explicit_latency();
    replay_calls();
}
