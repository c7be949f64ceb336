//! The offline harness of the MTProto update pump and send path: the pump core runs
//! against a scripted [`UpdateSource`] and fake look-ups and sink (no grammers, no network),
//! and the recovery rules of the send path against fake calls. Each test names the defect
//! it guards against; reverting the fix makes it fail.

mod common;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use personad::adapters::mtproto::pump::{
    CHANNEL_FAILURE_LIMIT, Incoming, Lookups, Pump, PumpEnd, PumpOptions, SAVE_EVERY, Sink,
    SourceError, SourceFactory, TgUpdate, UpdateSource,
};
use personad::adapters::mtproto::recover::{
    self, CallError, MAX_DELETE_ROUNDS, PeerLearner, muted, reaction_variant,
};
use personad::adapters::mtproto::sent::SentLedger;
use personad::core::model::{Chat, ChatId, ChatKind, Message, MessageId, Sender, TelegramError};
use personad::core::time::BoxFuture;
use personad::ingress::sink::RuntimeSink;
use personad::ports::clock::{Clock, SharedClock, VirtualClock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// Fixtures.

const ME: i64 = 1000;

fn t0() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn chat(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: if id > 0 {
            ChatKind::Direct
        } else {
            ChatKind::Group
        },
        title: format!("chat {id}"),
    }
}

fn msg(chat_id: i64, id: i64, from: i64, outgoing: bool, at: Timestamp) -> Incoming {
    Incoming {
        chat: chat(chat_id),
        message: Message {
            id: MessageId(id),
            chat: ChatId(chat_id),
            sender: Sender {
                id: from,
                name: format!("user {from}"),
                username: None,
                is_bot: false,
                service: false,
                deleted: false,
            },
            outgoing,
            text: format!("message {id}"),
            mentions: Vec::new(),
            reply_to: None,
            date: at,
            media: None,
        },
        callout: false,
        sticker_set_id: None,
    }
}

/// A message from someone else in a DM with them.
fn inbound(chat_id: i64, id: i64) -> TgUpdate {
    TgUpdate::NewMessage(msg(chat_id, id, chat_id, false, t0()))
}

/// An outgoing message of this account (ours or the owner's).
fn outgoing(chat_id: i64, id: i64) -> TgUpdate {
    TgUpdate::NewMessage(msg(chat_id, id, ME, true, t0()))
}

/// One step of a scripted source.
enum Step {
    Update(TgUpdate),
    /// grammers took a batch off its channel and awaits a session write before buffering
    /// it: `entered` is notified, then the step waits for `release` and yields the update.
    InFlight {
        entered: Arc<Notify>,
        release: Arc<Notify>,
        update: TgUpdate,
    },
    /// The difference of this channel fails until the pump skips the channel.
    FailingChannel(i64),
    Fail(SourceError),
    /// The source panics (a library bug on some input).
    Panic,
    /// This source ends (the pool died); the next one continues the script.
    End,
}

#[derive(Default)]
struct ScriptState {
    steps: VecDeque<Step>,
    closed: bool,
    delivered: usize,
    /// `delivered` at each state save.
    saves: Vec<usize>,
    skipped: Vec<i64>,
    channel_failures: usize,
    opens: usize,
}

#[derive(Clone, Default)]
struct Script {
    state: Arc<Mutex<ScriptState>>,
    more: Arc<Notify>,
}

impl Script {
    fn new(steps: Vec<Step>) -> Script {
        let script = Script::default();
        script.state.lock().unwrap().steps = steps.into();
        script
    }
    fn st(&self) -> std::sync::MutexGuard<'_, ScriptState> {
        self.state.lock().unwrap()
    }
}

struct ScriptSource(Script);

impl UpdateSource for ScriptSource {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<TgUpdate>, SourceError>> {
        Box::pin(async move {
            loop {
                let step = {
                    let mut st = self.0.st();
                    match st.steps.pop_front() {
                        Some(Step::FailingChannel(c)) if !st.skipped.contains(&c) => {
                            st.steps.push_front(Step::FailingChannel(c));
                            Some(Step::FailingChannel(c))
                        }
                        Some(Step::FailingChannel(_)) => continue,
                        Some(step) => Some(step),
                        None if st.closed => return Err(SourceError::Closed),
                        None => None,
                    }
                };
                match step {
                    None => self.0.more.notified().await,
                    Some(Step::Update(u)) => {
                        self.0.st().delivered += 1;
                        return Ok(Some(u));
                    }
                    Some(Step::InFlight {
                        entered,
                        release,
                        update,
                    }) => {
                        entered.notify_one();
                        release.notified().await;
                        self.0.st().delivered += 1;
                        return Ok(Some(update));
                    }
                    Some(Step::FailingChannel(c)) => {
                        self.0.st().channel_failures += 1;
                        return Err(SourceError::Transient {
                            reason: "INTERNAL (500)".into(),
                            channel: Some(c),
                            retry_after: None,
                            permanent: false,
                        });
                    }
                    Some(Step::Fail(e)) => return Err(e),
                    Some(Step::Panic) => panic!("scripted panic in the update source"),
                    Some(Step::End) => return Err(SourceError::Closed),
                }
            }
        })
    }

    fn save_state(
        &mut self,
    ) -> BoxFuture<'_, Result<(), personad::adapters::mtproto::pump::SaveError>> {
        Box::pin(async move {
            let mut st = self.0.st();
            let n = st.delivered;
            st.saves.push(n);
            Ok(())
        })
    }

    fn skip_channel(&mut self, channel: i64) -> BoxFuture<'_, ()> {
        self.0.st().skipped.push(channel);
        Box::pin(async {})
    }
}

