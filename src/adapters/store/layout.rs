//! The layout of the state directory: every path under it is built here and nowhere else.
//!
//! ```text
//! <state>/lock                                  the process lock (see `lock`)
//! <state>/ctl.sock                              the control socket
//! <state>/console.token                         the web console's token (0600)
//! <state>/incidents.jsonl                       the console's incidents, append-only, bounded
//! <state>/graphs/<agent>/<chat>.md              one task graph per conversation
//! <state>/quarantine/<prefix>--<ms>--<file>     unreadable files moved aside (+ `.reason`)
//! <state>/media/<unique_id>.json                generated media descriptions
//! <state>/usage/<agent>.json                    token usage per agent
//! <state>/windows/<agent>.log                   the planner's window records (append-only)
//! <state>/windows/<agent>/<chat>.json           an older version's planner windows (read)
//! <state>/<agent>/journal/<first seq>.log       the agent's journal segments
//! <state>/<agent>/handled.json                  the newest message handed to a plan, per chat
//! <state>/<agent>/graphs.pack                   every graph file of the agent in one, as of the last clean stop
//! <state>/<agent>/agent-state.json              an agent's state: safety, what the owner set
//! <state>/<agent>/controls.json                 an earlier version's owner pauses (folded in)
//! <state>/<agent>/telegram.session(.lock)       the Telegram session and its lock
//! <state>/<agent>/telegram-test.session(.lock)  the same on Telegram's test servers
//! <state>/<agent>/session.lease                the session lease (adapters::lease)
//! <state>/ctl-<label>.sock                      the control socket of a shard (`run --shard`)
//! <state>/<agent>/telegram-sent.json            the sent-message ledger
//! <state>/<agent>/telegram(-test,-sim)-album.json  album uploads kept per account (mtproto::uploads)
//! <state>/<agent>/chats.json                    the chats the persona has known (the console's list)
//! <state>/<agent>/memory/persona.md             the owner's facts about the persona
//! <state>/<agent>/memory/people/<user>.md       what the persona remembers about a person
//! <state>/<agent>/memory/chats/<chat>.md        its notes about one chat
//! <state>/<agent>/memory/summaries/<chat>.md    a chat's rolling summaries
//! <state>/<agent>/retrieved/<chat>.json         the documents a chat's `retrieve` kept
//! <state>/<agent>/telegram-memory/, playground/ in-memory backend transcripts
//! ```
//!
//! Agent names and media ids are escaped with [`fs_name`] so distinct names never share a
//! path. It only computes paths; it reads and writes nothing.

use std::path::{Path, PathBuf};

use crate::core::graph::ConversationKey;
use crate::core::model::ChatId;
use crate::ports::store::StateGone;

/// Name of an agent's journal directory (under its agent directory).
pub const JOURNAL_DIR: &str = "journal";

/// Name of an agent's graph pack (under its agent directory).
pub const GRAPH_PACK_FILE: &str = "graphs.pack";

/// Name of the lock file in the state directory.
pub const LOCK_FILE: &str = "lock";
/// Name of the control socket in the state directory.
pub(crate) const SOCKET_NAME: &str = "ctl.sock";
/// An agent's safety state, in its agent directory.
pub(crate) const AGENT_STATE_FILE: &str = crate::core::agent_state::FILE_NAME;
/// An agent's owner pauses, in its agent directory.
pub(crate) const CONTROLS_FILE: &str = "controls.json";
/// An agent's Telegram session, in its agent directory.
pub(crate) const SESSION_FILE: &str = "telegram.session";
/// An agent's Telegram session on Telegram's test servers (`--test-dc`), in its agent
/// directory: never the production one.
pub(crate) const TEST_SESSION_FILE: &str = "telegram-test.session";
/// An agent's session on the simulated Telegram (`run --telegram sim`), in its agent
/// directory: never a real one.
pub(crate) const SIM_SESSION_FILE: &str = "telegram-sim.session";
/// An agent's session lease, in its agent directory.
pub(crate) const LEASE_FILE: &str = "session.lease";
/// An agent's sent-message ledger, in its agent directory.
pub(crate) const SENT_LEDGER_FILE: &str = "telegram-sent.json";

