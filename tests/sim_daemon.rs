//! The daemon binary on the simulated Telegram: `personad run --telegram sim` with the real
//! MTProto adapter, pump and grammers' update machinery connected over TCP to a simulator
//! this test runs (`--sim-addr`), with the offline echo planner. The test plays the people
//! and the owner in the simulator and reads what the accounts wrote there.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::daemon::{
    Reaper, Scratch, ctl, persona, poll, start_on, start_sim, stdout, wait_quiet, wait_up,
};
use personad::adapters::mtproto::sim::{Peer, Post, Sim, SimServer};
use personad::ports::clock::SystemClock;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TESS: &str = "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n# Agent Instructions\nYou are Tess, calm and brief.\n";

/// A simulator on its own runtime (its worker threads serve the daemon's connections while
/// the test blocks).
struct World {
    _rt: tokio::runtime::Runtime,
    server: SimServer,
}

impl World {
    fn new() -> World {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt
            .block_on(SimServer::start(
                Arc::new(SystemClock),
                "127.0.0.1:0".parse().unwrap(),
            ))
            .unwrap();
        World { _rt: rt, server }
    }
    fn sim(&self) -> &Sim {
        &self.server.sim
    }
}

/// What `account` wrote in `peer`, in order.
fn written(sim: &Sim, account: i64, peer: Peer) -> Vec<String> {
    sim.transcript(account, peer)
        .into_iter()
        .filter(|m| m.out)
        .map(|m| m.text)
        .collect()
}

/// Whether grammers' update stream has started: after the unread scan's dialogs, it asked
/// for the state or the difference.
fn stream_started(requests: &[&str]) -> bool {
    requests
        .iter()
        .skip_while(|r| **r != "messages.getDialogs")
        .any(|r| *r == "updates.getState" || *r == "updates.getDifference")
}

/// Waits until `account` wrote `text` in `peer`.
fn wait_written(
    sim: &Sim,
    account: i64,
    peer: Peer,
    text: &str,
    s: &Scratch,
) -> Result<(), String> {
    poll(Duration::from_secs(20), || {
        written(sim, account, peer)
            .iter()
            .any(|t| t == text)
            .then_some(())
    })
    .ok_or_else(|| {
        format!(
            "{text:?} never written; wrote {:?}; log:\n{}",
            written(sim, account, peer),
            s.log_text()
        )
    })
}

/// The owner writes `/status` in the account's Saved Messages (from another device).
fn owner_asks_status(sim: &Sim, account: i64) -> Result<(), Box<dyn std::error::Error>> {
    sim.post(
        account,
        Peer::User(account),
        Post {
            text: "/status".into(),
            ..Post::default()
        },
    )?;
    Ok(())
}

/// Waits until the account's update stream runs (so what is posted next is live).
fn wait_streaming(sim: &Sim, account: i64) -> Result<(), String> {
    poll(Duration::from_secs(20), || {
        stream_started(&sim.requests(account)).then_some(())
    })
    .ok_or_else(|| "the account never started its update stream".to_string())
}

#[test]
fn a_first_contact_dm_is_answered_through_the_real_adapter() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let alice = w.sim().person("Alice");
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    w.sim().dm(alice, tess, "hello Tess")?;
    wait_written(
        w.sim(),
        tess,
        Peer::User(alice),
        "Tess heard: hello Tess",
        &s,
    )?;
    // The chat's mute look-up learnt the stranger's access hash (as a send does) instead of
    // failing with PEER_ID_INVALID.
    assert!(
        !s.log_text().contains("look_up_failed"),
        "a look-up failed:\n{}",
        s.log_text()
    );
    // Read, and answered once.
    assert_eq!(written(w.sim(), tess, Peer::User(alice)).len(), 1);
    assert!(
        w.sim()
            .events(tess)
            .iter()
            .any(|e| e.starts_with(&format!("read {alice}"))),
        "{:?}",
        w.sim().events(tess)
    );
    common::daemon::stop_daemon(&mut reaper)?;
    Ok(())
}

