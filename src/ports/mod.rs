//! The ports: the traits through which the runtime meets the outside world (Telegram, LLM,
//! planner, clock, durable store, media descriptions, curated stickers, spend reports, speech,
//! voice notes, web retrieval) and the few helpers
//! that belong to a trait (the clock's virtual twin, the backoff that waits on it, the empty
//! sticker lookup). Imports only the core; adapters implement these traits.

pub mod backoff;
pub mod clock;
pub mod facts;
pub mod groups;
pub mod llm;
pub mod media;
pub mod planner;
pub mod retrieve;
pub mod speech;
pub mod spend;
pub mod stickers;
pub mod store;
pub mod telegram;
pub mod updates;
pub mod voice;
