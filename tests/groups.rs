//! Group decisions: the pure pipeline (prefilter rules, explicit address forms, modes,
//! share of voice, loop guard) and the gate in front of the real runtime (classifier
//! coalescing, fail-closed, reactions, delayed explicit answers) against a mock Gemini.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use jiff::Timestamp;
use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::memory::{Incoming, Op};
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{ConversationKey, TaskKind};
use personad::core::group::classifier::Scores;
use personad::core::group::decide::{self, ChatState, Context, Identity, Inbound, Stage, Verdict};
use personad::core::group::settings::{GroupSettings, TriggerMode};
use personad::core::model::{ChatId, Mention, Message, MessageId, Sender};
use personad::ingress::classifier::Classifier;
use personad::ingress::gate::{GateConfig, GroupGate, identity_for};
use personad::ingress::{Groups, Ingress};
use personad::ports::clock::{self, SharedClock};
use personad::ports::llm::ApiKey;
use personad::ports::telegram::Telegram;
use personad::runtime::RuntimeHandle;
use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ME: i64 = 42;
const PEER: i64 = 77;

fn me() -> Identity {
    Identity {
        user_id: ME,
        username: Some("wren_bird".into()),
        names: vec!["Wren".into(), "Birdie".into()],
    }
}

fn msg(id: i64, from: i64, text: &str) -> Message {
    Message {
        id: MessageId(id),
        chat: ChatId(-100),
        sender: Sender {
            id: from,
            name: format!("user{from}"),
            username: None,
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: from == ME,
        text: text.into(),
        mentions: Vec::new(),
        reply_to: None,
        date: t0(),
        media: None,
    }
}

fn ctx<'a>(
    id: &'a Identity,
    s: &'a GroupSettings,
    mode: TriggerMode,
    peers: &'a [i64],
) -> Context<'a> {
    Context {
        identity: id,
        settings: s,
        mode,
        peers,
    }
}

fn run(mode: TriggerMode, state: &ChatState, m: &Message) -> decide::Decision {
    let id = me();
    let s = GroupSettings::default();
    decide::decide(
        &ctx(&id, &s, mode, &[PEER]),
        state,
        &Inbound {
            message: m,
            blocked: false,
            callout: false,
        },
        t0(),
    )
}

fn scores(addressed: bool, confidence: f64) -> Scores {
    Scores {
        addressed,
        confidence,
        wanna_interject: false,
        interject: 0.0,
        impulse: 0.0,
        is_lightweight: false,
        reaction: None,
        reason: String::new(),
    }
}

#[test]
fn prefilter_drops_blocked_and_keeps_bots_peers_and_side_talk_as_history() {
    let id = me();
    let s = GroupSettings::default();
    let state = ChatState::default();
    let hello = msg(1, 5, "Wren, hello?");
    let blocked = decide::decide(
        &ctx(&id, &s, TriggerMode::Smart, &[]),
        &state,
        &Inbound {
            message: &hello,
            blocked: true,
            callout: false,
        },
        t0(),
    );
    assert_eq!(
        (blocked.verdict, blocked.reason),
        (Verdict::Drop, "blocked_sender")
    );

    let mut bot = msg(2, 6, "Wren, status?");
    bot.sender.is_bot = true;
    let d = run(TriggerMode::Talkative, &state, &bot);
    assert_eq!((d.verdict, d.reason), (Verdict::History, "bot_sender"));
    let opt_in = GroupSettings {
        reply_to_bots: true,
        ..GroupSettings::default()
    };
    let d = decide::decide(
        &ctx(&id, &opt_in, TriggerMode::Smart, &[]),
        &state,
        &Inbound {
            message: &bot,
            blocked: false,
            callout: false,
        },
        t0(),
    );
    assert!(d.triggered(), "a persona that opts in answers bots: {d:?}");

    let d = run(TriggerMode::Talkative, &state, &msg(3, PEER, "what a day?"));
    assert_eq!((d.verdict, d.reason), (Verdict::History, "other_persona"));

    let mut reply = msg(4, 5, "what do you mean?");
    reply.reply_to = Some(MessageId(1));
    let d = run(TriggerMode::Smart, &state, &reply);
    assert_eq!((d.verdict, d.reason), (Verdict::History, "reply_to_other"));
    let d = run(TriggerMode::Talkative, &state, &reply);
    assert_eq!(
        d.verdict,
        Verdict::Classify,
        "talkative may still join: {d:?}"
    );

    let d = run(
        TriggerMode::Smart,
        &state,
        &msg(5, 5, "@bob can you check this?"),
    );
    assert_eq!(
        (d.verdict, d.reason),
        (Verdict::History, "addressed_to_other")
    );
}

#[test]
fn every_explicit_form_triggers_in_every_mode_and_a_name_inside_a_word_does_not() {
    let mut state = ChatState::default();
    state.record(&msg(10, ME, "I said something"), true);
    let mut reply = msg(11, 5, "yes you did");
    reply.reply_to = Some(MessageId(10));
    let mut by_id = msg(12, 5, "look");
    by_id.mentions = vec![Mention {
        user_id: Some(ME),
        username: None,
    }];
    let mut by_username = msg(13, 5, "look");
    by_username.mentions = vec![Mention {
        user_id: None,
        username: Some("Wren_Bird".into()),
    }];
    let cases = [
        (reply, "reply_to_us"),
        (by_id, "mention_entity"),
        (by_username, "mention_entity"),
        (msg(14, 5, "ping @WREN_BIRD please"), "at_username"),
        (msg(15, 5, "wren: thoughts"), "name"),
        (msg(16, 5, "what does Birdie think"), "name"),
    ];
    for mode in [
        TriggerMode::Strict,
        TriggerMode::Smart,
        TriggerMode::Talkative,
    ] {
        for (m, reason) in &cases {
            let d = run(mode, &state, m);
            assert!(d.triggered(), "{mode}: {:?} must trigger: {d:?}", m.text);
            assert_eq!((d.stage, d.reason), (Stage::Explicit, *reason));
            assert_eq!(
                d.verdict,
                Verdict::Trigger {
                    at: t0(),
                    quote: true
                }
            );
        }
    }
    for text in [
        "Wrens nest here",
        "birdies everywhere",
        "email me at @wren_birdy",
    ] {
        let d = run(TriggerMode::Strict, &state, &msg(20, 5, text));
        assert!(!d.triggered(), "{text:?} is not an address: {d:?}");
    }
}

