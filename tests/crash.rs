//! The runtime under kill -9: `personad crash-child` runs the real runtime on a persisted
//! in-memory Telegram with plans of three sends separated by waits (the second a voice note,
//! so kills land between its upload and its send too); this test kills it with
//! SIGKILL at random points (after a random number of its progress lines), restarts it, and
//! after every cycle checks that every graph file decodes. At the end a last run completes
//! everything, and then: the newest message of every chat got all of its planned sends,
//! and no text was ever sent twice. The last chat is a group under draft mode: its plans go
//! to Saved Messages as drafts that the child approves as the owner would, so kills land
//! around group decisions, draft posts and approvals too; no draft is posted twice.
//!
//! The seed and every kill point are printed; rerun a failure with PERSONAD_CRASH_SEED=<seed>.
//! Cycles: PERSONAD_RUNTIME_CRASH_CYCLES (default 100; the documented long run is 1000).

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use personad::adapters::store::{GraphStore, StateDir};
use personad::app::crash_harness::{AGENT, planned_fact, planned_texts};

const CHATS: i64 = 4;

fn child(state: &Path, push: Option<i64>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    cmd.arg("--state")
        .arg(state)
        .args(["crash-child", "--chats", &CHATS.to_string()]);
    if let Some(chat) = push {
        cmd.args(["--push", &chat.to_string()]);
    }
    let log = std::env::var_os("PERSONAD_CRASH_LOG")
        .and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        })
        .map_or_else(Stdio::null, Stdio::from);
    if std::env::var_os("PERSONAD_CRASH_LOG").is_some() {
        cmd.env(
            "PERSONAD_LOG",
            std::env::var("PERSONAD_CRASH_LOG_LEVEL").unwrap_or_else(|_| "info".into()),
        );
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
    cmd
}

/// Runs a child and kills it after it printed `lines` lines (or when it ends on its own).
/// Returns the lines read.
fn run_and_kill(state: &Path, push: Option<i64>, lines: usize) -> Result<Vec<String>, String> {
    let mut c = child(state, push).spawn().map_err(|e| e.to_string())?;
    let out = c.stdout.take().ok_or("no stdout")?;
    let mut read = Vec::new();
    for line in BufReader::new(out).lines() {
        read.push(line.map_err(|e| e.to_string())?);
        if read.len() >= lines {
            break;
        }
    }
    // SIGKILL: no destructor, no flush, no graceful anything.
    let _ = c.kill();
    let _ = c.wait();
    Ok(read)
}

/// How many journal segments (`<seq>.log`) are in `dir`.
fn journal_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .count()
    })
}

/// The persisted transcript of a chat that received messages: missing or unreadable is a
/// failure (an empty list would let the checks below pass on nothing).
fn transcript(state: &Path, chat: i64) -> Result<Vec<serde_json::Value>, String> {
    let path = state.join("transcripts").join(format!("{chat}.json"));
    let value = personad::adapters::memory::read_folded_json(&path)
        .map_err(|e| format!("chat {chat}: transcript {}: {e}", path.display()))?;
    value["messages"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("chat {chat}: transcript {} has no messages", path.display()))
}

