//! The commands behind the CLI (`state`; `check` is `app::check`),
//! each returning a typed [`CommandError`] that carries its exit code. Output meant for the
//! operator goes to stdout; logs go to stderr through tracing. The `chat` command lives in
//! `playground`. Called only by the binary.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::adapters::llm::usage::PriceError;
use crate::adapters::memory::HistoryError;
use crate::adapters::persona_loader::PersonaDirError;
use crate::adapters::store::{GraphStore, LockError, StateDir, StateGone, StoreError};
use crate::app::cli::{GlobalArgs, StateCommand};
use crate::core::config::ConfigError;
use crate::core::graph::TaskGraph;
use crate::core::model::{ChatId, TelegramError};
use crate::core::persona::{LoadReport, Persona};
use crate::ports::facts::FactError;
use crate::runtime::RuntimeError;

/// Documented exit codes.
pub mod exit {
    /// An unexpected failure.
    pub const FAILURE: u8 = 1;
    /// Bad command line (clap's own code).
    pub(crate) const USAGE: u8 = 2;
    /// Bad input data: an unusable persona, a corrupt state file asked for by name.
    pub(crate) const DATA: u8 = 65;
    /// Something named does not exist: the agents directory, an agent, a graph.
    pub(crate) const NO_INPUT: u8 = 66;
    /// Nothing can run: no agent could start, or a needed backend is missing.
    pub const UNAVAILABLE: u8 = 69;
    /// The state directory could not be read or written.
    pub(crate) const IO: u8 = 74;
    /// Invalid settings.
    pub(crate) const CONFIG: u8 = 78;
    /// The reader of stdout went away (a closed pipe): 128 + SIGPIPE, as other Unix tools
    /// end; nothing is printed.
    pub const CLOSED_PIPE: u8 = 141;
}

/// Makes the state directory private ([`crate::adapters::store::secure_state_dir`]) and takes its lock
/// for this process (see [`crate::adapters::store::StateLock`]); a directory held by another process
/// is `Unavailable`, naming its pid.
pub(crate) fn lock_state(
    global: &GlobalArgs,
) -> Result<crate::adapters::store::StateLock, CommandError> {
    lock_state_as(global, false)
}

/// [`lock_state`], shared with other shards when `shared` (`run --shard`).
pub(crate) fn lock_state_as(
    global: &GlobalArgs,
    shared: bool,
) -> Result<crate::adapters::store::StateLock, CommandError> {
    let dir = StateDir::new(&global.state_dir);
    crate::adapters::store::secure_state_dir(&dir)?;
    let taken = if shared {
        crate::adapters::store::StateLock::acquire_shared(&dir)
    } else {
        crate::adapters::store::StateLock::acquire(&dir)
    };
    taken.map_err(|e| match e {
        LockError::Store(e) => CommandError::Store(e),
        held => CommandError::Locked(held),
    })
}

