//! Ingress: the one door into the runtime for inbound messages. [`Ingress`] owns the plain
//! runtime handle and runs the admission chain (Telegram's service accounts → owner controls
//! → the source's filters → the group decision) before it queues; every source pushes
//! through it (the MTProto pump's sink, `ctl say`, the playground, the bench, the crash
//! child). It also holds the group gates and the runtime-facing sink the pump delivers to.
//! The runtime imports nothing from here.
//!
//! - `admit`: the chain's vocabulary (a gate, its verdict);
//! - `chain`: [`Ingress`] itself and [`Groups`], every agent's group gate;
//! - `gate`: one agent's group gate (trigger modes, the classifier, share of voice);
//! - `classifier`: the group classifier's LLM call;
//! - `sink`: the pump's sink for one agent.

pub mod admit;
pub mod chain;
pub mod classifier;
pub mod gate;
pub mod sink;

pub use admit::{Admit, InboundGate};
pub use chain::{Groups, Ingress};
