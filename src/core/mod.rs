//! The pure core: the vocabulary of the program and every decision that needs no I/O. Task
//! graphs and the scheduler that drives them, account safety, persona parsing, task blocks,
//! prompts, group decisions, Markdown rendering and media records. It imports nothing outside
//! itself (a test, `tests/layers.rs`, holds it to that); every other layer builds on it.

pub mod admission;
pub mod agent_state;
pub mod album;
pub mod approval;
pub mod blocks;
pub mod budget;
pub mod call_kind;
pub mod config;
pub mod facts;
pub mod graph;
pub mod group;
pub mod intents;
pub mod lease;
pub mod llm;
pub mod markdown;
pub mod media;
pub mod model;
pub mod outcome;
pub mod persona;
pub mod plan;
pub mod presence;
pub mod prompt;
pub mod retrieve;
pub(crate) mod safety;
pub mod scheduler;
pub mod shard;
pub mod speech;
pub mod summaries;
pub mod time;
pub mod voice;

/// Why a value of outside input is not valid: the message says what and where, in the words
/// shown to the operator. The core's rules return it; callers add the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(message: String) -> Invalid {
        Invalid(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Invalid {
        Invalid(message.to_string())
    }
}