impl SourceFactory for Script {
    fn open(&self) -> BoxFuture<'_, Result<Box<dyn UpdateSource>, SourceError>> {
        Box::pin(async move {
            self.st().opens += 1;
            Ok(Box::new(ScriptSource(self.clone())) as Box<dyn UpdateSource>)
        })
    }
    fn close(&self) {
        self.st().closed = true;
        self.more.notify_one();
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Inbound { chat: i64, id: i64, trigger: bool },
    Owner { chat: i64, id: i64 },
    Edited { chat: i64, id: i64, text: String },
    Deleted { chat: Option<i64>, ids: Vec<i64> },
    Migrated { from: i64, to: i64 },
    Unauthorized,
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    changed: Notify,
}

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    fn push(&self, s: Seen) {
        self.seen.lock().unwrap().push(s);
        self.changed.notify_waiters();
    }
    async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.changed.notified();
            if self.seen.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    }
}

impl Sink for Recorder {
    fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
        self.push(Seen::Inbound {
            chat: chat.id.0,
            id: message.id.0,
            trigger,
        });
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        self.push(Seen::Owner {
            chat: chat.id.0,
            id: message.id.0,
        });
    }
    fn edited(&self, chat: Chat, message: Message) {
        self.push(Seen::Edited {
            chat: chat.id.0,
            id: message.id.0,
            text: message.text,
        });
    }
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
        self.push(Seen::Deleted {
            chat: chat.map(|c| c.0),
            ids: ids.into_iter().map(|i| i.0).collect(),
        });
    }
    fn migrated(&self, from: ChatId, to: ChatId) {
        self.push(Seen::Migrated {
            from: from.0,
            to: to.0,
        });
    }
    fn unauthorized(&self, _reason: &str) {
        self.push(Seen::Unauthorized);
    }
}

/// Look-ups: a blocklist, muted chats, and a sender whose admission panics.
#[derive(Default)]
struct FakeLookups {
    blocked: HashSet<i64>,
    muted: HashSet<i64>,
    panics_on_sender: Option<i64>,
    /// What `recent` answers per chat, and the reads it was asked for.
    history: HashMap<i64, Vec<Incoming>>,
    history_reads: Arc<Mutex<Vec<(i64, usize)>>>,
}

impl Lookups for FakeLookups {
    fn is_blocked(&self, user: i64) -> BoxFuture<'_, bool> {
        if self.panics_on_sender == Some(user) {
            panic!("scripted panic while admitting");
        }
        let b = self.blocked.contains(&user);
        Box::pin(async move { b })
    }
    fn is_muted(&self, chat: ChatId) -> BoxFuture<'_, bool> {
        let m = self.muted.contains(&chat.0);
        Box::pin(async move { m })
    }
    fn enrich<'a>(&'a self, _incoming: &'a mut Incoming) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn recent(
        &self,
        chat: ChatId,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<Incoming>, TelegramError>> {
        self.history_reads.lock().unwrap().push((chat.0, limit));
        let found = self.history.get(&chat.0).cloned().unwrap_or_default();
        Box::pin(async move { Ok(found) })
    }
}

struct Harness {
    script: Script,
    sink: Arc<Recorder>,
    ledger: Arc<SentLedger>,
    clock: VirtualClock,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<PumpEnd>,
}

fn start_with(steps: Vec<Step>, lookups: FakeLookups, auto_advance: bool) -> Harness {
    let script = Script::new(steps);
    let sink = Arc::new(Recorder::default());
    let clock = VirtualClock::new(t0(), auto_advance);
    let shared: SharedClock = Arc::new(clock.clone());
    let ledger = SentLedger::in_memory(Arc::clone(&shared));
    let pump = Pump {
        agent: "Wren".into(),
        factory: Arc::new(script.clone()),
        lookups: Arc::new(lookups),
        sink: Arc::clone(&sink) as Arc<dyn Sink>,
        ledger: Arc::clone(&ledger),
        clock: shared,
        opts: PumpOptions {
            max_catch_up_age: Duration::from_secs(15 * 60),
            channel_wait_limit: personad::adapters::mtproto::pump::CHANNEL_WAIT_LIMIT,
        },
    };
    let stop = CancellationToken::new();
    let task = tokio::spawn(pump.run(stop.clone()));
    Harness {
        script,
        sink,
        ledger,
        clock,
        stop,
        task,
    }
}

fn start(steps: Vec<Step>) -> Harness {
    start_with(steps, FakeLookups::default(), true)
}

impl Harness {
    async fn stop(self) -> (Vec<Seen>, Script, PumpEnd) {
        self.stop.cancel();
        let end = self.task.await.unwrap();
        (self.sink.seen(), self.script, end)
    }
}

fn upd(u: TgUpdate) -> Step {
    Step::Update(u)
}

// ---------------------------------------------------------------------------------------
// No update lost (Build 2).

/// A batch the source has taken but not yet returned when the save tick and the stop fire
/// is still delivered, and the state is saved after it (a `select!` over `next()` drops it).
#[tokio::test]
async fn batch_in_flight_when_the_tick_and_stop_fire_is_delivered() {
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let h = start_with(
        vec![
            upd(inbound(7, 1)),
            Step::InFlight {
                entered: Arc::clone(&entered),
                release: Arc::clone(&release),
                update: inbound(7, 2),
            },
        ],
        FakeLookups::default(),
        false,
    );
    entered.notified().await;
    // The save interval passes and the daemon stops while the batch is in flight.
    h.clock.advance(SAVE_EVERY * 2);
    h.stop.cancel();
    tokio::task::yield_now().await;
    release.notify_one();
    let (seen, script, end) = h.stop().await;
    assert_eq!(end, PumpEnd::Stopped);
    assert_eq!(
        seen,
        vec![
            Seen::Inbound {
                chat: 7,
                id: 1,
                trigger: true
            },
            Seen::Inbound {
                chat: 7,
                id: 2,
                trigger: true
            },
        ]
    );
    let st = script.st();
    assert_eq!(
        st.saves.last(),
        Some(&2),
        "the state is saved after the in-flight batch, never before it"
    );
}

