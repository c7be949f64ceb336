//! Group decisions, pure: [`settings`] holds the persona's group headings, [`decide`] the
//! pipeline (prefilter, explicit address, mode, share of voice) that says, for every inbound
//! group message, whether the persona speaks, reacts or only listens; [`requests`] says, in
//! any of its languages, whether a message asks something. The classifier call is
//! `ingress::classifier` (its request and answer are [`classifier`]); the async edge that runs this in front of the queue is
//! `ingress::gate`; `app::replay` runs it over an export.

pub mod classifier;
pub mod decide;
pub(crate) mod requests;
pub mod settings;
pub mod truth;
