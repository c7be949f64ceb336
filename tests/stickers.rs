//! Curated stickers end to end: the persona's sets (and only the named stickers of
//! `Agent Stickers`) are listed in the system instruction with cached descriptions, and a
//! sticker task resolves through the curated sets before falling back to text.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::adapters::memory::Action;
use personad::core::llm::{LlmOutcome, LlmRequest};
use personad::core::time::BoxFuture;
use personad::ports::llm::{Llm, LlmError};
use personad::ports::planner::SharedPlanner;

/// Records requests and answers every one with the same reply.
struct FixedLlm {
    reply: String,
    requests: Mutex<Vec<LlmRequest>>,
}

impl FixedLlm {
    /// The system instruction of the first request.
    fn first_system(&self) -> String {
        self.requests
            .lock()
            .map(|r| r.first().map(|q| q.system.clone()).unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Llm for FixedLlm {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(req.clone());
        }
        let reply = self.reply.clone();
        Box::pin(async move { Ok(LlmOutcome::Text(reply)) })
    }
}

fn sticker_dir() -> Result<tempfile::TempDir, std::io::Error> {
    let dir = tempfile::tempdir()?;
    for (set, names) in [("Cats", ["😺", "😿"]), ("Dogs", ["🐶", "🐕"])] {
        std::fs::create_dir_all(dir.path().join(set))?;
        for n in names {
            std::fs::write(
                dir.path().join(set).join(format!("{n}.webp")),
                b"RIFF0000WEBP",
            )?;
        }
    }
    Ok(dir)
}

fn start(
    state: &std::path::Path,
    stickers: &std::path::Path,
    reply: &str,
) -> (Harness, Arc<FixedLlm>, personad::core::model::Chat) {
    start_media(state, stickers, reply, false)
}

fn start_media(
    state: &std::path::Path,
    stickers: &std::path::Path,
    reply: &str,
    with_media: bool,
) -> (Harness, Arc<FixedLlm>, personad::core::model::Chat) {
    let llm = Arc::new(FixedLlm {
        reply: reply.into(),
        requests: Mutex::new(Vec::new()),
    });
    let persona = persona_with(
        AGENT,
        "# Agent Sticker Sets\nCats\n\n# Agent Stickers\nDogs :: 🐶\n",
    );
    let chat = dm(50);
    let for_planner = Arc::clone(&llm);
    let for_media: Arc<dyn Llm> = llm.clone();
    let media_state = personad::adapters::store::StateDir::new(state);
    let make_media: Option<common::MakeMedia> = with_media.then(|| -> common::MakeMedia {
        Box::new(move |clock| {
            Arc::new(personad::adapters::media::MediaPipeline::new(
                personad::adapters::media::MediaConfig::default(),
                personad::adapters::media::MediaPrompts::default(),
                for_media,
                media_state,
                clock,
            ))
        })
    });
    let h = Harness::start_as(
        persona,
        state,
        move |_| -> SharedPlanner {
            Arc::new(LlmPlanner::new(for_planner, LlmPlannerConfig::default()))
        },
        config(),
        std::slice::from_ref(&chat),
        Some(stickers),
        make_media,
    );
    (h, llm, chat)
}

#[tokio::test]
async fn curated_sets_and_only_the_named_stickers_are_listed() -> TestResult {
    let (state, stickers) = (tempfile::tempdir()?, sticker_dir()?);
    let (mut h, llm, chat) = start(state.path(), stickers.path(), "");
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let system = llm.first_system();
    for line in ["- Cats :: 😺", "- Cats :: 😿", "- Dogs :: 🐶"] {
        assert!(system.contains(line), "missing {line:?} in:\n{system}");
    }
    assert!(
        !system.contains("🐕"),
        "only the named sticker of an explicit set is listed"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_curated_sticker_is_sent_and_an_unknown_one_becomes_text() -> TestResult {
    let (state, stickers) = (tempfile::tempdir()?, sticker_dir()?);
    // The model names a set that does not exist for 😿 (the curated Cats set has it) and a
    // sticker nobody has.
    let reply = "# «sticker»\nWrongSet\n😿\n\n# «sticker»\nCats\n🦄";
    let (mut h, _llm, chat) = start(state.path(), stickers.path(), reply);
    h.say(&chat, "Bob", "send me a cat").await;
    h.settle().await;
    let mut sent_stickers = Vec::new();
    let mut texts = Vec::new();
    for r in h.telegram.actions() {
        match r.action {
            Action::Sticker { sticker, .. } => sent_stickers.push((sticker.set, sticker.name)),
            Action::Send { message, .. } => texts.push(message.text),
            _ => {}
        }
    }
    assert_eq!(sent_stickers, vec![("Cats".to_string(), "😿".to_string())]);
    assert_eq!(
        texts,
        vec!["🦄".to_string()],
        "an unknown sticker goes out as its name"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_curated_sticker_shows_its_cached_description() -> TestResult {
    let (state, stickers) = (tempfile::tempdir()?, sticker_dir()?);
    let media_dir = state.path().join("media");
    std::fs::create_dir_all(&media_dir)?;
    std::fs::write(
        personad::adapters::store::media_record_path(&media_dir, "sticker:Cats:😺"),
        r#"{"unique_id":"sticker:Cats:😺","kind":"sticker","description":"a grinning orange cat","status":"ok"}"#,
    )?;
    let (mut h, llm, chat) = start_media(state.path(), stickers.path(), "", true);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let system = llm.first_system();
    assert!(
        system.contains("- Cats :: 😺 - a grinning orange cat"),
        "{system}"
    );
    assert!(
        system.contains("- Cats :: 😿\n"),
        "undescribed ones stay plain: {system}"
    );
    h.stop().await?;
    Ok(())
}

/// The playground's sticker sets are read through the safe reader: a sticker file over the
/// 16 MiB cap (sparse here, so nothing is written) is refused naming it, without being read.
#[test]
fn an_oversize_sticker_file_is_refused_naming_it() {
    use personad::adapters::memory::{MemoryTelegram, STICKER_FILE_CAP};
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("UtyaDuck");
    std::fs::create_dir_all(&set).unwrap();
    let big = set.join("wave.webp");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(STICKER_FILE_CAP + 1)
        .unwrap();
    let clock: personad::ports::clock::SharedClock =
        Arc::new(personad::ports::clock::VirtualClock::new(t0(), true));
    let memory = MemoryTelegram::new(AGENT, clock, None).unwrap();
    let err = memory
        .load_sticker_sets(dir.path())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains(&big.display().to_string()) && err.contains("over the cap"),
        "{err}"
    );
}