/// The update state is saved by the reader while updates flow (every SAVE_EVERY), not only
/// at the end.
#[tokio::test]
async fn update_state_is_saved_periodically_from_the_reader() {
    let h = start_with(vec![upd(inbound(7, 1))], FakeLookups::default(), false);
    h.sink.wait_for(1).await;
    h.clock.advance(SAVE_EVERY);
    h.script.st().steps.push_back(upd(inbound(7, 2)));
    h.script.more.notify_one();
    h.sink.wait_for(2).await;
    let saves_before_stop = h.script.st().saves.clone();
    assert_eq!(saves_before_stop, vec![2]);
    let (_, script, _) = h.stop().await;
    assert_eq!(script.st().saves, vec![2, 2]);
}

// ---------------------------------------------------------------------------------------
// First contact (Build 1).

/// A fake account: sends to a chat whose peer is not cached fail with PEER_ID_INVALID until
/// the peer is learnt; learning works when a message of that chat was seen.
#[derive(Default)]
struct FakeAccount {
    cached: Mutex<HashSet<i64>>,
    seen_messages: Mutex<HashMap<i64, i64>>,
    learns: AtomicUsize,
    calls: AtomicUsize,
}

impl PeerLearner for FakeAccount {
    fn learn_peer(&self, chat: ChatId) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            self.learns.fetch_add(1, Ordering::SeqCst);
            if self.seen_messages.lock().unwrap().contains_key(&chat.0) {
                self.cached.lock().unwrap().insert(chat.0);
                true
            } else {
                false
            }
        })
    }
}

impl FakeAccount {
    async fn send(&self, chat: ChatId) -> Result<i64, CallError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.cached.lock().unwrap().contains(&chat.0) {
            Ok(99)
        } else {
            Err(CallError::UnknownPeer(TelegramError::NotFound(
                "PEER_ID_INVALID (400)".into(),
            )))
        }
    }
}

/// A first DM from a new contact (a short update: no user object, so no cached hash) is
/// admitted, and the reply succeeds after the peer is fetched once (today it fails with
/// PEER_ID_INVALID and the plan is dropped).
#[tokio::test]
async fn first_contact_short_message_then_reply_learns_the_peer() {
    let h = start(vec![upd(inbound(4242, 1))]);
    h.sink.wait_for(1).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![Seen::Inbound {
            chat: 4242,
            id: 1,
            trigger: true
        }]
    );
    let account = FakeAccount::default();
    account.seen_messages.lock().unwrap().insert(4242, 1);
    let sent =
        recover::with_peer_retry(&account, ChatId(4242), || account.send(ChatId(4242))).await;
    assert_eq!(sent, Ok(99));
    assert_eq!(account.learns.load(Ordering::SeqCst), 1);
    assert_eq!(account.calls.load(Ordering::SeqCst), 2);
}

/// When the peer cannot be learnt, the call is tried once, learning once, and the error
/// stands (no loop).
#[tokio::test]
async fn unknown_peer_that_cannot_be_learnt_gives_up_after_one_try() {
    let account = FakeAccount::default();
    let sent = recover::with_peer_retry(&account, ChatId(5), || account.send(ChatId(5))).await;
    assert!(matches!(sent, Err(CallError::UnknownPeer(_))));
    assert_eq!(account.learns.load(Ordering::SeqCst), 1);
    assert_eq!(account.calls.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------
// Own sends (Build 3).

/// Our send's echo that arrives before the RPC returns (grammers pushes it to the stream
/// right after handing over the result) is ours; after the send returns, its id is.
/// A message the owner types meanwhile in another chat still cancels that chat's plan.
#[tokio::test]
async fn own_sends_echoed_before_and_after_the_rpc_returns_are_ours() {
    let h = start(Vec::new());
    let guard = h.ledger.begin(ChatId(7), "message 50");
    // The echo arrives while the send is in flight.
    h.script.st().steps.push_back(upd(outgoing(7, 50)));
    // The owner writes in another chat.
    h.script.st().steps.push_back(upd(outgoing(8, 51)));
    h.script.more.notify_one();
    h.sink.wait_for(1).await;
    h.ledger.record(ChatId(7), MessageId(50), 1234);
    drop(guard);
    // The echo again (catch-up replays it), after the send returned.
    h.script.st().steps.push_back(upd(outgoing(7, 50)));
    // And a message the owner types in chat 7 afterwards.
    h.script.st().steps.push_back(upd(outgoing(7, 52)));
    h.script.more.notify_one();
    h.sink.wait_for(2).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![
            Seen::Owner { chat: 8, id: 51 },
            Seen::Owner { chat: 7, id: 52 }
        ]
    );
}

/// While a send is in flight in a chat, only its own echo (the same text) is ours: the
/// owner's draft reply or command written there in that window (another text) reaches
/// admission as the owner's, and the echo after the send returned is ours by its id.
#[tokio::test]
async fn the_owners_message_during_a_send_in_the_same_chat_is_the_owners() {
    let h = start(Vec::new());
    let guard = h.ledger.begin(ChatId(7), "message 50");
    // The owner writes in the same chat while our send is in flight...
    h.script.st().steps.push_back(upd(outgoing(7, 49)));
    // ...and our send's echo arrives before the send returns.
    h.script.st().steps.push_back(upd(outgoing(7, 50)));
    h.script.more.notify_one();
    tokio::time::timeout(Duration::from_secs(10), h.sink.wait_for(1))
        .await
        .expect("the owner's message reaches admission while the send is in flight");
    h.ledger.record(ChatId(7), MessageId(50), 1234);
    drop(guard);
    h.script.st().steps.push_back(upd(outgoing(7, 50)));
    h.script.st().steps.push_back(upd(outgoing(7, 52)));
    h.script.more.notify_one();
    h.sink.wait_for(2).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![
            Seen::Owner { chat: 7, id: 49 },
            Seen::Owner { chat: 7, id: 52 }
        ]
    );
}