#[test]
fn modes_decide_who_asks_the_classifier() {
    let state = ChatState::default();
    let question = msg(1, 5, "does anyone know a good pizza place?");
    let chatter = msg(2, 5, "lol same");
    let d = run(TriggerMode::Strict, &state, &question);
    assert_eq!((d.verdict, d.reason), (Verdict::History, "not_explicit"));
    assert_eq!(
        run(TriggerMode::Smart, &state, &question).verdict,
        Verdict::Classify
    );
    assert_eq!(
        run(TriggerMode::Smart, &state, &chatter).verdict,
        Verdict::History
    );
    assert_eq!(
        run(TriggerMode::Talkative, &state, &chatter).verdict,
        Verdict::Classify
    );

    // Part of our conversation: the 3 messages after ours, within 5 minutes.
    let mut talking = ChatState::default();
    talking.record(&msg(3, ME, "I like it"), true);
    assert_eq!(
        run(TriggerMode::Smart, &talking, &chatter).reason,
        "in_conversation"
    );
    for i in 0..3 {
        talking.record(&msg(4 + i, 5, "ok"), false);
    }
    assert_eq!(
        run(TriggerMode::Smart, &talking, &chatter).verdict,
        Verdict::History
    );

    // After the classifier: smart needs `addressed` over the threshold, talkative also
    // takes an interjection.
    let id = me();
    let s = GroupSettings::default();
    let smart = ctx(&id, &s, TriggerMode::Smart, &[]);
    assert!(decide::resolve(&smart, &state, &question, Some(scores(true, 0.6)), t0()).triggered());
    assert!(
        !decide::resolve(&smart, &state, &question, Some(scores(true, 0.59)), t0()).triggered()
    );
    let mut wants = scores(false, 0.0);
    wants.wanna_interject = true;
    wants.interject = 0.7;
    assert!(!decide::resolve(&smart, &state, &chatter, Some(wants.clone()), t0()).triggered());
    let talk = ctx(&id, &s, TriggerMode::Talkative, &[]);
    let d = decide::resolve(&talk, &state, &chatter, Some(wants), t0());
    assert_eq!((d.triggered(), d.reason), (true, "interjection"));
    // Fail closed.
    let d = decide::resolve(&smart, &state, &question, None, t0());
    assert_eq!((d.triggered(), d.reason), (false, "classifier_failed"));
}

#[test]
fn impulse_decides_quoting_and_lightweight_reacts_except_to_requests() {
    let id = me();
    let s = GroupSettings::default();
    let state = ChatState::default();
    let c = ctx(&id, &s, TriggerMode::Smart, &[]);
    let m = msg(1, 5, "Wren would love this");
    let mut sc = scores(true, 0.9);
    sc.impulse = 0.81;
    assert_eq!(
        decide::resolve(&c, &state, &m, Some(sc.clone()), t0()).verdict,
        Verdict::Trigger {
            at: t0(),
            quote: true
        }
    );
    sc.impulse = 0.8;
    assert_eq!(
        decide::resolve(&c, &state, &m, Some(sc.clone()), t0()).verdict,
        Verdict::Trigger {
            at: t0(),
            quote: false
        }
    );
    sc.is_lightweight = true;
    sc.reaction = Some("👍".into());
    assert_eq!(
        decide::resolve(&c, &state, &m, Some(sc.clone()), t0()).verdict,
        Verdict::React {
            emoji: "👍".into()
        }
    );
    let q = msg(2, 5, "can you send me the link?");
    assert!(
        decide::resolve(&c, &state, &q, Some(sc), t0()).triggered(),
        "a request to us always gets a full plan"
    );
}

#[test]
fn share_of_voice_drops_interjections_and_delays_explicit_answers() {
    let id = me();
    let s = GroupSettings::default();
    let talk = ctx(&id, &s, TriggerMode::Talkative, &[]);
    let mut state = ChatState::default();
    state.record(&msg(1, ME, "hi all"), true);
    state.record_plan(t0(), None);
    let later = clock::add(t0(), secs(20));
    let mut wants = scores(false, 0.0);
    wants.wanna_interject = true;
    wants.interject = 0.9;
    let chatter = msg(2, 5, "nice");
    let d = decide::resolve(&talk, &state, &chatter, Some(wants.clone()), later);
    assert_eq!(
        (d.stage, d.verdict.clone(), d.reason),
        (Stage::ShareOfVoice, Verdict::History, "share_cap")
    );
    let d = run_at(&state, &msg(3, 5, "Wren, you there?"), later);
    assert_eq!(d.reason, "explicit_delayed");
    assert_eq!(
        d.verdict,
        Verdict::Trigger {
            at: clock::add(t0(), secs(60)),
            quote: true
        }
    );

    // 25 % of the last 40: with 10 of ours among 40, no interjection even after the cooldown.
    let mut busy = ChatState::default();
    for i in 0..40 {
        busy.record(
            &msg(100 + i, if i % 4 == 0 { ME } else { 5 }, "x"),
            i % 4 == 0,
        );
    }
    let d = decide::resolve(&talk, &busy, &chatter, Some(wants.clone()), later);
    assert_eq!(d.reason, "share_cap");
    // 20 plans an hour: the 21st explicit answer waits until the first leaves the hour.
    let mut hourly = ChatState::default();
    for i in 0..20 {
        hourly.record_plan(clock::add(t0(), secs(61 * i)), None);
    }
    let now = clock::add(t0(), secs(61 * 20));
    assert_eq!(
        hourly.next_plan_allowed(&s, now),
        clock::add(t0(), secs(3600))
    );
}

