//! The scheduler without any async runtime: events and time in, effects out.
use super::*;
use crate::core::graph::TaskSpec;
use crate::core::model::{ChatKind, MessageId, TelegramError};
use crate::core::outcome::{Outcome, TaskError};
use std::time::Duration;

fn at(secs: u64) -> Timestamp {
    crate::core::time::add(
        Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
        Duration::from_secs(secs),
    )
}

fn chat(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: ChatKind::Direct,
        title: format!("c{id}"),
    }
}

fn sched(max_in_flight: usize) -> Scheduler {
    let config = RuntimeConfig {
        max_in_flight,
        ..RuntimeConfig::default()
    };
    let mut self_ids = HashMap::new();
    self_ids.insert("a".to_string(), 1);
    Scheduler::new(
        Arc::new(config),
        ["a".to_string()],
        AccountSafety::new(self_ids),
    )
}

fn starts(effects: &[Effect]) -> Vec<(i64, TaskKind)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Start(s) => Some((s.key.chat.0, s.task.kind())),
            _ => None,
        })
        .collect()
}

fn persisted(effects: &[Effect]) -> Vec<i64> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Persist(k) => Some(k.chat.0),
            _ => None,
        })
        .collect()
}

fn finish(s: &mut Scheduler, start: &Start, result: Result<Outcome, TaskError>, now: Timestamp) {
    s.on_finished(
        start.key.clone(),
        &start.graph_id,
        &start.task.id,
        result,
        now,
    );
}

#[test]
fn a_migrated_group_keeps_its_plan_under_the_new_id() {
    let mut s = sched(4);
    let group = Chat {
        id: ChatId(-5),
        kind: ChatKind::Group,
        title: "club".into(),
    };
    assert!(s.on_inbound("a", group, MessageId(7), true, at(0)));
    let _ = s.take_effects();
    s.migrate_chat("a", ChatId(-5), ChatId(-1_000_000_005), at(1));
    let e = s.take_effects();
    assert_eq!(
        persisted(&e),
        vec![-5, -1_000_000_005],
        "the old file is deleted, the new one written"
    );
    assert!(s.graph(&ConversationKey::new("a", ChatId(-5))).is_none());
    let moved = s.graph(&ConversationKey::new("a", ChatId(-1_000_000_005)));
    assert_eq!(moved.map(|g| g.chat.id), Some(ChatId(-1_000_000_005)));
    // The plan goes on there once its debounce has passed.
    s.advance(at(10));
    s.start_ready(at(10));
    assert_eq!(
        starts(&s.take_effects()),
        vec![(-1_000_000_005, TaskKind::Received)]
    );
}

/// The moved plan forgets the old group's message id: it quotes nothing, and after a
/// restart (the plan read back from disk) the supergroup's first messages, whose ids start
/// over, are not taken as already handled.
#[test]
fn a_migrated_groups_plan_forgets_the_old_message_id() {
    let mut s = sched(4);
    let group = Chat {
        id: ChatId(-5),
        kind: ChatKind::Group,
        title: "club".into(),
    };
    let supergroup = ChatId(-1_000_000_005);
    assert!(s.on_inbound("a", group, MessageId(500), true, at(0)));
    s.migrate_chat("a", ChatId(-5), supergroup, at(1));
    let moved = s
        .graph(&ConversationKey::new("a", supergroup))
        .cloned()
        .unwrap();
    match &moved.tasks[0].spec {
        TaskSpec::Received {
            message_id,
            no_quote,
            ..
        } => {
            assert_eq!(*message_id, Some(MessageId(0)));
            assert!(*no_quote, "nothing to quote in the supergroup");
        }
        other => panic!("{other:?}"),
    }
    // A restart reads the plan back; the supergroup's message 3 is new.
    let mut s = sched(4);
    s.load(vec![moved], at(2));
    let _ = s.take_effects();
    let chat = Chat {
        id: supergroup,
        kind: ChatKind::Group,
        title: "club".into(),
    };
    assert!(
        s.on_inbound("a", chat, MessageId(3), true, at(3)),
        "the supergroup's message 3 is planned"
    );
}