/// A command failure with the exit code it maps to. A failure of another part keeps that
/// part's error as its source; only messages written here for the operator (a refused
/// argument, something missing, bad input described) are text.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Agents(#[from] PersonaDirError),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Reading or writing a stream or file (stdout, a pipe, a temp dir) failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The state directory is in use by another process.
    #[error("{0}")]
    Locked(#[source] LockError),
    /// The state directory went away while the daemon ran.
    #[error("{0}")]
    StateGone(#[from] StateGone),
    /// The runtime stopped with an error.
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    /// A worker (blocking work, the runtime's task) stopped before it answered.
    #[error("{0}")]
    Join(#[from] tokio::task::JoinError),
    /// A request, answer or report could not be encoded or decoded as JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A call to the in-memory Telegram backend (a bench, the crash harness) failed.
    #[error("{0}")]
    Telegram(#[from] TelegramError),
    /// A file named on the command line cannot be read.
    #[error("{0}")]
    InputFile(#[source] StoreError),
    /// The agent's memory files do not read.
    #[error("{0}")]
    Memory(#[from] FactError),
    /// The LLM usage records or a price file are unusable.
    #[error("{0}")]
    Prices(#[from] PriceError),
    /// A recorded transcript does not read.
    #[error("{0}")]
    History(#[from] HistoryError),
    /// What the command was doing when `source` failed (`doing: source`); the exit code is
    /// the source's.
    #[error("{doing}: {source}")]
    While {
        doing: String,
        #[source]
        source: Box<CommandError>,
    },
    /// A failure this command does not expect, whatever its kind (a bench's own in-memory
    /// backend or runtime): exit 1.
    #[error("{0}")]
    Unexpected(#[source] Box<CommandError>),
    /// The input data is unusable, said in words (a persona with problems, a graph that does
    /// not read, an export of the wrong kind).
    #[error("{0}")]
    Data(String),
    /// What was looked for and not found (an agent, a graph, a chat, a user in an export).
    #[error("{0}")]
    NotFound(String),
    /// Why nothing can run (no agent could start, another daemon runs, no daemon answers).
    #[error("{0}")]
    Unavailable(String),
    /// The daemon refused a `ctl` request: its answer, as it said it.
    #[error("{0}")]
    Refused(String),
    /// `--shard` or `--agent` names no valid selection of agents.
    #[error("{0}")]
    Selection(#[source] crate::core::Invalid),
    /// A fault of this program, said in words (a built-in persona that does not parse, a
    /// poisoned lock, a probe that printed nonsense).
    #[error("{0}")]
    Internal(String),
    /// Logging in or out of Telegram failed.
    #[error("{0}")]
    Login(#[source] crate::adapters::mtproto::ConnectError),
    /// An endpoint the operator asked for (metrics, the console) cannot start.
    #[error("{0}")]
    Endpoint(#[source] crate::app::ops::OpError),
    /// A command line clap accepted but that makes no sense.
    #[error("{0}")]
    Usage(String),
    /// A `--day` that names no day.
    #[error("{0}")]
    Day(#[source] crate::app::presence_report::NotADay),
    /// A chat name that names no single recorded conversation.
    #[error("{0}")]
    Chat(#[source] crate::app::memory_report::ChatLookup),
    /// Stdout's reader went away (`personad ctl status | head -1`): the command ends
    /// quietly with [`exit::CLOSED_PIPE`].
    #[error("stdout is a closed pipe")]
    ClosedPipe,
}

impl From<crate::app::stdout::StdoutError> for CommandError {
    fn from(e: crate::app::stdout::StdoutError) -> CommandError {
        match e {
            crate::app::stdout::StdoutError::Closed => CommandError::ClosedPipe,
            crate::app::stdout::StdoutError::Io(e) => {
                CommandError::Io(e).doing("cannot write to stdout")
            }
        }
    }
}

impl CommandError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::Config(_) => exit::CONFIG,
            CommandError::Agents(_)
            | CommandError::NotFound(_)
            | CommandError::InputFile(_)
            | CommandError::Chat(_) => exit::NO_INPUT,
            CommandError::Store(_)
            | CommandError::Io(_)
            | CommandError::StateGone(_)
            | CommandError::Runtime(_) => exit::IO,
            CommandError::Data(_)
            | CommandError::Memory(_)
            | CommandError::Prices(_)
            | CommandError::History(_) => exit::DATA,
            CommandError::Locked(_)
            | CommandError::Unavailable(_)
            | CommandError::Endpoint(_)
            | CommandError::Login(_) => exit::UNAVAILABLE,
            CommandError::Join(_)
            | CommandError::Json(_)
            | CommandError::Telegram(_)
            | CommandError::Unexpected(_)
            | CommandError::Refused(_)
            | CommandError::Internal(_) => exit::FAILURE,
            CommandError::While { source, .. } => source.exit_code(),
            CommandError::Usage(_) | CommandError::Day(_) | CommandError::Selection(_) => {
                exit::USAGE
            }
            CommandError::ClosedPipe => exit::CLOSED_PIPE,
        }
    }

    /// This error, said to have happened while doing something (`doing: error`).
    pub(crate) fn doing(self, doing: impl Into<String>) -> CommandError {
        CommandError::While {
            doing: doing.into(),
            source: Box::new(self),
        }
    }

    /// The error under any context or `Unexpected` wrapper: the kind to match on.
    pub fn innermost(&self) -> &CommandError {
        match self {
            CommandError::While { source, .. } | CommandError::Unexpected(source) => {
                source.innermost()
            }
            other => other,
        }
    }

    /// `e`, in a command that does not expect it: exit 1 whatever its kind.
    pub(crate) fn unexpected(e: impl Into<CommandError>) -> CommandError {
        CommandError::Unexpected(Box::new(e.into()))
    }
}

pub(crate) type CmdResult = Result<ExitCode, CommandError>;

/// An error and its causes as one line, each cause shown once: a cause whose text the line
/// already holds is not repeated (`invalid setting llm: x: invalid setting llm: x`).
pub fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !c.is_empty() && !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

pub(crate) fn out(text: &str) -> Result<(), CommandError> {
    Ok(crate::app::stdout::write(text)?)
}

/// Loads every persona file, logging nothing (callers decide how to report).
pub(crate) fn load_personas(global: &GlobalArgs) -> Result<LoadReport, CommandError> {
    Ok(crate::adapters::persona_loader::load_dir(
        &global.agents_dir,
        &global.prompt_dirs(),
    )?)
}

/// [`load_personas`] off the async threads (it reads files).
pub(crate) async fn load_personas_async(global: &GlobalArgs) -> Result<LoadReport, CommandError> {
    reload_personas(global, std::collections::HashMap::new()).await
}

/// [`load_personas_async`] for a reload: `keep` maps each running agent's lower-cased name
/// to the file it runs from, which keeps the name when another file claims it too.
pub(crate) async fn reload_personas(
    global: &GlobalArgs,
    keep: std::collections::HashMap<String, std::path::PathBuf>,
) -> Result<LoadReport, CommandError> {
    let g = global.clone();
    tokio::task::spawn_blocking(move || {
        Ok(crate::adapters::persona_loader::load_dir_keeping(
            &g.agents_dir,
            &g.prompt_dirs(),
            &keep,
        )?)
    })
    .await?
}

/// Finds one usable persona by name (case-insensitive), or explains why it cannot be used.
pub(crate) fn find_persona(report: &LoadReport, name: &str) -> Result<Persona, CommandError> {
    let wanted = name.trim().to_lowercase();
    if let Some(p) = report.usable().find(|p| p.name.to_lowercase() == wanted) {
        return Ok(p.clone());
    }
    if let Some(entry) = report.entries.iter().find(|e| {
        e.name
            .as_deref()
            .is_some_and(|n| n.to_lowercase() == wanted)
    }) {
        let problems: Vec<String> = entry
            .problems
            .iter()
            .filter(|p| p.is_error())
            .map(ToString::to_string)
            .collect();
        return Err(CommandError::Data(format!(
            "agent {name:?} is unusable:\n  {}",
            problems.join("\n  ")
        )));
    }
    let known: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    Err(CommandError::NotFound(format!(
        "no agent named {name:?} (usable agents: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )))
}

/// `personad state ...`.
pub fn state(global: &GlobalArgs, cmd: &StateCommand) -> CmdResult {
    let store = GraphStore::new(StateDir::new(&global.state_dir));
    match cmd {
        StateCommand::List => state_list(&store),
        StateCommand::Memory {
            agent,
            who,
            playground,
        } => {
            // The playground keeps its memory in a state directory of its own.
            let dir = if *playground {
                StateDir::new(store.state_dir().playground_dir(agent))
            } else {
                store.state_dir().clone()
            };
            let facts = crate::adapters::store::facts::FileFacts::new(dir);
            let text = crate::app::memory_report::report(&facts, agent, who.as_deref())?;
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        StateCommand::Schedule { agent, day } => {
            // The persona tells the zone and whether it keeps a schedule; without its file the
            // host's zone is assumed (said in the output).
            let persona = load_personas(global)
                .ok()
                .and_then(|r| find_persona(&r, agent).ok());
            let (tz, has, name) = match &persona {
                Some(p) => (
                    crate::runtime::driver::presence_zone(p),
                    p.daily_schedule.is_some(),
                    p.name.clone(),
                ),
                None => (
                    jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC),
                    true,
                    agent.clone(),
                ),
            };
            if persona.is_none() {
                out(&format!(
                    "(no persona file for {agent:?} found: the host's time zone is assumed)\n"
                ))?;
            }
            let now = jiff::Timestamp::now();
            let day = day
                .as_deref()
                .map(|d| crate::app::presence_report::parse_day(d, now.to_zoned(tz.clone()).date()))
                .transpose()
                .map_err(CommandError::Day)?;
            let text = crate::app::presence_report::report(
                store.state_dir(),
                &name,
                &tz,
                has,
                None,
                day,
                now,
            );
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        StateCommand::Usage { agent, prices } => crate::adapters::llm::usage::state_usage(
            store.state_dir(),
            agent.as_deref(),
            prices.as_deref(),
        )
        .map_err(CommandError::from)
        .and_then(|text| {
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }),
        StateCommand::Show { agent, chat } => state_show(&store, agent, ChatId(*chat)),
        StateCommand::History {
            agent,
            chat,
            last,
            playground,
        } => {
            let chat = crate::app::memory_report::transcript_chat(
                store.state_dir(),
                agent,
                chat,
                *playground,
            )
            .map_err(CommandError::Chat)?;
            let text = crate::app::memory_report::history(
                store.state_dir(),
                agent,
                chat,
                *last,
                *playground,
            )?;
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        StateCommand::Clear { agent, chat, all } => {
            if !*all && agent.is_none() {
                return Err(CommandError::Data(
                    "say what to clear: --agent NAME [--chat ID], or --all".into(),
                ));
            }
            // A running daemon would write the files again: clearing waits for it to stop.
            let _lock = lock_state(global)?;
            let n = store.clear(agent.as_deref(), chat.map(ChatId))?;
            let mut text = format!("removed {n} graph file(s)\n");
            // Clearing a chat also lifts its "disabled" mark, so the agent may write there again.
            if let (Some(agent), Some(chat)) = (agent, chat) {
                let dir = store.state_dir();
                let (mut st, _) = crate::adapters::store::load_agent_state(dir, agent)?;
                if st.disabled_chats.remove(&ChatId(*chat)).is_some() {
                    crate::adapters::store::save_agent_state(dir, agent, &st)?;
                    text.push_str(&format!("chat {chat} of {agent} is enabled again\n"));
                }
            }
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn state_list(store: &GraphStore) -> CmdResult {
    let files = store.scan()?;
    let mut text = format!(
        "state: {} ({} graph file{})\n",
        store.state_dir().root().display(),
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    if !files.is_empty() {
        text.push_str(&format!(
            "{:<16} {:>16} {:<6} {:>5} {:>5}  {:<22} {}\n",
            "AGENT", "CHAT", "KIND", "OPEN", "TASKS", "NEXT", "RUNNING/NEXT TASK"
        ));
    }
    let mut unreadable = 0;
    for f in &files {
        match &f.graph {
            Ok(g) => {
                let next = g
                    .tasks
                    .iter()
                    .find(|t| t.status != crate::core::graph::TaskStatus::Done)
                    .map(|t| format!("{} {} ({})", t.kind(), t.id, t.status.as_str()))
                    .unwrap_or_else(|| "-".into());
                let when = g
                    .next_deadline()
                    .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
                    .unwrap_or_else(|| "-".into());
                text.push_str(&format!(
                    "{:<16} {:>16} {:<6} {:>5} {:>5}  {:<22} {}\n",
                    g.agent,
                    g.chat.id,
                    if g.chat.kind.is_direct() {
                        "dm"
                    } else {
                        "group"
                    },
                    g.open_tasks(),
                    g.tasks.len(),
                    when,
                    next
                ));
            }
            Err(reason) => {
                unreadable += 1;
                text.push_str(&format!("UNREADABLE {}: {reason}\n", f.path.display()));
            }
        }
    }
    if unreadable > 0 {
        text.push_str(&format!(
            "{unreadable} unreadable file(s): the daemon moves them to quarantine/ at its next start\n"
        ));
    }
    for (path, reason) in crate::adapters::store::list_quarantined(store.state_dir()) {
        text.push_str(&format!(
            "QUARANTINED {}: {}\n",
            path.display(),
            reason.as_deref().unwrap_or("(no reason recorded)")
        ));
    }
    for (agent, state) in crate::adapters::store::list_agent_states(store.state_dir()) {
        match state {
            Ok(st) => {
                if let Some(b) = &st.breaker {
                    text.push_str(&format!(
                        "{agent}: account breaker until {} ({})\n",
                        b.until, b.reason
                    ));
                }
                for (chat, d) in &st.disabled_chats {
                    text.push_str(&format!(
                        "{agent}: chat {chat} disabled since {} ({})\n",
                        d.since, d.reason
                    ));
                }
            }
            Err(reason) => text.push_str(&format!("{agent}: agent state UNREADABLE: {reason}\n")),
        }
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn state_show(store: &GraphStore, agent: &str, chat: ChatId) -> CmdResult {
    let files = store.scan()?;
    let path = store
        .state_dir()
        .graph_path(&crate::core::graph::ConversationKey::new(agent, chat));
    let Some(file) = files.into_iter().find(|f| f.path == path) else {
        return Err(CommandError::NotFound(format!(
            "no graph for agent {agent:?} in chat {chat} (expected {})",
            path.display()
        )));
    };
    let from_journal = file.from_journal;
    let graph = file.graph.map_err(|reason| {
        let reason = reason.to_string();
        // A read error already names the file: say it once.
        let shown = path.display().to_string();
        let reason = reason
            .strip_prefix(&format!("cannot read {shown}: "))
            .unwrap_or(&reason);
        CommandError::Data(format!("{shown} is unreadable: {reason}"))
    })?;
    let mut text = render_graph(&graph);
    if from_journal {
        text.push_str(&format!(
            "\n(from the journal: newer than {}, the checkpoint a running daemon writes within a second)\n",
            path.display()
        ));
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// A graph, task by task, for `state show`.
pub(crate) fn render_graph(g: &TaskGraph) -> String {
    let mut text = format!(
        "graph {} (save #{})\nagent {}  chat {} ({}, {:?})\ncreated {}\n\n",
        g.id,
        g.seq,
        g.agent,
        g.chat.id,
        if g.chat.kind.is_direct() {
            "dm"
        } else {
            "group"
        },
        g.chat.title,
        g.created_at
    );
    for (i, t) in g.tasks.iter().enumerate() {
        text.push_str(&format!(
            "{:>2}. {:<18} {:<8} {}\n",
            i + 1,
            t.kind().as_str(),
            t.status.as_str(),
            t.id
        ));
        if !t.depends_on.is_empty() {
            text.push_str(&format!("      after: {}\n", t.depends_on.join(", ")));
        }
        if let Some(nb) = t.not_before {
            text.push_str(&format!("      not before: {nb}\n"));
        }
        if t.attempts > 0 {
            text.push_str(&format!("      attempts: {}\n", t.attempts));
        }
        if let Some(e) = &t.last_error {
            text.push_str(&format!("      last error: {e}\n"));
        }
        let params = serde_json::to_string(&t.spec).unwrap_or_default();
        text.push_str(&format!("      params: {params}\n"));
    }
    text
}

/// The directory where the playground keeps an agent's in-memory transcripts.
pub(crate) fn playground_dir(global: &GlobalArgs, agent: &str) -> PathBuf {
    StateDir::new(&global.state_dir).playground_dir(agent)
}

#[cfg(test)]
mod tests {
    use super::{CommandError, error_text, exit};

    fn io(kind: std::io::ErrorKind, text: &str) -> std::io::Error {
        std::io::Error::new(kind, text)
    }

    /// A closed stdout is its own kind with the SIGPIPE status, found under any wrapper (the
    /// binary looks at the innermost kind).
    #[test]
    fn a_closed_pipe_is_its_own_kind_with_the_sigpipe_status() {
        let e = CommandError::from(crate::app::stdout::StdoutError::Closed);
        assert!(matches!(e, CommandError::ClosedPipe));
        let e = CommandError::unexpected(e).doing("printing");
        assert!(matches!(e.innermost(), CommandError::ClosedPipe));
        assert_eq!(CommandError::ClosedPipe.exit_code(), exit::CLOSED_PIPE);
        assert_eq!(exit::CLOSED_PIPE, 141);
    }

    #[test]
    fn a_chained_cause_is_printed_once() {
        let e = CommandError::Io(io(std::io::ErrorKind::BrokenPipe, "broken pipe"))
            .doing("cannot write to stdout");
        assert_eq!(error_text(&e), "cannot write to stdout: broken pipe");
        assert_eq!(
            e.exit_code(),
            exit::IO,
            "the context keeps the cause's code"
        );
        let inner = CommandError::Io(io(std::io::ErrorKind::Other, "disk full"));
        let e = CommandError::unexpected(inner).doing("cannot start the input reader");
        assert_eq!(error_text(&e), "cannot start the input reader: disk full");
        assert_eq!(e.exit_code(), exit::FAILURE);
    }

    #[test]
    fn the_source_is_kept_not_its_text() {
        let e =
            CommandError::unexpected(io(std::io::ErrorKind::NotFound, "gone")).doing("reading x");
        assert!(
            matches!(e.innermost(), CommandError::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
        );
        let mut chain = Vec::new();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        assert_eq!(
            chain,
            ["gone", "gone", "gone"],
            "wrappers, then the io error itself"
        );
    }
}