fn run_at(state: &ChatState, m: &Message, now: Timestamp) -> decide::Decision {
    let id = me();
    let s = GroupSettings::default();
    decide::decide(
        &ctx(&id, &s, TriggerMode::Smart, &[]),
        state,
        &Inbound {
            message: m,
            blocked: false,
            callout: false,
        },
        now,
    )
}

/// Two personas of one daemon in one group, each answering whenever the other names it:
/// the loop guard ends the back-and-forth after 3 exchanges per pair in 10 minutes.
#[test]
fn two_personas_addressing_each_other_stop_within_the_loop_guard() {
    let a = Identity {
        user_id: 1,
        username: None,
        names: vec!["Ann".into()],
    };
    let b = Identity {
        user_id: 2,
        username: None,
        names: vec!["Bo".into()],
    };
    let s = GroupSettings {
        cooldown: Duration::ZERO,
        ..GroupSettings::default()
    };
    let (mut sa, mut sb) = (ChatState::default(), ChatState::default());
    let mut now = t0();
    let mut speaker = 1i64;
    let mut text = "Bo, what do you think?".to_string();
    let mut replies = 0;
    for id in 1..50 {
        now = clock::add(now, secs(5));
        let m = Message {
            id: MessageId(id),
            ..msg(id, speaker, &text)
        };
        // The listener decides; the speaker records its own message.
        let (listener, lstate, sstate, peer) = if speaker == 1 {
            (&b, &mut sb, &mut sa, [1])
        } else {
            (&a, &mut sa, &mut sb, [2])
        };
        sstate.record(&m, true);
        let d = decide::decide(
            &ctx(listener, &s, TriggerMode::Smart, &peer),
            lstate,
            &Inbound {
                message: &m,
                blocked: false,
                callout: false,
            },
            now,
        );
        lstate.record(&m, false);
        if !d.triggered() {
            assert_eq!(d.reason, "loop_guard");
            break;
        }
        lstate.record_plan(now, Some(speaker));
        replies += 1;
        text = format!("{}, really?", if speaker == 1 { "Ann" } else { "Bo" });
        speaker = if speaker == 1 { 2 } else { 1 };
    }
    assert!(replies <= 6, "at most 3 answers each, got {replies}");
    assert!(
        replies >= 3,
        "the guard must not stop the first exchanges: {replies}"
    );
}

// ---- the gate in front of the real runtime, with a mock Gemini classifier ----

fn classifier_answer(v: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": v.to_string()}]}, "finishReason": "STOP"}]
    }))
}

fn raw_answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
    }))
}