/// After a restart, catch-up replays our own recent sends: the ledger on disk still knows
/// them, and a RANDOM_ID_DUPLICATE resolves to the real message id.
#[tokio::test]
async fn own_sends_survive_a_restart_for_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("telegram-sent.json");
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), false));
    {
        let ledger = SentLedger::load(path.clone(), Arc::clone(&clock));
        ledger.record(ChatId(7), MessageId(50), 1234);
        ledger.save().await.unwrap();
    }
    let ledger = SentLedger::load(path.clone(), Arc::clone(&clock));
    assert!(ledger.recorded(ChatId(7), MessageId(50)));
    assert!(!ledger.recorded(ChatId(7), MessageId(51)));
    assert_eq!(ledger.by_random_id(ChatId(7), 1234), Some(MessageId(50)));
    assert_eq!(ledger.by_random_id(ChatId(8), 1234), None);

    // Through the pump: the replayed echo is not the owner's.
    let h = start(vec![upd(outgoing(7, 50)), upd(outgoing(7, 51))]);
    h.ledger.record(ChatId(7), MessageId(50), 1234);
    h.sink.wait_for(1).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(seen, vec![Seen::Owner { chat: 7, id: 51 }]);
}

/// Saves racing from many sends land in order: the file on disk always ends with the
/// newest snapshot, so no recorded send is missing after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_ledger_saves_never_leave_an_older_snapshot_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("telegram-sent.json");
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), false));
    let ledger = SentLedger::load(path.clone(), Arc::clone(&clock));
    for round in 0..20 {
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let ledger = Arc::clone(&ledger);
                tokio::spawn(async move {
                    let id = round * 100 + i;
                    ledger.record(ChatId(7), MessageId(id), id);
                    ledger.save().await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let reloaded = SentLedger::load(path.clone(), Arc::clone(&clock));
        for i in 0..16 {
            let id = round * 100 + i;
            assert!(
                reloaded.recorded(ChatId(7), MessageId(id)),
                "round {round}: send {id} lost by an older snapshot written last"
            );
        }
    }
}

/// Old sends fall off after the horizon; a damaged ledger file is moved aside, not lost.
#[tokio::test]
async fn ledger_forgets_after_the_horizon_and_keeps_a_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("telegram-sent.json");
    let clock = VirtualClock::new(t0(), false);
    let shared: SharedClock = Arc::new(clock.clone());
    let ledger = SentLedger::load(path.clone(), Arc::clone(&shared));
    ledger.record(ChatId(7), MessageId(1), 1);
    clock.advance(personad::adapters::mtproto::sent::DEFAULT_HORIZON + Duration::from_secs(1));
    ledger.record(ChatId(7), MessageId(2), 2);
    assert_eq!(ledger.len(), 1);
    assert!(!ledger.recorded(ChatId(7), MessageId(1)));

    std::fs::write(&path, "{ not json").unwrap();
    let ledger = SentLedger::load(path.clone(), shared);
    assert!(ledger.is_empty());
    assert!(path.with_extension("json.damaged").exists());
}

// ---------------------------------------------------------------------------------------
// One ordered queue (Build 4).

/// During catch-up the owner answered an older inbound message: the inbound one joins the
/// history without a plan and the owner's message cancels, in that order. Other chats are
/// not affected.
#[tokio::test]
async fn owner_answer_during_catch_up_keeps_order_and_suppresses_the_older_inbound() {
    let h = start(vec![
        upd(inbound(7, 1)),
        upd(inbound(9, 2)),
        upd(outgoing(7, 3)),
    ]);
    h.sink.wait_for(3).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![
            Seen::Inbound {
                chat: 7,
                id: 1,
                trigger: false
            },
            Seen::Inbound {
                chat: 9,
                id: 2,
                trigger: true
            },
            Seen::Owner { chat: 7, id: 3 },
        ]
    );
}