#[test]
fn a_draft_goes_to_saved_messages_and_the_owners_ok_from_the_phone_sends_it() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let alice = w.sim().person("Alice");
    let s = Scratch::new(&[(
        "Tess.md",
        &persona("Tess", "+15550100042", "# Approval\nnew-contacts\n\n"),
    )])?;
    let _reaper = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    w.sim().dm(alice, tess, "can we meet?")?;
    let saved = Peer::User(tess);
    let draft = poll(Duration::from_secs(20), || {
        w.sim()
            .transcript(tess, saved)
            .into_iter()
            .find(|m| m.text.starts_with("personad: draft"))
    })
    .ok_or_else(|| format!("no draft in Saved Messages; log:\n{}", s.log_text()))?;
    assert!(
        written(w.sim(), tess, Peer::User(alice)).is_empty(),
        "sent before approval"
    );
    // The owner answers the draft from the phone: a reply in Saved Messages.
    w.sim().post(
        tess,
        saved,
        Post {
            text: "ok".into(),
            reply_to: Some(draft.id),
            ..Post::default()
        },
    )?;
    wait_written(
        w.sim(),
        tess,
        Peer::User(alice),
        "Tess heard: can we meet?",
        &s,
    )?;
    Ok(())
}

#[test]
fn two_personas_in_one_group_hear_it_and_the_one_addressed_answers() -> TestResult {
    let w = World::new();
    let (tess, wren) = (w.sim().account("Tess"), w.sim().account("Wren"));
    let bob = w.sim().person("Bob");
    let group = w.sim().group("Garden club", &[tess, wren, bob]);
    let s = Scratch::new(&[
        ("Tess.md", TESS),
        ("Wren.md", &persona("Wren", "+15550100043", "")),
    ])?;
    // The group gate's decisions are logged at DEBUG: Wren's shows it has the message.
    let addr = w.server.addr.to_string();
    let sim = [
        "--telegram",
        "sim",
        "--sim-addr",
        &addr,
        "--planner",
        "echo",
    ];
    let debug = [("PERSONAD_LOG", "info,personad::ingress::gate=debug")];
    let _reaper = Reaper(Some(start_on(&s, &sim, &[], &debug, None)?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    wait_streaming(w.sim(), wren)?;
    w.sim().post(
        bob,
        Peer::Chat(group),
        Post {
            text: "@tess are the roses out?".into(),
            ..Post::default()
        },
    )?;
    wait_written(
        w.sim(),
        tess,
        Peer::Chat(group),
        "Tess heard: @tess are the roses out?",
        &s,
    )?;
    // Wren has it too (its own copy, its own id) and was not addressed: once its gate has
    // decided and the runtime is quiet, it has not answered.
    poll(Duration::from_secs(20), || {
        s.log_text()
            .lines()
            .any(|l| l.contains("\"group_decision\"") && l.contains("\"agent\":\"Wren\""))
            .then_some(())
    })
    .ok_or_else(|| format!("Wren's gate never decided:\n{}", s.log_text()))?;
    wait_quiet(&s)?;
    let wren_sees = w.sim().transcript(wren, Peer::Chat(group));
    assert!(
        wren_sees
            .iter()
            .any(|m| m.text == "@tess are the roses out?")
    );
    assert!(
        !wren_sees
            .iter()
            .any(|m| m.out && m.text.starts_with("Wren heard")),
        "{wren_sees:?}"
    );
    Ok(())
}

#[test]
fn a_migrated_group_is_answered_in_its_supergroup() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let bob = w.sim().person("Bob");
    let group = w.sim().group("Chess", &[tess, bob]);
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let _reaper = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    let say = |peer: Peer, text: &str| {
        w.sim().post(
            bob,
            peer,
            Post {
                text: text.into(),
                ..Post::default()
            },
        )
    };
    say(Peer::Chat(group), "@tess one")?;
    wait_written(
        w.sim(),
        tess,
        Peer::Chat(group),
        "Tess heard: @tess one",
        &s,
    )?;
    let channel = w.sim().migrate(group).ok_or("no migration")?;
    say(Peer::Channel(channel), "@tess two")?;
    wait_written(
        w.sim(),
        tess,
        Peer::Channel(channel),
        "Tess heard: @tess two",
        &s,
    )?;
    Ok(())
}

#[test]
fn run_with_its_own_simulator_answers_ctl_say_as_the_readme_shows() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let _reaper = Reaper(Some(common::daemon::start_on(
        &s,
        &["--telegram", "sim", "--planner", "echo"],
        &[],
        &[],
        None,
    )?));
    wait_up(&s)?;
    // At once after start: the message may arrive before the update stream runs.
    let out = stdout(&ctl(
        &s,
        &[
            "say", "--wait", "20", "--agent", "Tess", "--from", "Alice", "hello",
        ],
    )?);
    assert!(
        out.contains("delivered #1") && out.contains("Tess: Tess heard: hello"),
        "{out}\nlog:\n{}",
        s.log_text()
    );
    let status = stdout(&ctl(
        &s,
        &[
            "say", "--wait", "20", "--agent", "Tess", "--chat", "me", "/status",
        ],
    )?);
    assert!(status.contains("agent(s) up"), "{status}");
    Ok(())
}