fn only_start(effects: Vec<Effect>) -> Start {
    effects
        .into_iter()
        .find_map(|e| match e {
            Effect::Start(s) => Some(*s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a task must start"))
}

fn plan(texts: &[&str]) -> Outcome {
    Outcome::Planned(
        texts
            .iter()
            .map(|t| Task::new(TaskSpec::send(*t, None), at(0)))
            .collect(),
    )
}

#[test]
fn debounce_then_one_start_per_conversation_and_every_start_follows_its_persist() {
    let mut s = sched(8);
    assert!(s.on_inbound("a", chat(1), MessageId(1), true, at(0)));
    assert!(s.on_inbound("a", chat(1), MessageId(2), true, at(1)));
    let e = s.take_effects();
    assert_eq!(persisted(&e), vec![1], "two changes, one write");
    assert_eq!(s.next_wake(), Some(at(3)), "the newest message's debounce");
    s.advance(at(2));
    s.start_ready(at(2));
    assert!(starts(&s.take_effects()).is_empty());
    s.advance(at(3));
    s.start_ready(at(3));
    let e = s.take_effects();
    assert_eq!(starts(&e), vec![(1, TaskKind::Received)]);
    let persist_at = e.iter().position(|x| matches!(x, Effect::Persist(_)));
    let start_at = e.iter().position(|x| matches!(x, Effect::Start(_)));
    assert!(persist_at < start_at, "the active mark is written first");
    s.start_ready(at(3));
    assert!(
        starts(&s.take_effects()).is_empty(),
        "one task per conversation"
    );
}

#[test]
fn a_plan_under_way_gets_the_slot_before_new_plans() {
    let mut s = sched(1);
    for c in 1..=3 {
        s.on_inbound("a", chat(c), MessageId(1), true, at(0));
    }
    s.advance(at(2));
    s.start_ready(at(2));
    let r1 = only_start(s.take_effects());
    assert_eq!(r1.key.chat, ChatId(1));
    finish(&mut s, &r1, Ok(plan(&["hi"])), at(2));
    s.start_ready(at(2));
    let next = only_start(s.take_effects());
    assert_eq!(
        (next.key.chat, next.task.kind()),
        (ChatId(1), TaskKind::Send),
        "the reply before chat 2's planning"
    );
    finish(&mut s, &next, Ok(Outcome::Done), at(2));
    s.start_ready(at(2));
    let r2 = only_start(s.take_effects());
    assert_eq!(
        (r2.key.chat, r2.task.kind()),
        (ChatId(2), TaskKind::Received)
    );
}

#[test]
fn max_in_flight_bounds_the_starts_and_a_finish_frees_a_slot() {
    let mut s = sched(2);
    for c in 1..=5 {
        s.on_inbound("a", chat(c), MessageId(1), true, at(0));
    }
    s.advance(at(2));
    s.start_ready(at(2));
    let e = s.take_effects();
    assert_eq!(starts(&e).len(), 2);
    assert_eq!(s.in_flight(), 2);
    let first = only_start(e);
    finish(&mut s, &first, Ok(plan(&[])), at(2));
    s.start_ready(at(2));
    assert_eq!(starts(&s.take_effects()), vec![(3, TaskKind::Received)]);
}

#[test]
fn a_new_message_aborts_planning_but_not_a_send_which_keeps_the_chat_busy() {
    let mut s = sched(8);
    s.on_inbound("a", chat(1), MessageId(1), true, at(0));
    s.advance(at(2));
    s.start_ready(at(2));
    let r = only_start(s.take_effects());
    s.on_inbound("a", chat(1), MessageId(2), true, at(2));
    let e = s.take_effects();
    assert!(
        e.iter()
            .any(|x| matches!(x, Effect::Abort { task_id, .. } if *task_id == r.task.id)),
        "planning is cancel-safe: aborted"
    );
    s.advance(at(4));
    s.start_ready(at(4));
    let r2 = only_start(s.take_effects());
    finish(&mut s, &r2, Ok(plan(&["one", "two"])), at(4));
    s.start_ready(at(4));
    let send = only_start(s.take_effects());
    s.on_inbound("a", chat(1), MessageId(3), true, at(4));
    let e = s.take_effects();
    assert!(
        !e.iter().any(|x| matches!(x, Effect::Abort { .. })),
        "a send is never aborted"
    );
    s.advance(at(10));
    s.start_ready(at(10));
    assert!(
        starts(&s.take_effects()).is_empty(),
        "the new plan waits while the old send is in flight"
    );
    finish(&mut s, &send, Ok(Outcome::Done), at(10));
    s.start_ready(at(10));
    assert_eq!(starts(&s.take_effects()), vec![(1, TaskKind::Received)]);
}

#[test]
fn transient_failures_retry_after_the_interval_then_the_graph_is_deleted() {
    let mut s = sched(8);
    s.on_inbound("a", chat(1), MessageId(1), true, at(0));
    s.advance(at(2));
    s.start_ready(at(2));
    let mut t = at(2);
    for attempt in 1..=10 {
        let r = only_start(s.take_effects());
        assert_eq!(r.task.kind(), TaskKind::Received, "attempt {attempt}");
        finish(
            &mut s,
            &r,
            Err(TaskError::Transient(crate::core::outcome::Cause::Telegram(
                TelegramError::Other("503".into()),
            ))),
            t,
        );
        if attempt == 10 {
            break;
        }
        assert_eq!(
            s.next_wake(),
            Some(crate::core::time::add(t, Duration::from_secs(10)))
        );
        t = crate::core::time::add(t, Duration::from_secs(10));
        s.advance(t);
        s.start_ready(t);
        let w = only_start(s.take_effects());
        assert_eq!(w.task.kind(), TaskKind::Wait);
        finish(&mut s, &w, Ok(Outcome::Done), t);
        s.start_ready(t);
    }
    assert_eq!(s.graphs(), 0, "dropped after the last attempt");
    assert_eq!(persisted(&s.take_effects()), vec![1], "its file is deleted");
    assert_eq!(s.next_wake(), None);
}

#[test]
fn account_limits_trip_the_breaker_and_queue_an_alert_to_saved_messages() {
    let mut s = sched(8);
    s.on_inbound("a", chat(5), MessageId(1), true, at(0));
    s.advance(at(2));
    s.start_ready(at(2));
    let r = only_start(s.take_effects());
    finish(&mut s, &r, Ok(plan(&["hi"])), at(2));
    s.start_ready(at(2));
    let send = only_start(s.take_effects());
    finish(
        &mut s,
        &send,
        Err(TaskError::AccountLimited(TelegramError::AccountLimited(
            "PEER_FLOOD".into(),
        ))),
        at(2),
    );
    let e = s.take_effects();
    assert!(e.contains(&Effect::SaveAgentState("a".into())));
    assert!(
        s.safety()
            .state("a")
            .is_some_and(|st| st.breaker_active(at(3)))
    );
    s.start_ready(at(2));
    let alert = only_start(s.take_effects());
    assert_eq!(alert.key.chat, ChatId(1), "the owner's Saved Messages");
}

#[test]
fn stop_abandons_planning_at_once_and_a_send_after_the_grace_period() {
    let mut s = sched(8);
    s.on_inbound("a", chat(1), MessageId(1), true, at(0));
    s.on_inbound("a", chat(2), MessageId(1), true, at(0));
    s.advance(at(2));
    s.start_ready(at(2));
    let mut running: Vec<Start> = s
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Start(st) => Some(*st),
            _ => None,
        })
        .collect();
    let r2 = running.pop().unwrap_or_else(|| panic!("two starts"));
    finish(&mut s, &r2, Ok(plan(&["x"])), at(2));
    s.start_ready(at(2));
    let _send = only_start(s.take_effects());
    s.begin_stop("test".into(), at(2));
    assert!(!s.stop_settled(at(2)), "the send is still in flight");
    let aborts = s
        .take_effects()
        .iter()
        .filter(|e| matches!(e, Effect::Abort { .. }))
        .count();
    assert_eq!(aborts, 1, "planning abandoned at once");
    assert!(
        s.stop_settled(at(12)),
        "after the grace period nothing is kept"
    );
}

/// A reached cap holds the agent's planning (the message stays unplanned, armed for the next
/// UTC day), tells the owner once however often the spend is reported, and the owner's lift
/// lets planning go on at once; the hold survives in the agent's state.
#[test]
fn a_reached_cap_holds_planning_until_lifted_and_tells_the_owner_once() {
    use crate::core::budget::{DailyCap, Spend};
    let mut s = sched(4);
    let cap = DailyCap {
        tokens: Some(1000),
        usd: None,
    };
    let report = |tokens| SpendReport {
        day: at(0).to_zoned(jiff::tz::TimeZone::UTC).date(),
        agent: (
            Spend {
                tokens,
                ..Spend::default()
            },
            Some(cap),
        ),
        daemon: (Spend::default(), None),
    };
    s.on_spend("a", report(1200), at(0));
    s.on_spend("a", report(1300), at(1));
    let _ = s.take_effects();
    let told = s
        .graph(&ConversationKey::new("a", ChatId(1)))
        .map_or(0, |g| {
            g.tasks
                .iter()
                .filter(|t| t.kind() == TaskKind::Send)
                .count()
        });
    assert_eq!(told, 1, "one notice to the owner, in Saved Messages");
    assert!(s.safety().state("a").is_some_and(|st| {
        st.budget
            .values()
            .any(|m| m.told == crate::core::budget::Level::Reached)
    }));
    assert!(s.on_inbound("a", chat(7), MessageId(3), true, at(2)));
    s.advance(at(60));
    s.start_ready(at(60));
    assert!(
        !starts(&s.take_effects()).contains(&(7, TaskKind::Received)),
        "planned past the cap"
    );
    s.lift_budget("a", at(61));
    s.advance(at(61));
    s.start_ready(at(61));
    assert!(starts(&s.take_effects()).contains(&(7, TaskKind::Received)));
}

/// A report of another day is stale (no hold); the persona's and the daemon's caps keep their
/// own marks (a lifted persona cap does not lift the daemon's); a raised cap releases a hold
/// at once.
#[test]
fn caps_keep_their_own_marks_and_a_raised_cap_releases_the_hold() {
    use crate::core::budget::{DailyCap, Spend};
    let mut s = sched(4);
    let tokens = |n: u64| DailyCap {
        tokens: Some(n),
        usd: None,
    };
    let spent = |n| Spend {
        tokens: n,
        ..Spend::default()
    };
    let today = at(0).to_zoned(jiff::tz::TimeZone::UTC).date();
    let report = |day, own, all| SpendReport {
        day,
        agent: (spent(own), Some(tokens(1000))),
        daemon: (spent(all), Some(tokens(5000))),
    };
    let yesterday = today.yesterday().unwrap_or(today);
    s.on_spend("a", report(yesterday, 2000, 0), at(0));
    assert!(s.on_inbound("a", chat(7), MessageId(3), true, at(1)));
    s.advance(at(10));
    s.start_ready(at(10));
    let e = s.take_effects();
    assert!(
        starts(&e).contains(&(7, TaskKind::Received)),
        "a stale report held planning"
    );
    let planning = e.iter().find_map(|e| match e {
        Effect::Start(st) if st.key.chat == ChatId(7) => Some(st.as_ref().clone()),
        _ => None,
    });
    if let Some(st) = planning {
        finish(&mut s, &st, Ok(Outcome::Planned(Vec::new())), at(11));
    }
    // The persona's cap is reached and lifted; the daemon's is then reached too: held again.
    s.on_spend("a", report(today, 1200, 1200), at(20));
    s.lift_budget("a", at(21));
    s.on_spend("a", report(today, 1300, 5100), at(22));
    assert!(s.on_inbound("a", chat(8), MessageId(4), true, at(23)));
    s.advance(at(40));
    s.start_ready(at(40));
    assert!(
        !starts(&s.take_effects()).contains(&(8, TaskKind::Received)),
        "the daemon's cap did not hold"
    );
    // The operator raises the daemon's cap (a restart with a new --daily-budget): planning
    // goes on at once.
    s.check_caps("a", Some(tokens(1000)), Some(tokens(50_000)), at(41));
    s.advance(at(41));
    s.start_ready(at(41));
    assert!(starts(&s.take_effects()).contains(&(8, TaskKind::Received)));
}

/// A plan in chat 7 whose `received` is done and whose `draft` task has just started (its
/// post in flight). Returns the draft's start.
fn draft_in_flight(s: &mut Scheduler) -> Start {
    use crate::core::approval::OnTimeout;
    assert!(s.on_inbound("a", chat(7), MessageId(3), true, at(0)));
    s.advance(at(5));
    s.start_ready(at(5));
    let received = s.take_effects().into_iter().find_map(|e| match e {
        Effect::Start(st) => Some(*st),
        _ => None,
    });
    let draft = Task::new(
        TaskSpec::Draft {
            answers: Some(MessageId(3)),
            draft: "in c7".into(),
            idempotency_key: crate::core::graph::IdempotencyKey(5),
            timeout_secs: 600,
            on_timeout: OnTimeout::Drop,
            posted: None,
            decision: None,
        },
        at(6),
    );
    let send = Task::new(TaskSpec::send("hello", None), at(6));
    if let Some(r) = received {
        finish(s, &r, Ok(Outcome::Planned(vec![draft, send])), at(6));
    }
    s.start_ready(at(6));
    s.take_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Start(st) if st.task.kind() == TaskKind::Draft => Some(*st),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the draft did not start"))
}

fn posted() -> Outcome {
    Outcome::Drafted(crate::core::approval::Posted {
        chat: ChatId(1),
        message: MessageId(40),
    })
}

/// The owner's word that comes while the draft is being posted is kept and applied once the
/// post is back: the send starts, and the word is not applied a second time.
#[test]
fn a_word_given_while_the_draft_is_posted_applies_once_it_is_back() {
    use crate::core::approval::Decision;
    let mut s = sched(4);
    let draft = draft_in_flight(&mut s);
    assert!(s.decide_draft(
        "a",
        &DraftRef::Id(draft.task.id.clone()),
        Decision::Send,
        at(7)
    ));
    finish(&mut s, &draft, Ok(posted()), at(8));
    s.start_ready(at(8));
    assert_eq!(starts(&s.take_effects()), vec![(7, TaskKind::Send)]);
    // Said again by a reply: nothing waits any more.
    let reply = DraftRef::Reply {
        chat: ChatId(1),
        message: MessageId(40),
    };
    assert!(!s.decide_draft("a", &reply, Decision::Send, at(9)));
}

/// `later` given while the timeout run is in flight waits one more timeout and then times
/// out normally: the kept word is used once, never again at each deadline.
#[test]
fn later_during_the_timeout_run_waits_once_more_and_does_not_loop() {
    use crate::core::approval::Decision;
    let mut s = sched(4);
    let draft = draft_in_flight(&mut s);
    finish(&mut s, &draft, Ok(posted()), at(8));
    // The deadline comes: the timeout run starts.
    s.advance(at(608));
    s.start_ready(at(608));
    let run = s
        .take_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Start(st) if st.task.kind() == TaskKind::Draft => Some(*st),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no timeout run"));
    assert!(s.decide_draft(
        "a",
        &DraftRef::Id(run.task.id.clone()),
        Decision::Later,
        at(609)
    ));
    finish(
        &mut s,
        &run,
        Ok(Outcome::Dropped {
            reason: "timed out".into(),
        }),
        at(610),
    );
    let key = ConversationKey::new("a", ChatId(7));
    assert!(s.graph(&key).is_some(), "later kept the plan");
    s.advance(at(1209));
    s.start_ready(at(1209));
    assert!(
        starts(&s.take_effects()).is_empty(),
        "ran before its new deadline"
    );
    s.advance(at(1210));
    s.start_ready(at(1210));
    let again = s
        .take_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Start(st) if st.task.kind() == TaskKind::Draft => Some(*st),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no second timeout run"));
    finish(
        &mut s,
        &again,
        Ok(Outcome::Dropped {
            reason: "timed out".into(),
        }),
        at(1211),
    );
    assert!(s.graph(&key).is_none(), "the second timeout ends it");
}

/// The owner taking over (or pausing, forgetting) a chat whose draft they hold is told the
/// draft is void.
#[test]
fn a_cancelled_plan_voids_its_draft_and_says_so() {
    let mut s = sched(4);
    let draft = draft_in_flight(&mut s);
    finish(&mut s, &draft, Ok(posted()), at(8));
    s.on_cancel("a", ChatId(7), "paused by the owner", at(9));
    let own = s
        .graph(&ConversationKey::new("a", ChatId(1)))
        .map(|g| {
            g.tasks
                .iter()
                .filter_map(|t| match &t.spec {
                    TaskSpec::Send { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(own[0].contains("is void: paused by the owner"), "{own:?}");
}

/// The agent's own cap of 1000 tokens, reached (1200 spent today).
fn reach_cap(s: &mut Scheduler, now: Timestamp) {
    use crate::core::budget::{DailyCap, Spend};
    let cap = DailyCap {
        tokens: Some(1000),
        usd: None,
    };
    let spent = Spend {
        tokens: 1200,
        ..Spend::default()
    };
    let report = SpendReport {
        day: now.to_zoned(jiff::tz::TimeZone::UTC).date(),
        agent: (spent, Some(cap)),
        daemon: (Spend::default(), None),
    };
    s.on_spend("a", report, now);
}

/// Starts what is ready at `now` and finishes each start at once (`Done`), until nothing
/// more starts: the chat and kind of every start, in order.
fn drain(s: &mut Scheduler, now: Timestamp) -> Vec<(i64, TaskKind)> {
    let mut all = Vec::new();
    for _ in 0..20 {
        s.advance(now);
        s.start_ready(now);
        let started: Vec<Start> = s
            .take_effects()
            .into_iter()
            .filter_map(|e| match e {
                Effect::Start(st) => Some(*st),
                _ => None,
            })
            .collect();
        if started.is_empty() {
            break;
        }
        for st in started {
            all.push((st.key.chat.0, st.task.kind()));
            finish(s, &st, Ok(Outcome::Done), now);
        }
    }
    all
}

/// A reached cap holds the group classifier's call too (not only planning): the `classify`
/// task waits past its quiet period until the owner lifts the cap.
#[test]
fn a_reached_cap_holds_the_classifier_until_lifted() {
    use crate::core::admission::Admission;
    let mut s = sched(4);
    reach_cap(&mut s, at(0));
    let group = Chat {
        id: ChatId(-9),
        kind: ChatKind::Group,
        title: "club".into(),
    };
    assert!(s.admit("a", group, MessageId(3), Admission::Classify, at(1)));
    let held = drain(&mut s, at(600));
    assert!(
        !held.contains(&(-9, TaskKind::Classify)),
        "the classifier was called past the cap: {held:?}"
    );
    s.lift_budget("a", at(601));
    assert!(drain(&mut s, at(601)).contains(&(-9, TaskKind::Classify)));
}

/// A plan whose own call reached the cap still sends its reply (no LLM), but the summary
/// call queued after it waits until the owner lifts the cap.
#[test]
fn a_reached_cap_holds_the_summary_call_after_the_reply() {
    let mut s = sched(4);
    assert!(s.on_inbound("a", chat(7), MessageId(3), true, at(0)));
    s.advance(at(5));
    s.start_ready(at(5));
    let received = only_start(s.take_effects());
    assert_eq!(received.task.kind(), TaskKind::Received);
    // The planning call's spend report reaches the cap while it runs.
    reach_cap(&mut s, at(6));
    let planned = Outcome::Planned(vec![
        Task::new(TaskSpec::send("hi", None), at(6)),
        Task::new(TaskSpec::Summarize, at(6)),
    ]);
    finish(&mut s, &received, Ok(planned), at(7));
    let held = drain(&mut s, at(600));
    assert!(held.contains(&(7, TaskKind::Send)), "{held:?}");
    assert!(
        !held.contains(&(7, TaskKind::Summarize)),
        "the summary call ran past the cap: {held:?}"
    );
    s.lift_budget("a", at(601));
    assert!(drain(&mut s, at(601)).contains(&(7, TaskKind::Summarize)));
}

/// A reached cap holds the call that writes the persona's day (`schedule`, in its Saved
/// Messages) until the owner lifts it.
#[test]
fn a_reached_cap_holds_the_schedule_call_until_lifted() {
    let mut s = sched(4);
    let own = s
        .safety()
        .own_chat("a")
        .unwrap_or_else(|| panic!("no own chat"));
    let own_id = own.id.0;
    let schedule = Task::new(
        TaskSpec::Schedule {
            date: "2023-11-15".into(),
        },
        at(0),
    );
    s.load(
        vec![TaskGraph::with_tasks("a", own, at(0), vec![schedule])],
        at(0),
    );
    reach_cap(&mut s, at(0));
    let held = drain(&mut s, at(600));
    assert!(
        !held.contains(&(own_id, TaskKind::Schedule)),
        "the schedule call ran past the cap: {held:?}"
    );
    s.lift_budget("a", at(601));
    assert!(drain(&mut s, at(601)).contains(&(own_id, TaskKind::Schedule)));
}

/// The owner's reply to the draft's message can come before the post is back (the message
/// is in Telegram a moment before its task finishes): the word is held and applied once the
/// post names that message.
#[test]
fn a_reply_to_the_draft_before_its_post_is_back_applies_once_it_is() {
    use crate::core::approval::Decision;
    let mut s = sched(4);
    let draft = draft_in_flight(&mut s);
    let reply = DraftRef::Reply {
        chat: ChatId(1),
        message: MessageId(40),
    };
    assert!(
        s.decide_draft("a", &reply, Decision::Send, at(7)),
        "held for the post under way"
    );
    finish(&mut s, &draft, Ok(posted()), at(8));
    s.start_ready(at(8));
    assert_eq!(
        starts(&s.take_effects()),
        vec![(1, TaskKind::Send), (7, TaskKind::Send)],
        "the owner is told in their chat, and the send starts"
    );
}

/// A reply to another message of the owner's chat during a post decides nothing: the draft
/// waits for the owner once posted.
#[test]
fn a_reply_to_another_message_during_a_post_decides_nothing() {
    use crate::core::approval::Decision;
    let mut s = sched(4);
    let draft = draft_in_flight(&mut s);
    let other = DraftRef::Reply {
        chat: ChatId(1),
        message: MessageId(39),
    };
    s.decide_draft("a", &other, Decision::Send, at(7));
    finish(&mut s, &draft, Ok(posted()), at(8));
    s.start_ready(at(8));
    assert!(
        starts(&s.take_effects()).is_empty(),
        "the draft still waits for the owner"
    );
}