async fn mock(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

/// One request per call: the Gemini client has no retries of its own (the retry policy is a
/// wrapper the classifier does not use), so the clock is not needed here.
fn gemini(uri: &str, _clock: SharedClock) -> Arc<GeminiClient> {
    let mut cfg = GeminiConfig::new(ApiKey::new("test-key"));
    cfg.base_url = uri.to_string();
    Arc::new(GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}")))
}

fn not_addressed() -> Value {
    json!({"addressed": false, "confidence": 0.1, "wanna_interject": false, "interject": 0.0,
           "impulse": 0.0, "is_lightweight": false, "reason": "chatter"})
}

struct GroupRun {
    h: Harness,
    gate: GroupGate,
    /// The agent's gates as the MTProto pump's sink holds them (`RuntimeSink::groups`).
    /// The runtime behind the admission chain (the group gate's step), as sources see it.
    gated: Ingress,
    planner: Arc<ScriptedPlanner>,
}

fn start_group(dir: &std::path::Path, headings: &str, server: Option<&MockServer>) -> GroupRun {
    let persona = persona_with(AGENT, headings);
    let planner = Arc::new(reply_with("on it"));
    let p = Arc::clone(&planner);
    let h = Harness::start_as(
        persona.clone(),
        dir,
        move |_| p,
        config(),
        &[group(-100)],
        None,
        None,
    );
    let classifier = server.map(|s| {
        Classifier::new(
            gemini(&s.uri(), Arc::clone(&h.shared_clock)),
            Arc::clone(&h.shared_clock),
        )
    });
    let gate = GroupGate::new(GateConfig {
        agent: AGENT.into(),
        identity: identity_for(&persona, h.telegram.self_id(), Some("ann_here".into())),
        persona: Arc::new(persona),
        telegram: h.telegram.clone(),
        runtime: h.handle.clone(),
        classifier,
        classifier_model: None,
        clock: Arc::clone(&h.shared_clock),
        peers: personad::ingress::gate::peers([]),
        modes: Default::default(),
    });
    let groups = Arc::clone(&h.groups);
    groups.insert(AGENT, gate.clone());
    let gated = Ingress::new(h.handle.clone(), None, Arc::clone(&groups));
    GroupRun {
        h,
        gate,
        gated,
        planner,
    }
}

impl GroupRun {
    async fn say(&self, from: &str, text: &str) -> Message {
        let m = self
            .h
            .telegram
            .inject(
                ChatId(-100),
                Incoming {
                    from: from.into(),
                    text: text.into(),
                    ..Incoming::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("inject: {e}"));
        self.gated.push(AGENT, group(-100), m.clone(), true);
        m
    }

    async fn settle(&mut self) {
        drop(self.h.hold.take());
        for _ in 0..3 {
            self.h.handle.wait_idle().await;
        }
        self.h.hold = Some(self.h.shared_clock.hold());
    }

    fn reactions(&self) -> Vec<String> {
        self.h
            .telegram
            .actions()
            .into_iter()
            .filter_map(|r| match r.action {
                personad::adapters::memory::Action::React { emoji, .. } => Some(emoji),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test]
async fn a_burst_of_ten_open_questions_costs_one_classifier_call_and_no_plan() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(classifier_answer(not_addressed())).await;
    let mut g = start_group(dir.path(), "", Some(&server));
    for i in 0..10 {
        g.say("Bob", &format!("anyone seen my keys? ({i})")).await;
        g.h.pass(Duration::from_millis(300)).await;
    }
    g.settle().await;
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 1, "one coalesced call for the burst");
    assert_eq!(g.gate.classifier_calls(), 1);
    assert_eq!(g.planner.calls(), 0, "not addressed: no plan");
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(body["generationConfig"]["responseSchema"]["type"], "OBJECT");
    let user: Value =
        serde_json::from_str(body["contents"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(user["new_messages"].as_array().map(Vec::len), Some(10));
    assert_eq!(user["member"]["name"], AGENT);
}

/// The persona's `# Language` decides which request words the smart-mode prefilter knows:
/// with German named, an English "anyone know" is chatter (history, no classifier call),
/// while a German "weiß jemand" goes to the classifier. (Without the languages passed to the
/// prefilter, every Latin-script table would be in play and the English line would cost a
/// call.)
#[tokio::test]
async fn the_personas_language_decides_which_request_words_reach_the_classifier() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(classifier_answer(not_addressed())).await;
    let mut g = start_group(dir.path(), "# Language\nde\n", Some(&server));
    g.say("Bob", "anyone know a good pizza place").await;
    g.settle().await;
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        0,
        "English request words asked the classifier though the persona speaks German"
    );
    g.say("Bob", "weiß jemand eine gute Pizzeria").await;
    g.settle().await;
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1,
        "a German request did not reach the classifier"
    );
    assert_eq!(g.planner.calls(), 0, "not addressed: no plan");
}

#[tokio::test]
async fn an_unusable_classifier_answer_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(raw_answer("Sure! I think they mean you.")).await;
    let mut g = start_group(dir.path(), "", Some(&server));
    g.say("Bob", "who wants to review my PR?").await;
    g.settle().await;
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
    assert_eq!(g.planner.calls(), 0);
    assert!(g.h.sends().is_empty());
}

#[tokio::test]
async fn a_classifier_that_does_not_answer_times_out_on_the_project_clock() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(classifier_answer(not_addressed()).set_delay(Duration::from_secs(30)))
        .mount(&server)
        .await;
    let vclock = personad::ports::clock::VirtualClock::new(t0(), false);
    let shared: SharedClock = Arc::new(vclock.clone());
    let classifier = Classifier::new(gemini(&server.uri(), Arc::clone(&shared)), shared);
    let history: Vec<Message> = Vec::new();
    let new = vec![msg(1, 5, "anyone?")];
    let input = personad::core::group::classifier::ClassifierInput {
        model: "m",
        persona_name: "Wren",
        description: "",
        history: &history,
        history_size: 8,
        new_messages: &new,
        allowed_reactions: None,
    };
    let call = classifier.classify(&input);
    let advance = async {
        // Let the request start, then move virtual time past the 10 s limit.
        while server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
        {
            tokio::task::yield_now().await;
        }
        vclock.advance(Duration::from_secs(11));
    };
    let (result, ()) = tokio::join!(call, advance);
    assert_eq!(
        result,
        Err(personad::core::group::classifier::ClassifierError::Timeout(
            10
        ))
    );
}

#[tokio::test]
async fn a_lightweight_answer_is_one_reaction_and_no_planning_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(classifier_answer(json!({
        "addressed": true, "confidence": 0.9, "wanna_interject": false, "interject": 0.0,
        "impulse": 0.2, "is_lightweight": true, "reaction": "❤", "reason": "thanks"
    })))
    .await;
    let mut g = start_group(dir.path(), "", Some(&server));
    g.h.telegram
        .set_allowed_reactions(ChatId(-100), vec!["❤️".into(), "👍".into()]);
    let said = g.say("Bob", "Ann, can you send me the notes").await;
    g.settle().await;
    assert_eq!(g.planner.calls(), 1, "an explicit request gets a full plan");
    // Our answer is part of the conversation now; a thank-you gets a reaction only.
    let ours =
        g.h.telegram
            .transcript(ChatId(-100))
            .into_iter()
            .filter(|m| m.outgoing)
            .collect::<Vec<_>>();
    assert_eq!(ours.len(), 1);
    // Our send comes back from Telegram and reaches the gate through the pump's sink (the
    // production feed of replies-to-us and share of voice).
    let sink = personad::ingress::sink::RuntimeSink {
        agent: AGENT.into(),
        ingress: g.gated.clone(),
    };
    personad::ports::updates::Sink::own_sent(&sink, &group(-100), &ours[0]);
    g.say("Bob", "thanks a lot").await;
    g.settle().await;
    assert_eq!(g.planner.calls(), 1, "no planning call for a reaction");
    assert_eq!(
        g.reactions(),
        vec!["❤".to_string()],
        "U+FE0F variants match"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
    assert!(said.id.0 > 0);
}