/// How many kill -9 cycles the loop runs (`PERSONAD_SIM_CRASH_CYCLES`; a short run in CI).
fn crash_cycles() -> usize {
    std::env::var("PERSONAD_SIM_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

#[test]
fn kill_9_at_random_moments_loses_and_duplicates_nothing_over_the_wire() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let seed = std::env::var("PERSONAD_SIM_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut people = Vec::new();
    for cycle in 0..crash_cycles() {
        let mut child = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
        // Messages arrive before, while and after the account connects.
        for k in 0..rng.usize(1..=3) {
            let name = format!("P{cycle}x{k}");
            let p = w.sim().person(&name);
            w.sim().dm(p, tess, &format!("msg {name}"))?;
            people.push((p, name));
            std::thread::sleep(Duration::from_millis(rng.u64(0..300)));
        }
        std::thread::sleep(Duration::from_millis(rng.u64(0..700)));
        if let Some(c) = child.0.as_mut() {
            c.kill()?; // SIGKILL
            c.wait()?;
        }
        child.0 = None;
    }
    // A last run that is left to finish.
    let _last = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    for (p, name) in &people {
        let want = format!("Tess heard: msg {name}");
        poll(Duration::from_secs(30), || {
            written(w.sim(), tess, Peer::User(*p))
                .contains(&want)
                .then_some(())
        })
        .ok_or_else(|| format!("seed {seed}: {name} never answered; log:\n{}", s.log_text()))?;
    }
    // Counted once the last run has read the whole update stream (an owner's command posted
    // now is answered only after every update before it) and its runtime has nothing running
    // or due: a duplicate would be out by then.
    wait_up(&s)?;
    let before = written(w.sim(), tess, Peer::User(tess)).len();
    owner_asks_status(w.sim(), tess)?;
    poll(Duration::from_secs(20), || {
        written(w.sim(), tess, Peer::User(tess))
            .iter()
            .skip(before)
            .any(|t| t != "/status")
            .then_some(())
    })
    .ok_or_else(|| format!("seed {seed}: /status unanswered; log:\n{}", s.log_text()))?;
    wait_quiet(&s)?;
    for (p, name) in &people {
        let answers = written(w.sim(), tess, Peer::User(*p));
        assert_eq!(
            answers.len(),
            1,
            "seed {seed}: {name} was answered {answers:?}"
        );
    }
    Ok(())
}

/// Today's schedule (UTC) with the persona asleep from an hour before now to two hours
/// after (awake the rest of the day).
fn asleep_now() -> (String, String) {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let hour = i32::from(now.hour());
    let (from, to) = ((hour - 1).max(0), (hour + 2).min(24));
    let mut lines = Vec::new();
    if from > 0 {
        lines.push(format!("- 00:00–{from:02}:00 | 60 | Day |"));
    }
    lines.push(format!("- {from:02}:00–{to:02}:00 | 0 | Sleep | asleep"));
    if to < 24 {
        lines.push(format!("- {to:02}:00–24:00 | 60 | Evening |"));
    }
    let day = now.date().to_string();
    (
        day.clone(),
        format!(
            "# Tess: {day}\n\n<!-- schedule: source=edited -->\n\n{}\n",
            lines.join("\n")
        ),
    )
}

#[test]
fn at_night_a_dm_stays_unread_the_account_shows_offline_and_the_owner_is_still_answered()
-> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let alice = w.sim().person("Alice");
    let s = Scratch::new(&[(
        "Tess.md",
        &persona(
            "Tess",
            "+15550100042",
            "# Agent Timezone\nUTC\n\n# Daily Schedule\nAsleep at odd hours.\n\n",
        ),
    )])?;
    let (day, schedule) = asleep_now();
    let dir = s.state().join("Tess").join("schedule");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{day}.md")), schedule)?;
    let _reaper = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    poll(Duration::from_secs(20), || {
        w.sim()
            .events(tess)
            .contains(&"offline".to_string())
            .then_some(())
    })
    .ok_or_else(|| format!("never shown offline: {:?}", w.sim().events(tess)))?;
    w.sim().dm(alice, tess, "you up?")?;
    // The owner's command is answered in Saved Messages all the same.
    owner_asks_status(w.sim(), tess)?;
    poll(Duration::from_secs(20), || {
        written(w.sim(), tess, Peer::User(tess))
            .iter()
            .any(|t| t.contains("asleep until"))
            .then_some(())
    })
    .ok_or_else(|| {
        format!(
            "no /status answer naming the sleep: {:?}\nlog:\n{}",
            written(w.sim(), tess, Peer::User(tess)),
            s.log_text()
        )
    })?;
    // Alice's message came before the command on the same update stream: once the runtime is
    // quiet, her plan is parked until the morning and nothing else is due.
    let quiet = wait_quiet(&s)?;
    assert!(
        quiet.contains("1 conversation(s) with plans; the next wake-up at"),
        "{quiet}"
    );
    let events = w.sim().events(tess);
    assert!(
        written(w.sim(), tess, Peer::User(alice)).is_empty(),
        "answered at night"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.starts_with(&format!("read {alice}"))),
        "read at night: {events:?}"
    );
    let after_offline = events.iter().skip_while(|e| *e != "offline");
    assert!(
        !after_offline.clone().any(|e| e == "online"),
        "shown online at night: {events:?}"
    );
    Ok(())
}

