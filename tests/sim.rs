//! The real MTProto adapter against the simulated Telegram (src/adapters/mtproto/sim): the
//! grammers client connects over TCP to the local server, the update pump runs grammers'
//! own update machinery, and the backend's requests are answered as Telegram answers them.
//! Each test drives the simulator (people write, the owner writes from another device, a
//! group migrates, a chat is muted) and checks what reached the sink and what the account
//! did on the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use grammers_client::tl::Identifiable;
use personad::adapters::mtproto::sim::{Peer, Post, SERVICE_USER, Sim, SimServer};
use personad::adapters::mtproto::{self, ConnectOptions, Credentials, Servers};
use personad::adapters::store::StateDir;
use personad::core::model::{Chat, ChatId, Message, MessageId, OutgoingText};
use personad::ports::clock::{SharedClock, SystemClock};
use personad::ports::telegram::Telegram;
use personad::ports::updates::Sink;
use tokio_util::sync::CancellationToken;

/// Whether grammers' update stream has started: after the unread scan's dialogs, it asked
/// for the state or the difference.
fn stream_started(requests: &[&str]) -> bool {
    requests
        .iter()
        .skip_while(|r| **r != "messages.getDialogs")
        .any(|r| *r == "updates.getState" || *r == "updates.getDifference")
}

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
            "in {} #{} {}{}{}",
            chat.id,
            message.id,
            message.text,
            if trigger { "" } else { " (history)" },
            if message.sender.service {
                " (service)"
            } else {
                ""
            }
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
    live_on(server, name).await
}