/// Old messages (catch-up after downtime), blocked senders and muted chats follow the
/// admission rules; a callout in a muted chat still plans.
#[tokio::test]
async fn admission_rules_for_age_blocklist_and_mute() {
    let old = t0() - jiff::SignedDuration::from_secs(3600);
    let mut muted_callout = msg(-30, 4, 31, false, t0());
    muted_callout.callout = true;
    let h = start_with(
        vec![
            upd(TgUpdate::NewMessage(msg(7, 1, 7, false, old))),
            upd(inbound(666, 2)),
            upd(TgUpdate::NewMessage(msg(-30, 3, 31, false, t0()))),
            upd(TgUpdate::NewMessage(muted_callout)),
        ],
        FakeLookups {
            blocked: [666].into(),
            muted: [-30].into(),
            panics_on_sender: None,
            ..FakeLookups::default()
        },
        true,
    );
    h.sink.wait_for(3).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![
            Seen::Inbound {
                chat: 7,
                id: 1,
                trigger: false
            },
            Seen::Inbound {
                chat: -30,
                id: 3,
                trigger: false
            },
            Seen::Inbound {
                chat: -30,
                id: 4,
                trigger: true
            },
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Restart, supervision (Build 6).

/// The connection ends (pool died): the pump saves the state, reopens the source after a
/// backoff and goes on with the updates that follow (catch-up on the new stream).
#[tokio::test]
async fn restart_with_catch_up_reopens_the_source() {
    let h = start(vec![upd(inbound(7, 1)), Step::End, upd(inbound(7, 2))]);
    h.sink.wait_for(2).await;
    let (seen, script, end) = h.stop().await;
    assert_eq!(end, PumpEnd::Stopped);
    assert_eq!(seen.len(), 2);
    let st = script.st();
    assert_eq!(st.opens, 2);
    assert_eq!(
        st.saves.first(),
        Some(&1),
        "state saved when the first source ended"
    );
}

/// A panic in the update reader is contained: the source is reopened with backoff and the
/// updates after it still arrive.
#[tokio::test]
async fn a_panicking_reader_is_restarted() {
    let h = start(vec![upd(inbound(7, 1)), Step::Panic, upd(inbound(7, 2))]);
    h.sink.wait_for(2).await;
    let (seen, script, _) = h.stop().await;
    assert_eq!(seen.len(), 2);
    assert_eq!(script.st().opens, 2);
}

/// A panic while admitting one update skips that update only.
#[tokio::test]
async fn a_panic_while_admitting_skips_that_update_only() {
    let h = start_with(
        vec![upd(inbound(13, 1)), upd(inbound(7, 2))],
        FakeLookups {
            panics_on_sender: Some(13),
            ..FakeLookups::default()
        },
        true,
    );
    h.sink.wait_for(1).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![Seen::Inbound {
            chat: 7,
            id: 2,
            trigger: true
        }]
    );
}

/// A channel whose difference keeps failing (a long FLOOD_WAIT, CHANNEL_INVALID) is dropped
/// from catch-up after CHANNEL_FAILURE_LIMIT tries instead of blocking every update.
#[tokio::test]
async fn a_failing_channel_difference_is_dropped_after_n_tries() {
    let h = start(vec![Step::FailingChannel(77), upd(inbound(7, 1))]);
    h.sink.wait_for(1).await;
    let (seen, script, _) = h.stop().await;
    assert_eq!(seen.len(), 1);
    assert_eq!(script.st().skipped, vec![77]);
    assert_eq!(script.st().channel_failures, CHANNEL_FAILURE_LIMIT as usize);
}

/// A channel's difference that asks for a long flood wait (ten minutes after a night
/// offline, beyond the channel wait limit) is given up at once instead of holding every DM
/// behind it: the DM behind it is delivered without waiting, the channel is dropped from
/// catch-up, and one rate-limited read of its newest messages later passes them through
/// admission.
#[tokio::test]
async fn a_channel_difference_with_a_long_flood_wait_is_dropped_at_once_and_read_later() {
    let channel = personad::adapters::mtproto::pump::channel_chat(77);
    let mut missed = msg(channel.0, 5, 31, false, t0());
    missed.chat = chat(channel.0);
    let reads = Arc::new(Mutex::new(Vec::new()));
    let h = start_with(
        vec![
            Step::Fail(SourceError::Transient {
                reason: "FLOOD_WAIT (420, value 600)".into(),
                channel: Some(77),
                retry_after: Some(Duration::from_secs(600)),
                permanent: false,
            }),
            upd(inbound(7, 1)),
        ],
        FakeLookups {
            history: [(channel.0, vec![missed])].into(),
            history_reads: Arc::clone(&reads),
            ..FakeLookups::default()
        },
        false,
    );
    // (The clock does not move by itself here: a DM held behind the wait never comes.)
    tokio::time::timeout(Duration::from_secs(10), h.sink.wait_for(1))
        .await
        .expect("the DM waited behind the channel's flood wait");
    assert_eq!(
        h.clock.now(),
        t0(),
        "the DM waited for the channel's flood wait"
    );
    assert_eq!(h.script.st().skipped, vec![77], "dropped after one failure");
    assert!(reads.lock().unwrap().is_empty(), "read at once, not later");
    h.clock
        .advance(personad::adapters::mtproto::pump::REFETCH_EVERY);
    h.sink.wait_for(2).await;
    assert_eq!(
        *reads.lock().unwrap(),
        vec![(channel.0, personad::adapters::mtproto::pump::REFETCH_LIMIT)]
    );
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen[1],
        Seen::Inbound {
            chat: channel.0,
            id: 5,
            trigger: true
        }
    );
}

fn flood(channel: i64, secs: u64) -> Step {
    Step::Fail(SourceError::Transient {
        reason: format!("FLOOD_WAIT (420, value {secs})"),
        channel: Some(channel),
        retry_after: Some(Duration::from_secs(secs)),
        permanent: false,
    })
}

/// Every flood wait that reaches the pump got past the library's own auto-sleep (10 s by
/// default): the channel limit must be above it, or any such wait drops the channel.
#[test]
fn the_channel_wait_limit_is_above_the_librarys_auto_sleep() {
    use personad::adapters::mtproto::pump::{CHANNEL_WAIT_LIMIT, channel_wait_limit};
    assert!(channel_wait_limit(Duration::from_secs(10)) > Duration::from_secs(10));
    assert_eq!(
        channel_wait_limit(Duration::from_secs(10)),
        CHANNEL_WAIT_LIMIT
    );
    assert_eq!(
        channel_wait_limit(Duration::from_secs(120)),
        Duration::from_secs(240)
    );
}

/// A channel's flood wait just past the library's auto-sleep (40 s) is waited out: the
/// channel stays in catch-up and what follows is delivered after Telegram's wait.
#[tokio::test]
async fn a_flood_wait_past_the_librarys_auto_sleep_is_waited_out_not_dropped() {
    let h = start(vec![flood(77, 40), upd(inbound(7, 1))]);
    h.sink.wait_for(1).await;
    let waited = h.clock.now().duration_since(t0()).as_secs();
    assert!(waited >= 40, "asked again after {waited} s");
    let (_, script, _) = h.stop().await;
    assert!(script.st().skipped.is_empty(), "{:?}", script.st().skipped);
}

/// Telegram's flood wait on getChannelDifference is the method's: once one channel met a
/// long one (and was dropped so a single gap stops holding everything), the channels tried
/// while that wait runs meet it too and are not dropped: the reader waits for the window.
#[tokio::test]
async fn a_method_level_flood_wait_does_not_drop_the_channels_tried_meanwhile() {
    let h = start(vec![flood(77, 600), flood(78, 599), upd(inbound(7, 1))]);
    h.sink.wait_for(1).await;
    let waited = h.clock.now().duration_since(t0()).as_secs();
    assert!(waited >= 599, "the window was waited out: {waited} s");
    let (_, script, _) = h.stop().await;
    assert_eq!(script.st().skipped, vec![77], "only the first is dropped");
}