#[test]
fn a_burst_is_one_plan_and_one_answer() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let alice = w.sim().person("Alice");
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let _reaper = Reaper(Some(start_sim(
        &s,
        w.server.addr,
        &["--debounce-ms", "400"],
    )?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    for i in 0..6 {
        w.sim().dm(alice, tess, &format!("part {i}"))?;
    }
    wait_written(w.sim(), tess, Peer::User(alice), "Tess heard: part 5", &s)?;
    wait_quiet(&s)?;
    assert_eq!(
        written(w.sim(), tess, Peer::User(alice)),
        ["Tess heard: part 5"],
        "one answer for the burst"
    );
    Ok(())
}

#[test]
fn in_a_forum_the_answer_goes_to_the_topic_of_the_message_it_answers() -> TestResult {
    let w = World::new();
    let tess = w.sim().account("Tess");
    let bob = w.sim().person("Bob");
    let forum = w.sim().supergroup("Makers", &[tess, bob], true);
    let printers = w.sim().topic(forum, bob, "Printers")?;
    let looms = w.sim().topic(forum, bob, "Looms")?;
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let _reaper = Reaper(Some(start_sim(&s, w.server.addr, &[])?));
    wait_up(&s)?;
    wait_streaming(w.sim(), tess)?;
    let post = |text: &str, top: i32| {
        w.sim().post(
            bob,
            Peer::Channel(forum),
            Post {
                text: text.into(),
                top: Some(top),
                ..Post::default()
            },
        )
    };
    post("the printer jams again", printers)?;
    post("@tess do you weave?", looms)?;
    wait_written(
        w.sim(),
        tess,
        Peer::Channel(forum),
        "Tess heard: @tess do you weave?",
        &s,
    )?;
    let answer = w
        .sim()
        .transcript(tess, Peer::Channel(forum))
        .into_iter()
        .find(|m| m.out)
        .ok_or("no answer")?;
    assert_eq!(
        answer.top,
        Some(looms),
        "answered in topic {:?}",
        answer.top
    );
    Ok(())
}