/// The account `name` of `server`, connected and pumping.
async fn live_on(server: SimServer, name: &str) -> Live {
    let clock: SharedClock = Arc::new(SystemClock);
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

/// Waits until the account's update stream has started (grammers asked for the state).
async fn streaming(l: &Live) {
    until("the update stream to start", || {
        stream_started(&l.sim.requests(l.me))
    })
    .await;
}

fn text(chat: i64, body: &str, key: i64) -> OutgoingText {
    OutgoingText {
        chat: ChatId(chat),
        text: body.into(),
        reply_to: None,
        idempotency_key: key,
    }
}

/// The sink's lines that contain `needle`.
fn lines_with(l: &Live, needle: &str) -> Vec<String> {
    l.sink
        .lines()
        .into_iter()
        .filter(|s| s.contains(needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_contact_dm_is_answered_after_learning_the_sender_from_the_message() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    l.sim.dm(alice, l.me, "hello Wren").unwrap();
    until("the message to reach the sink", || {
        !lines_with(&l, "hello Wren").is_empty()
    })
    .await;
    let before = l.sim.requests(l.me).len();
    let sent = l
        .telegram
        .send_text(text(alice, "hi Alice", 77))
        .await
        .unwrap();
    let seen = l.sim.transcript(l.me, Peer::User(alice));
    let last = seen.last().unwrap();
    assert_eq!(
        (last.text.as_str(), last.out),
        ("hi Alice", true),
        "{seen:?}"
    );
    assert_eq!(sent.id.0, i64::from(last.id));
    // Telegram's short update names no access hash: the first call that needs it (the mute
    // look-up, else the send) is refused, the sender is learnt from the message itself (one
    // getMessages, no walk of the dialogs), and the call is made again.
    let all = l.sim.requests(l.me);
    let since_start = all
        .iter()
        .skip_while(|r| **r != "messages.getDialogs")
        .skip(1)
        .copied()
        .collect::<Vec<_>>();
    assert!(since_start.contains(&"messages.getMessages"), "{all:?}");
    assert!(!since_start.contains(&"messages.getDialogs"), "{all:?}");
    assert_eq!(all[before..], ["messages.sendMessage"], "{all:?}");
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_messages_arrives_once_each_in_order() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    for i in 0..30 {
        l.sim.dm(alice, l.me, &format!("burst {i:02}")).unwrap();
    }
    until("the whole burst", || lines_with(&l, "burst").len() >= 30).await;
    let got: Vec<String> = lines_with(&l, "burst")
        .iter()
        .filter_map(|s| s.split("burst ").nth(1).map(str::to_string))
        .collect();
    let want: Vec<String> = (0..30).map(|i| format!("{i:02}")).collect();
    assert_eq!(got, want);
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_pushes_are_found_through_the_difference_after_a_gap_or_updates_too_long() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    let bob = l.sim.person("Bob");
    // A gap: the first message is lost on the way, the next one's pts shows the hole.
    l.sim.lose_pushes(l.me, true);
    l.sim.dm(alice, l.me, "lost one").unwrap();
    l.sim.lose_pushes(l.me, false);
    l.sim.dm(alice, l.me, "after the gap").unwrap();
    until("both messages", || {
        !lines_with(&l, "lost one").is_empty() && !lines_with(&l, "after the gap").is_empty()
    })
    .await;
    // updatesTooLong: nothing says what was lost; the client asks.
    l.sim.lose_pushes(l.me, true);
    l.sim.dm(bob, l.me, "lost two").unwrap();
    l.sim.lose_pushes(l.me, false);
    l.sim.too_long(l.me);
    until("the message lost before updatesTooLong", || {
        !lines_with(&l, "lost two").is_empty()
    })
    .await;
    let all = l.sink.lines();
    for needle in ["lost one", "after the gap", "lost two"] {
        assert_eq!(
            all.iter().filter(|s| s.contains(needle)).count(),
            1,
            "{all:?}"
        );
    }
    assert!(l.sim.requests(l.me).contains(&"updates.getDifference"));
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supergroup_message_lost_in_a_gap_comes_back_through_its_channel_difference() {
    let l = live("Wren").await;
    streaming(&l).await;
    let bob = l.sim.person("Bob");
    let group = l.sim.supergroup("Club", &[l.me, bob], false);
    l.sim
        .post(
            bob,
            Peer::Channel(group),
            Post {
                text: "first in club".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the first message", || {
        !lines_with(&l, "first in club").is_empty()
    })
    .await;
    l.sim.lose_pushes(l.me, true);
    l.sim
        .post(
            bob,
            Peer::Channel(group),
            Post {
                text: "lost in club".into(),
                ..Post::default()
            },
        )
        .unwrap();
    l.sim.lose_pushes(l.me, false);
    l.sim.too_long(l.me);
    for _ in 0..100 {
        if !lines_with(&l, "lost in club").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("{:?}", l.sim.requests(l.me));
    until("the lost channel message", || {
        !lines_with(&l, "lost in club").is_empty()
    })
    .await;
    assert!(
        l.sim
            .requests(l.me)
            .contains(&"updates.getChannelDifference"),
        "{:?}",
        l.sim.requests(l.me)
    );
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_saved_messages_note_and_a_dm_from_another_device_are_the_owners() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    l.sim.dm(alice, l.me, "are you there").unwrap();
    l.sim
        .post(
            l.me,
            Peer::User(l.me),
            Post {
                text: "/status".into(),
                ..Post::default()
            },
        )
        .unwrap();
    l.sim.dm(l.me, alice, "yes, from my phone").unwrap();
    until("both of the owner's messages", || {
        lines_with(&l, "owner ").len() >= 2
    })
    .await;
    let owner = lines_with(&l, "owner ");
    assert!(
        owner[0].starts_with(&format!("owner {} ", l.me)) && owner[0].ends_with("/status"),
        "{owner:?}"
    );
    assert!(
        owner[1].starts_with(&format!("owner {alice} ")),
        "{owner:?}"
    );
    assert!(
        lines_with(&l, "in ")
            .iter()
            .all(|s| !s.contains("from my phone"))
    );
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migrated_group_is_followed_into_its_supergroup() {
    let l = live("Wren").await;
    streaming(&l).await;
    let bob = l.sim.person("Bob");
    let group = l.sim.group("Book club", &[l.me, bob]);
    l.sim
        .post(
            bob,
            Peer::Chat(group),
            Post {
                text: "old group".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the basic group's message", || {
        !lines_with(&l, "old group").is_empty()
    })
    .await;
    let channel = l.sim.migrate(group).unwrap();
    let to = Peer::Channel(channel).chat_id();
    until("the migration", || !lines_with(&l, "migrated").is_empty()).await;
    assert_eq!(
        lines_with(&l, "migrated"),
        [format!("migrated {} {to}", -group)]
    );
    l.sim
        .post(
            bob,
            Peer::Channel(channel),
            Post {
                text: "new home".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the supergroup's message", || {
        !lines_with(&l, "new home").is_empty()
    })
    .await;
    assert!(lines_with(&l, "new home")[0].starts_with(&format!("in {to} ")));
    // The account answers there.
    l.telegram
        .send_text(text(to, "hello new home", 5))
        .await
        .unwrap();
    let t = l.sim.transcript(l.me, Peer::Channel(channel));
    assert_eq!(t.last().map(|m| m.text.as_str()), Some("hello new home"));
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_account_is_marked_as_telegrams_own() {
    let l = live("Wren").await;
    streaming(&l).await;
    l.sim.dm(SERVICE_USER, l.me, "Login code: 12345").unwrap();
    until("the service message", || {
        !lines_with(&l, "Login code").is_empty()
    })
    .await;
    let line = &lines_with(&l, "Login code")[0];
    assert!(
        line.ends_with("(service)"),
        "the sender rule keeps it from planning: {line}"
    );
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_clear_read_typing_and_reactions_reach_the_server() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    let m = l.sim.dm(alice, l.me, "one").unwrap().id_for(l.me).unwrap();
    until("the message", || !lines_with(&l, "one").is_empty()).await;
    l.telegram.typing(ChatId(alice)).await.unwrap();
    l.telegram
        .mark_read(ChatId(alice), MessageId(i64::from(m)))
        .await
        .unwrap();
    l.telegram
        .react(ChatId(alice), MessageId(i64::from(m)), "👍")
        .await
        .unwrap();
    l.telegram.block(ChatId(alice)).await.unwrap();
    // Blocked: what Alice writes never arrives.
    l.sim.dm(alice, l.me, "are you ignoring me").unwrap();
    l.telegram
        .delete_history(ChatId(alice), true)
        .await
        .unwrap();
    let events = l.sim.events(l.me);
    for want in [
        format!("typing {alice}"),
        format!("read {alice} {m}"),
        format!("react {alice} {m} 👍"),
        format!("block {alice}"),
        format!("delete_history {alice} 1 revoke"),
    ] {
        assert!(events.contains(&want), "{want} not in {events:?}");
    }
    assert!(l.sim.transcript(l.me, Peer::User(alice)).is_empty());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(lines_with(&l, "ignoring").is_empty());
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegrams_limits_come_back_as_the_errors_telegram_gives() {
    let l = live("Wren").await;
    streaming(&l).await;
    let bob = l.sim.person("Bob");
    let club = l.sim.supergroup("Slow club", &[l.me, bob], false);
    let chat = Peer::Channel(club).chat_id();
    l.sim
        .post(
            bob,
            Peer::Channel(club),
            Post {
                text: "hi all".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the club's message", || {
        !lines_with(&l, "hi all").is_empty()
    })
    .await;
    l.sim.restrict(club, 30, Some(vec!["👍".into()]));
    l.telegram.send_text(text(chat, "first", 1)).await.unwrap();
    let slow = l.telegram.send_text(text(chat, "second", 2)).await;
    assert!(
        format!("{slow:?}").contains("FloodWait")
            || format!("{slow:?}").to_lowercase().contains("wait"),
        "slow mode answers a wait: {slow:?}"
    );
    let m = l.sim.transcript(l.me, Peer::Channel(club))[0].id;
    assert!(
        l.telegram
            .react(ChatId(chat), MessageId(i64::from(m)), "🔥")
            .await
            .is_err()
    );
    l.sim.flood(
        l.me,
        grammers_client::tl::functions::messages::SetTyping::CONSTRUCTOR_ID,
        120,
        1,
    );
    let flood = l.telegram.typing(ChatId(chat)).await;
    assert!(format!("{flood:?}").contains("120"), "{flood:?}");
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_history_page_an_unquoted_part_still_goes_to_the_live_messages_topic() {
    let l = live("Wren").await;
    streaming(&l).await;
    let bob = l.sim.person("Bob");
    let forum = l.sim.supergroup("Makers", &[l.me, bob], true);
    let chat = Peer::Channel(forum).chat_id();
    let older = l.sim.topic(forum, bob, "Printers").unwrap();
    let live_topic = l.sim.topic(forum, bob, "Looms").unwrap();
    let post = |text: &str, top: i32| {
        l.sim
            .post(
                bob,
                Peer::Channel(forum),
                Post {
                    text: text.into(),
                    top: Some(top),
                    ..Post::default()
                },
            )
            .unwrap();
    };
    post("my printer jams", older);
    post("who knows looms?", live_topic);
    until("both topic messages", || {
        !lines_with(&l, "printer jams").is_empty() && !lines_with(&l, "looms?").is_empty()
    })
    .await;
    // The plan's `received` step reads the history first (newest first from Telegram: the
    // page ends with the older topic's message).
    let history = l.telegram.fetch_history(ChatId(chat), 50).await.unwrap();
    assert!(history.iter().any(|m| m.text == "my printer jams"));
    l.telegram.typing(ChatId(chat)).await.unwrap();
    l.telegram.send_text(text(chat, "I do", 9)).await.unwrap();
    let sent = l.sim.transcript(l.me, Peer::Channel(forum));
    let answer = sent.iter().find(|m| m.text == "I do").unwrap();
    assert_eq!(
        answer.top,
        Some(live_topic),
        "the answer went to topic {:?}",
        answer.top
    );
    let typing = format!("typing {chat} topic {live_topic}");
    assert!(
        l.sim.events(l.me).contains(&typing),
        "{:?}",
        l.sim.events(l.me)
    );
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_muted_from_another_device_is_known_without_asking_telegram() {
    let l = live("Wren").await;
    streaming(&l).await;
    let bob = l.sim.person("Bob");
    let group = l.sim.group("Chatter", &[l.me, bob]);
    l.sim
        .post(
            bob,
            Peer::Chat(group),
            Post {
                text: "before mute".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the first message", || {
        !lines_with(&l, "before mute").is_empty()
    })
    .await;
    assert!(!lines_with(&l, "before mute")[0].ends_with("(history)"));
    l.sim.mute(l.me, Peer::Chat(group), i32::MAX);
    let asked = |l: &Live| {
        l.sim
            .requests(l.me)
            .iter()
            .filter(|r| **r == "account.getNotifySettings")
            .count()
    };
    let before = asked(&l);
    l.sim
        .post(
            bob,
            Peer::Chat(group),
            Post {
                text: "after mute".into(),
                ..Post::default()
            },
        )
        .unwrap();
    until("the second message", || {
        !lines_with(&l, "after mute").is_empty()
    })
    .await;
    assert!(
        lines_with(&l, "after mute")[0].ends_with("(history)"),
        "a muted group's message only joins the history: {:?}",
        l.sink.lines()
    );
    assert_eq!(
        asked(&l),
        before,
        "Telegram's pushed settings were used, not a look-up"
    );
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_between_the_first_unread_scan_and_the_streams_start_is_not_lost() {
    // Before the first connection: a message lands right after the unread scan read the
    // dialogs, and its push is lost (grammers has no state yet to place it).
    let clock: SharedClock = Arc::new(SystemClock);
    let server = SimServer::start(Arc::clone(&clock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let me = server.sim.account("Wren");
    let alice = server.sim.person("Alice");
    server.sim.after(me, "messages.getDialogs", move |w| {
        w.lose_pushes(me, true);
        w.post(
            alice,
            Peer::User(me),
            Post {
                text: "in the window".into(),
                ..Post::default()
            },
        )
        .unwrap();
        w.lose_pushes(me, false);
    });
    let l = live_on(server, "Wren").await;
    until("the message sent in the window", || {
        !lines_with(&l, "in the window").is_empty()
    })
    .await;
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_while_the_first_stream_starts_triggers_on_its_newest_and_all_is_in_history() {
    // Messages that arrive before the first update state are older than it: grammers drops
    // their pushes, and the unread scan hands over the dialog's newest message (whose plan
    // reads the history). Nothing after the state may be missed.
    let l = live("Wren").await;
    let alice = l.sim.person("Alice");
    for i in 0..30 {
        l.sim.dm(alice, l.me, &format!("early {i:02}")).unwrap();
        tokio::task::yield_now().await;
    }
    until("the newest message, as a trigger", || {
        l.sink.lines().iter().any(|s| s.ends_with("early 29"))
    })
    .await;
    let history = l.telegram.fetch_history(ChatId(alice), 100).await.unwrap();
    let texts: Vec<&str> = history.iter().map(|m| m.text.as_str()).collect();
    let want: Vec<String> = (0..30).map(|i| format!("early {i:02}")).collect();
    assert_eq!(texts, want);
    l.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_downloaded_in_parts_and_an_expired_reference_is_refreshed() {
    let l = live("Wren").await;
    streaming(&l).await;
    let alice = l.sim.person("Alice");
    // Larger than one 512 KiB part.
    let bytes: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
    let posted = l
        .sim
        .post(
            alice,
            Peer::User(l.me),
            Post {
                text: String::new(),
                file: Some(personad::adapters::mtproto::sim::File {
                    name: "voice.ogg".into(),
                    mime_type: "audio/ogg".into(),
                    bytes: bytes.clone(),
                    voice: true,
                    duration: 3,
                    waveform: None,
                }),
                ..Post::default()
            },
        )
        .unwrap();
    let id = MessageId(i64::from(posted.id_for(l.me).unwrap()));
    until("the voice note", || {
        l.sink.lines().iter().any(|s| s.contains(&format!("#{id}")))
    })
    .await;
    let got = l
        .telegram
        .download_media(ChatId(alice), id, 1 << 20)
        .await
        .unwrap();
    assert_eq!(got, bytes);
    // The reference expires between reading the message and fetching the file.
    l.sim
        .after(l.me, "messages.getMessages", |w| w.expire_file_references());
    let before = l.sim.requests(l.me).len();
    let again = l
        .telegram
        .download_media(ChatId(alice), id, 1 << 20)
        .await
        .unwrap();
    assert_eq!(again, bytes);
    let after = l.sim.requests(l.me)[before..].to_vec();
    assert!(
        after
            .windows(3)
            .any(|w| w == ["upload.getFile", "messages.getMessages", "upload.getFile"]),
        "an expired reference is refreshed by reading the message again: {after:?}"
    );
    // The cap is checked before anything is fetched.
    assert!(
        l.telegram
            .download_media(ChatId(alice), id, 1000)
            .await
            .is_err()
    );
    l.stop.cancel();
}
