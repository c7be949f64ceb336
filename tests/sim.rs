//! The real MTProto adapter against the simulated Telegram (src/adapters/mtproto/sim): the
//! grammers client connects over TCP to the local server, the update pump runs grammers'
//! own update machinery, and the backend's requests are answered as Telegram answers them.
//! Each test drives the simulator (people write, the owner writes from another device, a
//! group migrates, a chat is muted) and checks what reached the sink and what the account
//! did on the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use personad::adapters::mtproto::sim::{Peer, Post, Sim, SimServer};
use personad::adapters::mtproto::{self, ConnectOptions, Credentials, Servers};
use personad::adapters::store::StateDir;
use personad::core::model::{Chat, ChatId, Message, MessageId, OutgoingText};
use personad::ports::clock::{SharedClock, SystemClock};
use personad::ports::telegram::Telegram;
use personad::ports::updates::Sink;
use tokio_util::sync::CancellationToken;

/// What the pump handed over, in order.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl Recorder {
    fn lines(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
    fn push(&self, line: String) {
        self.seen.lock().unwrap().push(line);
    }
}

impl Sink for Recorder {
    fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
        self.push(format!(
            "in {} #{} {}{}",
            chat.id,
            message.id,
            message.text,
            if trigger { "" } else { " (history)" }
        ));
    }
    fn inbound_addressed(&self, chat: Chat, message: Message, trigger: bool, callout: bool) {
        let _ = callout;
        self.inbound(chat, message, trigger);
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        self.push(format!(
            "owner {} #{} {}",
            chat.id, message.id, message.text
        ));
    }
    fn edited(&self, chat: Chat, message: Message) {
        self.push(format!("edited {} #{}", chat.id, message.id));
    }
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
        self.push(format!("deleted {chat:?} {ids:?}"));
    }
    fn migrated(&self, from: ChatId, to: ChatId) {
        self.push(format!("migrated {from} {to}"));
    }
    fn unauthorized(&self, reason: &str) {
        self.push(format!("unauthorized {reason}"));
    }
}

/// An account of the simulator, connected through the real adapter and pumping.
struct Live {
    _server: SimServer,
    sim: Sim,
    me: i64,
    telegram: Arc<personad::adapters::mtproto::backend::MtprotoTelegram>,
    sink: Arc<Recorder>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn live(name: &str) -> Live {
    let clock: SharedClock = Arc::new(SystemClock);
    let server = SimServer::start(Arc::clone(&clock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let sim = server.sim.clone();
    let me = sim.account(name);
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let path = mtproto::session::session_path(&state, name, Servers::Sim);
    personad::adapters::store::ensure_private_dir(path.parent().unwrap()).unwrap();
    personad::adapters::mtproto::sim::prepare_session(&path, name, server.addr)
        .await
        .unwrap();
    let creds = Credentials {
        api_id: 1,
        api_hash: mtproto::ApiHash::new("sim"),
        servers: Servers::Sim,
    };
    let connected = mtproto::connect(
        &state,
        name,
        &creds,
        ConnectOptions::default(),
        Arc::clone(&clock),
    )
    .await
    .unwrap();
    let telegram = Arc::clone(&connected.telegram);
    let sink = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let (s, st, n, c) = (
        Arc::clone(&sink),
        stop.clone(),
        name.to_string(),
        Arc::clone(&clock),
    );
    tokio::spawn(async move {
        let _ = connected
            .serve(n, s, ConnectOptions::default(), c, st)
            .await;
    });
    Live {
        _server: server,
        sim,
        me,
        telegram,
        sink,
        stop,
        _dir: dir,
    }
}

/// Waits (bounded, on real time: real sockets are in flight) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_contact_dm_arrives_and_the_answer_reaches_the_sender() {
    let l = live("Wren").await;
    until("the update stream to start", || {
        l.sim.requests(l.me).contains(&"updates.getState")
    })
    .await;
    let alice = l.sim.person("Alice");
    l.sim.dm(alice, l.me, "hello Wren").unwrap();
    until("the message to reach the sink", || {
        l.sink.lines().iter().any(|s| s.contains("hello Wren"))
    })
    .await;
    let sent = l
        .telegram
        .send_text(OutgoingText {
            chat: ChatId(alice),
            text: "hi Alice".into(),
            reply_to: None,
            idempotency_key: 77,
        })
        .await
        .unwrap();
    let seen = l.sim.transcript(l.me, Peer::User(alice));
    assert_eq!(
        seen.last().map(|m| (m.text.as_str(), m.out)),
        Some(("hi Alice", true)),
        "{seen:?}"
    );
    assert_eq!(sent.id.0, i64::from(seen.last().unwrap().id));
    let requests = l.sim.requests(l.me);
    println!("{requests:?}");
    println!("{:?}", l.sink.lines());
    l.stop.cancel();
    let _ = Post::default();
}