/// Turns an agent name into a directory name: ASCII letters, digits, `_` and `-` stay, every
/// other byte becomes `%XX`, so distinct names never share a directory.
pub fn fs_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The file of one media record inside `dir` (generated or curated): `<unique_id>.json`,
/// the id escaped like agent names.
pub fn media_record_path(dir: &Path, unique_id: &str) -> PathBuf {
    dir.join(format!("{}.json", fs_name(unique_id)))
}

/// The lock file of a session file: `<session>.lock`.
pub(crate) fn session_lock_path(session: &Path) -> PathBuf {
    session.with_extension("session.lock")
}

/// SQLite's own files next to a session (journal, WAL, shared memory), opened by the library
/// whenever it opens the session: `<session>-journal`, `-wal`, `-shm`.
pub(crate) fn session_sidecars(session: &Path) -> [PathBuf; 3] {
    ["-journal", "-wal", "-shm"].map(|suffix| {
        let mut name = session.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Where an unreadable usage table or journal is moved aside: `<file>.unreadable`.
pub(crate) fn unreadable_usage_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".unreadable");
    PathBuf::from(name)
}

/// Where a damaged sent-message ledger is moved aside: `<ledger>.json.damaged`.
pub(crate) fn damaged_ledger_path(ledger: &Path) -> PathBuf {
    ledger.with_extension("json.damaged")
}

/// A transcript of the in-memory backend inside its directory: `<dir>/<chat>.json`.
pub fn transcript_path(dir: &Path, chat: ChatId) -> PathBuf {
    dir.join(format!("{chat}.json"))
}

/// A voice note the in-memory backend sent, relative to its directory:
/// `voice/<chat>/<id>.ogg` (what its transcript records as the file).
pub fn voice_note_name(chat: ChatId, id: crate::core::model::MessageId) -> String {
    format!("voice/{chat}/{id}.ogg")
}

/// Where an unusable transcript of the in-memory backend is moved:
/// `<dir>/quarantine/transcript--<ms>--<file>`.
pub(crate) fn transcript_quarantine_path(dir: &Path, file: &str) -> PathBuf {
    dir.join("quarantine")
        .join(format!("transcript--{}--{file}", now_ms()))
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Telegram session files are left as they are by the permission fix-up: a session others
/// could read may have been copied, so `run` refuses it with its own message rather than
/// having it fixed quietly.
pub(crate) fn is_session_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| {
        let n = n.to_string_lossy();
        n.starts_with(SESSION_FILE)
            || n.starts_with(TEST_SESSION_FILE)
            || n.starts_with(SIM_SESSION_FILE)
    })
}

/// What vouches that a state directory is still the one this process locked (the state
/// lock, [`super::StateLock`]): asked before each write batch.
pub trait DirGuard: Send + Sync + std::fmt::Debug {
    /// `Err` once the directory or its lock file was removed or replaced (blocking: a stat
    /// or two).
    fn check(&self) -> Result<(), StateGone>;
}