/// A stop while the reader waits out a long flood wait (an hour) ends the pump at once
/// (systemd would kill a process that hangs) and the update state is saved on the way out.
#[tokio::test]
async fn a_stop_during_a_long_flood_wait_ends_promptly_and_saves_the_state() {
    let h = start_with(
        vec![Step::Fail(SourceError::Transient {
            reason: "FLOOD_WAIT (420, value 3600)".into(),
            channel: None,
            retry_after: Some(Duration::from_secs(3600)),
            permanent: false,
        })],
        FakeLookups::default(),
        false,
    );
    // The reader has taken the failure and is in its backoff.
    while !h.script.st().steps.is_empty() {
        tokio::task::yield_now().await;
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    h.stop.cancel();
    let end = tokio::time::timeout(Duration::from_secs(5), h.task)
        .await
        .expect("the pump hung in the flood wait's backoff")
        .unwrap();
    assert_eq!(end, PumpEnd::Stopped);
    assert_eq!(h.clock.now(), t0(), "no virtual time passed");
    assert_eq!(
        h.script.st().saves,
        vec![0],
        "the state was saved at the end"
    );
}

/// A channel whose difference is refused for good (CHANNEL_INVALID) is dropped at once.
#[tokio::test]
async fn a_permanently_refused_channel_difference_is_dropped_at_once() {
    let h = start(vec![
        Step::Fail(SourceError::Transient {
            reason: "CHANNEL_INVALID (400)".into(),
            channel: Some(88),
            retry_after: None,
            permanent: true,
        }),
        upd(inbound(7, 1)),
    ]);
    h.sink.wait_for(1).await;
    let (_, script, _) = h.stop().await;
    assert_eq!(script.st().skipped, vec![88]);
}

/// A flood wait of the update stream itself (no channel) is honoured: the reader waits at
/// least Telegram's seconds before asking again, not its own shorter backoff.
#[tokio::test]
async fn a_flood_wait_of_the_stream_is_honoured_by_the_backoff() {
    let h = start_with(
        vec![
            Step::Fail(SourceError::Transient {
                reason: "FLOOD_WAIT (420, value 30)".into(),
                channel: None,
                retry_after: Some(Duration::from_secs(30)),
                permanent: false,
            }),
            upd(inbound(7, 1)),
        ],
        FakeLookups::default(),
        true,
    );
    h.sink.wait_for(1).await;
    let waited = h.clock.now().duration_since(t0()).as_secs();
    assert!(waited >= 30, "asked again after {waited} s");
    let _ = h.stop().await;
}

/// A dead session stops the agent, with no restart.
#[tokio::test]
async fn unauthorized_stream_stops_the_agent() {
    let h = start(vec![Step::Fail(SourceError::Unauthorized(
        "AUTH_KEY_UNREGISTERED (401)".into(),
    ))]);
    let end = h.task.await.unwrap();
    assert!(matches!(end, PumpEnd::Unauthorized(_)));
    assert_eq!(h.sink.seen(), vec![Seen::Unauthorized]);
    assert_eq!(h.script.st().opens, 1);
}

/// Transient stream errors are retried on the same source (grammers keeps the pending
/// difference), with backoff on the project clock.
#[tokio::test]
async fn transient_stream_errors_retry_on_the_same_source() {
    let h = start(vec![
        Step::Fail(SourceError::transient("i/o")),
        upd(inbound(7, 1)),
    ]);
    h.sink.wait_for(1).await;
    let (_, script, _) = h.stop().await;
    assert_eq!(script.st().opens, 1);
}

// ---------------------------------------------------------------------------------------
// Telegram semantics (Build 7).

/// An edited inbound message reaches the planner as an edit (not as a new message that
/// would start a second plan); our own edits are ignored; a deletion is passed on; a
/// migrated group is reported with its new id.
#[tokio::test]
async fn edits_deletions_and_migrations_are_routed() {
    let mut edited = msg(7, 1, 7, false, t0());
    edited.message.text = "fixed typo".into();
    let mut own_edit = msg(7, 2, ME, true, t0());
    own_edit.message.text = "ours".into();
    let h = start(vec![
        upd(inbound(7, 1)),
        upd(TgUpdate::Edited(edited)),
        upd(TgUpdate::Edited(own_edit)),
        upd(TgUpdate::Deleted {
            chat: None,
            ids: vec![MessageId(1)],
        }),
        upd(TgUpdate::Migrated {
            from: ChatId(-40),
            to: ChatId(-1000000000040),
        }),
    ]);
    h.sink.wait_for(4).await;
    let (seen, _, _) = h.stop().await;
    assert_eq!(
        seen,
        vec![
            Seen::Inbound {
                chat: 7,
                id: 1,
                trigger: true
            },
            Seen::Edited {
                chat: 7,
                id: 1,
                text: "fixed typo".into()
            },
            Seen::Deleted {
                chat: None,
                ids: vec![1]
            },
            Seen::Migrated {
                from: -40,
                to: -1000000000040
            },
        ]
    );
}

/// messages.deleteHistory is repeated while Telegram reports `offset > 0`.
#[tokio::test]
async fn delete_history_repeats_while_offset_is_positive() {
    let offsets = Mutex::new(VecDeque::from([1200, 300, 0]));
    let rounds =
        recover::delete_all(|| async { Ok(offsets.lock().unwrap().pop_front().unwrap_or(0)) })
            .await
            .unwrap();
    assert_eq!(rounds, 3);
    assert!(offsets.lock().unwrap().is_empty());

    let endless = recover::delete_all(|| async { Ok(5) }).await;
    assert!(endless.is_err(), "bounded at {MAX_DELETE_ROUNDS} rounds");
    let failing =
        recover::delete_all(|| async { Err::<i32, _>(TelegramError::FloodWait { secs: 30 }) })
            .await;
    assert_eq!(failing, Err(TelegramError::FloodWait { secs: 30 }));
}

/// Rejected entities fall back to the same text without entities (one retry, no loop).
#[tokio::test]
async fn rejected_entities_fall_back_to_plain_text() {
    let tries = Mutex::new(Vec::new());
    let sent = recover::with_entity_fallback(|with_entities| {
        tries.lock().unwrap().push(with_entities);
        async move {
            if with_entities {
                Err(CallError::BadEntities(TelegramError::Invalid(
                    "ENTITY_BOUNDS_INVALID (400)".into(),
                )))
            } else {
                Ok(1)
            }
        }
    })
    .await;
    assert_eq!(sent, Ok(1));
    assert_eq!(*tries.lock().unwrap(), vec![true, false]);
    assert!(recover::is_entity_error("ENTITY_BOUNDS_INVALID"));
    assert!(recover::is_entity_error("URL_INVALID"));
    assert!(!recover::is_entity_error("PEER_ID_INVALID"));
    assert!(recover::is_unknown_peer("PEER_ID_INVALID"));
}

/// Reactions: U+FE0F is stripped or added to match Telegram's list.
#[test]
fn reaction_variant_toggles_the_presentation_selector() {
    assert_eq!(reaction_variant("❤️").as_deref(), Some("❤"));
    assert_eq!(reaction_variant("❤").as_deref(), Some("❤️"));
    assert_eq!(reaction_variant("👍").as_deref(), Some("👍\u{FE0F}"));
    assert_eq!(reaction_variant("a"), None);
    assert_eq!(reaction_variant("👨‍👩‍👧"), None);
    assert_eq!(reaction_variant(""), None);
}

/// A chat without its own mute setting follows the account's global setting for its kind.
#[test]
fn mute_follows_the_global_setting_when_the_chat_has_none() {
    let now = 1_000;
    assert!(muted(Some(2_000), None, now));
    assert!(
        !muted(Some(0), Some(i32::MAX), now),
        "chat explicitly unmuted"
    );
    assert!(muted(None, Some(i32::MAX), now), "global mute applies");
    assert!(!muted(None, Some(500), now), "global mute expired");
    assert!(!muted(None, None, now));
}

/// Blocklist and mute look-ups: answers are cached; a failed look-up (a flood wait) gives
/// the fail-open answer and is not tried again for the failure TTL, instead of one more
/// failing call for every message.
#[tokio::test]
async fn failed_lookups_are_cached_briefly_instead_of_retried_per_message() {
    use personad::adapters::mtproto::recover::Memo;
    let clock = VirtualClock::new(t0(), false);
    let memo: Memo<i64, bool> = Memo::new(
        Arc::new(clock.clone()),
        Duration::from_secs(60),
        Duration::from_secs(30),
        10,
    );
    let calls = AtomicUsize::new(0);
    let failing = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<bool, _>(TelegramError::FloodWait { secs: 300 })
    };
    assert_eq!(memo.get(1, failing).await, None);
    assert_eq!(memo.get(1, failing).await, None);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "not retried within 30 s");
    clock.advance(Duration::from_secs(31));
    let ok = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok::<_, TelegramError>(true)
    };
    assert_eq!(memo.get(1, ok).await, Some(true));
    assert_eq!(memo.get(1, ok).await, Some(true));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "answers cached");
    clock.advance(Duration::from_secs(61));
    assert_eq!(memo.get(1, ok).await, Some(true));
    assert_eq!(calls.load(Ordering::SeqCst), 3, "refreshed after a minute");
    memo.invalidate(&1);
    assert_eq!(memo.get(1, ok).await, Some(true));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// A look-up that fails (a flood wait) once an answer is known keeps that answer (a muted
