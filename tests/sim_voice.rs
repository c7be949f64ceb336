//! Voice notes through the real MTProto adapter against the simulated Telegram: the grammers
//! client uploads the Ogg file part by part and sends it with `messages.sendMedia` over TCP;
//! the simulator reassembles it into a voice note (voice flag, duration, waveform, the bytes)
//! that reaches the other side like any message. A dialog that forbids voice notes answers
//! CHAT_SEND_VOICES_FORBIDDEN, which the adapter reports as a content refusal; a send
//! repeated with the same idempotency key stays one message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use personad::adapters::mtproto::sim::{Peer, SimServer};
use personad::adapters::mtproto::{self, ConnectOptions, Credentials, Servers};
use personad::adapters::store::StateDir;
use personad::core::model::{
    Chat, ChatId, MediaKind, Message, MessageId, OutgoingVoice, TelegramError,
};
use personad::ports::clock::{SharedClock, SystemClock};
use personad::ports::telegram::Telegram;
use personad::ports::updates::Sink;
use tokio_util::sync::CancellationToken;

/// What the pump handed over, one line each.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Sink for Recorder {
    fn inbound(&self, chat: Chat, message: Message, _trigger: bool) {
        let line = format!("in {} #{} {}", chat.id, message.id, message.text);
        self.0.lock().unwrap().push(line);
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        let line = format!("owner {} #{}", chat.id, message.id);
        self.0.lock().unwrap().push(line);
    }
    fn edited(&self, _: Chat, _: Message) {}
    fn deleted(&self, _: Option<ChatId>, _: Vec<MessageId>) {}
    fn migrated(&self, _: ChatId, _: ChatId) {}
    fn unauthorized(&self, reason: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("unauthorized {reason}"));
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

fn voice(chat: i64, ogg: &Arc<Vec<u8>>, reply_to: Option<MessageId>, key: i64) -> OutgoingVoice {
    OutgoingVoice {
        chat: ChatId(chat),
        ogg: Arc::clone(ogg),
        duration_secs: 6,
        waveform: vec![3, 141, 59, 26, 53, 89, 7],
        text: "the train is late again".into(),
        reply_to,
        idempotency_key: key,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_reaches_the_simulated_telegram_and_a_forbidding_chat_refuses_it() {
    let clock: SharedClock = Arc::new(SystemClock);
    let server = SimServer::start(Arc::clone(&clock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let sim = server.sim.clone();
    let me = sim.account("Wren");
    let robin = sim.account("Robin");
    let alice = sim.person("Alice");
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let path = mtproto::session::session_path(&state, "Wren", Servers::Sim);
    personad::adapters::store::ensure_private_dir(path.parent().unwrap()).unwrap();
    personad::adapters::mtproto::sim::prepare_session(&path, "Wren", server.addr)
        .await
        .unwrap();
    let creds = Credentials {
        api_id: 1,
        api_hash: mtproto::ApiHash::new("sim"),
        servers: Servers::Sim,
    };
    let connected = mtproto::connect(
        &state,
        "Wren",
        &creds,
        ConnectOptions::default(),
        Arc::clone(&clock),
    )
    .await
    .unwrap();
    let telegram = Arc::clone(&connected.telegram);
    let sink = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let (s, st, c) = (Arc::clone(&sink), stop.clone(), Arc::clone(&clock));
    tokio::spawn(async move {
        let _ = connected
            .serve("Wren".into(), s, ConnectOptions::default(), c, st)
            .await;
    });
    until("the update stream to start", || {
        sim.requests(me)
            .iter()
            .any(|r| *r == "updates.getState" || *r == "updates.getDifference")
    })
    .await;

    // Robin (another account of the world) writes first; Wren answers with a voice note.
    let asked = sim.dm(robin, me, "how was the trip?").unwrap();
    let asked = MessageId(i64::from(asked.id_for(me).unwrap()));
    until("Robin's message", || {
        sink.lines().iter().any(|l| l.contains("how was the trip?"))
    })
    .await;
    // Larger than one 512 KiB part.
    let ogg: Arc<Vec<u8>> = Arc::new((0..600_000u32).map(|i| (i % 241) as u8).collect());
    let sent = telegram
        .send_voice(voice(robin, &ogg, Some(asked), 31_337))
        .await
        .unwrap();
    assert_eq!(sent.text, "the train is late again");
    assert_eq!(sent.reply_to, Some(asked));
    assert_eq!(sent.media.as_ref().map(|m| m.kind), Some(MediaKind::Voice));

    let mine = sim.transcript(me, Peer::User(robin));
    let last = mine.last().unwrap();
    assert_eq!(i64::from(last.id), sent.id.0);
    assert!(last.out);
    assert_eq!(last.text, "", "no caption");
    assert_eq!(last.reply_to.map(i64::from), Some(asked.0));
    let media = last.media.clone().expect("a voice note");
    assert!(media.voice);
    assert_eq!(media.mime_type, "audio/ogg");
    assert_eq!(media.duration, 6);
    assert_eq!(media.waveform, Some(vec![3, 141, 59, 26, 53, 89, 7]));
    assert_eq!(
        sim.file_bytes(media.id),
        Some(ogg.to_vec()),
        "the file itself"
    );
    assert_eq!(
        sim.requests(me)
            .iter()
            .filter(|r| **r == "upload.saveFilePart")
            .count(),
        2
    );
    // Robin has it too, as Wren's voice note.
    let theirs = sim.transcript(robin, Peer::User(me));
    let got = theirs.last().unwrap();
    assert!(!got.out && got.from == me);
    assert_eq!(
        got.media.as_ref().map(|m| (m.voice, m.duration)),
        Some((true, 6))
    );

    // The same idempotency key again (a retry after a restart): still one voice note.
    let again = telegram
        .send_voice(voice(robin, &ogg, Some(asked), 31_337))
        .await
        .unwrap();
    assert_eq!(again.id, sent.id);
    assert_eq!(sim.transcript(me, Peer::User(robin)).len(), mine.len());

    // Alice's chat forbids voice notes: a content refusal, nothing posted.
    sim.dm(alice, me, "send me a voice note?").unwrap();
    until("Alice's message", || {
        sink.lines()
            .iter()
            .any(|l| l.contains("send me a voice note?"))
    })
    .await;
    sim.forbid_voice(Peer::User(alice), true);
    let before = sim.transcript(me, Peer::User(alice)).len();
    let err = telegram
        .send_voice(voice(alice, &ogg, None, 4_040))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TelegramError::ContentRefused(r) if r.contains("CHAT_SEND_VOICES_FORBIDDEN")),
        "{err:?}"
    );
    assert_eq!(sim.transcript(me, Peer::User(alice)).len(), before);

    // "Recording voice" shows in the chat.
    telegram.recording_voice(ChatId(alice)).await.unwrap();
    assert!(
        sim.events(me).contains(&format!("recording_voice {alice}")),
        "{:?}",
        sim.events(me)
    );
    assert!(
        !sink.lines().iter().any(|l| l.starts_with("owner")),
        "our voice note is not the owner writing: {:?}",
        sink.lines()
    );
    stop.cancel();
}