/// A reaction-only answer is a `react` task of the chat's graph, made durable before it
/// runs: a crash after the classifier decided and before the reaction reached Telegram
/// loses nothing. After the restart (a fresh gate that remembers no batch) the reaction is
/// sent once, and the classifier is not asked again.
#[tokio::test]
async fn a_reaction_only_answer_survives_a_crash_before_it_is_sent_and_is_sent_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(classifier_answer(json!({
        "addressed": true, "confidence": 0.9, "wanna_interject": false, "interject": 0.0,
        "impulse": 0.2, "is_lightweight": true, "reaction": "👍", "reason": "good news"
    })))
    .await;
    let mut g = start_group(dir.path(), "", Some(&server));
    // An explicit request gets a full plan; our answer makes the thank-you a reply to us.
    g.say("Bob", "Ann, can you send me the notes").await;
    g.settle().await;
    let ours: Vec<Message> =
        g.h.telegram
            .transcript(ChatId(-100))
            .into_iter()
            .filter(|m| m.outgoing)
            .collect();
    assert_eq!(ours.len(), 1);
    g.gate.note_own(&group(-100), &ours[0]);
    let stopped = g.h.telegram.gate(Op::React);
    g.say("Bob", "thanks a lot").await;
    drop(g.h.hold.take());
    // Decided, saved, and stopped inside Telegram before the reaction is recorded.
    tokio::time::timeout(Duration::from_secs(20), stopped.entered.notified())
        .await
        .unwrap_or_else(|_| panic!("the reaction never reached Telegram"));
    // As `state show` reads it: the journal's newest state over the graph file.
    let saved = GraphStore::new(StateDir::new(dir.path()))
        .read_graph(&ConversationKey::new(AGENT, ChatId(-100)))
        .unwrap()
        .unwrap();
    assert!(
        saved.tasks.iter().any(|t| t.kind() == TaskKind::React),
        "the reaction is a task on disk: {:?}",
        saved.tasks
    );
    assert!(g.reactions().is_empty());
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
    assert_eq!(g.planner.calls(), 1);
    let GroupRun { h, .. } = g;
    h.crash().await;

    let mut again = start_group(dir.path(), "", Some(&server));
    again.settle().await;
    assert_eq!(
        again.reactions(),
        vec!["👍".to_string()],
        "sent once, after the restart"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1,
        "the decision was kept, not made again"
    );
    assert_eq!(
        again.planner.calls(),
        0,
        "a reaction-only answer plans nothing"
    );
    assert_eq!(again.h.sends().len(), 0, "and sends no text");
}

#[tokio::test]
async fn a_reaction_the_chat_does_not_allow_is_dropped_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = mock(classifier_answer(json!({
        "addressed": false, "confidence": 0.0, "wanna_interject": true, "interject": 0.9,
        "impulse": 0.0, "is_lightweight": true, "reaction": "🔥", "reason": "fun"
    })))
    .await;
    let mut g = start_group(dir.path(), "# Group Trigger Mode\ntalkative", Some(&server));
    g.h.telegram
        .set_allowed_reactions(ChatId(-100), vec!["👍".into()]);
    g.say("Bob", "we won the match").await;
    g.settle().await;
    g.h.pass(Duration::from_secs(120)).await;
    g.say("Bob", "again!").await;
    g.settle().await;
    assert!(g.reactions().is_empty());
    assert_eq!(g.planner.calls(), 0);
    assert_eq!(
        g.h.telegram.allowed_reactions_calls(),
        1,
        "cached for an hour"
    );
}

#[tokio::test]
async fn strict_mode_answers_explicit_addresses_only_and_delays_one_inside_the_cooldown() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = start_group(dir.path(), "# Group Trigger Mode\nstrict", None);
    g.say("Bob", "Ann, hi!").await;
    g.h.pass(Duration::from_secs(20)).await;
    g.say("Cy", "does anyone know the time?").await;
    g.say("Cy", "@ann_here are you around?").await;
    g.settle().await;
    let sends = g.h.sends();
    assert_eq!(g.planner.calls(), 2, "{sends:?}");
    assert_eq!(sends.len(), 2);
    assert!(
        sends[1].2 >= 60_000,
        "the second answer waits for the 60 s cooldown: {sends:?}"
    );
}

#[test]
fn group_headings_parse_with_defaults_and_bad_values_name_their_line() {
    let p = persona_with(
        "Wren",
        "# Group Trigger Mode\nTalkative\n\n# Group Confidence Threshold\n0.7\n\n# Agent Nicknames\nBirdie\n- W\n\n# Group Reply To Bots\n\n# Group Max Share\n30%\n\n# Group Cooldown\n90\n\n# Group Max Plans Per Hour\n5\n\n# Group Classifier Model\ncheap-model\n\n# Agent Description\nA birdwatcher.\n",
    );
    let g = &p.group;
    assert_eq!(g.mode, TriggerMode::Talkative);
    assert_eq!(g.confidence_threshold, 0.7);
    assert_eq!(g.interject_threshold, 0.6, "default kept");
    assert_eq!(g.nicknames, vec!["Birdie".to_string(), "W".to_string()]);
    assert!(g.reply_to_bots);
    assert_eq!(g.max_share_percent, 30.0);
    assert_eq!(g.cooldown, Duration::from_secs(90));
    assert_eq!(g.max_plans_per_hour, 5);
    assert_eq!(g.classifier_model.as_deref(), Some("cheap-model"));
    assert_eq!(g.description.as_deref(), Some("A birdwatcher."));
    assert_eq!(persona_with("Wren", "").group, GroupSettings::default());

    let src = "# Agent Name\nWren\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nHi.\n\n# Group Trigger Mode\nloud\n\n# Group Interject Threshold\n1.5\n";
    let entry =
        personad::adapters::persona_loader::parse_persona(std::path::Path::new("w.md"), src, &[]);
    assert!(entry.persona.is_none());
    let lines: Vec<(Option<usize>, bool)> = entry
        .problems
        .iter()
        .map(|p| (p.line, p.message.contains("Group")))
        .collect();
    assert_eq!(lines, vec![(Some(11), true), (Some(14), true)]);
}

/// A classifier that always wants to interject (talkative mode's most eager answer).
struct AlwaysInterjects;

