//! Adapters: the edges. The MTProto backend and the in-memory Telegram twin, the account-safety
//! governor that wraps either, LLM clients, speech providers (`speech`), the LLM planner, the
//! media pipeline, curated stickers, the Telegram Desktop export reader, the persona loader, the
//! state store and the voice-note codec (`voice`). They import only the core and the ports;
//! only `app` wires them.

pub mod album;
pub mod export;
pub mod governor;
pub mod lease;
pub mod llm;
pub mod llm_planner;
pub mod media;
pub mod memory;
pub mod mtproto;
pub mod persona_loader;
pub mod retrieve;
pub mod speech;
pub mod stickers;
pub mod store;
pub mod voice;
pub mod voice_studio;
