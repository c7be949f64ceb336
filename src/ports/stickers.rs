//! The stickers port: the persona's curated stickers, as the `received` handler (for the
//! planner's list) and the `sticker` handler (to resolve a name) need them.
//!
//! The implementation is `adapters::stickers::StickerCatalog`, which loads the sets through
//! the Telegram trait; [`NoStickers`] is the empty twin used when none is given. This module
//! holds the trait and that twin only.

use std::sync::Arc;

use jiff::Timestamp;

use crate::core::model::CuratedSticker;
use crate::core::persona::Persona;
use crate::core::time::BoxFuture;
use crate::ports::telegram::Telegram;

/// Curated stickers of every agent of the process.
pub trait StickerLookup: Send + Sync + 'static {
    /// The persona's curated stickers (without descriptions), loading what is missing.
    fn curated<'a>(
        &'a self,
        persona: &'a Persona,
        telegram: &'a dyn Telegram,
        now: Timestamp,
    ) -> BoxFuture<'a, Vec<CuratedSticker>>;

    /// A curated sticker of this agent with this name, in any loaded set.
    fn find_by_name(&self, agent: &str, name: &str) -> Option<CuratedSticker>;
}

/// Shared handle.
pub(crate) type SharedStickers = Arc<dyn StickerLookup>;

/// No curated stickers at all.
#[derive(Debug, Default)]
pub(crate) struct NoStickers;

impl StickerLookup for NoStickers {
    fn curated<'a>(
        &'a self,
        _persona: &'a Persona,
        _telegram: &'a dyn Telegram,
        _now: Timestamp,
    ) -> BoxFuture<'a, Vec<CuratedSticker>> {
        Box::pin(async { Vec::new() })
    }

    fn find_by_name(&self, _agent: &str, _name: &str) -> Option<CuratedSticker> {
        None
    }
}