impl personad::ports::llm::Llm for AlwaysInterjects {
    fn generate<'a>(
        &'a self,
        _req: &'a personad::core::llm::LlmRequest,
    ) -> personad::core::time::BoxFuture<
        'a,
        Result<personad::core::llm::LlmOutcome, personad::ports::llm::LlmError>,
    > {
        Box::pin(async {
            Ok(personad::core::llm::LlmOutcome::Text(
                r#"{"addressed":false,"confidence":0.2,"wanna_interject":true,"interject":0.95,"impulse":0.1,"is_lightweight":false,"reason":"eager"}"#.into(),
            ))
        })
    }
}

/// Two personas (each on its own in-memory account, both in one `World`) in group -100,
/// behind one admission chain, on one virtual clock. Each answers by naming the other, and
/// says whether the message it answers came from the other persona (`peer:`) or a person.
struct Duo {
    vclock: personad::ports::clock::VirtualClock,
    clock: SharedClock,
    hold: Option<personad::ports::clock::Hold>,
    accounts: Vec<Arc<personad::adapters::memory::MemoryTelegram>>,
    gates: Vec<GroupGate>,
    gated: Ingress,
    handle: RuntimeHandle,
    planner: Arc<ScriptedPlanner>,
    /// The runtime never went idle (the personas never stopped talking).
    runaway: bool,
    run: tokio::task::JoinHandle<
        Result<personad::runtime::StopReport, personad::runtime::RuntimeError>,
    >,
    _world: Arc<personad::adapters::memory::World>,
}

const DUO: [&str; 2] = ["ann", "bo"];

fn duo(dir: &std::path::Path, headings: &str, eager: bool) -> Duo {
    use personad::adapters::memory::{MemoryTelegram, World};
    use personad::adapters::store::{GraphStore, StateDir};
    use personad::ingress::sink::RuntimeSink;
    use personad::runtime::{AgentHandle, Runtime};

    let vclock = personad::ports::clock::VirtualClock::new(t0(), true);
    let clock: SharedClock = Arc::new(vclock.clone());
    let hold = Some(clock.hold());
    let world = World::new();
    let accounts: Vec<Arc<MemoryTelegram>> = DUO
        .iter()
        .map(|n| Arc::new(MemoryTelegram::new(n, Arc::clone(&clock), None).unwrap()))
        .collect();
    for a in &accounts {
        a.ensure_chat(group(-100));
        world.join(a);
    }
    let personas: Vec<Arc<personad::core::persona::Persona>> = DUO
        .iter()
        .map(|n| Arc::new(persona_with(n, headings)))
        .collect();
    let planner = Arc::new(ScriptedPlanner::new(|req, _| {
        let other = if req.persona.name == "ann" {
            "bo"
        } else {
            "ann"
        };
        let from_peer = req
            .history
            .iter()
            .find(|m| Some(m.id) == req.target)
            .is_some_and(|m| m.sender.name == other);
        let kind = if from_peer { "peer" } else { "person" };
        Ok(vec![personad::core::plan::Action::Send {
            text: format!("{kind}: {other}, what do you say?"),
            reply_to: None,
        }])
    }));
    let groups = Groups::new();
    let runtime = Runtime::new(
        config(),
        (0..2)
            .map(|i| AgentHandle {
                persona: Arc::clone(&personas[i]),
                telegram: accounts[i].clone(),
            })
            .collect(),
        planner.clone(),
        GraphStore::new(StateDir::new(dir)),
        Arc::clone(&clock),
    )
    .with_stickers(Arc::new(personad::adapters::stickers::StickerCatalog::new()))
    .with_groups(Arc::clone(&groups) as _);
    let handle = runtime.handle();
    let run = tokio::spawn(runtime.run());
    let ids: Vec<i64> = accounts.iter().map(|a| a.self_id()).collect();
    let peers = personad::ingress::gate::peers(ids.clone());
    let gates: Vec<GroupGate> = (0..2)
        .map(|i| {
            GroupGate::new(GateConfig {
                agent: DUO[i].into(),
                persona: Arc::clone(&personas[i]),
                identity: identity_for(&personas[i], ids[i], None),
                telegram: accounts[i].clone(),
                runtime: handle.clone(),
                classifier: eager
                    .then(|| Classifier::new(Arc::new(AlwaysInterjects), Arc::clone(&clock))),
                classifier_model: None,
                clock: Arc::clone(&clock),
                peers: Arc::clone(&peers),
                modes: Default::default(),
            })
        })
        .collect();
    for (name, gate) in DUO.iter().zip(&gates) {
        groups.insert(name, gate.clone());
    }
    let gated = Ingress::new(handle.clone(), None, Arc::clone(&groups));
    // What one persona sends reaches the other through the world, into its runtime behind
    // the admission chain (as `run --telegram memory` wires it).
    for (i, name) in DUO.iter().enumerate() {
        world.attach(
            ids[i],
            Arc::new(RuntimeSink {
                agent: (*name).into(),
                ingress: gated.clone(),
            }),
        );
    }
    Duo {
        vclock,
        clock,
        hold,
        accounts,
        gates,
        gated,
        handle,
        planner,
        runaway: false,
        run,
        _world: world,
    }
}

impl Duo {
    /// A person writes in the group: both personas see it (through the world).
    async fn person_says(&self, text: &str) {
        let m = self.accounts[0]
            .inject(
                ChatId(-100),
                Incoming {
                    from: "Cy".into(),
                    text: text.into(),
                    ..Incoming::default()
                },
            )
            .await
            .unwrap();
        self.gated.push(DUO[0], group(-100), m, true);
    }

    /// Lets virtual time run for `span`, in steps of 30 s, letting the runtime settle.
    async fn pass(&mut self, span: Duration) {
        if self.runaway {
            return;
        }
        drop(self.hold.take());
        let end = clock::add(self.clock.now(), span);
        while self.clock.now() < end {
            if !self.settled().await {
                self.runaway = true;
                return;
            }
            tokio::task::yield_now().await;
            drop(personad::ports::clock::sleep(&self.vclock, Duration::from_secs(30)).await);
        }
        self.runaway = !self.settled().await;
        self.hold = Some(self.clock.hold());
    }

