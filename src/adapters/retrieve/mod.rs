//! The retrieve port's adapters: the real web fetcher ([`HttpRetriever`], with its address
//! guard `guard` and its HTML reader `html`), the in-memory twin ([`MemoryRetriever`]) and the
//! metering wrapper with the daily cap ([`MeteredRetriever`]) that goes around either. The
//! chats' documents are kept by `adapters::store::retrieved`.

pub mod guard;
pub mod html;
pub mod http;
pub mod memory;
pub mod metered;

pub use http::{HttpRetriever, Limits};
pub use memory::MemoryRetriever;
pub use metered::MeteredRetriever;