/// chat stays muted, a blocked user blocked) instead of the fail-open one, and is not tried
/// again for the failure TTL.
#[tokio::test]
async fn a_failed_look_up_keeps_the_last_known_answer() {
    use personad::adapters::mtproto::recover::Memo;
    let clock = VirtualClock::new(t0(), false);
    let memo: Memo<i64, bool> = Memo::new(
        Arc::new(clock.clone()),
        Duration::from_secs(60),
        Duration::from_secs(30),
        10,
    );
    let calls = AtomicUsize::new(0);
    memo.put(1, true);
    clock.advance(Duration::from_secs(61));
    let failing = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<bool, _>(TelegramError::FloodWait { secs: 300 })
    };
    assert_eq!(memo.get(1, failing).await, Some(true), "the known answer");
    assert_eq!(memo.get(1, failing).await, Some(true));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "not retried within 30 s");
    clock.advance(Duration::from_secs(31));
    assert_eq!(memo.get(1, failing).await, Some(true), "still known");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

// ---------------------------------------------------------------------------------------
// Through the real runtime.

/// Forwards to the runtime and records, so the test knows when the pump has pushed.
struct Tee {
    runtime: RuntimeSink,
    recorder: Arc<Recorder>,
}

impl Sink for Tee {
    fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
        self.runtime.inbound(chat.clone(), message.clone(), trigger);
        self.recorder.inbound(chat, message, trigger);
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        self.runtime.owner_wrote(chat.clone(), message.clone());
        self.recorder.owner_wrote(chat, message);
    }
    fn edited(&self, chat: Chat, message: Message) {
        self.runtime.edited(chat.clone(), message.clone());
        self.recorder.edited(chat, message);
    }
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
        self.runtime.deleted(chat, ids.clone());
        self.recorder.deleted(chat, ids);
    }
    fn migrated(&self, from: ChatId, to: ChatId) {
        self.runtime.migrated(from, to);
        self.recorder.migrated(from, to);
    }
    fn unauthorized(&self, reason: &str) {
        self.runtime.unauthorized(reason);
        self.recorder.unauthorized(reason);
    }
}

/// Runs `script` through a pump whose sink is the harness's real runtime, recorded so the
/// test can wait for what was pushed: the recorder, the stop token and the pump's task.
fn pump_into_runtime(
    h: &common::Harness,
    script: Script,
) -> (
    Arc<Recorder>,
    CancellationToken,
    tokio::task::JoinHandle<PumpEnd>,
) {
    let recorder = Arc::new(Recorder::default());
    let pump = Pump {
        agent: common::AGENT.into(),
        factory: Arc::new(script),
        lookups: Arc::new(FakeLookups::default()),
        sink: Arc::new(Tee {
            runtime: RuntimeSink {
                agent: common::AGENT.into(),
                ingress: personad::ingress::Ingress::new(
                    h.handle.clone(),
                    None,
                    personad::ingress::Groups::new(),
                ),
            },
            recorder: Arc::clone(&recorder),
        }),
        ledger: SentLedger::in_memory(Arc::clone(&h.shared_clock)),
        clock: Arc::clone(&h.shared_clock),
        opts: PumpOptions {
            max_catch_up_age: Duration::from_secs(15 * 60),
            channel_wait_limit: personad::adapters::mtproto::pump::CHANNEL_WAIT_LIMIT,
        },
    };
    let stop = CancellationToken::new();
    let task = tokio::spawn(pump.run(stop.clone()));
    (recorder, stop, task)
}