    /// Waits for the runtime to be idle. Two personas that never stop talking never let it
    /// be (virtual time runs on inside the wait): a bound in real time turns that hang into
    /// a failed count instead.
    async fn settled(&self) -> bool {
        let idle = tokio::time::timeout(Duration::from_secs(20), self.handle.wait_idle()).await;
        idle.is_ok()
    }

    /// Each persona's sends with their times, in the group.
    fn sends(&self, i: usize) -> Vec<(Timestamp, String)> {
        self.accounts[i]
            .actions()
            .into_iter()
            .filter_map(|r| match r.action {
                personad::adapters::memory::Action::Send { message, .. } => {
                    Some((r.at, message.text))
                }
                _ => None,
            })
            .collect()
    }

    async fn stop(self) {
        self.handle.shutdown("test over");
        for g in &self.gates {
            g.stop_observing();
        }
        let _ = self.run.await;
    }
}

/// Two personas of one daemon in one in-memory world, each planning a reply that names the
/// other: after the human's question the back-and-forth stops within the loop guard, and
/// each sees the other's messages in its own copy of the group as another user's.
#[tokio::test]
async fn two_personas_of_one_daemon_stop_addressing_each_other_within_the_loop_guard() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = duo(dir.path(), "", false);
    d.person_says("ann, what about the trip").await;
    d.pass(Duration::from_secs(20 * 60)).await;
    assert!(!d.runaway, "the personas never stopped talking");
    let per: Vec<usize> = (0..2).map(|i| d.sends(i).len()).collect();
    // Ann answers Cy, then each answers the other 3 times; the 4th call goes unanswered.
    assert_eq!(per, vec![4, 3], "sends per persona");
    assert_eq!(d.planner.calls(), per[0] + per[1]);
    // Bo's copy of the group: Cy's question and Ann's messages, none of them Bo's own, with
    // the same ids as in Ann's copy.
    let bo = d.accounts[1].transcript(ChatId(-100));
    let ann = d.accounts[0].transcript(ChatId(-100));
    let from_ann: Vec<&Message> = bo.iter().filter(|m| m.sender.name == "ann").collect();
    assert_eq!(from_ann.len(), 4);
    assert!(from_ann.iter().all(|m| !m.outgoing));
    for m in &from_ann {
        assert!(
            ann.iter()
                .any(|a| a.id == m.id && a.text == m.text && a.outgoing)
        );
    }
    d.stop().await;
}

/// Talkative mode, a person writing every 5 minutes for 100 virtual minutes, and a
/// classifier that always wants to interject: the personas answer each other at most as
/// often as the loop guard allows (3 per 10 minutes each), and a persona addressed by the
/// other answers at most once before the other speaks again.
#[tokio::test]
async fn talkative_personas_and_a_person_over_100_minutes_stay_within_the_loop_guard() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = duo(dir.path(), "# Group Trigger Mode\ntalkative\n", true);
    let start = d.clock.now();
    for i in 0..20 {
        d.person_says(&format!("thinking out loud, part {i}")).await;
        d.pass(Duration::from_secs(5 * 60)).await;
    }
    assert!(!d.runaway, "the personas never stopped talking");
    let window = jiff::SignedDuration::from_mins(10);
    for (i, name) in DUO.iter().enumerate() {
        let sends = d.sends(i);
        let to_peer: Vec<Timestamp> = sends
            .iter()
            .filter(|(_, t)| t.starts_with("peer:"))
            .map(|(at, _)| *at)
            .collect();
        assert!(
            !to_peer.is_empty(),
            "{}: they did talk to each other: {sends:?}",
            name
        );
        assert!(
            sends.iter().any(|(_, t)| t.starts_with("person:")),
            "{sends:?}"
        );
        for at in &to_peer {
            let near = to_peer
                .iter()
                .filter(|b| **b >= *at && b.duration_since(*at) < window)
                .count();
            assert!(
                near <= 3,
                "{}: {near} answers to the other within 10 minutes",
                name
            );
        }
        assert!(
            to_peer.len() <= 30,
            "{}: {} answers to the other in 100 minutes",
            name,
            to_peer.len()
        );
        assert!(
            to_peer
                .iter()
                .all(|at| at.duration_since(start) <= jiff::SignedDuration::from_mins(101))
        );
        // At most one answer to the other per turn: between two messages of the other, one.
        let other: Vec<Timestamp> = d.sends(1 - i).iter().map(|(at, _)| *at).collect();
        for pair in other.windows(2) {
            let answers = to_peer
                .iter()
                .filter(|at| **at > pair[0] && **at <= pair[1])
                .count();
            assert!(
                answers <= 1,
                "{}: {answers} answers to one turn of the other",
                name
            );
        }
    }
    d.stop().await;
}

