//! Groups: deciding, for every inbound group message, whether the persona speaks, reacts or
//! only listens, at a bounded LLM cost. [`settings`] holds the persona's group headings,
//! [`decide`] the pure pipeline (prefilter, explicit address, mode, share of voice),
//! [`classifier`] the cheap structured-output addressing call, [`gate`] the async edge that
//! runs the pipeline in front of `RuntimeHandle::push_inbound` (classifier calls off the
//! event path, coalesced per chat, fail-closed; reactions; delayed explicit answers),
//! [`export`] reads Telegram Desktop exports and [`replay`] runs one through the pipeline.
//! Nothing here plans or sends text: planning stays with the runtime.

pub mod classifier;
pub mod decide;
pub mod export;
pub mod gate;
pub mod replay;
pub mod settings;