/// The notes kept for `chat` (its memory file's facts, as text), in file order.
fn notes_of(state: &Path, chat: i64) -> Result<Vec<String>, String> {
    let path = state.join("crash/memory/chats").join(format!("{chat}.md"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let file = personad::core::facts::FactFile::parse(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(file.facts.into_iter().map(|f| f.text).collect())
}

/// Whether `text` went out as a voice note in `messages` (a transcript's JSON).
fn went_as_voice(messages: &[serde_json::Value], text: &str) -> bool {
    messages
        .iter()
        .any(|m| m["text"] == text && m["media"]["kind"] == "voice")
}

/// The drafts of the group, in Saved Messages (the account's own chat): none posted twice.
/// Returns how many were posted.
fn draft_posts(state: &Path, seed: u64) -> Result<usize, String> {
    let drafts = std::fs::read_dir(state.join("transcripts"))
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id: i64 = name.strip_suffix(".json")?.parse().ok()?;
            (id > CHATS).then_some(id)
        })
        .map(|id| transcript(state, id))
        .collect::<Result<Vec<_>, _>>()?
        .concat();
    let mut posts: HashMap<String, usize> = HashMap::new();
    for m in drafts.iter().filter(|m| m["outgoing"] == true) {
        *posts
            .entry(m["text"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    if let Some((text, n)) = posts.iter().find(|(_, n)| **n > 1) {
        return Err(format!(
            "seed {seed}: the draft {text:?} was posted {n} times"
        ));
    }
    Ok(posts.len())
}

#[test]
fn kill_9_at_random_points_never_loses_or_repeats_a_planned_send() -> Result<(), String> {
    let seed: u64 = std::env::var("PERSONAD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let cycles: usize = std::env::var("PERSONAD_RUNTIME_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    println!("kill -9 loop: seed {seed}, {cycles} cycles (PERSONAD_CRASH_SEED={seed} reruns it)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = dir.path().join("state");
    let store = GraphStore::new(StateDir::new(&state));
    let mut pushed = std::collections::BTreeSet::new();
    let mut approvals = 0usize;
    // Cycles killed with a journal segment on disk (state not yet retired into the files):
    // the restarts then replay the journal, torn tails included.
    let mut with_segment = 0usize;
    let journal = StateDir::new(&state).journal_dir(AGENT);
    // Cycles that started from a graph pack (the previous cycle stopped cleanly).
    let mut from_pack = 0usize;
    let pack = StateDir::new(&state).graph_pack_path(AGENT);
    for cycle in 0..cycles {
        if pack.exists() {
            from_pack += 1;
        }
        // Most cycles bring a new message; some only resume.
        let push = (rng.u8(..4) != 0).then(|| rng.i64(1..=CHATS));
        // 1 kills right after READY, 2 after the push or the first send, ...; a run with
        // one new message prints about six lines, so most kills land mid-plan.
        // A group message's run also prints its draft post and the approval.
        let lines = rng.usize(1..9);
        let read = run_and_kill(&state, push, lines)?;
        approvals += read.iter().filter(|l| l.starts_with("APPROVED")).count();
        // The child says PUSHED once the message is in its (persisted) transcript.
        if read.iter().any(|l| l == "PUSHED") {
            pushed.extend(push);
        }
        let last = read.last().cloned().unwrap_or_default();
        let segments = journal_segments(&journal);
        if segments > 0 {
            with_segment += 1;
        }
        println!(
            "cycle {cycle}: push {push:?}, killed after line {lines} ({last:?}), {segments} journal segments"
        );
        for file in store.scan().map_err(|e| e.to_string())? {
            if let Err(e) = file.graph {
                return Err(format!(
                    "seed {seed} cycle {cycle}: {} does not decode: {e}",
                    file.path.display()
                ));
            }
        }
    }
    // The last run completes every pending plan.
    let out = child(&state, None)
        .output()
        .map_err(|e| format!("final run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "seed {seed}: the final run failed: {:?}",
            out.status
        ));
    }
    let left = store.scan().map_err(|e| e.to_string())?;
    if !left.is_empty() {
        return Err(format!(
            "seed {seed}: graphs left after the final run: {}",
            left.len()
        ));
    }
    let mut sends = 0usize;
    let mut facts = 0usize;
    for &chat in &pushed {
        let messages = transcript(&state, chat).map_err(|e| format!("seed {seed}: {e}"))?;
        let mut sent: HashMap<String, usize> = HashMap::new();
        for m in messages.iter().filter(|m| m["outgoing"] == true) {
            *sent
                .entry(m["text"].as_str().unwrap_or_default().to_string())
                .or_default() += 1;
        }
        sends += sent.values().sum::<usize>();
        let log: Vec<String> = messages
            .iter()
            .map(|m| format!("{} {} {}", m["id"], m["outgoing"], m["text"]))
            .collect();
        if let Some((text, n)) = sent.iter().find(|(_, n)| **n > 1) {
            return Err(format!(
                "seed {seed}: chat {chat}: {text:?} sent {n} times; transcript:\n{}",
                log.join("\n")
            ));
        }
        let newest = messages
            .iter()
            .rev()
            .find(|m| m["outgoing"] == false)
            .and_then(|m| m["id"].as_i64());
        // Memory writes: none twice, and the newest message's plan kept its note once.
        let notes = notes_of(&state, chat).map_err(|e| format!("seed {seed}: {e}"))?;
        if let Some(dup) = notes
            .iter()
            .find(|n| notes.iter().filter(|m| m == n).count() > 1)
        {
            return Err(format!(
                "seed {seed}: chat {chat}: the note {dup:?} was written twice: {notes:?}"
            ));
        }
        facts += notes.len();
        if let Some(id) = newest
            && !notes.contains(&planned_fact(chat, id))
        {
            return Err(format!(
                "seed {seed}: chat {chat}: the note of message {id} was lost: {notes:?}"
            ));
        }
        if let Some(id) = newest {
            for text in planned_texts(chat, id) {
                if !sent.contains_key(&text) {
                    return Err(format!(
                        "seed {seed}: chat {chat}: planned send {text:?} was lost; transcript:\n{}",
                        log.join("\n")
                    ));
                }
            }
            // Its second part went as a voice note (once, counted above), not as text.
            let voice = &planned_texts(chat, id)[1];
            if !went_as_voice(&messages, voice) {
                return Err(format!(
                    "seed {seed}: chat {chat}: {voice:?} was not a voice note"
                ));
            }
        }
    }
    let posts = draft_posts(&state, seed)?;
    if pushed.contains(&CHATS) && (approvals == 0 || posts == 0) {
        return Err(format!(
            "seed {seed}: the group got messages but no draft was posted and approved ({approvals} approvals)"
        ));
    }
    println!("{approvals} approvals, {posts} draft posts");
    println!("{with_segment} of {cycles} cycles were killed with a journal segment on disk");
    println!("{from_pack} of {cycles} cycles started from a graph pack");
    // A kill lands before the runtime's checkpoint retires the journal in most cycles: the
    // restarts must have replayed journals, not only read checkpoint files.
    if cycles >= 10 && with_segment * 4 < cycles {
        return Err(format!(
            "seed {seed}: only {with_segment} of {cycles} cycles left a journal segment: the loop does not exercise the journal"
        ));
    }
    if !pushed.is_empty() && facts == 0 {
        return Err(format!(
            "seed {seed}: messages were pushed but no note was kept"
        ));
    }
    if !pushed.is_empty() && sends == 0 {
        return Err(format!(
            "seed {seed}: messages were pushed but nothing was ever sent"
        ));
    }
    Ok(())
}