/// The world's ids survive a restart (a new world over accounts that keep their chats): a
/// new message gets an id above every id any member's copy holds, also from a member whose
/// copy is new. A person's message that claims a persona as its sender is not handed to that
/// persona.
#[tokio::test]
async fn world_ids_stay_unique_across_a_restart_and_a_persona_cannot_be_impersonated() {
    use personad::adapters::memory::{MemoryTelegram, World};
    use personad::core::model::OutgoingText;
    let clock: SharedClock = Arc::new(personad::ports::clock::VirtualClock::new(t0(), false));
    let account = |n: &str| Arc::new(MemoryTelegram::new(n, Arc::clone(&clock), None).unwrap());
    let (ann, bo) = (account("ann"), account("bo"));
    let first = World::new();
    for a in [&ann, &bo] {
        a.ensure_chat(group(-100));
        first.join(a);
    }
    let say = |from: &str, text: &str| Incoming {
        from: from.into(),
        text: text.into(),
        ..Incoming::default()
    };
    for i in 0..3 {
        ann.inject(ChatId(-100), say("Cy", &format!("m{i}")))
            .await
            .unwrap();
    }
    // Ann's account claims to be Bo: Bo never gets "its own" message as someone else's.
    ann.inject(ChatId(-100), say("bo", "I am bo"))
        .await
        .unwrap();
    assert!(
        bo.transcript(ChatId(-100))
            .iter()
            .all(|m| m.text != "I am bo")
    );
    assert_eq!(bo.transcript(ChatId(-100)).len(), 3);
    // A restart: a new world; a third persona joins with an empty copy of the group.
    drop(first);
    let second = World::new();
    let cy = account("cyd");
    cy.ensure_chat(group(-100));
    for a in [&ann, &bo, &cy] {
        second.join(a);
    }
    let sent = cy
        .send_text(OutgoingText {
            chat: ChatId(-100),
            text: "hello".into(),
            reply_to: None,
            idempotency_key: 7,
        })
        .await
        .unwrap();
    let highest = ann
        .transcript(ChatId(-100))
        .iter()
        .map(|m| m.id)
        .filter(|id| *id != sent.id)
        .max();
    assert!(
        highest.is_some_and(|h| sent.id > h),
        "{:?} after {highest:?}",
        sent.id
    );
    let ids: Vec<_> = bo.transcript(ChatId(-100)).iter().map(|m| m.id).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "ids are unique in every copy");
}

/// Personas that write to each other directly (the world's direct chats) are held by the
/// same loop guard: a direct message from the other persona is answered 3 times per 10
/// minutes, then kept as history.
#[tokio::test]
async fn personas_in_a_direct_chat_stop_within_the_loop_guard() {
    use personad::core::model::{Chat, ChatKind, OutgoingText};
    let dir = tempfile::tempdir().unwrap();
    let mut d = duo(dir.path(), "", false);
    let bo_id = d.accounts[1].self_id();
    let dm = Chat {
        id: ChatId(bo_id),
        kind: ChatKind::Direct,
        title: "bo".into(),
    };
    d.accounts[0].ensure_chat(dm.clone());
    // Ann's owner writes to Bo from Ann's account: Bo gets it as a direct message from Ann.
    d.accounts[0]
        .send_text(OutgoingText {
            chat: dm.id,
            text: "bo, hello there".into(),
            reply_to: None,
            idempotency_key: 1,
        })
        .await
        .unwrap();
    d.pass(Duration::from_secs(9 * 60)).await;
    assert!(!d.runaway, "the personas never stopped talking");
    let bo_dm = d.accounts[1].transcript(ChatId(d.accounts[0].self_id()));
    assert_eq!(
        bo_dm.first().map(|m| (m.outgoing, m.text.as_str())),
        Some((false, "bo, hello there"))
    );
    let per: Vec<usize> = (0..2).map(|i| d.sends(i).len()).collect();
    // The owner's message, then 3 answers of Ann to Bo; Bo answers 3 times.
    assert_eq!(per, vec![4, 3], "sends per persona in the direct chat");
    d.stop().await;
}

#[test]
fn a_per_chat_mode_in_the_agent_state_wins_over_the_heading() {
    let state: personad::core::agent_state::AgentState =
        serde_json::from_str(r#"{"group_modes": {"-100": "strict"}}"#).unwrap();
    assert_eq!(
        state.group_mode(ChatId(-100), TriggerMode::Talkative),
        TriggerMode::Strict
    );
    assert_eq!(
        state.group_mode(ChatId(-200), TriggerMode::Talkative),
        TriggerMode::Talkative
    );
    let empty = personad::core::agent_state::AgentState::default();
    assert!(
        !serde_json::to_string(&empty)
            .unwrap()
            .contains("group_modes")
    );
    assert!(
        serde_json::from_str::<personad::core::agent_state::AgentState>(
            r#"{"group_modes": {"-1": "loud"}}"#
        )
        .is_err()
    );
}

/// A per-chat trigger mode kept in the agent's state reaches the gate through the runtime,
/// which read that file (the gate reads none): a chat set to strict makes no classifier call
/// for an unaddressed message although the persona's mode is smart.
#[tokio::test]
async fn a_chat_mode_in_the_agent_state_reaches_the_gate_through_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let agent_dir = personad::adapters::store::StateDir::new(dir.path()).agent_dir(AGENT);
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("agent-state.json"),
        r#"{"group_modes":{"-100":"strict"}}"#,
    )
    .unwrap();
    let server = mock(classifier_answer(not_addressed())).await;
    let mut g = start_group(dir.path(), "", Some(&server));
    g.h.handle.wait_agent_state(AGENT).await;
    assert_eq!(
        g.h.handle.group_mode(AGENT, ChatId(-100)),
        Some(TriggerMode::Strict)
    );
    g.say("Bob", "anyone seen my keys?").await;
    g.settle().await;
    assert_eq!(g.gate.classifier_calls(), 0, "strict: nothing to classify");
    assert_eq!(g.planner.calls(), 0);
}

/// A persona reloaded with a new nickname (upserted into the runtime, as the daemon's and the
/// playground's reloads do) addresses the agent in groups from the next message, through the
/// gate built with the old persona.
#[tokio::test]
async fn a_nickname_added_by_a_reload_addresses_the_agent_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = start_group(dir.path(), "", None);
    g.say("Bob", "Quokka, can you help?").await;
    g.settle().await;
    assert_eq!(g.planner.calls(), 0, "not a name of the agent yet");
    g.h.handle.upsert_agent(personad::runtime::AgentHandle {
        persona: Arc::new(persona_with(AGENT, "# Agent Nicknames\nQuokka\n")),
        telegram: g.h.telegram.clone(),
    });
    g.say("Bob", "Quokka, can you help now?").await;
    g.settle().await;
    assert_eq!(g.planner.calls(), 1, "the new nickname addresses the agent");
}
