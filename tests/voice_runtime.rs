//! The `voice` task through the real runtime on the in-memory Telegram: a voice note goes out
//! after the "recording" indicator with its words kept as its text (so later prompts know what
//! was said); a chat that refuses voice notes (`CHAT_SEND_VOICES_FORBIDDEN`) gets the same
//! words as text; a process without a voice engine sends text. And the voice studio: a note
//! made once is kept under its task's key, so a retry after a crash sends the same file without
//! asking the engine again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{AGENT, Harness, ScriptedPlanner, TestResult, dm, persona_with};
use personad::adapters::memory::Action as Done;
use personad::adapters::speech::SpeechEnv;
use personad::adapters::voice_studio::VoiceStudio;
use personad::core::model::MediaKind;
use personad::core::plan::Action;
use personad::core::time::BoxFuture;
use personad::core::voice::VoiceSettings;
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::speech::{
    Speech, SpeechAudio, SpeechError, SpeechProviderKind, SpeechRequest,
};
use personad::ports::voice::{MadeVoice, SharedVoice, VoiceFailure, VoiceMaker, VoiceRequest};

/// A second of a tone, as an engine would speak it.
fn tone() -> Vec<i16> {
    (0..24_000)
        .map(|i| ((f64::from(i) * 0.05).sin() * 8000.0) as i16)
        .collect()
}

/// Makes every note from the same tone, counting its calls.
#[derive(Default)]
struct Tone(AtomicUsize);

impl VoiceMaker for Tone {
    fn make<'a>(&'a self, _: VoiceRequest<'a>) -> BoxFuture<'a, Result<MadeVoice, VoiceFailure>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            let v = personad::adapters::voice::encode_voice(&tone(), 24_000)
                .map_err(|e| VoiceFailure::Encode(Box::new(e)))?;
            Ok(MadeVoice {
                ogg: Arc::new(v.ogg),
                duration_secs: v.duration_secs,
                waveform: v.waveform,
            })
        })
    }
}

/// A speech engine that speaks the tone, counting its calls.
#[derive(Default)]
struct ToneEngine(AtomicUsize);

impl Speech for ToneEngine {
    fn synthesize<'a>(
        &'a self,
        _: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(SpeechAudio::Pcm {
                rate_hz: 24_000,
                samples: tone(),
            })
        })
    }

    fn describe(&self) -> String {
        "tone".into()
    }
}

fn speaking() -> personad::core::persona::Persona {
    persona_with(AGENT, "# Voice\nspeak: sometimes 50%\n")
}

fn says(text: &str) -> ScriptedPlanner {
    let text = text.to_owned();
    ScriptedPlanner::new(move |_, _| {
        Ok(vec![Action::Voice {
            text: text.clone(),
            reply_to: None,
        }])
    })
}

#[tokio::test]
async fn a_voice_note_goes_out_with_its_words_and_a_refusing_chat_gets_them_as_text() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let (bob, eve) = (dm(5), dm(6));
    let voice = Arc::new(Tone::default());
    let mut h = Harness::start_speaking(
        speaking(),
        dir.path(),
        says("hello in my own voice"),
        Arc::clone(&voice) as SharedVoice,
        &[bob.clone(), eve.clone()],
    );
    h.telegram.refuse_voice(eve.id, true);
    h.say(&bob, "bob", "hi").await;
    h.settle().await;
    h.say(&eve, "eve", "hi").await;
    h.settle().await;
    let done = h.telegram.actions();
    let voice_notes: Vec<_> = done
        .iter()
        .filter_map(|r| match &r.action {
            Done::Voice { chat, message, .. } => Some((*chat, message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(voice_notes.len(), 1, "{done:?}");
    let (chat, note) = &voice_notes[0];
    assert_eq!(*chat, bob.id);
    assert_eq!(note.text, "hello in my own voice");
    assert_eq!(note.media.as_ref().map(|m| m.kind), Some(MediaKind::Voice));
    assert!(
        done.iter()
            .any(|r| matches!(r.action, Done::RecordingVoice { chat } if chat == bob.id)),
        "no recording indicator: {done:?}"
    );
    // Its words stay in the chat's history for the next prompt.
    let history = h.telegram.transcript(bob.id);
    assert!(
        history
            .iter()
            .any(|m| m.outgoing && m.text == "hello in my own voice")
    );
    // Eve's chat refuses voice notes: the same words, as text, and nothing lost.
    let to_eve: Vec<String> = done
        .iter()
        .filter_map(|r| match &r.action {
            Done::Send { chat, message } if *chat == eve.id => Some(message.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(to_eve, ["hello in my own voice"]);
    assert_eq!(voice.0.load(Ordering::SeqCst), 2);
    h.stop().await?;
    Ok(())
}

/// The voice studio keeps a made note under its task's key: the same key again (the task run
/// again after a crash between upload and send) gets the same file, and the engine is asked
/// once. Another key is a new note.
#[tokio::test]
async fn a_note_made_once_is_kept_for_its_tasks_retry() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), false));
    let engine = Arc::new(ToneEngine::default());
    let studio = VoiceStudio::new(
        SpeechEnv::from_env(clock),
        SpeechProviderKind::Espeak,
        Some(personad::adapters::store::StateDir::new(dir.path())),
    )
    .with_engine(
        SpeechProviderKind::Espeak,
        Arc::clone(&engine) as Arc<dyn Speech>,
    );
    let settings = VoiceSettings::parse("speak: when asked")?;
    let ask = |key: i64| VoiceRequest {
        agent: AGENT,
        chat: personad::core::model::ChatId(5),
        settings: &settings,
        text: "hello",
        key,
    };
    let first = studio.make(ask(41)).await?;
    let again = studio.make(ask(41)).await?;
    assert_eq!(first, again);
    assert_eq!(engine.0.load(Ordering::SeqCst), 1, "asked the engine again");
    let decoded = personad::adapters::voice::decode_ogg_opus(&first.ogg)?;
    assert_eq!(decoded.channels, 1);
    studio.make(ask(42)).await?;
    assert_eq!(engine.0.load(Ordering::SeqCst), 2);
    Ok(())
}