/// The state directory, and every path in it; with its guard once the process holds the
/// directory's lock.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    guard: Option<std::sync::Arc<dyn DirGuard>>,
}

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> StateDir {
        StateDir {
            root: root.into(),
            guard: None,
        }
    }

    /// The same directory, its writes from now on checked by `guard` first.
    pub fn guarded(mut self, guard: std::sync::Arc<dyn DirGuard>) -> StateDir {
        self.guard = Some(guard);
        self
    }

    /// Whether writing is still safe: the directory is the one locked (always, without a
    /// guard). Blocking.
    pub fn check_guard(&self) -> Result<(), StateGone> {
        self.guard.as_ref().map_or(Ok(()), |g| g.check())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<state>/lock`.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    /// `<state>/ctl.sock`.
    pub(crate) fn socket_path(&self) -> PathBuf {
        self.root.join(SOCKET_NAME)
    }

    /// The control socket of a process that runs some of the agents: `<state>/ctl-<label>.sock`
    /// (`shard-0-of-2`, `agents-<hash>`), so shards sharing a state directory each answer.
    pub(crate) fn socket_path_for(&self, label: Option<&str>) -> PathBuf {
        match label {
            None => self.socket_path(),
            Some(l) => self.root.join(format!("ctl-{}.sock", fs_name(l))),
        }
    }

    pub(crate) fn graphs_dir(&self) -> PathBuf {
        self.root.join("graphs")
    }

    /// `<state>/graphs/<agent>/<chat>.md`.
    pub fn graph_path(&self, key: &ConversationKey) -> PathBuf {
        self.graphs_dir()
            .join(fs_name(&key.agent))
            .join(format!("{}.md", key.chat))
    }

    pub(crate) fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }

    /// Where an unreadable file named `file` is moved: `quarantine/<prefix>--<ms>--<file>`
    /// (the prefix names its owner, an agent directory).
    pub(crate) fn quarantine_path(&self, prefix: &str, file: &str) -> PathBuf {
        self.quarantine_dir()
            .join(format!("{prefix}--{}--{file}", now_ms()))
    }

    /// Generated media description records (`media/<unique_id>.json`).
    pub fn media_dir(&self) -> PathBuf {
        self.root.join("media")
    }

    /// `media/<unique_id>.json`.
    pub fn media_record_path(&self, unique_id: &str) -> PathBuf {
        media_record_path(&self.media_dir(), unique_id)
    }

    /// `<state>/usage`.
    pub(crate) fn usage_dir(&self) -> PathBuf {
        self.root.join("usage")
    }

    /// `usage/<agent>.json`.
    pub(crate) fn usage_path(&self, agent: &str) -> PathBuf {
        self.usage_dir().join(format!("{}.json", fs_name(agent)))
    }

    /// `<state>/console.token`: the web console's access token (0600, kept across restarts).
    pub(crate) fn console_token_path(&self) -> PathBuf {
        self.root.join("console.token")
    }

    /// `<state>/incidents.jsonl`: the console's incidents, one JSON line each (append-only,
    /// compacted to the newest few hundred).
    pub(crate) fn incidents_path(&self) -> PathBuf {
        self.root.join("incidents.jsonl")
    }

    /// `usage/<agent>.log`, the journal of calls not yet in the table.
    pub(crate) fn usage_log_path(&self, agent: &str) -> PathBuf {
        self.usage_dir().join(format!("{}.log", fs_name(agent)))
    }

    /// `<state>/windows/<agent>/<chat>.json` (an older version's, still read).
    pub fn window_path(&self, agent: &str, chat: ChatId) -> PathBuf {
        self.windows_dir(agent).join(format!("{chat}.json"))
    }

    /// `<state>/windows/<agent>`: an older version's window files.
    pub fn windows_dir(&self, agent: &str) -> PathBuf {
        self.root.join("windows").join(fs_name(agent))
    }

    /// `<state>/windows/<agent>.log`: the planner's window records (`store::windows`).
    pub fn windows_log_path(&self, agent: &str) -> PathBuf {
        self.root
            .join("windows")
            .join(format!("{}.log", fs_name(agent)))
    }

    /// `<state>/<agent>/journal`: the agent's journal segments (`store::journal`).
    pub fn journal_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(JOURNAL_DIR)
    }

    /// `<state>/<agent>/graphs.pack`: the agent's graph files in one (`store::pack`).
    pub fn graph_pack_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(GRAPH_PACK_FILE)
    }

    /// The pack of the graphs in `graph_dir` (`<state>/graphs/<agent>`): the agent directory
    /// of the same name holds it.
    pub(crate) fn graph_pack_path_of(&self, graph_dir: &Path) -> PathBuf {
        let name = graph_dir.file_name().unwrap_or_default();
        self.root.join(name).join(GRAPH_PACK_FILE)
    }

    /// `<state>/<agent>/handled.json`: the agent's handled marks.
    pub fn handled_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("handled.json")
    }

    /// Per-agent private data (session file, safety state, transcripts).
    pub fn agent_dir(&self, agent: &str) -> PathBuf {
        self.root.join(fs_name(agent))
    }

    /// `<agent>/session.lease`: who may use the agent's session (`adapters::lease`).
    pub fn lease_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(LEASE_FILE)
    }

    /// `<agent>/agent-state.json`.
    pub(crate) fn agent_state_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(AGENT_STATE_FILE)
    }

    /// `<agent>/controls.json`.
    pub(crate) fn controls_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(CONTROLS_FILE)
    }

    /// `<agent>/telegram.session`.
    pub fn session_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(SESSION_FILE)
    }

    /// `<agent>/telegram-test.session`: the session on Telegram's test servers.
    pub fn test_session_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(TEST_SESSION_FILE)
    }

    /// `<agent>/telegram-sim.session`: the session on the simulated Telegram.
    pub fn sim_session_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(SIM_SESSION_FILE)
    }

    /// `<agent>/chats.json`: the chats the persona has known, with their last message.
    pub(crate) fn chats_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("chats.json")
    }

    /// `<agent>/telegram-sent.json`.
    pub(crate) fn sent_ledger_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join(SENT_LEDGER_FILE)
    }

    /// `<agent>/telegram-memory`: the in-memory backend's transcripts under
    /// `run --telegram memory` (before 0.2 they were in `<agent>/memory`, now the facts').
    pub(crate) fn memory_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("telegram-memory")
    }

    /// `<agent>/memory`: an agent's long-term memory (facts).
    pub(crate) fn facts_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("memory")
    }

    /// `<agent>/memory/summaries/<chat>.md`.
    pub(crate) fn summaries_path(&self, agent: &str, chat: ChatId) -> PathBuf {
        self.facts_dir(agent)
            .join("summaries")
            .join(format!("{chat}.md"))
    }

    /// `<agent>/memory/resets/<chat>.md`: the first message of the chat's last fresh start.
    pub(crate) fn reset_marker_path(&self, agent: &str, chat: ChatId) -> PathBuf {
        self.facts_dir(agent)
            .join("resets")
            .join(format!("{chat}.md"))
    }

    /// `<agent>/memory/resets/<chat>-<first>/`: what a fresh start took out of the prompt.
    pub(crate) fn reset_archive_dir(&self, agent: &str, chat: ChatId, first: i64) -> PathBuf {
        self.facts_dir(agent)
            .join("resets")
            .join(format!("{chat}-{first}"))
    }

    /// The file of one scope of an agent's facts.
    pub(crate) fn facts_path(&self, agent: &str, scope: crate::core::facts::FactScope) -> PathBuf {
        use crate::core::facts::FactScope;
        let dir = self.facts_dir(agent);
        match scope {
            FactScope::Persona => dir.join("persona.md"),
            FactScope::Person(id) => dir.join("people").join(format!("{id}.md")),
            FactScope::Chat(id) => dir.join("chats").join(format!("{id}.md")),
            FactScope::Intentions => dir.join("intentions.md"),
            FactScope::Plans(id) => dir.join("plans").join(format!("{id}.md")),
        }
    }

    /// `<agent>/retrieved/<chat>.json`: the documents the persona retrieved in a chat.
    pub fn retrieved_path(&self, agent: &str, chat: ChatId) -> PathBuf {
        self.agent_dir(agent)
            .join("retrieved")
            .join(format!("{chat}.json"))
    }

    /// `<agent>/schedule`: the persona's days, one file each.
    pub fn schedule_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("schedule")
    }

    /// `<agent>/schedule/<YYYY-MM-DD>.md`.
    pub fn schedule_day_path(&self, agent: &str, date: jiff::civil::Date) -> PathBuf {
        self.schedule_dir(agent).join(format!("{date}.md"))
    }

    /// `<agent>/intents.md`: the persona's scheduled intents.
    pub fn intents_path(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("intents.md")
    }

    /// `<agent>/playground`: the playground's transcripts.
    pub(crate) fn playground_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("playground")
    }

    /// `<state>/transcripts`: the crash harness child's transcripts (`test-hooks` builds only).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn transcripts_dir(&self) -> PathBuf {
        self.root.join("transcripts")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_name_keeps_distinct_names_distinct() {
        assert_eq!(fs_name("Mary"), "Mary");
        assert_eq!(fs_name("a/b"), "a%2Fb");
        assert_ne!(fs_name("a b"), fs_name("a_b"));
        assert_eq!(fs_name(".."), "%2E%2E");
    }

    #[test]
    fn every_agent_file_lives_in_the_agent_directory() {
        let dir = StateDir::new("/s");
        let agent = dir.agent_dir("a b");
        for path in [
            dir.agent_state_path("a b"),
            dir.controls_path("a b"),
            dir.session_path("a b"),
            dir.sent_ledger_path("a b"),
        ] {
            assert_eq!(path.parent(), Some(agent.as_path()));
        }
        assert_eq!(
            session_lock_path(&dir.session_path("x")),
            PathBuf::from("/s/x/telegram.session.lock")
        );
    }
}