/// End to end: a scripted new message goes through the pump into the real runtime, which
/// plans and answers it on the in-memory backend; the owner's own message in another chat
/// (during catch-up, behind that chat's inbound message) leaves that chat unanswered.
#[tokio::test]
async fn through_the_runtime_messages_are_answered_and_the_owner_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let (bob, eve) = (common::dm(5), common::dm(6));
    let mut h = common::Harness::start(
        dir.path(),
        common::reply_with("hi"),
        common::config(),
        &[bob.clone(), eve.clone()],
    );
    let from_bob = h.say_silently(&bob, "bob", "hello").await;
    let from_eve = h.say_silently(&eve, "eve", "hey").await;
    let mut owner = msg(6, from_eve.id.0 + 1, ME, true, common::t0());
    owner.chat = eve.clone();
    let script = Script::new(vec![
        upd(TgUpdate::NewMessage(Incoming {
            chat: bob.clone(),
            message: from_bob,
            callout: false,
            sticker_set_id: None,
        })),
        upd(TgUpdate::NewMessage(Incoming {
            chat: eve.clone(),
            message: from_eve,
            callout: false,
            sticker_set_id: None,
        })),
        upd(TgUpdate::NewMessage(owner)),
    ]);
    let (recorder, stop, task) = pump_into_runtime(&h, script);
    recorder.wait_for(3).await;
    h.settle().await;
    let sends: Vec<(i64, String)> = h.sends().into_iter().map(|(c, t, _)| (c.0, t)).collect();
    assert_eq!(sends, vec![(5, "hi".to_string())]);
    stop.cancel();
    assert_eq!(task.await.unwrap(), PumpEnd::Stopped);
    h.stop().await.unwrap();
}

/// End to end: Telegram applied an edit and a deletion; the pump routes them as such (no
/// second plan for the edit), and the planner, reading history when it plans, sees the
/// edited text and not the deleted message.
#[tokio::test]
async fn through_the_runtime_the_planner_sees_edits_and_not_deleted_messages() {
    let dir = tempfile::tempdir().unwrap();
    let bob = common::dm(5);
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let seen_by_planner = Arc::clone(&seen);
    let planner = common::ScriptedPlanner::new(move |req, _| {
        seen_by_planner
            .lock()
            .unwrap()
            .push(req.history.iter().map(|m| m.text.clone()).collect());
        Ok(vec![common::send("ok")])
    });
    let mut h = common::Harness::start(
        dir.path(),
        planner,
        common::config(),
        std::slice::from_ref(&bob),
    );
    let typo = h.say_silently(&bob, "bob", "helo").await;
    let extra = h.say_silently(&bob, "bob", "oops, wrong chat").await;
    let edited = h
        .telegram
        .edit_inbound(bob.id, typo.id, "hello")
        .await
        .unwrap();
    assert_eq!(h.telegram.delete_inbound(bob.id, &[extra.id]).await, Ok(1));
    let incoming = |message: Message| Incoming {
        chat: bob.clone(),
        message,
        callout: false,
        sticker_set_id: None,
    };
    let script = Script::new(vec![
        upd(TgUpdate::NewMessage(incoming(typo))),
        upd(TgUpdate::Edited(incoming(edited))),
        upd(TgUpdate::Deleted {
            chat: None,
            ids: vec![extra.id],
        }),
    ]);
    let (recorder, stop, task) = pump_into_runtime(&h, script);
    recorder.wait_for(3).await;
    h.settle().await;
    assert_eq!(*seen.lock().unwrap(), vec![vec!["hello".to_string()]]);
    assert_eq!(
        h.planner.calls(),
        1,
        "one plan: the edit started no second one"
    );
    stop.cancel();
    task.await.unwrap();
    h.stop().await.unwrap();
}

/// End to end: a basic group is upgraded to a supergroup while a plan for it waits; the plan
/// moves to the supergroup's id and its reply is sent there, not to the dead basic group.
/// The Governor stands in front of Telegram, as in the daemon: the supergroup's own history
/// has nobody's message yet, and the moved plan still passes its first-contact rule.
#[tokio::test]
async fn through_the_runtime_a_migrated_groups_plan_is_answered_in_the_supergroup() {
    use personad::adapters::governor::{Governor, GovernorConfig};
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (common::group(-5), common::group(-1_000_000_005));
    let mut h = common::Harness::start_wrapped(
        dir.path(),
        common::reply_with("hi"),
        common::config(),
        &[old.clone(), new.clone()],
        Box::new(|mem, clock| {
            Arc::new(Governor::new(mem, clock, GovernorConfig::default()))
                as Arc<dyn personad::ports::telegram::Telegram>
        }),
    );
    let question = h.say_silently(&old, "bob", "anyone?").await;
    let script = Script::new(vec![
        upd(TgUpdate::NewMessage(Incoming {
            chat: old.clone(),
            message: question,
            callout: true,
            sticker_set_id: None,
        })),
        upd(TgUpdate::Migrated {
            from: old.id,
            to: new.id,
        }),
    ]);
    let (recorder, stop, task) = pump_into_runtime(&h, script);
    recorder.wait_for(2).await;
    h.settle().await;
    let sends: Vec<(i64, String)> = h.sends().into_iter().map(|(c, t, _)| (c.0, t)).collect();
    assert_eq!(sends, vec![(new.id.0, "hi".to_string())]);
    stop.cancel();
    assert_eq!(task.await.unwrap(), PumpEnd::Stopped);
    h.stop().await.unwrap();
}
